"""Packed variable-length batches: fa.flash_attn_varlen_func (flash-attn's
varlen convention: q [total_q, Hq, D], k and v [total_k, Hkv, D], int32
cu_seqlens_q / cu_seqlens_k [B + 1]).

Without a GPU: the varlen kernels compile through the C ABI
(fa.prepare_kernel with varlen=True, every strategy) and are kernels of
their own, and so are the backward's (mma, simt, deterministic too;
wgmma refuses it by name). With a GPU: O and LSE, and dQ, dK,
dV through autograd, of every sequence against the float64 reference of
that sequence alone, with FlashAttention's criterion (error at most 2x
PyTorch's own at the inputs' precision), over random lengths with 0 and 1
among them, causal and not, GQA, windows and softcapping, keys in a paged
cache (pages of 1 to 256 rows); the offsets' and the page table's checks; the custom ops (opcheck) and torch.compile; the transformers
backend's padding masks (batched greedy generation equals one-by-one
generation; a padded training step's gradients equal SDPA's).
Run: python3 python/tests/test_varlen.py (needs the built libfa_runtime.so;
ctest runs it with FA_RUNTIME_LIB set).
"""

import os
import random
import sys
import tempfile
import unittest

_CACHE = tempfile.TemporaryDirectory(prefix="fa-varlen-test-")
os.environ["FA_CACHE_DIR"] = _CACHE.name

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fa  # noqa: E402
from sequence_reference import (sequence_attention,  # noqa: E402
                                sequence_attention_grad, softcap_error)

try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    torch = None
    HAVE_CUDA = False


class CompileTest(unittest.TestCase):
    """The varlen kernels through the compile-only path (no GPU)."""

    def test_varlen_kernels_compile(self):
        cases = [({"dtype": "float32"}, 64),
                 ({"dtype": "float16", "strategy": "mma"}, 128),
                 ({"dtype": "bfloat16", "strategy": "wgmma"}, 128),
                 ({"dtype": "bfloat16", "causal": True}, 64)]
        for kwargs, head_dim in cases:
            with self.subTest(kwargs=sorted(kwargs), head_dim=head_dim):
                info = fa.prepare_kernel(head_dim, varlen=True, **kwargs)
                self.assertIn("_varlen", info["name"])
                self.assertEqual(info["spill_store_bytes"], 0)

    def test_varlen_is_a_kernel_of_its_own(self):
        plain = fa.prepare_kernel(64, dtype="float16")
        varlen = fa.prepare_kernel(64, dtype="float16", varlen=True)
        self.assertNotIn("_varlen", plain["name"])
        self.assertNotEqual(plain["key"], varlen["key"])

    def test_backward_kernels(self):
        info = fa.prepare_kernel(64, dtype="float16", varlen=True,
                                 backward=True)
        self.assertIn("_varlen", info["name"])
        self.assertIn("mma", info["name"])
        # The wgmma backward takes a varlen batch (its dkdv program clears
        # the rows its TMA boxes bring from the next sequence).
        info = fa.prepare_kernel(128, dtype="bfloat16", strategy="wgmma",
                                 varlen=True, backward=True)
        self.assertIn("_varlen", info["name"])
        self.assertIn("wgmma", info["name"])
        # The deterministic backward: turn counters per sequence.
        info = fa.prepare_kernel(64, dtype="float16", varlen=True,
                                 backward=True, deterministic=True)
        self.assertIn("_det_varlen", info["name"])


def _offsets(lengths):
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    return offsets


@unittest.skipUnless(HAVE_CUDA, "needs torch with CUDA")
class GpuVarlenTest(unittest.TestCase):
    """flash_attn_varlen_func against each sequence alone, in float64."""

    def run_batch(self, dtype, q_lens, k_lens, hq, hkv, d, causal,
                  window=(-1, -1), softcap=0.0, seed=0, used=None, page=None,
                  sinks=False):
        torch.manual_seed(seed)
        cu_q = torch.tensor(_offsets(q_lens), dtype=torch.int32,
                            device="cuda")
        cu_k = torch.tensor(_offsets(k_lens), dtype=torch.int32,
                            device="cuda")
        q = torch.randn(sum(q_lens), hq, d, device="cuda", dtype=dtype)
        k = torch.randn(sum(k_lens), hkv, d, device="cuda", dtype=dtype)
        v = torch.randn(sum(k_lens), hkv, d, device="cuda", dtype=dtype)
        scale = d ** -0.5
        # gpt-oss's sinks (forward only here: see run_sinks for gradients).
        s_aux = (torch.randn(hq, device="cuda") * 3).to(dtype) if sinks \
            else None
        # seqused_k: each sequence's first used[b] keys (the rest NaN).
        seqused = None
        if used is not None:
            seqused = torch.tensor(used, dtype=torch.int32, device="cuda")
            for b, (first, n) in enumerate(zip(_offsets(k_lens), used)):
                k[first + n:first + k_lens[b]] = float("nan")
                v[first + n:first + k_lens[b]] = float("nan")
        keys, values, table = k, v, None
        if page is not None:
            # A paged cache: sequence b's keys in its table row's pages of
            # a shuffled pool [num_pages, P, Hkv, D]; unnamed pages NaN.
            max_pages = max(1, -(-max(k_lens) // page))
            count = len(k_lens) * max_pages + 3
            order = torch.randperm(count, device="cuda").int()
            table = order[:len(k_lens) * max_pages].view(len(k_lens),
                                                         max_pages)
            keys = torch.full((count, page, hkv, d), float("nan"),
                              device="cuda", dtype=dtype)
            values = keys.clone()
            for b, (first, n) in enumerate(zip(_offsets(k_lens), k_lens)):
                rows = torch.arange(n, device="cuda")
                pages = table[b].long()[rows // page]
                keys[pages, rows % page] = k[first:first + n]
                values[pages, rows % page] = v[first:first + n]
        out, lse = fa.flash_attn_varlen_func(
            q, keys, values, cu_q, cu_k, max(q_lens), max(k_lens),
            causal=causal, window_size=window, softcap=softcap,
            return_lse=True, seqused_k=seqused, block_table=table,
            s_aux=s_aux)
        self.assertEqual(out.shape, q.shape)
        self.assertEqual(lse.shape, (hq, q.shape[0]))
        name = (f"{dtype} q_lens={q_lens} k_lens={k_lens} Hq={hq} Hkv={hkv} "
                f"D={d} {'causal' if causal else 'full'} window={window} "
                f"softcap={softcap} page={page} used={used} sinks={sinks}")
        oq, ok = _offsets(q_lens), _offsets(k_lens)
        for b in range(len(q_lens)):
            rows = slice(oq[b], oq[b + 1])
            keys = slice(ok[b], ok[b + 1] if used is None
                         else ok[b] + used[b])
            exact, exact_lse = sequence_attention(
                q[rows].double(), k[keys].double(), v[keys].double(), scale,
                causal, window, softcap,
                None if s_aux is None else s_aux.double())
            own, _ = sequence_attention(q[rows], k[keys], v[keys], scale,
                                        causal, window, softcap,
                                        None if s_aux is None
                                        else s_aux.float())
            got = out[rows].double()
            self.assertFalse(torch.isnan(got).any().item(),
                             f"{name}: NaN in sequence {b}")
            if got.numel() == 0:
                continue
            err = (got - exact).abs().max().item()
            own_err = (own.double() - exact).abs().max().item()
            # FlashAttention's criterion, with a floor for exact rows.
            self.assertLessEqual(err, 2 * own_err + 1e-5,
                                 f"{name}: O of sequence {b}")
            want_lse = exact_lse
            got_lse = lse[:, rows].double()
            finite = torch.isfinite(want_lse)
            self.assertTrue(torch.equal(torch.isfinite(got_lse), finite),
                            f"{name}: LSE -inf rows of sequence {b}")
            if finite.any():
                lse_err = (got_lse[finite] - want_lse[finite]).abs().max()
                self.assertLessEqual(lse_err.item(),
                                     1e-3 + softcap_error(softcap, dtype),
                                     f"{name}: LSE of sequence {b}")

    def test_random_lengths(self):
        rng = random.Random(7)
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            for causal in (False, True):
                for d, hq, hkv in ((64, 4, 2), (128, 8, 8)):
                    q_lens = [0, 1] + [rng.randint(1, 600) for _ in range(6)]
                    k_lens = [rng.randint(0, 600) for _ in q_lens]
                    rng.shuffle(q_lens)
                    with self.subTest(dtype=dtype, causal=causal, d=d):
                        self.run_batch(dtype, q_lens, k_lens, hq, hkv, d,
                                       causal)

    def test_seqused_k(self):
        # Each sequence's first seqused_k[b] keys (0, 1, a tail, all), the
        # rest NaN; causal aligned to the used keys' end; split-KV on the
        # long decode rows.
        with torch.no_grad():
            for causal in (False, True):
                self.run_batch(torch.bfloat16, [3, 1, 40, 7], [50, 9, 300, 20],
                               8, 2, 128, causal, used=[0, 1, 171, 20])
                self.run_batch(torch.float16, [1, 1], [4000, 3000], 8, 1, 64,
                               causal, used=[3999, 17])
        q = torch.randn(4, 2, 64, device="cuda", dtype=torch.float16,
                        requires_grad=True)
        cu = torch.tensor([0, 4], dtype=torch.int32, device="cuda")
        used = torch.tensor([2], dtype=torch.int32, device="cuda")
        with self.assertRaisesRegex(NotImplementedError, "forward only"):
            fa.flash_attn_varlen_func(q, q, q, cu, cu, 4, 4, seqused_k=used)
        with self.assertRaisesRegex(TypeError, "seqused_k must be an int32"):
            fa.flash_attn_varlen_func(q.detach(), q.detach(), q.detach(), cu,
                                      cu, 4, 4, seqused_k=used.long())

    def test_paged_keys(self):
        # vLLM's chunked prefill: packed queries, each sequence's keys in a
        # paged cache (pages of 1, 16, 64 and 256 rows: read row by row
        # where no K/V tile divides them), with seqused_k, decode rows
        # split over long keys, GQA, causal and not.
        rng = random.Random(11)
        with torch.no_grad():
            for page in (1, 16, 64, 256):
                for causal in (False, True):
                    q_lens = [0, 1] + [rng.randint(1, 300) for _ in range(4)]
                    k_lens = [n + rng.randint(0, 400) for n in q_lens]
                    with self.subTest(page=page, causal=causal):
                        self.run_batch(torch.bfloat16, q_lens, k_lens, 8, 2,
                                       128, causal, page=page)
            self.run_batch(torch.float16, [3, 1, 40, 7], [50, 9, 300, 20],
                           8, 2, 64, True, used=[0, 1, 171, 20], page=16)
            self.run_batch(torch.float16, [1, 1], [4000, 3000], 8, 1, 128,
                           True, page=256)
            self.run_batch(torch.float32, [5, 17], [60, 17], 4, 4, 64, True,
                           page=32)

    def test_sinks_with_used_and_paged_keys(self):
        # gpt-oss's sinks through the forward-only calls of serving: each
        # sequence's used keys (0 of them: O = 0, LSE = the sink), paged
        # keys (whole and gathered pages), both, split decode rows; a sink
        # that asks for a gradient is refused there.
        with torch.no_grad():
            for causal in (False, True):
                with self.subTest(causal=causal):
                    self.run_batch(torch.bfloat16, [3, 1, 40, 7],
                                   [50, 9, 300, 20], 8, 2, 128, causal,
                                   used=[0, 1, 171, 20], sinks=True)
                    self.run_batch(torch.float16, [0, 1, 90, 33],
                                   [5, 200, 150, 33], 4, 2, 64, causal,
                                   page=16, sinks=True)
            self.run_batch(torch.bfloat16, [3, 1, 40, 7], [50, 9, 300, 20],
                           8, 2, 64, True, used=[0, 1, 171, 20], page=5,
                           sinks=True)
            self.run_batch(torch.float16, [1, 1], [4000, 3000], 8, 1, 128,
                           True, page=256, sinks=True)
            self.run_batch(torch.float32, [5, 17], [60, 17], 4, 4, 64, True,
                           used=[33, 0], sinks=True)
        q = torch.randn(4, 2, 64, device="cuda", dtype=torch.float16)
        cu = torch.tensor([0, 4], dtype=torch.int32, device="cuda")
        used = torch.tensor([2], dtype=torch.int32, device="cuda")
        sinks = torch.zeros(2, device="cuda", requires_grad=True)
        with self.assertRaisesRegex(NotImplementedError, "forward only"):
            fa.flash_attn_varlen_func(q, q, q, cu, cu, 4, 4, seqused_k=used,
                                      s_aux=sinks)

    def test_paged_keys_checks(self):
        q = torch.randn(10, 2, 64, device="cuda", dtype=torch.float16)
        pool = torch.randn(4, 16, 2, 64, device="cuda", dtype=torch.float16)
        cu_q = torch.tensor([0, 4, 10], dtype=torch.int32, device="cuda")
        cu_k = torch.tensor([0, 20, 52], dtype=torch.int32, device="cuda")
        table = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32,
                             device="cuda")

        def call(table=table, max_k=32, cu_k=cu_k, k=pool, q=q):
            return fa.flash_attn_varlen_func(q, k, k, cu_q, cu_k, 6, max_k,
                                             block_table=table)

        with torch.no_grad():
            call()
            cases = [
                ({"max_k": 33}, ValueError, r"max_seqlen_k = 33 must be in "
                 r"\[0, 32\]"),
                ({"table": table[:1]}, TypeError, "block_table must be an "
                 "int32 tensor"),
                ({"table": table.long()}, TypeError, "block_table must be an "
                 "int32 tensor"),
                ({"table": torch.tensor([[0, 1], [2, 4]], dtype=torch.int32,
                                        device="cuda")},
                 ValueError, r"block_table\[1\] names page 4"),
                ({"cu_k": torch.tensor([0, 20, 53], dtype=torch.int32,
                                       device="cuda")},
                 ValueError, "more than max_seqlen_k = 32"),
                ({"k": pool[0]}, ValueError, "pool of pages"),
            ]
            for kwargs, error, message in cases:
                with self.subTest(message=message):
                    with self.assertRaisesRegex(error, message):
                        call(**kwargs)
        with self.assertRaisesRegex(NotImplementedError,
                                    "block_table is forward only"):
            call(q=q.clone().requires_grad_())

    def test_variants_per_sequence(self):
        lens = [300, 5, 129, 64]
        for dtype in (torch.float16, torch.bfloat16):
            with self.subTest(dtype=dtype):
                self.run_batch(dtype, lens, lens, 4, 4, 64, True,
                               window=(32, 0))
                self.run_batch(dtype, lens, [40, 5, 300, 1], 4, 2, 128,
                               False, softcap=5.0)

    def test_bad_offsets_are_named(self):
        q = torch.randn(10, 2, 64, device="cuda", dtype=torch.float16)
        good = torch.tensor([0, 4, 10], dtype=torch.int32, device="cuda")

        def call(cu_q, cu_k=good, max_q=6, max_k=6):
            return fa.flash_attn_varlen_func(q, q, q, cu_q, cu_k, max_q,
                                             max_k)

        call(good)
        cases = [
            (good.long(), "torch.int32"),
            (torch.tensor([1, 4, 10], dtype=torch.int32, device="cuda"),
             r"\[0\] must be 0"),
            (torch.tensor([0, 7, 4], dtype=torch.int32, device="cuda"),
             "non-decreasing"),
            (torch.tensor([0, 4, 9], dtype=torch.int32, device="cuda"),
             r"must be the packed rows \(10\)"),
            (good.cpu(), "is on cpu"),
        ]
        for cu, message in cases:
            with self.subTest(message=message):
                with self.assertRaisesRegex((TypeError, ValueError), message):
                    call(cu)
        with self.assertRaisesRegex(ValueError, "more than max_seqlen_q = 5"):
            call(good, max_q=5)
        with self.assertRaisesRegex(ValueError, "both hold B \\+ 1"):
            call(good, cu_k=torch.tensor([0, 10], dtype=torch.int32,
                                         device="cuda"))

    def test_offsets_read_back_once_per_table(self):
        """A table that passed is not read back again (a training step's
        layers share it) until it changes in place; what the earlier check
        did not cover (another total, a smaller max_seqlen) is checked."""
        from fa import _serving
        q = torch.randn(10, 2, 64, device="cuda", dtype=torch.float16)
        cu = torch.tensor([0, 4, 10], dtype=torch.int32, device="cuda")
        where = "fa.flash_attn_varlen_func"

        def check(total=10, max_seqlen=6):
            return _serving._check_cu_seqlens(where, "cu_seqlens_q", cu, q,
                                              total, max_seqlen,
                                              "max_seqlen_q")
        check()
        reads = []
        original = torch.Tensor.tolist

        def counted(t):
            reads.append(t)
            return original(t)
        torch.Tensor.tolist = counted
        try:
            check()
            check(max_seqlen=8)
            self.assertEqual(reads, [], "a checked table was read again")
            with self.assertRaisesRegex(ValueError, "more than max_seqlen_q"):
                check(max_seqlen=5)
            with self.assertRaisesRegex(ValueError, "packed rows \\(9\\)"):
                check(total=9)
            cu[1] = 7  # in place: the version counter moves
            with self.assertRaisesRegex(ValueError, "more than max_seqlen_q"):
                check()
            cu[1] = 11
            with self.assertRaisesRegex(ValueError, "non-decreasing"):
                check(max_seqlen=12)
        finally:
            torch.Tensor.tolist = original
        self.assertEqual(len(reads), 4)

    def run_backward(self, dtype, q_lens, k_lens, hq, hkv, d, causal,
                     window=(-1, -1), softcap=0.0, seed=0,
                     deterministic=False):
        """dQ, dK, dV through autograd against each sequence's float64
        gradients (FlashAttention's criterion, a floor for exact values);
        deterministic: a second run gives the same bits."""
        torch.manual_seed(seed)
        cu_q = torch.tensor(_offsets(q_lens), dtype=torch.int32,
                            device="cuda")
        cu_k = torch.tensor(_offsets(k_lens), dtype=torch.int32,
                            device="cuda")
        q = torch.randn(sum(q_lens), hq, d, device="cuda", dtype=dtype)
        k = torch.randn(sum(k_lens), hkv, d, device="cuda", dtype=dtype)
        v = torch.randn(sum(k_lens), hkv, d, device="cuda", dtype=dtype)
        grad = torch.randn(sum(q_lens), hq, d, device="cuda", dtype=dtype)
        for t in (q, k, v):
            t.requires_grad_()
        out = fa.flash_attn_varlen_func(
            q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), causal=causal,
            window_size=window, softcap=softcap, deterministic=deterministic)
        out.backward(grad)
        if deterministic:
            first = [t.grad.clone() for t in (q, k, v)]
            for t in (q, k, v):
                t.grad = None
            fa.flash_attn_varlen_func(
                q, k, v, cu_q, cu_k, max(q_lens), max(k_lens),
                causal=causal, window_size=window, softcap=softcap,
                deterministic=True).backward(grad)
            for label, a, t in zip(("dQ", "dK", "dV"), first, (q, k, v)):
                self.assertTrue(torch.equal(a, t.grad),
                                f"deterministic {label} differs run to run")
        name = (f"{dtype} q_lens={q_lens} k_lens={k_lens} Hq={hq} Hkv={hkv} "
                f"D={d} {'causal' if causal else 'full'} window={window} "
                f"softcap={softcap} deterministic={deterministic}")
        oq, ok = _offsets(q_lens), _offsets(k_lens)
        scale = d ** -0.5

        def grads(rows, keys, as_type):
            leaves = [t.detach()[s].to(as_type).requires_grad_()
                      for t, s in ((q, rows), (k, keys), (v, keys))]
            o = sequence_attention_grad(*leaves, scale, causal, window,
                                        softcap)
            o.backward(grad[rows].to(as_type))
            return [t.grad if t.grad is not None else torch.zeros_like(t)
                    for t in leaves]

        for b in range(len(q_lens)):
            rows = slice(oq[b], oq[b + 1])
            keys = slice(ok[b], ok[b + 1])
            if oq[b + 1] == oq[b] and ok[b + 1] == ok[b]:
                continue
            exact = grads(rows, keys, torch.float64)
            own = grads(rows, keys, dtype)
            got = (q.grad[rows], k.grad[keys], v.grad[keys])
            for label, g, want, theirs in zip(("dQ", "dK", "dV"), got, exact,
                                              own):
                if want.numel() == 0:
                    continue
                self.assertFalse(torch.isnan(g).any().item(),
                                 f"{name}: NaN in {label} of sequence {b}")
                err = (g.double() - want).abs().max().item()
                torch_err = (theirs.double() - want).abs().max().item()
                floor = 1e-5 * max(1.0, want.abs().max().item())
                self.assertLessEqual(err, 2 * torch_err + floor,
                                     f"{name}: {label} of sequence {b}")

    def test_backward_random_lengths(self):
        rng = random.Random(11)
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            for causal in (False, True):
                for d, hq, hkv in ((64, 4, 2), (128, 4, 4)):
                    q_lens = [0, 1] + [rng.randint(1, 400) for _ in range(5)]
                    k_lens = [rng.randint(0, 400) for _ in q_lens]
                    rng.shuffle(q_lens)
                    with self.subTest(dtype=dtype, causal=causal, d=d):
                        self.run_backward(dtype, q_lens, k_lens, hq, hkv, d,
                                          causal)

    def test_backward_deterministic(self):
        # Turn counters per sequence; causal turns over each sequence's
        # own K/V tiles last to first; a window's from each query tile's
        # first K/V tile. Many K/V tiles per query tile (long keys).
        rng = random.Random(13)
        for dtype in (torch.bfloat16, torch.float32):
            for causal in (False, True):
                q_lens = [0, 1] + [rng.randint(1, 500) for _ in range(4)]
                k_lens = [rng.randint(0, 900) for _ in q_lens]
                with self.subTest(dtype=dtype, causal=causal):
                    self.run_backward(dtype, q_lens, k_lens, 4, 2, 64, causal,
                                      deterministic=True)
        self.run_backward(torch.float16, [300, 5, 129], [700, 5, 129], 4, 2,
                          128, True, window=(64, 0), deterministic=True)

    def test_backward_variants(self):
        lens = [300, 5, 129, 64]
        self.run_backward(torch.bfloat16, lens, lens, 4, 2, 64, True,
                          window=(32, 0))
        self.run_backward(torch.float16, lens, [40, 5, 300, 1], 4, 2, 128,
                          False, softcap=5.0)

    def run_sinks(self, dtype, q_lens, k_lens, hq, hkv, d, causal,
                  window=(-1, -1), deterministic=False, seed=0):
        """Attention sinks through a packed batch: O, LSE, dQ, dK, dV and
        dSinks (summed over the sequences) against each sequence's float64
        reference with the sinks (FlashAttention's criterion)."""
        torch.manual_seed(seed)
        cu_q = torch.tensor(_offsets(q_lens), dtype=torch.int32,
                            device="cuda")
        cu_k = torch.tensor(_offsets(k_lens), dtype=torch.int32,
                            device="cuda")
        q = torch.randn(sum(q_lens), hq, d, device="cuda", dtype=dtype)
        k = torch.randn(sum(k_lens), hkv, d, device="cuda", dtype=dtype)
        v = torch.randn(sum(k_lens), hkv, d, device="cuda", dtype=dtype)
        grad = torch.randn(sum(q_lens), hq, d, device="cuda", dtype=dtype)
        # From below the scores to far above them (the row's weight then
        # goes almost all to the sink), in the model's dtype as gpt-oss
        # keeps them.
        sinks = torch.linspace(-3.0, 6.0, hq, device="cuda").to(dtype)
        leaves = [t.clone().requires_grad_() for t in (q, k, v, sinks)]
        out, lse = fa.flash_attn_varlen_func(
            *leaves[:3], cu_q, cu_k, max(q_lens), max(k_lens),
            causal=causal, window_size=window, return_lse=True,
            deterministic=deterministic, s_aux=leaves[3])
        out.backward(grad)
        got = [t.grad for t in leaves]
        name = (f"{dtype} q_lens={q_lens} k_lens={k_lens} Hq={hq} Hkv={hkv} "
                f"D={d} {'causal' if causal else 'full'} window={window} "
                f"deterministic={deterministic} sinks")
        oq, ok = _offsets(q_lens), _offsets(k_lens)
        scale = d ** -0.5

        def reference(rows, keys, as_type):
            ls = [t[s].to(as_type).requires_grad_()
                  for t, s in ((q, rows), (k, keys), (v, keys))]
            ls.append(sinks.to(as_type).requires_grad_())
            o = sequence_attention_grad(*ls[:3], scale, causal, window,
                                        sinks=ls[3])
            o.backward(grad[rows].to(as_type))
            _, want_lse = sequence_attention(*(t.detach() for t in ls[:3]),
                                             scale, causal, window,
                                             sinks=ls[3].detach())
            return o.detach(), want_lse, [
                t.grad if t.grad is not None else torch.zeros_like(t)
                for t in ls]

        sink_sums = [torch.zeros(hq, dtype=torch.float64, device="cuda"),
                     torch.zeros(hq, dtype=torch.float64, device="cuda")]

        def check(label, g, want, theirs):
            if want.numel() == 0:
                return
            self.assertFalse(torch.isnan(g).any().item(),
                             f"{name}: NaN in {label}")
            err = (g.double() - want.double()).abs().max().item()
            torch_err = (theirs.double() - want.double()).abs().max().item()
            floor = 1e-5 * max(1.0, want.abs().max().item())
            self.assertLessEqual(err, 2 * torch_err + floor,
                                 f"{name}: {label}")

        for b in range(len(q_lens)):
            rows = slice(oq[b], oq[b + 1])
            keys = slice(ok[b], ok[b + 1])
            exact_o, exact_lse, exact = reference(rows, keys, torch.float64)
            own_o, _, own = reference(rows, keys, dtype)
            check(f"O of sequence {b}", out[rows], exact_o, own_o)
            if oq[b + 1] > oq[b]:
                # Rows without keys too: their LSE is the sink's.
                lse_err = (lse[:, rows].double() - exact_lse).abs().max()
                self.assertLessEqual(lse_err.item(), 1e-3,
                                     f"{name}: LSE of sequence {b}")
            for label, g, want, theirs in zip(
                    ("dQ", "dK", "dV"), (got[0][rows], got[1][keys],
                                         got[2][keys]), exact, own):
                check(f"{label} of sequence {b}", g, want, theirs)
            sink_sums[0] += exact[3]
            sink_sums[1] += own[3].double()
        check("dSinks", got[3], sink_sums[0], sink_sums[1])

    def test_sinks(self):
        lens_q = [300, 0, 1, 129, 64]
        lens_k = [300, 7, 0, 129, 200]
        for dtype in (torch.float16, torch.bfloat16):
            for causal in (False, True):
                with self.subTest(dtype=dtype, causal=causal):
                    self.run_sinks(dtype, lens_q, lens_k, 4, 2, 64, causal)
        self.run_sinks(torch.bfloat16, lens_q, lens_q, 4, 4, 128, True,
                       window=(48, 0))
        self.run_sinks(torch.bfloat16, lens_q, lens_k, 4, 2, 64, True,
                       deterministic=True)
        with self.assertRaisesRegex(ValueError, r"sinks must be \[Hq\]"):
            q = torch.randn(5, 4, 64, device="cuda", dtype=torch.float16)
            cu = torch.tensor([0, 5], dtype=torch.int32, device="cuda")
            fa.flash_attn_varlen_func(q, q, q, cu, cu, 5, 5,
                                      s_aux=torch.zeros(3, device="cuda"))

    def test_op_and_compile(self):
        lens = [5, 0, 70]
        cu = torch.tensor(_offsets(lens), dtype=torch.int32, device="cuda")
        q = torch.randn(75, 4, 64, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(75, 2, 64, device="cuda", dtype=torch.bfloat16)
        torch.library.opcheck(
            torch.ops.fa.varlen_attention_forward,
            (q, k, k, cu, cu, 70, 70, True, 0.125, "", ""))
        eager = fa.flash_attn_varlen_func(q, k, k, cu, cu, 70, 70,
                                          causal=True)
        compiled = torch.compile(
            lambda *a: fa.flash_attn_varlen_func(*a, causal=True),
            fullgraph=True)(q, k, k, cu, cu, 70, 70)
        self.assertTrue(torch.equal(eager, compiled))
        # The backward op, and autograd through the forward op.
        o, lse = torch.ops.fa.varlen_attention_forward(
            q, k, k, cu, cu, 70, 70, True, 0.125, "", "")
        torch.library.opcheck(
            torch.ops.fa.varlen_attention_backward,
            (torch.randn_like(q), q, k, k, o, lse, cu, cu, 70, 70, True,
             0.125, "", ""))
        leaves = [t.clone().requires_grad_() for t in (q, k, k)]
        torch.library.opcheck(
            torch.ops.fa.varlen_attention_forward,
            (*leaves, cu, cu, 70, 70, True, 0.125, "", ""),
            test_utils=("test_schema", "test_autograd_registration",
                        "test_faketensor"))

        def step(*a):
            out = fa.flash_attn_varlen_func(*a, cu, cu, 70, 70, causal=True)
            return torch.autograd.grad(out.float().sum(), a)
        eager_grads = step(*leaves)
        compiled_grads = torch.compile(step)(*leaves)
        for e, c in zip(eager_grads, compiled_grads):
            self.assertTrue(torch.allclose(e.float(), c.float(), atol=1e-3,
                                           rtol=0))


@unittest.skipUnless(HAVE_CUDA, "needs torch with CUDA")
class GpuTransformersTest(unittest.TestCase):
    """The transformers backend with padding masks: batched greedy
    generation of prompts of different lengths (left padding, a KV cache)
    gives the tokens of generating each prompt alone."""

    def test_batched_generation_matches_one_by_one(self):
        try:
            from transformers import LlamaConfig, LlamaForCausalLM
        except ImportError:
            self.skipTest("transformers is not installed")
        fa.register_transformers()
        config = LlamaConfig(vocab_size=256, hidden_size=256,
                             intermediate_size=512, num_hidden_layers=2,
                             num_attention_heads=8, num_key_value_heads=2,
                             max_position_embeddings=256,
                             attn_implementation="fa", pad_token_id=0)
        torch.manual_seed(0)
        model = LlamaForCausalLM(config).to(device="cuda",
                                            dtype=torch.float32).eval()
        rng = random.Random(3)
        prompts = [[rng.randint(1, 255) for _ in range(n)]
                   for n in (5, 17, 1, 40)]
        longest = max(len(p) for p in prompts)
        ids = torch.zeros(len(prompts), longest, dtype=torch.long,
                          device="cuda")
        mask = torch.zeros_like(ids)
        for b, p in enumerate(prompts):  # left padding
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
                                 f"prompt {b} ({len(p)} tokens)")
            # The padded forward's logits at the real positions equal
            # SDPA's (its own padding mask) within float32 rounding.
            ours = model(input_ids=ids, attention_mask=mask).logits
            if hasattr(model, "set_attn_implementation"):
                model.set_attn_implementation("sdpa")
            else:
                model.config._attn_implementation = "sdpa"
            theirs = model(input_ids=ids, attention_mask=mask).logits
        real = mask.bool()
        self.assertLess((ours[real] - theirs[real]).abs().max().item(), 1e-3)

    def test_padded_training_step_matches_sdpa(self):
        try:
            from transformers import LlamaConfig, LlamaForCausalLM
        except ImportError:
            self.skipTest("transformers is not installed")
        fa.register_transformers()
        config = LlamaConfig(vocab_size=128, hidden_size=128,
                             intermediate_size=256, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=128,
                             attn_implementation="fa", pad_token_id=0)
        torch.manual_seed(1)
        model = LlamaForCausalLM(config).to(device="cuda",
                                            dtype=torch.float32)
        lengths = (9, 33, 2, 20)
        longest = max(lengths)
        ids = torch.zeros(len(lengths), longest, dtype=torch.long,
                          device="cuda")
        mask = torch.zeros_like(ids)
        for b, n in enumerate(lengths):  # right padding, as training packs
            ids[b, :n] = torch.randint(1, 128, (n,))
            mask[b, :n] = 1
        labels = ids.masked_fill(mask == 0, -100)

        def gradients(implementation):
            if hasattr(model, "set_attn_implementation"):
                model.set_attn_implementation(implementation)
            else:
                model.config._attn_implementation = implementation
            model.zero_grad()
            loss = model(input_ids=ids, attention_mask=mask,
                         labels=labels).loss
            loss.backward()
            return loss.item(), {n: p.grad.clone()
                                 for n, p in model.named_parameters()}

        loss, ours = gradients("fa")
        sdpa_loss, theirs = gradients("sdpa")
        self.assertAlmostEqual(loss, sdpa_loss, places=4)
        for name, g in ours.items():
            scale = max(1.0, theirs[name].abs().max().item())
            self.assertLess((g - theirs[name]).abs().max().item(),
                            1e-3 * scale, name)


if __name__ == "__main__":
    unittest.main()
