"""The reference of one sequence (or batch entry) of a packed or cached
batch, in torch at the inputs' dtype and device, shared by
test_varlen.py and test_kvcache.py: q [Sq, Hq, D] against k, v [Sk, Hkv,
D], GQA by repetition, softcap, the causal mask and window_size aligned to
the bottom right (flash-attn's conventions), attention sinks (one logit
per query head joining each row's softmax, no value row: gpt-oss's). Needs
torch (imported when called)."""


def _scores(q, k, scale, causal, window, softcap):
    """The (soft-capped) scores [Hq, Sq, Sk] and the kept ones [Sq, Sk]."""
    import torch

    sq, hq, _ = q.shape
    sk, hkv, _ = k.shape
    kk = k.repeat_interleave(hq // hkv, dim=1)
    s = torch.einsum("ihd,jhd->hij", q, kk) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(sk, device=q.device)[None, :]
    diag = i + sk - sq
    keep = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if causal:
        keep &= j <= diag
    left, right = window
    if left >= 0:
        keep &= j >= diag - left
    if right >= 0:
        keep &= j <= diag + right
    return s, keep


def _output(p, v, q):
    """O [Sq, Hq, D] = P V in q's dtype (P [Hq, Sq, Sk])."""
    import torch

    vv = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    return torch.einsum("hij,jhd->ihd", p.to(q.dtype), vv)


def _with_sinks(wide, sinks):
    """The scores [Hq, Sq, Sk] with the sinks [Hq] as one more column."""
    import torch

    column = sinks.to(wide.dtype)[:, None, None].expand(
        wide.shape[0], wide.shape[1], 1)
    return torch.cat([wide, column], dim=-1)


def sequence_attention(q, k, v, scale, causal, window=(-1, -1), softcap=0.0,
                       sinks=None):
    """O [Sq, Hq, D] and LSE [Hq, Sq]; rows without keys give O = 0 and
    LSE = -inf (with sinks: the sink). Not for autograd (see
    sequence_attention_grad)."""
    import torch

    s, keep = _scores(q, k, scale, causal, window, softcap)
    s = s.masked_fill(~keep, float("-inf"))
    wide = s if s.dtype == torch.float64 else s.float()
    if sinks is not None:
        wide = _with_sinks(wide, sinks)
    lse = torch.logsumexp(wide, dim=-1)
    p = torch.nan_to_num(torch.softmax(wide, dim=-1), nan=0.0)
    if sinks is not None:
        p = p[..., :-1]
    return _output(p, v, q), lse


def sequence_attention_grad(q, k, v, scale, causal, window=(-1, -1),
                            softcap=0.0, sinks=None):
    """sequence_attention's O in a form autograd differentiates to the
    exact gradients everywhere (sinks included): rows without keys give
    O = 0 and no gradient (no NaN from a softmax of -inf alone)."""
    import torch

    s, keep = _scores(q, k, scale, causal, window, softcap)
    if sinks is not None:
        # Every row has the sink: no row is -inf alone.
        s = s.masked_fill(~keep, float("-inf"))
        wide = s if s.dtype == torch.float64 else s.float()
        return _output(torch.softmax(_with_sinks(wide, sinks),
                                     dim=-1)[..., :-1], v, q)
    seen = keep.any(dim=-1, keepdim=True)
    s = s.masked_fill(~keep, float("-inf")).masked_fill(~seen, 0.0)
    wide = s if s.dtype == torch.float64 else s.float()
    return _output(torch.softmax(wide, dim=-1) * seen, v, q)


def softcap_error(softcap, dtype):
    """What a 16-bit kernel's softcap may move each score, and so LSE, by:
    it runs on tanh.approx.f32 (relative error 2^-10.987, PTX ISA); f32
    kernels keep f32 accuracy."""
    import torch

    if not softcap or dtype == torch.float32:
        return 0.0
    return softcap * 2.0 ** -10.987
