//===- WgmmaModel.cpp - Resource model of the wgmma strategy ----*- C++ -*-===//
#include "lib/Strategy/WgmmaModel.h"
#include "lib/Strategy/Registry.h"
#include "lib/Strategy/Candidates.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <optional>

namespace fa::wgmma {

/// Registers beyond the fragments (descriptors, addresses, loop state).
static constexpr int64_t kRegisterOverhead = 24;

SharedLayout sharedLayout(const Config &c) {
  SharedLayout layout;
  int64_t rowBytes = c.headDim * c.elementBytes;
  layout.qOffset = 0;
  layout.kOffset = c.blockM * rowBytes;
  layout.kvSlotBytes = c.blockN * rowBytes;
  layout.vOffset = layout.kOffset + c.stages * layout.kvSlotBytes;
  int64_t end = layout.vOffset + c.stages * layout.kvSlotBytes;
  if (c.elementBytes == 1) {
    layout.transposedValueOffset = end;
    layout.transposedValueSlots =
        std::max(kTransposedValueRingSlots, c.numWarps / kWarpsPerWarpgroup);
    end += layout.transposedValueSlots * layout.kvSlotBytes;
  }
  layout.totalBytes = end + kSwizzleAtomBytes;
  return layout;
}

bool runsPersistent(int64_t headDim, int64_t numWarps) {
  return headDim <= 128 && numWarps <= 8;
}

int64_t entryRegisters(int64_t threads) {
  return std::min<int64_t>(255, kRegistersPerBlock / threads) / 8 * 8;
}

bool producerTransposesValue(const Config &config) {
  return kProducerTransposesValue && config.elementBytes == 1 &&
         config.headDim == 128 && config.stages >= 2;
}

int64_t producerRegisters(bool persistent, bool transposesValue,
                          bool writerWarp, bool stagedRowValues) {
  if (transposesValue)
    return 56;
  if (stagedRowValues)
    return 40;
  if (writerWarp)
    return 32;
  return persistent ? 40 : 24;
}

std::optional<bool> takesWriterWarp(const std::string &writerWarp,
                                    bool deterministic, bool ragged,
                                    bool readsTables) {
  std::optional<bool> takes;
  if (writerWarp == "none")
    takes = false;
  else if (writerWarp == "deterministic")
    takes = deterministic;
  else if (writerWarp == "every" || writerWarp == "all")
    takes = true;
  bool tablesTakeIt =
      deterministic ? kWriterWarpForDeterministicTables : kWriterWarpForTables;
  if (takes && writerWarp != "all" &&
      ((ragged && !kWriterWarpForRagged) || (readsTables && !tablesTakeIt)))
    takes = false;
  return takes;
}

int64_t consumerRegisters(int64_t numWarps, bool persistent,
                          bool transposesValue, bool writerWarp,
                          bool stagedRowValues) {
  int64_t consumerThreads = 32 * numWarps;
  int64_t entry = entryRegisters(consumerThreads + kWarpgroupThreads);
  int64_t released = (entry - producerRegisters(persistent, transposesValue,
                                                writerWarp, stagedRowValues)) *
                     kWarpgroupThreads;
  int64_t perThread = entry + released / consumerThreads;
  return std::min<int64_t>(240, perThread / 8 * 8);
}

int64_t estimateRegisters(const Config &c) {
  int64_t o = c.headDim / 2, s = c.blockN / 2;
  int64_t previousP = overlapsSoftmax(c.headDim) ? c.blockN / 4 : 0;
  return o + s + previousP + 2 * 3 + kRegisterOverhead;
}

bool overlapsSoftmax(int64_t headDim) { return headDim <= 128; }

bool waitsAfterSoftmax(int64_t consumerWarps) {
  return kWaitAfterSoftmax && consumerWarps <= 2 * kWarpsPerWarpgroup;
}

bool takesProblem(ElementType dtype, int64_t headDim,
                  const std::string &arch) {
  // FP8: head dims in rows of 64 bytes (64-byte swizzle) or 128.
  return dtype != ElementType::f32 && headDim > 0 &&
         headDim % kColumnBlock == 0 && headDim <= kMaxHeadDim &&
         arch == "sm_90a";
}

std::string checkSpec(const KernelSpec &spec) {
  auto text = [](int64_t v) { return std::to_string(v); };
  if (spec.dtype == ElementType::f32)
    return "the wgmma strategy computes on f16 or bf16 inputs, got f32 (use "
           "the simt strategy)";
  if (spec.headDim % kColumnBlock != 0 || spec.headDim > kMaxHeadDim)
    return "the wgmma strategy needs a head dim that is a multiple of 64 and "
           "at most " +
           text(kMaxHeadDim) + ", got " + text(spec.headDim) +
           " (use the mma strategy)";
  if (spec.arch != "sm_90a")
    return "the wgmma strategy needs arch sm_90a (wgmma exists only there), "
           "got " +
           spec.arch;
  if (spec.stages < 0 || spec.stages > kMaxStages)
    return "stages must be in [1, " + text(kMaxStages) +
           "] for the wgmma strategy (0 = default), got " + text(spec.stages);
  return "";
}

/// "block-m=.. block-n=.. head-dim=.. num-warps=.. stages=..", for the
/// messages of checkFits and checkBackwardFits.
static std::string describe(const Config &c) {
  auto text = [](int64_t v) { return std::to_string(v); };
  return "block-m=" + text(c.blockM) + " block-n=" + text(c.blockN) +
         " head-dim=" + text(c.headDim) + " num-warps=" + text(c.numWarps) +
         " stages=" + text(c.stages);
}

/// The rules every wgmma config keeps, forward or backward: the arch, and
/// then (after the warps) the stages; "" when they hold.
static std::string checkArch(const GpuArch &arch) {
  if (arch.name != "sm_90a")
    return "the wgmma strategy needs arch sm_90a, got " +
           std::string(arch.name);
  return "";
}
static std::string checkStages(const Config &c) {
  if (c.stages < 1 || c.stages > kMaxStages)
    return "stages must be in [1, " + std::to_string(kMaxStages) +
           "], got " + std::to_string(c.stages);
  return "";
}

std::string checkFits(const Config &c, const GpuArch &arch) {
  auto text = [](int64_t v) { return std::to_string(v); };
  std::string config = describe(c);
  if (std::string error = checkArch(arch); !error.empty())
    return error;
  if (c.numWarps < kWarpsPerWarpgroup || c.numWarps > 16 ||
      c.numWarps % kWarpsPerWarpgroup != 0)
    return "wgmma placement (" + config +
           "): num-warps must be 4, 8, 12 or 16 (whole warpgroups)";
  if (std::string error = checkStages(c); !error.empty())
    return error;
  if (c.headDim % kColumnBlock != 0 || c.headDim < kColumnBlock ||
      c.headDim > kMaxHeadDim)
    return "wgmma placement (" + config +
           "): the head dim must be a multiple of 64 up to " +
           text(kMaxHeadDim);
  if (c.blockM != kWarpgroupRows * (c.numWarps / kWarpsPerWarpgroup))
    return "wgmma placement (" + config + "): block-m must be 64 x " +
           "warpgroups = " +
           text(kWarpgroupRows * (c.numWarps / kWarpsPerWarpgroup)) +
           " (each warpgroup owns 64 query rows)";
  if (c.blockN % 16 != 0 || c.blockN < 16 || c.blockN > kMaxN)
    return "wgmma placement (" + config +
           "): block-n must be a multiple of 16 up to " + text(kMaxN) +
           " (the N of Q K^T, and whole k16 steps of P V)";
  if (c.elementBytes == 1 && c.blockN % 128 != 0)
    return "wgmma placement (" + config +
           "): 8-bit block-n must be a multiple of 128 (V's transposed copy "
           "holds the keys along 128-byte swizzled rows)";
  int64_t available = arch.maxSharedMemoryPerBlock - kStaticSharedMemoryReserve;
  int64_t shared = sharedLayout(c).totalBytes;
  if (shared > available)
    return "wgmma placement (" + config + ") needs " + text(shared) +
           " bytes of shared memory per block, over the " + text(available) +
           " bytes available on " + std::string(arch.name);
  return "";
}

/// A block mask's forward: measured the fastest tile at head dims 64 and
/// 128 (defaultCandidates, toleratedSpillBytes).
static constexpr TileConfig kBlockMaskForwardTile = {192, 64, 12, 2};

std::vector<KernelSpec> defaultCandidates(const KernelSpec &request,
                                          size_t limit, int64_t length,
                                          const VariantTraits &traits) {
  if (request.blockM && request.blockN && request.numWarps && request.stages)
    return {request};
  // Best first, per head dim, as measured on the H200 at S = 4k
  // (bench/sweep_mma.py --strategy wgmma, docs/benchmarks.md): three
  // consumer warpgroups at D = 64 (their registers suffice), two with
  // 128-wide K/V tiles at D = 128, and one K/V stage of 128 rows at D = 256
  // (635 vs 547 TFLOP/s for two stages of 64).
  static constexpr TileConfig kSmallHeads[] = {
      {192, 128, 12, 2}, {128, 128, 8, 2}, {128, 64, 8, 2}};
  // Up to 1k the two-warpgroup tiles win at D = 64: 192-row tiles leave the
  // last of S/192 a third full, and two warpgroups run persistent, hiding
  // the next tile's Q and first K/V behind this one's epilogue (causal
  // 1k: 285 vs 241 TFLOP/s, 512: 206 vs 171; non-causal 2k already favours
  // the 12 warps, 431 vs 397).
  static constexpr TileConfig kSmallHeadsShort[] = {
      {128, 128, 8, 2}, {192, 128, 12, 2}, {128, 64, 8, 2}};
  static constexpr TileConfig kMediumHeads[] = {
      {128, 128, 8, 2}, {128, 64, 8, 2}, {128, 128, 8, 1}};
  // A block mask's bounds per row (and its mask_mod's captures) leave the
  // wide tiles spilling (D = 128, causal: 128 x 128 572 bytes stored and
  // loaded). Measured on packed documents (docs/benchmarks.md (ai)): 192 x
  // 64 on three warpgroups is the fastest at both head dims, causal or not,
  // 4k and 16k (D 128: 12-13% over 128 x 64 and 192 x 32, spilling 52-96
  // bytes: toleratedSpillBytes; D 64: 3-12% over 128 x 128 without the
  // causal mask, which spills with it). The no-spill tiles follow, so a
  // cold default compiles one or two candidates.
  static constexpr TileConfig kSmallHeadsTables[] = {
      kBlockMaskForwardTile, {128, 128, 8, 2}, {192, 128, 12, 2}};
  static constexpr TileConfig kMediumHeadsTables[] = {kBlockMaskForwardTile,
                                                      {128, 64, 8, 2},
                                                      {192, 32, 12, 2},
                                                      {128, 128, 8, 2}};
  // Capture loads indexed by the key (the keys' document ids, a bias
  // column: a value a key column a thread holds) leave the wide tiles
  // spilling (ptxas 13.0, causal or not, mask_mod or score_mod): at D =
  // 64 192 x 128 on three warpgroups, at D = 128 128 x 128 (72-272 bytes);
  // the tiles the runtime took after those trial compiles come first
  // (docs/benchmarks.md (ax), (ay)). A block mask's forward keeps its own
  // measured ranking (the tables above).
  static constexpr TileConfig kSmallHeadsKeyCaptures[] = {
      {128, 128, 8, 2}, {128, 64, 8, 2}, {192, 128, 12, 2}};
  static constexpr TileConfig kMediumHeadsKeyCaptures[] = {
      {128, 64, 8, 2}, {128, 128, 8, 2}, {128, 128, 8, 1}};
  static constexpr TileConfig kLargeHeads[] = {
      {128, 128, 8, 1}, {128, 64, 8, 2}, {128, 64, 8, 1}};
  bool shortSequences = length > 0 && length <= kShortLength;
  llvm::ArrayRef<TileConfig> ranked = kLargeHeads;
  bool keyCaptures = traits.keyIndexedCaptures && !request.blockMask;
  if (request.headDim <= 64)
    ranked = request.blockMask ? kSmallHeadsTables
             : keyCaptures     ? kSmallHeadsKeyCaptures
             : shortSequences  ? kSmallHeadsShort
                               : kSmallHeads;
  else if (request.headDim <= 128)
    ranked = request.blockMask ? llvm::ArrayRef<TileConfig>(kMediumHeadsTables)
             : keyCaptures ? llvm::ArrayRef<TileConfig>(kMediumHeadsKeyCaptures)
                           : llvm::ArrayRef<TileConfig>(kMediumHeads);
  std::optional<GpuArch> arch = lookupGpuArch(request.arch);
  CandidateCollector collector(request, limit, [&](const TileConfig &t) {
    Config config{request.headDim, t.blockM, t.blockN,
                  t.numWarps,      t.stages, fa::elementBytes(request.dtype)};
    return arch && checkFits(config, *arch).empty() &&
           estimateRegisters(config) <=
               consumerRegisters(t.numWarps,
                                 runsPersistent(request.headDim, t.numWarps),
                                 producerTransposesValue(config));
  });
  for (const TileConfig &config : ranked)
    collector.consider(config);
  for (int64_t stages : {2, 1, 3})
    for (int64_t warps : {8, 4, 12})
      for (int64_t bn : {128, 64, 32, 16})
        collector.consider({16 * warps, bn, warps, stages});
  // Nothing fits (the compiler will say why): one warpgroup.
  int64_t warps = request.numWarps ? request.numWarps : 4;
  return std::move(collector).take({16 * warps, 64, warps, 1});
}

int64_t toleratedSpillBytes(const KernelSpec &candidate) {
  // The 16-bit block-mask forward at D 128 on 192 x 64 tiles (12 warps, two
  // stages) spills 52 (no causal mask) or 96 bytes (causal) of its hoisted
  // mask captures and runs 12-13% faster than the tiles that do not spill
  // (docs/benchmarks.md (ai)). More than this is not what was measured.
  constexpr int64_t kBlockMaskForwardSpills = 128;
  bool blockMaskForward = candidate.blockMask && !candidate.backward;
  if (hasTiles(candidate, kBlockMaskForwardTile) && blockMaskForward &&
      candidate.headDim == 128 && fa::elementBytes(candidate.dtype) == 2)
    return kBlockMaskForwardSpills;
  return 0;
}

bool expectsTrials(const KernelSpec &request, const VariantTraits &traits) {
  // The 16-bit backward at D 128 with a capture load indexed by the key:
  // its dK/dV consumers (at setmaxnreg 240) spill 20-100 bytes on every
  // Q/dO stage count in three of the four variants measured, and the
  // fewest bytes fall on different counts (docs/benchmarks.md (ay)).
  return request.backward && traits.keyIndexedCaptures &&
         request.headDim > 64 && fa::elementBytes(request.dtype) == 2;
}

BackwardSharedLayout backwardSharedLayout(const Config &c,
                                          StagingBuffers buffers) {
  BackwardSharedLayout layout;
  int64_t rowBytes = c.headDim * c.elementBytes;
  layout.kOffset = 0;
  layout.vOffset = c.blockN * rowBytes;
  layout.qOffset = 2 * c.blockN * rowBytes;
  layout.gradOutputOffset = layout.qOffset + c.stages * c.blockM * rowBytes;
  layout.probsOffset =
      layout.gradOutputOffset + c.stages * c.blockM * rowBytes;
  int64_t stagedBytes = c.blockM * c.blockN * c.elementBytes;
  layout.gradScoresOffset = layout.probsOffset + buffers.probs * stagedBytes;
  layout.gradQueryOffset =
      layout.gradScoresOffset + buffers.gradScores * stagedBytes;
  int64_t end = layout.gradQueryOffset + c.blockM * c.headDim * 4;
  if (buffers.rowValues) {
    int64_t ringBytes = c.stages * c.blockM * 4;
    layout.logSumExpOffset = end;
    layout.deltaOffset = end + ringBytes;
    end += 2 * ringBytes;
  }
  layout.totalBytes = end + kSwizzleAtomBytes;
  return layout;
}

std::optional<StagingBuffers>
backwardStagingBuffers(const Config &c, const std::string &mode,
                       int64_t availableSharedBytes, bool rowValues) {
  StagingBuffers buffers;
  buffers.rowValues = rowValues;
  if (mode == "grad-scores" || mode == "both")
    buffers.gradScores = 2;
  else if (mode != "none")
    return std::nullopt;
  if (mode == "both")
    buffers.probs = 2;
  auto fits = [&] {
    return backwardSharedLayout(c, buffers).totalBytes <= availableSharedBytes;
  };
  if (!fits())
    buffers.probs = 1;
  if (!fits())
    buffers.gradScores = 1;
  if (!fits())
    buffers.rowValues = false;
  return buffers;
}

std::string rotatedStaging(const Config &c) {
  return c.headDim == 64 ? kRotatedStaging : "none";
}

int64_t backwardWarpgroups(const Config &c) {
  return c.numWarps / kWarpsPerWarpgroup;
}

bool transposesScores(const Config &) {
  // 5-10% slower than the untransposed program at D 64 on the H100
  // (docs/benchmarks.md (y)): taken only where asked for (fa-place-wgmma's
  // transposed-scores=1).
  return false;
}

bool stagesRowValues(const Config &, bool transposedScores, bool readsTables) {
  return kStagedRowValues && !transposedScores && !readsTables;
}

RowValuePrefetch prefetchedRowValues(const Config &c, bool plainProgram,
                                     bool transposedScores) {
  if (transposedScores)
    return RowValuePrefetch::none;
  if (c.headDim <= 64)
    return RowValuePrefetch::both;
  return plainProgram ? RowValuePrefetch::logSumExp : RowValuePrefetch::none;
}

int64_t estimateBackwardRegisters(const Config &c) {
  int64_t warpgroups = std::max<int64_t>(1, backwardWarpgroups(c));
  int64_t gradients = 2 * (kWarpgroupRows * c.headDim / kWarpgroupThreads);
  int64_t scores = c.blockM * (c.blockN / warpgroups) / kWarpgroupThreads;
  // P replaces S and dS replaces dP: two tiles of scores live at once.
  return gradients + 2 * scores + 2 * 2 + kRegisterOverhead;
}

std::string checkBackwardFits(const Config &c, const GpuArch &arch) {
  auto text = [](int64_t v) { return std::to_string(v); };
  std::string config = describe(c);
  if (std::string error = checkArch(arch); !error.empty())
    return error;
  if (c.numWarps < kWarpsPerWarpgroup || c.numWarps > 8 ||
      c.numWarps % kWarpsPerWarpgroup != 0)
    return "wgmma backward placement (" + config +
           "): num-warps must be 4 or 8 (one or two warpgroups)";
  if (std::string error = checkStages(c); !error.empty())
    return error;
  // dK and dV take head-dim registers each per thread of a warpgroup.
  if (c.headDim % kColumnBlock != 0 || c.headDim < kColumnBlock ||
      c.headDim > 128)
    return "wgmma backward placement (" + config +
           "): the head dim must be 64 or 128 (dK and dV of a warpgroup's "
           "64 rows take head-dim registers each per thread)";
  int64_t warpgroups = backwardWarpgroups(c);
  if (c.blockN != kWarpgroupRows * warpgroups)
    return "wgmma backward placement (" + config +
           "): block-n must be 64 x warpgroups = " +
           text(kWarpgroupRows * warpgroups) +
           " (each warpgroup owns 64 rows of dK and dV)";
  if (c.blockM != kWarpgroupRows)
    return "wgmma backward placement (" + config +
           "): block-m must be 64 (S, dP and dQ are one m64 wgmma, the "
           "warpgroups split their columns)";
  int64_t available = arch.maxSharedMemoryPerBlock - kStaticSharedMemoryReserve;
  int64_t shared = backwardSharedLayout(c).totalBytes;
  if (shared > available)
    return "wgmma backward placement (" + config + ") needs " + text(shared) +
           " bytes of shared memory per block, over the " + text(available) +
           " bytes available on " + std::string(arch.name);
  return "";
}

bool takesBackwardProblem(ElementType dtype, int64_t headDim,
                          const std::string &arch) {
  // Measured on the H200 (docs/benchmarks.md, 2026-12-01 (c)): 1.2-1.4x
  // the mma backward on every row of the table at head dims 64 and 128.
  return dtype != ElementType::f32 && (headDim == 64 || headDim == 128) &&
         arch == "sm_90a";
}

std::vector<KernelSpec> backwardCandidates(KernelSpec request, size_t limit) {
  if (request.deterministic && request.dqChains == 0)
    request.dqChains = kDeterministicDqChains;
  if (request.blockM && request.blockN && request.numWarps && request.stages)
    return {request};
  std::optional<GpuArch> arch = lookupGpuArch(request.arch);
  CandidateCollector collector(request, limit, [&](const TileConfig &t) {
    Config config{request.headDim, t.blockM, t.blockN, t.numWarps, t.stages, 2};
    return arch && checkBackwardFits(config, *arch).empty();
  });
  // Best first, as measured on the H200 (bench/bench_backward.py
  // --configs, docs/benchmarks.md, 2026-12-01 (d)): two warpgroups with
  // the TMA producer and three Q/dO stages (1-3% over two at D = 64, about
  // even at D = 128; one stage is 3-9% slower). One warpgroup (64 K/V rows)
  // measured 25-40% slower: it is not a default, so that a spill of the
  // two-warpgroup tiles (the runtime skips spilling candidates) does not
  // fall back to it.
  // A varlen batch's program at head dim 64 with the writer warp (the
  // consumers at 232 registers): three stages spill (8 bytes, ptxas 13.0)
  // and the runtime took two after compiling both; two first compiles one.
  bool raggedWriter =
      request.varlen &&
      takesWriterWarp(kWriterWarp, request.deterministic, /*ragged=*/true)
          .value_or(false);
  std::vector<int64_t> stageOrder = {3, 2, 1};
  if (raggedWriter && request.headDim == 64)
    stageOrder = {2, 3, 1};
  for (int64_t stages : stageOrder)
    collector.consider({64, 128, 8, stages});
  return std::move(collector).take({64, 128, 8, 1});
}

/// Warpgroup MMA on sm_90a: 16-bit inputs, forward and backward.
const StrategyModel &model() {
  static const StrategyModel entry{
      Strategy::wgmma,
      "wgmma",
      [](const KernelSpec &spec) -> std::string {
        if (std::string error = checkSpec(spec); !error.empty())
          return error;
        if (spec.backward && spec.headDim > 128)
          return "the wgmma backward needs a head dim of 64 or 128, got " +
                 std::to_string(spec.headDim) +
                 " (dK and dV of a warpgroup's 64 rows take head-dim "
                 "registers each per thread; use the mma or simt strategy)";
        // A TMA box reads rows of one page: the tile must lie in one.
        if (spec.pagedKv && spec.pageGather)
          return "the wgmma forward reads a paged KV cache a tile per page "
                 "(block-n dividing the page size), not row by row "
                 "(page_gather: use the mma or simt strategy)";
        return "";
      },
      [](const KernelSpec &spec) {
        // A paged cache (a tile a page) and split-KV: a prefill is faster
        // on wgmma (1.07-1.96x mma, bench_prefill.py on the H100 with
        // pages of 64 and 256, docs/benchmarks.md (y)); a decode takes
        // mma's decode tiles (decodeRequest: wgmma has none). What was not
        // measured stays on mma: row-by-row pages, tiles of fewer than 64
        // keys (pages of 16, 32, 48: fitToPages), a paged or split varlen
        // batch, split-KV with cache_batch_idx.
        bool unmeasuredPages =
            spec.pagedKv && (spec.pageGather || spec.varlen ||
                             (spec.blockN != 0 && spec.blockN < 64));
        bool unmeasuredSplit =
            spec.splitKv && (spec.varlen || spec.cacheBatchIndex);
        if (unmeasuredPages || unmeasuredSplit)
          return false;
        return spec.backward
                   ? takesBackwardProblem(spec.dtype, spec.headDim, spec.arch)
                   : takesProblem(spec.dtype, spec.headDim, spec.arch);
      },
      [](const KernelSpec &request, size_t limit, int64_t length,
         const VariantTraits &traits) {
        return request.backward
                   ? backwardCandidates(request, limit)
                   : defaultCandidates(request, limit, length, traits);
      },
      /*pipelined=*/true,
      /*lowersBackward=*/true,
      kInputAccessElements,
      kOutputAccessElements,
      /*tensorMapInputs=*/true,
      /*abiCode=*/3,
      /*blockedRegisterTiles=*/false,
      /*warpSpecialized=*/true,
      /*sharedRowChunkBytes=*/0,
      /*sweepGrid=*/{{64, 128}, {32, 64, 128}, {4, 8}, {1, 2}},
      /*decodeTiles=*/nullptr,
      /*referenceTiles=*/nullptr,
      toleratedSpillBytes,
      /*residentBlocks=*/nullptr,
      expectsTrials};
  return entry;
}

} // namespace fa::wgmma
