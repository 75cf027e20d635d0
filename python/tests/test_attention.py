"""fa.attention on the GPU against a float64 reference and torch's SDPA.

FlashAttention's criterion: the kernel's max error against the float64
reference (on the same, possibly rounded, inputs) is at most 2x the error of
PyTorch's own attention at the same precision (float32, float16, bfloat16),
plus 1e-6 for cases where torch is exact to the last bits.
Run: python3 python/tests/test_attention.py (skips without CUDA).
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


def reference(q, k, v, causal, scale):
    """float64 attention with a bottom-right causal mask; O and LSE."""
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        rows = torch.arange(sq, device=q.device)[:, None]
        cols = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(cols > rows + (sk - sq), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None])
    p = torch.nan_to_num(p, nan=0.0)  # rows without keys
    return torch.matmul(p, v), lse


def torch_sdpa(q, k, v, causal, scale):
    """PyTorch's own attention at the inputs' precision (the same mask), for
    the criterion."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    if causal and sq == sk:  # top-left and bottom-right agree
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=scale)
    mask = None
    if causal:
        rows = torch.arange(sq, device=q.device)[:, None]
        cols = torch.arange(sk, device=q.device)[None, :]
        mask = cols <= rows + (sk - sq)
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, scale=scale)


@unittest.skipUnless(HAVE_CUDA, "needs a CUDA GPU and torch")
class AttentionTest(unittest.TestCase):
    def check(self, b, hq, hkv, sq, sk, d, causal, layout="bhsd",
              dtype=None, strategy="auto"):
        dtype = dtype or torch.float32
        gen = torch.Generator(device="cuda").manual_seed(
            int.from_bytes(os.urandom(4), "little"))

        def make(h, s):
            if layout == "bshd":  # [B, S, H, D] storage viewed as [B, H, S, D]
                t = torch.randn(b, s, h, d, device="cuda", generator=gen)
                return t.to(dtype).transpose(1, 2)
            return torch.randn(b, h, s, d, device="cuda",
                               generator=gen).to(dtype)

        q, k, v = make(hq, sq), make(hkv, sk), make(hkv, sk)
        scale = 1.0 / math.sqrt(d)
        o, lse = fa.attention(q, k, v, causal=causal, return_lse=True,
                              strategy=strategy)
        torch.cuda.synchronize()
        ref_o, ref_lse = reference(q, k, v, causal, scale)
        ours = (o.double() - ref_o).abs().max().item()
        self.assertEqual(o.dtype, dtype)
        theirs = (torch_sdpa(q, k, v, causal, scale).double()
                  - ref_o).nan_to_num(0.0).abs().max().item()
        finite = torch.isfinite(ref_lse)
        lse_err = (lse.double()[finite] - ref_lse[finite]).abs().max().item() \
            if finite.any() else 0.0
        name = (f"B={b} Hq={hq} Hkv={hkv} Sq={sq} Sk={sk} D={d} "
                f"{'causal' if causal else 'full'} {layout} "
                f"{str(dtype).replace('torch.', '')} {strategy}")
        print(f"  {name}: max|dO| fa={ours:.2e} torch={theirs:.2e} "
              f"max|dLSE|={lse_err:.2e}")
        self.assertFalse(torch.isnan(o).any().item(), name)
        self.assertLessEqual(ours, 2 * theirs + 1e-6, name)
        self.assertLessEqual(lse_err, 1e-4, name)
        self.assertTrue(torch.equal(torch.isinf(lse), ~finite), name)

    def test_matrix(self):
        for d in (32, 64, 128, 256):
            for causal in (False, True):
                self.check(2, 4, 4, 128, 128, d, causal)
                self.check(1, 8, 2, 1000, 1000, d, causal)      # GQA
                self.check(1, 8, 1, 17, 1000, d, causal)        # MQA, Sq < Sk
                self.check(1, 2, 2, 1000, 17, d, causal)        # Sq > Sk
                self.check(2, 4, 2, 333, 333, d, causal, "bshd")  # strided

    def test_matrix_16bit(self):
        # The default for 16-bit inputs: tensor cores (wgmma on the H200 for
        # D = 64, 128, 256, mma.sync for 40 and 96).
        for dtype in (torch.float16, torch.bfloat16):
            for d in (40, 64, 96, 128, 256):
                for causal in (False, True):
                    self.check(2, 4, 4, 128, 128, d, causal, dtype=dtype)
                    self.check(1, 8, 2, 1000, 1000, d, causal, dtype=dtype)
                    self.check(1, 8, 1, 17, 1000, d, causal, dtype=dtype)
                    self.check(1, 2, 2, 1000, 17, d, causal, dtype=dtype)
                    self.check(2, 4, 2, 333, 333, d, causal, "bshd",
                               dtype=dtype)

    def test_matrix_16bit_simt(self):
        for dtype in (torch.float16, torch.bfloat16):
            for d in (64, 128):
                for causal in (False, True):
                    for shape in ((2, 4, 4, 128, 128), (1, 8, 2, 1000, 1000),
                                  (1, 8, 1, 17, 1000)):
                        self.check(*shape, d, causal, dtype=dtype,
                                   strategy="simt")
                    self.check(2, 4, 2, 333, 333, d, causal, "bshd",
                               dtype=dtype, strategy="simt")

    def test_bad_input(self):
        q = torch.randn(1, 2, 16, 64, device="cuda")
        with self.assertRaisesRegex(TypeError, "expected float32, float16"):
            fa.attention(q.double(), q.double(), q.double())
        with self.assertRaisesRegex(TypeError, "k is torch.float16"):
            fa.attention(q, q.half(), q)
        with self.assertRaisesRegex(fa.FaError,
                                    r"q heads \(2\) must be a multiple"):
            k = torch.randn(1, 3, 16, 64, device="cuda")
            fa.attention(q, k, k)
        with self.assertRaisesRegex(ValueError, "CUDA tensor"):
            fa.attention(q.cpu(), q, q)
        with self.assertRaisesRegex(ValueError, "scale must be positive"):
            fa.attention(q, q, q, scale=0.0)
        with self.assertRaisesRegex(fa.FaError, "contiguous in its last"):
            wide = torch.randn(1, 2, 16, 128, device="cuda")[..., ::2]
            fa.attention(wide, wide, wide)

    def test_direct_launch_matches_the_op(self):
        """Without autograd, tracing or modes fa.attention launches without
        the custom op; results are bitwise the op's, and a dispatch mode
        still sees the op."""
        from torch.utils._python_dispatch import TorchDispatchMode

        q, k, v = (torch.randn(2, 4, 300, 64, device="cuda",
                               dtype=torch.float16) for _ in range(3))
        for causal in (False, True):
            direct = fa.attention(q, k, v, causal=causal, return_lse=True)
            op = torch.ops.fa.attention_forward(q, k, v, causal, 0.0, 0, 0,
                                                0, "auto", 0, False)
            self.assertTrue(torch.equal(direct[0], op[0]))
            self.assertTrue(torch.equal(direct[1], op[1]))

        class Seen(TorchDispatchMode):
            ops = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                Seen.ops.append(str(func))
                return func(*args, **(kwargs or {}))

        with Seen():
            fa.attention(q, k, v)
        self.assertTrue(any("fa.attention_forward" in o for o in Seen.ops),
                        Seen.ops)
        # With gradients wanted the op (and its autograd formula) runs.
        qg = q.clone().requires_grad_()
        fa.attention(qg, k, v).sum().backward()
        self.assertIsNotNone(qg.grad)


if __name__ == "__main__":
    unittest.main(verbosity=2)
