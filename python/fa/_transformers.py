"""fa.attention as a transformers attention backend.

register(name) adds an attention function and a mask function under `name`
to transformers' registries (AttentionInterface, AttentionMaskInterface);
a model built with attn_implementation=name then runs its attention here.
"""

import fa


def _mask(*args, attention_mask=None, **kwargs):
    """The mask transformers builds for this backend: none. The kernels
    apply the causal mask themselves (bottom-right aligned, which is what a
    KV cache needs); a padding mask with any padded position is an error."""
    if attention_mask is not None and not bool(attention_mask.all()):
        raise NotImplementedError(
            "fa: padding masks are not supported by the fa attention backend "
            "(every position of attention_mask must be 1)")
    return None


def _attention(module, query, key, value, attention_mask, scaling=None,
               dropout=0.0, **kwargs):
    """query [B, Hq, Sq, D], key and value [B, Hkv, Sk, D] (GQA as they
    come); returns ([B, Sq, Hq, D], None) as transformers expects. s_aux
    (gpt-oss): the attention's sinks, its parameter module.sinks ([Hq], in
    the model's dtype), as fa.attention's sinks: converted to float32 there
    in autograd-visible code, so that training updates the parameter."""
    if attention_mask is not None:
        raise NotImplementedError(
            "fa: the fa attention backend takes no attention mask (padding "
            "or custom masks); it applies the causal mask itself")
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
