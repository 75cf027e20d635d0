"""KV caches: fa.flash_attn_with_kvcache (flash-attn's convention: q [B,
Sq, Hq, D], k_cache and v_cache [B, S_cache, Hkv, D], int32 cache_seqlens
[B], new keys and values appended in place).

Without a GPU: the kernels that take a cache's filled lengths compile
through the C ABI (fa.prepare_kernel with kv_lens=True) and are kernels of
their own; the backward refuses them by name. With a
GPU: decoding (Sq = 1) and chunked prefill (Sq > 1) with lengths 0, 1, a
tail and a full cache, GQA, causal and not, a window and softcapping, the
new tokens appended, the cache past the lengths holding NaN (never read
into a result); each batch entry against the float64 reference of its
filled keys, with FlashAttention's criterion; split-KV (1..128 parts, parts
without keys, the runtime's choice); the lengths' checks; the custom op
(opcheck) and torch.compile.
Run: python3 python/tests/test_kvcache.py (needs the built
libfa_runtime.so; ctest runs it with FA_RUNTIME_LIB set).
"""

import os
import sys
import tempfile
import unittest

_CACHE = tempfile.TemporaryDirectory(prefix="fa-kvcache-test-")
os.environ["FA_CACHE_DIR"] = _CACHE.name

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fa  # noqa: E402
from sequence_reference import (sequence_attention,  # noqa: E402
                                softcap_error)

try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    torch = None
    HAVE_CUDA = False


class CompileTest(unittest.TestCase):
    """The kv_lens kernels through the compile-only path (no GPU)."""

    def test_kernels_compile(self):
        for kwargs, head_dim in (({"dtype": "float32"}, 64),
                                 ({"dtype": "float16", "causal": True}, 128),
                                 ({"dtype": "bfloat16", "varlen": True}, 64)):
            with self.subTest(kwargs=sorted(kwargs), head_dim=head_dim):
                info = fa.prepare_kernel(head_dim, kv_lens=True, **kwargs)
                self.assertIn("_kvlens", info["name"])
                self.assertEqual(info["spill_store_bytes"], 0)
        plain = fa.prepare_kernel(64, dtype="float16")
        cached = fa.prepare_kernel(64, dtype="float16", kv_lens=True)
        self.assertNotEqual(plain["key"], cached["key"])

    def test_refusals(self):
        with self.assertRaisesRegex(fa.FaError, "backward does not take "
                                    "kv_lens"):
            fa.prepare_kernel(64, dtype="float16", kv_lens=True,
                              backward=True)


@unittest.skipUnless(HAVE_CUDA, "needs torch with CUDA")
class GpuKvCacheTest(unittest.TestCase):
    """flash_attn_with_kvcache against each entry's filled keys."""

    def run_cache(self, dtype, lengths, q_len, new, hq, hkv, d, causal,
                  capacity=300, window=(-1, -1), softcap=0.0, seed=0,
                  num_splits=0, page=0, strategy="auto", sinks=False):
        torch.manual_seed(seed)
        batch = len(lengths)
        q = torch.randn(batch, q_len, hq, d, device="cuda", dtype=dtype)
        k_cache = torch.full((batch, capacity, hkv, d), float("nan"),
                             device="cuda", dtype=dtype)
        v_cache = torch.full_like(k_cache, float("nan"))
        for b, n in enumerate(lengths):
            k_cache[b, :n] = torch.randn(n, hkv, d, device="cuda",
                                         dtype=dtype)
            v_cache[b, :n] = torch.randn(n, hkv, d, device="cuda",
                                         dtype=dtype)
        k = v = None
        if new:
            k = torch.randn(batch, new, hkv, d, device="cuda", dtype=dtype)
            v = torch.randn(batch, new, hkv, d, device="cuda", dtype=dtype)
        seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
        # gpt-oss's sinks: one logit per query head (in the model's dtype:
        # the call converts), some above every score, some far below.
        s_aux = None
        if sinks:
            s_aux = (torch.randn(hq, device="cuda") * 3).to(dtype)
        # A paged cache: the entries' pages in a shuffled pool with spare
        # pages of NaN; the logical cache is read back through the table.
        table = None
        k_pool, v_pool = k_cache, v_cache
        if page:
            assert capacity % page == 0
            per_entry = capacity // page
            count = batch * per_entry + 3
            table = torch.randperm(count, device="cuda")[:batch * per_entry]
            table = table.view(batch, per_entry).to(torch.int32)
            k_pool = torch.full((count, page, hkv, d), float("nan"),
                                device="cuda", dtype=dtype)
            v_pool = torch.full_like(k_pool, float("nan"))
            k_pool[table.long()] = k_cache.view(batch, per_entry, page, hkv, d)
            v_pool[table.long()] = v_cache.view(batch, per_entry, page, hkv, d)
        out, lse = fa.flash_attn_with_kvcache(
            q, k_pool, v_pool, k, v, cache_seqlens=seqlens, block_table=table,
            causal=causal,
            window_size=window, softcap=softcap, num_splits=num_splits,
            return_softmax_lse=True, strategy=strategy, s_aux=s_aux)
        self.assertEqual(out.shape, q.shape)
        self.assertEqual(lse.shape, (batch, hq, q_len))
        name = (f"{dtype} lengths={lengths} Sq={q_len} new={new} Hq={hq} "
                f"Hkv={hkv} D={d} {'causal' if causal else 'full'} "
                f"window={window} softcap={softcap} splits={num_splits} "
                f"page={page} strategy={strategy} sinks={sinks}")
        if page:  # the logical cache, appended tokens included
            k_cache = k_pool[table.long()].view(batch, capacity, hkv, d)
            v_cache = v_pool[table.long()].view(batch, capacity, hkv, d)
        scale = d ** -0.5
        for b, n in enumerate(lengths):
            if new:  # appended in place, the rest of the cache untouched
                self.assertTrue(torch.equal(k_cache[b, n:n + new], k[b]),
                                f"{name}: k appended to entry {b}")
                self.assertTrue(torch.equal(v_cache[b, n:n + new], v[b]),
                                f"{name}: v appended to entry {b}")
            used = n + new
            keys = slice(0, used)
            exact, exact_lse = sequence_attention(
                q[b].double(), k_cache[b, keys].double(),
                v_cache[b, keys].double(), scale, causal, window, softcap,
                None if s_aux is None else s_aux.double())
            own, _ = sequence_attention(q[b], k_cache[b, keys],
                                        v_cache[b, keys], scale, causal,
                                        window, softcap,
                                        None if s_aux is None
                                        else s_aux.float())
            got = out[b].double()
            self.assertFalse(torch.isnan(got).any().item(),
                             f"{name}: NaN in entry {b}")
            err = (got - exact).abs().max().item()
            own_err = (own.double() - exact).abs().max().item()
            self.assertLessEqual(err, 2 * own_err + 1e-5,
                                 f"{name}: O of entry {b}")
            # The LSE too (the split-KV merge computes it from the parts'):
            # rows without keys -inf on both sides, else within f32's error.
            got_lse = lse[b].double()
            finite = torch.isfinite(exact_lse)
            self.assertTrue(torch.equal(finite, torch.isfinite(got_lse)),
                            f"{name}: LSE rows without keys of entry {b}")
            if finite.any():
                lse_err = (got_lse[finite] - exact_lse[finite]).abs().max()
                self.assertLessEqual(lse_err.item(),
                                     1e-3 + softcap_error(softcap, dtype),
                                     f"{name}: LSE of entry {b}")

    def test_decode(self):
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            for causal in (False, True):
                with self.subTest(dtype=dtype, causal=causal):
                    self.run_cache(dtype, [0, 1, 37, 299], 1, 1, 8, 2, 128,
                                   causal)
                    self.run_cache(dtype, [5, 0, 300, 129], 1, 0, 4, 4, 64,
                                   causal)

    def test_chunked_prefill(self):
        for causal in (False, True):
            with self.subTest(causal=causal):
                self.run_cache(torch.bfloat16, [0, 17, 200, 250], 7, 7, 8, 2,
                               128, causal)
                self.run_cache(torch.float16, [3, 90], 40, 0, 4, 1, 64,
                               causal)

    def test_variants(self):
        self.run_cache(torch.bfloat16, [0, 64, 200], 4, 4, 4, 2, 64, True,
                       window=(32, 0))
        self.run_cache(torch.float16, [1, 100, 250], 1, 1, 4, 2, 128, False,
                       softcap=5.0)

    def test_splits(self):
        # Split-KV: parts 1..32 of 300 keys (64-key tiles: most parts of a
        # 32-way split see no key), lengths 0 and 1, GQA, causal decode and
        # a few query rows, a window; and the runtime's choice on a long
        # cache (B = 1: few programs, so it splits).
        for splits in (1, 2, 3, 5, 32):
            with self.subTest(splits=splits):
                self.run_cache(torch.bfloat16, [0, 1, 37, 299], 1, 1, 8, 2,
                               128, True, num_splits=splits)
                self.run_cache(torch.float16, [5, 0, 300, 129], 3, 0, 4, 4,
                               64, False, num_splits=splits)
        self.run_cache(torch.float32, [0, 100, 250], 2, 1, 4, 2, 64, True,
                       num_splits=4)
        self.run_cache(torch.bfloat16, [0, 64, 200], 4, 4, 4, 2, 64, True,
                       window=(32, 0), num_splits=3)
        self.run_cache(torch.bfloat16, [9000], 1, 1, 32, 8, 128, True,
                       capacity=9001)
        self.run_cache(torch.float16, [8191, 0], 1, 1, 8, 1, 64, False,
                       capacity=8192, num_splits=128)

    def test_sinks(self):
        # gpt-oss's decode and chunked prefill from a cache: the sinks join
        # every row's denominator (an entry without keys: O = 0, LSE = the
        # sink), split or not (the sinks join the merged parts), paged
        # (whole and gathered pages), GQA, causal and not, every dtype; and
        # wgmma's chunked prefill by name (paged and split).
        for splits in (0, 1, 3):
            with self.subTest(splits=splits):
                self.run_cache(torch.bfloat16, [0, 1, 37, 299], 1, 1, 8, 2,
                               128, True, num_splits=splits, sinks=True)
                self.run_cache(torch.float16, [5, 0, 300, 129], 3, 0, 4, 4,
                               64, False, num_splits=splits, sinks=True)
                self.run_cache(torch.bfloat16, [0, 17, 200, 250], 7, 7, 8, 2,
                               128, True, num_splits=splits, sinks=True,
                               window=(40, 0))
        for page, capacity in ((1, 160), (16, 304), (64, 320)):
            with self.subTest(page=page):
                self.run_cache(torch.bfloat16, [0, 1, 37, capacity - 2], 1, 2,
                               8, 2, 128, True, capacity=capacity, page=page,
                               sinks=True)
                self.run_cache(torch.float16, [15, 0, capacity, 129], 3, 0,
                               4, 4, 64, False, capacity=capacity, page=page,
                               num_splits=3, sinks=True)
        self.run_cache(torch.float32, [0, 100, 250], 2, 1, 4, 2, 64, True,
                       num_splits=4, sinks=True)
        if torch.cuda.get_device_capability() == (9, 0):
            for page in (0, 64):
                with self.subTest(page=page, strategy="wgmma"):
                    self.run_cache(torch.bfloat16, [0, 1, 150, 280], 40, 40,
                                   8, 2, 128, True, capacity=320,
                                   num_splits=3, page=page, strategy="wgmma",
                                   sinks=True)
        # A wrong count is named against the caller's q ([B, Sq, Hq, D]).
        q = torch.randn(2, 1, 8, 64, device="cuda", dtype=torch.float16)
        cache = torch.randn(2, 64, 2, 64, device="cuda", dtype=torch.float16)
        with self.assertRaisesRegex(
                ValueError, r"sinks must be \[Hq\] = \[8\] \(one logit per "
                r"query head, q's dimension 2\), got \[2\]"):
            fa.flash_attn_with_kvcache(q, cache, cache,
                                       cache_seqlens=torch.tensor(
                                           [5, 9], dtype=torch.int32,
                                           device="cuda"),
                                       s_aux=torch.zeros(2, device="cuda"))

    def test_cuda_graph(self):
        # A decode step captured in a CUDA graph, as serving stacks replay
        # one per step: a replay on new queries and lengths gives the eager
        # call's result bit for bit, split (the parts' workspace allocated
        # in stream order inside the graph) or not.
        torch.manual_seed(0)
        for splits in (0, 1):
            with self.subTest(splits=splits):
                q = torch.randn(2, 1, 8, 128, device="cuda",
                                dtype=torch.bfloat16)
                k_cache = torch.randn(2, 4096, 2, 128, device="cuda",
                                      dtype=torch.bfloat16)
                v_cache = torch.randn_like(k_cache)
                lens = torch.tensor([4000, 1000], dtype=torch.int32,
                                    device="cuda")

                def step():
                    return fa.flash_attn_with_kvcache(
                        q, k_cache, v_cache, cache_seqlens=lens,
                        num_splits=splits, check_lengths=False)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):  # compiled outside the graph
                    step()
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    out = step()
                q.copy_(torch.randn_like(q))
                lens.copy_(torch.tensor([17, 4096], dtype=torch.int32))
                graph.replay()
                torch.cuda.synchronize()
                self.assertTrue(torch.equal(out, step()))
                self.assertFalse(torch.isnan(out).any().item())

    def test_paged(self):
        # Pages of 1, 3, 16, 24, 64, 256 in a shuffled pool (spare pages of
        # NaN): decode and a few query rows, appended tokens crossing a
        # page, GQA, causal, split and not. Pages of 1, 3 and 24 hold no
        # whole K/V tile: their rows are gathered.
        for page, capacity in ((1, 160), (3, 150), (16, 304), (24, 312),
                               (64, 320), (256, 512)):
            for splits in (0, 1, 3):
                with self.subTest(page=page, splits=splits):
                    self.run_cache(torch.bfloat16, [0, 1, 37, capacity - 2],
                                   1, 2, 8, 2, 128, True, capacity=capacity,
                                   num_splits=splits, page=page)
                    self.run_cache(torch.float16, [15, 0, capacity, 129], 3,
                                   0, 4, 4, 64, False, capacity=capacity,
                                   num_splits=splits, page=page)
        for page in (5, 64):  # simt: gathered and whole pages
            self.run_cache(torch.float32, [0, 100, 250], 2, 1, 4, 2, 64, True,
                           capacity=260 if page == 5 else 256, page=page)

    def test_paged_and_split_prefill_on_wgmma(self):
        # A chunked prefill on wgmma (sm_90a, by name) from a paged cache
        # (each 64-key tile lies in one page, read by TMA boxes at the page
        # the producer looks up; the rest of a page past the entry's keys
        # and the pool's spare pages hold NaN), with the keys split in 1 or
        # 3 parts (the producer walks the part's tiles), and split without
        # pages. Pages of 64, 128, 256; GQA; empty, short and full entries;
        # appended tokens crossing pages.
        if torch.cuda.get_device_capability() != (9, 0):
            self.skipTest("wgmma needs sm_90a")
        for page, capacity in ((64, 320), (128, 384), (256, 512), (0, 300)):
            for splits in (1, 3):
                with self.subTest(page=page, splits=splits):
                    self.run_cache(torch.bfloat16, [0, 1, 150, capacity - 40],
                                   40, 40, 8, 2, 128, True, capacity=capacity,
                                   num_splits=splits, page=page,
                                   strategy="wgmma")
                    self.run_cache(torch.float16, [15, 0, capacity - 129, 129],
                                   129, 0, 4, 4, 64, False, capacity=capacity,
                                   num_splits=splits, page=page,
                                   strategy="wgmma")

    def test_cache_batch_idx(self):
        # Three queries' entries read (and append to) entries 4, 0 and 2 of
        # a five-entry cache; the other entries and the cache past the
        # lengths hold NaN; decode (split and not) and a chunked prefill of
        # 40 rows (on sm_90a the wgmma kernel, whose TMA boxes take the
        # cache entry as their batch coordinate).
        for rows, new, splits in ((1, 2, 1), (1, 2, 3), (40, 40, 1)):
            self.run_cache_batch_idx(rows, new, splits)

    def run_cache_batch_idx(self, rows, new, splits):
        torch.manual_seed(3)
        dtype, hq, hkv, d, capacity = torch.bfloat16, 8, 2, 128, 200
        index = [4, 0, 2]
        lengths = [150, 0, 37]
        cache_k = torch.full((5, capacity, hkv, d), float("nan"),
                             device="cuda", dtype=dtype)
        cache_v = torch.full_like(cache_k, float("nan"))
        for b, n in zip(index, lengths):
            cache_k[b, :n] = torch.randn(n, hkv, d, device="cuda", dtype=dtype)
            cache_v[b, :n] = torch.randn(n, hkv, d, device="cuda", dtype=dtype)
        q = torch.randn(3, rows, hq, d, device="cuda", dtype=dtype)
        k = torch.randn(3, new, hkv, d, device="cuda", dtype=dtype)
        v = torch.randn_like(k)
        idx = torch.tensor(index, dtype=torch.int32, device="cuda")
        seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
        ks, vs = cache_k.clone(), cache_v.clone()
        out = fa.flash_attn_with_kvcache(
            q, ks, vs, k, v, cache_seqlens=seqlens, cache_batch_idx=idx,
            causal=True, num_splits=splits)
        for b, (entry, n) in enumerate(zip(index, lengths)):
            self.assertTrue(torch.equal(ks[entry, n:n + new], k[b]),
                            f"k appended to cache entry {entry}")
            keys = slice(0, n + new)
            exact, _ = sequence_attention(
                q[b].double(), ks[entry, keys].double(),
                vs[entry, keys].double(), d ** -0.5, True)
            own, _ = sequence_attention(q[b], ks[entry, keys],
                                        vs[entry, keys], d ** -0.5, True)
            err = (out[b].double() - exact).abs().max().item()
            own_err = (own.double() - exact).abs().max().item()
            self.assertLessEqual(err, 2 * own_err + 1e-5,
                                 f"entry {b} (cache {entry}) rows "
                                 f"{rows} splits {splits}")

    def test_bad_pages_are_named(self):
        q = torch.randn(2, 1, 4, 64, device="cuda", dtype=torch.float16)
        pool = torch.zeros(5, 16, 2, 64, device="cuda", dtype=torch.float16)
        table = torch.tensor([[0, 1], [2, 7]], dtype=torch.int32,
                             device="cuda")
        with self.assertRaisesRegex(ValueError, r"block_table\[1\] names "
                                    "page 7; the cache holds pages 0 .. 4"):
            fa.flash_attn_with_kvcache(q, pool, pool, cache_seqlens=20,
                                       block_table=table)
        with self.assertRaisesRegex(TypeError, "block_table must be an int32"):
            fa.flash_attn_with_kvcache(q, pool, pool, cache_seqlens=3,
                                       block_table=table.long())
        empty = torch.zeros(5, 0, 2, 64, device="cuda", dtype=torch.float16)
        with self.assertRaisesRegex(ValueError, "page size 0"):
            fa.flash_attn_with_kvcache(q, empty, empty, cache_seqlens=0,
                                       block_table=table)
        with self.assertRaisesRegex(ValueError, "the cache holds 32"):
            fa.flash_attn_with_kvcache(q, pool, pool, cache_seqlens=33,
                                       block_table=table[:, :1].repeat(1, 2))

    def test_bad_lengths_are_named(self):
        q = torch.randn(2, 1, 4, 64, device="cuda", dtype=torch.float16)
        cache = torch.zeros(2, 16, 2, 64, device="cuda", dtype=torch.float16)
        new = torch.zeros(2, 1, 2, 64, device="cuda", dtype=torch.float16)
        lengths = torch.tensor([3, 16], dtype=torch.int32, device="cuda")
        with self.assertRaisesRegex(ValueError, "entry 1 holds 16 keys and "
                                    "appends 1; the cache holds 16"):
            fa.flash_attn_with_kvcache(q, cache, cache.clone(), new, new,
                                       cache_seqlens=lengths)
        with self.assertRaisesRegex(TypeError, "int32 tensor"):
            fa.flash_attn_with_kvcache(q, cache, cache,
                                       cache_seqlens=lengths.long())
        for splits in (-1, 129):
            with self.assertRaisesRegex(ValueError, f"num_splits = {splits}: "
                                        "it must be 0"):
                fa.flash_attn_with_kvcache(q, cache, cache, cache_seqlens=3,
                                           num_splits=splits)
        with self.assertRaisesRegex(ValueError, r"cache_batch_idx\[1\] is 2; "
                                    "the cache holds entries 0 .. 1"):
            fa.flash_attn_with_kvcache(
                q, cache, cache, cache_seqlens=3,
                cache_batch_idx=torch.tensor([0, 2], dtype=torch.int32,
                                             device="cuda"))
        with self.assertRaisesRegex(ValueError, "give k and v together"):
            fa.flash_attn_with_kvcache(q, cache, cache, new, None,
                                       cache_seqlens=3)
        with self.assertRaisesRegex(ValueError, "k must be \\[B, S_new"):
            fa.flash_attn_with_kvcache(q, cache, cache, new[:1], new,
                                       cache_seqlens=3)
        with self.assertRaisesRegex(ValueError, "q has 1 batch entries, the "
                                    "cache 2"):
            fa.flash_attn_with_kvcache(q[:1], cache, cache, cache_seqlens=3)
        # Lengths past the cache, unchecked: clamped to the cache.
        big = torch.tensor([99, 16], dtype=torch.int32, device="cuda")
        clamped = fa.flash_attn_with_kvcache(q, cache, cache,
                                             cache_seqlens=big,
                                             check_lengths=False)
        full = fa.flash_attn_with_kvcache(q, cache, cache, cache_seqlens=16)
        self.assertTrue(torch.equal(clamped, full))

    def test_op_and_compile(self):
        q = torch.randn(3, 2, 4, 64, device="cuda", dtype=torch.bfloat16)
        cache = torch.randn(3, 50, 2, 64, device="cuda", dtype=torch.bfloat16)
        lens = torch.tensor([0, 7, 50], dtype=torch.int32, device="cuda")
        torch.library.opcheck(torch.ops.fa.kvcache_attention_forward,
                              (q, cache, cache, lens, True, 0.125, "", "",
                               0, None, None))
        eager = fa.flash_attn_with_kvcache(q, cache, cache,
                                           cache_seqlens=lens, causal=True)
        compiled = torch.compile(
            lambda *a: fa.flash_attn_with_kvcache(*a, causal=True,
                                                  check_lengths=False),
            fullgraph=True)(q, cache, cache, None, None, lens)
        self.assertTrue(torch.equal(eager, compiled))


if __name__ == "__main__":
    unittest.main()
