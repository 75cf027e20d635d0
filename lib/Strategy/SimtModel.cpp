//===- SimtModel.cpp - Resource model of the SIMT strategy ------*- C++ -*-===//
#include "lib/Strategy/SimtModel.h"
#include "lib/Strategy/Registry.h"
#include "lib/GpuTarget.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <optional>

namespace fa::simt {

int64_t threadColumns(int64_t blockN, int64_t headDim) {
  int64_t cols = 32;
  while (cols > 1 && (blockN % cols != 0 || headDim % cols != 0))
    cols /= 2;
  return cols;
}

int64_t rowPad(int64_t blockN, int64_t headDim) {
  return headDim % 4 == 0 && blockN % 4 == 0 ? 4 : 1;
}

int64_t sharedBytes(int64_t bm, int64_t bn, int64_t d, int64_t elementBytes,
                    int64_t pad) {
  auto aligned = [&](int64_t elements) {
    return (elements * elementBytes + 15) / 16 * 16;
  };
  return aligned(bm * (d + pad)) + 2 * aligned(bn * (d + pad)) +
         aligned(bm * (bn + pad));
}

int64_t estimateRegisters(int64_t bm, int64_t bn, int64_t d, int64_t warps) {
  int64_t cols = threadColumns(bn, d);
  int64_t rows = std::max<int64_t>(1, warps * 32 / cols);
  return (bm / rows) * (d / cols + bn / cols + 4) + 32;
}

/// Whether (bm, bn, warps) fits: the thread grid divides the tiles, the
/// shared memory fits the arch, and the estimate stays within the registers
/// a thread of the block can have (maxRegistersPerThread).
static bool simtConfigFits(int64_t bm, int64_t bn, int64_t warps, int64_t d,
                           int64_t elementBytes, int64_t maxShared) {
  int64_t rows = warps * 32 / threadColumns(bn, d);
  if (rows == 0 || bm % rows != 0)
    return false;
  return estimateRegisters(bm, bn, d, warps) <=
             maxRegistersPerThread(warps * 32) &&
         sharedBytes(bm, bn, d, elementBytes, rowPad(bn, d)) +
                 kStaticSharedMemoryReserve <=
             maxShared;
}

std::vector<KernelSpec> defaultCandidates(const KernelSpec &request,
                                          size_t limit) {
  const int64_t blockM = request.blockM, blockN = request.blockN,
                numWarps = request.numWarps, headDim = request.headDim;
  if (blockM && blockN && numWarps)
    return {request};
  // Ranked by throughput measured on the H200 (docs/benchmarks.md), with
  // vectorized shared loads (rows padded to 16 bytes): larger
  // tiles with several rows and columns per thread reuse each shared-memory
  // read for more FMAs. Those that fit the arch and the given fields, in
  // rank order; the last ones fit every head dim.
  struct Config {
    int64_t bm, bn, warps;
  };
  static constexpr Config kSmallHeads[] = {{128, 128, 16}, {64, 64, 8},
                                           {128, 64, 8},   {64, 64, 4},
                                           {32, 64, 4},    {32, 32, 4}};
  static constexpr Config kLargeHeads[] = {{128, 64, 8}, {64, 128, 8},
                                           {64, 64, 8},  {32, 64, 4},
                                           {32, 32, 4},  {16, 32, 4}};
  int64_t elementBytes = fa::elementBytes(request.dtype);
  int64_t maxShared = 48 * 1024;
  if (std::optional<GpuArch> target = lookupGpuArch(request.arch))
    maxShared = target->maxSharedMemoryPerBlock;
  std::vector<KernelSpec> candidates;
  auto consider = [&](int64_t bm, int64_t bn, int64_t warps) {
    if (candidates.size() >= limit || (blockM && blockM != bm) ||
        (blockN && blockN != bn) || (numWarps && numWarps != warps) ||
        !simtConfigFits(bm, bn, warps, headDim, elementBytes, maxShared))
      return;
    if (llvm::any_of(candidates, [&](const KernelSpec &c) {
          return c.blockM == bm && c.blockN == bn && c.numWarps == warps;
        }))
      return;
    KernelSpec spec = request;
    spec.blockM = bm;
    spec.blockN = bn;
    spec.numWarps = warps;
    candidates.push_back(spec);
  };
  for (const Config &c : headDim <= 64 ? llvm::ArrayRef<Config>(kSmallHeads)
                                       : llvm::ArrayRef<Config>(kLargeHeads))
    consider(c.bm, c.bn, c.warps);
  // Head dims the table does not fit (odd ones, very large ones): the
  // largest tiles that fit, searched from big to small.
  for (int64_t bm : {64, 32, 16, 8})
    for (int64_t bn : {64, 32, 16, 8})
      for (int64_t warps : {8, 4, 2, 1})
        consider(bm, bn, warps);
  if (!candidates.empty())
    return candidates;
  // Nothing fits (the compiler will say why): 32 keys per tile, 4 warps,
  // one tile row per thread row.
  KernelSpec spec = request;
  if (spec.blockN == 0)
    spec.blockN = 32;
  if (spec.numWarps == 0)
    spec.numWarps = 4;
  if (spec.blockM == 0) {
    int64_t threadRows =
        spec.numWarps * 32 / threadColumns(spec.blockN, spec.headDim);
    spec.blockM = std::max<int64_t>(16, threadRows);
    spec.blockM = (spec.blockM + threadRows - 1) / threadRows * threadRows;
  }
  return {spec};
}

int64_t backwardSharedBytes(int64_t bm, int64_t bn, int64_t d,
                            int64_t elementBytes, int64_t pad) {
  auto aligned = [&](int64_t elements) {
    return (elements * elementBytes + 15) / 16 * 16;
  };
  return 2 * aligned(bn * (d + pad)) + 2 * aligned(bm * (d + pad)) +
         2 * aligned(bm * (bn + pad));
}

std::vector<KernelSpec> backwardCandidates(const KernelSpec &request,
                                           size_t limit) {
  struct Config {
    int64_t bm, bn, warps;
  };
  // Larger K/V tiles keep more of dK and dV per program (fewer passes over
  // Q and dO); the small ones fit head dims with 4 or more thread columns
  // (multiples of 4). Others give each thread one or two columns, so a
  // block's warps x 32 (or 16) thread rows must divide the tiles: the last
  // three, fewest registers per thread first.
  static constexpr Config kConfigs[] = {
      {64, 64, 8}, {32, 64, 8}, {32, 32, 4}, {16, 32, 4},  {16, 16, 4},
      {8, 8, 2},   {32, 32, 1}, {64, 64, 2}, {128, 128, 4}};
  int64_t elementBytes = fa::elementBytes(request.dtype);
  int64_t maxShared = 48 * 1024;
  if (std::optional<GpuArch> target = lookupGpuArch(request.arch))
    maxShared = target->maxSharedMemoryPerBlock;
  std::vector<KernelSpec> candidates;
  for (const Config &c : kConfigs) {
    if (candidates.size() >= limit)
      break;
    if ((request.blockM && request.blockM != c.bm) ||
        (request.blockN && request.blockN != c.bn) ||
        (request.numWarps && request.numWarps != c.warps))
      continue;
    int64_t cols = threadColumns(c.bn, request.headDim);
    int64_t rows = c.warps * 32 / cols;
    if (rows == 0 || c.bm % rows != 0 || c.bn % rows != 0)
      continue;
    if (backwardSharedBytes(c.bm, c.bn, request.headDim, elementBytes,
                            rowPad(c.bn, request.headDim)) +
            kStaticSharedMemoryReserve >
        maxShared)
      continue;
    KernelSpec spec = request;
    spec.blockM = c.bm;
    spec.blockN = c.bn;
    spec.numWarps = c.warps;
    candidates.push_back(spec);
  }
  if (candidates.empty()) {
    // Nothing fits (the compiler will say why).
    KernelSpec spec = request;
    spec.blockM = spec.blockM ? spec.blockM : 16;
    spec.blockN = spec.blockN ? spec.blockN : 16;
    spec.numWarps = spec.numWarps ? spec.numWarps : 4;
    candidates.push_back(spec);
  }
  return candidates;
}

/// The lecture's kernel (B_r = 8, B_c = 32, 8 warps) for the forward: its
/// fields fill those a request leaves out; with none given, only where its
/// 8 x 32 thread grid divides the tiles (32 thread columns: head dims that
/// are multiples of 32).
static std::optional<TileConfig> lectureTiles(const KernelSpec &spec) {
  bool anyGiven = spec.blockM || spec.blockN || spec.numWarps;
  if (spec.backward || !(anyGiven || threadColumns(32, spec.headDim) == 32))
    return std::nullopt;
  return TileConfig{8, 32, 8, 1};
}

/// f32 arithmetic on CUDA cores: any problem; no K/V pipeline (stages 1).
const StrategyModel &model() {
  static const StrategyModel entry{
      Strategy::simt, "simt",
      [](const KernelSpec &spec) -> std::string {
        if (spec.dtype == ElementType::e4m3)
          return "the simt strategy computes on f32, f16 or bf16 inputs, got "
                 "e4m3 (FP8 runs on the wgmma strategy: sm_90a, head dims in "
                 "multiples of 64)";
        if (spec.stages == 0 || spec.stages == 1)
          return "";
        return "stages must be in [1, 1], got " + std::to_string(spec.stages) +
               " (the simt strategy has no K/V pipeline)";
      },
      [](const KernelSpec &) { return true; },
      [](const KernelSpec &spec, size_t limit, int64_t, const VariantTraits &) {
        KernelSpec request = spec;
        if (request.stages == 0)
          request.stages = 1;
        return request.backward ? backwardCandidates(request, limit)
                                : defaultCandidates(request, limit);
      },
      /*pipelined=*/false,
      /*lowersBackward=*/true, 0, 0, /*tensorMapInputs=*/false, /*abiCode=*/1,
      /*blockedRegisterTiles=*/true, /*warpSpecialized=*/false,
      /*sharedRowChunkBytes=*/0,
      // The lecture's B_r x B_c grid around its 8 x 32 tile.
      /*sweepGrid=*/{{4, 8, 16}, {16, 32, 64}, {4}, {1}},
      /*decodeTiles=*/nullptr, lectureTiles};
  return entry;
}

} // namespace fa::simt
