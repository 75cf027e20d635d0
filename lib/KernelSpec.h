//===- KernelSpec.h - Everything that changes a generated kernel ----*- C++ -*-===//
#ifndef FA_LIB_KERNELSPEC_H
#define FA_LIB_KERNELSPEC_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fa {

/// Element types of Q, K, V (and O). `e4m3` is FP8 (f8E4M3FN: 4 exponent
/// bits, 3 mantissa bits, no infinities, largest 448): the forward on
/// Hopper's 8-bit wgmma, with per-(batch, K/V head) descale factors and O
/// in a 16-bit type (KernelSpec::outDtype).
enum class ElementType { f32, f16, bf16, e4m3 };

/// Bytes per element in memory.
inline int64_t elementBytes(ElementType type) {
  return type == ElementType::f32 ? 4 : type == ElementType::e4m3 ? 1 : 2;
}

/// The longest variant text (KernelSpec::scoreMod, maskMod) accepted: a
/// variant is a scalar function of a few dozen ops, not a program.
constexpr size_t kMaxVariantTextBytes = 65536;

/// The longest key sequence a kernel with a mask_mod takes: interval masks
/// (windows) compare keys in 32 bits, from bounds saturated to +-2^30
/// (exact while the tile's first key plus its width stays below 2^30).
constexpr int64_t kMaxMaskModKeyLength = (int64_t(1) << 30) - 4096;

/// Head dims beyond this are not attention as anyone runs it, and would only
/// make register and shared-memory tiles absurd. KernelSpec::validate and
/// the fa dialect's verifiers (fa.attention, fa.attention_backward) share it.
constexpr int64_t kMaxHeadDim = 512;

/// How the kernel computes. `simt`: f32 arithmetic on CUDA cores (the
/// lecture's kernel; f16/bf16 inputs are widened as read). `mma`: f16/bf16
/// on tensor cores with mma.sync m16n8k16, ldmatrix and cp.async pipelines
/// (sm_80+). `wgmma`: f16/bf16 and e4m3 on Hopper's warpgroup MMA (sm_90a
/// only). `automatic` resolves to simt for f32; for f16/bf16 to wgmma on
/// sm_90a when the head dim is a multiple of 64 up to 256, else to mma
/// (simt for head dims mma does not take); for e4m3 to wgmma (head dims in
/// multiples of 64 on sm_90a; elsewhere simt, which refuses it by name).
enum class Strategy { automatic, simt, mma, wgmma };

/// Every parameter that changes the generated code of an attention kernel:
/// plain data. Batch, heads (and so GQA/MQA grouping), lengths and strides
/// are runtime arguments of the kernel and not part of the spec. What the
/// strategies make of a spec (validation, resolution, defaults, names,
/// canonical text) is in lib/Strategy/SpecRules.h. A new field also goes
/// into canonicalText() and the runtime's request key
/// (runtime/ResolvedRequest.h).
/// The most chains the deterministic backward splits a query tile's dQ
/// turns into (KernelSpec::dqChains, fa.attention_backward's dq_chains; the
/// dq grid sums that many copies of the accumulator).
constexpr int64_t kMaxDqChains = 8;

struct KernelSpec {
  int64_t headDim = 128;
  ElementType dtype = ElementType::f32;
  /// O's element type where it differs from Q, K, V's: FP8 inputs give a
  /// 16-bit O (f16 or bf16; unset means bf16). Unset for the other types,
  /// whose O has their type. See outputDtype().
  std::optional<ElementType> outDtype;
  bool causal = false;
  /// The backward (dQ, dK, dV from dO and the forward's LSE) instead of the
  /// forward. It has a tile level and a CPU lowering; no GPU strategy
  /// lowers it yet.
  bool backward = false;
  /// The backward adds the K/V tiles' shares of dQ in a fixed order
  /// (bitwise identical dQ run to run) instead of in any order.
  bool deterministic = false;
  /// The deterministic backward's dQ chains (fa.attention_backward's
  /// dq_chains): each query tile's turns split K ways, into K copies of the
  /// accumulator that the dq grid sums in order. 0 = the strategy's default
  /// (withDefaults; see dqChainsOrOne()), 1 = one chain.
  int64_t dqChains = 0;
  /// Tiles, warps and stages; 0 = the default for (head dim, dtype, arch,
  /// strategy), see withDefaults() (lib/Strategy/SpecRules.h).
  int64_t blockM = 8;   // query rows per tile (B_r)
  int64_t blockN = 32;  // key/value rows per tile (B_c)
  int64_t numWarps = 8; // warps per thread block
  int64_t stages = 1; // K/V tiles in flight (simt: 1; mma, wgmma: 1..4)
  Strategy strategy = Strategy::automatic;
  std::string arch = "sm_90a";
  /// Softmax scale; 0 means the default 1/sqrt(headDim).
  double scale = 0.0;
  /// An attention variant (see fa.attention in the dialect): the text of
  /// one MLIR `func.func` each, "" for none. `scoreMod`: (score: f32, b, h,
  /// q_idx, kv_idx, q_len, kv_len: index) -> f32, the new score from the
  /// scaled one; `maskMod`: (b, h, q_idx, kv_idx, q_len, kv_len: index) ->
  /// i1, true where the score is kept. Their bodies hold arith and math ops
  /// and end in func.return. Part of the canonical text (and so of the
  /// cache key); the kernel name carries a hash of them. The backward
  /// differentiates the score_mod; the deterministic backward counts its
  /// dQ turns by the mask_mod's own ranges where they agree from both sides
  /// (fa-tile-backward).
  std::string scoreMod;
  std::string maskMod;
  /// Attention sinks (see fa.attention): the kernel takes one f32 logit per
  /// query head that joins every row's softmax denominator; the backward
  /// also adds the sinks' gradient (the deterministic one in a fixed
  /// order, through a workspace of per-query-tile shares).
  bool sinks = false;
  /// With sinks: one logit per head and query row, head-major
  /// (fa.attention's sinks_per_row; the kernel's sinks are the call's [Hq]
  /// read as [H, Sq]): the runtime's packed GQA decode, whose rows are a
  /// K/V head's query heads.
  bool sinksPerRow = false;
  /// A block mask (see fa.attention's key_ranges): the forward takes the
  /// keys each 16 query rows keep, the backward the query rows that keep
  /// each 16 keys, as i32 [B, Hb, groups, 4] tables of [first, end,
  /// whole_first, whole_end) ranges, visits only the tiles they meet and
  /// skips the mask_mod where they keep a tile whole. Needs a mask_mod.
  bool blockMask = false;
  /// Not attention but the block mask program of this spec's mask
  /// (fa.block_mask: the tables a blockMask kernel takes), made from the
  /// mask_mod, the causal flag and the arch alone (the other fields do
  /// not change it).
  bool blockMaskProgram = false;
  /// A packed variable-length batch (flash-attn's varlen convention; see
  /// fa.attention's cu_seqlens): the forward takes Q, O [1, Hq, total_q,
  /// D], K, V [1, Hkv, total_k, D], LSE [1, Hq, total_q] and the i32
  /// offsets cu_seqlens_q, cu_seqlens_k [B + 1]; sequence b attends only
  /// within its own rows. The backward on mma and simt (deterministic: turn
  /// counters per sequence); no block mask with it.
  bool varlen = false;
  /// A KV cache's filled lengths (fa.attention's kv_lens: flash-attn's
  /// cache_seqlens / seqused_k): the forward takes i32 [B] (per varlen
  /// sequence with varlen), and batch entry b attends to its first
  /// kv_lens[b] keys only. Forward only; no block mask with it.
  bool kvLens = false;
  /// Split-KV (fa.attention's partials): the forward splits each query
  /// tile's keys into parts, a kernel each, and a second kernel merges the
  /// parts by their log-sum-exps. The parts are chosen at launch (the
  /// kernels take f32 workspaces of every part's output and LSE). Forward
  /// only; no block mask with it.
  bool splitKv = false;
  /// A paged KV cache (fa.attention's block_table, flash-attn's
  /// block_table): the forward takes K, V as a pool of pages [num_pages,
  /// Hkv, P, D] and an i32 page table [B, max_pages]; block-n must divide
  /// the page size P (checked at launch) unless pageGather. With varlen,
  /// the table has a row per sequence and only Q, O, LSE are packed (the
  /// key offsets give each sequence's key count). Forward only; no block
  /// mask with it.
  bool pagedKv = false;
  /// With pagedKv: the K/V tiles are read row by row, each row's page
  /// looked up in the table, so that any page size (1 up) serves any
  /// block-n; without it a tile is read from one page (one lookup a
  /// tile). The runtime sets it where block-n does not divide the page.
  bool pageGather = false;
  /// K/V entries by index (fa.attention's cache_batch_idx, flash-attn's
  /// cache_batch_idx): the forward takes i32 [B] and batch entry b reads
  /// K/V entry index[b]. Forward only; not with varlen, a paged cache or a
  /// block mask.
  bool cacheBatchIndex = false;

  bool hasVariant() const { return !scoreMod.empty() || !maskMod.empty(); }
  /// The dQ chains the kernel is built with: 1 unless deterministic (and
  /// for 0, the default left unresolved).
  int64_t dqChainsOrOne() const {
    return deterministic && dqChains > 1 ? dqChains : 1;
  }

  /// O's element type: outDtype, else bf16 for FP8 inputs, else dtype.
  ElementType outputDtype() const {
    if (outDtype)
      return *outDtype;
    return dtype == ElementType::e4m3 ? ElementType::bf16 : dtype;
  }

  double effectiveScale() const;

  /// Whether a field is left to the defaults (strategy auto, or a tile
  /// size, warps or stages of 0).
  bool needsDefaults() const;
};

/// What the compiler reads in a spec's variant texts that the ranking of
/// default tiles takes into account (mlir::fa::variantTraits derives it:
/// this layer does not parse MLIR). All false for a spec without variant.
struct VariantTraits {
  /// A load of a captured tensor whose index depends on the key (kv_idx):
  /// the keys' document ids, a bias table's column. Every thread then loads
  /// one value per key column it holds, and the wide forward tiles spill
  /// (docs/benchmarks.md (ax), (ay)).
  bool keyIndexedCaptures = false;
};

/// The rule for defaulted tiles (the runtime's and fa-compile's): of the
/// ranked candidates, the first that compiles without spills (or with no
/// more than its strategy's toleratedSpillBytes: a tile measured faster,
/// spills and all), else the one that spills the fewest bytes (the first
/// of equals). `compileAndSpills`
/// compiles one: nullopt when it does not compile, else the bytes ptxas
/// spilled (stored plus loaded, every kernel of the module; 0 = none). The
/// index of the choice, nullopt when none compiles.
///
/// Once the first candidate has spilled (or failed) a trial is unavoidable:
/// with `compileAhead`, the candidates [i, i + wave) are handed to it
/// together before candidate i is judged (it compiles them at once, see
/// runConcurrently), so that `compileAndSpills` finds them compiled.
/// `firstWave` > 1: the first candidates [0, firstWave) go to it together
/// too, before the first is judged (a trial expected: firstTrialWave).
std::optional<size_t> chooseDefaultCandidate(
    const std::vector<KernelSpec> &candidates,
    const std::function<std::optional<int64_t>(const KernelSpec &)>
        &compileAndSpills,
    const std::function<void(size_t first, size_t last)> &compileAhead =
        nullptr,
    size_t wave = 1, size_t firstWave = 1);

/// Candidates compiled at once after a spill: FA_TRIAL_WAVE (1 to 64; 1 =
/// one at a time), else the host's hardware threads, at most 4 (a
/// candidate's compile is mostly one ptxas process).
size_t trialWave();

/// Runs `work(i)` for every i in [first, last) at once, each on a thread
/// of its own (the first on the calling one), and returns when all have.
void runConcurrently(size_t first, size_t last,
                     const std::function<void(size_t)> &work);

/// The compiler's version (project version and source revision), part of
/// every cache key.
const char *compilerVersion();

const char *toString(ElementType type);
/// Parses "f32", "f16", "bf16", "e4m3"; false if unknown.
bool parseElementType(const std::string &text, ElementType &type);

} // namespace fa

#endif // FA_LIB_KERNELSPEC_H
