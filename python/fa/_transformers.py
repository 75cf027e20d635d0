"""fa.attention as a transformers attention backend.

register(name) adds an attention function and a mask function under `name`
to transformers' registries (AttentionInterface, AttentionMaskInterface);
a model built with attn_implementation=name then runs its attention here.
"""

import fa


def _mask(*args, attention_mask=None, kv_length=None, kv_offset=0,
          local_size=None, config=None, **kwargs):
    """The mask transformers builds for this backend: none, or the 2-d
    padding mask [B, kv_length] (bool, True = a real token) when some
    position is padding. The kernels apply the causal mask themselves
    (bottom-right aligned, which is what a KV cache needs); padding is
    removed before them (a varlen batch of the real tokens). Sliding
    windows reach the attention as its `sliding_window` argument; a
    chunked layer's chunks (Llama 4's attention_chunk_size, given here as
    local_size) do not, so keys past one chunk are refused rather than
    attended causally (as transformers refuses them for flash-attn)."""
    chunk = getattr(config, "attention_chunk_size", None)
    if (chunk is not None and local_size == chunk and kv_length is not None
            and kv_length + kv_offset > chunk):
        raise NotImplementedError(
            f"fa: chunked attention layers (attention_chunk_size={chunk}) "
            f"with {kv_length + kv_offset} keys are not supported by the fa "
            f"attention backend (it would attend across chunks); use "
            f"fa.attention with mask_mod=fa.variants.chunked({chunk}) or "
            f"another attn_implementation")
    if attention_mask is None or attention_mask.dim() != 2:
        return None
    if kv_length is not None:
        attention_mask = attention_mask[:, kv_offset:kv_offset + kv_length]
    if bool(attention_mask.all()):
        return None
    return attention_mask.bool()


def _unpadded(query, key, value, padding, causal, scaling, window, softcap,
              sinks):
    """Attention of a padded batch as a varlen batch of its real tokens:
    padding [B, Sk] marks the keys, the queries are the last Sq positions
    (transformers' layout with and without a KV cache). window: None or
    (left, right); softcap: None or the cap; sinks: None or [Hq] (s_aux).
    Returns [B, Sq, Hq, D] with zeros at padded query positions;
    differentiable (training on padded batches)."""
    import torch

    batch, _, q_len, _ = query.shape
    k_len = key.shape[2]
    if padding.shape != (batch, k_len):
        raise ValueError(f"fa: the padding mask {tuple(padding.shape)} does "
                         f"not match the keys [B, Sk] = [{batch}, {k_len}]")
    keys = padding
    queries = padding[:, k_len - q_len:]
    q_counts = queries.sum(dim=1, dtype=torch.int32)
    k_counts = keys.sum(dim=1, dtype=torch.int32)
    zero = torch.zeros(1, dtype=torch.int32, device=query.device)
    cu_q = torch.cat([zero, q_counts.cumsum(0, dtype=torch.int32)])
    cu_k = torch.cat([zero, k_counts.cumsum(0, dtype=torch.int32)])
    q = query.transpose(1, 2)[queries]
    k = key.transpose(1, 2)[keys]
    v = value.transpose(1, 2)[keys]
    out = fa.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, int(q_counts.max()), int(k_counts.max()),
        softmax_scale=scaling, causal=causal, window_size=window or (-1, -1),
        softcap=softcap or 0.0, s_aux=sinks)
    padded = query.new_zeros(batch, q_len, query.shape[1], query.shape[3])
    padded[queries] = out
    return padded


def _attention(module, query, key, value, attention_mask, scaling=None,
               dropout=0.0, **kwargs):
    """query [B, Hq, Sq, D], key and value [B, Hkv, Sk, D] (GQA as they
    come); returns ([B, Sq, Hq, D], None) as transformers expects. A
    padding mask (from _mask) runs the real tokens as a varlen batch. s_aux
    (gpt-oss): the attention's sinks, its parameter module.sinks ([Hq], in
    the model's dtype), as fa.attention's sinks: converted to float32 there
    in autograd-visible code, so that training updates the parameter."""
    padding = None
    if attention_mask is not None:
        if attention_mask.dim() != 2:
            raise NotImplementedError(
                "fa: the fa attention backend takes padding masks ([B, Sk]) "
                "only, not custom masks; it applies the causal mask itself")
        padding = attention_mask.bool()
    if dropout:
        raise NotImplementedError(
            f"fa: attention dropout ({dropout}) is not supported")
    causal = kwargs.get("is_causal")
    if causal is None:
        causal = getattr(module, "is_causal", True)
    causal = bool(causal)
    # gpt-oss's sinks: one logit per query head in each row's softmax
    # denominator, as its eager attention's cat([scores, sinks]) -> softmax
    # -> drop the sink's column.
    sinks = kwargs.get("s_aux")
    # The models' variants (Mistral/Gemma sliding windows, Gemma 2's
    # softcapping), as their eager attention computes them: a window of W
    # keeps the keys with q - kv < W.
    mask_mod = score_mod = None
    window = kwargs.get("sliding_window")
    if window is not None and window > 0:
        mask_mod = fa.variants.sliding_window(
            int(window) - 1, -1 if causal else int(window) - 1)
    cap = kwargs.get("softcap")
    if cap:
        score_mod = fa.variants.softcap(cap)
    if padding is not None:
        # The varlen call takes the window and the cap as numbers.
        window_size = None
        if window is not None and window > 0:
            window_size = (int(window) - 1,
                           -1 if causal else int(window) - 1)
        return _unpadded(query, key, value, padding, causal, scaling,
                         window_size, float(cap) if cap else None,
                         sinks), None
    out = fa.attention(query, key, value, causal=causal, scale=scaling,
                       score_mod=score_mod, mask_mod=mask_mod, sinks=sinks)
    return out.transpose(1, 2), None


def register(name):
    from transformers import AttentionInterface

    AttentionInterface.register(name, _attention)
    try:
        from transformers import AttentionMaskInterface
    except ImportError:  # versions without per-backend masks
        return
    AttentionMaskInterface.register(name, _mask)
