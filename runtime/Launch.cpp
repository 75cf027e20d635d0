//===- Launch.cpp - Autotune, check and launch attention --------*- C++ -*-===//
//
// forward() and backward() share one path (runRequest): the request's
// earlier resolution, else resolve it (validate, check the arguments, find
// the kernel or time the default candidates when autotuning); then check
// the arguments against the kernel that runs and launch each of its launch
// plans with the operands' memref descriptors and TMA tensor maps.
//
//===----------------------------------------------------------------------===//
#include "compiler/KernelCompiler.h"
#include "lib/SplitKv.h"
#include "lib/Strategy/SpecRules.h"
#include "runtime/ArgumentChecks.h"
#include "runtime/Autotune.h"
#include "runtime/CudaDriver.h"
#include "runtime/EventTiming.h"
#include "runtime/RuntimeImpl.h"

#include "llvm/ADT/STLExtras.h"

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace fa {

/// A tuned choice's kernel, loaded: it is launched at once.
static Result prepareAndLoadLocked(Runtime::Impl &impl, const KernelSpec &spec,
                                   std::shared_ptr<KernelEntry> &entry) {
  if (Result r = impl.prepareDefaultedLocked(spec, entry); !r)
    return r;
  return impl.loadLocked(*entry);
}

Result Runtime::Impl::autotuneLocked(const KernelSpec &request, int64_t bucket,
                                     CUstream stream, Launch run,
                                     std::shared_ptr<KernelEntry> &entry) {
  if (assemblerId.empty())
    if (Result r = chooseAssemblerLocked(); !r)
      return r;
  // A choice made before by this runtime (the resolved request is gone
  // after clearMemoryCache; the choice is not), or (disk cache) by another
  // process; a stored choice that does not read back for this request is
  // ignored.
  std::string memoryKey =
      canonicalText(request) + ";bucket=" + std::to_string(bucket);
  if (auto it = tunedChoice.find(memoryKey); it != tunedChoice.end())
    return prepareAndLoadLocked(*this, it->second, entry);
  std::string key =
      autotuneKey(request, bucket, compilerVersion(), assemblerId);
  ++cacheKeysComputed;
  if (options.diskCache) {
    CachedKernel stored;
    std::string why;
    KernelSpec chosen;
    if (disk.read(key, stored, why) == DiskCache::Lookup::hit &&
        parseTunedChoice(stored.metadata, request, bucket, chosen).empty() &&
        prepareAndLoadLocked(*this, chosen, entry)) {
      tunedChoice[memoryKey] = chosen;
      return {};
    }
  }

  // Time the first candidates (a few; and stop once the budget is spent).
  std::vector<KernelSpec> candidates =
      defaultCandidates(request, bucket, mlir::fa::variantTraits(request));
  if (candidates.size() > kAutotuneCandidates)
    candidates.resize(kAutotuneCandidates);
  auto start = std::chrono::steady_clock::now();
  std::vector<TimedCandidate> timings;
  std::shared_ptr<KernelEntry> best;
  double bestMilliseconds = 0.0;
  Result firstError;
  for (const KernelSpec &candidate : candidates) {
    if (timings.size() >= 2 && secondsSince(start) > kAutotuneBudgetSeconds)
      break;
    std::shared_ptr<KernelEntry> shared;
    Result r = prepareAndLoadLocked(*this, candidate, shared);
    double milliseconds = 0.0;
    if (r)
      r = medianMilliseconds(*driver, stream, /*warmups=*/1, kAutotuneRuns,
                             [&] { return run(*shared); }, milliseconds);
    if (!r) {
      if (firstError)
        firstError = r;
      continue;
    }
    timings.push_back({shared->info.spec, milliseconds});
    if (!best || milliseconds < bestMilliseconds) {
      best = shared;
      bestMilliseconds = milliseconds;
    }
  }
  if (!best)
    return firstError ? Result::error(Status::cudaError,
                                      "autotuning found no candidate that "
                                      "runs")
                      : firstError;
  ++tuningsTimed;
  tunedChoice[memoryKey] = best->info.spec;
  // A cache that cannot be written costs the next process a tuning.
  if (options.diskCache)
    disk.write(key, {tunedChoiceJson(key, request, bucket, best->info.spec,
                                     timings),
                     {}});
  entry = best;
  return {};
}

Result Runtime::Impl::launchAll(
    const KernelEntry &entry,
    const std::array<const TensorArg *, kNumOperands> &operands,
    const ProblemExtents &problem, ElementType dtype, CUstream stream) {
  if (Result r = cudaCheck(driver->cuCtxSetCurrent(context), "cuCtxSetCurrent");
      !r)
    return r;
  // A plan read from the cache may name an operand this call does not
  // have (a forward's plan asking for dO, a plan with sinks for a call
  // without): refused before any launch.
  for (const LaunchPlan &plan : entry.info.launches) {
    bool missing = llvm::any_of(plan.params, [&](LaunchPlan::Operand p) {
      return !operands[size_t(p)];
    });
    missing |= llvm::any_of(plan.tensorMaps, [&](const LaunchPlan::TensorMap &m) {
      return !operands[size_t(m.operand)];
    });
    if (missing)
      return Result::error(Status::compileError,
                           entry.info.name + ": the launch plan names an "
                                             "operand this call does not have");
  }
  for (size_t launch = 0; launch < entry.info.launches.size(); ++launch) {
    const LaunchPlan &plan = entry.info.launches[launch];
    // The kernel parameters are the MLIR memref descriptors (allocated and
    // aligned pointer, offset, sizes, strides) of the operands the plan
    // lists; the grid counts the extents it names.
    std::vector<int64_t> words;
    words.reserve(16 * plan.params.size());
    for (LaunchPlan::Operand operand : plan.params) {
      const TensorArg &t = *operands[size_t(operand)];
      int rank = plan.paramRank(operand);
      words.push_back(int64_t(reinterpret_cast<uintptr_t>(t.data)));
      words.push_back(int64_t(reinterpret_cast<uintptr_t>(t.data)));
      words.push_back(0);
      for (int d = 0; d < rank; ++d)
        words.push_back(t.sizes[d]);
      for (int d = 0; d < rank; ++d)
        words.push_back(t.strides[d]);
    }
    // TMA tensor maps (the wgmma strategy's warp-specialized kernels) come
    // first, by value: [B, H, S, D] as dims (D, S, H, B) innermost first,
    // boxes of the plan's size, the swizzle of a box row (128 bytes; 64 for
    // 8-bit rows of 64 bytes), zeros past the end (the inputs in the
    // request's 16-bit type or bytes, the dQ accumulator f32).
    // (CUtensorMap is declared over-aligned; the vector honours it.)
    std::vector<CUtensorMap> maps(plan.tensorMaps.size());
    for (size_t i = 0; i < plan.tensorMaps.size(); ++i) {
      const LaunchPlan::TensorMap &m = plan.tensorMaps[i];
      const TensorArg &t = *operands[size_t(m.operand)];
      std::memset(&maps[i], 0, sizeof(maps[i]));
      if (numElements(t, 4) == 0)
        continue; // no tile of it is ever loaded
      const int64_t elementBytes = m.bytesPerElement();
      // FP8 inputs as bytes (TMA copies them unchanged).
      CUtensorMapDataType elementType =
          elementBytes == 4            ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
          : elementBytes == 1          ? CU_TENSOR_MAP_DATA_TYPE_UINT8
          : dtype == ElementType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                       : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
      cuuint64_t dims[4] = {cuuint64_t(t.sizes[3]), cuuint64_t(t.sizes[2]),
                            cuuint64_t(t.sizes[1]), cuuint64_t(t.sizes[0])};
      // Byte strides of S, H, B; a dimension of size 1 is never stepped, so
      // its stride only has to be valid (a multiple of 16).
      cuuint64_t strides[3];
      for (int d = 0; d < 3; ++d) {
        int dim = 2 - d; // S, H, B
        int64_t stride = t.strides[dim] * elementBytes;
        if (t.sizes[dim] == 1)
          stride = 16;
        strides[d] = cuuint64_t(stride);
      }
      cuuint32_t box[4] = {cuuint32_t(m.boxCols), cuuint32_t(m.boxRows), 1, 1};
      cuuint32_t elementStrides[4] = {1, 1, 1, 1};
      CUresult status = driver->cuTensorMapEncodeTiled(
          &maps[i], elementType, 4, const_cast<void *>(t.data), dims, strides,
          box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
          m.swizzleBytes() == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                 : CU_TENSOR_MAP_SWIZZLE_128B,
          CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (Result r = cudaCheck(status, "cuTensorMapEncodeTiled"); !r)
        return r;
    }
    // Pointers into `words` only once it stops growing.
    std::vector<void *> params;
    for (CUtensorMap &map : maps)
      params.push_back(&map);
    for (int64_t &word : words)
      params.push_back(&word);

    unsigned grid[3];
    bool empty = false;
    if (std::string error = plan.checkLaunch(problem); !error.empty())
      return Result::error(Status::invalidArgument, error);
    std::array<int64_t, 3> blocks = plan.launchGrid(problem, multiprocessors);
    for (int d = 0; d < 3; ++d) {
      grid[d] = unsigned(blocks[d]);
      empty |= grid[d] == 0;
    }
    if (empty)
      continue; // nothing to compute (e.g. no keys: no dK/dV tiles)
    // A kernel that waits for the one before it itself (a split-KV
    // forward's merge on sm_90) may be launched while that one runs: its
    // launch and prologue overlap the parts' last blocks.
    if (plan.dependentLaunch) {
      CUlaunchAttribute overlap;
      std::memset(&overlap, 0, sizeof(overlap));
      overlap.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      overlap.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig config;
      std::memset(&config, 0, sizeof(config));
      config.gridDimX = grid[0];
      config.gridDimY = grid[1];
      config.gridDimZ = grid[2];
      config.blockDimX = unsigned(plan.threads);
      config.blockDimY = config.blockDimZ = 1;
      config.sharedMemBytes = unsigned(plan.sharedBytes);
      config.hStream = stream;
      config.attrs = &overlap;
      config.numAttrs = 1;
      if (Result r = cudaCheck(driver->cuLaunchKernelEx(&config,
                                                        entry.functions[launch],
                                                        params.data(), nullptr),
                               "cuLaunchKernelEx");
          !r)
        return r;
      continue;
    }
    if (Result r = cudaCheck(
            driver->cuLaunchKernel(entry.functions[launch], grid[0], grid[1],
                                   grid[2], unsigned(plan.threads), 1, 1,
                                   unsigned(plan.sharedBytes), stream,
                                   params.data(), nullptr),
            "cuLaunchKernel");
        !r)
      return r;
  }
  return {};
}

/// Whether two specs are the same kernel, field by field.
static bool sameSpec(const KernelSpec &a, const KernelSpec &b) {
  return RequestKey(a, 0, false) == RequestKey(b, 0, false);
}

Result Runtime::Impl::runRequest(const KernelSpec &requested,
                                 int64_t queryLength, int64_t keyLength,
                                 CUstream stream, CheckArguments checkArguments,
                                 Launch launch) {
  auto check = [&](const KernelSpec &spec) {
    ++argumentChecks;
    return checkArguments(spec);
  };
  // The length bucket the defaults are chosen for: a timed choice is made
  // per bucket, and so are the forward's defaults (the wgmma ranking at
  // D = 64); the backward's are not.
  bool tuned = autotune && requested.needsDefaults();
  int64_t bucket = requested.needsDefaults() && (tuned || !requested.backward)
                       ? lengthBucket(queryLength, keyLength)
                       : 0;
  RequestKey key(requested, bucket, tuned);

  // A request seen before: its kernel's spec is valid, and its tiles (the
  // candidate chosen, maybe not the first) decide the grid.
  std::shared_ptr<KernelEntry> kernel;
  bool loaded = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (ResolvedRequest *resolved = findRequestLocked(key)) {
      kernel = resolved->kernel;
      loaded = !kernel->functions.empty();
    }
  }
  if (kernel) {
    if (Result r = check(kernel->info.spec); !r)
      return r;
    if (!driver)
      return Result::error(Status::noDriver, driverError);
    if (!loaded) {
      std::lock_guard<std::mutex> lock(mutex);
      if (Result r = loadLocked(*kernel); !r)
        return r;
    }
    return launch(*kernel);
  }

  // First sight: the arguments are checked against the first default
  // candidate before anything is compiled. withDefaults() leaves an
  // invalid spec as it is; validate() names the field.
  KernelSpec first = requested;
  if (first.arch.empty())
    first.arch = arch;
  first = withDefaults(first, bucket);
  if (std::string error = validateSpec(first); !error.empty())
    return Result::error(Status::invalidArgument, error);
  if (Result r = check(first); !r)
    return r;
  if (!driver)
    return Result::error(Status::noDriver, driverError);
  {
    // Timing runs each candidate with the arguments checked against it.
    std::lock_guard<std::mutex> lock(mutex);
    ResolvedRequest *resolved = nullptr;
    if (Result r = resolveRequestLocked(
            key, requested, stream,
            [&](const KernelEntry &candidate) {
              if (Result r = check(candidate.info.spec); !r)
                return r;
              return launch(candidate);
            },
            resolved);
        !r)
      return r;
    kernel = resolved->kernel;
    if (Result r = loadLocked(*kernel); !r)
      return r;
  }
  // The defaults may have settled on a later candidate (the first spilled,
  // the fastest): its tiles decide the grid.
  if (!sameSpec(kernel->info.spec, first))
    if (Result r = check(kernel->info.spec); !r)
      return r;
  return launch(*kernel);
}

/// The operands forward() and backward() share: Q, K, V, O and LSE.
static std::array<const TensorArg *, kNumOperands>
forwardOperands(const TensorArg &q, const TensorArg &k, const TensorArg &v,
                const TensorArg &o, const TensorArg &lse) {
  std::array<const TensorArg *, kNumOperands> operands{};
  operands[size_t(LaunchPlan::Operand::query)] = &q;
  operands[size_t(LaunchPlan::Operand::key)] = &k;
  operands[size_t(LaunchPlan::Operand::value)] = &v;
  operands[size_t(LaunchPlan::Operand::output)] = &o;
  operands[size_t(LaunchPlan::Operand::lse)] = &lse;
  return operands;
}

/// The call's captured tensors against those every launch of the kernel
/// reads (before anything runs or is written).
static Result checkCaptureOperands(const KernelEntry &entry,
                                   const std::vector<CaptureArg> &captures) {
  for (const LaunchPlan &plan : entry.info.launches)
    if (std::string error = checkCaptures(plan.captures, captures);
        !error.empty())
      return Result::error(Status::invalidArgument,
                           entry.info.name + ": " + error);
  return {};
}

/// The (checked) captured tensors as the kernel's operands.
static void addCaptureOperands(
    const std::vector<CaptureArg> &captures,
    std::array<const TensorArg *, kNumOperands> &operands) {
  for (size_t i = 0; i < captures.size(); ++i)
    operands[size_t(LaunchPlan::captureOperand(int(i)))] = &captures[i].tensor;
}

/// The extents of the problem the tensors hold.
static ProblemExtents problemOf(const TensorArg &q, const TensorArg &k) {
  return {q.sizes[0], q.sizes[1], q.sizes[2], k.sizes[1], k.sizes[2]};
}

bool packQueryGroups(KernelSpec &spec, AttentionArgs &a, bool withSinks) {
  int64_t qHeads = a.q.sizes[1], kvHeads = a.k.sizes[1];
  if (spec.backward || spec.varlen || (spec.sinks && !withSinks) ||
      spec.blockMask || spec.blockMaskProgram || spec.hasVariant() ||
      a.q.sizes[2] != 1 || kvHeads <= 0 || qHeads <= kvHeads ||
      qHeads % kvHeads != 0)
    return false;
  // The shapes the checks would refuse stay as given, to be named; so do
  // LSE heads that are not adjacent (the packed rows of LSE must be).
  if (a.o.sizes[1] != qHeads || a.o.sizes[2] != 1 ||
      a.lse.sizes[1] != qHeads || a.lse.sizes[2] != 1 ||
      a.lse.strides[1] != 1)
    return false;
  int64_t group = qHeads / kvHeads;
  // Query head h * G + g, row 0 -> head h, row g.
  for (TensorArg *t : {&a.q, &a.o, &a.lse}) {
    t->sizes[1] = kvHeads;
    t->sizes[2] = group;
    t->strides[2] = t->strides[1];
    t->strides[1] *= group;
  }
  spec.causal = false;
  // Each row's sink is its query head's: the [Hq] logits read as [Hkv, G].
  spec.sinksPerRow = spec.sinks;
  return true;
}

Result Runtime::forward(const KernelSpec &requestedSpec,
                        const AttentionArgs &given) {
  if (requestedSpec.backward)
    return Result::error(Status::invalidArgument,
                         "forward() runs a forward spec; this one is a "
                         "backward (call backward())");
  KernelSpec requested = requestedSpec;
  AttentionArgs packed;
  bool pack = false;
  if (given.q.sizes[2] == 1) {
    packed = given;
    pack = packQueryGroups(requested, packed, kPackDecodeWithSinks);
  }
  const AttentionArgs &a = pack ? packed : given;
  // A varlen batch's defaults are those of its longest sequence (paged or
  // not); a paged cache's keys are its table's pages.
  int64_t queryLength = requested.varlen ? a.maxSeqlenQ : a.q.sizes[2];
  int64_t keyLength = requested.varlen    ? a.maxSeqlenK
                      : requested.pagedKv ? a.blockTable.sizes[1] * a.k.sizes[2]
                                          : a.k.sizes[2];
  // A decode (a few query rows a head) left to the defaults takes its
  // strategy's decode tiles: its time is the K/V read, which small tiles
  // and many blocks stream fastest, or wider ones where the programs (a
  // query tile a head: the tile holds every query row) are few.
  int64_t batch = requested.varlen ? a.cuSeqlensQ.sizes[0] - 1 : a.q.sizes[0];
  DecodeShape decodeShape{batch * a.q.sizes[1], keyLength,
                          impl->multiprocessors};
  requested = decodeRequest(requested, queryLength,
                            requested.pagedKv ? a.k.sizes[2] : 0, impl->arch,
                            decodeShape);
  // A K/V tile is read from one page where it can be: tiles left to the
  // defaults get the largest block-n of 64, 32, 16 that divides the page;
  // other pages are read row by row.
  requested = fitToPages(requested, a.k.sizes[2], 64);
  int64_t parts = 1;
  if (Result r = impl->chooseForwardParts(requested, a, queryLength,
                                          keyLength, parts);
      !r)
    return r;
  requested.splitKv = parts > 1;
  return impl->runRequest(
      requested, queryLength, keyLength, static_cast<CUstream>(a.stream),
      [&](const KernelSpec &spec) { return checkAttentionArgs(spec, a); },
      [&](const KernelEntry &kernel) {
        return impl->launchForward(kernel, a, parts);
      });
}

Result Runtime::Impl::chooseForwardParts(const KernelSpec &requested,
                                         const AttentionArgs &a,
                                         int64_t queryLength,
                                         int64_t keyLength, int64_t &parts) {
  parts = 1;
  if (std::string error = checkKvParts(a.kvSplits); !error.empty())
    return Result::error(Status::invalidArgument, error);
  if (a.kvSplits >= 1) {
    parts = a.kvSplits;
    return {};
  }
  // The runtime's choice: only where a strategy that splits may serve
  // (an explicit wgmma request keeps its kernel), never with a block mask,
  // and only on a device (its SMs decide).
  if (requested.blockMask || requested.blockMaskProgram ||
      requested.strategy == Strategy::wgmma || multiprocessors <= 0)
    return {};
  // The tiles of the split kernel's first default candidate (an invalid
  // request is left for the checks to name).
  KernelSpec split = requested;
  split.splitKv = true;
  if (split.arch.empty())
    split.arch = arch;
  int64_t bucket = lengthBucket(queryLength, keyLength);
  SplitTiles tiles;
  {
    std::lock_guard<std::mutex> lock(mutex);
    RequestKey key(split, bucket, /*tuned=*/false);
    auto it = splitTiles.find(key);
    if (it == splitTiles.end()) {
      SplitTiles chosen;
      if (validateSpec(split).empty()) {
        KernelSpec resolved = withDefaults(split, bucket);
        chosen = {resolved.blockM, resolved.blockN, residentBlocks(resolved)};
      }
      it = splitTiles.emplace(key, chosen).first;
    }
    tiles = it->second;
  }
  if (tiles.blockM <= 0 || tiles.blockN <= 0)
    return {};
  int64_t batch = requested.varlen ? a.cuSeqlensQ.sizes[0] - 1 : a.q.sizes[0];
  int64_t programs =
      batch * a.q.sizes[1] * ((queryLength + tiles.blockM - 1) / tiles.blockM);
  int64_t keyTiles = (keyLength + tiles.blockN - 1) / tiles.blockN;
  parts =
      chooseKvParts(programs, keyTiles, multiprocessors, tiles.residentBlocks);
  return {};
}

Result Runtime::Impl::launchForward(const KernelEntry &entry,
                                    const AttentionArgs &a, int64_t parts) {
  ProblemExtents problem = problemOf(a.q, a.k);
  if (entry.info.spec.varlen) {
    // One block per sequence and query tile of the longest sequence.
    problem.batch = a.cuSeqlensQ.sizes[0] - 1;
    problem.queryLength = a.maxSeqlenQ;
    problem.keyLength = a.maxSeqlenK;
  }
  if (problem.batch == 0 || problem.queryHeads == 0 ||
      problem.queryLength == 0)
    return {}; // nothing to compute
  std::array<const TensorArg *, kNumOperands> operands =
      forwardOperands(a.q, a.k, a.v, a.o, a.lse);
  if (entry.info.spec.sinks)
    operands[size_t(LaunchPlan::Operand::sinks)] = &a.sinks;
  if (entry.info.spec.blockMask)
    operands[size_t(LaunchPlan::Operand::keyRanges)] = &a.keyRanges;
  if (entry.info.spec.varlen) {
    operands[size_t(LaunchPlan::Operand::cuSeqlensQ)] = &a.cuSeqlensQ;
    operands[size_t(LaunchPlan::Operand::cuSeqlensK)] = &a.cuSeqlensK;
  }
  if (entry.info.spec.kvLens)
    operands[size_t(LaunchPlan::Operand::kvLens)] = &a.kvLens;
  if (entry.info.spec.cacheBatchIndex)
    operands[size_t(LaunchPlan::Operand::cacheBatchIdx)] = &a.cacheBatchIdx;
  if (entry.info.spec.dtype == ElementType::e4m3) {
    operands[size_t(LaunchPlan::Operand::queryDescale)] = &a.qDescale;
    operands[size_t(LaunchPlan::Operand::keyDescale)] = &a.kDescale;
    operands[size_t(LaunchPlan::Operand::valueDescale)] = &a.vDescale;
  }
  if (entry.info.spec.pagedKv) {
    operands[size_t(LaunchPlan::Operand::blockTable)] = &a.blockTable;
    // The grid's keys: the table's pages (the defaults' and the split's
    // length too, in forward()); a varlen batch's longest sequence's.
    if (!entry.info.spec.varlen)
      problem.keyLength = a.blockTable.sizes[1] * a.k.sizes[2];
  }
  if (Result r = checkCaptureOperands(entry, a.captures); !r)
    return r;
  addCaptureOperands(a.captures, operands);
  CUstream stream = static_cast<CUstream>(a.stream);
  if (!entry.info.spec.splitKv)
    return launchAll(entry, operands, problem, entry.info.spec.dtype, stream);

  // Split-KV: every part's output [parts * B, Hq, Sq, D] and LSE [parts *
  // B, Hq, Sq] (B, Sq: Q's, packed for a varlen batch), f32 and
  // contiguous, in one allocation freed in stream order.
  problem.parts = parts;
  int64_t headDim = entry.info.spec.headDim;
  TensorArg partialOutput, partialLse;
  int64_t dims[3] = {parts * a.q.sizes[0], a.q.sizes[1], a.q.sizes[2]};
  for (int d = 0; d < 3; ++d)
    partialOutput.sizes[d] = partialLse.sizes[d] = dims[d];
  partialOutput.sizes[3] = headDim;
  partialOutput.strides[3] = 1;
  partialOutput.strides[2] = headDim;
  partialOutput.strides[1] = dims[2] * headDim;
  partialOutput.strides[0] = dims[1] * dims[2] * headDim;
  partialLse.strides[2] = 1;
  partialLse.strides[1] = dims[2];
  partialLse.strides[0] = dims[1] * dims[2];
  size_t rows = size_t(dims[0]) * size_t(dims[1]) * size_t(dims[2]);
  size_t lseOffset = (rows * size_t(headDim) * 4 + 255) / 256 * 256;
  if (Result r = cudaCheck(driver->cuCtxSetCurrent(context), "cuCtxSetCurrent");
      !r)
    return r;
  CUdeviceptr workspace = 0;
  if (Result r = cudaCheck(
          driver->cuMemAllocAsync(&workspace, lseOffset + rows * 4, stream),
          "cuMemAllocAsync (the split-KV parts' workspace)");
      !r)
    return r;
  partialOutput.data = reinterpret_cast<const void *>(workspace);
  partialLse.data = reinterpret_cast<const void *>(workspace + lseOffset);
  operands[size_t(LaunchPlan::Operand::partialOutput)] = &partialOutput;
  operands[size_t(LaunchPlan::Operand::partialLse)] = &partialLse;
  Result launched =
      launchAll(entry, operands, problem, entry.info.spec.dtype, stream);
  Result freed = cudaCheck(driver->cuMemFreeAsync(workspace, stream),
                           "cuMemFreeAsync (the split-KV parts' workspace)");
  return launched ? freed : launched;
}

Result Runtime::backward(const KernelSpec &requestedForward,
                         const AttentionBackwardArgs &a) {
  KernelSpec requested = requestedForward;
  requested.backward = true;
  // A varlen batch's defaults are those of its longest sequence.
  int64_t queryLength = requested.varlen ? a.maxSeqlenQ : a.q.sizes[2];
  int64_t keyLength = requested.varlen ? a.maxSeqlenK : a.k.sizes[2];
  return impl->runRequest(
      requested, queryLength, keyLength, static_cast<CUstream>(a.stream),
      [&](const KernelSpec &spec) {
        return checkAttentionBackwardArgs(spec, a);
      },
      [&](const KernelEntry &kernel) {
        return impl->launchBackward(kernel, a);
      });
}

Result Runtime::Impl::launchBackward(const KernelEntry &entry,
                                     const AttentionBackwardArgs &a) {
  // The kernel's tiles decide the size of the turn counters.
  const KernelSpec &spec = entry.info.spec;
  ProblemExtents problem = problemOf(a.q, a.k);
  if (spec.varlen) {
    // Blocks per sequence and tile of the longest sequence (the workspaces
    // below are the packed tensors' shape all the same).
    problem.batch = a.cuSeqlensQ.sizes[0] - 1;
    problem.queryLength = a.maxSeqlenQ;
    problem.keyLength = a.maxSeqlenK;
  }
  if (problem.queryHeads == 0)
    return {}; // nothing to compute
  if (Result r = checkCaptureOperands(entry, a.captures); !r)
    return r;
  const CudaDriver &driver = *this->driver;
  CUstream stream = static_cast<CUstream>(a.stream);
  if (Result r = cudaCheck(driver.cuCtxSetCurrent(context),
                                 "cuCtxSetCurrent");
      !r)
    return r;
  // Sinks: their gradient is added to, program by program, from zero (and
  // is zero for an empty batch; the deterministic mode stores it).
  if (spec.sinks)
    if (Result r = cudaCheck(
            driver.cuMemsetD32Async(
                reinterpret_cast<CUdeviceptr>(a.gradSinks.data), 0,
                size_t(problem.queryHeads), stream),
            "cuMemsetD32Async (the sinks' gradient)");
        !r)
      return r;
  if (problem.batch == 0)
    return {}; // nothing more to compute

  // Workspaces: D [B, Hq, Sq] and the dQ accumulator [B, chains * Hq, Sq,
  // D] (Q's rows: a varlen batch's packed ones; the deterministic mode's
  // dq_chains copies of the heads), f32 and contiguous, allocated and freed
  // in stream order (one allocation; the driver's pool reuses it across
  // calls).
  int64_t queryRows = a.q.sizes[2];
  int64_t rows = a.q.sizes[0] * problem.queryHeads * queryRows;
  int64_t chains = spec.dqChainsOrOne();
  int64_t headDim = spec.headDim;
  TensorArg delta, dqAccum;
  for (int d = 0; d < 3; ++d)
    delta.sizes[d] = dqAccum.sizes[d] = a.q.sizes[d];
  dqAccum.sizes[1] = chains * problem.queryHeads;
  dqAccum.sizes[3] = headDim;
  dqAccum.strides[3] = 1;
  dqAccum.strides[2] = headDim;
  dqAccum.strides[1] = queryRows * headDim;
  dqAccum.strides[0] = chains * problem.queryHeads * queryRows * headDim;
  delta.strides[2] = 1;
  delta.strides[1] = queryRows;
  delta.strides[0] = problem.queryHeads * queryRows;
  // Deterministic: the turn counters [B, chains * Hq, query tiles], i32.
  TensorArg dqOrder;
  int64_t qTiles = (problem.queryLength + spec.blockM - 1) / spec.blockM;
  dqOrder.sizes[0] = problem.batch;
  dqOrder.sizes[1] = chains * problem.queryHeads;
  dqOrder.sizes[2] = qTiles;
  dqOrder.strides[2] = 1;
  dqOrder.strides[1] = qTiles;
  dqOrder.strides[0] = chains * problem.queryHeads * qTiles;
  // Deterministic with sinks: each query tile's share of their gradient,
  // f32 [B, Hq, query tiles].
  TensorArg sinkShares = dqOrder;
  sinkShares.sizes[1] = problem.queryHeads;
  sinkShares.strides[0] = problem.queryHeads * qTiles;
  // Offsets in the allocation: D first, then the accumulator, the counters
  // and the shares, each 256-byte aligned.
  auto align = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  size_t sharesBytes =
      size_t(problem.batch) * size_t(problem.queryHeads) * size_t(qTiles) * 4;
  size_t orderBytes = size_t(chains) * sharesBytes;
  size_t accumOffset = align(size_t(rows) * 4);
  size_t orderOffset =
      align(accumOffset + size_t(chains) * size_t(rows) * size_t(headDim) * 4);
  size_t sharesOffset = align(orderOffset + orderBytes);
  size_t bytes = !spec.deterministic ? orderOffset
                 : spec.sinks        ? sharesOffset + sharesBytes
                                     : orderOffset + orderBytes;
  CUdeviceptr workspace = 0;
  if (rows > 0) {
    if (Result r = cudaCheck(
            driver.cuMemAllocAsync(&workspace, bytes, stream),
            "cuMemAllocAsync (the backward's workspace)");
        !r)
      return r;
    delta.data = reinterpret_cast<const void *>(workspace);
    dqAccum.data = reinterpret_cast<const void *>(workspace + accumOffset);
    dqOrder.data = reinterpret_cast<const void *>(workspace + orderOffset);
    sinkShares.data = reinterpret_cast<const void *>(workspace + sharesOffset);
  }
  std::array<const TensorArg *, kNumOperands> operands =
      forwardOperands(a.q, a.k, a.v, a.o, a.lse);
  operands[size_t(LaunchPlan::Operand::gradOutput)] = &a.gradOutput;
  operands[size_t(LaunchPlan::Operand::gradQuery)] = &a.gradQuery;
  operands[size_t(LaunchPlan::Operand::gradKey)] = &a.gradKey;
  operands[size_t(LaunchPlan::Operand::gradValue)] = &a.gradValue;
  operands[size_t(LaunchPlan::Operand::delta)] = &delta;
  operands[size_t(LaunchPlan::Operand::dqAccum)] = &dqAccum;
  operands[size_t(LaunchPlan::Operand::dqOrder)] = &dqOrder;
  if (spec.sinks) {
    operands[size_t(LaunchPlan::Operand::sinks)] = &a.sinks;
    operands[size_t(LaunchPlan::Operand::gradSinks)] = &a.gradSinks;
    operands[size_t(LaunchPlan::Operand::sinkShares)] = &sinkShares;
  }
  if (spec.blockMask)
    operands[size_t(LaunchPlan::Operand::queryRanges)] = &a.queryRanges;
  if (spec.blockMask && spec.deterministic)
    operands[size_t(LaunchPlan::Operand::keyRanges)] = &a.keyRanges;
  if (spec.varlen) {
    operands[size_t(LaunchPlan::Operand::cuSeqlensQ)] = &a.cuSeqlensQ;
    operands[size_t(LaunchPlan::Operand::cuSeqlensK)] = &a.cuSeqlensK;
  }
  addCaptureOperands(a.captures, operands);
  Result launched =
      launchAll(entry, operands, problem, spec.dtype, stream);
  if (workspace) {
    Result freed = cudaCheck(driver.cuMemFreeAsync(workspace, stream),
                                   "cuMemFreeAsync (the backward's workspace)");
    if (launched && !freed)
      return freed;
  }
  return launched;
}

Result Runtime::computeBlockMask(const KernelSpec &spec,
                                 const BlockMaskArgs &a) {
  // The program depends on the mask alone.
  KernelSpec program;
  program.blockMaskProgram = true;
  program.maskMod = spec.maskMod;
  program.causal = spec.causal;
  program.arch = spec.arch;
  return impl->runRequest(
      program, a.q.sizes[2], a.k.sizes[2], static_cast<CUstream>(a.stream),
      [&](const KernelSpec &) { return checkBlockMaskArgs(a); },
      [&](const KernelEntry &kernel) -> Result {
        if (Result r = checkCaptureOperands(kernel, a.captures); !r)
          return r;
        // The tables' heads are the programs' (1: head 0 for all).
        ProblemExtents problem = problemOf(a.q, a.k);
        problem.queryHeads = a.keyRanges.sizes[1];
        std::array<const TensorArg *, kNumOperands> operands{};
        operands[size_t(LaunchPlan::Operand::query)] = &a.q;
        operands[size_t(LaunchPlan::Operand::key)] = &a.k;
        operands[size_t(LaunchPlan::Operand::keyRanges)] = &a.keyRanges;
        operands[size_t(LaunchPlan::Operand::queryRanges)] = &a.queryRanges;
        addCaptureOperands(a.captures, operands);
        return impl->launchAll(kernel, operands, problem, spec.dtype,
                               static_cast<CUstream>(a.stream));
      });
}

} // namespace fa
