"""The ctypes binding without a GPU: kernel preparation through the C ABI
(struct layouts, dtype codes, error reporting) with the compile-only path of
the runtime. Run: python3 python/tests/test_binding.py (needs only the built
libfa_runtime.so; ctest runs it with FA_RUNTIME_LIB set).
"""

import os
import subprocess
import sys
import tempfile
import unittest

# Before the runtime is created: a private disk cache for this run.
_CACHE = tempfile.TemporaryDirectory(prefix="fa-binding-test-")
os.environ["FA_CACHE_DIR"] = _CACHE.name

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fa  # noqa: E402


class ErrorTest(unittest.TestCase):
    def test_status_is_said_once(self):
        # A message that starts with its status keeps one copy of it.
        self.assertEqual(str(fa.FaError(2, "no CUDA driver: cannot load "
                                           "libcuda.so.1")),
                         "fa: no CUDA driver: cannot load libcuda.so.1")
        self.assertEqual(str(fa.FaError(2, "no CUDA driver")),
                         "fa: no CUDA driver")
        self.assertEqual(str(fa.FaError(1, "head-dim must be in [1, 512]")),
                         "fa: invalid argument: head-dim must be in [1, 512]")


class PrepareKernelTest(unittest.TestCase):
    def test_dtypes(self):
        for dtype, tag in (("float32", "f32"), ("float16", "f16"),
                           ("bfloat16", "bf16")):
            info = fa.prepare_kernel(64, causal=True, dtype=dtype,
                                     block_m=64, block_n=64, num_warps=8,
                                     strategy="simt")
            self.assertEqual(info["name"], f"fa_fwd_d64_{tag}_causal_64x64_w8")
            self.assertEqual(len(info["key"]), 64)
            self.assertEqual(info["num_threads"], 256)
            self.assertGreater(info["registers"], 0)
            self.assertEqual(info["spill_store_bytes"], 0)
            # 16-bit tiles take half the shared memory of f32 ones.
            if dtype == "float32":
                f32_bytes = info["shared_memory_bytes"]
            else:
                self.assertEqual(info["shared_memory_bytes"], f32_bytes // 2)

    def test_cache_sources(self):
        first = fa.prepare_kernel(32, dtype="bfloat16")
        again = fa.prepare_kernel(32, dtype="bfloat16")
        self.assertIn(first["source"], ("compiled", "disk"))
        self.assertEqual(again["source"], "memory")
        self.assertEqual(again["key"], first["key"])
        # A compile reports where its time went; a disk read compiles nothing.
        stages = first["compile_stages"]
        if first["source"] == "compiled":
            self.assertGreater(stages["lower"], 0.0)
            self.assertGreater(stages["codegen"], 0.0)
            self.assertLessEqual(sum(stages.values()), first["compile_seconds"])
        else:
            self.assertEqual(sum(stages.values()), 0.0)

    def test_assembler_is_reported(self):
        # Without FA_ASSEMBLER, ptxas where the toolkit is (as on CI).
        info = fa.prepare_kernel(64, dtype="float16", strategy="mma")
        self.assertTrue(info["assembler"].startswith(("ptxas ", "driver ")),
                        info["assembler"])

    def test_default_tiles(self):
        info = fa.prepare_kernel(128, dtype="float16")
        self.assertTrue(info["name"].startswith("fa_fwd_d128_f16_full_"),
                        info["name"])
        self.assertEqual(info["spill_store_bytes"], 0)

    def test_default_tiles_follow_the_sequence_length(self):
        # sm_90a (the arch without a GPU): wgmma at D = 64 takes two
        # consumer warpgroups up to 1k, three beyond.
        short = fa.prepare_kernel(64, dtype="float16", sequence_length=1000)
        long = fa.prepare_kernel(64, dtype="float16", sequence_length=4096)
        if not short["name"].endswith("_wgmma"):
            self.skipTest("the device's arch has no wgmma: " + short["name"])
        self.assertIn("_128x128_w8_", short["name"])
        self.assertIn("_192x128_w12_", long["name"])
        with self.assertRaisesRegex(fa.FaError, "sequence_length must be >= 0"):
            fa.prepare_kernel(64, dtype="float16", sequence_length=-1)

    def test_strategies(self):
        # 16-bit inputs default to tensor cores (sm_90a, the arch without a
        # GPU: warpgroup MMA for head dims in 64-column blocks, else
        # mma.sync), f32 to simt.
        info = fa.prepare_kernel(72, dtype="bfloat16")
        self.assertEqual(info["strategy"], "mma")
        self.assertTrue(info["name"].endswith("_mma"), info["name"])
        self.assertGreaterEqual(info["stages"], 1)
        self.assertEqual(info["num_threads"], 32 * info["num_warps"])
        self.assertEqual(fa.prepare_kernel(128, dtype="bfloat16")["strategy"],
                         "wgmma")
        self.assertEqual(fa.prepare_kernel(64)["strategy"], "simt")
        simt = fa.prepare_kernel(128, dtype="bfloat16", strategy="simt")
        self.assertEqual(simt["strategy"], "simt")
        self.assertNotEqual(simt["key"], info["key"])
        # Explicit tiles and stages reach the compiler.
        mma = fa.prepare_kernel(64, dtype="float16", block_m=64, block_n=32,
                                num_warps=4, stages=3, strategy="mma")
        self.assertEqual(mma["name"], "fa_fwd_d64_f16_full_64x32_w4_s3_mma")
        self.assertEqual((mma["block_m"], mma["block_n"], mma["num_warps"],
                          mma["stages"]), (64, 32, 4, 3))
        with self.assertRaisesRegex(ValueError, "strategy must be one of"):
            fa.prepare_kernel(64, strategy="tcgen05")
        # The names and codes come from the runtime's strategy registry.
        self.assertEqual(sorted(fa._strategies().items(), key=lambda x: x[1]),
                         [("auto", 0), ("simt", 1), ("mma", 2), ("wgmma", 3)])
        self.assertIsNone(fa._library().fa_strategy_name(4))
        self.assertIsNone(fa._library().fa_strategy_name(-1))
        # The Hopper strategy: 64 query rows per warpgroup of the placed
        # warps, plus a producer warpgroup that only copies (TMA).
        wgmma = fa.prepare_kernel(128, dtype="bfloat16", strategy="wgmma")
        self.assertEqual(wgmma["strategy"], "wgmma")
        self.assertTrue(wgmma["name"].endswith("_wgmma"))
        self.assertEqual(wgmma["block_m"], 16 * wgmma["num_warps"])
        self.assertEqual(wgmma["num_threads"], 32 * wgmma["num_warps"] + 128)
        with self.assertRaisesRegex(fa.FaError, "the wgmma strategy needs a "
                                                "head dim that is a multiple "
                                                "of 64"):
            fa.prepare_kernel(72, dtype="float16", strategy="wgmma")
        with self.assertRaisesRegex(fa.FaError, "the mma strategy computes on "
                                                "f16 or bf16 inputs, got f32"):
            fa.prepare_kernel(64, strategy="mma")

    def test_backward(self):
        # The backward's three kernels (16-bit inputs: wgmma for head dims
        # 64 and 128 on sm_90a, the arch without a GPU, else mma; simt for
        # float32), its default tiles, and the deterministic mode as another
        # kernel.
        info = fa.prepare_kernel(64, causal=True, dtype="bfloat16",
                                 backward=True)
        self.assertTrue(info["name"].startswith("fa_bwd_d64_bf16_causal_"),
                        info["name"])
        self.assertEqual(info["strategy"], "wgmma")
        self.assertEqual((info["block_m"], info["block_n"],
                          info["num_warps"]), (64, 128, 8))
        self.assertEqual(fa.prepare_kernel(72, dtype="bfloat16",
                                           backward=True)["strategy"], "mma")
        self.assertEqual(fa.prepare_kernel(64, backward=True)["strategy"],
                         "simt")
        ordered = fa.prepare_kernel(64, causal=True, dtype="bfloat16",
                                    backward=True, deterministic=True)
        self.assertIn("_det", ordered["name"])
        self.assertNotEqual(ordered["key"], info["key"])
        forward = fa.prepare_kernel(64, causal=True, dtype="bfloat16",
                                    strategy="simt")
        self.assertNotEqual(forward["key"], info["key"])
        with self.assertRaisesRegex(fa.FaError, "the wgmma backward needs a "
                                                "head dim of 64 or 128, got "
                                                "256"):
            fa.prepare_kernel(256, dtype="float16", backward=True,
                              strategy="wgmma")
        explicit = fa.prepare_kernel(64, dtype="float16", backward=True,
                                     strategy="mma", block_m=64, block_n=64,
                                     num_warps=4, stages=1)
        self.assertEqual((explicit["block_m"], explicit["block_n"],
                          explicit["num_warps"], explicit["stages"]),
                         (64, 64, 4, 1))
        with self.assertRaisesRegex(TypeError, "deterministic must be a bool"):
            fa.prepare_kernel(64, backward=True, deterministic="yes")

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "dtype must be one of"):
            fa.prepare_kernel(64, dtype="float64")
        with self.assertRaisesRegex(
                fa.FaError, r"invalid argument: head-dim must be in \[1, 512\], "
                            r"got 0"):
            fa.prepare_kernel(0)
        with self.assertRaisesRegex(fa.FaError, "compile error: .*does not "
                                                "divide the tiles"):
            fa.prepare_kernel(128, block_m=4, block_n=32, num_warps=8)


class BadArgumentsTest(unittest.TestCase):
    """Out-of-range values get the runtime's message (no crash in the
    default-tile search); Python values the C types cannot hold are refused
    before ctypes would wrap them."""

    def test_out_of_range_values_are_named(self):
        with self.assertRaisesRegex(fa.FaError, r"num-warps must be in "
                                                r"\[1, 32\], got 576460752303423488"):
            fa.prepare_kernel(64, num_warps=2**59)
        with self.assertRaisesRegex(fa.FaError, r"block-m must be in "
                                                r"\[1, 1024\], got -5"):
            fa.prepare_kernel(64, block_m=-5)
        with self.assertRaisesRegex(fa.FaError, r"stages must be in \[1, 4\] "
                                                r"for the mma strategy"):
            fa.prepare_kernel(72, dtype="float16", stages=2**40)
        with self.assertRaisesRegex(fa.FaError, r"stages must be in \[1, 4\] "
                                                r"for the wgmma strategy"):
            fa.prepare_kernel(64, dtype="float16", stages=2**40)

    def test_python_values_are_checked_before_ctypes(self):
        with self.assertRaisesRegex(TypeError, "causal must be a bool, got "
                                               "1099511627776"):
            fa.prepare_kernel(64, causal=2**40)
        with self.assertRaisesRegex(ValueError, "num_warps must fit in 64 bits"):
            fa.prepare_kernel(64, num_warps=2**70)
        with self.assertRaisesRegex(TypeError, "block_m must be an int, got 1.5"):
            fa.prepare_kernel(64, block_m=1.5)
        with self.assertRaisesRegex(TypeError, "head_dim must be an int"):
            fa.prepare_kernel(64.0)
        # 0 and 1 are fine as flags; 1.0 and 1+0j are not ints.
        self.assertIn("causal", fa.prepare_kernel(32, causal=1)["name"])
        for flag in (1.0, 1 + 0j):
            with self.assertRaisesRegex(TypeError, "causal must be a bool"):
                fa.prepare_kernel(64, causal=flag)
        # The device is a C int: no silent wrap to device 0.
        with self.assertRaisesRegex(ValueError, "device must fit in 32 bits, "
                                                "got 4294967296"):
            fa.prepare_kernel(64, device=2**32)
        # Unhashable choices get the choice's message, not a TypeError.
        with self.assertRaisesRegex(ValueError, r"dtype must be one of "
                                                r"float32, float16, bfloat16, "
                                                r"float8_e4m3fn, got \[1\]"):
            fa.prepare_kernel(64, dtype=[1])
        with self.assertRaisesRegex(ValueError, "strategy must be one of"):
            fa.prepare_kernel(64, strategy={})

    def test_scale_follows_the_attention_rule(self):
        """None is the default; NaN, negatives, 0 and values beyond float32
        are refused with KernelSpec::validate's text (which the C ABI and
        fa-compile give too), non-numbers with a TypeError."""
        rule = (r"fa.prepare_kernel: softmax scale must be positive and "
                r"finite in float32 \(None for the default "
                r"1/sqrt\(head_dim\)\), got ")
        for scale in (float("nan"), -1.0, 0, 1e39, 1e-46, 10**400,
                      float("inf")):
            with self.assertRaisesRegex(ValueError, rule):
                fa.prepare_kernel(64, scale=scale)
        for scale in ("0.5", [], True):
            with self.assertRaisesRegex(TypeError, "scale must be a number"):
                fa.prepare_kernel(64, scale=scale)
        self.assertIn("name", fa.prepare_kernel(64, scale=0.125))

    def test_runtime_library_must_exist(self):
        """FA_RUNTIME_LIB naming a missing file is an error, not a silent
        fall back to another build (a fresh interpreter: the library is
        loaded once per process)."""
        env = dict(os.environ, FA_RUNTIME_LIB="/nonexistent/libfa_runtime.so")
        run = subprocess.run(
            [sys.executable, "-c", "import fa; fa.prepare_kernel(64)"],
            env=env, capture_output=True, text=True, timeout=120,
            cwd=os.path.join(os.path.dirname(__file__), ".."))
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("FA_RUNTIME_LIB='/nonexistent/libfa_runtime.so' is not "
                      "a file", run.stderr)

    def test_flash_attn_func_checks_its_inputs(self):
        # Without torch: "needs torch"; with it: "must be a torch.Tensor".
        with self.assertRaisesRegex((ImportError, TypeError),
                                    r"fa.flash_attn_func(: q must be a "
                                    r"torch.Tensor| needs torch)"):
            fa.flash_attn_func(None, None, None)

    def test_deterministic_is_the_backwards(self):
        with self.assertRaisesRegex(fa.FaError, "deterministic applies to the "
                                                "backward"):
            fa.prepare_kernel(64, deterministic=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
