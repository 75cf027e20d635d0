"""FP8 accuracy: the RMSE of fa's e4m3 forward against float64 attention of
the original (float32) inputs, with and without incoherent processing
(fa.fp8.quantize(..., hadamard=True)), next to fa's bf16 forward on the
same inputs (FlashAttention-3's accuracy table, section 4.3 of its paper).

    python3 bench/fp8_accuracy.py [--dims 128,256] [--seq 2048]
        [--heads 8] [--causal] [--seeds 3] [--json out.json]

Data (float32, B = 1):
  normal    Q, K, V ~ N(0, 1)
  outliers  as normal, but 0.1% of the entries of Q, K and V are drawn
            from N(0, 10^2) (FlashAttention-3's outlier data)
  channels  as normal, but 4 of the D channels of Q and K are 16x larger
            (the large-magnitude channels of trained models' activations)
Quantization: per (batch entry, K/V head) descales (amax / 448). RMSE =
sqrt(mean((O - O_ref)^2)) over all of O, the mean over --seeds draws.
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import fa  # noqa: E402


def data(kind, b, h, s, d, generator):
    def normal():
        return torch.randn(b, h, s, d, device="cuda", generator=generator)
    q, k, v = normal(), normal(), normal()
    if kind == "outliers":
        for t in (q, k, v):
            picked = torch.rand(t.shape, device="cuda",
                                generator=generator) < 1e-3
            t[picked] = 10.0 * torch.randn(int(picked.sum()), device="cuda",
                                           generator=generator)
    elif kind == "channels":
        channels = torch.randperm(d, device="cuda", generator=generator)[:4]
        q[..., channels] *= 16.0
        k[..., channels] *= 16.0
    return q, k, v


def reference(q, k, v, causal, scale):
    s = scale * q.double() @ k.double().transpose(-1, -2)
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool,
                                     device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v.double()


def rmse(o, want):
    return (o.double() - want).pow(2).mean().sqrt().item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dims", default="128,256")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    print(f"{'data':>9} {'D':>4} | {'bf16':>9} {'fp8':>9} {'fp8+H':>9} | "
          f"{'fp8/fp8+H':>9} {'fp8+H/bf16':>10}  (RMSE)")
    for kind in ("normal", "outliers", "channels"):
        for d in (int(x) for x in args.dims.split(",")):
            errors = {"bf16": 0.0, "fp8": 0.0, "fp8_hadamard": 0.0}
            for seed in range(args.seeds):
                generator = torch.Generator(device="cuda").manual_seed(seed)
                q, k, v = data(kind, 1, args.heads, args.seq, d, generator)
                scale = d ** -0.5
                want = reference(q, k, v, args.causal, scale)
                o = fa.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(),
                                 causal=args.causal)
                errors["bf16"] += rmse(o, want) / args.seeds
                for hadamard, key in ((False, "fp8"),
                                      (True, "fp8_hadamard")):
                    q8, k8, v8, descales = fa.fp8.quantize(
                        q, k, v, hadamard=hadamard, seed=seed)
                    o = fa.attention(q8, k8, v8, causal=args.causal,
                                     **descales)
                    errors[key] += rmse(o, want) / args.seeds
            row = {"data": kind, "D": d, "S": args.seq, "H": args.heads,
                   "causal": args.causal, **errors}
            rows.append(row)
            print(f"{kind:>9} {d:>4} | {errors['bf16']:9.2e} "
                  f"{errors['fp8']:9.2e} {errors['fp8_hadamard']:9.2e} | "
                  f"{errors['fp8'] / errors['fp8_hadamard']:9.2f} "
                  f"{errors['fp8_hadamard'] / errors['bf16']:10.2f}",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
