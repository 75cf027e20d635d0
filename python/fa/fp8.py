"""FP8 inputs for fa.attention: quantization with descales, and incoherent
processing (FlashAttention-3's Hadamard rotation of Q and K).

    q8, k8, v8, descales = fa.fp8.quantize(q, k, v, hadamard=True)
    o = fa.attention(q8, k8, v8, causal=True, **descales)

quantize() scales each (batch entry, K/V head) of Q, K and V so that its
largest magnitude lands on e4m3's largest finite value (448) and returns the
e4m3 tensors with the descales fa.attention and fa.flash_attn_func take
(q_descale, k_descale, v_descale: float32 [B, Hkv]; a GQA group's query
heads share Q's factor, as the kernel reads one factor per K/V head).

hadamard=True first rotates the head dim of Q and K by the same orthogonal
matrix R = diag(signs) H / sqrt(D) (H the D x D Walsh-Hadamard matrix,
signs random +-1 from `seed`). R R^T = I, so Q K^T and the attention are
unchanged, but a few large channels (outliers, common in trained models)
are spread over all D channels: every product term of Q K^T then has a
similar magnitude, and e4m3's relative rounding error of each term adds up
to less in the scores. V is not rotated (P V would need O rotated back).
The rotation is a pre-pass here (one D x D matmul per row of Q and K, in
float32); docs/benchmarks.md has the measured RMSE with and without it.
"""

import math

try:
    import torch as _torch
except ImportError:  # pragma: no cover
    _torch = None

__all__ = ["quantize", "hadamard_rotation", "E4M3_MAX"]

#: The largest finite float8_e4m3fn value.
E4M3_MAX = 448.0


def hadamard_rotation(head_dim, seed=0, device="cuda"):
    """The float32 [D, D] orthogonal matrix diag(signs) H / sqrt(D): x @ R
    rotates the head dim of x (D a power of 2; signs +-1 from `seed`)."""
    torch = _require_torch()
    if head_dim < 1 or head_dim & (head_dim - 1):
        raise ValueError("fa.fp8.hadamard_rotation: the head dim must be a "
                         f"power of 2 (Walsh-Hadamard), got {head_dim}")
    h = torch.ones(1, 1, dtype=torch.float32)
    while h.shape[0] < head_dim:  # Sylvester: H_2n = [[H, H], [H, -H]]
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    generator = torch.Generator().manual_seed(int(seed))
    signs = torch.randint(0, 2, (head_dim,), generator=generator) * 2 - 1
    return (signs.to(torch.float32)[:, None] * h / math.sqrt(head_dim)).to(
        device)


def quantize(q, k, v, hadamard=False, seed=0, layout="bhsd"):
    """(q8, k8, v8, descales): q, k, v (float32/float16/bfloat16, [B, H, S,
    D], or [B, S, H, D] with layout="bshd" as flash_attn_func takes them)
    in float8_e4m3fn, and descales = dict(q_descale=, k_descale=,
    v_descale=) of float32 [B, Hkv] for fa.attention / fa.flash_attn_func.
    hadamard=True rotates Q's and K's head dim first (see the module)."""
    torch = _require_torch()
    where = "fa.fp8.quantize"
    if layout not in ("bhsd", "bshd"):
        raise ValueError(f"{where}: layout must be 'bhsd' or 'bshd', got "
                         f"{layout!r}")
    heads_dim = 1 if layout == "bhsd" else 2
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{where}: {name} must be a 4-d tensor")
        if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError(f"{where}: {name} is {t.dtype}; expected "
                            "float32, float16 or bfloat16")
    batch, kv_heads = k.shape[0], k.shape[heads_dim]
    q_heads = q.shape[heads_dim]
    if q_heads % kv_heads or v.shape[heads_dim] != kv_heads:
        raise ValueError(f"{where}: q has {q_heads} heads, k "
                         f"{kv_heads}, v {v.shape[heads_dim]}; q's must be a "
                         "multiple of k's, v's equal to k's")
    if hadamard:
        rotation = hadamard_rotation(q.shape[-1], seed, q.device)
        q = q.float() @ rotation
        k = k.float() @ rotation

    def scaled(t, group):
        # [B, Hkv, group, S, D] with each (b, kv head) group's amax.
        t = t.float()
        if layout == "bshd":
            t = t.transpose(1, 2)
        grouped = t.reshape(batch, kv_heads, group, *t.shape[2:])
        amax = grouped.abs().amax(dim=(2, 3, 4)).clamp_min(1e-12)
        descale = (amax / E4M3_MAX).to(torch.float32)
        codes = (grouped / descale[:, :, None, None, None]).to(
            torch.float8_e4m3fn).reshape(t.shape)
        if layout == "bshd":
            codes = codes.transpose(1, 2).contiguous()
        return codes, descale.contiguous()

    q8, q_descale = scaled(q, q_heads // kv_heads)
    k8, k_descale = scaled(k, 1)
    v8, v_descale = scaled(v, 1)
    return q8, k8, v8, dict(q_descale=q_descale, k_descale=k_descale,
                            v_descale=v_descale)


def _require_torch():
    if _torch is None or not hasattr(_torch, "float8_e4m3fn"):
        raise ImportError("fa.fp8 needs torch with float8_e4m3fn")
    return _torch
