"""Whole transformers models on the fa attention backend, with the variants
their configs ask for: a Gemma-2-style model (logit softcapping, sliding
window on every other layer) and a gpt-oss-style model (attention sinks,
sliding window on every other layer). Random weights, no download.

Training: the logits and every parameter's gradient of a next-token loss
against the model's eager attention in float64, within FlashAttention's
criterion (at most 2x the error of the eager attention at the same dtype,
plus a floor where eager is exact to the last bits; the sinks' gradient
also the rounding of the stored 16-bit O in its D terms, which eager's
autograd does not have).
Generation: greedy decoding with the KV cache; each chosen token is the
eager model's argmax over the same prefix (or within rounding of it), and
the sequence is longer than the window, so the sliding layers' cache
is used past it. Batched generation of left-padded prompts (the backend's
varlen path, sinks included) gives the tokens of each prompt alone.
Run: python3 python/tests/test_models.py (skips without CUDA or
transformers).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    torch = None
    HAVE_CUDA = False

import fa  # noqa: E402

# A window shorter than the training sequence and the generated one.
WINDOW = 40
SEQUENCE = 96


def _eager_experts(model):
    """MoE models: the experts' plain loop (float64 has no grouped GEMM)."""
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
    return model


def _gemma2(attn_implementation, dtype):
    from transformers import Gemma2Config, Gemma2ForCausalLM

    config = Gemma2Config(
        vocab_size=256, hidden_size=256, intermediate_size=512,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, max_position_embeddings=512, sliding_window=WINDOW,
        # Small caps so that the scores below reach the curve of tanh.
        attn_logit_softcapping=4.0, final_logit_softcapping=8.0,
        attn_implementation=attn_implementation)
    torch.manual_seed(0)
    model = Gemma2ForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            # Scores of several units (random weights give ~0.1): the
            # softcap's tanh and the window's cut both matter.
            layer.self_attn.q_proj.weight.mul_(12.0)
    return model.to(device="cuda", dtype=dtype)


def _gpt_oss(attn_implementation, dtype):
    from transformers import GptOssConfig, GptOssForCausalLM

    config = GptOssConfig(
        vocab_size=256, hidden_size=256, intermediate_size=256,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, max_position_embeddings=512, sliding_window=WINDOW,
        # One expert: routing cannot flip between precisions, so the
        # comparison measures attention, not the router's ties.
        num_local_experts=1, num_experts_per_tok=1,
        attn_implementation=attn_implementation)
    torch.manual_seed(0)
    model = GptOssForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(12.0)
            # Sinks of the scores' size: they take a real share of each
            # row's softmax (and get a real gradient).
            layer.self_attn.sinks.normal_(0.0, 2.0)
    return _eager_experts(model).to(device="cuda", dtype=dtype)


MODELS = {"gemma2": _gemma2, "gpt_oss": _gpt_oss}


def _register_recording(name, rounding):
    """The fa backend under `name`, recording for each layer with sinks
    sum over rows of sum_d |dO * O| per query head (float64 [Hq]) in
    `rounding`: the sinks' gradient is -sum_i P_sink,i D_i with D_i =
    rowsum(dO_i * O_i) from the stored 16-bit O (FlashAttention's D), so
    rounding O moves it by up to u P_sink,i sum_d |dO_i,d O_i,d| a row (the
    GPU suite's bound of dSinks; here P_sink <= 1)."""
    from transformers import AttentionInterface
    from fa import _transformers

    def attention(module, query, key, value, attention_mask, **kwargs):
        out, weights = _transformers._attention(module, query, key, value,
                                                attention_mask, **kwargs)
        if out.requires_grad and kwargs.get("s_aux") is not None:
            saved, layer = out.detach(), module.layer_idx

            def hook(grad):  # out and grad: [B, Sq, Hq, D]
                rounding[layer] = (grad.double() * saved.double()).abs().sum(
                    dim=(0, 1, 3))
            out.register_hook(hook)
        return out, weights

    AttentionInterface.register(name, attention)
    try:
        from transformers import AttentionMaskInterface
        AttentionMaskInterface.register(name, _transformers._mask)
    except ImportError:
        pass


def _run(model, tokens):
    """Logits and every parameter's gradient of a next-token loss."""
    model.zero_grad()
    out = model(input_ids=tokens, labels=tokens)
    out.loss.backward()
    return out.logits.detach(), {n: p.grad.detach()
                                 for n, p in model.named_parameters()
                                 if p.grad is not None}


def _max_error(got, want):
    return (got.double() - want).abs().max().item()


def _have_transformers(test, *names):
    try:
        import transformers
    except ImportError:
        test.skipTest("transformers is not installed")
    missing = [n for n in names if not hasattr(transformers, n)]
    if missing:
        test.skipTest(f"this transformers has no {', '.join(missing)}")


@unittest.skipUnless(HAVE_CUDA, "needs a CUDA GPU and torch")
class ModelTest(unittest.TestCase):
    def _check_training(self, name):
        fa.register_transformers()
        build = MODELS[name]
        tokens = torch.randint(0, 256, (2, SEQUENCE), device="cuda",
                               generator=torch.Generator(device="cuda")
                               .manual_seed(1))
        reference = _run(build("eager", torch.float64), tokens)
        rounding = {}
        _register_recording("fa_recorded", rounding)
        for dtype in (torch.float32, torch.bfloat16):
            rounding.clear()
            ours = _run(build("fa_recorded", dtype), tokens)
            theirs = _run(build("eager", dtype), tokens)
            self.assertEqual(sorted(ours[1]), sorted(reference[1]))
            worst = []
            for key in ["logits"] + sorted(reference[1]):
                pick = (lambda run: run[0]) if key == "logits" else \
                    (lambda run, key=key: run[1][key])
                want = pick(reference)
                err = _max_error(pick(ours), want)
                eager_err = _max_error(pick(theirs), want)
                floor = 1e-5 * max(1.0, want.abs().max().item())
                if key.endswith(".self_attn.sinks") and dtype != torch.float32:
                    # O's 16-bit rounding in D (_register_recording). Its
                    # worst case (P_sink <= 1, every row's rounding one
                    # way) can exceed the gradient itself (measured on an
                    # H100: 4.3e-3 against max|dsinks| 1.4e-3, fa's error
                    # 5.4e-5), so the gradient must also be within a tenth
                    # of its size: a wrong one (zero, a sign) fails there.
                    # The f32 run holds dSinks to the plain criterion.
                    layer = int(key.split(".layers.")[1].split(".")[0])
                    unit = 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11
                    floor += unit * rounding[layer].max().item()
                    size = want.abs().max().item()
                    print(f"  {name} {key}: fa={err:.2e} eager="
                          f"{eager_err:.2e} max|dsinks|={size:.2e} "
                          f"O-rounding bound "
                          f"{unit * rounding[layer].max().item():.2e}")
                    self.assertLessEqual(err, 0.1 * size,
                                         f"{name} {dtype} {key}: the "
                                         "gradient's own size")
                worst.append((err / (2 * eager_err + floor), key, err,
                              eager_err))
                self.assertLessEqual(err, 2 * eager_err + floor,
                                     f"{name} {dtype} {key}")
            ratio, key, err, eager_err = max(worst)
            print(f"  {name} {str(dtype).replace('torch.', '')}: worst "
                  f"{key} fa={err:.2e} eager={eager_err:.2e} (ratio to "
                  f"the bound {ratio:.2f})")

    def _check_generation(self, name):
        fa.register_transformers()
        model = MODELS[name]("fa", torch.float32).eval()
        prompt = torch.randint(1, 256, (1, WINDOW + 8), device="cuda",
                               generator=torch.Generator(device="cuda")
                               .manual_seed(2))
        new = 24
        # No end token: every step is a plain argmax over the whole
        # vocabulary (as the eager logits below are compared).
        model.generation_config.eos_token_id = None
        with torch.no_grad():
            out = model.generate(input_ids=prompt, max_new_tokens=new,
                                 do_sample=False, pad_token_id=0)
            self.assertEqual(out.shape[1], prompt.shape[1] + new)
            # The eager model over the whole sequence, no cache: position
            # t's logits choose token t + 1.
            if hasattr(model, "set_attn_implementation"):
                model.set_attn_implementation("eager")
            else:
                model.config._attn_implementation = "eager"
            logits = model(input_ids=out).logits[0].double()
        for t in range(prompt.shape[1] - 1, out.shape[1] - 1):
            row = logits[t]
            chosen = int(out[0, t + 1])
            gap = (row.max() - row[chosen]).item()
            self.assertLessEqual(
                gap, 1e-3 * max(1.0, row.abs().max().item()),
                f"{name}: token {t + 1} is {chosen}, eager's argmax "
                f"{int(row.argmax())} (logit gap {gap:.3e})")

    def _check_batched_generation(self, name):
        """Prompts of different lengths, left-padded into one batch (the
        backend runs the real tokens as a varlen batch, with the window,
        the softcap and the sinks), generate the tokens each prompt
        generates alone."""
        import random

        fa.register_transformers()
        model = MODELS[name]("fa", torch.float32).eval()
        model.generation_config.eos_token_id = None
        rng = random.Random(3)
        prompts = [[rng.randint(1, 255) for _ in range(n)]
                   for n in (5, WINDOW + 9, 1, 23)]
        longest = max(len(p) for p in prompts)
        ids = torch.zeros(len(prompts), longest, dtype=torch.long,
                          device="cuda")
        mask = torch.zeros_like(ids)
        for b, p in enumerate(prompts):
            ids[b, longest - len(p):] = torch.tensor(p)
            mask[b, longest - len(p):] = 1
        with torch.no_grad():
            batched = model.generate(input_ids=ids, attention_mask=mask,
                                     max_new_tokens=12, do_sample=False,
                                     pad_token_id=0)[:, longest:]
            for b, p in enumerate(prompts):
                alone = model.generate(
                    input_ids=torch.tensor([p], device="cuda"),
                    attention_mask=torch.ones(1, len(p), dtype=torch.long,
                                              device="cuda"),
                    max_new_tokens=12, do_sample=False,
                    pad_token_id=0)[0, len(p):]
                self.assertEqual(batched[b].tolist(), alone.tolist(),
                                 f"{name}: prompt {b} ({len(p)} tokens)")

    def test_gemma2_trains_like_eager(self):
        _have_transformers(self, "Gemma2ForCausalLM")
        self._check_training("gemma2")

    def test_gpt_oss_trains_like_eager(self):
        _have_transformers(self, "GptOssForCausalLM")
        self._check_training("gpt_oss")

    def test_gemma2_generates_like_eager(self):
        _have_transformers(self, "Gemma2ForCausalLM")
        self._check_generation("gemma2")

    def test_gpt_oss_generates_like_eager(self):
        _have_transformers(self, "GptOssForCausalLM")
        self._check_generation("gpt_oss")

    def test_gemma2_batched_generation_matches_one_by_one(self):
        _have_transformers(self, "Gemma2ForCausalLM")
        self._check_batched_generation("gemma2")

    def test_gpt_oss_batched_generation_matches_one_by_one(self):
        _have_transformers(self, "GptOssForCausalLM")
        self._check_batched_generation("gpt_oss")


if __name__ == "__main__":
    unittest.main(verbosity=2)
