"""Backward attention throughput: fa's backward kernels (default and
deterministic mode) against PyTorch SDPA's FlashAttention-2 and cuDNN
backward in the same run. FlashAttention's
convention: B*S = 16384 tokens, H*D = 2048, backward FLOPs = 2.5x the
forward's 4*B*H*S*S*D (halved for causal); median time with
triton.testing.do_bench of the backward alone (the forward's outputs are
computed once outside the timing).

    python3 bench/bench_backward.py [--dtypes float16,bfloat16]
        [--dims 64,128] [--seqs 1024,4096,16384] [--json out.json]
        [--configs 64x64w4s2,128x128w8s2]

With --configs, each row also times fa's backward with those explicit
tiles (block_m x block_n, warps, Q/dO ring stages) of the mma strategy,
or of the strategy named before a colon (wgmma:64x128w8s2): the
measurements that rank the defaults.
"""

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
from bench_attention import do_bench, fa  # noqa: E402


def tflops(b, h, s, d, causal, ms):
    flops = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
    return flops / (ms * 1e-3) / 1e12


def fa_backward_ms(q, k, v, grad_output, causal, deterministic=False,
                   tiles=None):
    o, lse = fa.attention(q, k, v, causal=causal, return_lse=True)
    tiles = tiles or {}

    def run():
        return fa.attention_backward(grad_output, q, k, v, o, lse,
                                     causal=causal,
                                     deterministic=deterministic, **tiles)
    try:
        run()  # compile outside the timing
    except Exception as error:  # a config that does not fit (fa.FaError)
        print(f"  {tiles}: {error}", file=sys.stderr)
        return None
    return do_bench(run)


def parse_config(text):
    """'64x64w4s2' -> mma tiles for fa.attention_backward;
    'wgmma:64x128w8s2' -> tiles of another strategy."""
    strategy, _, text = text.rpartition(":")
    tiles, rest = text.split("w")
    warps, stages = rest.split("s")
    block_m, block_n = tiles.split("x")
    return {"block_m": int(block_m), "block_n": int(block_n),
            "num_warps": int(warps), "stages": int(stages),
            "strategy": strategy or "mma"}


def sdpa_backward_ms(backend, q, k, v, grad_output, causal):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    try:
        with sdpa_kernel(backend):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def run():
            return torch.autograd.grad(o, (q, k, v), grad_output,
                                       retain_graph=True)
        run()
        return do_bench(run)
    except RuntimeError:
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--seqs", default="1024,4096,16384")
    parser.add_argument("--configs", default="")
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    rows = []
    fmt = lambda x: f"{x:7.1f}" if x else "    n/a"  # noqa: E731
    print(f"{'dtype':>8} {'D':>4} {'S':>6} {'causal':>6} | {'fa':>7} "
          f"{'flash':>7} {'cudnn':>7} | {'/flash':>6} {'/cudnn':>6} | "
          f"{'fa det':>7} {'det/fa':>6} | fa kernel  "
          + "".join(f"{c:>12}" for c in configs)
          + "  (backward TFLOP/s)")
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for d in (int(x) for x in args.dims.split(",")):
            h = 2048 // d
            for s in (int(x) for x in args.seqs.split(",")):
                b = max(1, 16384 // s)
                for causal in (False, True):
                    q, k, v, grad_output = (
                        torch.randn(b, h, s, d, device="cuda", dtype=dtype)
                        for _ in range(4))
                    rate = lambda ms: ms and tflops(b, h, s, d, causal, ms)  # noqa: E731
                    row = {"dtype": dtype_name, "D": d, "S": s, "B": b,
                           "H": h, "causal": causal,
                           "fa": rate(fa_backward_ms(q, k, v, grad_output,
                                                     causal)),
                           "sdpa_flash": rate(sdpa_backward_ms(
                               SDPBackend.FLASH_ATTENTION, q, k, v,
                               grad_output, causal)),
                           "sdpa_cudnn": rate(sdpa_backward_ms(
                               SDPBackend.CUDNN_ATTENTION, q, k, v,
                               grad_output, causal)),
                           "fa_deterministic": rate(fa_backward_ms(
                               q, k, v, grad_output, causal,
                               deterministic=True))}
                    info = fa.prepare_kernel(d, causal=causal,
                                             dtype=dtype_name, backward=True)
                    row["fa_kernel"] = (
                        f"{info['strategy']} {info['block_m']}x"
                        f"{info['block_n']}w{info['num_warps']}"
                        f"s{info['stages']}")
                    for c in configs:
                        row[c] = rate(fa_backward_ms(
                            q, k, v, grad_output, causal,
                            tiles=parse_config(c)))
                    rows.append(row)

                    def ratio(x):
                        return f"{row['fa'] / x:6.3f}" if x else "   n/a"
                    print(f"{dtype_name:>8} {d:>4} {s:>6} {str(causal):>6} | "
                          f"{fmt(row['fa'])} {fmt(row['sdpa_flash'])} "
                          f"{fmt(row['sdpa_cudnn'])} | "
                          f"{ratio(row['sdpa_flash'])} "
                          f"{ratio(row['sdpa_cudnn'])} | "
                          f"{fmt(row['fa_deterministic'])} "
                          f"{row['fa_deterministic'] / row['fa']:6.3f} | "
                          f"{row['fa_kernel']}  "
                          + "".join(f"     {fmt(row[c])}" for c in configs),
                          flush=True)
                    del q, k, v, grad_output
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
