//===- FAOps.td - Operations of the fa dialect -------------*- tablegen -*-===//
//
// Problem-level and tile-level operations. The tile level spells out the
// FlashAttention-2 forward algorithm one step per op so that each step can be
// lowered (and tested) on its own.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAOPS_TD
#define FA_DIALECT_FAOPS_TD

include "dialect/FADialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

def FA_FloatMemRef4D : MemRefRankOf<[F16, BF16, F32, F8E4M3FN], [4]>;
// FP8 descale factors, one per batch entry and K/V head: f32 [B, Hkv].
def FA_DescaleMemRef : MemRefRankOf<[F32], [2]>;
def FA_LseMemRef : MemRefRankOf<[F32], [3]>;
def FA_SinkMemRef : MemRefRankOf<[F32], [1]>;
// A tensor a score_mod / mask_mod reads by index (a captured tensor):
// rank 1-4, in global memory.
def FA_CaptureMemRef : MemRefRankOf<[F32, F16, BF16, I32, I64, I8], [1, 2, 3, 4]>;
// A block mask's table of index ranges, [B, Hb, groups, 4] i32 (see
// fa.attention's key_ranges).
def FA_RangeTableMemRef : MemRefRankOf<[I32], [4]>;
// Cumulative sequence lengths of a packed (varlen) batch: i32 [B + 1].
def FA_SeqOffsetsMemRef : MemRefRankOf<[I32], [1]>;
// A paged KV cache's page table: i32 [B, max_pages].
def FA_PageTableMemRef : MemRefRankOf<[I32], [2]>;
// Tiles (isTileType): rank 1 or 2, static dims in [1, 65536], unplaced or
// with an fa placement encoding.
def FA_TilePred : CPred<"::mlir::fa::isTileType($_self)">;
def FA_F32Tile : Type<And<[RankedTensorOf<[F32]>.predicate, FA_TilePred]>,
    "f32 tile (rank 1 or 2, static dims in [1, 65536], no encoding or an fa "
    "placement)", "::mlir::RankedTensorType">;
def FA_AnyFloatTile : Type<And<[RankedTensorOf<[F16, BF16, F32, F8E4M3FN]>.predicate,
                                FA_TilePred]>,
    "f16, bf16, f32 or f8E4M3FN tile (rank 1 or 2, static dims in [1, 65536], no "
    "encoding or an fa placement)", "::mlir::RankedTensorType">;

//===----------------------------------------------------------------------===//
// Problem level
//===----------------------------------------------------------------------===//

def FA_AttentionOp : FA_Op<"attention", [IsolatedFromAbove,
    AttrSizedOperandSegments]> {
  let summary = "scaled dot-product attention with log-sum-exp (forward)";
  let description = [{
    Computes, for every batch `b`, query head `h` and query row `i`:

    ```
    s[j]     = scale * dot(Q[b, h, i, :], K[b, h / G, j, :])   (masked: -inf)
    LSE[b, h, i] = log(sum_j exp(s[j]))
    O[b, h, i, :] = sum_j exp(s[j] - LSE[b, h, i]) * V[b, h / G, j, :]
    ```

    Shapes: Q and O are `[B, Hq, Sq, D]`, K and V `[B, Hkv, Sk, D]`, LSE
    `[B, Hq, Sq]` in f32. `G = Hq / Hkv` query heads share one K/V head
    (grouped-query attention; `Hkv = 1` is multi-query attention). The head
    dim `D` is static; batch, heads and lengths may be dynamic. Q, K, V and O
    share one element type (f32, f16 or bf16); the computation accumulates in
    f32. A row that sees no key (possible only with the causal mask when
    `Sq > Sk`) yields O = 0 and LSE = -inf.

    Example:

    ```mlir
    fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32, mask = #fa.mask<causal>}
      : memref<?x8x?x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>
      into memref<?x8x?x64xf16>, memref<?x8x?xf32>
    ```

    Variants are regions, each a scalar function of one score:

    * `score_mod(score: f32, b, h, q_idx, kv_idx, q_len, kv_len: index)`
      yields the score that enters the softmax in place of `s[j]` (which it
      receives already scaled); e.g. a softcap `cap * tanh(score / cap)`.
    * `mask_mod(b, h, q_idx, kv_idx, q_len, kv_len: index)` yields an `i1`,
      true where the score is kept; e.g. a sliding window. It narrows the
      `mask` attribute (both must keep a score).

    `q_idx`, `kv_idx` are the absolute query and key rows, `q_len`, `kv_len`
    the lengths Sq and Sk (for masks aligned to the bottom right, as the
    causal mask is). With `captures` (tensors the regions read by index:
    document ids, per-head slopes, a bias table), each region takes one
    more memref argument per capture, in order, after its indices. The
    regions hold arith and math ops, and `memref.load` / `memref.dim` of
    those arguments, and end in `fa.yield`. Each load clamps its indices
    to the tensor's last (so padding rows and keys, which a region receives
    as they are, and indices it computes past a tensor read inside it; a
    capture must not be empty). The compiler reads affine masks (signed comparisons of sums
    of `q_idx`, `kv_idx`, the lengths and constants, combined with
    and/or/not) to skip the K/V tiles a query tile cannot see and the
    per-element test on tiles it sees whole; other masks are tested on every
    element of every tile.

    With `sinks` (attention sinks, as gpt-oss learns them), each query
    head's sink logit joins every row's softmax denominator without a value
    row: `LSE = log(exp(sink[h]) + sum_j exp(s[j]))`, and O (the same
    formula) sums to less than one. The sink is a logit like the scaled
    scores (no scale, no score_mod applies to it). A row that sees no key
    then has O = 0 and LSE = sink[h]. With `sinks_per_row` the sinks hold
    one logit per head and query row, head-major (`sink[h * Sq + i]`, Hq x
    Sq of them): the runtime's packed GQA decode, whose rows are a K/V
    head's query heads, each with its own sink.

    With `key_ranges` (a block mask, for masks the compiler cannot read:
    those that read captured tensors, such as document ids), the caller
    bounds the keys each group of 16 query rows keeps: `key_ranges[b, hb,
    r / 16] = [first, end, whole_first, whole_end)` (i32 [B, Hb, ceil(Sq /
    16), 4], Hb = 1 for a mask that is the same for every head, else Hq; hb
    = min(h, Hb - 1)): `[first, end)` holds every key the mask keeps for
    rows `16 * (r / 16)` to `16 * (r / 16) + 15`, and `[whole_first,
    whole_end)` only keys that every one of those rows keeps. A query tile
    visits only the K/V tiles that meet the union of its groups' ranges
    (intersected with what the mask attribute and an affine mask_mod allow);
    an empty range (`first >= end`) adds nothing. A visited tile inside the
    intersection of its groups' whole ranges skips the mask_mod (see
    `fa.whole_range`). The table is a promise: keys outside `[first, end)`
    are not visited, and scores inside `[whole_first, whole_end)` are kept,
    whatever the mask_mod says.

    With `cu_seqlens` (a packed, variable-length batch, as flash-attn's
    varlen functions take it), Q, O and LSE hold the rows of every sequence
    one after another (`[1, Hq, total_q, D]`, `[1, Hq, total_q]`), K and V
    likewise (`[1, Hkv, total_k, D]`), and `cu_seqlens_q` / `cu_seqlens_k`
    (i32 `[B + 1]`, non-decreasing from 0) give where each of the `B`
    sequences starts: sequence `b` has the query rows `[cu_seqlens_q[b],
    cu_seqlens_q[b + 1])` and the keys `[cu_seqlens_k[b], cu_seqlens_k[b +
    1])`, and attends only within itself. Everything above then holds per
    sequence: `b` is the sequence, `q_idx`, `kv_idx` count from its first
    row, `q_len`, `kv_len` are its lengths (the causal mask is aligned to
    each sequence's bottom right). Offsets outside the rows are clamped to
    them (a sequence never reads another's rows nor past the tensors).

    With `kv_lens` (i32 `[B]`, a KV cache's filled lengths, flash-attn's
    `cache_seqlens` / `seqused_k`), batch entry (or varlen sequence) `b`
    uses only its first `kv_lens[b]` keys (clamped to the keys it has):
    `kv_len` is that count everywhere above, so the causal mask aligns the
    queries to the end of the filled part, and keys past it are never
    read into a score.

    With `block_table` (i32 `[B, max_pages]`, a paged KV cache, flash-attn's
    `block_table`), K and V are a pool of pages, `[num_pages, Hkv, P, D]`
    (P = the page size, dim 2), and batch entry `b` has the keys `j` in
    `[0, max_pages * P)` at `K[block_table[b, j / P], h, j % P]`: page
    numbers outside the pool are clamped into it. `kv_lens` (usually
    given with it) counts the keys used from the first. With `cu_seqlens`
    too, the table has a row per sequence, only Q, O and LSE are packed,
    and sequence `b` has the first `cu_seqlens_k[b + 1] - cu_seqlens_k[b]`
    keys of its pages (at most `max_pages * P`). A program reads a
    K/V tile from one page, so the tiles' block-n must divide P (the
    caller's to check).

    With `cache_batch_idx` (i32 `[B]`, flash-attn's `cache_batch_idx`),
    batch entry `b` reads the K/V batch entry `cache_batch_idx[b]` (clamped
    into K's batch): K and V hold the caches of more (or other) entries
    than the queries. Not with cu_seqlens or a block_table.

    With `partials(%po, %plse)` (split-KV, for few query rows over many
    keys), the keys of each query tile are split into `N` contiguous parts
    of whole K/V tiles, `N = dim(po, 0) / B`: part `s` of batch entry `b`
    attends its keys only and writes its own normalized output and
    log-sum-exp, f32, to `po[s * B + b]` (`[N * B, Hq, Sq, D]`) and
    `plse[s * B + b]` (`[N * B, Hq, Sq]`); then each row's parts are merged
    by their log-sum-exps (`fa.merge_partial`) into O and LSE. A part that
    sees no key holds 0 and -inf, which the merge ignores. The sinks join
    the merged result once.

    ```mlir
    fa.attention %q, %k, %v into %o, %lse cu_seqlens(%cq, %ck) {scale = 0.125 : f32}
      : memref<1x8x?x64xf16>, memref<1x2x?x64xf16>, memref<1x2x?x64xf16>
      into memref<1x8x?x64xf16>, memref<1x8x?xf32>
      cu_seqlens memref<?xi32>, memref<?xi32>
    ```

    ```mlir
    fa.attention %q, %k, %v into %o, %lse sinks %s {scale = 0.125 : f32}
      : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
      into memref<?x8x?x64xf16>, memref<?x8x?xf32> sinks memref<8xf32>
    ```

    ```mlir
    fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
      : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
      into memref<?x8x?x64xf16>, memref<?x8x?xf32>
      mask_mod {
      ^bb0(%b: index, %h: index, %q: index, %kv: index, %sq: index, %sk: index):
        %c1024 = arith.constant 1024 : index
        %lo = arith.subi %q, %c1024 : index
        %keep = arith.cmpi sge, %kv, %lo : index
        fa.yield %keep : i1
      }
    ```
  }];
  let arguments = (ins
    Arg<FA_FloatMemRef4D, "queries [B, Hq, Sq, D]", [MemRead]>:$query,
    Arg<FA_FloatMemRef4D, "keys [B, Hkv, Sk, D]", [MemRead]>:$key,
    Arg<FA_FloatMemRef4D, "values [B, Hkv, Sk, D]", [MemRead]>:$value,
    Arg<FA_FloatMemRef4D, "output [B, Hq, Sq, D]", [MemWrite]>:$output,
    Arg<FA_LseMemRef, "log-sum-exp [B, Hq, Sq]", [MemWrite]>:$lse,
    Arg<Optional<FA_SinkMemRef>, "sink logits [Hq]", [MemRead]>:$sinks,
    Arg<Optional<FA_RangeTableMemRef>, "block mask: the keys each 16 query rows keep [B, Hb, ceil(Sq / 16), 4]", [MemRead]>:$key_ranges,
    Arg<Optional<FA_SeqOffsetsMemRef>, "varlen: where each sequence's query rows start [B + 1]", [MemRead]>:$cu_seqlens_q,
    Arg<Optional<FA_SeqOffsetsMemRef>, "varlen: where each sequence's keys start [B + 1]", [MemRead]>:$cu_seqlens_k,
    Arg<Optional<FA_SeqOffsetsMemRef>, "the keys each batch entry (sequence) uses [B]", [MemRead]>:$kv_lens,
    Arg<Optional<FA_PageTableMemRef>, "paged KV: each batch entry's pages [B, max_pages]", [MemRead]>:$block_table,
    Arg<Optional<FA_SeqOffsetsMemRef>, "the K/V batch entry of each batch entry [B]", [MemRead]>:$cache_batch_idx,
    Arg<Optional<FA_FloatMemRef4D>, "split-KV: each part's output [N * B, Hq, Sq, D], f32", [MemRead, MemWrite]>:$partial_output,
    Arg<Optional<FA_LseMemRef>, "split-KV: each part's log-sum-exp [N * B, Hq, Sq]", [MemRead, MemWrite]>:$partial_lse,
    Arg<Optional<FA_DescaleMemRef>, "FP8: Q's descale factors [B, Hkv]", [MemRead]>:$q_descale,
    Arg<Optional<FA_DescaleMemRef>, "FP8: K's descale factors [B, Hkv]", [MemRead]>:$k_descale,
    Arg<Optional<FA_DescaleMemRef>, "FP8: V's descale factors [B, Hkv]", [MemRead]>:$v_descale,
    Arg<Variadic<FA_CaptureMemRef>, "tensors the variant regions read", [MemRead]>:$captures,
    F32Attr:$scale,
    DefaultValuedAttr<FA_MaskAttr, "::mlir::fa::MaskKind::none">:$mask,
    UnitAttr:$sinks_per_row
  );
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `,` $value `into` $output `,` $lse (`sinks` $sinks^)?
    (`key_ranges` $key_ranges^)?
    (`cu_seqlens` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `)`)?
    (`kv_lens` $kv_lens^)? (`block_table` $block_table^)?
    (`cache_batch_idx` $cache_batch_idx^)?
    (`partials` `(` $partial_output^ `,` $partial_lse `)`)?
    (`descales` `(` $q_descale^ `,` $k_descale `,` $v_descale `)`)? attr-dict `:`
    type($query) `,` type($key) `,` type($value) `into` type($output) `,` type($lse)
    (`sinks` type($sinks)^)? (`key_ranges` type($key_ranges)^)?
    (`cu_seqlens` type($cu_seqlens_q)^ `,` type($cu_seqlens_k))?
    (`kv_lens` type($kv_lens)^)? (`block_table` type($block_table)^)?
    (`cache_batch_idx` type($cache_batch_idx)^)?
    (`partials` type($partial_output)^ `,` type($partial_lse))?
    (`descales` type($q_descale)^ `,` type($k_descale) `,` type($v_descale))?
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The static head dimension D.
    int64_t getHeadDim() {
      return ::llvm::cast<::mlir::MemRefType>(getQuery().getType()).getShape()[3];
    }
  }];
}

def FA_AttentionBackwardOp : FA_Op<"attention_backward", [IsolatedFromAbove,
    AttrSizedOperandSegments]> {
  let summary = "gradients of scaled dot-product attention from the saved log-sum-exp";
  let description = [{
    Given the forward's inputs, its output `O`, its log-sum-exp `LSE` and the
    gradient `dO` of a loss with respect to `O`, computes the gradients with
    respect to Q, K and V. With `s = scale * Q K^T` (masked scores excluded)
    and `P = exp(s - LSE)` the forward's probabilities, for every batch `b`
    and query head `h` (K/V head `h / G`):

    ```
    dV[j]   += sum_i P[i, j] dO[i]                  (summed over the G query heads)
    dP[i, j] = dot(dO[i], V[j])
    D[i]     = sum_j P[i, j] dP[i, j] = dot(dO[i], O[i])
    dS[i, j] = P[i, j] (dP[i, j] - D[i])
    dQ[i]    = scale * sum_j dS[i, j] K[j]
    dK[j]   += scale * sum_i dS[i, j] Q[i]          (summed over the G query heads)
    ```

    P is recomputed from `LSE`, never stored: the N x N matrices of the
    forward are not materialized here either. Shapes and element types are
    those of `fa.attention`: dQ like Q, dK and dV like K, dO like O. Two f32
    workspaces belong to the caller: `delta` `[B, Hq, Sq]` receives `D`, and
    `dq_accum` `[B, Hq, Sq, D]` accumulates dQ in f32 before it is rounded
    to dQ's element type. A row that saw no key (LSE = -inf) gets dQ = 0 and
    adds nothing to dK and dV.

    The K/V tiles' shares of dQ are added in any order, so dQ's last bits
    may differ from run to run. With a third workspace `dq_order` (i32, one
    counter per query tile) the backward is deterministic: the shares are
    added in K/V tile order (`fa.wait_turn`, `fa.pass_turn`), which gives
    bitwise identical dQ run to run. With a mask_mod the turns count the
    K/V tiles that visit each query tile. With a block mask the
    deterministic mode takes the forward's `key_ranges` too: the K/V tiles
    that take turns at query tile `i` are those its key ranges give it
    (`fa.kv_tile_range`) among the K/V tiles whose query ranges visit it;
    each waits for the one before it in turn order (`fa.previous_visitor`),
    so tables whose two sides disagree cost visits, never a hang.
    `dq_chains = K` (deterministic only; 1 by default) splits each query
    tile's turns into K chains: the K/V tile of rank r among those that
    visit it adds to copy `r mod K` of the accumulator on turn `r / K`, and
    the copies are summed in chain order when dQ is rounded. `dq_accum` and
    `dq_order` then hold K copies along the head dimension (`[B, K * Hq,
    ...]`, copy c of head h at `c * Hq + h`). A chain is K times shorter,
    so the last K/V tile waits K times less for its first turn.

    With the forward's `sinks`, `grad_sinks` (f32 [Hq], which the caller
    zeroes) receives their gradient, added program by program (its last
    bits may differ from run to run):

    ```
    dsink[h] += -sum_{b, i} exp(sink[h] - LSE[b, h, i]) D[b, h, i]
    ```

    The deterministic mode takes a fourth workspace with the sinks,
    `sink_shares` (f32, shaped like `dq_order`): each query tile's share of
    the sum is stored in its own element, and one program per head adds
    them in (batch, tile) order and stores `dsink[h]`.

    (a sink's probability times the gradient of its score, whose value row
    is zero). The other gradients need nothing new: P comes from the LSE,
    which counts the sink.

    With `query_ranges` (the block mask's mirror, see `fa.attention`'s
    `key_ranges`): `query_ranges[b, hb, j / 16] = [first, end, whole_first,
    whole_end)` (i32 [B, Hb, ceil(Sk / 16), 4]): `[first, end)` holds every
    query row that keeps one of keys `16 * (j / 16)` to `16 * (j / 16) +
    15`, `[whole_first, whole_end)` only rows that keep all of them; a K/V
    tile visits only the query tiles that meet its groups' ranges, and
    skips the mask_mod of those inside its groups' whole ranges.

    The variant regions are those of `fa.attention` (the forward's, whose
    LSE this backward reads): with a score_mod `s' = score_mod(s)`, `P =
    exp(s' - LSE)` and `dS` is multiplied by `d score_mod / d s` (the
    compiler differentiates the region; an op without a derivative rule is
    an error). The deterministic mode counts a mask_mod's K/V tiles per
    query tile (with a block mask, by both of its tables: `key_ranges`).

    With `cu_seqlens` (a packed varlen batch, as `fa.attention`'s): every
    tensor holds the rows of all sequences one after another (batch 1;
    `delta` and `dq_accum` too), and sequence `b`'s queries see only its
    own keys; dK and dV rows of a sequence gather only its own queries'
    shares. The deterministic mode's `dq_order` is then `[B, Hq,
    ceil(max_seqlen_q / block-m)]`, a counter per sequence's query tile.

    ```mlir
    fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv
        workspace %delta, %dq_accum {scale = 0.125 : f32, mask = #fa.mask<causal>}
      : memref<?x8x?x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>,
        memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?xf32>
      into memref<?x8x?x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>
      workspace memref<?x8x?xf32>, memref<?x8x?x64xf32>
    ```
  }];
  let arguments = (ins
    Arg<FA_FloatMemRef4D, "queries [B, Hq, Sq, D]", [MemRead]>:$query,
    Arg<FA_FloatMemRef4D, "keys [B, Hkv, Sk, D]", [MemRead]>:$key,
    Arg<FA_FloatMemRef4D, "values [B, Hkv, Sk, D]", [MemRead]>:$value,
    Arg<FA_FloatMemRef4D, "forward output [B, Hq, Sq, D]", [MemRead]>:$output,
    Arg<FA_FloatMemRef4D, "gradient of the output [B, Hq, Sq, D]", [MemRead]>:$grad_output,
    Arg<FA_LseMemRef, "forward log-sum-exp [B, Hq, Sq]", [MemRead]>:$lse,
    Arg<FA_FloatMemRef4D, "gradient of the queries [B, Hq, Sq, D]", [MemWrite]>:$grad_query,
    Arg<FA_FloatMemRef4D, "gradient of the keys [B, Hkv, Sk, D]", [MemWrite]>:$grad_key,
    Arg<FA_FloatMemRef4D, "gradient of the values [B, Hkv, Sk, D]", [MemWrite]>:$grad_value,
    Arg<FA_LseMemRef, "workspace for D = rowsum(dO * O) [B, Hq, Sq]", [MemRead, MemWrite]>:$delta,
    Arg<MemRefRankOf<[F32], [4]>, "workspace accumulating dQ [B, dq_chains * Hq, Sq, D]", [MemRead, MemWrite]>:$dq_accum,
    Arg<Optional<MemRefRankOf<[I32], [3]>>, "deterministic mode: whose turn it is to add to dQ, per chain and query tile [B, dq_chains * Hq, ceil(Sq / block-m)] (B, Sq: the sequences' with cu_seqlens)", [MemRead, MemWrite]>:$dq_order,
    Arg<Optional<FA_SinkMemRef>, "the forward's sink logits [Hq]", [MemRead]>:$sinks,
    Arg<Optional<FA_SinkMemRef>, "gradient of the sink logits [Hq], added to", [MemRead, MemWrite]>:$grad_sinks,
    Arg<Optional<MemRefRankOf<[F32], [3]>>, "deterministic mode with sinks: each query tile's share of the sinks' gradient [B, Hq, ceil(Sq / block-m)] (B, Sq: the sequences' with cu_seqlens)", [MemRead, MemWrite]>:$sink_shares,
    Arg<Optional<FA_RangeTableMemRef>, "block mask: the query rows each 16 keys are kept by [B, Hb, ceil(Sk / 16), 4]", [MemRead]>:$query_ranges,
    Arg<Optional<FA_RangeTableMemRef>, "deterministic mode with a block mask: the keys each 16 query rows keep [B, Hb, ceil(Sq / 16), 4]", [MemRead]>:$key_ranges,
    Arg<Optional<FA_SeqOffsetsMemRef>, "varlen: where each sequence's query rows start [B + 1]", [MemRead]>:$cu_seqlens_q,
    Arg<Optional<FA_SeqOffsetsMemRef>, "varlen: where each sequence's keys start [B + 1]", [MemRead]>:$cu_seqlens_k,
    Arg<Variadic<FA_CaptureMemRef>, "tensors the variant regions read (no gradient)", [MemRead]>:$captures,
    F32Attr:$scale,
    DefaultValuedAttr<FA_MaskAttr, "::mlir::fa::MaskKind::none">:$mask,
    DefaultValuedAttr<I64Attr, "1">:$dq_chains
  );
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $grad_output `,` $lse
    (`sinks` $sinks^)?
    `into` $grad_query `,` $grad_key `,` $grad_value
    (`grad_sinks` $grad_sinks^)?
    `workspace` $delta `,` $dq_accum (`,` $dq_order^)?
    (`sink_shares` $sink_shares^)?
    (`query_ranges` $query_ranges^)? (`key_ranges` $key_ranges^)?
    (`cu_seqlens` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `)`)? attr-dict `:`
    type($query) `,` type($key) `,` type($value) `,` type($output) `,`
    type($grad_output) `,` type($lse) (`sinks` type($sinks)^)?
    `into` type($grad_query) `,` type($grad_key) `,` type($grad_value)
    (`grad_sinks` type($grad_sinks)^)?
    `workspace` type($delta) `,` type($dq_accum) (`,` type($dq_order)^)?
    (`sink_shares` type($sink_shares)^)?
    (`query_ranges` type($query_ranges)^)?
    (`key_ranges` type($key_ranges)^)?
    (`cu_seqlens` type($cu_seqlens_q)^ `,` type($cu_seqlens_k))?
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The static head dimension D.
    int64_t getHeadDim() {
      return ::llvm::cast<::mlir::MemRefType>(getQuery().getType()).getShape()[3];
    }
  }];
}

def FA_BlockMaskOp : FA_Op<"block_mask", [IsolatedFromAbove]> {
  let summary = "a mask_mod's block mask: the ranges its kept scores lie in";
  let description = [{
    Fills the two range tables of a block mask (see `fa.attention`'s
    `key_ranges` and `fa.attention_backward`'s `query_ranges`) for the
    problem whose queries and keys are `query` and `key` (only their sizes
    are read: B, Hq and Sq of the queries, Sk of the keys) and the mask
    that keeps a score where both `mask` and the `mask_mod` region do:

    ```
    key_ranges[b, hb, g]    = [first, end) of the keys kept for a row in 16 g .. 16 g + 15,
                              [whole_first, whole_end) of the keys kept for all of them
    query_ranges[b, hb, j]  = [first, end) of the rows that keep a key in 16 j .. 16 j + 15,
                              [whole_first, whole_end) of the rows that keep all of them
    ```

    `[first, end)` exactly (the smallest first and the largest end), or
    `[Sk, 0)` / `[Sq, 0)` where nothing is kept. The whole range is that of
    the 16 x 16 squares of scores (within Sq x Sk) the mask keeps entirely,
    when they are consecutive in the entry's row (column) of squares (none:
    `[Sk, 0)` / `[Sq, 0)`; not consecutive: the end is 0): never a score
    the mask drops. Hb (the tables' second size) is Hq, or 1 for
    a mask that is the same for every head (the region is then evaluated
    at head 0). The region reads `captures` as in `fa.attention`. This is
    the program a caller runs once per mask and shape, as FlexAttention's
    `create_block_mask` is, and passes to every forward and backward that
    uses the mask.

    ```mlir
    fa.block_mask %q, %k into %key_ranges, %query_ranges {mask = #fa.mask<causal>}
      : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
      into memref<?x?x?x4xi32>, memref<?x?x?x4xi32>
      captures(%doc : memref<?x?xi32>)
      mask_mod {
      ^bb0(%b: index, %h: index, %qi: index, %kv: index, %sq: index, %sk: index,
           %ids: memref<?x?xi32>):
        ...
      }
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[AnyType], [4]>, "queries (their sizes only)">:$query,
    Arg<MemRefRankOf<[AnyType], [4]>, "keys (their sizes only)">:$key,
    Arg<FA_RangeTableMemRef, "the keys each 16 rows keep [B, Hb, ceil(Sq / 16), 4]", [MemWrite]>:$key_ranges,
    Arg<FA_RangeTableMemRef, "the rows that keep each 16 keys [B, Hb, ceil(Sk / 16), 4]", [MemWrite]>:$query_ranges,
    Arg<Variadic<FA_CaptureMemRef>, "tensors the mask_mod reads", [MemRead]>:$captures,
    DefaultValuedAttr<FA_MaskAttr, "::mlir::fa::MaskKind::none">:$mask
  );
  let regions = (region SizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `into` $key_ranges `,` $query_ranges attr-dict `:`
    type($query) `,` type($key) `into` type($key_ranges) `,` type($query_ranges)
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    `mask_mod` $mask_mod
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tile level
//===----------------------------------------------------------------------===//

def FA_GridOp : FA_Op<"grid", [SingleBlock, NoTerminator,
    RecursiveMemoryEffects,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "one program per (batch, head, tile)";
  let description = [{
    Runs its body once for every point of a three-dimensional grid: the block
    arguments are the batch index, a head and a tile index, and the operands
    are their (exclusive) upper bounds. In the forward a program owns a
    query tile of a query head; in the backward's main grid it owns a K/V
    tile of a K/V head. Programs run in any order and concurrently: they
    write disjoint rows, or combine through `fa.accumulate_tile`. A GPU
    lowering maps the grid onto thread blocks, a CPU lowering onto a loop
    nest. Grids of one function run one after another; each then has a
    `program` name, and on the GPU grid `p` of function `f` becomes kernel
    `f_p` (the backward's `delta`, `dkdv` and `dq`).

    `ragged` (a varlen batch): the batch index is a sequence with a length
    of its own and `num_q_tiles` only bounds the tiles of any sequence;
    programs past their sequence's rows do nothing, so a launch may stop at
    the longest sequence's tiles.

    `tiles_outermost`: a GPU lowering starts the programs of tile t (every
    batch entry and head) before those of tile t + 1, instead of one (batch,
    head) after another. Where a program's work falls with its tile index
    (the causal backward's first K/V tiles visit the most query tiles, a
    K/V tile of sink tokens visits every one), the longest programs then
    start first, on every head at once, and the last wave ends sooner. The
    launch is the same grid; the block index is read in this order.

    ```mlir
    fa.grid (%b, %h, %qt) in (%batch, %heads, %num_q_tiles) {
      ...
    }
    ```
  }];
  let arguments = (ins Index:$batch_size, Index:$num_heads, Index:$num_q_tiles,
                       OptionalAttr<StrAttr>:$program, UnitAttr:$ragged,
                       UnitAttr:$tiles_outermost);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$batchSize, "::mlir::Value":$numHeads,
                   "::mlir::Value":$numQTiles)>
  ];
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    ::mlir::BlockArgument getBatchIndex() { return getBodyBlock().getArgument(0); }
    ::mlir::BlockArgument getHeadIndex() { return getBodyBlock().getArgument(1); }
    ::mlir::BlockArgument getQTileIndex() { return getBodyBlock().getArgument(2); }
    /// The third grid index, whatever tile it counts (query or K/V tile).
    ::mlir::BlockArgument getTileIndex() { return getBodyBlock().getArgument(2); }
  }];
}

def FA_LoadTileOp : FA_Op<"load_tile", [AttrSizedOperandSegments]> {
  let summary = "load a tile of rows of one (batch, head) into a tile value";
  let description = [{
    Reads rows `[row, row + R)` of `source[batch, head]` into a tile whose
    first dimension is `R`; the remaining tile dimensions cover the trailing
    dimensions of the source whole. Rows at or past the end of the sequence
    read as zero, so a tail tile of a length that is not a multiple of `R` is
    padded. Used for the resident Q tile and the streamed K and V tiles.
    With `sequence(%first, %end)` (a packed varlen batch) the sequence
    occupies rows `[first, end)` of `source[batch, head]` (within its rows):
    `row` counts from `first`, and rows at or past `end` read as zero.

    With `pages(%table)` (a paged KV cache whose pages need not hold whole
    tiles) the source is a pool of pages `[num_pages, H, P, ...]` and
    `batch` is a row of the i32 page table `[B, max_pages]`: the sequence
    is the pages `table[batch, 0]`, `table[batch, 1]`, ... one after
    another, so its row `k` is row `k % P` of page `table[batch, k / P]`,
    looked up row by row (the page index clamped into the table's row and
    the page number into the pool, so that no row reads outside them).
    `row` and `sequence` count in that sequence; the sequence is required
    (its end is the number of keys).

    ```mlir
    %q_tile = fa.load_tile %q[%b, %h, %q_start]
      : memref<?x?x?x64xf32> -> tensor<16x64xf32>
    %k_tile = fa.load_tile %k[%c0, %h, %kv_start] sequence(%first, %end)
      : memref<1x?x?x64xf32> -> tensor<32x64xf32>
    %k_rows = fa.load_tile %k[%b, %h, %kv_start] sequence(%c0, %kv_len)
      pages(%table : memref<?x?xi32>) : memref<?x?x?x64xf16> -> tensor<32x64xf16>
    ```
  }];
  let arguments = (ins Arg<AnyMemRef, "", [MemRead]>:$source, Index:$batch,
                       Index:$head, Index:$row, Variadic<Index>:$sequence,
                       Arg<Optional<FA_PageTableMemRef>, "", [MemRead]>:$pages);
  let results = (outs FA_AnyFloatTile:$tile);
  let assemblyFormat = [{
    $source `[` $batch `,` $head `,` $row `]` (`sequence` `(` $sequence^ `)`)? (`pages` `(` $pages^ `:` type($pages) `)`)? attr-dict `:` type($source) `->` type($tile)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$tile, "::mlir::Value":$source,
                   "::mlir::Value":$batch, "::mlir::Value":$head,
                   "::mlir::Value":$row), [{
      build($_builder, $_state, tile, source, batch, head, row,
            ::mlir::ValueRange(), ::mlir::Value());
    }]>,
    OpBuilder<(ins "::mlir::Type":$tile, "::mlir::Value":$source,
                   "::mlir::Value":$batch, "::mlir::Value":$head,
                   "::mlir::Value":$row, "::mlir::ValueRange":$sequence), [{
      build($_builder, $_state, tile, source, batch, head, row, sequence,
            ::mlir::Value());
    }]>
  ];
  let extraClassDeclaration = [{
    /// The sequence's first row and end in the source (null: rows 0 to the
    /// source's last).
    ::mlir::Value getSequenceFirst() {
      return getSequence().empty() ? nullptr : getSequence()[0];
    }
    ::mlir::Value getSequenceEnd() {
      return getSequence().empty() ? nullptr : getSequence()[1];
    }
  }];
  let hasVerifier = 1;
}

def FA_StoreTileOp : FA_Op<"store_tile"> {
  let summary = "store the valid rows of a tile value into one (batch, head)";
  let description = [{
    Writes the rows of `tile` to rows `[row, row + R)` of `dest[batch, head]`,
    skipping rows at or past the end of the sequence (the padding of a tail
    tile). The tile shape and `sequence` relate to the destination as for
    `fa.load_tile`.

    ```mlir
    fa.store_tile %o_tile, %o[%b, %h, %q_start]
      : tensor<16x64xf32> -> memref<?x?x?x64xf32>
    ```
  }];
  let arguments = (ins FA_AnyFloatTile:$tile,
                       Arg<AnyMemRef, "", [MemWrite]>:$dest, Index:$batch,
                       Index:$head, Index:$row, Variadic<Index>:$sequence);
  let assemblyFormat = [{
    $tile `,` $dest `[` $batch `,` $head `,` $row `]` (`sequence` `(` $sequence^ `)`)? attr-dict `:` type($tile) `->` type($dest)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$tile, "::mlir::Value":$dest,
                   "::mlir::Value":$batch, "::mlir::Value":$head,
                   "::mlir::Value":$row), [{
      build($_builder, $_state, tile, dest, batch, head, row,
            ::mlir::ValueRange());
    }]>
  ];
  let extraClassDeclaration = [{
    /// As fa.load_tile's.
    ::mlir::Value getSequenceFirst() {
      return getSequence().empty() ? nullptr : getSequence()[0];
    }
    ::mlir::Value getSequenceEnd() {
      return getSequence().empty() ? nullptr : getSequence()[1];
    }
  }];
  let hasVerifier = 1;
}

def FA_KVTileRangeOp : FA_Op<"kv_tile_range", [Pure, IsolatedFromAbove,
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "the K/V tiles a query tile must visit";
  let description = [{
    Returns the half-open range `[begin, end)` of K/V tile indices that the
    query tile starting at row `q_start` has to visit. Without a mask this is
    every tile, `[0, ceildiv(Sk, block_n))`. With the causal mask, tiles that
    lie entirely above the (bottom-right aligned) diagonal are skipped:
    `end = clamp(ceildiv(min(q_start + block_m, Sq) + Sk - Sq, block_n), 0,
    ceildiv(Sk, block_n))`. Causal block skipping is thus a property of the
    loop bounds, not of the loop body.

    With a `mask_mod` region (the problem's, with the program's batch and
    head `at(%b, %h)`), the range is narrowed further to the tiles that
    region can keep a score of, when the region is affine (see
    `fa.attention`); otherwise it is not narrowed. With `ranges` (the
    problem's `key_ranges`, and `at(%b, %h)`), it is narrowed to the tiles
    that meet the keys of the tile's 16-row groups.

    With `part(%p of %n)` (split-KV) the range is part `p` of `n` equal
    parts of it: `c = ceildiv(end - begin, n)` tiles from `begin + p c`,
    cut at `end` (empty for the last parts of a short range).

    ```mlir
    %begin, %end = fa.kv_tile_range %q_start, %sq, %sk
      {block_m = 64 : i64, block_n = 64 : i64, mask = #fa.mask<causal>}
    %part_begin, %part_end = fa.kv_tile_range %q_start, %sq, %sk
      part(%p of %parts) {block_m = 64 : i64, block_n = 64 : i64}
    ```
  }];
  let arguments = (ins Index:$q_start, Index:$q_len, Index:$kv_len,
                       Optional<Index>:$batch, Optional<Index>:$head,
                       Optional<FA_RangeTableMemRef>:$ranges,
                       Optional<Index>:$part, Optional<Index>:$num_parts,
                       ConfinedAttr<I64Attr, [IntPositive]>:$block_m,
                       ConfinedAttr<I64Attr, [IntPositive]>:$block_n,
                       DefaultValuedAttr<FA_MaskAttr, "::mlir::fa::MaskKind::none">:$mask);
  let results = (outs Index:$begin, Index:$end);
  let regions = (region MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $q_start `,` $q_len `,` $kv_len (`at` `(` $batch^ `,` $head `)`)?
    (`ranges` $ranges^ `:` type($ranges))?
    (`part` `(` $part^ `of` $num_parts `)`)? attr-dict
    (`mask_mod` $mask_mod^)?
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$qStart, "::mlir::Value":$qLen,
                   "::mlir::Value":$kvLen, "int64_t":$blockM,
                   "int64_t":$blockN, "::mlir::fa::MaskKind":$mask)>
  ];
  let hasVerifier = 1;
}

def FA_KVTileHoleOp : FA_Op<"kv_tile_hole", [Pure, IsolatedFromAbove,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "the K/V tiles of a range that the query tile keeps no key of";
  let description = [{
    Of the range `[begin, end)` that `fa.kv_tile_range` gives the query tile
    starting at row `q_start` (same mask_mod, batch and head), the tiles
    `[hole_begin, hole_end)` that lie wholly between two intervals of keys
    the mask_mod keeps: an `or` of an alternative bounded above in kv_idx
    and one bounded below, such as sink tokens and a sliding window
    (`kv < 4 or q - kv <= W`), whose hull is every key up to the row. The
    hole is inside the range; `hole_begin == hole_end` when there is none.

    The K/V loop then runs over `end - begin - (hole_end - hole_begin)`
    visits: visit `v` is tile `v` below `hole_begin` and `v + (hole_end -
    hole_begin)` from it on, so a window with sink tokens costs time in
    proportion to the window and the sinks, not to the row.

    ```mlir
    %hole_begin, %hole_end = fa.kv_tile_hole %kv_begin, %kv_end of %q_start,
      %sq, %sk at(%b, %h) {block_m = 64 : i64, block_n = 64 : i64} mask_mod {
      ...
    }
    ```
  }];
  let arguments = (ins Index:$begin, Index:$end, Index:$q_start,
                       Index:$q_len, Index:$kv_len, Index:$batch, Index:$head,
                       ConfinedAttr<I64Attr, [IntPositive]>:$block_m,
                       ConfinedAttr<I64Attr, [IntPositive]>:$block_n);
  let results = (outs Index:$hole_begin, Index:$hole_end);
  let regions = (region SizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $begin `,` $end `of` $q_start `,` $q_len `,` $kv_len
    `at` `(` $batch `,` $head `)` attr-dict `mask_mod` $mask_mod
  }];
  let hasVerifier = 1;
}

def FA_WholeRangeOp : FA_Op<"whole_range", [Pure,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "what every index of a tile keeps, from a block mask";
  let description = [{
    For the indices `[start, end)` of a tile along a block mask's table
    (query rows for `key_ranges`, keys for `query_ranges`), at the
    program's batch and head: `[lo, hi)`, the intersection of the whole
    ranges (`[whole_first, whole_end)`) of the 16-index groups the tile
    touches, i.e. the keys that every row of the tile keeps (the rows that
    keep every key). A tile of the other dimension inside `[lo, hi)` needs
    no mask_mod: `fa.mask`'s `kept_whole`. `lo >= hi`: no such tile.

    ```mlir
    %lo, %hi = fa.whole_range %q_start, %rows_end at(%b, %h)
      ranges %key_ranges : memref<?x?x?x4xi32>
    %whole = ... %lo <= %kv_start and %kv_start + block_n <= %hi ...
    ```
  }];
  let arguments = (ins Index:$start, Index:$end, Index:$batch, Index:$head,
                       FA_RangeTableMemRef:$ranges);
  let results = (outs Index:$lo, Index:$hi);
  let assemblyFormat = [{
    $start `,` $end `at` `(` $batch `,` $head `)` `ranges` $ranges attr-dict
    `:` type($ranges)
  }];
  let hasVerifier = 1;
}

def FA_TileMatmulOp : FA_Op<"tile_matmul", [Pure,
    OptionalTypesMatchWith<"accumulator and result have the same type",
                           "result", "acc", "::llvm::cast<Type>($_self)">]> {
  let summary = "tile matrix product accumulated in f32";
  let description = [{
    `result = lhs * rhs (+ acc)`; `transpose_lhs` / `transpose_rhs` use the
    transpose of that operand (the backward's `P^T dO` and `dS^T Q`). Operands may be f16, bf16 or f32 (both the same type);
    products are accumulated in f32. The two matmuls of attention are

    ```mlir
    // S = Q K^T (K tiles are stored row per key, hence the transpose)
    %s = fa.tile_matmul %q_tile, %k_tile {transpose_rhs}
      : tensor<16x64xf32>, tensor<32x64xf32> -> tensor<16x32xf32>
    // acc = acc + P V
    %acc_next = fa.tile_matmul %p, %v_tile acc(%acc)
      : tensor<16x32xf32>, tensor<32x64xf32> -> tensor<16x64xf32>
    ```

    With `async` (the wgmma strategy, fa-wgmma-pipeline) the product is
    only started: its result may be read only through `fa.async_wait`, and
    the operands stay in use until then.
  }];
  let arguments = (ins FA_AnyFloatTile:$lhs, FA_AnyFloatTile:$rhs,
                       Optional<FA_F32Tile>:$acc, UnitAttr:$transpose_rhs,
                       UnitAttr:$async, UnitAttr:$transpose_lhs);
  let results = (outs FA_F32Tile:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`acc` `(` $acc^ `)`)? attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def FA_MaskOp : FA_Op<"mask", [Pure, IsolatedFromAbove,
    AttrSizedOperandSegments, AllTypesMatch<["scores", "result"]>]> {
  let summary = "set the masked-out scores of a tile to -inf";
  let description = [{
    `scores` is the `[R, C]` tile of raw scores for query rows
    `q_start + i` and key columns `kv_start + j`. Scores of key columns at or
    past `kv_len` (the padding of the last K tile) become -inf; with the
    causal mask so do those with `kv_start + j > q_start + i + kv_len -
    q_len` (see `#fa.mask`). Rows past `q_len` are padding and are left
    alone; `fa.store_tile` drops them. With a `mask_mod` region (the
    problem's, with the program's batch and head `at(%b, %h)`) the scores
    it does not keep become -inf too, unless `kept_whole` is true: a block
    mask's promise that the region keeps every score of the tile (see
    `fa.whole_range`); the lowering may then skip the region.

    ```mlir
    %s_masked = fa.mask %s, %q_start, %kv_start, %sq, %sk {mask = #fa.mask<causal>}
      : tensor<16x32xf32>
    ```
  }];
  let arguments = (ins FA_F32Tile:$scores, Index:$q_start, Index:$kv_start,
                       Index:$q_len, Index:$kv_len,
                       Optional<Index>:$batch, Optional<Index>:$head,
                       Variadic<FA_CaptureMemRef>:$captures,
                       Optional<I1>:$kept_whole,
                       DefaultValuedAttr<FA_MaskAttr, "::mlir::fa::MaskKind::none">:$mask);
  let results = (outs FA_F32Tile:$result);
  let regions = (region MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $scores `,` $q_start `,` $kv_start `,` $q_len `,` $kv_len
    (`at` `(` $batch^ `,` $head `)`)?
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    (`kept_whole` $kept_whole^)? attr-dict `:` type($scores)
    (`mask_mod` $mask_mod^)?
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$scores, "::mlir::Value":$qStart,
                   "::mlir::Value":$kvStart, "::mlir::Value":$qLen,
                   "::mlir::Value":$kvLen, "::mlir::fa::MaskKind":$mask)>
  ];
  let hasVerifier = 1;
}

def FA_ScoreModOp : FA_Op<"score_mod", [Pure, IsolatedFromAbove,
    AllTypesMatch<["scores", "result"]>]> {
  let summary = "apply a score_mod to every score of a tile";
  let description = [{
    `result[i, j] = score_mod(scale * scores[i, j], b, h, q_start + i,
    kv_start + j, q_len, kv_len)`, the region being the problem's
    `score_mod` (see `fa.attention`). The scale is applied here, so the
    online softmax that follows runs with scale 1. Padding rows and columns
    are modified too; `fa.mask` and `fa.store_tile` drop them.

    ```mlir
    %s_mod = fa.score_mod %s, %q_start, %kv_start, %sq, %sk at(%b, %h)
      {scale = 0.125 : f32} : tensor<16x32xf32> {
    ^bb0(%score: f32, %b: index, %h: index, %q: index, %kv: index, %sq: index, %sk: index):
      %cap = arith.constant 30.0 : f32
      %x = arith.divf %score, %cap : f32
      %t = math.tanh %x : f32
      %capped = arith.mulf %t, %cap : f32
      fa.yield %capped : f32
    }
    ```
  }];
  let arguments = (ins FA_F32Tile:$scores, Index:$q_start, Index:$kv_start,
                       Index:$q_len, Index:$kv_len, Index:$batch, Index:$head,
                       Variadic<FA_CaptureMemRef>:$captures, F32Attr:$scale);
  let results = (outs FA_F32Tile:$result);
  let regions = (region SizedRegion<1>:$score_mod);
  let assemblyFormat = [{
    $scores `,` $q_start `,` $kv_start `,` $q_len `,` $kv_len
    `at` `(` $batch `,` $head `)`
    (`captures` `(` $captures^ `:` type($captures) `)`)? attr-dict `:` type($scores) $score_mod
  }];
  let hasVerifier = 1;
}

def FA_YieldOp : FA_Op<"yield", [Pure, ReturnLike, Terminator,
    ParentOneOf<["AttentionOp", "AttentionBackwardOp", "BlockMaskOp",
                 "MaskOp", "KVTileRangeOp", "KVTileHoleOp", "QTileRangeOp",
                 "PreviousVisitorOp", "ScoreModOp", "ScoreModGradOp"]>]> {
  let summary = "the value of a score_mod or mask_mod region";
  let description = [{
    Ends a `score_mod` region (one f32, the new score) or a `mask_mod`
    region (one i1, true = keep the score).
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

def FA_OnlineSoftmaxOp : FA_Op<"online_softmax", [Pure,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>,
    AllTypesMatch<["scores", "probs"]>,
    AllTypesMatch<["running_max", "running_sum", "new_max", "new_sum", "correction"]>]> {
  let summary = "one online-softmax step over a tile of scores";
  let description = [{
    Folds the raw score tile `s` ([R, C]) into the running state of each row
    (running max `m` and running sum `l`, both [R]). With `x = scale * s`:

    ```
    m_new = max(m, rowmax(x))          // new running max
    alpha = exp(m - m_new)             // correction of the old state
    p     = exp(x - m_new)             // unnormalized probabilities [R, C]
    l_new = alpha * l + rowsum(p)      // running sum, rescaled then extended
    ```

    A row whose scores so far are all -inf keeps `m = -inf`; its `p` and
    `alpha` are 0 (the subtraction uses 0 instead of -inf), never NaN. The
    accumulator is rescaled by `alpha` (`fa.rescale`) before `p * V` is added.

    A runtime `factor` (an f32 scalar: FP8's Q and K descales) multiplies
    the scale: `x = scale * factor * s`. `probs_scale` (a power of two)
    scales the probabilities the op yields, `p = probs_scale * exp(x -
    m_new)`, while `l` keeps the sum of the unscaled ones: FP8's P is
    quantized from `256 p`, so that the small probabilities stay normal
    numbers, and `fa.finalize` divides the 256 out again.

    ```mlir
    %m_new, %p, %l_new, %alpha = fa.online_softmax %s, %m, %l {scale = 0.125 : f32}
      : tensor<16x32xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins FA_F32Tile:$scores, FA_F32Tile:$running_max,
                       FA_F32Tile:$running_sum, Optional<F32>:$scale_factor,
                       F32Attr:$scale, OptionalAttr<F32Attr>:$probs_scale);
  let results = (outs FA_F32Tile:$new_max, FA_F32Tile:$probs,
                      FA_F32Tile:$new_sum, FA_F32Tile:$correction);
  let assemblyFormat = [{
    $scores `,` $running_max `,` $running_sum (`factor` $scale_factor^)? attr-dict `:` type($scores) `,` type($running_max)
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$scores, "::mlir::Value":$runningMax,
                   "::mlir::Value":$runningSum, "float":$scale,
                   CArg<"::mlir::Value", "{}">:$scaleFactor,
                   CArg<"float", "1.0f">:$probsScale)>
  ];
}

def FA_RescaleOp : FA_Op<"rescale", [Pure, AllTypesMatch<["acc", "result"]>]> {
  let summary = "multiply each accumulator row by its correction factor";
  let description = [{
    `result[i, :] = acc[i, :] * factor[i]`: brings the unnormalized
    accumulator to the new running max before `p * V` is added.

    ```mlir
    %acc_scaled = fa.rescale %acc, %alpha : tensor<16x64xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins FA_F32Tile:$acc, FA_F32Tile:$factor);
  let results = (outs FA_F32Tile:$result);
  let assemblyFormat = "$acc `,` $factor attr-dict `:` type($acc) `,` type($factor)";
  let hasVerifier = 1;
}

def FA_FinalizeOp : FA_Op<"finalize", [Pure,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>,
    AllTypesMatch<["acc", "output"]>,
    AllTypesMatch<["running_max", "running_sum", "lse"]>]> {
  let summary = "deferred normalization: O = acc / l, LSE = m + log(l)";
  let description = [{
    Ends the K/V loop of a program. FlashAttention-2 keeps the accumulator
    unnormalized while streaming and divides once here:

    ```
    O[i, :] = acc[i, :] / l[i]        (0 when l[i] == 0: the row saw no key)
    LSE[i]  = m[i] + log(l[i])        (-inf when l[i] == 0)
    ```

    With `scaled %c` (an f32 scalar: FP8's V descale over the probabilities'
    scale), `O[i, :] = c * acc[i, :] / l[i]`.

    ```mlir
    %o, %lse = fa.finalize %acc, %m, %l : tensor<16x64xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins FA_F32Tile:$acc, FA_F32Tile:$running_max,
                       FA_F32Tile:$running_sum, Optional<F32>:$output_scale);
  let results = (outs FA_F32Tile:$output, FA_F32Tile:$lse);
  let assemblyFormat = [{
    $acc `,` $running_max `,` $running_sum (`scaled` $output_scale^)? attr-dict `:` type($acc) `,` type($running_max)
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$acc, "::mlir::Value":$runningMax,
                   "::mlir::Value":$runningSum,
                   CArg<"::mlir::Value", "{}">:$outputScale)>
  ];
}

def FA_JoinSinkOp : FA_Op<"join_sink", [Pure,
    AllTypesMatch<["running_max", "running_sum", "new_max", "new_sum", "correction"]>]> {
  let summary = "an attention sink joins each row's softmax denominator";
  let description = [{
    After the K/V loop, the sink logit `sink` (one per query head, a scaled
    score like the running max) enters each row's state as one more score
    without a value row:

    ```
    m_new = max(m, sink)
    alpha = exp(m - m_new)                 // the accumulator's correction
    l_new = alpha * l + exp(sink - m_new)
    ```

    The accumulator is rescaled by `alpha` (`fa.rescale`) before
    `fa.finalize`, which then divides by the larger sum and counts the sink
    in the LSE. The max keeps the exponentials at most 1 whatever the
    sink's size. A row that saw no key gets `m_new = sink`, `l_new = 1`
    (`alpha` = 0, the accumulator being 0 anyway); a -inf sink changes
    nothing (`alpha` = 1 for a row that saw a key, the sink's exponential
    0, as the online softmax's 0-for--inf rule gives).

    ```mlir
    %m_new, %l_new, %alpha = fa.join_sink %sink, %m, %l : tensor<64xf32>
    ```
  }];
  let arguments = (ins F32:$sink, FA_F32Tile:$running_max,
                       FA_F32Tile:$running_sum);
  let results = (outs FA_F32Tile:$new_max, FA_F32Tile:$new_sum,
                      FA_F32Tile:$correction);
  let assemblyFormat = [{
    $sink `,` $running_max `,` $running_sum attr-dict `:` type($running_max)
  }];
  let hasVerifier = 1;
}

def FA_JoinRowSinksOp : FA_Op<"join_row_sinks", [
    AllTypesMatch<["running_max", "running_sum", "new_max", "new_sum", "correction"]>]> {
  let summary = "fa.join_sink with a sink per row, read from memory";
  let description = [{
    `fa.join_sink` where each row has a sink of its own: row r's is
    `sinks[head * rows + row_start + r]` (-inf past `rows`: a row past the
    queries, never stored), the layout of `fa.attention`'s sinks with
    `sinks_per_row`. Each thread reads the sinks of the rows it holds.

    ```mlir
    %m_new, %l_new, %alpha = fa.join_row_sinks %sinks[%h, %q_start, %q_len], %m, %l
      : memref<?xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Arg<FA_SinkMemRef, "sink logits [H * rows]", [MemRead]>:$sinks,
                       Index:$head, Index:$row_start, Index:$rows,
                       FA_F32Tile:$running_max, FA_F32Tile:$running_sum);
  let results = (outs FA_F32Tile:$new_max, FA_F32Tile:$new_sum,
                      FA_F32Tile:$correction);
  let assemblyFormat = [{
    $sinks `[` $head `,` $row_start `,` $rows `]` `,` $running_max `,`
    $running_sum attr-dict `:` type($sinks) `,` type($running_max)
  }];
  let hasVerifier = 1;
}

def FA_MergePartialOp : FA_Op<"merge_partial", [Pure,
    AllTypesMatch<["output", "partial_output", "new_output"]>,
    AllTypesMatch<["lse", "partial_lse", "new_lse"]>]> {
  let summary = "merge two normalized attention results by their log-sum-exps";
  let description = [{
    Two results of one query row over disjoint key sets (parts of a
    split-KV forward; later, the blocks of ring attention), each normalized
    with its own log-sum-exp, become the result over the union:

    ```
    lse_new = log(exp(lse) + exp(partial_lse))
    O_new   = exp(lse - lse_new) * O + exp(partial_lse - lse_new) * partial_O
    ```

    computed from the larger of the two log-sum-exps so no exponential
    exceeds 1. A part that saw no key (O = 0, lse = -inf) weighs 0; a row
    where neither saw one stays 0, -inf. Merging every part into (0, -inf)
    in any order gives the attention over all keys.

    ```mlir
    %o2, %lse2 = fa.merge_partial %o, %lse with %po, %plse
      : tensor<16x128xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins FA_F32Tile:$output, FA_F32Tile:$lse,
                       FA_F32Tile:$partial_output, FA_F32Tile:$partial_lse);
  let results = (outs FA_F32Tile:$new_output, FA_F32Tile:$new_lse);
  let assemblyFormat = [{
    $output `,` $lse `with` $partial_output `,` $partial_lse attr-dict `:`
    type($output) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def FA_WaitPreviousProgramOp : FA_Op<"wait_previous_program"> {
  let summary = "wait for the function's previous program to end";
  let description = [{
    Nothing after it runs before every program of the previous grid of the
    function has ended and its writes are visible. Grids of one function
    already run one after another; this marks the point up to which a grid
    may start early: on the GPU (sm_90 and later) its blocks may be launched
    while the previous kernel still runs (programmatic dependent launch, see
    `fa.launch_next_program`) and wait here (`griddepcontrol.wait`), so that
    their launch overlaps the previous kernel. It is the first op of a
    split-KV forward's `combine` program, which reads the parts' results.
    Elsewhere (older GPUs, the CPU) it does nothing.

    ```mlir
    fa.grid (%b, %h, %t) in (%batch, %heads, %tiles) {
      fa.wait_previous_program
      ...
    } {program = "combine"}
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def FA_LaunchNextProgramOp : FA_Op<"launch_next_program"> {
  let summary = "let the function's next program launch";
  let description = [{
    The next grid of the function, whose programs begin with
    `fa.wait_previous_program`, may be launched once every program of this
    grid has passed this point (`griddepcontrol.launch_dependents` on sm_90
    and later; nothing elsewhere). A split-KV forward's `split` program
    issues it first, so that the merge's blocks are resident and waiting
    when the parts end. It orders nothing: the wait of the next program
    still waits for this whole grid.
  }];
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Tile level: the backward
//===----------------------------------------------------------------------===//

def FA_QTileRangeOp : FA_Op<"q_tile_range", [Pure, IsolatedFromAbove,
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "the query tiles that see a K/V tile (backward)";
  let description = [{
    The mirror of `fa.kv_tile_range`: the half-open range `[begin, end)` of
    query tile indices whose rows see at least one key of the K/V tile that
    starts at row `kv_start`. Without a mask that is every tile,
    `[0, ceildiv(Sq, block_m))`. With the (bottom-right aligned) causal mask
    row `i` sees key `kv_start` first when `i >= kv_start - (Sk - Sq)`, so
    `begin = clamp(floordiv(kv_start - (Sk - Sq), block_m), 0, end)`: query
    tiles entirely above the diagonal are skipped. With a `mask_mod` (and
    the program's batch and query head `at(%b, %h)`) the range is narrowed
    to the query tiles that region can keep a score of, when it is affine;
    with `ranges` (the problem's `query_ranges`) to the query tiles that
    meet the rows of the K/V tile's 16-key groups.

    ```mlir
    %q_begin, %q_end = fa.q_tile_range %kv_start, %sq, %sk
      {block_m = 64 : i64, block_n = 64 : i64, mask = #fa.mask<causal>}
    ```
  }];
  let arguments = (ins Index:$kv_start, Index:$q_len, Index:$kv_len,
                       Optional<Index>:$batch, Optional<Index>:$head,
                       Optional<FA_RangeTableMemRef>:$ranges,
                       ConfinedAttr<I64Attr, [IntPositive]>:$block_m,
                       ConfinedAttr<I64Attr, [IntPositive]>:$block_n,
                       DefaultValuedAttr<FA_MaskAttr, "::mlir::fa::MaskKind::none">:$mask);
  let results = (outs Index:$begin, Index:$end);
  let regions = (region MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $kv_start `,` $q_len `,` $kv_len (`at` `(` $batch^ `,` $head `)`)?
    (`ranges` $ranges^ `:` type($ranges))? attr-dict
    (`mask_mod` $mask_mod^)?
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$kvStart, "::mlir::Value":$qLen,
                   "::mlir::Value":$kvLen, "int64_t":$blockM,
                   "int64_t":$blockN, "::mlir::fa::MaskKind":$mask)>
  ];
  let hasVerifier = 1;
}

def FA_PreviousVisitorOp : FA_Op<"previous_visitor", [Pure, IsolatedFromAbove,
    AttrSizedOperandSegments]> {
  let summary = "the K/V tile that adds to a query tile before this one (deterministic backward)";
  let description = [{
    The deterministic backward's turns with a block mask. The K/V tiles
    that add to query tile `q_tile` are those in `[lo, hi)` (its key
    ranges' `fa.kv_tile_range`) whose own `fa.q_tile_range` (the operands
    and region of this op, at `kv_start = t * block_n`) contains `q_tile`:
    the pairs both tables visit. From `kv_tile` this op walks `[lo, hi)`
    towards `lo` (with `descending`, towards `hi`: the turns then run last
    to first) and returns whether it found such a tile and the first one,
    `t`: the program of `kv_tile` waits for `t`'s turn to end. The walk
    stops at the first visitor, so where the two tables agree it is one
    step.

    ```mlir
    %found, %previous = fa.previous_visitor %q_tile, %kv_tile in [%lo, %hi),
        %sq, %sk at(%b, %h) ranges %query_ranges : memref<?x?x?x4xi32>
        {block_m = 64 : i64, block_n = 64 : i64, mask = #fa.mask<causal>}
    ```
  }];
  let arguments = (ins Index:$q_tile, Index:$kv_tile, Index:$lo, Index:$hi,
                       Index:$q_len, Index:$kv_len,
                       Optional<Index>:$batch, Optional<Index>:$head,
                       Optional<FA_RangeTableMemRef>:$ranges,
                       ConfinedAttr<I64Attr, [IntPositive]>:$block_m,
                       ConfinedAttr<I64Attr, [IntPositive]>:$block_n,
                       DefaultValuedAttr<FA_MaskAttr, "::mlir::fa::MaskKind::none">:$mask,
                       UnitAttr:$descending);
  let results = (outs I1:$found, Index:$previous);
  let regions = (region MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $q_tile `,` $kv_tile `in` ` ` `[` $lo `,` $hi `)` `,` $q_len `,` $kv_len
    (`at` `(` $batch^ `,` $head `)`)?
    (`ranges` $ranges^ `:` type($ranges))? attr-dict
    (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
}

def FA_RowDotOp : FA_Op<"row_dot", [Pure, AllTypesMatch<["lhs", "rhs"]>]> {
  let summary = "per-row dot product of two tiles, in f32";
  let description = [{
    `result[i] = sum_d lhs[i, d] * rhs[i, d]`, accumulated in f32. The
    backward's preprocessing computes `D = rowsum(dO * O)` with it.

    ```mlir
    %d = fa.row_dot %do_tile, %o_tile : tensor<64x64xf16> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins FA_AnyFloatTile:$lhs, FA_AnyFloatTile:$rhs);
  let results = (outs FA_F32Tile:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)";
  let hasVerifier = 1;
}

def FA_RecomputeProbsOp : FA_Op<"recompute_probs", [Pure,
    AllTypesMatch<["scores", "probs"]>]> {
  let summary = "the forward's probabilities from raw scores and the saved LSE";
  let description = [{
    `probs[i, j] = exp(scale * scores[i, j] - lse[i])`: the normalized
    softmax of the forward, recomputed tile by tile from its log-sum-exp.
    Masked scores (-inf) give 0. A row with `lse = -inf` saw no key, so all
    its scores are masked; the subtraction then uses 0 instead of -inf and
    never makes NaN.

    ```mlir
    %p = fa.recompute_probs %s, %lse_tile {scale = 0.125 : f32}
      : tensor<64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins FA_F32Tile:$scores, FA_F32Tile:$lse, F32Attr:$scale);
  let results = (outs FA_F32Tile:$probs);
  let assemblyFormat = [{
    $scores `,` $lse attr-dict `:` type($scores) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def FA_ScoreModGradOp : FA_Op<"score_mod_grad", [Pure, IsolatedFromAbove,
    AllTypesMatch<["grad", "scores", "result"]>]> {
  let summary = "the score gradient through a score_mod (backward)";
  let description = [{
    `result[i, j] = grad[i, j] * d(scale * scores[i, j], b, h, q_start + i,
    kv_start + j, q_len, kv_len)` where the region `d` is the derivative
    of the problem's score_mod with respect to its score (the compiler
    builds it from the score_mod), and `scores` the raw scores `Q K^T`.
    A zero `grad` (a masked or padded score) stays zero whatever `d` is
    there.

    ```mlir
    %ds_raw = fa.score_mod_grad %ds, %s, %q_start, %kv_start, %sq, %sk
        at(%b, %h) {scale = 0.125 : f32} : tensor<64x64xf32> {
    ^bb0(%score: f32, %b: index, %h: index, %q: index, %kv: index, %sq: index, %sk: index):
      %one = arith.constant 1.0 : f32
      fa.yield %one : f32
    }
    ```
  }];
  let arguments = (ins FA_F32Tile:$grad, FA_F32Tile:$scores, Index:$q_start,
                       Index:$kv_start, Index:$q_len, Index:$kv_len,
                       Index:$batch, Index:$head,
                       Variadic<FA_CaptureMemRef>:$captures, F32Attr:$scale);
  let results = (outs FA_F32Tile:$result);
  let regions = (region SizedRegion<1>:$derivative);
  let assemblyFormat = [{
    $grad `,` $scores `,` $q_start `,` $kv_start `,` $q_len `,` $kv_len
    `at` `(` $batch `,` $head `)`
    (`captures` `(` $captures^ `:` type($captures) `)`)? attr-dict `:` type($grad) $derivative
  }];
  let hasVerifier = 1;
}

def FA_SoftmaxGradOp : FA_Op<"softmax_grad", [Pure,
    AllTypesMatch<["probs", "grad_probs", "grad_scores"]>]> {
  let summary = "gradient of the raw scores through the softmax";
  let description = [{
    `dS[i, j] = scale * P[i, j] * (dP[i, j] - D[i])` with `P` the
    probabilities, `dP = dO V^T` their gradient and `D = rowsum(dO * O)`:
    the softmax's Jacobian applied row by row, times the score scale, so
    that `dQ = dS K` and `dK = dS^T Q` follow as plain matmuls.

    ```mlir
    %ds = fa.softmax_grad %p, %dp, %delta_tile {scale = 0.125 : f32}
      : tensor<64x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins FA_F32Tile:$probs, FA_F32Tile:$grad_probs,
                       FA_F32Tile:$delta, F32Attr:$scale);
  let results = (outs FA_F32Tile:$grad_scores);
  let assemblyFormat = [{
    $probs `,` $grad_probs `,` $delta attr-dict `:` type($probs) `,` type($delta)
  }];
  let hasVerifier = 1;
}

def FA_SinkGradOp : FA_Op<"sink_grad", [Pure,
    AllTypesMatch<["lse", "delta", "result"]>]> {
  let summary = "each row's share of its sink's gradient";
  let description = [{
    `result[i] = -exp(sink - lse[i]) * delta[i]`, 0 where `delta[i]` is 0:
    the sink's probability in row i times the gradient of its score (the
    sink's value row is zero, so dP there is 0 and dS = P (0 - D)). Rows
    past the sequence's end (zero-padded D) and rows of a zero dO add
    nothing, however large the exponential.

    ```mlir
    %share = fa.sink_grad %sink, %lse_tile, %delta_tile : tensor<64xf32>
    ```
  }];
  let arguments = (ins F32:$sink, FA_F32Tile:$lse, FA_F32Tile:$delta);
  let results = (outs FA_F32Tile:$result);
  let assemblyFormat = [{
    $sink `,` $lse `,` $delta attr-dict `:` type($lse)
  }];
  let hasVerifier = 1;
}

def FA_AccumulateTotalOp : FA_Op<"accumulate_total"> {
  let summary = "add the sum of a row tile to one element";
  let description = [{
    `dest[index] += sum_i tile[i]`. Many programs add to one element (the
    sinks' gradient: every query tile of a head), so a parallel lowering
    adds atomically, once per warp after the warp's own sum; the order of
    the adds, and so the last bits, may differ from run to run.

    ```mlir
    fa.accumulate_total %share, %grad_sinks[%h] : tensor<64xf32> -> memref<?xf32>
    ```
  }];
  let arguments = (ins FA_F32Tile:$tile,
                       Arg<FA_SinkMemRef, "", [MemRead, MemWrite]>:$dest,
                       Index:$index);
  let assemblyFormat = [{
    $tile `,` $dest `[` $index `]` attr-dict `:` type($tile) `->` type($dest)
  }];
  let hasVerifier = 1;
}

def FA_TileTotalOp : FA_Op<"tile_total"> {
  let summary = "the sum of a row tile, the same bits in every run";
  let description = [{
    `total = sum_i tile[i]`, in an order fixed by the layout, and the same
    value in every thread of the program: the deterministic counterpart of
    `fa.accumulate_total` (the deterministic backward's sinks gradient,
    summed per query tile and then per head). A parallel lowering sums
    each thread's rows, then each warp's lanes (a butterfly), then the
    warps' sums in warp order through shared memory; every thread of the
    program must reach it (it synchronizes them).

    ```mlir
    %total = fa.tile_total %share : tensor<64xf32>
    ```
  }];
  let arguments = (ins FA_F32Tile:$tile);
  let results = (outs F32:$total);
  let assemblyFormat = [{
    $tile attr-dict `:` type($tile)
  }];
  let hasVerifier = 1;
}

def FA_AccumulateTileOp : FA_Op<"accumulate_tile"> {
  let summary = "add the valid rows of an f32 tile into one (batch, head)";
  let description = [{
    `dest[batch, head, row + i, :] += tile[i, :]` for the rows before the end
    of the sequence. Several programs of a grid may add to the same rows
    (the backward's dQ: every K/V tile contributes to every query row it
    sees), so a parallel lowering adds atomically; the sum's order, and so
    its last bits, may then differ from run to run. `sequence(%first,
    %end)` as `fa.store_tile`'s: rows count from `first`, none at or past
    `end` is added to.

    ```mlir
    fa.accumulate_tile %dq_part, %dq_accum[%b, %h, %q_start]
      : tensor<64x64xf32> -> memref<?x?x?x64xf32>
    ```
  }];
  let arguments = (ins FA_F32Tile:$tile,
                       Arg<AnyMemRef, "", [MemRead, MemWrite]>:$dest,
                       Index:$batch, Index:$head, Index:$row,
                       Variadic<Index>:$sequence);
  let assemblyFormat = [{
    $tile `,` $dest `[` $batch `,` $head `,` $row `]` (`sequence` `(` $sequence^ `)`)? attr-dict `:` type($tile) `->` type($dest)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$tile, "::mlir::Value":$dest,
                   "::mlir::Value":$batch, "::mlir::Value":$head,
                   "::mlir::Value":$row), [{
      build($_builder, $_state, tile, dest, batch, head, row,
            ::mlir::ValueRange());
    }]>
  ];
  let extraClassDeclaration = [{
    /// The sequence's first row and end in dest (null: rows 0 to dest's
    /// last).
    ::mlir::Value getSequenceFirst() {
      return getSequence().empty() ? nullptr : getSequence()[0];
    }
    ::mlir::Value getSequenceEnd() {
      return getSequence().empty() ? nullptr : getSequence()[1];
    }
  }];
  let hasVerifier = 1;
}

def FA_WaitTurnOp : FA_Op<"wait_turn"> {
  let summary = "wait until the previous programs have added to a query tile";
  let description = [{
    Deterministic accumulation: blocks the program until
    `order[batch, head, tile]` equals `turn` (the counter starts at 0; the
    program with turn `t` sets it to `t + 1` with `fa.pass_turn`). The
    programs that add to one query tile are K/V tiles `0, 1, 2, ...` (the
    query tiles a K/V tile visits only grow with it); fa-tile-backward gives
    them turns in that order, or with the causal mask last to first (turn =
    the query tile's last K/V tile - this one, so that the programs move in
    lockstep from their diagonals), so the sum is the same every run. On
    the GPU the waiting is a spin on the counter; lower turns belong to
    blocks launched earlier (the causal grid runs its K/V tiles last to
    first), so the wait ends.

    The block's compute threads take the turn together (thread 0 spins,
    then they meet at a barrier); with `by_warp`, the executing warp alone
    (a writer warp that adds for the block: its lane 0 spins, then the warp
    syncs). With `if %taken` (an i1 the same in every thread) the program
    takes no turn where it is false: it neither waits nor, in its
    `fa.pass_turn`, hands on (a block mask's pair of tiles that its key
    ranges leave out).

    ```mlir
    fa.wait_turn %dq_order[%b, %h, %q_tile], %kv_tile : memref<?x?x?xi32>
    fa.accumulate_tile %dq_part, %dq_accum[%b, %h, %q_start] : ...
    fa.pass_turn %dq_order[%b, %h, %q_tile], %kv_tile : memref<?x?x?xi32>
    ```
  }];
  // A synchronization point, never dead: it orders the program's later
  // memory accesses after the other programs' (hence the write effect).
  let arguments = (ins Arg<MemRefRankOf<[I32], [3]>, "", [MemRead, MemWrite]>:$order,
                       Index:$batch, Index:$head, Index:$tile, Index:$turn,
                       Optional<I1>:$taken, UnitAttr:$by_warp);
  let assemblyFormat = [{
    $order `[` $batch `,` $head `,` $tile `]` `,` $turn (`if` $taken^)?
    attr-dict `:` type($order)
  }];
}

def FA_PassTurnOp : FA_Op<"pass_turn"> {
  let summary = "let the next program add to a query tile";
  let description = [{
    Ends the turn `turn` that `fa.wait_turn` waited for: once this
    program's writes are visible to the other programs,
    `order[batch, head, tile] = turn + 1`. `by_warp`: handed on by the
    executing warp alone, as `fa.wait_turn`'s; `if %taken`: only where it
    holds (as `fa.wait_turn`'s).
  }];
  let arguments = (ins Arg<MemRefRankOf<[I32], [3]>, "", [MemWrite]>:$order,
                       Index:$batch, Index:$head, Index:$tile, Index:$turn,
                       Optional<I1>:$taken, UnitAttr:$by_warp);
  let assemblyFormat = [{
    $order `[` $batch `,` $head `,` $tile `]` `,` $turn (`if` $taken^)?
    attr-dict `:` type($order)
  }];
}

//===----------------------------------------------------------------------===//
// Placement level
//===----------------------------------------------------------------------===//

def FA_ConvertLayoutOp : FA_Op<"convert_layout", [Pure]> {
  let summary = "move a tile from one placement to another";
  let description = [{
    Same values, new home: e.g. the probabilities P leave the registers of
    the threads that computed them for shared memory, where every thread of
    a row can read all of them for `P V`. On the GPU this is a store to
    shared memory between barriers.

    ```mlir
    %p_shared = fa.convert_layout %p
      : tensor<8x32xf32, #fa.blocked<threads = [8, 32]>> -> tensor<8x32xf32, #fa.shared<pad = 1>>
    ```

    A staging into shared memory may rotate among `fa.pipeline_stages`
    buffers (consecutive from `fa.shared_offset`): `iteration` is the
    enclosing loop's iteration number (0, 1, ...), and the tile goes to
    buffer `iteration mod stages`. A buffer is then written again only
    stages - 1 of the staging's barriers after its readers last read it,
    so only iteration 0 (where the rotation restarts) waits for the
    previous readers before writing. Every reader is a matmul of the same
    iteration that is waited for there (its fa.async_wait in the same
    block).

    ```mlir
    %ds_shared = fa.convert_layout %ds iteration %n
        {fa.shared_offset = 98304 : i64, fa.pipeline_stages = 2 : i64}
      : tensor<64x128xbf16, #fa.mma<...>> -> tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>
    ```
  }];
  let arguments = (ins FA_AnyFloatTile:$source, Optional<Index>:$iteration);
  let results = (outs FA_AnyFloatTile:$result);
  let assemblyFormat = [{
    $source (`iteration` $iteration^)? attr-dict `:` type($source) `->`
    type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$source), [{
      build($_builder, $_state, result, source, ::mlir::Value());
    }]>
  ];
  let hasVerifier = 1;
}

def FA_HandOffOp : FA_Op<"hand_off"> {
  let summary = "hand a staged shared tile to the threads that read it next";
  let description = [{
    The tile's writes (its `fa.convert_layout` into shared memory) are done:
    the executing threads arrive, without waiting, on named barrier
    `barrier` of `threads` threads, where the tile's readers wait (the
    wgmma backward's dQ writer warp, fa-tma-reduce); with `per_warpgroup`,
    each warpgroup on barrier `barrier` + its index (each wrote a column
    slice of its own). The staging then
    has no barriers of its own: this is its publication, and the threads
    that wait for the buffer to be free before writing it again do so with
    a barrier of their own.

    ```mlir
    %staged = fa.convert_layout %dq {fa.shared_offset = 196608 : i64}
      : tensor<64x128xf32, #fa.mma<...>> -> tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
    fa.hand_off %staged barrier 13 threads 288
      : tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
    ```
  }];
  // Not pure: the arrival orders the staging's writes before the readers'
  // reads (and keeps the staging, otherwise without uses, alive).
  let arguments = (ins FA_AnyFloatTile:$tile, I32Attr:$barrier,
                       I64Attr:$threads, UnitAttr:$per_warpgroup);
  let assemblyFormat = [{
    $tile `barrier` $barrier `threads` $threads attr-dict `:` type($tile)
  }];
  let hasVerifier = 1;
}

def FA_TransposeOp : FA_Op<"transpose", [Pure]> {
  let summary = "a tile's transpose, in the registers that hold the tile";
  let description = [{
    The `C x R` transpose of an `R x C` register tile whose encoding puts
    each element `(c, r)` of the result in the register slot where the
    source holds `(r, c)`: the same registers, read the other way (a
    placement's choice, never a data movement). The wgmma backward computes
    S^T = K Q^T and reads it as S through `fa.transpose` (`#fa.mma` with
    `transposed`), and takes P^T and dS^T back the same way for the
    register-A products dV += P^T dO and dK += dS^T Q. Verified: shapes
    swapped, the same element type, and register layouts that are each
    other's transposes (rows and columns of every thread's slots swapped).

    ```mlir
    %s = fa.transpose %s_t
      : tensor<128x64xf32, #fa.mma<warps = 8>>
        -> tensor<64x128xf32, #fa.mma<warps = 8, transposed = true>>
    ```
  }];
  let arguments = (ins FA_AnyFloatTile:$source);
  let results = (outs FA_AnyFloatTile:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `->` type($result)";
  let hasVerifier = 1;
}

def FA_CopyTileOp : FA_Op<"copy_tile"> {
  let summary = "write a shared tile into another shared buffer, in its layout";
  let description = [{
    `dest` is a shared tile that stands for a buffer (a view of a ring slot
    made by fa-warp-specialize); the threads that run the op write `source`'s
    values into it in `dest`'s layout. It moves a layout change out of the
    threads that read the result: the producer warpgroup writes V
    transposed for 8-bit `P V` (wgmma reads an 8-bit B operand K-major
    only), once per tile for every consumer. Only the writing threads see
    the copy afterwards: publishing it to its readers (a fence to the async
    proxy, a barrier) is the program's job.

    ```mlir
    fa.copy_tile %v into %v_t
      : tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>>
        into tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
    ```
  }];
  let arguments = (ins FA_AnyFloatTile:$source, FA_AnyFloatTile:$dest);
  let assemblyFormat = [{
    $source `into` $dest attr-dict `:` type($source) `into` type($dest)
  }];
  let hasVerifier = 1;
}

def FA_AsyncWaitOp : FA_Op<"async_wait",
    [AllTypesMatch<["tile", "result"]>]> {
  let summary = "the result of an asynchronous fa.tile_matmul, once it is done";
  let description = [{
    Waits until at most `pending` asynchronous matmuls started after the one
    that produced `tile` are still running (matmuls finish in the order they
    started), then yields its result. The overlap of the online softmax
    with the tensor cores is written with it (fa-wgmma-pipeline):

    ```mlir
    %s = fa.tile_matmul %q, %k {transpose_rhs, async} : ...
    %o = fa.tile_matmul %p_prev, %v_prev acc(%acc) {async} : ...
    %s_done = fa.async_wait %s {pending = 1} : tensor<128x128xf32, ...>
    // ... softmax of %s_done while P V still runs ...
    %o_done = fa.async_wait %o after(%l, %p : ...) {pending = 0} : ...
    ```

    `after`: tiles the wait must not start before (the softmax's row sums and
    P, whose work is what the wait should overlap). The assembler schedules
    within basic blocks and would otherwise hoist the wait to the start of
    its block, before the softmax; the lowering ends the block after the
    `after` values instead (a branch on the first one, which must be a tile
    of row sums: never -inf, so the branch is always taken).
  }];
  let arguments = (ins FA_F32Tile:$tile, Variadic<AnyRankedTensor>:$after,
                       I64Attr:$pending);
  let results = (outs FA_F32Tile:$result);
  let assemblyFormat = [{
    $tile (`after` `(` $after^ `:` type($after) `)`)? attr-dict `:` type($tile)
  }];
  let hasVerifier = 1;
}

#endif // FA_DIALECT_FAOPS_TD
