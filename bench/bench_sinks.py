"""Attention sinks (gpt-oss: a learned logit per query head in every row's
softmax denominator): fa's kernel with sinks against fa's plain kernel and,
for scale, SDPA's cuDNN backend without sinks, forward and forward +
backward, in one run. Where FlexAttention is available, also Flex with the
sinks applied after it (O * exp(LSE - logaddexp(LSE, sink)), the usual way
to get sinks out of a kernel that has none).

    python3 bench/bench_sinks.py [--seqs 4096,16384] [--dtype bfloat16]
        [--window 128] [--json out.json]

gpt-oss's attention shape: head dim 64, 64 query heads over 8 K/V heads,
causal; B*S = 16384 tokens. Rows "full" are causal; rows "window W" keep
the W + 1 keys up to the diagonal (gpt-oss's alternate layers, W = 127).
TFLOP/s are counted on the kept scores (forward + backward: 3.5x the
forward's). Timing: triton.testing.do_bench (median, L2 flushed).
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import fa  # noqa: E402
from fa import variants as V  # noqa: E402
from triton.testing import do_bench  # noqa: E402


def kept_pairs(seq, window):
    if window is None:
        return seq * (seq + 1) // 2
    full = min(seq, window + 1)
    return full * (full + 1) // 2 + (seq - full) * (window + 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seqs", default="4096,16384")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--window", type=int, default=127)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    d, hq, hkv = 64, 64, 8
    flex = None
    try:
        from torch.nn.attention.flex_attention import (create_block_mask,
                                                       flex_attention)
        flex = torch.compile(flex_attention, dynamic=False)
    except ImportError:
        print("no flex_attention in this torch")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    print(f"{'mask':<11} {'S':>6} {'dir':>7} {'plain ms':>9} {'sinks ms':>9} "
          f"{'sinks TF/s':>10} {'sinks/plain':>11} {'cudnn ms':>9} "
          f"{'flex+sinks ms':>13} {'fa/flex':>7}")
    for seq in (int(s) for s in args.seqs.split(",")):
        batch = max(1, 16384 // seq)
        torch.manual_seed(0)
        q = torch.randn(batch, hq, seq, d, device="cuda", dtype=dtype,
                        requires_grad=True)
        k, v = (torch.randn(batch, hkv, seq, d, device="cuda", dtype=dtype,
                            requires_grad=True) for _ in range(2))
        sinks = torch.randn(hq, device="cuda", dtype=torch.float32,
                            requires_grad=True)
        grad = torch.randn_like(q)
        for window in (None, args.window):
            name = "full" if window is None else f"window {window}"
            mask_mod = None if window is None else V.sliding_window(window, 0)
            flops = 4 * batch * hq * d * kept_pairs(seq, window)

            def run(with_sinks, backward):
                def call():
                    out = fa.attention(q, k, v, causal=True, mask_mod=mask_mod,
                                       sinks=sinks if with_sinks else None)
                    if backward:
                        inputs = (q, k, v, sinks) if with_sinks else (q, k, v)
                        torch.autograd.grad(out, inputs, grad)
                return call

            def cudnn(backward):
                def call():
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        out = torch.nn.functional.scaled_dot_product_attention(
                            q, k, v, is_causal=True, enable_gqa=True)
                    if backward:
                        torch.autograd.grad(out, (q, k, v), grad)
                return call

            flex_call = None
            if flex is not None:
                def keep(b, h, qi, kv):
                    if window is None:
                        return qi >= kv
                    return (qi >= kv) & (qi - kv <= window)
                block_mask = create_block_mask(keep, 1, 1, seq, seq)

                def flex_call(backward):
                    def call():
                        out, lse = flex(q, k, v, block_mask=block_mask,
                                        enable_gqa=True, return_lse=True)
                        total = torch.logaddexp(lse, sinks[None, :, None])
                        out = out * torch.exp(lse - total)[..., None]
                        if backward:
                            torch.autograd.grad(out, (q, k, v, sinks), grad)
                    return call
            for backward in (False, True):
                direction = "fwd+bwd" if backward else "fwd"
                plain_ms = do_bench(run(False, backward))
                sinks_ms = do_bench(run(True, backward))
                try:
                    cudnn_ms = do_bench(cudnn(backward)) if window is None \
                        else None
                except Exception as error:  # report, keep going
                    print(f"cudnn failed: {error}")
                    cudnn_ms = None
                flex_ms = None
                if flex_call is not None:
                    try:
                        flex_ms = do_bench(flex_call(backward))
                    except Exception as error:
                        print(f"flex failed: {error}")
                work = flops * (3.5 if backward else 1.0)
                row = {"mask": name, "seq": seq, "dir": direction,
                       "plain_ms": plain_ms, "sinks_ms": sinks_ms,
                       "sinks_tflops": work / sinks_ms / 1e9,
                       "sinks_vs_plain": sinks_ms / plain_ms,
                       "cudnn_ms": cudnn_ms, "flex_sinks_ms": flex_ms}
                rows.append(row)
                nan = float("nan")
                print(f"{name:<11} {seq:>6} {direction:>7} {plain_ms:>9.3f} "
                      f"{sinks_ms:>9.3f} {row['sinks_tflops']:>10.1f} "
                      f"{row['sinks_vs_plain']:>11.3f} "
                      f"{cudnn_ms if cudnn_ms else nan:>9.3f} "
                      f"{flex_ms if flex_ms else nan:>13.3f} "
                      f"{(flex_ms / sinks_ms) if flex_ms else nan:>7.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
