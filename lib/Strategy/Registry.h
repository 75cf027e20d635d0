//===- Registry.h - The code-generation strategies, found by name -*- C++ -*-===//
//
// Every strategy registers one StrategyModel: its name, the problems it
// serves, the specs it accepts and why not, its ranked default configs and
// how its kernels are named. KernelSpec, the tools and the runtime find a
// strategy here (by name or kind) and never switch on it; the compiler's
// half of a strategy (placement passes, lowering) is found through
// compiler/StrategyPasses.h by the same name.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_STRATEGY_REGISTRY_H
#define FA_LIB_STRATEGY_REGISTRY_H

#include "lib/KernelSpec.h"
#include "lib/Strategy/Candidates.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fa {

/// What the layers without MLIR know of one strategy (its resource model).
/// A grid of tile configurations, one list per dimension (fa-sweep walks
/// their product).
struct TileGrid {
  std::vector<int64_t> blockM, blockN, numWarps, stages;
};

/// What a decode's tiles depend on besides its spec: the programs before
/// any split (batch x heads, a query tile each), the keys each one
/// streams, the device's SMs (0 where unknown) and a paged cache's page
/// rows (0: not paged).
struct DecodeShape {
  int64_t programs = 0, keys = 0, multiprocessors = 0, pageRows = 0;
};

struct StrategyModel {
  Strategy kind;
  /// The name used everywhere: options, kernel names, cache keys, the
  /// fa.launch attribute, Python.
  const char *name;
  /// "" when the strategy compiles `spec` (whose strategy resolved to it),
  /// else what is wrong, naming the value and the limit.
  std::string (*checkSpec)(const KernelSpec &spec);
  /// Whether `strategy = auto` may choose it for `spec`'s problem (dtype,
  /// head dim, arch, forward or backward). The registry asks the strategies
  /// in order of preference; the last one takes every problem.
  bool (*takesProblem)(const KernelSpec &spec);
  /// The first `limit` default candidates of a request resolved to this
  /// strategy, best first (KernelSpec::defaultCandidates); `length` and
  /// `traits` as there.
  std::vector<KernelSpec> (*defaultCandidates)(const KernelSpec &request,
                                               size_t limit, int64_t length,
                                               const VariantTraits &traits);
  /// Whether kernel names carry the stages and the strategy
  /// (`..._s2_mma`): strategies with a K/V pipeline.
  bool pipelined;
  /// Whether it lowers the backward's programs to GPU kernels.
  bool lowersBackward;
  /// Elements of the 16-byte chunks its kernels copy input rows in (Q, K,
  /// V; the backward's dO) and store output rows in (O; dK, dV); 0 where
  /// rows are read and written element by element. The runtime requires
  /// pointers and strides in multiples of them.
  int64_t inputAccessElements, outputAccessElements;
  /// Whether Q, K and V reach its kernels as TMA tensor maps (TMA's size
  /// and stride limits apply).
  bool tensorMapInputs;
  /// Its code in the C ABI (`fa_strategy`, runtime/fa_runtime.h) and the
  /// Python binding; 0 is `auto`.
  int abiCode;
  /// What its placed programs hold, for the dialect's verifiers: register
  /// tiles in #fa.blocked (else in tensor-core fragments, #fa.mma and
  /// #fa.mma_operand); producer warps (warp specialization) and TMA tensor
  /// maps; shared rows in whole chunks of this many bytes (its copies and
  /// ldmatrix; 0 = any row).
  bool blockedRegisterTiles;
  bool warpSpecialized;
  int64_t sharedRowChunkBytes;
  /// The tiles fa-sweep measures by default.
  TileGrid sweepGrid;
  /// Decode: a forward of at most kDecodeRows query rows a head (one token
  /// of a group of heads, packed; lib/SplitKv.h), whose keys the runtime
  /// splits over parts. `request` (strategy resolved to this one, tiles
  /// unset but for a paged cache's block-n) with the tiles that stream the
  /// keys fastest for `shape`, or nullopt where the strategy has none for
  /// it (the defaults serve). Null: no decode tiles.
  std::optional<KernelSpec> (*decodeTiles)(const KernelSpec &request,
                                           const DecodeShape &shape) = nullptr;
  /// fa-compile's reference kernel: the tiles it fills the tile options a
  /// user leaves out from, for `spec` as given (tile fields 0 where left
  /// out), or nullopt where the defaults serve, as in the runtime. Null:
  /// none (simt's is the lecture's 8 x 32 on 8 warps).
  std::optional<TileConfig> (*referenceTiles)(const KernelSpec &spec) = nullptr;
  /// The bytes ptxas may spill (stored plus loaded) in a default candidate
  /// that a measurement found faster, spills and all, than the candidates
  /// after it (chooseDefaultCandidate takes it with up to that many). Null:
  /// none anywhere (the first candidate without spills wins).
  int64_t (*toleratedSpillBytes)(const KernelSpec &candidate) = nullptr;
  /// Blocks of the kernel of `resolved` (tiles set) one SM holds at once,
  /// by the strategy's resource model; 0 where it cannot tell. Null: not
  /// modelled. (The split-KV parts keep to one wave of them.)
  int64_t (*residentBlocks)(const KernelSpec &resolved) = nullptr;
  /// Whether a cold default of `request` (resolved to this strategy) with
  /// a variant of `traits` is expected to need trial compiles: its first
  /// candidate was measured to spill there, and which later one spills
  /// least is not known ahead. The runtime and fa-compile then compile the
  /// first wave of candidates at once (chooseDefaultCandidate's
  /// firstWave). Null: never.
  bool (*expectsTrials)(const KernelSpec &request,
                        const VariantTraits &traits) = nullptr;
};

/// The registered strategies, in the order `auto` prefers them.
const std::vector<const StrategyModel *> &registeredStrategies();
/// The strategy of that kind (not `automatic`).
const StrategyModel &strategyModel(Strategy kind);
/// The strategy whose C ABI code is `code`, or null (0, auto, is none).
const StrategyModel *lookupStrategyCode(int code);
/// The strategy named `name`, or null.
const StrategyModel *lookupStrategy(const std::string &name);
/// "" when `model` lowers the backward, else an error naming the
/// strategies that do.
std::string checkLowersBackward(const StrategyModel &model);
/// "auto, wgmma, mma, simt": the names a strategy option accepts, for
/// messages.
std::string strategyNames(bool withAuto = true);

} // namespace fa

#endif // FA_LIB_STRATEGY_REGISTRY_H
