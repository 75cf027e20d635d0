"""The lecture's B_r x B_c sweep for the SIMT kernel (D = 128, fp32):
time, registers and spills per config, one row per (B_r, B_c), with one
thread per tile row and B_c / (threads per row) columns each.

    python3 bench/sweep_tiles.py [--seq 4096]
    python3 bench/sweep_tiles.py --configs 64x128w8,32x64w4   # B_r x B_c w warps
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import fa  # noqa: E402
from bench_attention import do_bench, tflops  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--configs", default="",
                        help="comma-separated B_rxB_cwWARPS, e.g. 64x128w8")
    args = parser.parse_args()
    d, s = args.head_dim, args.seq
    h, b = 2048 // d, 16384 // s
    q, k, v = (torch.randn(b, h, s, d, device="cuda") for _ in range(3))
    print(f"D={d} S={s} B={b} H={h} fp32, non-causal")
    print(f"{'B_r':>4} {'B_c':>4} {'warps':>5} | {'regs':>4} {'spill':>6} "
          f"{'smem':>7} | {'ms':>8} {'TFLOP/s':>8}")
    if args.configs:
        configs = []
        for c in args.configs.split(","):
            tiles, warps = c.split("w")
            br, bc = tiles.split("x")
            configs.append((int(br), int(bc), int(warps)))
    else:  # one thread per tile row
        configs = [(br, bc, max(1, min(32, br * min(32, bc) // 32)))
                   for br in (4, 8, 16, 32, 64) for bc in (16, 32, 64)]
    for br, bc, warps in configs:
        try:
            info = fa.prepare_kernel(d, block_m=br, block_n=bc, num_warps=warps)
        except fa.FaError as error:  # e.g. over the shared-memory limit
            print(f"{br:>4} {bc:>4} {warps:>5} | {error}", flush=True)
            continue
        fn = lambda: fa.attention(q, k, v, block_m=br, block_n=bc,  # noqa: E731
                                  num_warps=warps)
        fn()
        ms = do_bench(fn)
        print(f"{br:>4} {bc:>4} {warps:>5} | {info['registers']:>4} "
              f"{info['spill_store_bytes']:>6} "
              f"{info['shared_memory_bytes']:>7} | {ms:8.3f} "
              f"{tflops(b, h, s, d, False, ms):8.2f}", flush=True)


if __name__ == "__main__":
    main()
