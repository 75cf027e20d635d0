"""FP8 (float8_e4m3fn) attention: fa.attention with q_descale, k_descale,
v_descale and out_dtype (the forward only).

Without a GPU: the FP8 kernel compiles through the C ABI
(fa.prepare_kernel(dtype="float8_e4m3fn"), wgmma on sm_90a) and the
arguments are checked by name. With an sm_90a GPU: O and LSE against a
float64 reference on the dequantized inputs, within the bound the GPU
suite derives (Float8MatchesFloat64Reference): (2^-4 + u_out + 2^-9) of
max|V| for O (P is quantized to e4m3 from 256 p), 4e-3 for LSE; descales
per (batch, K/V head), expanded from [1, 1], or None; bfloat16 and float16
O; a [B, S, H, D] layout.
Run: python3 python/tests/test_fp8.py (needs the built libfa_runtime.so).
"""

import os
import sys
import tempfile
import unittest

_CACHE = tempfile.TemporaryDirectory(prefix="fa-fp8-test-")
os.environ["FA_CACHE_DIR"] = _CACHE.name

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fa  # noqa: E402

try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
    HOPPER = HAVE_CUDA and torch.cuda.get_device_capability() == (9, 0)
except ImportError:  # pragma: no cover
    torch = None
    HAVE_CUDA = HOPPER = False


class CompileTest(unittest.TestCase):
    def test_fp8_kernel_compiles_for_wgmma(self):
        info = fa.prepare_kernel(128, dtype="float8_e4m3fn", causal=True)
        self.assertIn("_e4m3_obf16_causal_", info["name"])
        self.assertEqual(info["strategy"], "wgmma")
        # Rows of 64 bytes (the 64-byte swizzle).
        for d in (64, 192):
            info = fa.prepare_kernel(d, dtype="float8_e4m3fn")
            self.assertEqual(info["strategy"], "wgmma")
            self.assertEqual(info["spill_store_bytes"], 0)

    def test_fp8_refuses_what_it_does_not_take(self):
        with self.assertRaisesRegex(fa.FaError, "multiple of 64"):
            fa.prepare_kernel(96, dtype="float8_e4m3fn", strategy="wgmma")
        with self.assertRaisesRegex(fa.FaError, "forward format"):
            fa.prepare_kernel(128, dtype="float8_e4m3fn", backward=True)


def reference(q, k, v, qd, kd, vd, causal, scale):
    """float64 attention of the dequantized inputs; descales [B, Hkv]."""
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    g = hq // hkv
    qf = q.double() * qd.double().repeat_interleave(g, 1)[:, :, None, None]
    kf = (k.double() * kd.double()[:, :, None, None]).repeat_interleave(g, 1)
    vf = (v.double() * vd.double()[:, :, None, None]).repeat_interleave(g, 1)
    s = scale * qf @ kf.transpose(-1, -2)
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return p @ vf, lse


@unittest.skipUnless(HOPPER, "needs an sm_90a GPU (FP8 runs on wgmma)")
class Fp8Test(unittest.TestCase):
    def quantized(self, shape, factors, group=1):
        x = torch.randn(shape, device="cuda")
        f = factors.repeat_interleave(group, 1)[:, :, None, None]
        return (x / f).to(torch.float8_e4m3fn)

    def check(self, b, hq, hkv, sq, sk, d, causal, out_dtype, descales):
        torch.manual_seed(hq * 1000 + sq + sk + d + causal)
        if descales == "per-head":
            qd, kd, vd = (torch.rand(b, hkv, device="cuda") * 3.5 + 0.5
                          for _ in range(3))
        else:
            qd = kd = vd = torch.ones(b, hkv, device="cuda")
        q = self.quantized((b, hq, sq, d), qd, hq // hkv)
        k = self.quantized((b, hkv, sk, d), kd)
        v = self.quantized((b, hkv, sk, d), vd)
        kwargs = {}
        if descales == "per-head":
            kwargs = {"q_descale": qd, "k_descale": kd, "v_descale": vd}
        elif descales == "scalar":
            kwargs = {"q_descale": torch.ones(1, 1, device="cuda")}
        o, lse = fa.attention(q, k, v, causal=causal, return_lse=True,
                              out_dtype=out_dtype, **kwargs)
        self.assertEqual(o.dtype, out_dtype or torch.bfloat16)
        want_o, want_lse = reference(q, k, v, qd, kd, vd, causal,
                                     d ** -0.5)
        max_v = (v.double() * vd.double()[:, :, None, None]).abs().max()
        unit = 2.0 ** -11 if out_dtype == torch.float16 else 2.0 ** -8
        bound = (2.0 ** -4 + unit + 2.0 ** -9 + sk * 2.0 ** -18) * max_v
        err = (o.double() - want_o).abs().max()
        self.assertLessEqual(err.item(), bound.item() + 1e-4)
        finite = want_lse.isfinite()
        self.assertTrue(torch.equal(lse.isfinite(), finite))
        self.assertLessEqual(
            (lse.double() - want_lse)[finite].abs().max().item(), 4e-3)

    def test_matches_float64(self):
        for d in (64, 128, 192, 256):
            for causal in (False, True):
                for shape in ((2, 8, 2, 300, 333), (1, 4, 4, 1000, 17)):
                    with self.subTest(d=d, causal=causal, shape=shape):
                        self.check(*shape, d, causal, None, "per-head")
        self.check(1, 2, 2, 129, 129, 128, True, torch.float16, "scalar")
        self.check(2, 4, 1, 64, 200, 128, False, None, None)

    def test_bshd_layout(self):
        for d in (64, 128):
            with self.subTest(d=d):
                self.check_bshd(d)

    def check_bshd(self, d):
        b, s, h = 2, 200, 4
        x = torch.randn(b, s, h, d, device="cuda").to(torch.float8_e4m3fn)
        o = fa.attention(x.transpose(1, 2), x.transpose(1, 2),
                         x.transpose(1, 2))
        self.assertEqual(o.transpose(1, 2).stride(), (s * h * d, h * d, d, 1))
        ones = torch.ones(b, h, device="cuda")
        want, _ = reference(x.transpose(1, 2), x.transpose(1, 2),
                            x.transpose(1, 2), ones, ones, ones, False,
                            d ** -0.5)
        self.assertLess((o.double() - want).abs().max().item(), 0.1)

    def test_errors(self):
        q = torch.zeros(1, 2, 16, 128, device="cuda").to(torch.float8_e4m3fn)
        with self.assertRaisesRegex(TypeError, "out_dtype"):
            fa.attention(q, q, q, out_dtype=torch.float32)
        with self.assertRaisesRegex(TypeError, "q_descale must be a float32"):
            fa.attention(q, q, q, q_descale=torch.ones(1, 2, device="cuda",
                                                       dtype=torch.float16))
        with self.assertRaisesRegex(ValueError, r"k_descale is \(3,\)"):
            fa.attention(q, q, q, k_descale=torch.ones(3, device="cuda"))
        with self.assertRaisesRegex(ValueError, "plain or causal"):
            fa.attention(q, q, q, mask_mod=lambda b, h, i, j: i >= j)
        half = torch.zeros(1, 2, 16, 128, device="cuda", dtype=torch.float16)
        with self.assertRaisesRegex(ValueError, "go with float8_e4m3fn"):
            fa.attention(half, half, half, q_descale=torch.ones(1, 2,
                                                                device="cuda"))


@unittest.skipUnless(torch is not None and hasattr(torch, "float8_e4m3fn"),
                     "needs torch with float8_e4m3fn")
class QuantizeTest(unittest.TestCase):
    """fa.fp8 on the host (no kernel)."""

    def test_hadamard_rotation_is_orthogonal(self):
        r = fa.fp8.hadamard_rotation(128, seed=3, device="cpu").double()
        self.assertLess((r @ r.T - torch.eye(128, dtype=torch.float64))
                        .abs().max().item(), 1e-6)
        # Not the identity: every entry is +-1/sqrt(D).
        self.assertTrue(torch.allclose(r.abs(), torch.full_like(r, 128 ** -0.5)))
        with self.assertRaisesRegex(ValueError, "power of 2"):
            fa.fp8.hadamard_rotation(96, device="cpu")

    def test_quantize_keeps_scores_and_uses_the_range(self):
        torch.manual_seed(0)
        q = torch.randn(2, 8, 64, 128)
        k, v = torch.randn(2, 2, 64, 128), torch.randn(2, 2, 64, 128)
        for hadamard in (False, True):
            q8, k8, v8, ds = fa.fp8.quantize(q, k, v, hadamard=hadamard)
            self.assertEqual(q8.dtype, torch.float8_e4m3fn)
            self.assertEqual(tuple(ds["q_descale"].shape), (2, 2))
            # Each (b, K/V head) reaches e4m3's largest value.
            amax = k8.float().abs().amax(dim=(2, 3))
            self.assertTrue(torch.equal(amax, torch.full_like(amax, 448.0)))
            # Dequantized scores match the originals (R R^T = I) within
            # e4m3's rounding.
            qd = q8.float() * ds["q_descale"].repeat_interleave(4, 1)[
                :, :, None, None]
            kd = (k8.float() * ds["k_descale"][:, :, None, None]
                  ).repeat_interleave(4, 1)
            want = q @ k.repeat_interleave(4, 1).transpose(-1, -2)
            got = qd @ kd.transpose(-1, -2)
            self.assertLess((got - want).abs().max().item(),
                            0.15 * want.abs().max().item())
        with self.assertRaisesRegex(ValueError, "layout"):
            fa.fp8.quantize(q, k, v, layout="sbhd")
        with self.assertRaisesRegex(ValueError, "multiple"):
            fa.fp8.quantize(torch.randn(1, 3, 8, 128), k[:1], v[:1])
        with self.assertRaisesRegex(TypeError, "q is torch.float64"):
            fa.fp8.quantize(q.double(), k, v)
        with self.assertRaisesRegex(ValueError, "k must be a 4-d tensor"):
            fa.fp8.quantize(q, k[0], v)


@unittest.skipUnless(HOPPER, "needs an sm_90a GPU (FP8 runs on wgmma)")
class FrontEndTest(unittest.TestCase):
    def test_flash_attn_func_takes_descales(self):
        torch.manual_seed(5)
        b, s, hq, hkv, d = 2, 300, 8, 2, 128
        q = torch.randn(b, s, hq, d, device="cuda")
        k = torch.randn(b, s, hkv, d, device="cuda")
        v = torch.randn(b, s, hkv, d, device="cuda")
        q8, k8, v8, ds = fa.fp8.quantize(q, k, v, layout="bshd")
        o = fa.flash_attn_func(q8, k8, v8, causal=True, **ds)
        self.assertEqual(tuple(o.shape), (b, s, hq, d))
        self.assertEqual(o.dtype, torch.bfloat16)
        want, _ = reference(q8.transpose(1, 2), k8.transpose(1, 2),
                            v8.transpose(1, 2), ds["q_descale"],
                            ds["k_descale"], ds["v_descale"], True,
                            d ** -0.5)
        max_v = (v8.double() * ds["v_descale"].double()[:, None, :, None]
                 ).abs().max()
        bound = (2.0 ** -4 + 2.0 ** -8 + 2.0 ** -9 + s * 2.0 ** -18) * max_v
        self.assertLessEqual(
            (o.transpose(1, 2).double() - want).abs().max().item(),
            bound.item() + 1e-4)
        with self.assertRaisesRegex(ValueError, "plain or causal"):
            fa.flash_attn_func(q8, k8, v8, window_size=(64, 0), **ds)
        with self.assertRaisesRegex(ValueError, "go with float8_e4m3fn"):
            fa.flash_attn_func(q.half(), k.half(), v.half(),
                               q_descale=ds["q_descale"])

    def test_incoherent_processing_shrinks_outlier_channel_error(self):
        # Four channels of Q and K 16x larger: their products dominate the
        # scores and carry e4m3's relative error; rotated, they spread.
        g = torch.Generator(device="cuda").manual_seed(11)
        b, h, s, d = 1, 4, 1024, 128
        q, k, v = (torch.randn(b, h, s, d, device="cuda", generator=g)
                   for _ in range(3))
        channels = torch.tensor([3, 40, 77, 100], device="cuda")
        q[..., channels] *= 16.0
        k[..., channels] *= 16.0
        sc = q.double() @ k.double().transpose(-1, -2) * d ** -0.5
        want = torch.softmax(sc, -1) @ v.double()
        errors = {}
        for hadamard in (False, True):
            q8, k8, v8, ds = fa.fp8.quantize(q, k, v, hadamard=hadamard)
            o = fa.attention(q8, k8, v8, **ds)
            errors[hadamard] = (o.double() - want).pow(2).mean().sqrt().item()
        self.assertLess(errors[True] * 1.5, errors[False], errors)


if __name__ == "__main__":
    unittest.main()
