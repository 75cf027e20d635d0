"""Decode tiles x split-KV parts: the device time of fa's kernels (split
and combine, torch.profiler, L2 flushed before each call) for each tile
config and number of parts on one-token decode shapes, with SDPA's
FlashAttention-2 and cuDNN backends and a streaming read of the same bytes
beside them. This is the sweep behind the mma decode tiles
(lib/Strategy/MmaModel.cpp, decodeTiles) and the parts heuristic
(lib/SplitKv.cpp).

    python3 bench/sweep_decode.py [--configs 32x32x2x2,32x128x2x2]
        [--splits 0,8,16,32,64,128] [--shapes 1:8192,8:8192]

A config is block_m x block_n x num_warps x stages (mma); a split count of
0 is the runtime's choice. A shape is B:context (32 query heads, 8 K/V
heads, D 128, bf16, q [B, 32, 1, 128], K/V [B, 8, context, 128]: the
runtime packs each K/V head's 4 query heads into 4 rows). Calls the C ABI
with fa's own helpers, as fa.attention does, plus the parts.
"""

import argparse
import ctypes
import math
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import fa  # noqa: E402
from bench_decode import device_times  # noqa: E402


def kernel_us(fn, flush, calls=10):
    """(split, combine, other) device microseconds per call."""
    split = combine = other = 0.0
    for name, us in device_times(fn, calls, flush).items():
        if not name.startswith("fa_"):
            other += us
        elif name.endswith("_combine"):
            combine += us
        else:
            split += us
    return split, combine, other


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", default="16x32x1x2,16x64x1x2,32x32x2x2,"
                        "32x64x2x2,32x32x2x3,32x64x2x3,32x128x2x2,64x32x4x2")
    parser.add_argument("--splits", default="0,8,16,32,64,128")
    parser.add_argument("--shapes", default="1:8192,1:32768,8:8192,8:32768")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    configs = [tuple(int(x) for x in c.split("x"))
               for c in args.configs.split(",")]
    splits = [int(x) for x in args.splits.split(",")]
    shapes = [tuple(int(x) for x in s.split(":"))
              for s in args.shapes.split(",")]
    lib = fa._library()
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for batch, context in shapes:
        torch.manual_seed(0)
        q = torch.randn(batch, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(batch, 8, context, 128, device="cuda",
                        dtype=torch.bfloat16)
        v = torch.randn_like(k)
        o = torch.empty_like(q)
        lse = torch.empty(batch, 32, 1, device="cuda", dtype=torch.float32)
        nbytes = 2 * batch * context * 8 * 128 * 2
        runtime = fa._runtime(0)
        described = [fa._describe(t) for t in (q, k, v, o, lse)]
        rows = []
        for block_m, block_n, warps, stages in configs:
            config = fa._config(block_m, block_n, warps, stages, "mma")
            for parts in splits:
                extras = fa._extras(kv_splits=parts)

                def call():
                    fa._check(lib.fa_attention_forward_ex(
                        runtime, *(ctypes.byref(t) for t in described),
                        ctypes.byref(extras), fa._dtype_code(q), 0,
                        1 / math.sqrt(128), config, 0))
                name = f"{block_m}x{block_n}w{warps}s{stages}"
                try:
                    split, combine, _ = kernel_us(call, flush)
                except fa.FaError as error:
                    print(f"  {name} parts={parts}: {error}")
                    continue
                rows.append((split + combine, split, combine, name, parts))
        rows.sort()
        peers = {}
        for peer, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                              ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            with sdpa_kernel(backend):
                peers[peer] = sum(kernel_us(
                    lambda: torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, enable_gqa=True), flush))
        buffer = torch.empty(nbytes // 2, device="cuda",
                             dtype=torch.bfloat16).normal_()
        read = sum(kernel_us(lambda: torch.sum(buffer, dtype=torch.float32),
                             flush))
        del buffer
        print(f"B={batch} ctx={context}: {nbytes / 1e6:.0f} MB; read "
              f"{read:.1f} us; flash {peers['flash']:.1f} us; cudnn "
              f"{peers['cudnn']:.1f} us")
        for total, split, combine, name, parts in rows[:args.top]:
            print(f"  {name:14s} parts={parts:3d}: {total:7.1f} us (split "
                  f"{split:6.1f} + combine {combine:5.1f}) = "
                  f"{read / total:.2f} of the read")


if __name__ == "__main__":
    main()
