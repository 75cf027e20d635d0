"""Attention sinks (gpt-oss's learned per-head sink logit, `s_aux` in
transformers) through fa.attention's `sinks`.

Without a GPU: the sinks kernels compile through the C ABI (fa.prepare_kernel
with sinks=True, forward and backward, every strategy), the deterministic
backward takes them, the flag and the ctypes descriptors; with torch (no
GPU needed): the argument checks, the custom ops' fake implementations and
their autograd formula (gradient positions) on meta tensors.
With a GPU: O, LSE and the gradients dQ, dK, dV, dSinks against a float64
reference (the scores with the sink column, softmax, the column dropped),
with FlashAttention's criterion (error at most 2x PyTorch's own at the
inputs' precision), the custom ops (opcheck, torch.compile), and the
transformers backend against gpt-oss's eager attention.
Run: python3 python/tests/test_sinks.py (needs the built libfa_runtime.so;
ctest runs it with FA_RUNTIME_LIB set).
"""

import ctypes
import os
import sys
import tempfile
import types
import unittest

_CACHE = tempfile.TemporaryDirectory(prefix="fa-sinks-test-")
os.environ["FA_CACHE_DIR"] = _CACHE.name

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fa  # noqa: E402
from fa import variants as V  # noqa: E402

try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    torch = None
    HAVE_CUDA = False


class CompileTest(unittest.TestCase):
    """The sinks kernels through the C ABI's compile-only path (no GPU:
    fa.prepare_kernel assembles for sm_90a with ptxas or the driver's
    JIT)."""

    def test_sinks_kernels_compile(self):
        # float32 on CUDA cores, 16-bit on tensor cores ("auto": wgmma at
        # head dims 64 and 128 on sm_90a), a variant and the causal mask.
        cases = [({"dtype": "float32"}, 64),
                 ({"dtype": "float16", "strategy": "mma"}, 64),
                 ({"dtype": "bfloat16"}, 128),
                 ({"dtype": "bfloat16", "causal": True,
                   "mask_mod": V.sliding_window(128, 0)}, 64)]
        for kwargs, head_dim in cases:
            for backward in (False, True):
                with self.subTest(kwargs=sorted(kwargs), head_dim=head_dim,
                                  backward=backward):
                    info = fa.prepare_kernel(head_dim, backward=backward,
                                             sinks=True, **kwargs)
                    self.assertIn("_sinks", info["name"])
                    self.assertEqual(info["spill_store_bytes"], 0)

    def test_sinks_are_a_kernel_of_their_own(self):
        for backward in (False, True):
            plain = fa.prepare_kernel(64, dtype="float16", backward=backward)
            sinks = fa.prepare_kernel(64, dtype="float16", backward=backward,
                                      sinks=True)
            self.assertNotIn("_sinks", plain["name"])
            self.assertNotEqual(plain["key"], sinks["key"])
            again = fa.prepare_kernel(64, dtype="float16", backward=backward,
                                      sinks=True)
            self.assertEqual(again["key"], sinks["key"])
            self.assertEqual(again["source"], "memory")

    def test_deterministic_backward_takes_sinks(self):
        info = fa.prepare_kernel(64, dtype="float16", backward=True,
                                 deterministic=True, sinks=True)
        self.assertIn("_det_sinks", info["name"])
        plain = fa.prepare_kernel(64, dtype="float16", backward=True,
                                  sinks=True)
        self.assertNotEqual(info["key"], plain["key"])

    def test_sinks_is_a_flag(self):
        for wrong in (2, "yes", None):
            with self.assertRaisesRegex(TypeError, "fa: sinks must be a "
                                                   "bool"):
                fa.prepare_kernel(64, sinks=wrong)


class DescriptorTest(unittest.TestCase):
    """The C structures the _ex calls take (no torch needed)."""

    def test_config_ends_with_the_sinks_block_mask_varlen_kv_lens_flags(self):
        # fa_kernel_config: int32_t sinks, block_mask, varlen, kv_lens after
        # const char *mask_mod.
        self.assertEqual(fa._Config._fields_[-4:],
                         [("sinks", ctypes.c_int32),
                          ("block_mask", ctypes.c_int32),
                          ("varlen", ctypes.c_int32),
                          ("kv_lens", ctypes.c_int32)])
        self.assertEqual(fa._Config.sinks.offset,
                         fa._Config.mask_mod.offset
                         + ctypes.sizeof(ctypes.c_char_p))
        # The C side pins the same layout (RuntimeTest's Sinks.CExtras).
        if ctypes.sizeof(ctypes.c_void_p) == 8:
            # struct_size first (fa_runtime.h's versioned structs).
            self.assertEqual(fa._Config.struct_size.offset, 0)
            self.assertEqual(fa._Config.sinks.offset, 88)
            self.assertEqual(fa._Config.block_mask.offset, 92)
            self.assertEqual(fa._Config.varlen.offset, 96)
            self.assertEqual(fa._Config.kv_lens.offset, 100)
            self.assertEqual(ctypes.sizeof(fa._Config), 104)
            # struct_size, sinks, grad_sinks, captures, num_captures,
            # key_ranges, query_ranges, kv_splits, block_table,
            # cache_batch_idx, q/k/v_descale, out_dtype (test_captures.py
            # pins the offsets).
            self.assertEqual(ctypes.sizeof(fa._Extras), 112)
            self.assertEqual(ctypes.sizeof(fa._Info), 392)
        self.assertEqual(fa._Info().struct_size, ctypes.sizeof(fa._Info))
        config = fa._config(0, 0, 0, sinks=True)
        self.assertIsNotNone(config)  # not all defaults
        self.assertEqual(config._obj.sinks, 1)
        self.assertIsNone(fa._config(0, 0, 0))
        self.assertEqual(fa._config(64, 0, 0)._obj.sinks, 0)

    def test_one_dimensional_descriptor(self):
        # A [Hq] tensor: sizes [Hq, 0, 0, 0], strides [stride, 0, 0, 0].
        fake = types.SimpleNamespace(data_ptr=lambda: 4096, shape=(12,),
                                     stride=lambda: (3,))
        t = fa._describe(fake)
        self.assertEqual(t.data, 4096)
        self.assertEqual(list(t.sizes), [12, 0, 0, 0])
        self.assertEqual(list(t.strides), [3, 0, 0, 0])

    def test_extras_structure(self):
        self.assertEqual([name for name, _ in fa._Extras._fields_],
                         ["struct_size", "sinks", "grad_sinks", "captures",
                          "num_captures",
                          "key_ranges", "query_ranges", "kv_splits",
                          "block_table", "cache_batch_idx", "q_descale",
                          "k_descale", "v_descale", "out_dtype"])
        # struct_size, ten pointers, two int64 and an int32 padded to 8
        # bytes.
        self.assertEqual(ctypes.sizeof(fa._Extras),
                         10 * ctypes.sizeof(ctypes.c_void_p) + 32)
        self.assertFalse(fa._Extras().grad_sinks)  # NULL by default


@unittest.skipUnless(torch is not None, "needs torch")
class ArgumentTest(unittest.TestCase):
    """The sinks' checks (CPU tensors: the dtype and shape are checked
    before the device)."""

    def setUp(self):
        self.q = torch.zeros(2, 4, 8, 64)  # Hq = 4

    def check(self, error, message, sinks):
        with self.assertRaisesRegex(error, message):
            fa._check_sinks("fa.attention", sinks, self.q)

    def test_not_a_tensor(self):
        self.check(TypeError, r"fa.attention: sinks must be a torch.Tensor "
                              r"\(float32 \[Hq\].*got list",
                   [0.0, 0.0, 0.0, 0.0])
        self.check(TypeError, "got float", 1.0)

    def test_not_floating(self):
        self.check(TypeError, r"sinks is torch.int64; sinks must be float32 "
                              r"\[Hq\]", torch.zeros(4, dtype=torch.int64))
        self.check(TypeError, "sinks is torch.bool",
                   torch.zeros(4, dtype=torch.bool))

    def test_wrong_shape(self):
        for wrong in (torch.zeros(3), torch.zeros(1, 4), torch.zeros(()),
                      torch.zeros(8)):
            self.check(ValueError, r"fa.attention: sinks must be \[Hq\] = "
                                   r"\[4\] \(one logit per query head, q's "
                                   r"dimension 1\), got \[" +
                       ", ".join(str(n) for n in wrong.shape), wrong)

    def test_cpu_tensor(self):
        for dtype in (torch.float32, torch.bfloat16):
            self.check(ValueError, "fa.attention: sinks must be a CUDA "
                                   "tensor", torch.zeros(4, dtype=dtype))

    def test_kernels_take_float32_only(self):
        # The op's implementation: any other dtype would be read as float32
        # bits by the C ABI (its descriptor carries no dtype).
        with self.assertRaisesRegex(TypeError, "sinks is torch.bfloat16; "
                                               "the kernels take float32"):
            fa._extras(torch.zeros(4, dtype=torch.bfloat16))


def _meta(*shape, dtype=None, grad=False):
    return torch.randn(*shape, device="meta", dtype=dtype or torch.float16,
                       requires_grad=grad)


@unittest.skipUnless(torch is not None, "needs torch")
class FakeOpTest(unittest.TestCase):
    """The custom ops' fake implementations (the Meta kernels) and their
    autograd formula, without a GPU: shapes, dtypes and where each
    gradient goes."""

    ARGS = (True, 0.0, 0, 0, 0, "auto", 0, False)

    def test_forward_shapes(self):
        q, k, v = _meta(2, 8, 16, 64), _meta(2, 2, 24, 64), _meta(2, 2, 24, 64)
        sinks = _meta(8, dtype=torch.float32)
        for extra in ((), ("", "", sinks)):
            o, lse = torch.ops.fa.attention_forward(q, k, v, *self.ARGS,
                                                    *extra)
            self.assertEqual(o.shape, q.shape)
            self.assertEqual(o.dtype, q.dtype)
            self.assertEqual(lse.shape, (2, 8, 16))
            self.assertEqual(lse.dtype, torch.float32)

    def test_backward_returns_dsinks(self):
        q, k, v = _meta(2, 8, 16, 64), _meta(2, 2, 24, 64), _meta(2, 2, 24, 64)
        o, lse = _meta(2, 8, 16, 64), _meta(2, 8, 16, dtype=torch.float32)
        args = (torch.empty_like(o), q, k, v, o, lse, True, 0.0, False, 0, 0,
                0, "auto", 0)
        dq, dk, dv, dsinks = torch.ops.fa.attention_backward(*args)
        self.assertEqual((dq.shape, dk.shape, dv.shape),
                         (q.shape, k.shape, v.shape))
        self.assertEqual(tuple(dsinks.shape), (0,))  # no sinks: empty
        self.assertEqual(dsinks.dtype, torch.float32)
        grads = torch.ops.fa.attention_backward(
            *args, "", "", _meta(8, dtype=torch.float32))
        self.assertEqual(tuple(grads[3].shape), (8,))
        self.assertEqual(grads[3].dtype, torch.float32)

    def test_autograd_sends_dsinks_to_the_sinks(self):
        q = _meta(2, 8, 16, 64, grad=True)
        k, v = _meta(2, 2, 24, 64, grad=True), _meta(2, 2, 24, 64, grad=True)
        # A bfloat16 parameter, as transformers keeps gpt-oss's sinks: its
        # float32 copy is what the op takes.
        param = torch.nn.Parameter(_meta(8, dtype=torch.bfloat16))
        o, lse = torch.ops.fa.attention_forward(q, k, v, *self.ARGS, "", "",
                                                param.float())
        self.assertFalse(lse.requires_grad)
        o.sum().backward()
        self.assertEqual(param.grad.shape, (8,))
        self.assertEqual(param.grad.dtype, torch.bfloat16)
        for t in (q, k, v):
            self.assertEqual(t.grad.shape, t.shape)

    def test_autograd_without_sinks_is_unchanged(self):
        # The op called as before sinks existed (11 and 13 arguments).
        for extra in ((), ("", "")):
            q = _meta(1, 4, 16, 64, grad=True)
            k, v = _meta(1, 4, 16, 64, grad=True), _meta(1, 4, 16, 64)
            o, _ = torch.ops.fa.attention_forward(q, k, v, *self.ARGS, *extra)
            o.sum().backward()
            self.assertEqual(q.grad.shape, q.shape)
            self.assertEqual(k.grad.shape, k.shape)
            self.assertIsNone(v.grad)


def _reference(q, k, v, sinks, scale, causal=False, keep=None, dtype=None):
    """(O, LSE) with attention sinks, in torch ops, differentiable: the
    scaled scores (those `keep(i, j, Sq, Sk)` drops and the causal mask's
    set to -inf), one more column holding the head's sink, softmax, the
    column dropped, times V; in `dtype` (float64 for the reference).
    sinks None: plain attention (rows without keys give 0)."""
    dtype = dtype or torch.float64
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    b, h, sq, sk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(sk, device=q.device)[None, :]
    dropped = torch.zeros(sq, sk, dtype=torch.bool, device=q.device)
    if causal:
        dropped = dropped | (j > i + (sk - sq))
    if keep is not None:
        dropped = dropped | ~keep(i, j, sq, sk)
    s = s.masked_fill(dropped, float("-inf"))
    if sinks is None:
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)
        return torch.matmul(p, v), torch.logsumexp(s, dim=-1)
    column = sinks.to(dtype).reshape(1, h, 1, 1).expand(b, h, sq, 1)
    logits = torch.cat([s, column], dim=-1)
    p = torch.softmax(logits, dim=-1)[..., :-1]
    return torch.matmul(p, v), torch.logsumexp(logits, dim=-1)


def _sink_values(heads, device):
    """Sinks of every kind: large (20: the sink takes nearly all the
    weight), negative, near zero and moderate; float32."""
    base = [20.0, -3.0, 0.5, 2.0, -0.25, 5.0, 1.0, -8.0]
    return torch.tensor([base[h % len(base)] for h in range(heads)],
                        dtype=torch.float32, device=device)


def _max_error(got, want):
    return (got.double() - want.double()).abs().max().item()


def _sink_rounding(dtype, sinks, grad, exact):
    """What rounding O to `dtype` can do to dSinks = -sum_{b,i} P_sink D_i:
    D_i = rowsum(dO * O) from O stored in the inputs' dtype (as
    FlashAttention computes it) is off by up to u * rowsum(|dO * O|). The
    sum has rows of both signs, so this error can be large next to dSinks
    itself, and no comparison with torch's own (differently rounded) sum
    bounds it. exact: (O, LSE, ...) in float64."""
    sink_prob = torch.exp(sinks.double()[None, :, None] - exact[1])
    row_scale = (grad.double() * exact[0]).abs().sum(-1)
    unit = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8,
            torch.float32: 2.0 ** -24}[dtype]
    return unit * (sink_prob * row_scale).sum((0, 2)).max().item()


def _bound(torch_err, want):
    """FlashAttention's criterion: 2x torch's own error at the inputs'
    precision, plus a floor for values torch gets exact to the last bits
    (float32 rounding of sums of the value's size)."""
    return 2 * torch_err + 1e-5 * max(1.0, want.abs().max().item()) + 1e-6


@unittest.skipUnless(HAVE_CUDA, "needs torch with CUDA")
class GpuSinksTest(unittest.TestCase):
    """Forward and gradients with sinks on the GPU against float64."""

    WINDOW = (lambda i, j, sq, sk: (j >= i + (sk - sq) - 100)
              & (j <= i + (sk - sq)))

    def run_case(self, dtype, shape, causal, keep=None, mask_mod=None,
                 seed=0):
        """(ours, exact, torch's own) for O, LSE, dQ, dK, dV, dSinks."""
        torch.manual_seed(seed)
        b, hq, hkv, sq, sk, d = shape
        q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype,
                        requires_grad=True)
        k = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype,
                        requires_grad=True)
        v = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype,
                        requires_grad=True)
        sinks = _sink_values(hq, "cuda").requires_grad_()
        scale = d ** -0.5
        out, lse = fa.attention(q, k, v, causal=causal, mask_mod=mask_mod,
                                sinks=sinks, return_lse=True)
        grad = torch.randn_like(out)
        ours = (out, lse) + torch.autograd.grad(out, (q, k, v, sinks), grad)
        # float64 leaves: the exact gradients, not rounded to the inputs'
        # dtype on their way back.
        leaves = [t.detach().double().requires_grad_()
                  for t in (q, k, v, sinks)]
        want, want_lse = _reference(*leaves, scale, causal, keep)
        exact = (want, want_lse) + torch.autograd.grad(want, leaves,
                                                       grad.double())
        theirs, their_lse = _reference(q, k, v, sinks, scale, causal, keep,
                                       dtype=dtype)
        own = (theirs, their_lse) + torch.autograd.grad(
            theirs, (q, k, v, sinks), grad)
        return (q, k, v, sinks, grad), ours, exact, own

    def check(self, dtype, shape, causal, keep=None, mask_mod=None):
        name = f"{dtype} {shape} {'causal' if causal else 'full'}" + (
            " window" if keep else "")
        inputs, ours, exact, own = self.run_case(dtype, shape, causal, keep,
                                                 mask_mod)
        sink_rounding = _sink_rounding(dtype, inputs[3], inputs[4], exact)
        for label, got, want, torch_got in zip(
                ("O", "LSE", "dQ", "dK", "dV", "dSinks"), ours, exact, own):
            self.assertEqual(got.shape, want.shape, f"{name} {label}")
            self.assertFalse(torch.isnan(got).any().item(), f"{name} {label}")
            err = _max_error(got, want)
            if label == "LSE":
                # float32 from the same (rounded) inputs: no 16-bit error.
                bound = 1e-4 * max(1.0, want.abs().max().item())
            else:
                bound = _bound(_max_error(torch_got, want), want)
            if label == "dSinks":
                bound += sink_rounding
            self.assertLessEqual(err, bound, f"{name} {label}")

    def test_matrix(self):
        for dtype in (torch.float16, torch.bfloat16):
            for shape in ((1, 4, 4, 300, 300, 64),    # MHA
                          (2, 8, 2, 128, 333, 128),   # GQA, Sq < Sk
                          (1, 4, 1, 333, 128, 64)):   # MQA, Sq > Sk
                for causal in (False, True):
                    with self.subTest(dtype=dtype, shape=shape,
                                      causal=causal):
                        self.check(dtype, shape, causal)

    def test_sliding_window(self):
        for dtype in (torch.float16, torch.bfloat16):
            for shape in ((1, 4, 4, 300, 300, 64), (2, 8, 2, 128, 333, 128)):
                with self.subTest(dtype=dtype, shape=shape):
                    self.check(dtype, shape, False, keep=type(self).WINDOW,
                               mask_mod=V.sliding_window(100, 0))

    def test_float32(self):
        self.check(torch.float32, (2, 4, 2, 200, 150, 64), True)

    def test_rows_without_keys_see_only_the_sink(self):
        # Causal with Sq > Sk: the first Sq - Sk rows see no key; the sink
        # alone is their softmax: O = 0 and LSE = the sink.
        _, ours, _, _ = self.run_case(torch.float16, (1, 4, 1, 40, 16, 64),
                                      True)
        out, lse = ours[0], ours[1]
        self.assertTrue(torch.equal(out[:, :, :24],
                                    torch.zeros_like(out[:, :, :24])))
        sinks = _sink_values(4, "cuda")
        self.assertTrue(torch.allclose(
            lse[:, :, :24], sinks[None, :, None].expand(1, 4, 24)))

    def test_without_sinks_fails_the_criterion(self):
        # The mutation check: the kernels without the sinks (or a zero
        # gradient for them) are far outside the bound.
        for dtype in (torch.float16, torch.bfloat16):
            (q, k, v, sinks, grad), _, exact, own = self.run_case(
                dtype, (1, 4, 4, 300, 300, 64), True)
            plain = fa.attention(q, k, v, causal=True)
            dq, = torch.autograd.grad(plain, (q,), grad)
            for label, wrong, index in (("O", plain, 0), ("dQ", dq, 2),
                                        ("dSinks", torch.zeros_like(sinks),
                                         5)):
                err = _max_error(wrong, exact[index])
                bound = _bound(_max_error(own[index], exact[index]),
                               exact[index])
                if label == "dSinks":
                    bound += _sink_rounding(dtype, sinks, grad, exact)
                self.assertGreater(err, bound, f"{dtype} {label}")

    def test_direct_backward_call(self):
        (q, k, v, sinks, grad), ours, _, _ = self.run_case(
            torch.bfloat16, (2, 8, 2, 128, 200, 64), True)
        o, lse = ours[0].detach(), ours[1]
        q, k, v = q.detach(), k.detach(), v.detach()
        grads = fa.attention_backward(grad, q, k, v, o, lse, causal=True,
                                      sinks=sinks.detach())
        self.assertEqual(len(grads), 4)
        self.assertEqual(grads[3].dtype, torch.float32)
        self.assertEqual(grads[3].shape, (8,))
        for got, want in zip(grads, ours[2:]):
            # The same kernels; dQ and dSinks are added in any order.
            scale = max(1.0, want.abs().max().item())
            self.assertLess(_max_error(got, want), 1e-2 * scale)
        # Without sinks: three gradients, as before.
        self.assertEqual(len(fa.attention_backward(grad, q, k, v, o, lse,
                                                   causal=True)), 3)
        # Deterministic: the same bits in every run, dSinks included.
        first = fa.attention_backward(grad, q, k, v, o, lse, causal=True,
                                      deterministic=True,
                                      sinks=sinks.detach())
        again = fa.attention_backward(grad, q, k, v, o, lse, causal=True,
                                      deterministic=True,
                                      sinks=sinks.detach())
        for got, want, other in zip(first, again, grads):
            self.assertTrue(torch.equal(got, want))
            scale = max(1.0, other.abs().max().item())
            self.assertLess(_max_error(got, other), 1e-2 * scale)

    def test_no_grad_launch_matches_the_op(self):
        q, k, v = (torch.randn(2, 4, 100, 64, device="cuda",
                               dtype=torch.float16) for _ in range(3))
        sinks = _sink_values(4, "cuda")
        with torch.no_grad():
            direct = fa.attention(q, k, v, causal=True, sinks=sinks)
        through_op, _ = torch.ops.fa.attention_forward(
            q, k, v, True, 0.0, 0, 0, 0, "auto", 0, False, "", "", sinks)
        self.assertTrue(torch.equal(direct, through_op))
        # A different sink changes the output (the argument is read).
        other = fa.attention(q, k, v, causal=True, sinks=sinks + 1.0)
        self.assertFalse(torch.equal(direct, other))

    def test_low_precision_sinks_train_their_parameter(self):
        # transformers keeps the sinks in the model's dtype: the gradient
        # reaches the bfloat16 parameter (through .float()).
        q, k, v = (torch.randn(1, 4, 64, 64, device="cuda",
                               dtype=torch.bfloat16) for _ in range(3))
        param = torch.nn.Parameter(_sink_values(4, "cuda").bfloat16())
        fa.attention(q, k, v, causal=True, sinks=param).sum().backward()
        self.assertEqual(param.grad.dtype, torch.bfloat16)
        as_float = param.detach().float().requires_grad_()
        fa.attention(q, k, v, causal=True, sinks=as_float).sum().backward()
        self.assertLess(_max_error(param.grad, as_float.grad),
                        1e-2 * max(1.0, as_float.grad.abs().max().item()))
        self.assertGreater(as_float.grad.abs().max().item(), 0.0)

    def test_flash_attn_func_takes_s_aux(self):
        # flash_attn_func's s_aux is fa.attention's sinks on the [B, S, H,
        # D] layout: the same kernel, the same output and gradients (the
        # deterministic backward: the same bits).
        q, k, v = (torch.randn(2, 100, 4, 64, device="cuda",
                               dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        sinks = _sink_values(4, "cuda").requires_grad_()
        grad = torch.randn(2, 100, 4, 64, device="cuda", dtype=torch.bfloat16)
        runs = []
        for flash in (True, False):
            for t in (q, k, v, sinks):
                t.grad = None
            if flash:
                out = fa.flash_attn_func(q, k, v, causal=True, s_aux=sinks,
                                         deterministic=True)
            else:
                out = fa.attention(q.transpose(1, 2), k.transpose(1, 2),
                                   v.transpose(1, 2), causal=True,
                                   sinks=sinks,
                                   deterministic=True).transpose(1, 2)
            out.backward(grad)
            runs.append([out.detach()] + [t.grad.clone()
                                          for t in (q, k, v, sinks)])
        for got, want in zip(*runs):
            self.assertTrue(torch.equal(got, want))
        with self.assertRaisesRegex(ValueError, "s_aux"):
            fa.flash_attn_func(q.detach().to(torch.float8_e4m3fn),
                               k.detach().to(torch.float8_e4m3fn),
                               v.detach().to(torch.float8_e4m3fn),
                               s_aux=sinks.detach())

    def test_arguments_on_the_gpu(self):
        q = torch.randn(1, 4, 16, 64, device="cuda", dtype=torch.float16)
        bad = [(ValueError, r"sinks must be \[Hq\] = \[4\]",
                torch.zeros(5, device="cuda")),
               (TypeError, "sinks is torch.int32",
                torch.zeros(4, device="cuda", dtype=torch.int32)),
               (ValueError, "sinks must be a CUDA tensor", torch.zeros(4))]
        for error, message, sinks in bad:
            with self.assertRaisesRegex(error, "fa.attention: " + message):
                fa.attention(q, q, q, sinks=sinks)
        # flash_attn_func names its own layout.
        with self.assertRaisesRegex(
                ValueError, r"fa.flash_attn_func: q must be \[B, S, H, D\], "
                r"got \(4, 16, 64\)"):
            fa.flash_attn_func(q[0], q[0], q[0])
        # flash_attn_func names the count against its q ([B, S, H, D]).
        with self.assertRaisesRegex(
                ValueError, r"fa.flash_attn_func: sinks must be \[Hq\] = "
                r"\[4\] \(one logit per query head, q's dimension 2\), got "
                r"\[16\]"):
            fa.flash_attn_func(q.transpose(1, 2), q.transpose(1, 2),
                               q.transpose(1, 2),
                               s_aux=torch.zeros(16, device="cuda"))
        # float64 is converted too.
        fa.attention(q, q, q, sinks=torch.zeros(4, device="cuda",
                                                dtype=torch.float64))
        # The deterministic backward trains the sinks too, the same bits
        # in every run.
        sinks = torch.zeros(4, device="cuda", requires_grad=True)
        runs = []
        for _ in range(2):
            sinks.grad = None
            fa.attention(q, q, q, sinks=sinks,
                         deterministic=True).sum().backward()
            runs.append(sinks.grad.clone())
        self.assertTrue(torch.equal(runs[0], runs[1]))


@unittest.skipUnless(HAVE_CUDA, "needs torch with CUDA")
class GpuCustomOpTest(unittest.TestCase):
    def test_opcheck(self):
        for dtype in (torch.float32, torch.float16):
            q = torch.randn(1, 4, 40, 64, device="cuda", dtype=dtype,
                            requires_grad=True)
            k = torch.randn(1, 2, 33, 64, device="cuda", dtype=dtype,
                            requires_grad=True)
            v = torch.randn(1, 2, 33, 64, device="cuda", dtype=dtype,
                            requires_grad=True)
            sinks = _sink_values(4, "cuda").requires_grad_()
            args = (q, k, v, True, 0.0, 0, 0, 0, "auto", 0, False, "", "",
                    sinks)
            torch.library.opcheck(torch.ops.fa.attention_forward, args)
            o, lse = torch.ops.fa.attention_forward(*args)
            torch.library.opcheck(
                torch.ops.fa.attention_backward,
                (torch.randn_like(o), q.detach(), k.detach(), v.detach(),
                 o.detach(), lse, True, 0.0, False, 0, 0, 0, "auto", 0, "",
                 "", sinks.detach()))
            # Without sinks: the backward's dSinks is empty.
            torch.library.opcheck(
                torch.ops.fa.attention_backward,
                (torch.randn_like(o), q.detach(), k.detach(), v.detach(),
                 o.detach(), lse, True, 0.0, False, 0, 0, 0, "auto", 0))

    def test_compile(self):
        torch._dynamo.reset()

        def step(q, k, v, sinks):
            o = fa.attention(q, k, v, causal=True, sinks=sinks)
            return (o.float() * o.float()).sum()

        compiled = torch.compile(step, fullgraph=True)
        q, k, v = (torch.randn(2, 4, 100, 64, device="cuda",
                               dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        sinks = torch.nn.Parameter(_sink_values(4, "cuda").bfloat16())
        loss = compiled(q, k, v, sinks)
        loss.backward()
        grads = [t.grad.clone() for t in (q, k, v, sinks)]
        for t in (q, k, v, sinks):
            t.grad = None
        eager = step(q, k, v, sinks)
        eager.backward()
        self.assertLess(abs(loss.item() - eager.item()),
                        1e-3 * abs(eager.item()))
        for got, t in zip(grads, (q, k, v, sinks)):
            scale = max(1.0, t.grad.abs().max().item())
            self.assertLess(_max_error(got, t.grad), 1e-2 * scale)


def _gpt_oss_eager(module, query, key, value, attention_mask, scaling,
                   dropout=0.0, **kwargs):
    """transformers' eager gpt-oss attention (models/gpt_oss/
    modeling_gpt_oss.py, eager_attention_forward), written out: the scores
    plus the additive mask, the sinks as one more column, the row's max
    subtracted, softmax, the sink's column dropped, times V; returns
    [B, Sq, Hq, D]."""
    group = module.num_key_value_groups
    key = key.repeat_interleave(group, dim=1)
    value = value.repeat_interleave(group, dim=1)
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask[:, :, :, :key.shape[-2]]
    sinks = module.sinks.reshape(1, -1, 1, 1).expand(
        query.shape[0], -1, query.shape[-2], -1)
    logits = torch.cat([weights, sinks], dim=-1)
    logits = logits - logits.max(dim=-1, keepdim=True).values
    probs = torch.softmax(logits, dim=-1, dtype=logits.dtype)[..., :-1]
    return torch.matmul(probs, value).transpose(1, 2).contiguous()


def _eager_mask(sq, sk, window, dtype, device):
    """The additive causal (and sliding-window) mask transformers builds for
    eager attention: 0 where row i sees key j, the dtype's minimum
    elsewhere; a window of W keeps the keys with i - j < W."""
    i = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    seen = j <= i
    if window:
        seen = seen & (i - j < window)
    mask = torch.zeros(sq, sk, dtype=dtype, device=device)
    return mask.masked_fill(~seen, torch.finfo(dtype).min)[None, None]


@unittest.skipUnless(HAVE_CUDA, "needs torch with CUDA")
class GpuTransformersTest(unittest.TestCase):
    """The transformers backend with s_aux against gpt-oss's eager
    attention (no model, no download: the attention function alone)."""

    def test_backend_matches_gpt_oss_eager(self):
        from fa import _transformers

        eager = _gpt_oss_eager
        try:  # the real one where transformers has it
            from transformers.models.gpt_oss.modeling_gpt_oss import \
                eager_attention_forward

            def eager(*args, **kwargs):
                return eager_attention_forward(*args, **kwargs)[0]
        except ImportError:
            pass
        b, hq, hkv, s, d = 2, 8, 2, 160, 64
        for window in (None, 64):
            for dtype in (torch.bfloat16, torch.float16):
                torch.manual_seed(3)
                q = torch.randn(b, hq, s, d, device="cuda", dtype=dtype,
                                requires_grad=True)
                k = torch.randn(b, hkv, s, d, device="cuda", dtype=dtype,
                                requires_grad=True)
                v = torch.randn(b, hkv, s, d, device="cuda", dtype=dtype,
                                requires_grad=True)
                sinks = torch.nn.Parameter(
                    _sink_values(hq, "cuda").to(dtype))

                def module(sinks):
                    # What eager_attention_forward and the backend read of
                    # the module (gpt-oss's attention).
                    return types.SimpleNamespace(
                        num_key_value_groups=hq // hkv, is_causal=True,
                        training=False, sinks=sinks)
                grad = torch.randn(b, s, hq, d, device="cuda", dtype=dtype)
                # As GptOssAttention.forward calls it: s_aux=self.sinks.
                ours, none = _transformers._attention(
                    module(sinks), q, k, v, None, scaling=d ** -0.5,
                    sliding_window=window, s_aux=sinks)
                self.assertIsNone(none)
                got = (ours,) + torch.autograd.grad(ours, (q, k, v, sinks),
                                                    grad)
                # Exact: float64 leaves (gradients not rounded to the
                # inputs' dtype); torch's own: the model's dtype.
                runs = []
                for run_dtype in (torch.float64, dtype):
                    leaves = [t if run_dtype == dtype else
                              t.detach().double().requires_grad_()
                              for t in (q, k, v, sinks)]
                    out = eager(module(leaves[3]), *leaves[:3],
                                _eager_mask(s, s, window, run_dtype, "cuda"),
                                scaling=d ** -0.5)
                    runs.append((out,) + torch.autograd.grad(
                        out, leaves, grad.to(run_dtype)))
                want, theirs = runs
                for label, g, w, t in zip(("O", "dQ", "dK", "dV", "dSinks"),
                                          got, want, theirs):
                    self.assertEqual(g.shape, w.shape)
                    self.assertLessEqual(
                        _max_error(g, w),
                        _bound(_max_error(t, w), w),
                        f"{dtype} window={window} {label}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
