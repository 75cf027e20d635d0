//===- WgmmaModel.h - Resource model of the wgmma strategy ------*- C++ -*-===//
//
// The Hopper strategy (sm_90a): warpgroup MMA (wgmma.mma_async) with
// Q K^T read from shared memory on both sides and P V with P from
// registers, K/V tiles streamed into a ring of shared slots. What a config
// needs, whether it fits and why not, where its shared buffers lie, and the
// ranked default configs. No MLIR: fa-place-wgmma, the runtime's defaults
// and fa-compile ask these rules.
//
// A warpgroup is 4 consecutive warps; each warpgroup owns 64 rows of the Q
// tile (one m64 wgmma), so block-m = 16 x num-warps. Its accumulators are
// the m16n8 mma fragments of its 4 warps stacked (lib/Strategy/MmaLayout.h):
// warp w of the block holds rows 16w .. 16w + 15 of S and O.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_STRATEGY_WGMMAMODEL_H
#define FA_LIB_STRATEGY_WGMMAMODEL_H

#include "lib/GpuTarget.h"
#include "lib/KernelSpec.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fa {
struct StrategyModel;
} // namespace fa

namespace fa::wgmma {

/// Rows of one wgmma (and of one warpgroup's share of the Q tile).
constexpr int64_t kWarpgroupRows = 64;
constexpr int64_t kWarpsPerWarpgroup = 4;
constexpr int64_t kWarpgroupThreads = 128;
/// Largest N of one wgmma (the scores' block-n, the head dim of P V).
constexpr int64_t kMaxN = 256;
constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kMaxStages = 4;
/// Shared tiles are stored in the 128-byte swizzle the wgmma descriptors
/// name: columns in blocks of 64 16-bit elements (one 128-byte row each).
constexpr int64_t kSwizzleBytes = 128;
constexpr int64_t kColumnBlock = 64;
/// The swizzle of the loaded tiles (Q, K, V): 128 bytes, except FP8 at a
/// head dim that is not whole 128-byte rows (64, 192), whose rows are cut
/// into 64-byte blocks in the 64-byte swizzle.
constexpr int64_t swizzleBytes(int64_t headDim, int64_t elementBytes) {
  return elementBytes == 1 && headDim % 128 != 0 ? 64 : kSwizzleBytes;
}
/// The swizzle pattern repeats every 8 rows of 128 bytes: tiles start on
/// 1024-byte boundaries, and the kernel aligns its dynamic shared memory
/// to one (up to this many bytes of slack).
constexpr int64_t kSwizzleAtomBytes = 1024;

/// Global accesses, as in the mma strategy: 16-byte chunks in and out.
constexpr int64_t kInputAccessElements = 8;
constexpr int64_t kOutputAccessElements = 8;

struct Config {
  int64_t headDim = 0, blockM = 0, blockN = 0, numWarps = 0, stages = 0;
  int64_t elementBytes = 2;
};

/// Shared-memory layout of one program, in bytes from the 1024-aligned
/// base: the Q tile, then `stages` K slots, then `stages` V slots. A tile of
/// R rows is stored as head-dim / 64 column blocks of R x 128 bytes.
/// 8-bit (FP8) programs add transposedValueSlots transposed V tiles (8-bit
/// wgmma reads B K-major only): the ring the producer warpgroup transposes
/// V into (fa-warp-specialize) or, in a program without one, a tile per
/// consumer warpgroup.
struct SharedLayout {
  int64_t qOffset = 0, kOffset = 0, vOffset = 0;
  int64_t kvSlotBytes = 0;
  int64_t transposedValueOffset = 0; // 8-bit only (0: none)
  int64_t transposedValueSlots = 0;
  /// Dynamic shared memory of the block: the tiles plus the alignment slack.
  int64_t totalBytes = 0;
};

SharedLayout sharedLayout(const Config &config);

/// Whether the producer warpgroup may transpose 8-bit V tiles for the
/// consumers (where producerTransposesValue below says so). On an H100 the
/// GPU suite's FP8 cases (96, every head dim) pass with the producer
/// transposing wherever it compiles (docs/benchmarks.md (ac): the one-tile
/// hang reported in entry (z) was the one-stage hang at head dim 256, whose
/// later cases' lines the test's buffered output had lost), and it is
/// 13-16% faster at head dim 128 (entry (z)).
constexpr bool kProducerTransposesValue = true;

/// Whether fa-place-wgmma gives a program's 8-bit V transposes to the
/// producer warpgroup (its producer-transposes-value = -1): with
/// kProducerTransposesValue, at head dim 128 with two or more K/V stages.
/// With one stage the producer would wait on itself (V tile n's copy waits
/// for the slot that the transpose of tile n - 1, issued after it,
/// empties); at head dim 64 it measured 8-11% slower (the producer's copies
/// wait behind the transposes of smaller tiles; docs/benchmarks.md (z)).
bool producerTransposesValue(const Config &config);

/// The slots of the producer's transposed-V ring: two, so that the producer
/// transposes tile n + 1 while the consumers' P V reads tile n, whatever
/// the K/V ring's stages (one at head dim 256).
constexpr int64_t kTransposedValueRingSlots = 2;

/// A persistent kernel walks the (batch, head) pairs in sections whose K and
/// V take at most this many bytes: a section's tiles run side by side on all
/// SMs and read each K/V tile from L2 after its first load. A quarter of
/// the H100/H200's 50 MB of L2, so that two sections (at a section's end,
/// the next one starts) and the outputs stay resident.
constexpr int64_t kL2SectionBytes = int64_t(12) << 20;

/// Whether a kernel runs a persistent grid (fa-warp-specialize): head dims
/// up to 128 with at most two consumer warpgroups. Its producer keeps the
/// schedule's state (40 registers), so the consumers get fewer: 232
/// instead of 240 with two warpgroups, where D = 256's 128-row O and K/V
/// tiles spill; 152 instead of 160 with three, where D = 64's 192-row
/// tiles spill.
bool runsPersistent(int64_t headDim, int64_t numWarps);

/// Registers a thread has at the kernel's entry: ptxas caps a block of
/// `threads` at the register file's share of one block per SM, in steps of
/// 8. setmaxnreg moves registers only within the block's allocation.
int64_t entryRegisters(int64_t threads);

/// Registers the producer warpgroup keeps (setmaxnreg.dec): it computes
/// coordinates and issues copies; persistent, it also walks the schedule
/// (24 spill then); transposing 8-bit V tiles (`transposesValue`), all its
/// threads hold a tile step's words and addresses (ptxas spilled at 40 and
/// 48 at head dims 128 and 256); with a writer warp (the deterministic
/// backward's dQ turns, fa-tma-reduce), that warp's loop nest and turn
/// counter next to the copies' (24 spilled 4-16 bytes at head dims 64 and
/// 128); with staged row values (stagesRowValues), the two warps that copy
/// them walk the loop nest with a tensor's addresses each (32 spilled 4-40
/// bytes; 40 leaves the consumers 232 all the same).
int64_t producerRegisters(bool persistent, bool transposesValue,
                          bool writerWarp = false,
                          bool stagedRowValues = false);

/// 8-bit forward: every k-th exponential of the online softmax on the FMA
/// and integer pipes instead of the MUFU unit (fa-place-wgmma's
/// exp2-on-fma-every; lib/Exp2Polynomial.h), whose work per 128 x 128 tile
/// (1024 cycles) matches the e4m3 products' (docs/benchmarks.md (z): XU 36%,
/// tensor 34% at D 128). Measured on an H100 (docs/benchmarks.md (ab)):
/// every 2nd costs 5-21% and every 4th 2-11% of the FP8 TFLOP/s at D 64-256,
/// so none.
constexpr int64_t kExp2OnFmaEvery = 0;

/// Forward programs: the accumulator's rescale by each row's correction
/// runs only in warps where a running max moved (fa-place-wgmma's
/// skip-unit-rescale; fa.skip_unit_factors on the rescale and on the
/// softmax, whose correction is then exactly 1 where the max did not move:
/// exp2 of (m - m_new) log2 e, where one FMA left the rounding of m_new
/// log2 e in it). Per K/V tile the rescale is as many multiplications as
/// the tile has scores (D 128, 128-key tiles), issued beside the softmax,
/// while after the first tiles most tiles move no row's max of a warp.
/// Built, not yet timed on a GPU (the outputs differ from the FMA form's
/// in the last bits of alpha): off.
constexpr bool kSkipUnitRescale = false;

/// 16-bit forward programs whose score_mod runs a MUFU op of its own
/// (softcap's tanh.approx: two MUFU ops a score): every k-th exponential of
/// the online softmax on the FMA pipe (fa-place-wgmma's
/// score-mod-exp2-on-fma-every; 0: none). Measured on an H100
/// (docs/benchmarks.md (ag), bf16 D 128 causal softcap): every 2nd, 3rd and
/// 4th cost 2-6% of the forward's time although the XU pipe's share fell
/// from 53% to 38% (every 2nd): the kernel waits on its products and
/// barriers (stall wait 1.3, barrier 1.05 cycles an instruction), not on
/// the MUFU unit's throughput, and the cubic adds issue slots (40% -> 51%).
/// So none.
constexpr int64_t kScoreModExp2OnFmaEvery = 0;

/// Which dkdv programs get a writer warp in the producer warpgroup that
/// issues the dQ reductions and takes the deterministic turns, so that the
/// consumers do not hold the turns (fa-warp-specialize's writer-warp:
/// "none", "deterministic" or "every"). On an H100 (docs/benchmarks.md
/// (ab)) the writer lifts the deterministic backward from 0.53-0.72x to
/// 0.65-0.90x of the default and the default itself by 0-8% (varlen too),
/// so every program has one.
constexpr const char *kWriterWarp = "every";

/// The deterministic backward's dQ chains where a request leaves them
/// (KernelSpec::dqChains = 0): each query tile's turns split this many
/// ways, so the last K/V tile of a (batch, head) waits that many times
/// less for its first turn (docs/benchmarks.md (ab): the deterministic
/// mode is 0.64-0.78x of the default at D 64, where a tile's products are
/// shortest next to a turn's round trip). Measured on an H100
/// (docs/benchmarks.md (ac)): two chains gain 4-8% at 4k non-causal and
/// lose up to 19% causal (a causal chain waits on its longest tiles), four
/// lose almost everywhere: 1.
constexpr int64_t kDeterministicDqChains = 1;

/// Whether the writer warp also takes the dkdv programs of varlen batches
/// (ragged grids). With it their GPU tests pass and the varlen backward is
/// 1-5% faster (docs/benchmarks.md (ac)); racecheck's hazards there (the
/// writer zeroed the staged dQ rows past a sequence) went with the
/// consumers zeroing them themselves: 0 hazards (ad).
constexpr bool kWriterWarpForRagged = true;

/// Whether the writer warp also takes the dkdv programs that read a block
/// mask's range tables. Their GPU tests pass with it (ad), but those
/// programs already spill and spill more with the consumers' 232 registers
/// (ptxas 13.0, bf16 document mask: D 64 84 -> 104 bytes, D 128 144 -> 200
/// bytes), and their speed with it was not measured: off.
constexpr bool kWriterWarpForTables = false;

/// Whether the writer warp takes the deterministic dkdv programs that read
/// a block mask's tables (whatever kWriterWarpForTables says). With it
/// their turn code (the key ranges' fold, the fa.previous_visitor walk)
/// and each turn's wait, reduction round trip and hand-on leave the
/// consumers' iteration. Measured on an H100 (docs/benchmarks.md (am),
/// bf16 documents, D 64 and 128, 4k and 16k): 1.16-1.39x faster than
/// without it. The consumers spill about as much either way (SASS): the
/// loops leave them, but so do 8 of their registers (232), and the writer
/// spills its own.
constexpr bool kWriterWarpForDeterministicTables = true;

/// Whether fa-warp-specialize gives a dkdv program a writer warp under
/// `writerWarp` ("none" | "deterministic" | "every" | "all": every
/// program, varlen batches and block masks too whatever
/// kWriterWarpForRagged and kWriterWarpForTables say; the program takes
/// deterministic turns or not; it is a varlen batch's (`ragged`:
/// kWriterWarpForRagged) or reads a block mask's tables (`readsTables`:
/// kWriterWarpForTables, deterministic kWriterWarpForDeterministicTables));
/// nullopt for another name.
std::optional<bool> takesWriterWarp(const std::string &writerWarp,
                                    bool deterministic, bool ragged = false,
                                    bool readsTables = false);

/// Registers each consumer thread can take (setmaxnreg.inc) next to the
/// producer warpgroup: its entry registers plus its share of those the
/// producer gave back, in steps of 8, at most 240.
int64_t consumerRegisters(int64_t numWarps, bool persistent,
                          bool transposesValue, bool writerWarp = false,
                          bool stagedRowValues = false);

/// 32-bit registers per consumer thread: O (head-dim / 2), S (block-n / 2),
/// with the softmax overlap also the previous tile's P (block-n / 4:
/// 16-bit pairs), row state, and an allowance.
int64_t estimateRegisters(const Config &config);

/// Whether the K/V loop overlaps the softmax of tile j with P_{j-1} V_{j-1}
/// (fa-wgmma-pipeline). Measured on the H200 (docs/benchmarks.md): faster
/// up to head dim 128, slower at 256 (553 vs 609 TFLOP/s at S = 16k), where
/// the second tile of P and the 128 O registers leave too few registers.
bool overlapsSoftmax(int64_t headDim);

/// Whether that loop's wait for P_{j-1} V_{j-1} is kept after the softmax of
/// tile j (fa.async_wait's `after`). ptxas hoists the wait to the start of
/// its basic block, so without it the softmax starts only once P V is done
/// and the overlap is lost (nvdisasm of the D 128 forwards, bf16 and e4m3:
/// the wait sits before the first row maximum; docs/benchmarks.md (ai)).
/// Two consumer warpgroups only: with three (160 registers) the softmax's
/// results held beside the running O spill (D 128 block mask on 192 x 64:
/// 136-188 bytes, was 52-96). Off (kWaitAfterSoftmax) until a GPU has run
/// and timed it: the kernels it changes are those of every 16-bit and
/// e4m3 forward at D <= 128 on two consumer warpgroups.
constexpr bool kWaitAfterSoftmax = false;
bool waitsAfterSoftmax(int64_t consumerWarps);

/// "" when `config` can be compiled for `arch`, else why not, with the
/// numbers.
std::string checkFits(const Config &config, const GpuArch &arch);

/// Whether the strategy computes this problem on `arch` (16-bit inputs
/// with a head dim in whole 64-column blocks, e4m3 with one in whole
/// 128-column blocks, up to kMaxHeadDim; sm_90a): what `auto` asks.
bool takesProblem(ElementType dtype, int64_t headDim, const std::string &arch);

/// "" when the strategy can serve the spec's problem (dtype, head dim,
/// stages, arch), else what is wrong, naming the value and the limit.
std::string checkSpec(const KernelSpec &spec);

/// Lengths up to this (the longer of query and key) rank small head dims'
/// candidates for short sequences (see defaultCandidates). A power of two,
/// so a length and the runtime's bucket of it (rounded up to a power of
/// two) fall on the same side.
constexpr int64_t kShortLength = 1024;

/// The first `limit` default candidates of a request whose strategy is
/// wgmma, best first, for sequences of `length` (0 = not known) and a
/// variant of `traits`.
std::vector<KernelSpec> defaultCandidates(const KernelSpec &request,
                                          size_t limit, int64_t length = 0,
                                          const VariantTraits &traits = {});

/// The spilled bytes (stored plus loaded) a default candidate was measured
/// faster with than the tiles ranked after it (StrategyModel's
/// toleratedSpillBytes); 0 for all but the measured ones.
int64_t toleratedSpillBytes(const KernelSpec &candidate);

/// Whether a cold default of `request` with a variant of `traits` is
/// expected to need trial compiles (StrategyModel::expectsTrials).
bool expectsTrials(const KernelSpec &request, const VariantTraits &traits);

//===----------------------------------------------------------------------===//
// The backward's dK/dV program (fa-tile-backward's "dkdv") on wgmma
//===----------------------------------------------------------------------===//
//
// A Config's blockN is the K/V tile (64 rows per warpgroup: dK and dV have
// the warpgroups along their rows, #fa.mma<warps>), its blockM the query
// tile (one m64: S, dP, P, dS and dQ have the warpgroups along their
// columns, #fa.mma<warps, warpgroups, rows_first>). K and V are loaded
// once, Q and dO stream through rings of `stages` slots; P and dS are
// staged in shared memory for the products that read them transposed
// (dV += P^T dO, dK += dS^T Q: A operands MN-major) and for dQ = dS K (A
// K-major across all keys). Warp-specialized like the forward: a producer
// warpgroup copies K, V and the Q/dO rings with TMA, and the placed
// warpgroups (the consumers) take its registers (consumerRegisters). The
// f32 dQ part of each query tile is staged in shared memory too, and the
// TMA engine adds it to the dQ accumulator (cp.reduce.async.bulk.tensor):
// no per-lane atomics in the consumers' path. The deterministic mode issues
// the same reduction between its turns and waits for it to finish before
// handing the turn on (by the consumers, or with kWriterWarp by a writer
// warp of the producer warpgroup).

/// Buffers of the dkdv program's staged P and dS: 2 makes a staging rotate
/// (fa.pipeline_stages on its fa.convert_layout, written by iteration
/// parity), so that it waits for its previous readers only when its loop
/// starts instead of every iteration. `rowValues`: LSE and D come through
/// shared memory (stagesRowValues).
struct StagingBuffers {
  int64_t probs = 1, gradScores = 1;
  bool rowValues = false;
};

/// Shared-memory layout of the dkdv program, in bytes from the 1024-aligned
/// base: K, V, the Q and dO rings, the staged P and dS (each `buffers`
/// consecutive buffers), the staged f32 dQ part and, with staged row
/// values, the LSE ring and the D ring (a slot per stage, block-m f32 each;
/// -1 without).
struct BackwardSharedLayout {
  int64_t kOffset = 0, vOffset = 0, qOffset = 0, gradOutputOffset = 0;
  int64_t probsOffset = 0, gradScoresOffset = 0;
  int64_t gradQueryOffset = 0;
  int64_t logSumExpOffset = -1, deltaOffset = -1;
  int64_t totalBytes = 0;
};

BackwardSharedLayout backwardSharedLayout(const Config &config,
                                          StagingBuffers buffers = {});

/// Which of the dkdv program's stagings rotate between two buffers where
/// the model decides (fa-place-wgmma's rotated-staging): "none",
/// "grad-scores" (dS: its readers are both warpgroups' dQ products, so
/// each iteration's wait for them is a barrier of all consumers) or "both"
/// (P too, read by its own warpgroup only). Measured on an H100
/// (docs/benchmarks.md (ad)) at head dim 64, three stages: "grad-scores"
/// 1-2% faster than "none" on all 12 paired rows, "both" no faster than
/// it. (At 128 the second buffer does not fit beside three stages.)
constexpr const char *kRotatedStaging = "grad-scores";

/// The rotation the model takes for `config` (rotated-staging=model):
/// kRotatedStaging at head dim 64, where it was measured, else "none".
std::string rotatedStaging(const Config &config);

/// The staging buffers of a dkdv program for `mode` ("none",
/// "grad-scores", "both") and `rowValues`: two where `mode` asks for them
/// and they fit in `availableSharedBytes` beside the config's stages (a
/// rotation is not worth a stage), else one; the row values' rings where
/// asked for and they fit beside those (dropped last); nullopt for another
/// mode.
std::optional<StagingBuffers>
backwardStagingBuffers(const Config &config, const std::string &mode,
                       int64_t availableSharedBytes, bool rowValues = false);

/// Whether the dkdv program's LSE and D rows come through shared memory:
/// the producer copies each query tile's rows with its Q tile (cp.async,
/// completing on Q's full barrier) into rings beside Q's, and the
/// consumers read their rows from there at the top of the iteration,
/// instead of loading them from global memory (one tile ahead at head dim
/// 64: fa-prefetch-row-values). Measured on an H100 against the registers
/// (docs/benchmarks.md (ae), bf16, two rounds): the default mode -2.1 ..
/// +4.0% (7 of 12 rows faster, mean +0.9%), the deterministic mode -2.0 ..
/// +1.7% (mean -0.6%); the varlen D 128 program at two stages spills none
/// instead of 36 bytes, and the consumers hold no row value across the
/// iteration. (The staging fences' long-scoreboard stalls, which were
/// taken for waits on the consumers' loads of LSE and D, stay without
/// them.) Not with
/// transposed scores (16 rows a thread), nor in a program that reads a
/// block mask's tables: those take no writer warp (kWriterWarpForTables),
/// so their consumers keep 240 registers, which the producer's copying
/// warps (producerRegisters) would cut to 232.
constexpr bool kStagedRowValues = true;
bool stagesRowValues(const Config &config, bool transposedScores = false,
                     bool readsTables = false);

/// Whether the dkdv program computes S^T = K Q^T and dP^T = V dO^T
/// (fa-place-wgmma's transposed scores, FlashAttention-3's SdP_swapAB):
/// each warpgroup's accumulator rows are then its 64 keys, so P^T and dS^T
/// are register A operands of dV += P^T dO and dK += dS^T Q (two products
/// no longer read an operand from shared memory, and P is not staged);
/// only dS^T is staged, for dQ. The tile ops see S as a `transposed`
/// #fa.mma tile whose per-row values (LSE, D) are 2 x block-m / 8 registers
/// a thread instead of 2 x block-m / 64.
bool transposesScores(const Config &config);

/// The row values the dkdv loop loads one query tile ahead
/// (fa-prefetch-row-values: 2 more registers per thread for each).
enum class RowValuePrefetch { none, logSumExp, both };

/// Which row values to load ahead. Measured on the H200: LSE and D at head
/// dim 64, 4-6% faster (docs/benchmarks.md, 2026-12-02 (c)). At 128, where
/// dK and dV take 128 of the consumers' 240 registers, both spill (120
/// bytes); LSE alone (the value the iteration needs first, right after
/// S = Q K^T; D waits for dP) fits in a `plainProgram` (no mask beyond the
/// lengths, no score_mod, no deterministic turns) and is 2-3% faster there
/// (2026-12-04 (o)); a causal mask, a variant or the turns take the
/// registers it needs (ptxas spilled 20-72 bytes).
/// With transposed scores (transposesScores) a tile's row values are 8x
/// the registers (16 a thread at block-m 64): none ahead (ptxas spilled
/// 268 bytes with both at head dim 64).
RowValuePrefetch prefetchedRowValues(const Config &config, bool plainProgram,
                                     bool transposedScores = false);

/// Warpgroups of a backward config (num-warps / 4).
int64_t backwardWarpgroups(const Config &config);

/// 32-bit registers per consumer thread: dK and dV (head-dim each for a
/// warpgroup's 64 rows), P and dP in f32 (block-n / warpgroups / 2 each:
/// P replaces S, dS replaces dP), the row values and an allowance.
int64_t estimateBackwardRegisters(const Config &config);

/// "" when the backward `config` can be compiled for `arch`, else why not.
std::string checkBackwardFits(const Config &config, const GpuArch &arch);

/// Whether `auto` runs the backward of this problem on wgmma: 16-bit
/// inputs, head dims 64 and 128, sm_90a.
bool takesBackwardProblem(ElementType dtype, int64_t headDim,
                          const std::string &arch);

/// The backward's default candidates (the request's strategy is wgmma),
/// with kDeterministicDqChains where a deterministic request leaves them.
std::vector<KernelSpec> backwardCandidates(KernelSpec request, size_t limit);

/// The strategy's entry of the registry (lib/Strategy/Registry.h).
const StrategyModel &model();

} // namespace fa::wgmma

#endif // FA_LIB_STRATEGY_WGMMAMODEL_H
