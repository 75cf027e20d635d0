"""Forward attention throughput: fa's generated kernels against PyTorch SDPA
(FlashAttention-2 and cuDNN backends) in the same run, FlashAttention's
benchmark convention: B*S = 16384 tokens, H*D = 2048, FLOPs = 4*B*H*S*S*D
(halved for causal), median time with triton.testing.do_bench.

    python3 bench/bench_attention.py [--quick] [--json out.json]

fa runs on float32 inputs and on float16 inputs (the SIMT strategy computes
in float32 either way; 16-bit tiles halve its shared memory and loads);
SDPA flash and cuDNN need fp16/bf16 and run in fp16, SDPA's float32 peer
(memory-efficient backend) in float32. The ratios compare fa f16 with flash
and cuDNN at the same input precision.
"""

import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import fa  # noqa: E402

try:
    from triton.testing import do_bench
except ImportError:  # pragma: no cover
    def do_bench(fn, warmup=25, rep=100):
        for _ in range(3):
            fn()
        start, end = torch.cuda.Event(True), torch.cuda.Event(True)
        times = []
        for _ in range(10):
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return sorted(times)[len(times) // 2]


def tflops(b, h, s, d, causal, ms):
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    return flops / (ms * 1e-3) / 1e12


def fa_ms(q, k, v, causal, args):
    """Median ms of fa.attention with the command line's tiles (0 = default)."""
    def run():
        return fa.attention(q, k, v, causal=causal, block_m=args.block_m,
                            block_n=args.block_n, num_warps=args.num_warps)
    run()  # compile outside the timing
    return do_bench(run)


def sdpa(backend, q, k, v, causal):
    def run():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    try:
        run()
        return do_bench(run)
    except RuntimeError:
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--block-m", type=int, default=0)
    parser.add_argument("--block-n", type=int, default=0)
    parser.add_argument("--num-warps", type=int, default=0)
    args = parser.parse_args()
    seqs = [1024, 4096] if args.quick else [1024, 4096, 16384]
    rows = []
    print(f"{'D':>4} {'S':>6} {'causal':>6} | {'fa f32':>8} {'sdpa f32':>8} "
          f"{'fa f16':>8} {'flash f16':>9} {'cudnn f16':>9} | "
          f"fa16/flash fa16/cudnn  (TFLOP/s)")
    for d in (64, 128):
        h = 2048 // d
        for s in seqs:
            b = 16384 // s
            for causal in (False, True):
                q, k, v = (torch.randn(b, h, s, d, device="cuda")
                           for _ in range(3))
                ours = tflops(b, h, s, d, causal, fa_ms(q, k, v, causal, args))
                peer32 = sdpa(SDPBackend.EFFICIENT_ATTENTION, q, k, v, causal)
                qh, kh, vh = q.half(), k.half(), v.half()
                ours16 = tflops(b, h, s, d, causal, fa_ms(qh, kh, vh, causal, args))
                flash = sdpa(SDPBackend.FLASH_ATTENTION, qh, kh, vh, causal)
                cudnn = sdpa(SDPBackend.CUDNN_ATTENTION, qh, kh, vh, causal)
                row = {"D": d, "S": s, "B": b, "H": h, "causal": causal,
                       "fa_f32": ours, "fa_f16": ours16,
                       "sdpa_efficient_f32": peer32 and tflops(b, h, s, d, causal, peer32),
                       "sdpa_flash_f16": flash and tflops(b, h, s, d, causal, flash),
                       "sdpa_cudnn_f16": cudnn and tflops(b, h, s, d, causal, cudnn)}
                rows.append(row)
                fmt = lambda x: f"{x:8.1f}" if x else "     n/a"  # noqa: E731
                ratio = lambda x: f"{ours16 / x:10.3f}" if x else "       n/a"  # noqa: E731
                print(f"{d:>4} {s:>6} {str(causal):>6} | {fmt(ours)} "
                      f"{fmt(row['sdpa_efficient_f32'])} {fmt(ours16)} "
                      f"{fmt(row['sdpa_flash_f16'])}  {fmt(row['sdpa_cudnn_f16'])} | "
                      f"{ratio(row['sdpa_flash_f16'])} {ratio(row['sdpa_cudnn_f16'])}",
                      flush=True)
                del q, k, v, qh, kh, vh
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
