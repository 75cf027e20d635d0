"""fa's attention as PyTorch custom operators, with autograd.

torch.ops.fa.attention_forward(q, k, v, causal, scale, block_m, block_n,
num_warps, strategy, stages, deterministic, score_mod, mask_mod, sinks)
-> (O, LSE) and torch.ops.fa.attention_backward(dO, q, k, v, O, LSE,
causal, scale, deterministic, ..., score_mod, mask_mod, sinks) -> (dQ, dK,
dV, dSinks). A variant travels as the MLIR text of its score_mod and
mask_mod ("" for none); sinks (optional, last) as float32 [Hq] logits, or
None. The backward op's output types are fixed: dSinks is float32 [Hq] with
sinks and an empty float32 tensor without (fa.attention_backward returns
only dQ, dK, dV then). Each has a fake (meta) implementation, so both trace
under torch.compile without graph breaks; the forward's autograd formula
calls the backward op. The LSE is returned without gradient
(mark_non_differentiable).
"""

from typing import Optional, Tuple

import torch

from . import _backward, _forward


@torch.library.custom_op("fa::attention_forward", mutates_args=(),
                         device_types="cuda")
def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      causal: bool, scale: float, block_m: int, block_n: int,
                      num_warps: int, strategy: str, stages: int,
                      deterministic: bool, score_mod: str = "",
                      mask_mod: str = "",
                      sinks: Optional[torch.Tensor] = None
                      ) -> Tuple[torch.Tensor, torch.Tensor]:
    # `deterministic` is the backward's mode, kept for the autograd formula.
    return _forward(q, k, v, causal, scale, block_m, block_n, num_warps,
                    strategy, stages, score_mod, mask_mod, sinks=sinks)


@attention_forward.register_fake
def _(q, k, v, causal, scale, block_m, block_n, num_warps, strategy, stages,
      deterministic, score_mod="", mask_mod="", sinks=None):
    batch, heads, length, _ = q.shape
    return (torch.empty_like(q),
            q.new_empty((batch, heads, length), dtype=torch.float32))


@torch.library.custom_op("fa::attention_backward", mutates_args=(),
                         device_types="cuda")
def attention_backward(grad_output: torch.Tensor, q: torch.Tensor,
                       k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                       lse: torch.Tensor, causal: bool, scale: float,
                       deterministic: bool, block_m: int, block_n: int,
                       num_warps: int, strategy: str, stages: int,
                       score_mod: str = "", mask_mod: str = "",
                       sinks: Optional[torch.Tensor] = None
                       ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                  torch.Tensor]:
    grads = _backward(grad_output, q, k, v, o, lse, causal, scale,
                      deterministic, block_m, block_n, num_warps, strategy,
                      stages, score_mod, mask_mod, sinks=sinks)
    if sinks is None:  # no sinks, no gradient: an empty dSinks
        grads = grads + (q.new_empty(0, dtype=torch.float32),)
    return grads


@attention_backward.register_fake
def _(grad_output, q, k, v, o, lse, causal, scale, deterministic, block_m,
      block_n, num_warps, strategy, stages, score_mod="", mask_mod="",
      sinks=None):
    heads = q.shape[1] if sinks is not None else 0
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            q.new_empty(heads, dtype=torch.float32))


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale = inputs[:5]
    o, lse = output
    # The optional inputs: absent when the op was called without them.
    sinks = inputs[13] if len(inputs) > 13 else None
    ctx.save_for_backward(q, k, v, o, lse, sinks)
    ctx.causal = causal
    ctx.scale = scale
    ctx.deterministic = inputs[10]
    # The variant's texts.
    ctx.score_mod = inputs[11] if len(inputs) > 11 else ""
    ctx.mask_mod = inputs[12] if len(inputs) > 12 else ""
    ctx.mark_non_differentiable(lse)


def _attention_grad(ctx, grad_output, grad_lse):
    q, k, v, o, lse, sinks = ctx.saved_tensors
    extra = () if sinks is None else (sinks,)
    # The backward's own default tiles and strategy (the forward's tiles do
    # not apply to its kernels).
    dq, dk, dv, dsinks = torch.ops.fa.attention_backward(
        grad_output, q, k, v, o, lse, ctx.causal, ctx.scale,
        ctx.deterministic, 0, 0, 0, "auto", 0, ctx.score_mod, ctx.mask_mod,
        *extra)
    # No gradient for the flags, the scale, the tiles and the variant; the
    # sinks' last.
    return ((dq, dk, dv) + (None,) * 10
            + (dsinks if sinks is not None else None,))


attention_forward.register_autograd(_attention_grad,
                                    setup_context=_setup_context)
