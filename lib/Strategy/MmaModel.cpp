//===- MmaModel.cpp - Resource model of the mma strategy --------*- C++ -*-===//
#include "lib/Strategy/MmaModel.h"
#include "lib/GpuTarget.h"
#include "lib/SplitKv.h"
#include "lib/Strategy/Candidates.h"
#include "lib/Strategy/MmaLayout.h"
#include "lib/Strategy/Registry.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

#include <optional>

namespace fa::mma {

/// Registers a thread needs beyond its fragments (addresses, indices, loop
/// state, softmax temporaries); a rough allowance for the estimate.
static constexpr int64_t kRegisterOverhead = 32;
/// The same for the backward's dkdv program (its fragment addresses are
/// base + immediate, keepLaneAddressesInLoops). Calibrated on ptxas's
/// counts of the defaults: 254 registers at D = 128 (128 x 128, 4 x 2 warp
/// grid; estimated 254), 255 at D = 64 (64 x 128 on 4 warps; estimated 250).
static constexpr int64_t kBackwardRegisterOverhead = 22;

int64_t contractionWidth(int64_t headDim) {
  return (headDim + kK - 1) / kK * kK;
}

SharedLayout sharedLayout(const Config &c) {
  SharedLayout layout;
  layout.rowPad = contractionWidth(c.headDim) - c.headDim + 8;
  layout.rowPitch = c.headDim + layout.rowPad;
  int64_t rowBytes = layout.rowPitch * c.elementBytes; // a multiple of 16
  layout.qOffset = 0;
  layout.kOffset = c.blockM * rowBytes;
  layout.kvSlotBytes = c.blockN * rowBytes;
  layout.vOffset = layout.kOffset + c.stages * layout.kvSlotBytes;
  layout.totalBytes = layout.vOffset + c.stages * layout.kvSlotBytes;
  return layout;
}

int64_t estimateRegisters(const Config &c, bool qInRegisters) {
  int64_t fragmentRows = c.blockM / (kM * c.numWarps); // m16 blocks per warp
  int64_t o = fragmentRows * (c.headDim / kN) * 4;
  int64_t q =
      fragmentRows * 4 * (qInRegisters ? contractionWidth(c.headDim) / kK : 1);
  // P (16-bit pairs) takes S's registers as S dies: counted once, as S.
  int64_t s = fragmentRows * (c.blockN / kN) * 4;
  int64_t rowState = fragmentRows * 2 * 3; // m, l, alpha for 2 rows a block
  return o + q + s + rowState + kRegisterOverhead;
}

bool keepQInRegisters(const Config &c) {
  return estimateRegisters(c, /*qInRegisters=*/true) <=
         maxRegistersPerThread(c.numWarps * 32);
}

int64_t estimateRegisters(const Config &c) {
  return estimateRegisters(c, keepQInRegisters(c));
}

bool takesProblem(ElementType dtype, int64_t headDim) {
  return (dtype == ElementType::f16 || dtype == ElementType::bf16) &&
         headDim % kN == 0 && headDim > 0 && headDim <= kMaxHeadDim;
}

std::string checkSpec(const KernelSpec &spec) {
  auto text = [](int64_t v) { return std::to_string(v); };
  if (spec.dtype == ElementType::f32)
    return "the mma strategy computes on f16 or bf16 inputs, got f32 (use "
           "the simt strategy)";
  if (spec.dtype == ElementType::e4m3)
    return "the mma strategy computes on f16 or bf16 inputs, got e4m3 (FP8 "
           "runs on the wgmma strategy: "
           "sm_90a, head dims in multiples of 64)";
  if (spec.headDim % kN != 0 || spec.headDim > kMaxHeadDim)
    return "the mma strategy needs a head dim that is a multiple of 8 and at "
           "most " +
           text(kMaxHeadDim) + ", got " + text(spec.headDim);
  if (spec.stages < 0 || spec.stages > kMaxStages)
    return "stages must be in [1, " + text(kMaxStages) +
           "] for the mma strategy (0 = default), got " + text(spec.stages);
  return "";
}

/// How messages name a config.
static std::string describe(const Config &c) {
  auto text = [](int64_t v) { return std::to_string(v); };
  return "block-m=" + text(c.blockM) + " block-n=" + text(c.blockN) +
         " head-dim=" + text(c.headDim) + " num-warps=" + text(c.numWarps) +
         " stages=" + text(c.stages);
}

/// The rules the forward and the backward program share ("" when they
/// hold); `what` names the placement in the message.
static std::string checkWarpsStagesHeadDim(const Config &c,
                                           const std::string &what) {
  auto text = [](int64_t v) { return std::to_string(v); };
  if (c.numWarps < 1 || c.numWarps > 32)
    return "num-warps must be in [1, 32], got " + text(c.numWarps);
  if (c.stages < 1 || c.stages > kMaxStages)
    return "stages must be in [1, " + text(kMaxStages) + "], got " +
           text(c.stages);
  if (c.headDim % kN != 0 || c.headDim < kN)
    return what + " (" + describe(c) +
           "): the head dim must be a positive multiple of 8";
  return "";
}

std::string checkFits(const Config &c, const GpuArch &arch) {
  auto text = [](int64_t v) { return std::to_string(v); };
  if (std::string error = checkWarpsStagesHeadDim(c, "mma placement");
      !error.empty())
    return error;
  std::string config = describe(c);
  if (c.blockM % (kM * c.numWarps) != 0)
    return "mma placement (" + config + "): block-m " + text(c.blockM) +
           " is not a multiple of 16 x num-warps = " + text(kM * c.numWarps) +
           " (each warp owns whole m16 fragments)";
  if (c.blockN % kK != 0)
    return "mma placement (" + config + "): block-n " + text(c.blockN) +
           " is not a multiple of 16 (P is the k16 operand of P V)";
  int64_t available = arch.maxSharedMemoryPerBlock - kStaticSharedMemoryReserve;
  int64_t shared = sharedLayout(c).totalBytes;
  if (shared > available)
    return "mma placement (" + config + ") needs " + text(shared) +
           " bytes of shared memory per block, over the " + text(available) +
           " bytes available on " + std::string(arch.name);
  return "";
}

std::vector<KernelSpec> defaultCandidates(const KernelSpec &request,
                                          size_t limit) {
  if (request.blockM && request.blockN && request.numWarps && request.stages)
    return {request};
  // Best first, per head dim, as measured on the H200 at S = 4k
  // (bench/sweep_mma.py, docs/benchmarks.md); the runtime skips a candidate
  // that ptxas spills (128 x 128 at D = 64 and 128 x 64 at D = 128 do with
  // the causal mask). Two m16 row blocks per warp (block-m = 32 x warps)
  // feed each K/V fragment from shared memory to two mma; the generic
  // search below covers the rest.
  static constexpr TileConfig kSmallHeads[] = {
      {128, 128, 4, 2}, {128, 64, 4, 2}, {128, 64, 8, 2}, {64, 64, 4, 2}};
  static constexpr TileConfig kMediumHeads[] = {
      {128, 64, 4, 2}, {128, 32, 4, 2}, {128, 128, 8, 2}, {64, 32, 4, 2}};
  static constexpr TileConfig kLargeHeads[] = {
      {128, 64, 8, 2}, {128, 32, 8, 2}, {64, 32, 4, 2}};
  llvm::ArrayRef<TileConfig> ranked =
      request.headDim <= 64    ? llvm::ArrayRef<TileConfig>(kSmallHeads)
      : request.headDim <= 128 ? llvm::ArrayRef<TileConfig>(kMediumHeads)
                               : llvm::ArrayRef<TileConfig>(kLargeHeads);
  // 128 x 64 spills with the causal mask at D = 128 on sm_80 and sm_90a
  // alike: causal starts at the tiles the rule then takes (one trial
  // fewer, the same kernel).
  if (request.causal && request.headDim > 64 && request.headDim <= 128)
    ranked = ranked.drop_front();
  std::optional<GpuArch> arch = lookupGpuArch(request.arch);
  int64_t elementBytes = fa::elementBytes(request.dtype);
  CandidateCollector collector(request, limit, [&](const TileConfig &t) {
    Config config{request.headDim, t.blockM,   t.blockN,
                  t.numWarps,      t.stages, elementBytes};
    return arch && checkFits(config, *arch).empty() &&
           estimateRegisters(config) <= maxRegistersPerThread(t.numWarps * 32);
  });
  for (const TileConfig &config : ranked)
    collector.consider(config);
  for (int64_t stages : {2, 1, 3})
    for (int64_t bm : {128, 64, 32, 16})
      for (int64_t bn : {64, 32, 16})
        for (int64_t warps : {8, 4, 2, 1})
          collector.consider({bm, bn, warps, stages});
  // Nothing fits (the compiler will say why): the smallest tiles.
  int64_t warps = request.numWarps ? request.numWarps : 4;
  return std::move(collector).take({16 * warps, 16, warps, 1});
}

BackwardSharedLayout backwardSharedLayout(const Config &c) {
  BackwardSharedLayout layout;
  layout.rowPad = contractionWidth(c.headDim) - c.headDim + 8;
  int64_t rowBytes = (c.headDim + layout.rowPad) * c.elementBytes;
  layout.stagedRowPad = 8;
  int64_t stagedBytes = c.blockM * (c.blockN + layout.stagedRowPad) *
                        c.elementBytes; // a multiple of 16
  layout.kOffset = 0;
  layout.vOffset = c.blockN * rowBytes;
  layout.qOffset = 2 * c.blockN * rowBytes;
  layout.gradOutputOffset = layout.qOffset + c.stages * c.blockM * rowBytes;
  layout.stagedOffset =
      layout.gradOutputOffset + c.stages * c.blockM * rowBytes;
  layout.residualOffset = layout.stagedOffset + stagedBytes;
  layout.totalBytes = layout.residualOffset + stagedBytes;
  return layout;
}

int64_t backwardWarpsN(const Config &c) {
  bool halves = c.blockN % (2 * kN) == 0 && c.headDim % (2 * kN) == 0;
  return c.numWarps >= 8 && c.numWarps % 2 == 0 && halves ? 2 : 1;
}

int64_t estimateBackwardRegisters(const Config &c) {
  int64_t warpsN = backwardWarpsN(c), warpsM = c.numWarps / warpsN;
  int64_t keyBlocks = c.blockN / (kM * warpsM);   // m16 blocks of dK/dV
  int64_t queryBlocks = c.blockM / (kM * warpsM); // of S, dP, dQ
  int64_t gradients = 2 * keyBlocks * (c.headDim / (kN * warpsN)) * 4;
  int64_t scores = queryBlocks * (c.blockN / (kN * warpsN)) * 4;
  // P lives on as 16-bit pairs while dP accumulates; dQ is added two
  // n-blocks at a time (8 registers a row block).
  int64_t peak = std::max(scores + scores / 2, scores / 2 + 8 * queryBlocks);
  return gradients + peak + queryBlocks * 2 * 2 + kBackwardRegisterOverhead;
}

std::string checkBackwardFits(const Config &c, const GpuArch &arch) {
  auto text = [](int64_t v) { return std::to_string(v); };
  if (std::string error =
          checkWarpsStagesHeadDim(c, "mma backward placement");
      !error.empty())
    return error;
  std::string config = describe(c);
  // Warps along the rows: all of them, or num-warps / 2 in a 2-d grid.
  int64_t warpsM = c.numWarps / backwardWarpsN(c);
  std::string rowWarps = warpsM == c.numWarps
                             ? "num-warps"
                             : "the " + text(warpsM) + " warps along the rows";
  if (c.blockM % (kM * warpsM) != 0)
    return "mma backward placement (" + config + "): block-m " +
           text(c.blockM) + " is not a multiple of 16 x " + rowWarps + " = " +
           text(kM * warpsM) +
           " (each warp owns whole m16 fragments of S, dP and dQ)";
  if (c.blockN % (kM * warpsM) != 0)
    return "mma backward placement (" + config + "): block-n " +
           text(c.blockN) + " is not a multiple of 16 x " + rowWarps + " = " +
           text(kM * warpsM) +
           " (each warp owns whole m16 fragments of dK and dV)";
  int64_t available = arch.maxSharedMemoryPerBlock - kStaticSharedMemoryReserve;
  int64_t shared = backwardSharedLayout(c).totalBytes;
  if (shared > available)
    return "mma backward placement (" + config + ") needs " + text(shared) +
           " bytes of shared memory per block, over the " + text(available) +
           " bytes available on " + std::string(arch.name);
  return "";
}

bool takesBackwardProblem(ElementType dtype, int64_t headDim,
                          const std::string &arch) {
  if (!takesProblem(dtype, headDim))
    return false;
  if (headDim <= 128)
    return true;
  // Past 128 only the 4 x 2 warp grid of 8 warps keeps dK and dV in the
  // registers (a warp's 16 rows x half the head dim, so head dims in
  // multiples of 16): 64 x 64 tiles, whose K/V and Q/dO tiles need the
  // shared memory of sm_80 or sm_90 (ptxas 13.0: 238-254 registers, no
  // spills, at head dims 144-256). Past 144 the 99 KB of sm_86/sm_89 hold
  // only 32-row tiles, which spill; simt serves those.
  std::optional<GpuArch> target = lookupGpuArch(arch);
  Config config{headDim, 64, 64, 8, 1, fa::elementBytes(dtype)};
  return target && checkBackwardFits(config, *target).empty();
}

std::vector<KernelSpec> backwardCandidates(const KernelSpec &request,
                                           size_t limit) {
  if (request.blockM && request.blockN && request.numWarps && request.stages)
    return {request};
  std::optional<GpuArch> arch = lookupGpuArch(request.arch);
  int64_t elementBytes = fa::elementBytes(request.dtype);
  // Configs ranked by measurement are checked against the arch's limits
  // only (the register estimate is rough; the runtime skips a candidate
  // that ptxas spills); the generic search also against the estimate.
  bool measured = true;
  CandidateCollector collector(request, limit, [&](const TileConfig &t) {
    Config config{request.headDim, t.blockM,   t.blockN,
                  t.numWarps,      t.stages, elementBytes};
    if (!arch || !checkBackwardFits(config, *arch).empty())
      return false;
    return measured || estimateBackwardRegisters(config) <=
                           maxRegistersPerThread(t.numWarps * 32);
  });
  // Best first, per head dim, as measured on the H200 (bench/
  // bench_backward.py --configs, docs/benchmarks.md): 64 x 128 on 4 warps
  // (two m16 blocks of dK/dV per warp) at D <= 64, 128 x 128 on 8 warps at
  // D <= 128; one-stage Q/dO rings (with two, ptxas spills the former and
  // the latter does not fit).
  static constexpr TileConfig kSmallHeads[] = {
      {64, 128, 4, 1}, {128, 128, 8, 2}, {128, 128, 8, 1}, {64, 64, 4, 1}};
  static constexpr TileConfig kMediumHeads[] = {
      {128, 128, 8, 1}, {64, 64, 4, 1}, {64, 64, 4, 2}};
  if (request.headDim <= 64)
    for (const TileConfig &config : kSmallHeads)
      collector.consider(config);
  else if (request.headDim <= 128)
    for (const TileConfig &config : kMediumHeads)
      collector.consider(config);
  measured = false;
  // Larger K/V tiles keep more of dK and dV per program (fewer passes over
  // Q and dO); the register budget bounds them. The one-stage ring of a
  // config comes right after its two-stage one: where ptxas spills the
  // latter, the runtime takes the former.
  for (int64_t bn : {128, 64, 32, 16})
    for (int64_t bm : {64, 128, 32, 16})
      for (int64_t warps : {4, 8, 2, 1})
        for (int64_t stages : {2, 1})
          collector.consider({bm, bn, warps, stages});
  int64_t warps = request.numWarps ? request.numWarps : 4;
  return std::move(collector).take({16 * warps, 16 * warps, warps, 1});
}

/// The placement config of `spec`'s tiles.
static Config configOf(const KernelSpec &spec) {
  return {spec.headDim,  spec.blockM, spec.blockN,
          spec.numWarps, spec.stages, fa::elementBytes(spec.dtype)};
}

/// Keys a decode tile streams where the programs are few (decodeTiles).
constexpr int64_t kFewProgramsDecodeBlockN = 128;
/// Parts a program at least (SMs / programs, one block an SM) for the few
/// programs' tiles: B 1 with 8 K/V heads on 132 SMs (at B 2 the H100
/// measured them 2% slower at 8k and 32k keys, 2% faster at 128k).
constexpr int64_t kFewProgramsMinParts = 16;

/// Whether a decode of `shape` has so few programs that each part should
/// stream kFewProgramsDecodeBlockN-key tiles: at one block an SM (their two
/// stages fill most of its shared memory) the parts are SMs / programs,
/// and each still gets kMinTilesPerPart of those tiles. Not for pages that
/// hold no whole tile: their rows gathered in 128-key tiles measured
/// 1.1-1.4x slower than in 32-key ones (H100, pages of 16).
static bool fewDecodePrograms(const DecodeShape &shape) {
  if (shape.programs <= 0 || shape.multiprocessors <= 0)
    return false;
  if (shape.pageRows % kFewProgramsDecodeBlockN != 0)
    return false;
  int64_t parts = shape.multiprocessors / shape.programs;
  return parts >= kFewProgramsMinParts &&
         shape.keys >= parts * kMinTilesPerPart * kFewProgramsDecodeBlockN;
}

/// Decode tiles: 32 query rows on two warps, 32 keys a tile, two K/V
/// tiles in flight. A decode tile holds a few real rows (the packed query
/// heads of one K/V head), so its time is the K/V tiles' read: small tiles
/// keep the registers low (163 a thread) and five blocks on an SM, which
/// with the parts' blocks streams the cache at 79% of the H200's DRAM
/// peak (ncu, B 8, 8k keys; 128 x 64 tiles on four warps: 255 registers,
/// two blocks an SM, 42%). docs/benchmarks.md (l) has the sweep. Few
/// programs (fewDecodePrograms) take 128 keys a tile: a part's two stages
/// then keep 128 KB in flight, where 32-key tiles' parts (two blocks an
/// SM, as many as the parts heuristic makes) keep 32 KB an SM, too little
/// to cover the memory's latency (H200, B 1, bf16 D 128, 32/8 heads: 23.0
/// against 26.7 us at 8k keys, 52.4 against 57.1 at 32k, entry (l); H100:
/// 28.8 against 30.8 us at 8k, 195.9 against 201.4 at 128k, entry (an)).
/// Head dims past 128 take 16 keys a tile (32 spill: a warp's 16 x D
/// accumulator and Q fragments fill the registers). A block-n the request
/// sets (a paged cache's) is kept.
std::optional<KernelSpec> decodeTiles(const KernelSpec &request,
                                      const DecodeShape &shape) {
  if (request.backward || !takesProblem(request.dtype, request.headDim))
    return std::nullopt;
  std::optional<GpuArch> arch = lookupGpuArch(request.arch);
  if (!arch)
    return std::nullopt;
  auto fits = [&](const KernelSpec &spec) {
    return checkFits(configOf(spec), *arch).empty();
  };
  KernelSpec spec = request;
  spec.blockM = 32;
  spec.numWarps = 2;
  spec.stages = 2;
  if (!request.blockN && spec.headDim <= 128 && fewDecodePrograms(shape)) {
    spec.blockN = kFewProgramsDecodeBlockN;
    if (fits(spec))
      return spec;
  }
  spec.blockN = request.blockN;
  if (!spec.blockN)
    spec.blockN = spec.headDim <= 128 ? 32 : 16;
  if (!fits(spec))
    return std::nullopt;
  return spec;
}

/// Blocks an SM holds of a resolved mma kernel: by its shared memory and
/// the register estimate.
int64_t residentBlocks(const KernelSpec &spec) {
  std::optional<GpuArch> arch = lookupGpuArch(spec.arch);
  if (!arch || spec.blockM <= 0 || spec.blockN <= 0 || spec.numWarps <= 0 ||
      spec.stages <= 0)
    return 0;
  Config config = configOf(spec);
  if (!checkFits(config, *arch).empty())
    return 0;
  return occupancy(*arch, spec.numWarps * 32, estimateRegisters(config),
                   sharedLayout(config).totalBytes)
      .blocksPerSM;
}

/// mma.sync on tensor cores: 16-bit inputs, forward and backward.
const StrategyModel &model() {
  static const StrategyModel entry{
      Strategy::mma,
      "mma",
      checkSpec,
      [](const KernelSpec &spec) {
        return spec.backward
                   ? takesBackwardProblem(spec.dtype, spec.headDim, spec.arch)
                   : takesProblem(spec.dtype, spec.headDim);
      },
      [](const KernelSpec &request, size_t limit, int64_t,
         const VariantTraits &) {
        return request.backward ? backwardCandidates(request, limit)
                                : defaultCandidates(request, limit);
      },
      /*pipelined=*/true,
      /*lowersBackward=*/true,
      kInputAccessElements,
      kOutputAccessElements,
      /*tensorMapInputs=*/false,
      /*abiCode=*/2,
      /*blockedRegisterTiles=*/false,
      /*warpSpecialized=*/false,
      /*sharedRowChunkBytes=*/16,
      /*sweepGrid=*/{{64, 128}, {32, 64, 128}, {4, 8}, {1, 2}},
      decodeTiles,
      /*referenceTiles=*/nullptr,
      /*toleratedSpillBytes=*/nullptr,
      residentBlocks};
  return entry;
}

} // namespace fa::mma
