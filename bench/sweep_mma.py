"""Tile sweep of the mma (or wgmma) strategy: TFLOP/s of each (block_m, block_n, warps,
stages) config at S = 4k (FlashAttention's convention, fp16), causal and
not, next to SDPA FLASH_ATTENTION and CUDNN_ATTENTION from the same run; the
defaults of lib/Strategy/MmaModel.cpp (WgmmaModel.cpp) are ranked from these
figures.

    python3 bench/sweep_mma.py [--dims 64,128,256] [--seq 4096]
        [--strategy mma|wgmma]
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_attention import do_bench, fa, sdpa, tflops, SDPBackend  # noqa: E402

CONFIGS = {
    64: [(128, 64, 4, 2), (128, 128, 4, 2), (128, 64, 8, 2), (64, 64, 4, 2),
         (128, 64, 4, 3), (128, 32, 4, 2), (64, 128, 4, 2)],
    128: [(128, 64, 4, 2), (128, 32, 4, 2), (128, 64, 8, 2), (128, 32, 8, 2),
          (64, 64, 4, 2), (128, 64, 4, 3), (128, 128, 8, 2), (64, 32, 4, 2)],
    256: [(128, 32, 8, 2), (128, 64, 8, 2), (64, 32, 4, 2), (64, 64, 4, 2),
          (128, 32, 8, 3), (64, 32, 4, 3)],
}

WGMMA_CONFIGS = {
    64: [(192, 128, 12, 2), (192, 128, 12, 3), (192, 64, 12, 2),
         (128, 128, 8, 2), (128, 128, 8, 3)],
    128: [(128, 128, 8, 2), (128, 128, 8, 3), (128, 112, 8, 2),
          (128, 96, 8, 3), (128, 64, 8, 3)],
    256: [(128, 128, 8, 1), (128, 80, 8, 2), (128, 96, 8, 1),
          (128, 112, 8, 1), (128, 64, 8, 2)],
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dims", default="64,128,256")
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--strategy", default="mma", choices=["mma", "wgmma"])
    args = parser.parse_args()
    configs = CONFIGS if args.strategy == "mma" else WGMMA_CONFIGS
    s = args.seq
    for d in (int(x) for x in args.dims.split(",")):
        h, b = 2048 // d, max(1, 16384 // s)
        for causal in (False, True):
            q, k, v = (torch.randn(b, h, s, d, device="cuda",
                                   dtype=torch.float16) for _ in range(3))
            flash = tflops(b, h, s, d, causal,
                           sdpa(SDPBackend.FLASH_ATTENTION, q, k, v, causal))
            cudnn = tflops(b, h, s, d, causal,
                           sdpa(SDPBackend.CUDNN_ATTENTION, q, k, v, causal))
            print(f"D={d} S={s} causal={causal}: flash {flash:.1f} "
                  f"cudnn {cudnn:.1f}", flush=True)
            for bm, bn, w, st in configs[d]:
                try:
                    info = fa.prepare_kernel(d, causal=causal, block_m=bm,
                                             block_n=bn, num_warps=w, stages=st,
                                             dtype="float16",
                                             strategy=args.strategy)

                    def run():
                        return fa.attention(q, k, v, causal=causal,
                                            block_m=bm, block_n=bn,
                                            num_warps=w, stages=st,
                                            strategy=args.strategy)
                    run()
                    rate = tflops(b, h, s, d, causal, do_bench(run))
                    print(f"  {bm:>3}x{bn:<3} w{w} s{st}: {rate:6.1f} "
                          f"({rate / flash:.3f}x flash, {rate / cudnn:.3f}x "
                          f"cudnn) regs {info['registers']} spills "
                          f"{info['spill_store_bytes']}", flush=True)
                except fa.FaError as e:
                    print(f"  {bm:>3}x{bn:<3} w{w} s{st}: {e}", flush=True)


if __name__ == "__main__":
    main()
