"""Training through fa.attention on the GPU: autograd against float64
gradients, the custom ops (opcheck, torch.compile), the FlashAttention
calling convention, and the transformers backend.

FlashAttention's criterion for the gradients: fa's max error against the
float64 gradients (same inputs) is at most 2x the error of PyTorch's own
attention backward at the same precision, plus a floor for cases where
torch is exact to the last bits.
Run: python3 python/tests/test_training.py (skips without CUDA).
"""

import math
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


def causal_mask(sq, sk, device):
    """True where query row i sees key j (bottom-right aligned)."""
    rows = torch.arange(sq, device=device)[:, None]
    cols = torch.arange(sk, device=device)[None, :]
    return cols <= rows + (sk - sq)


def reference_attention(q, k, v, causal, scale):
    """Attention by matmul and softmax, differentiable, in q's precision
    (float64 for the reference); rows without keys give 0."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if not causal:
        return torch.matmul(torch.softmax(s, dim=-1), v)
    # Rows without keys (Sq > Sk) get P = 0 and so zero gradients, not NaN.
    mask = causal_mask(q.shape[2], k.shape[2], q.device)
    has_key = mask.any(dim=-1, keepdim=True)
    s = torch.where(has_key, s.masked_fill(~mask, float("-inf")),
                    torch.zeros_like(s))
    p = torch.softmax(s, dim=-1) * has_key
    return torch.matmul(p, v)


def torch_attention(q, k, v, causal, scale):
    """PyTorch's SDPA at the inputs' precision (its own backward)."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    if causal and sq == sk:
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=scale)
    mask = causal_mask(sq, sk, q.device) if causal else None
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, scale=scale)


def gradients(fn, q, k, v, grad_output, causal, scale):
    """(O, dQ, dK, dV) of fn for the output gradient grad_output."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    o = fn(q, k, v, causal, scale)
    o.backward(grad_output)
    return o.detach(), q.grad, k.grad, v.grad


def max_error(got, want):
    return (got.double() - want).nan_to_num(0.0).abs().max().item()


@unittest.skipUnless(HAVE_CUDA, "needs a CUDA GPU and torch")
class BackwardTest(unittest.TestCase):
    def check(self, b, hq, hkv, sq, sk, d, causal, dtype=torch.float32,
              layout="bhsd"):
        gen = torch.Generator(device="cuda").manual_seed(
            int.from_bytes(os.urandom(4), "little"))

        def make(h, s):
            if layout == "bshd":  # [B, S, H, D] storage viewed as [B, H, S, D]
                t = torch.randn(b, s, h, d, device="cuda", generator=gen)
                return t.to(dtype).transpose(1, 2)
            return torch.randn(b, h, s, d, device="cuda",
                               generator=gen).to(dtype)

        q, k, v = make(hq, sq), make(hkv, sk), make(hkv, sk)
        grad_output = make(hq, sq)
        scale = 1.0 / math.sqrt(d)
        ref = gradients(reference_attention, q.double(), k.double(),
                        v.double(), grad_output.double(), causal, scale)
        ours = gradients(lambda q, k, v, c, s: fa.attention(
            q, k, v, causal=c, scale=s), q, k, v, grad_output, causal, scale)
        theirs = gradients(torch_attention, q, k, v, grad_output, causal,
                           scale)
        name = (f"B={b} Hq={hq} Hkv={hkv} Sq={sq} Sk={sk} D={d} "
                f"{'causal' if causal else 'full'} {layout} "
                f"{str(dtype).replace('torch.', '')}")
        report = []
        for label, got, torch_got, want in zip(("O", "dQ", "dK", "dV"), ours,
                                               theirs, ref):
            self.assertEqual(got.dtype, dtype, f"{name} {label}")
            self.assertEqual(got.shape, want.shape, f"{name} {label}")
            self.assertFalse(torch.isnan(got).any().item(), f"{name} {label}")
            err, torch_err = max_error(got, want), max_error(torch_got, want)
            # The floor: f32 rounding of sums of up to Sk terms of the
            # gradient's size.
            floor = 1e-5 * max(1.0, want.abs().max().item())
            report.append(f"{label} fa={err:.2e} torch={torch_err:.2e}")
            self.assertLessEqual(err, 2 * torch_err + floor,
                                 f"{name} {label}")
        print(f"  {name}: " + ", ".join(report))

    def test_matrix(self):
        for d in (32, 64, 128):
            for causal in (False, True):
                self.check(2, 4, 4, 128, 128, d, causal)
                self.check(1, 8, 2, 300, 300, d, causal)        # GQA
                self.check(1, 8, 1, 17, 300, d, causal)         # MQA, Sq < Sk
                self.check(1, 2, 2, 300, 17, d, causal)         # Sq > Sk
                self.check(2, 4, 2, 200, 200, d, causal, layout="bshd")

    def test_matrix_16bit(self):
        for dtype in (torch.float16, torch.bfloat16):
            for d in (64, 128):
                for causal in (False, True):
                    self.check(2, 4, 4, 128, 128, d, causal, dtype)
                    self.check(1, 8, 2, 300, 300, d, causal, dtype)
                    self.check(1, 2, 2, 300, 17, d, causal, dtype)
                    self.check(2, 4, 2, 200, 200, d, causal, dtype, "bshd")

    def test_gradients_keep_the_layout(self):
        # [B, S, H, D] inputs get [B, S, H, D] gradients, without copies.
        q = torch.randn(2, 64, 4, 32, device="cuda").transpose(1, 2)
        q.requires_grad_()
        o = fa.attention(q, q.detach(), q.detach())
        self.assertTrue(o.transpose(1, 2).is_contiguous())
        o.sum().backward()
        self.assertEqual(q.grad.stride(), q.stride())

    def test_direct_backward_call(self):
        q, k, v = (torch.randn(1, 2, 50, 64, device="cuda") for _ in range(3))
        grad_output = torch.randn_like(q)
        o, lse = fa.attention(q, k, v, causal=True, return_lse=True)
        dq, dk, dv = fa.attention_backward(grad_output, q, k, v, o, lse,
                                           causal=True)
        want = gradients(reference_attention, q.double(), k.double(),
                         v.double(), grad_output.double(), True,
                         1.0 / math.sqrt(64))
        for got, ref in zip((dq, dk, dv), want[1:]):
            self.assertLess(max_error(got, ref), 1e-4)
        with self.assertRaisesRegex(ValueError, "fa.attention_backward: "
                                                "strategy must be one of"):
            fa.attention_backward(grad_output, q, k, v, o, lse,
                                  strategy="tcgen05")

    def test_backward_checks_lse(self):
        # The LSE is read as float32 [B, H, S] on q's device: anything else
        # is refused by name (not read as other bits or past its end).
        q, k, v = (torch.randn(1, 2, 50, 64, device="cuda") for _ in range(3))
        grad_output = torch.randn_like(q)
        o, lse = fa.attention(q, k, v, return_lse=True)
        bad = [(TypeError, "lse is torch.float64; expected torch.float32",
                lse.double()),
               (TypeError, "lse is torch.float16", lse.half()),
               (ValueError, "lse must be a CUDA tensor", lse.cpu()),
               (TypeError, "lse must be a torch.Tensor, got list",
                lse.tolist()),
               (ValueError, r"lse must be \[B, H, S\] = \[1, 2, 50\]",
                lse[:, :, :49])]
        for error, message, wrong in bad:
            with self.assertRaisesRegex(error, message):
                fa.attention_backward(grad_output, q, k, v, o, wrong)

    def test_deterministic_is_bitwise_reproducible(self):
        for dtype in (torch.float32, torch.bfloat16):
            q = torch.randn(2, 8, 700, 64, device="cuda", dtype=dtype)
            k, v = (torch.randn(2, 2, 700, 64, device="cuda", dtype=dtype)
                    for _ in range(2))
            grad_output = torch.randn_like(q)
            o, lse = fa.attention(q, k, v, causal=True, return_lse=True)
            first = fa.attention_backward(grad_output, q, k, v, o, lse,
                                          causal=True, deterministic=True)
            for _ in range(3):
                again = fa.attention_backward(grad_output, q, k, v, o, lse,
                                              causal=True, deterministic=True)
                for a, b in zip(first, again):
                    self.assertTrue(torch.equal(a, b), str(dtype))
            # The same gradients as the default mode, up to rounding order.
            default = fa.attention_backward(grad_output, q, k, v, o, lse,
                                            causal=True)
            for a, b in zip(first, default):
                scale = b.abs().max().item()
                self.assertLess((a.float() - b.float()).abs().max().item(),
                                1e-5 * scale if dtype == torch.float32
                                else 1e-2 * scale)
        # Through autograd too.
        q.requires_grad_()
        fa.attention(q, k, v, causal=True, deterministic=True).sum().backward()
        self.assertFalse(torch.isnan(q.grad).any().item())

    def test_lse_has_no_gradient(self):
        q = torch.randn(1, 2, 16, 32, device="cuda", requires_grad=True)
        _, lse = fa.attention(q, q, q, return_lse=True)
        self.assertFalse(lse.requires_grad)


@unittest.skipUnless(HAVE_CUDA, "needs a CUDA GPU and torch")
class CustomOpTest(unittest.TestCase):
    def test_opcheck(self):
        # float32 (simt) and float16 (mma backward, explicit tiles too).
        for dtype, tiles in ((torch.float32, (0, 0, 0, "auto", 0)),
                             (torch.float16, (0, 0, 0, "auto", 0)),
                             (torch.float16, (64, 64, 4, "mma", 1))):
            q = torch.randn(1, 4, 40, 64, device="cuda", dtype=dtype,
                            requires_grad=True)
            k = torch.randn(1, 2, 33, 64, device="cuda", dtype=dtype,
                            requires_grad=True)
            v = torch.randn(1, 2, 33, 64, device="cuda", dtype=dtype,
                            requires_grad=True)
            torch.library.opcheck(torch.ops.fa.attention_forward,
                                  (q, k, v, True, 0.0, 0, 0, 0, "auto", 0,
                                   False))
            o, lse = torch.ops.fa.attention_forward(q, k, v, True, 0.0, 0, 0,
                                                    0, "auto", 0, False)
            for deterministic in (False, True):
                torch.library.opcheck(
                    torch.ops.fa.attention_backward,
                    (torch.randn_like(o), q.detach(), k.detach(), v.detach(),
                     o.detach(), lse, True, 0.0, deterministic) + tiles)
            # With a variant: its texts are two more (string) arguments.
            variant = (fa.variants.trace_score_mod(fa.variants.softcap(5.0)),
                       fa.variants.trace_mask_mod(
                           fa.variants.sliding_window(8)))
            torch.library.opcheck(torch.ops.fa.attention_forward,
                                  (q, k, v, True, 0.0, 0, 0, 0, "auto", 0,
                                   False) + variant)
            o, lse = torch.ops.fa.attention_forward(
                q, k, v, True, 0.0, 0, 0, 0, "auto", 0, False, *variant)
            torch.library.opcheck(
                torch.ops.fa.attention_backward,
                (torch.randn_like(o), q.detach(), k.detach(), v.detach(),
                 o.detach(), lse, True, 0.0, False) + tiles + variant)

    def test_compile(self):
        torch._dynamo.reset()

        def step(q, k, v):
            o = fa.attention(q, k, v, causal=True)
            return (o * o).sum()

        compiled = torch.compile(step, fullgraph=True)
        q, k, v = (torch.randn(2, 4, 100, 64, device="cuda",
                               requires_grad=True) for _ in range(3))
        loss = compiled(q, k, v)
        loss.backward()
        grads = [t.grad.clone() for t in (q, k, v)]
        for t in (q, k, v):
            t.grad = None
        eager = step(q, k, v)
        eager.backward()
        self.assertLess(abs(loss.item() - eager.item()),
                        1e-4 * abs(eager.item()))
        for got, t in zip(grads, (q, k, v)):
            self.assertTrue(torch.allclose(got, t.grad, rtol=1e-4,
                                           atol=1e-5))


@unittest.skipUnless(HAVE_CUDA, "needs a CUDA GPU and torch")
class FlashLayoutTest(unittest.TestCase):
    def test_flash_attn_func(self):
        b, s, hq, hkv, d = 2, 150, 8, 2, 64
        q = torch.randn(b, s, hq, d, device="cuda", requires_grad=True)
        k = torch.randn(b, s, hkv, d, device="cuda", requires_grad=True)
        v = torch.randn(b, s, hkv, d, device="cuda", requires_grad=True)
        o = fa.flash_attn_func(q, k, v, causal=True)
        self.assertEqual(o.shape, (b, s, hq, d))
        self.assertTrue(o.is_contiguous())
        want = reference_attention(q.double().transpose(1, 2),
                                   k.double().transpose(1, 2),
                                   v.double().transpose(1, 2), True,
                                   1.0 / math.sqrt(d)).transpose(1, 2)
        self.assertLess(max_error(o, want), 1e-4)
        o.sum().backward()
        self.assertEqual(q.grad.shape, q.shape)
        self.assertTrue(q.grad.is_contiguous())


def _llama(attn_implementation, dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=512, hidden_size=256,
                         intermediate_size=512, num_hidden_layers=2,
                         num_attention_heads=8, num_key_value_heads=2,
                         max_position_embeddings=512,
                         attn_implementation=attn_implementation)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to(device="cuda", dtype=dtype)


def _run(model, tokens):
    """Logits and the gradient of every parameter for a next-token loss."""
    model.zero_grad()
    out = model(input_ids=tokens, labels=tokens)
    out.loss.backward()
    return out.logits.detach(), {n: p.grad.detach()
                                 for n, p in model.named_parameters()}


@unittest.skipUnless(HAVE_CUDA, "needs a CUDA GPU and torch")
class TransformersTest(unittest.TestCase):
    def test_llama_gqa_matches_sdpa(self):
        try:
            import transformers  # noqa: F401
        except ImportError:
            self.skipTest("transformers is not installed")
        fa.register_transformers()
        tokens = torch.randint(0, 512, (2, 96), device="cuda",
                               generator=torch.Generator(device="cuda")
                               .manual_seed(1))
        reference = _run(_llama("eager", torch.float64), tokens)
        for dtype in (torch.float32, torch.bfloat16):
            ours = _run(_llama("fa", dtype), tokens)
            theirs = _run(_llama("sdpa", dtype), tokens)
            worst = []
            for name in ["logits"] + sorted(reference[1]):
                want = reference[0] if name == "logits" else reference[1][name]
                got = ours[0] if name == "logits" else ours[1][name]
                torch_got = theirs[0] if name == "logits" else theirs[1][name]
                err, torch_err = max_error(got, want), max_error(torch_got,
                                                                 want)
                floor = 1e-5 * max(1.0, want.abs().max().item())
                worst.append((err / (2 * torch_err + floor), name, err,
                              torch_err))
                self.assertLessEqual(err, 2 * torch_err + floor,
                                     f"{dtype} {name}")
            ratio, name, err, torch_err = max(worst)
            print(f"  llama GQA {str(dtype).replace('torch.', '')}: worst "
                  f"{name} fa={err:.2e} sdpa={torch_err:.2e} "
                  f"(ratio to the bound {ratio:.2f})")


if __name__ == "__main__":
    unittest.main(verbosity=2)
