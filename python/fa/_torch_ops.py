"""fa's attention as PyTorch custom operators, with autograd.

torch.ops.fa.attention_forward(q, k, v, causal, scale, block_m, block_n,
num_warps, strategy, stages, deterministic, score_mod, mask_mod, sinks,
captures, block_mask) -> (O, LSE) and torch.ops.fa.attention_backward(dO,
q, k, v, O, LSE, causal, scale, deterministic, ..., score_mod, mask_mod,
sinks, captures, block_mask) -> (dQ, dK, dV, dSinks). A variant travels as the MLIR text of
its score_mod and mask_mod ("" for none); sinks (optional) as float32 [Hq]
logits, or None; captures (optional, last: Tensor[]?) as the tensors the
variant's functions read, the score_mod's then the mask_mod's in the order
of their texts' trailing memref arguments (checked and contiguous:
fa._check_captures), or None; block_mask (optional, last: Tensor[]?) as a
block mask's two tables [key_ranges, query_ranges] (int32; the forward
reads the first, the backward the second), or None. The backward op's output types are fixed:
dSinks is float32 [Hq] with sinks and an empty float32 tensor without
(fa.attention_backward returns only dQ, dK, dV then). Each has a fake
(meta) implementation, so both trace under torch.compile without graph
breaks; the forward's autograd formula calls the backward op with the
captures it saved. The LSE is returned without gradient
(mark_non_differentiable), and so are the captures (no gradient).
"""

from typing import List, Optional, Tuple

import torch

from . import (_backward, _forward, _kvcache_forward, _varlen_backward,
               _varlen_forward)


# The schemas are written out: the captures' type, an optional list of
# tensors (Tensor[]?), is one infer_schema does not produce. The rest is
# what it infers from the annotations.
_FORWARD_SCHEMA = (
    "(Tensor q, Tensor k, Tensor v, bool causal, float scale, "
    "SymInt block_m, SymInt block_n, SymInt num_warps, str strategy, "
    "SymInt stages, bool deterministic, str score_mod=\"\", "
    "str mask_mod=\"\", Tensor? sinks=None, Tensor[]? captures=None, "
    "Tensor[]? block_mask=None) -> (Tensor, Tensor)")
_BACKWARD_SCHEMA = (
    "(Tensor grad_output, Tensor q, Tensor k, Tensor v, Tensor o, "
    "Tensor lse, bool causal, float scale, bool deterministic, "
    "SymInt block_m, SymInt block_n, SymInt num_warps, str strategy, "
    "SymInt stages, str score_mod=\"\", str mask_mod=\"\", "
    "Tensor? sinks=None, Tensor[]? captures=None, "
    "Tensor[]? block_mask=None) -> (Tensor, Tensor, Tensor, Tensor)")


@torch.library.custom_op("fa::attention_forward", mutates_args=(),
                         device_types="cuda", schema=_FORWARD_SCHEMA)
def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      causal: bool, scale: float, block_m: int, block_n: int,
                      num_warps: int, strategy: str, stages: int,
                      deterministic: bool, score_mod: str = "",
                      mask_mod: str = "",
                      sinks: Optional[torch.Tensor] = None,
                      captures: Optional[List[torch.Tensor]] = None,
                      block_mask: Optional[List[torch.Tensor]] = None
                      ) -> Tuple[torch.Tensor, torch.Tensor]:
    # `deterministic` is the backward's mode, kept for the autograd formula.
    return _forward(q, k, v, causal, scale, block_m, block_n, num_warps,
                    strategy, stages, score_mod, mask_mod, sinks=sinks,
                    captures=list(captures or ()),
                    key_ranges=block_mask[0] if block_mask else None)


@attention_forward.register_fake
def _(q, k, v, causal, scale, block_m, block_n, num_warps, strategy, stages,
      deterministic, score_mod="", mask_mod="", sinks=None, captures=None,
      block_mask=None):
    batch, heads, length, _ = q.shape
    return (torch.empty_like(q),
            q.new_empty((batch, heads, length), dtype=torch.float32))


@torch.library.custom_op("fa::attention_backward", mutates_args=(),
                         device_types="cuda", schema=_BACKWARD_SCHEMA)
def attention_backward(grad_output: torch.Tensor, q: torch.Tensor,
                       k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                       lse: torch.Tensor, causal: bool, scale: float,
                       deterministic: bool, block_m: int, block_n: int,
                       num_warps: int, strategy: str, stages: int,
                       score_mod: str = "", mask_mod: str = "",
                       sinks: Optional[torch.Tensor] = None,
                       captures: Optional[List[torch.Tensor]] = None,
                       block_mask: Optional[List[torch.Tensor]] = None
                       ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                  torch.Tensor]:
    grads = _backward(grad_output, q, k, v, o, lse, causal, scale,
                      deterministic, block_m, block_n, num_warps, strategy,
                      stages, score_mod, mask_mod, sinks=sinks,
                      captures=list(captures or ()),
                      query_ranges=block_mask[1] if block_mask else None,
                      key_ranges=block_mask[0] if block_mask else None)
    if sinks is None:  # no sinks, no gradient: an empty dSinks
        grads = grads + (q.new_empty(0, dtype=torch.float32),)
    return grads


@attention_backward.register_fake
def _(grad_output, q, k, v, o, lse, causal, scale, deterministic, block_m,
      block_n, num_warps, strategy, stages, score_mod="", mask_mod="",
      sinks=None, captures=None, block_mask=None):
    heads = q.shape[1] if sinks is not None else 0
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            q.new_empty(heads, dtype=torch.float32))


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale = inputs[:5]
    o, lse = output
    # The optional inputs: absent when the op was called without them.
    sinks = inputs[13] if len(inputs) > 13 else None
    captures = list(inputs[14] or ()) if len(inputs) > 14 else []
    tables = list(inputs[15] or ()) if len(inputs) > 15 else []
    # The backward reads the captures the forward read (saved: an in-place
    # change between the two is autograd's error, not a wrong gradient),
    # and the block mask's tables.
    ctx.save_for_backward(q, k, v, o, lse, sinks, *captures, *tables)
    ctx.num_captures = len(captures)
    ctx.causal = causal
    ctx.scale = scale
    ctx.deterministic = inputs[10]
    # The variant's texts.
    ctx.score_mod = inputs[11] if len(inputs) > 11 else ""
    ctx.mask_mod = inputs[12] if len(inputs) > 12 else ""
    ctx.mark_non_differentiable(lse)


def _attention_grad(ctx, grad_output, grad_lse):
    q, k, v, o, lse, sinks, *rest = ctx.saved_tensors
    captures = rest[:ctx.num_captures]
    tables = rest[ctx.num_captures:]
    extra = () if sinks is None else (sinks,)
    if captures:
        extra = (sinks, captures)
    if tables:
        extra = (sinks, captures or None, tables)
    # The backward's own default tiles and strategy (the forward's tiles do
    # not apply to its kernels).
    dq, dk, dv, dsinks = torch.ops.fa.attention_backward(
        grad_output, q, k, v, o, lse, ctx.causal, ctx.scale,
        ctx.deterministic, 0, 0, 0, "auto", 0, ctx.score_mod, ctx.mask_mod,
        *extra)
    # No gradient for the flags, the scale, the tiles and the variant; the
    # sinks' next; none for the captures. The op takes a list of tensors:
    # autograd wants the gradients shaped as the arguments the call gave
    # (needs_input_grad is: a list for the captures when given as one).
    needs = ctx.needs_input_grad
    grads = [dq, dk, dv] + [None] * 10 + [dsinks if sinks is not None
                                          else None]
    # The captures and the block mask's tables: no gradient.
    for given in needs[14:16]:
        grads.append([None] * len(given)
                     if isinstance(given, (list, tuple)) else None)
    return tuple(grads[:len(needs)])


attention_forward.register_autograd(_attention_grad,
                                    setup_context=_setup_context)


def _varlen_outputs_like(q):
    """A packed varlen batch's O [total_q, Hq, D] and LSE [Hq, total_q]
    (empty: the ops' fake implementations)."""
    return (torch.empty_like(q),
            q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32))


@torch.library.custom_op("fa::varlen_attention_forward", mutates_args=(),
                         device_types="cuda")
def varlen_attention_forward(q: torch.Tensor, k: torch.Tensor,
                             v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                             cu_seqlens_k: torch.Tensor, max_seqlen_q: int,
                             max_seqlen_k: int, causal: bool, scale: float,
                             score_mod: str, mask_mod: str,
                             deterministic: bool = False,
                             sinks: Optional[torch.Tensor] = None
                             ) -> Tuple[torch.Tensor, torch.Tensor]:
    """A packed varlen batch's O [total_q, Hq, D] and LSE [Hq, total_q]
    (fa.flash_attn_varlen_func; differentiable in q, k, v and the float32
    [Hq] sinks; `deterministic` is the backward's mode, kept for the
    autograd formula)."""
    return _varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                           max_seqlen_k, causal, scale, score_mod, mask_mod,
                           sinks=sinks)


@varlen_attention_forward.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
      causal, scale, score_mod, mask_mod, deterministic=False, sinks=None):
    return _varlen_outputs_like(q)


@torch.library.custom_op("fa::varlen_seqused_attention_forward",
                         mutates_args=(), device_types="cuda")
def varlen_seqused_attention_forward(q: torch.Tensor, k: torch.Tensor,
                                     v: torch.Tensor,
                                     cu_seqlens_q: torch.Tensor,
                                     cu_seqlens_k: torch.Tensor,
                                     max_seqlen_q: int, max_seqlen_k: int,
                                     causal: bool, scale: float,
                                     score_mod: str, mask_mod: str,
                                     seqused_k: torch.Tensor,
                                     sinks: Optional[torch.Tensor] = None
                                     ) -> Tuple[torch.Tensor, torch.Tensor]:
    """varlen_attention_forward with each sequence's used keys (seqused_k;
    float32 [Hq] sinks optional; no gradient)."""
    return _varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                           max_seqlen_k, causal, scale, score_mod, mask_mod,
                           seqused_k, sinks=sinks)


@varlen_seqused_attention_forward.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
      causal, scale, score_mod, mask_mod, seqused_k, sinks=None):
    return _varlen_outputs_like(q)


@torch.library.custom_op("fa::varlen_paged_attention_forward",
                         mutates_args=(), device_types="cuda")
def varlen_paged_attention_forward(q: torch.Tensor, k_cache: torch.Tensor,
                                   v_cache: torch.Tensor,
                                   cu_seqlens_q: torch.Tensor,
                                   cu_seqlens_k: torch.Tensor,
                                   max_seqlen_q: int, max_seqlen_k: int,
                                   causal: bool, scale: float,
                                   score_mod: str, mask_mod: str,
                                   block_table: torch.Tensor,
                                   seqused_k: Optional[torch.Tensor],
                                   sinks: Optional[torch.Tensor] = None
                                   ) -> Tuple[torch.Tensor, torch.Tensor]:
    """varlen_attention_forward with the keys in a paged cache (the pool
    [num_pages, P, Hkv, D], block_table [B, max_pages]; seqused_k and
    float32 [Hq] sinks optional; no gradient)."""
    return _varlen_forward(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k,
                           max_seqlen_q, max_seqlen_k, causal, scale,
                           score_mod, mask_mod, seqused_k, block_table,
                           sinks)


@varlen_paged_attention_forward.register_fake
def _(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
      max_seqlen_k, causal, scale, score_mod, mask_mod, block_table,
      seqused_k, sinks=None):
    return _varlen_outputs_like(q)


@torch.library.custom_op("fa::varlen_attention_backward", mutates_args=(),
                         device_types="cuda")
def varlen_attention_backward(grad_output: torch.Tensor, q: torch.Tensor,
                              k: torch.Tensor, v: torch.Tensor,
                              o: torch.Tensor, lse: torch.Tensor,
                              cu_seqlens_q: torch.Tensor,
                              cu_seqlens_k: torch.Tensor, max_seqlen_q: int,
                              max_seqlen_k: int, causal: bool, scale: float,
                              score_mod: str, mask_mod: str,
                              deterministic: bool = False,
                              sinks: Optional[torch.Tensor] = None
                              ) -> Tuple[torch.Tensor, torch.Tensor,
                                         torch.Tensor, torch.Tensor]:
    """dQ, dK, dV of a packed varlen batch (packed like q, k, v), and the
    sinks' gradient (float32 [Hq]; empty without sinks); dQ in a fixed
    order with `deterministic`."""
    grads = _varlen_backward(grad_output, q, k, v, o, lse, cu_seqlens_q,
                             cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                             scale, score_mod, mask_mod, deterministic,
                             sinks=sinks)
    if sinks is None:  # no sinks, no gradient: an empty dSinks
        grads = grads + (q.new_empty(0, dtype=torch.float32),)
    return grads


@varlen_attention_backward.register_fake
def _(grad_output, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
      max_seqlen_k, causal, scale, score_mod, mask_mod, deterministic=False,
      sinks=None):
    heads = q.shape[1] if sinks is not None else 0
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            q.new_empty(heads, dtype=torch.float32))


def _varlen_setup_context(ctx, inputs, output):
    (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
     scale, score_mod, mask_mod) = inputs[:11]
    o, lse = output
    # The optional `deterministic` and sinks: absent when the op was called
    # without them.
    deterministic = inputs[11] if len(inputs) > 11 else False
    sinks = inputs[12] if len(inputs) > 12 else None
    ctx.save_for_backward(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, sinks)
    ctx.lengths = (max_seqlen_q, max_seqlen_k)
    ctx.flags = (causal, scale, score_mod, mask_mod, deterministic)
    ctx.mark_non_differentiable(lse)


def _varlen_grad(ctx, grad_output, grad_lse):
    q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, sinks = ctx.saved_tensors
    dq, dk, dv, dsinks = torch.ops.fa.varlen_attention_backward(
        grad_output, q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k,
        *ctx.lengths, *ctx.flags, sinks)
    # No gradient for the offsets, the lengths, the flags and the variant;
    # the sinks' last (as many as the call gave inputs).
    grads = (dq, dk, dv) + (None,) * 9 + (
        dsinks if sinks is not None else None,)
    return grads[:len(ctx.needs_input_grad)]


varlen_attention_forward.register_autograd(
    _varlen_grad, setup_context=_varlen_setup_context)


@torch.library.custom_op("fa::kvcache_attention_forward", mutates_args=(),
                         device_types="cuda")
def kvcache_attention_forward(q: torch.Tensor, k_cache: torch.Tensor,
                              v_cache: torch.Tensor, kv_lens: torch.Tensor,
                              causal: bool, scale: float, score_mod: str,
                              mask_mod: str, num_splits: int,
                              block_table: Optional[torch.Tensor],
                              cache_batch_idx: Optional[torch.Tensor],
                              strategy: str = "auto",
                              sinks: Optional[torch.Tensor] = None
                              ) -> Tuple[torch.Tensor, torch.Tensor]:
    """O [B, Sq, Hq, D] and LSE [B, Hq, Sq] of q against the first
    kv_lens[b] keys of each cache entry, the keys in num_splits parts (0:
    the runtime's choice; fa.flash_attn_with_kvcache; no gradient), through
    block_table's pages or cache_batch_idx's entries where given, with
    float32 [Hq] sinks where given."""
    return _kvcache_forward(q, k_cache, v_cache, kv_lens, causal, scale,
                            score_mod, mask_mod, num_splits, block_table,
                            cache_batch_idx, strategy, sinks)


@kvcache_attention_forward.register_fake
def _(q, k_cache, v_cache, kv_lens, causal, scale, score_mod, mask_mod,
      num_splits, block_table, cache_batch_idx, strategy="auto", sinks=None):
    batch, q_len, heads, _ = q.shape
    return (torch.empty_like(q),
            q.new_empty((batch, heads, q_len), dtype=torch.float32))
