"""fa's attention as PyTorch custom operators, with autograd.

torch.ops.fa.attention_forward(q, k, v, causal, scale, block_m, block_n,
num_warps, strategy, stages, deterministic, score_mod, mask_mod) -> (O, LSE)
and torch.ops.fa.attention_backward(dO, q, k, v, O, LSE, causal, scale,
deterministic, ..., score_mod, mask_mod) -> (dQ, dK, dV). A variant travels
as the MLIR text of its score_mod and mask_mod ("" for none). Each has a fake
(meta) implementation, so both trace under torch.compile without graph
breaks; the forward's autograd formula calls the backward op. The LSE is
returned without gradient (mark_non_differentiable).
"""

from typing import Tuple

import torch

from . import _backward, _forward


@torch.library.custom_op("fa::attention_forward", mutates_args=(),
                         device_types="cuda")
def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      causal: bool, scale: float, block_m: int, block_n: int,
                      num_warps: int, strategy: str, stages: int,
                      deterministic: bool, score_mod: str = "",
                      mask_mod: str = "") -> Tuple[torch.Tensor,
                                                   torch.Tensor]:
    # `deterministic` is the backward's mode, kept for the autograd formula.
    return _forward(q, k, v, causal, scale, block_m, block_n, num_warps,
                    strategy, stages, score_mod, mask_mod)


@attention_forward.register_fake
def _(q, k, v, causal, scale, block_m, block_n, num_warps, strategy, stages,
      deterministic, score_mod="", mask_mod=""):
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
                       score_mod: str = "",
                       mask_mod: str = "") -> Tuple[torch.Tensor,
                                                    torch.Tensor,
                                                    torch.Tensor]:
    return _backward(grad_output, q, k, v, o, lse, causal, scale,
                     deterministic, block_m, block_n, num_warps, strategy,
                     stages, score_mod, mask_mod)


@attention_backward.register_fake
def _(grad_output, q, k, v, o, lse, causal, scale, deterministic, block_m,
      block_n, num_warps, strategy, stages, score_mod="", mask_mod=""):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale = inputs[:5]
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal = causal
    ctx.scale = scale
    ctx.deterministic = inputs[10]
    # The variant's texts (absent when the op was called without them).
    ctx.score_mod = inputs[11] if len(inputs) > 11 else ""
    ctx.mask_mod = inputs[12] if len(inputs) > 12 else ""
    ctx.mark_non_differentiable(lse)


def _attention_grad(ctx, grad_output, grad_lse):
    q, k, v, o, lse = ctx.saved_tensors
    # The backward's own default tiles and strategy (the forward's tiles do
    # not apply to its kernels).
    dq, dk, dv = torch.ops.fa.attention_backward(
        grad_output, q, k, v, o, lse, ctx.causal, ctx.scale,
        ctx.deterministic, 0, 0, 0, "auto", 0, ctx.score_mod, ctx.mask_mod)
    # No gradient for the flags, the scale, the tiles and the variant.
    return (dq, dk, dv) + (None,) * 10


attention_forward.register_autograd(_attention_grad,
                                    setup_context=_setup_context)
