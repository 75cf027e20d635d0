"""fa's serving entry points: packed variable-length batches
(flash_attn_varlen_func) and KV caches, paged or not (flash_attn_with_kvcache),
with the checks of their offset and index tables. Part of the fa package
(imported into it; the C ABI helpers come from fa/__init__.py)."""

import ctypes
import functools

from . import (FaError, _check, _check_inputs, _check_scale, _check_sinks,
               _choice, _config, _describe, _device_index, _dtype_code, _extras, _flag,
               _flash_variant_texts, _integer, _launch_directly, _library,
               _runtime, _stream_of, _strategies, _torch, attention,
               flash_attn_func)


def _packed_rows(t):
    """A packed tensor [total, H, D] as the C ABI's descriptor of its [1, H,
    total, D] view (no copy)."""
    return ctypes.byref(_describe(t.unsqueeze(0).transpose(1, 2)))


def _entry_point(name, what):
    """The C ABI's function `name`, or an error saying the library is older
    than `what`."""
    lib = _library()
    if not hasattr(lib, name):
        raise FaError(0, f"this libfa_runtime.so predates {what} (no "
                         f"{name}); rebuild it")
    return getattr(lib, name)


def _check_int32_table(where, name, t, q, shape_text, shape_ok):
    """A TypeError unless `t` is an int32 tensor whose shape passes
    shape_ok (shape_text says which), a ValueError unless it is on q's
    device: the index tables of the cache and varlen calls."""
    if (not isinstance(t, _torch.Tensor) or t.dtype != _torch.int32
            or not shape_ok(tuple(t.shape))):
        raise TypeError(f"{where}: {name} must be an int32 tensor "
                        f"{shape_text}, got {getattr(t, 'dtype', type(t))} "
                        f"{tuple(getattr(t, 'shape', ()))}")
    if t.device != q.device:
        raise ValueError(f"{where}: {name} is on {t.device}, q on {q.device}")


@functools.lru_cache(maxsize=64)
def _kvcache_config(score_mod, mask_mod, strategy="auto", sinks=False):
    """The kvcache call's fa_kernel_config (defaults, kv_lens, the variant,
    the strategy, the sinks), built once per variant: a decode step is
    short enough for the structure's checks to show."""
    return _config(0, 0, 0, strategy=strategy, variant=(score_mod, mask_mod),
                   kv_lens=True, sinks=sinks)._obj


def _kvcache_forward(q, k_cache, v_cache, kv_lens, causal, scale,
                     score_mod="", mask_mod="", num_splits=0,
                     block_table=None, cache_batch_idx=None, strategy="auto",
                     sinks=None):
    """O [B, Sq, Hq, D] and LSE [B, Hq, Sq] of q [B, Sq, Hq, D] against the
    first kv_lens[b] keys of k_cache, v_cache [B, S, Hkv, D], the keys split
    into num_splits parts (0: the runtime's choice), launched on the current
    stream (no checks of the lengths' values: flash_attn_with_kvcache's).
    block_table: int32 [B, max_pages] of a paged cache, k_cache and v_cache
    then the pool [num_pages, P, Hkv, D]; cache_batch_idx: int32 [B], the
    cache entry of each batch entry; strategy: fa.attention's; sinks:
    float32 [Hq]."""
    import torch

    batch, q_len, heads, _ = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((batch, heads, q_len), dtype=torch.float32,
                      device=q.device)
    config = ctypes.byref(_kvcache_config(score_mod, mask_mod, strategy,
                                          sinks is not None))
    call = _entry_point("fa_attention_kvcache_forward", "KV caches")
    _check(call(
        _runtime(_device_index(q)), ctypes.byref(_describe(q.transpose(1, 2))),
        ctypes.byref(_describe(k_cache.transpose(1, 2))),
        ctypes.byref(_describe(v_cache.transpose(1, 2))),
        ctypes.byref(_describe(o.transpose(1, 2))),
        ctypes.byref(_describe(lse)), ctypes.byref(_describe(kv_lens)),
        ctypes.byref(_extras(sinks, kv_splits=num_splits,
                             block_table=block_table,
                             cache_batch_idx=cache_batch_idx)),
        _dtype_code(q), _flag("causal", causal), float(scale), config,
        _stream_of(q)))
    return o, lse


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None,
                            cache_seqlens=None, cache_batch_idx=None,
                            block_table=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), softcap=0.0,
                            num_splits=0, return_softmax_lse=False,
                            check_lengths=True, strategy="auto", s_aux=None):
    """FlashAttention's KV cache call: q [B, Sq, Hq, D] (Sq = 1 to decode
    one token) against the filled part of a cache k_cache, v_cache [B,
    S_cache, Hkv, D]. cache_seqlens (an int, or int32 [B] on q's device;
    None = the whole cache) is how many keys each batch entry has; k, v
    [B, S_new, Hkv, D] (optional) are the new tokens' keys and values,
    written into the cache at cache_seqlens[b] (in place) before the
    attention, which then sees cache_seqlens[b] + S_new keys. The causal
    mask aligns the queries to the end of those keys (the last query is
    the newest token); window_size and softcap as flash_attn_func's.
    Returns O [B, Sq, Hq, D] (and with return_softmax_lse LSE [B, Hq, Sq]
    float32). The lengths are read back once per call to check them
    against the cache (outside torch.compile; check_lengths=False skips
    it: the kernel then clamps them to the cache). num_splits: the parts
    the keys are split into, each a program, merged by their log-sum-exps
    (split-KV: 0 = the runtime's choice from the problem and the SMs, 1 =
    no split, up to 128). block_table (int32 [B, max_pages] on q's
    device): a paged cache, k_cache and v_cache then the pool of pages
    [num_pages, P, Hkv, D] and entry b's keys its pages one after another
    (capacity max_pages x P; the new tokens go into those pages); any page
    size P >= 1: where the kernel's K/V tile divides P (decode: 32 keys;
    prefill: 64, 32 or 16) a tile is read from one page (one table lookup
    a tile), other pages are read row by row (a lookup a row).
    cache_batch_idx (int32 [B] on q's device): batch entry b reads (and
    appends to) cache entry cache_batch_idx[b] of a cache [B_cache,
    S_cache, Hkv, D] (not with block_table). strategy (not flash-attn's):
    fa.attention's; "auto" takes the split-KV mma kernels to decode and, on
    sm_90a, wgmma for a chunked prefill (mma with a block_table: "wgmma"
    asks for it where the K/V tile divides the page). s_aux: attention
    sinks, one logit per query head in every row's softmax denominator
    ([Hq], any float dtype; flash_attn_varlen_func's s_aux: gpt-oss's).
    Not yet: gradients (an inference call)."""
    where = "fa.flash_attn_with_kvcache"
    torch = _torch
    if torch is None:
        raise ImportError(f"{where} needs torch")
    splits = _integer("num_splits", num_splits)
    strategy = _choice(where, "strategy", strategy, _strategies())
    if not 0 <= splits <= 128:
        raise ValueError(f"{where}: num_splits = {splits}: it must be 0 (the "
                         "runtime's choice), 1 (no split) or up to 128")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}: {name} must be a torch.Tensor")
        if t.dim() != 4:
            raise ValueError(f"{where}: {name} must be [B, S, H, D], got "
                             f"{tuple(t.shape)}")
    # (Device and dtype do not depend on the layout: no transposed views.)
    _check_inputs(where, (("q", q), ("k_cache", k_cache),
                          ("v_cache", v_cache)))
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"{where}: k_cache {tuple(k_cache.shape)} and "
                         f"v_cache {tuple(v_cache.shape)} must have one shape")
    batch, capacity = k_cache.shape[0], k_cache.shape[1]
    if block_table is not None:
        # A pool of pages: the table's rows are the batch entries.
        _check_int32_table(where, "block_table", block_table, q,
                           "[B, max_pages] (max_pages >= 1)",
                           lambda shape: len(shape) == 2 and shape[1] >= 1)
        page = k_cache.shape[1]
        if page < 1:
            raise ValueError(f"{where}: page size {page} (k_cache's dimension "
                             "1) must be at least 1")
        pages = k_cache.shape[0]
        batch, capacity = block_table.shape[0], block_table.shape[1] * page
        block_table = block_table.contiguous()
    if cache_batch_idx is not None:
        # The queries' batch entries read cache entries by index.
        if block_table is not None:
            raise ValueError(f"{where}: cache_batch_idx does not take a "
                             "block_table (a paged cache) yet")
        _check_int32_table(where, "cache_batch_idx", cache_batch_idx, q,
                           "[B]", lambda shape: len(shape) == 1)
        cache_entries = batch
        batch = cache_batch_idx.shape[0]
        cache_batch_idx = cache_batch_idx.contiguous()
    if q.shape[0] != batch:
        raise ValueError(f"{where}: q has {q.shape[0]} batch entries, "
                         + ("cache_batch_idx" if cache_batch_idx is not None
                            else "the cache") + f" {batch}")
    if (k is None) != (v is None):
        raise ValueError(f"{where}: give k and v together (the new tokens' "
                         "keys and values)")
    new = 0
    if k is not None:
        for name, t in (("k", k), ("v", v)):
            if (not isinstance(t, torch.Tensor) or t.dim() != 4
                    or t.shape[0] != batch
                    or t.shape[2:] != k_cache.shape[2:]
                    or t.dtype != k_cache.dtype or t.device != q.device):
                raise ValueError(
                    f"{where}: {name} must be [B, S_new, Hkv, D] = [{batch}, "
                    f"S_new, {k_cache.shape[2]}, {k_cache.shape[3]}] of the "
                    f"cache's dtype on its device, got "
                    f"{getattr(t, 'shape', type(t).__name__)}")
        if k.shape != v.shape:
            raise ValueError(f"{where}: k {tuple(k.shape)} and v "
                             f"{tuple(v.shape)} must have one shape")
        new = k.shape[1]
    if cache_seqlens is None:
        lengths = torch.full((batch,), capacity - new, dtype=torch.int32,
                             device=q.device)
    elif isinstance(cache_seqlens, int):
        lengths = torch.full((batch,), cache_seqlens, dtype=torch.int32,
                             device=q.device)
    else:
        lengths = cache_seqlens
        if not isinstance(lengths, torch.Tensor) or \
                lengths.dtype != torch.int32 or lengths.shape != (batch,):
            raise TypeError(f"{where}: cache_seqlens must be an int or an "
                            f"int32 tensor [B] = [{batch}], got "
                            f"{getattr(lengths, 'dtype', type(lengths))} "
                            f"{tuple(getattr(lengths, 'shape', ()))}")
        if lengths.device != q.device:
            raise ValueError(f"{where}: cache_seqlens is on {lengths.device}, "
                             f"q on {q.device}")
    if (check_lengths and not torch.compiler.is_compiling()
            and not torch.jit.is_tracing()):
        values = lengths.tolist()
        if cache_batch_idx is not None:
            for b, entry in enumerate(cache_batch_idx.tolist()):
                if not 0 <= entry < cache_entries:
                    raise ValueError(
                        f"{where}: cache_batch_idx[{b}] is {entry}; the "
                        f"cache holds entries 0 .. {cache_entries - 1}")
        if block_table is not None:
            used = block_table.tolist()
            for b, row in enumerate(used):
                n = (values[b] + new + page - 1) // page
                for p in row[:n]:
                    if not 0 <= p < pages:
                        raise ValueError(
                            f"{where}: block_table[{b}] names page {p}; the "
                            f"cache holds pages 0 .. {pages - 1}")
        for b, n in enumerate(values):
            if n < 0 or n + new > capacity:
                raise ValueError(
                    f"{where}: batch entry {b} holds {n} keys"
                    + (f" and appends {new}" if new else "")
                    + f"; the cache holds {capacity} (cache_seqlens must be "
                    f"in [0, {capacity - new}])")
    if new:
        # The new tokens into rows cache_seqlens[b] ... of each entry (of a
        # paged entry: its page j // P, row j % P).
        rows = lengths.long()[:, None] + torch.arange(new, device=q.device)
        entries = torch.arange(batch, device=q.device)[:, None]
        if block_table is not None:
            entries = block_table.long().gather(
                1, (rows // page).clamp(max=block_table.shape[1] - 1))
            rows = rows % page
        elif cache_batch_idx is not None:
            entries = cache_batch_idx.long()[:, None]
        k_cache[entries, rows] = k
        v_cache[entries, rows] = v
    # (No kernel launch for the lengths when nothing is appended.)
    kv_lens = lengths.contiguous() if not new else \
        (lengths + new).to(torch.int32).contiguous()
    scale = _check_scale(where, softmax_scale)
    score_text, mask_text = _flash_variant_texts(where, window_size, softcap)
    causal = bool(_flag("causal", causal))
    sinks = (None if s_aux is None
             else _check_sinks(where, s_aux, q, heads_dim=2))
    # Eagerly, outside tracing and dispatch modes, the op's dispatch (tens
    # of microseconds, as long as a decode step's kernels) is skipped.
    if _launch_directly((q, k_cache, v_cache, kv_lens)):
        o, lse = _kvcache_forward(q, k_cache, v_cache, kv_lens, causal, scale,
                                  score_text, mask_text, splits, block_table,
                                  cache_batch_idx, strategy, sinks)
    else:
        # (Without sinks the op's call is the one it always was.)
        extra = () if sinks is None else (sinks,)
        o, lse = torch.ops.fa.kvcache_attention_forward(
            q, k_cache, v_cache, kv_lens, causal, scale, score_text,
            mask_text, splits, block_table, cache_batch_idx, strategy,
            *extra)
    return (o, lse) if return_softmax_lse else o


# What the read-back check of an offset table found, per tensor: (its
# version counter and address then, its last offset, its longest
# sequence). A training step passes one table to every layer's call; it
# is read back on the first (a device synchronization) and again only after
# an in-place change through torch (which bumps the version counter).
_checked_offsets = None


def _offset_facts():
    global _checked_offsets
    if _checked_offsets is None:
        from torch.utils.weak import WeakIdKeyDictionary
        _checked_offsets = WeakIdKeyDictionary()
    return _checked_offsets


def _check_cu_seqlens(where, name, cu, q, total, max_seqlen, max_name,
                      values=True):
    """A sequence offset table as the varlen kernels read it: int32 [B + 1]
    on q's device, and (with `values`: read back, outside tracing) 0 first,
    non-decreasing, `total` last (None: any, a paged cache's keys), no
    sequence longer than max_seqlen. A table that passed is not read back
    again while its version counter and address stay (_offset_facts)."""
    torch = _torch
    if not isinstance(cu, torch.Tensor):
        raise TypeError(f"{where}: {name} must be a torch.Tensor (int32 "
                        f"[B + 1]), got {type(cu).__name__}")
    if cu.dtype != torch.int32:
        raise TypeError(f"{where}: {name} is {cu.dtype}; expected "
                        "torch.int32 [B + 1]")
    if cu.dim() != 1 or cu.shape[0] < 1:
        raise ValueError(f"{where}: {name} must be [B + 1] (at least one "
                         f"offset), got {list(cu.shape)}")
    if cu.device != q.device:
        raise ValueError(f"{where}: {name} is on {cu.device}, q on "
                         f"{q.device}")
    if not values or torch.compiler.is_compiling() or torch.jit.is_tracing():
        return cu.contiguous()
    facts = _offset_facts().get(cu)
    state = (cu._version, cu.data_ptr())
    if facts is not None and facts[0] == state:
        _, last, longest = facts
        if (total is None or last == total) and longest <= max_seqlen:
            return cu.contiguous()
    offsets = cu.tolist()
    if offsets[0] != 0:
        raise ValueError(f"{where}: {name}[0] must be 0, got {offsets[0]}")
    # The table's own rules first: a length is meaningless until they hold.
    for b in range(len(offsets) - 1):
        if offsets[b + 1] < offsets[b]:
            raise ValueError(f"{where}: {name} must be non-decreasing: "
                             f"{name}[{b + 1}] = {offsets[b + 1]} < "
                             f"{name}[{b}] = {offsets[b]}")
    if total is not None and offsets[-1] != total:
        raise ValueError(f"{where}: {name}[-1] = {offsets[-1]} must be the "
                         f"packed rows ({total})")
    for b in range(len(offsets) - 1):
        if offsets[b + 1] - offsets[b] > max_seqlen:
            raise ValueError(f"{where}: sequence {b} has "
                             f"{offsets[b + 1] - offsets[b]} rows, more than "
                             f"{max_name} = {max_seqlen}")
    _offset_facts()[cu] = (state, offsets[-1], max(
        (offsets[b + 1] - offsets[b] for b in range(len(offsets) - 1)),
        default=0))
    return cu.contiguous()


def _varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                    max_seqlen_k, causal, scale, score_mod="", mask_mod="",
                    seqused_k=None, block_table=None, sinks=None):
    """O [total_q, Hq, D] and LSE [Hq, total_q] of a packed batch, launched
    on the current stream (no autograd, no checks of the offsets' values:
    flash_attn_varlen_func's); seqused_k: int32 [B], the keys each sequence
    uses from its first; block_table: int32 [B, max_pages], k and v then
    the pool of pages [num_pages, P, Hkv, D]; sinks: float32 [Hq]."""
    import torch

    total_q, heads, _ = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((heads, total_q), dtype=torch.float32, device=q.device)

    used = seqused_k is not None
    config = _config(0, 0, 0, variant=(score_mod, mask_mod), varlen=True,
                     kv_lens=used, sinks=sinks is not None)
    name = ("fa_attention_varlen_kvcache_forward" if used
            else "fa_attention_varlen_forward")
    call = _entry_point(name, "varlen batches" + (" with seqused_k" if used
                                                  else ""))
    lens = (ctypes.byref(_describe(seqused_k)),) if used else ()
    # A paged cache's pool [num_pages, P, Hkv, D] as [num_pages, Hkv, P, D].
    pool = ((lambda t: ctypes.byref(_describe(t.transpose(1, 2))))
            if block_table is not None else _packed_rows)
    extras = (ctypes.byref(_extras(sinks, block_table=block_table))
              if block_table is not None or sinks is not None else None)
    _check(call(
        _runtime(_device_index(q)), _packed_rows(q), pool(k), pool(v),
        _packed_rows(o), ctypes.byref(_describe(lse.unsqueeze(0))),
        ctypes.byref(_describe(cu_seqlens_q)),
        ctypes.byref(_describe(cu_seqlens_k)), int(max_seqlen_q),
        int(max_seqlen_k), *lens, extras, _dtype_code(q),
        _flag("causal", causal), float(scale), config, _stream_of(q)))
    return o, lse


def _varlen_backward(grad_output, q, k, v, o, lse, cu_seqlens_q,
                     cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
                     score_mod="", mask_mod="", deterministic=False,
                     sinks=None):
    """dQ [total_q, Hq, D], dK and dV [total_k, Hkv, D] of a packed batch
    (the forward's O and LSE [Hq, total_q]), launched on the current
    stream (no autograd); with sinks (float32 [Hq]) dSinks (float32 [Hq])
    too."""
    import torch

    # Gradients arrive in any layout; the kernels read rows with a
    # contiguous last dimension.
    if grad_output.stride(-1) != 1 or grad_output.dtype != q.dtype:
        grad_output = grad_output.to(q.dtype).contiguous()
    dq = torch.empty_like(q)
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)

    config = _config(0, 0, 0, backward=True, deterministic=deterministic,
                     variant=(score_mod, mask_mod), varlen=True,
                     sinks=sinks is not None)
    call = _entry_point("fa_attention_varlen_backward",
                        "the varlen backward")
    # Written whole by the call (zeroed, then the rows' shares added).
    dsinks = None if sinks is None else torch.empty(
        q.shape[1], dtype=torch.float32, device=q.device)
    extras = (ctypes.byref(_extras(sinks, dsinks)) if sinks is not None
              else None)
    _check(call(
        _runtime(_device_index(q)), _packed_rows(q), _packed_rows(k),
        _packed_rows(v), _packed_rows(o), _packed_rows(grad_output),
        ctypes.byref(_describe(lse.unsqueeze(0))), _packed_rows(dq),
        _packed_rows(dk), _packed_rows(dv),
        ctypes.byref(_describe(cu_seqlens_q)),
        ctypes.byref(_describe(cu_seqlens_k)), int(max_seqlen_q),
        int(max_seqlen_k), extras, _dtype_code(q), _flag("causal", causal),
        float(scale), config, _stream_of(q)))
    return (dq, dk, dv) if sinks is None else (dq, dk, dv, dsinks)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                           max_seqlen_k, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0,
                           return_lse=False, check_offsets=True,
                           seqused_k=None, block_table=None,
                           deterministic=False, s_aux=None):
    """FlashAttention's varlen convention: a packed batch of sequences of
    their own lengths. q [total_q, Hq, D], k and v [total_k, Hkv, D] hold
    the rows of every sequence one after another; cu_seqlens_q and
    cu_seqlens_k (int32 [B + 1], on q's device) where each starts (0 first,
    non-decreasing, total_q / total_k last); max_seqlen_q / max_seqlen_k
    the longest sequence's rows. Sequence b attends only within itself,
    with the causal mask aligned to its own bottom right (and
    window_size, softcap as flash_attn_func's, per sequence). Returns O
    [total_q, Hq, D] (and, with return_lse, LSE [Hq, total_q] float32).
    The offsets are read back to check them (outside torch.compile) on a
    table's first call, and again only after it changes in place through
    torch (its version counter): a synchronization with the device once
    per table (a training step's layers share theirs) that a serving loop
    may skip with check_offsets=False (the kernel then never reads or
    writes outside the tensors, but offsets that break the rules leave
    rows of O unwritten or mixed). Differentiable (q, k, v; the
    16-bit backward runs on the wgmma strategy on sm_90a at head dims 64
    and 128, else on mma, f32 on simt; deterministic=True adds
    each query tile's dQ shares in a fixed K/V tile order, bitwise the
    same gradients run to run).
    seqused_k (int32 [B] on q's device): sequence b attends to the first
    seqused_k[b] of its keys only (clamped to them; FlashAttention-3's
    convention); forward only (no gradient through it yet).
    block_table (int32 [B, max_pages] on q's device; forward only): the
    keys live in a paged cache (FlashAttention-2's convention, as vLLM's
    chunked prefill uses it): k and v are the pool of pages [num_pages, P,
    Hkv, D], sequence b's keys the first cu_seqlens_k[b + 1] -
    cu_seqlens_k[b] rows of its pages one after another (at most max_pages
    x P, checked), cu_seqlens_k[-1] any total; page numbers are checked
    against the pool with the offsets. Any page size P >= 1 (where the
    kernel's K/V tile divides P a tile is read from one page).
    s_aux: attention sinks, one logit per query head in every row's
    softmax denominator ([Hq], any float dtype; flash_attn_func's s_aux,
    fa.attention's sinks: gpt-oss's); differentiable without seqused_k and
    block_table (which are forward only)."""
    where = "fa.flash_attn_varlen_func"
    torch = _torch
    if torch is None:
        raise ImportError(f"{where} needs torch")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}: {name} must be a torch.Tensor")
    # The same rules as fa.attention's tensors, on their [1, H, total, D]
    # views (with block_table, k and v are a pool of pages: [num_pages,
    # Hkv, P, D]).
    paged = block_table is not None
    for name, t in (("q", q), ("k", k), ("v", v)):
        pool = paged and name != "q"
        if t.dim() != (4 if pool else 3):
            raise ValueError(
                f"{where}: {name} must be "
                + ("the pool of pages [num_pages, P, Hkv, D] (with "
                   "block_table)" if pool else "[total, H, D]")
                + f", got {tuple(t.shape)}")
    _check_inputs(where, tuple(
        (name, t.transpose(1, 2) if t.dim() == 4
         else t.unsqueeze(0).transpose(1, 2))
        for name, t in (("q", q), ("k", k), ("v", v))))
    if k.shape != v.shape:
        raise ValueError(f"{where}: k {tuple(k.shape)} and v "
                         f"{tuple(v.shape)} must have one shape")
    max_seqlen_q = _integer("max_seqlen_q", max_seqlen_q)
    max_seqlen_k = _integer("max_seqlen_k", max_seqlen_k)
    values = bool(_flag("check_offsets", check_offsets))
    # Types and shapes of both tables before either is read back.
    for name, cu in (("cu_seqlens_q", cu_seqlens_q),
                     ("cu_seqlens_k", cu_seqlens_k)):
        _check_cu_seqlens(where, name, cu, q, 0, 0, "", values=False)
    if cu_seqlens_q.shape != cu_seqlens_k.shape:
        raise ValueError(f"{where}: cu_seqlens_q {list(cu_seqlens_q.shape)} "
                         f"and cu_seqlens_k {list(cu_seqlens_k.shape)} must "
                         "both hold B + 1 offsets")
    cu_seqlens_q = _check_cu_seqlens(where, "cu_seqlens_q", cu_seqlens_q, q,
                                     q.shape[0], max_seqlen_q, "max_seqlen_q",
                                     values)
    # A paged sequence's keys are rows of its pages, not packed rows: any
    # total, each at most the table row's capacity.
    if paged:
        _check_int32_table(where, "block_table", block_table, q,
                           f"[B, max_pages] = [{cu_seqlens_q.shape[0] - 1}, "
                           "max_pages >= 1]",
                           lambda shape: len(shape) == 2
                           and shape[0] == cu_seqlens_q.shape[0] - 1
                           and shape[1] >= 1)
        if k.shape[1] < 1:
            raise ValueError(f"{where}: page size {k.shape[1]} (k's "
                             "dimension 1) must be at least 1")
        capacity = block_table.shape[1] * k.shape[1]
        if not 0 <= max_seqlen_k <= capacity:
            raise ValueError(f"{where}: max_seqlen_k = {max_seqlen_k} must "
                             f"be in [0, {capacity}] (max_pages x P)")
        block_table = block_table.contiguous()
    cu_seqlens_k = _check_cu_seqlens(where, "cu_seqlens_k", cu_seqlens_k, q,
                                     None if paged else k.shape[0],
                                     max_seqlen_k, "max_seqlen_k", values)
    if paged and values and not (torch.compiler.is_compiling()
                                 or torch.jit.is_tracing()):
        offsets = cu_seqlens_k.tolist()
        pages, page = k.shape[0], k.shape[1]
        for b, row in enumerate(block_table.tolist()):
            n = (offsets[b + 1] - offsets[b] + page - 1) // page
            for p in row[:n]:
                if not 0 <= p < pages:
                    raise ValueError(
                        f"{where}: block_table[{b}] names page {p}; the "
                        f"cache holds pages 0 .. {pages - 1}")
    scale = _check_scale(where, softmax_scale)
    score_text, mask_text = _flash_variant_texts(where, window_size, softcap)
    causal = bool(_flag("causal", causal))
    if seqused_k is not None:
        batch = cu_seqlens_q.shape[0] - 1
        _check_int32_table(where, "seqused_k", seqused_k, q,
                           f"[B] = [{batch}]",
                           lambda shape: shape == (batch,))
        seqused_k = seqused_k.contiguous()
    sinks = None if s_aux is None else _check_sinks(where, s_aux, q)
    # The backward reads neither the used lengths nor a paged cache yet.
    forward_only = ("block_table" if paged
                    else "seqused_k" if seqused_k is not None else None)
    if forward_only and torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (q, k, v, s_aux)):
        raise NotImplementedError(
            f"{where}: {forward_only} is forward only (the backward does not "
            "take it yet): call it under torch.no_grad()")
    # (Without sinks the forward-only ops' calls are the ones they always
    # were.)
    forward_sinks = () if sinks is None else (sinks,)
    if paged:
        o, lse = torch.ops.fa.varlen_paged_attention_forward(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
            causal, scale, score_text, mask_text, block_table, seqused_k,
            *forward_sinks)
        return (o, lse) if return_lse else o
    if seqused_k is not None:
        o, lse = torch.ops.fa.varlen_seqused_attention_forward(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
            causal, scale, score_text, mask_text, seqused_k, *forward_sinks)
        return (o, lse) if return_lse else o
    deterministic = bool(_flag("deterministic", deterministic))
    # (Without them the op's call is the one it always was.)
    extra = ((deterministic, sinks) if sinks is not None
             else (True,) if deterministic else ())
    o, lse = torch.ops.fa.varlen_attention_forward(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
        causal, scale, score_text, mask_text, *extra)
    return (o, lse) if return_lse else o
