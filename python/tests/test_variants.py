"""fa.variants without a GPU: tracing Python score_mod / mask_mod functions
into the compiler's IR (the text the kernel cache is keyed by), the errors
for Python tracing cannot represent, and compiling the traced variants
through the C ABI (the compile-only path of the runtime). Run: python3
python/tests/test_variants.py (needs the built libfa_runtime.so; ctest runs
it with FA_RUNTIME_LIB set).
"""

import os
import sys
import tempfile
import unittest

_CACHE = tempfile.TemporaryDirectory(prefix="fa-variants-test-")
os.environ["FA_CACHE_DIR"] = _CACHE.name

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fa  # noqa: E402
from fa import variants as V  # noqa: E402


class TraceTest(unittest.TestCase):
    def test_softcap_text(self):
        text = V.trace_score_mod(V.softcap(30.0))
        self.assertTrue(text.startswith(
            "func.func @score_mod(%score: f32, %b: index, %h: index, "
            "%q_idx: index, %kv_idx: index, %q_len: index, %kv_len: index) "
            "-> f32 {"))
        # 30.0 as float32 bits, then cap * tanh(score / cap).
        self.assertIn("arith.constant 0x41F00000 : f32", text)
        self.assertIn("arith.divf %score, %v1 : f32", text)
        self.assertIn("math.tanh %v2 : f32", text)
        self.assertIn("arith.mulf %v1, %v3 : f32", text)
        self.assertIn("return %v4 : f32", text)

    def test_same_function_same_text(self):
        # The cache key: tracing is deterministic, and equal functions
        # written apart give equal text.
        a = V.trace_mask_mod(V.sliding_window(128))
        b = V.trace_mask_mod(V.sliding_window(128))
        self.assertEqual(a, b)
        self.assertNotEqual(a, V.trace_mask_mod(V.sliding_window(129)))

    def test_user_mask_four_arguments(self):
        text = V.trace_mask_mod(lambda b, h, q, kv: (kv <= q) & (q - kv < 8))
        self.assertIn("arith.cmpi sle, %kv_idx, %q_idx : index", text)
        self.assertIn("arith.andi", text)
        self.assertTrue(text.rstrip().endswith("}"))

    def test_indices_meet_floats_as_floats(self):
        text = V.trace_score_mod(lambda s, b, h, q, kv: s - 0.5 * (q - kv))
        self.assertIn("arith.index_cast", text)
        self.assertIn("arith.sitofp", text)
        self.assertIn("arith.subf %score", text)

    def test_where_and_functions(self):
        text = V.trace_score_mod(
            lambda s, b, h, q, kv: V.where(q == kv, V.exp(s), V.maximum(s, 0.0)))
        for op in ("arith.cmpi eq", "math.exp", "arith.cmpf oge",
                   "arith.select"):
            self.assertIn(op, text)

    def test_traced_once_per_function(self):
        # fa.attention asks for the text on every call: the function runs
        # once, and the built-ins give one function per setting.
        calls = []

        def mask(b, h, q, kv):
            calls.append(1)
            return kv <= q
        first = V.trace_mask_mod(mask)
        self.assertEqual(V.trace_mask_mod(mask), first)
        self.assertEqual(len(calls), 1)
        self.assertIs(V.sliding_window(64, 0), V.sliding_window(64, 0))
        self.assertIs(V.alibi([0.5, 0.25]), V.alibi((0.5, 0.25)))

    def test_flash_attn_settings(self):
        # flash_attn_func's window_size, softcap and ALiBi slopes: one pair
        # of functions per setting, each a composition of the built-ins.
        score, mask = fa._flash_variant(50, 0, 5.0, (0.5, 0.25))
        self.assertIs(fa._flash_variant(50, 0, 5.0, (0.5, 0.25))[0], score)
        text = V.trace_score_mod(score)
        self.assertIn("math.tanh", text)
        self.assertIn("arith.cmpi eq, %h", text)
        self.assertEqual(V.trace_mask_mod(mask),
                         V.trace_mask_mod(V.sliding_window(50, 0)))
        self.assertEqual(fa._flash_variant(-1, -1, 0.0, None), (None, None))

    def test_constant_mask(self):
        self.assertIn("arith.constant true",
                      V.trace_mask_mod(lambda b, h, q, kv: True))


class TraceErrorTest(unittest.TestCase):
    def test_if_on_a_traced_value(self):
        def mask(b, h, q, kv):
            if q > kv:
                return True
            return False
        with self.assertRaisesRegex(V.TraceError, "cannot branch"):
            V.trace_mask_mod(mask)

    def test_and_keyword(self):
        with self.assertRaisesRegex(V.TraceError, "cannot branch"):
            V.trace_mask_mod(lambda b, h, q, kv: kv <= q and kv >= 0)

    def test_python_math_on_a_traced_value(self):
        import math
        with self.assertRaisesRegex(V.TraceError, "Python float"):
            V.trace_score_mod(lambda s, b, h, q, kv: math.tanh(s))

    def test_indexing_a_list(self):
        table = [1.0, 2.0]
        with self.assertRaisesRegex(V.TraceError, "Python integer"):
            V.trace_score_mod(lambda s, b, h, q, kv: s + table[h])

    def test_mask_returning_a_number(self):
        with self.assertRaisesRegex(V.TraceError, "returns a condition"):
            V.trace_mask_mod(lambda b, h, q, kv: q - kv)

    def test_wrong_arity(self):
        with self.assertRaisesRegex(TypeError, "takes 4 or 6 arguments"):
            V.trace_mask_mod(lambda q, kv: q >= kv)

    def test_bad_builtin_argument(self):
        with self.assertRaisesRegex(ValueError, "softcap must be positive"):
            V.softcap(0)
        with self.assertRaisesRegex(ValueError, "one slope per query head"):
            V.alibi([])

    def test_variant_of_the_wrong_kind(self):
        with self.assertRaisesRegex(TypeError, "fa.prepare_kernel: mask_mod "
                                               "must be a function"):
            fa.prepare_kernel(32, mask_mod=3)


class TransformersMaskTest(unittest.TestCase):
    """The transformers backend's mask function (no torch needed without a
    padding mask): a chunked layer (Llama 4's attention_chunk_size, given as
    local_size) with keys past one chunk is refused, not attended
    causally; within one chunk it is the causal mask."""

    def test_chunked_layers(self):
        from types import SimpleNamespace
        from fa import _transformers
        chunked = SimpleNamespace(attention_chunk_size=64)
        with self.assertRaisesRegex(NotImplementedError,
                                    "attention_chunk_size=64"):
            _transformers._mask(attention_mask=None, kv_length=40,
                                kv_offset=30, local_size=64, config=chunked)
        self.assertIsNone(_transformers._mask(
            attention_mask=None, kv_length=64, kv_offset=0, local_size=64,
            config=chunked))
        # A sliding layer's window (local_size) of a model without chunks.
        self.assertIsNone(_transformers._mask(
            attention_mask=None, kv_length=500, kv_offset=0, local_size=64,
            config=SimpleNamespace(sliding_window=64)))


class CompileTest(unittest.TestCase):
    """Traced variants compile for the forward and the backward (no GPU:
    fa.prepare_kernel assembles with ptxas or the driver's JIT)."""

    def test_builtins_compile(self):
        for kwargs in ({"score_mod": V.softcap(20.0)},
                       {"mask_mod": V.sliding_window(256, 0)},
                       {"mask_mod": V.prefix_lm(64)},
                       {"mask_mod": V.chunked(128)},
                       {"score_mod": V.alibi([0.5, 0.25, 0.125, 0.0625])},
                       {"score_mod": V.softcap(30.0),
                        "mask_mod": V.and_masks(V.sliding_window(512),
                                                V.prefix_lm(16))}):
            for backward in (False, True):
                with self.subTest(kwargs=sorted(kwargs), backward=backward):
                    info = fa.prepare_kernel(64, dtype="float16",
                                             strategy="mma",
                                             backward=backward, **kwargs)
                    self.assertIn("_mod", info["name"])
                    self.assertEqual(info["spill_store_bytes"], 0)

    def test_variants_are_kernels_of_their_own(self):
        plain = fa.prepare_kernel(32)
        window = fa.prepare_kernel(32, mask_mod=V.sliding_window(64))
        wider = fa.prepare_kernel(32, mask_mod=V.sliding_window(65))
        self.assertEqual(len({plain["key"], window["key"], wider["key"]}), 3)
        again = fa.prepare_kernel(32, mask_mod=V.sliding_window(65))
        self.assertEqual(again["key"], wider["key"])
        self.assertEqual(again["source"], "memory")

    def test_backward_needs_a_derivative(self):
        with self.assertRaisesRegex(fa.FaError, "'arith.remf' has no "
                                                "derivative rule"):
            fa.prepare_kernel(32, backward=True,
                              score_mod=lambda s, b, h, q, kv: s % 3.0)

    def test_mlir_text_as_given(self):
        text = V.trace_mask_mod(V.sliding_window(32))
        a = fa.prepare_kernel(32, mask_mod=text)
        b = fa.prepare_kernel(32, mask_mod=V.sliding_window(32))
        self.assertEqual(a["key"], b["key"])


try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    torch = None
    HAVE_CUDA = False


def _reference(q, k, v, scale, causal=False, score=None, keep=None,
               dtype=None):
    """Attention with the variant written in torch ops (not traced): the
    scores through `score(s, h, i, j, Sq, Sk)`, those `keep(h, i, j, Sq,
    Sk)` drops set to -inf; in `dtype` (float64 for the reference)."""
    dtype = dtype or torch.float64
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(sk, device=q.device)[None, :]
    h = torch.arange(q.shape[1], device=q.device)[:, None, None]
    if score is not None:
        s = score(s, h, i, j, sq, sk)
    dropped = torch.zeros_like(s, dtype=torch.bool)
    if causal:
        dropped = dropped | (j > i + (sk - sq))
    if keep is not None:
        dropped = dropped | ~keep(h, i, j, sq, sk).expand_as(s)
    s = s.masked_fill(dropped, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return torch.matmul(p, v)


@unittest.skipUnless(HAVE_CUDA, "needs torch with CUDA")
class GpuVariantTest(unittest.TestCase):
    """The traced built-ins on the GPU, forward and gradients, with
    FlashAttention's criterion: the error against float64 at most 2x
    torch's own at the inputs' precision (+1e-6)."""

    CASES = [
        ("softcap", {"score_mod": V.softcap(2.0)},
         lambda s, h, i, j, sq, sk: 2.0 * torch.tanh(s / 2.0), None, False),
        ("window", {"mask_mod": V.sliding_window(100, 0)}, None,
         lambda h, i, j, sq, sk: (j >= i + (sk - sq) - 100)
         & (j <= i + (sk - sq)), False),
        ("prefix", {"mask_mod": V.prefix_lm(40)}, None,
         lambda h, i, j, sq, sk: (j < 40) | (j <= i + (sk - sq)), False),
        # Chunks of 48 (the tiles' ranges cover whole chunks), causal in
        # them and not.
        ("chunked", {"mask_mod": V.chunked(48)}, None,
         lambda h, i, j, sq, sk: torch.div(i + (sk - sq), 48,
                                           rounding_mode="floor")
         == torch.div(j, 48, rounding_mode="floor"), False),
        ("chunked causal", {"mask_mod": V.chunked(48)}, None,
         lambda h, i, j, sq, sk: torch.div(i + (sk - sq), 48,
                                           rounding_mode="floor")
         == torch.div(j, 48, rounding_mode="floor"), True),
        # Sink tokens and a window: the forward skips the tiles between.
        ("sinks window", {"mask_mod": V.or_masks(
            lambda b, h, q, kv: kv < 4, V.sliding_window(30, 0))}, None,
         lambda h, i, j, sq, sk: (j < 4) | ((j >= i + (sk - sq) - 30)
                                            & (j <= i + (sk - sq))), False),
        ("alibi", {"score_mod": V.alibi([0.5, 0.25, 0.125, 0.0625])},
         lambda s, h, i, j, sq, sk: s - torch.tensor(
             [0.5, 0.25, 0.125, 0.0625], dtype=s.dtype,
             device=s.device)[h] * (i + (sk - sq) - j).abs(), None, True),
        ("user", {"score_mod": lambda s, b, h, q, kv: V.where(
            q - kv < 16, s + 1.0, s), "mask_mod": lambda b, h, q, kv:
            (kv % 7) != 3}, lambda s, h, i, j, sq, sk: torch.where(
                i - j < 16, s + 1.0, s),
         lambda h, i, j, sq, sk: (j % 7) != 3, False),
    ]

    def check(self, dtype, shape, name, kwargs, score, keep, causal):
        torch.manual_seed(0)
        b, hq, hkv, sq, sk, d = shape
        q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype,
                        requires_grad=True)
        k = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype,
                        requires_grad=True)
        v = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype,
                        requires_grad=True)
        scale = d ** -0.5
        out = fa.attention(q, k, v, causal=causal, **kwargs)
        grad = torch.randn_like(out)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), grad)
        want = _reference(q, k, v, scale, causal, score, keep)
        theirs = _reference(q, k, v, scale, causal, score, keep, dtype=dtype)
        wq, wk, wv = torch.autograd.grad(want, (q, k, v), grad.double())
        tq, tk, tv = torch.autograd.grad(theirs, (q, k, v), grad)
        for label, ours, exact, torch_own in (
                ("O", out, want, theirs), ("dQ", dq, wq, tq),
                ("dK", dk, wk, tk), ("dV", dv, wv, tv)):
            err = (ours.double() - exact).abs().max().item()
            bound = 2 * (torch_own.double() - exact).abs().max().item() + 1e-6
            # 16-bit: torch's own error bounds ours; f32: both are tiny.
            if dtype == torch.float32:
                bound = max(bound, 1e-4)
            self.assertLessEqual(err, bound, f"{name} {label} {dtype} "
                                             f"{shape}")

    def test_builtins_forward_and_backward(self):
        for dtype in (torch.float16, torch.bfloat16):
            for shape in ((1, 4, 4, 300, 300, 64), (2, 4, 2, 128, 333, 128),
                          (1, 4, 1, 333, 128, 64)):
                for name, kwargs, score, keep, causal in self.CASES:
                    with self.subTest(name=name, dtype=dtype, shape=shape):
                        self.check(dtype, shape, name, kwargs, score, keep,
                                   causal)

    def test_sinks_window_skips_whole_tiles(self):
        # Long enough for whole default tiles between the sinks and the
        # window (the forward skips them), GQA, causal and not.
        keep = (lambda h, i, j, sq, sk: (j < 4) |
                ((j >= i + (sk - sq) - 256) & (j <= i + (sk - sq))))
        kwargs = {"mask_mod": V.or_masks(lambda b, h, q, kv: kv < 4,
                                         V.sliding_window(256, 0))}
        for causal in (False, True):
            with self.subTest(causal=causal):
                self.check(torch.bfloat16, (1, 4, 2, 1500, 1500, 128),
                           "sinks window long", kwargs, None, keep, causal)

    def test_flash_attn_func_window_softcap_alibi(self):
        torch.manual_seed(1)
        q = torch.randn(2, 200, 4, 64, device="cuda", dtype=torch.float16)
        k = torch.randn(2, 260, 4, 64, device="cuda", dtype=torch.float16)
        v = torch.randn(2, 260, 4, 64, device="cuda", dtype=torch.float16)
        slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625], device="cuda")
        out = fa.flash_attn_func(q, k, v, causal=True, window_size=(50, 0),
                                 softcap=5.0, alibi_slopes=slopes)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def score(s, h, i, j, sq, sk):
            s = 5.0 * torch.tanh(s / 5.0)
            return s - slopes.to(s.dtype)[h] * (i + (sk - sq) - j).abs()

        def keep(h, i, j, sq, sk):
            return j >= i + (sk - sq) - 50
        want = _reference(qt, kt, vt, 64 ** -0.5, True, score, keep)
        theirs = _reference(qt, kt, vt, 64 ** -0.5, True, score, keep,
                            dtype=torch.float16)
        err = (out.transpose(1, 2).double() - want).abs().max().item()
        bound = 2 * (theirs.double() - want).abs().max().item() + 1e-6
        self.assertLessEqual(err, bound)

    def test_flash_attn_func_deterministic_window(self):
        # A sliding window's deterministic backward: dQ's turns count back
        # from each query tile's last K/V tile. Two runs, the same bits; the
        # default mode's gradients within rounding of them.
        torch.manual_seed(2)
        shape = (2, 700, 4, 64)
        leaves = [torch.randn(shape, device="cuda", dtype=torch.bfloat16,
                              requires_grad=True) for _ in range(3)]
        grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

        def grads(deterministic):
            out = fa.flash_attn_func(*leaves, causal=True,
                                     window_size=(100, 0),
                                     deterministic=deterministic)
            return torch.autograd.grad(out, leaves, grad)
        first, second = grads(True), grads(True)
        for a, b in zip(first, second):
            self.assertTrue(torch.equal(a, b))
        for a, b in zip(first, grads(False)):
            self.assertLessEqual((a.float() - b.float()).abs().max().item(),
                                 0.05 * b.float().abs().max().item())


if __name__ == "__main__":
    unittest.main()
