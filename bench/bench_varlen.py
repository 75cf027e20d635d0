"""Packed varlen batches (fa.flash_attn_varlen_func) against fa's
fixed-length kernel on the same total tokens, and SDPA on the same
sequences (nested jagged tensors where torch supports them, else one SDPA
call per sequence) and PyTorch's varlen FlashAttention-2 and cuDNN kernels
on the same packed batch, forward, in one run; with --backward the
backward too (autograd's gradient call alone, the forward's graph kept;
FLOPs 2.5x the forward's).

    python3 bench/bench_varlen.py [--tokens 16384] [--means 512,2048]
        [--dtype bfloat16] [--head-dims 64,128] [--backward] [--json out.json]

Lengths: uniform in [1, 2 * mean] (seeded), drawn until the total reaches
`--tokens` (the benchmark convention's B * S = 16k); the fixed-length row
is a batch of `tokens / mean` sequences of `mean` rows. Heads: 2048 / D
query heads (H * D = 2048), as many K/V heads. TFLOP/s count the kept
scores of each sequence (causal: the lower triangle). Timing:
triton.testing.do_bench (median, L2 flushed); the varlen calls skip the
offsets' check (check_offsets=False: no read-back in the timed loop).
"""

import argparse
import json
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import fa  # noqa: E402
from triton.testing import do_bench  # noqa: E402
from varlen_batches import lengths_for  # noqa: E402


def kept(sq, sk, causal):
    if not causal:
        return sq * sk
    # Bottom-right aligned: row i sees min(sk, max(0, i + sk - sq + 1)).
    return sum(min(sk, max(0, i + sk - sq + 1)) for i in range(sq))


def sdpa_jagged(q, k, v, cu, causal):
    """SDPA on nested jagged tensors ([B, j, H, D] -> [B, H, j, D]), or
    None when this torch cannot."""
    try:
        offsets = cu.long()
        nq = torch.nested.nested_tensor_from_jagged(q, offsets)
        nk = torch.nested.nested_tensor_from_jagged(k, offsets)
        nv = torch.nested.nested_tensor_from_jagged(v, offsets)

        def call():
            return torch.nn.functional.scaled_dot_product_attention(
                nq.transpose(1, 2), nk.transpose(1, 2), nv.transpose(1, 2),
                is_causal=causal)
        call()
        return call
    except Exception as error:  # noqa: BLE001 (report and go on)
        print(f"  (SDPA on jagged tensors: {type(error).__name__}: "
              f"{str(error).splitlines()[0][:100]})")
        return None


def torch_varlen(backend, q, k, v, cu, max_len, causal):
    """PyTorch's own varlen kernels on the packed batch (the ones SDPA runs
    for nested tensors): "flash" (FlashAttention-2) or "cudnn"; None with
    the reason printed when this torch lacks one."""
    try:
        if backend == "flash":
            def call():
                return torch.ops.aten._flash_attention_forward(
                    q, k, v, cu, cu, max_len, max_len, 0.0, causal, False)[0]
        else:
            def call():
                return torch.ops.aten._cudnn_attention_forward(
                    q, k, v, None, cu, cu, max_len, max_len, True, 0.0,
                    causal, False)[0]
        out = call()
        torch.cuda.synchronize()
        return call, out
    except Exception as error:  # noqa: BLE001 (report and go on)
        print(f"  (torch varlen {backend}: {type(error).__name__}: "
              f"{str(error).splitlines()[0][:120]})")
        return None, None


def backward_time(out, inputs):
    """The gradient call of `out`'s graph alone (kept between calls)."""
    grad = torch.randn_like(out)
    return do_bench(lambda: torch.autograd.grad(out, inputs, grad,
                                                retain_graph=True))


def torch_varlen_backward(q, k, v, cu, max_len, causal):
    """PyTorch's FlashAttention-2 varlen backward on the packed batch, or
    NaN with the reason printed."""
    try:
        out, lse, seed, offset, _ = torch.ops.aten._flash_attention_forward(
            q, k, v, cu, cu, max_len, max_len, 0.0, causal, False)
        grad = torch.randn_like(out)
        call = lambda: torch.ops.aten._flash_attention_backward(  # noqa: E731
            grad, q, k, v, out, lse, cu, cu, max_len, max_len, 0.0, causal,
            seed, offset)
        call()
        return do_bench(call)
    except Exception as error:  # noqa: BLE001 (report and go on)
        print(f"  (torch varlen flash backward: {type(error).__name__}: "
              f"{str(error).splitlines()[0][:120]})")
        return float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--means", default="512,2048")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--backward", action="store_true")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    rows = []
    print(f"{'D':>4} {'mean':>5} {'seqs':>5} {'causal':>6} {'varlen ms':>9} "
          f"{'TF/s':>6} {'fixed ms':>9} {'TF/s':>6} {'var/fixed':>9} "
          f"{'sdpa ms':>8} {'sdpa kind':>10} {'fa2 ms':>7} {'fa2 TF/s':>8} "
          f"{'cudnn ms':>8} {'cudnn TF/s':>10}")
    for d in (int(x) for x in args.head_dims.split(",")):
        heads = 2048 // d
        for mean in (int(x) for x in args.means.split(",")):
            rng = random.Random(mean * 7 + d)
            lengths = lengths_for(args.tokens, mean, rng)
            offsets = [0]
            for n in lengths:
                offsets.append(offsets[-1] + n)
            cu = torch.tensor(offsets, dtype=torch.int32, device="cuda")
            total = offsets[-1]
            torch.manual_seed(0)
            q, k, v = (torch.randn(total, heads, d, device="cuda",
                                   dtype=dtype) for _ in range(3))
            batch = max(1, args.tokens // mean)
            fq, fk, fv = (torch.randn(batch, mean, heads, d, device="cuda",
                                      dtype=dtype) for _ in range(3))
            for causal in (False, True):
                flops = 4 * heads * d * sum(kept(n, n, causal)
                                            for n in lengths)
                fixed_flops = 4 * heads * d * batch * kept(mean, mean, causal)
                varlen_ms = do_bench(lambda: fa.flash_attn_varlen_func(
                    q, k, v, cu, cu, max(lengths), max(lengths),
                    causal=causal, check_offsets=False))
                fixed_ms = do_bench(lambda: fa.flash_attn_func(
                    fq, fk, fv, causal=causal))
                sdpa = sdpa_jagged(q, k, v, cu, causal)
                kind = "jagged"
                if sdpa is None:
                    kind = "per-seq"
                    seqs = [(q[a:b].transpose(0, 1), k[a:b].transpose(0, 1),
                             v[a:b].transpose(0, 1))
                            for a, b in zip(offsets, offsets[1:])]

                    def sdpa():
                        for sq, sk, sv in seqs:
                            torch.nn.functional.scaled_dot_product_attention(
                                sq, sk, sv, is_causal=causal)
                sdpa_ms = do_bench(sdpa)
                ours = fa.flash_attn_varlen_func(
                    q, k, v, cu, cu, max(lengths), max(lengths),
                    causal=causal).float()
                peers = {}
                for backend in ("flash", "cudnn"):
                    call, out = torch_varlen(backend, q, k, v, cu,
                                             max(lengths), causal)
                    if call is None:
                        peers[backend] = float("nan")
                        continue
                    # The same answer, or the timing compares different
                    # work (bf16 outputs: a few ulps at |O| <= ~1).
                    diff = (out.float() - ours).abs().max().item()
                    if diff > 2e-2:
                        print(f"  ({backend} differs from fa by {diff:.3g})")
                    peers[backend] = do_bench(call)
                row = {"head_dim": d, "mean": mean, "sequences": len(lengths),
                       "causal": causal, "varlen_ms": varlen_ms,
                       "varlen_tflops": flops / varlen_ms / 1e9,
                       "fixed_ms": fixed_ms,
                       "fixed_tflops": fixed_flops / fixed_ms / 1e9,
                       "sdpa_ms": sdpa_ms, "sdpa": kind,
                       "torch_flash_ms": peers["flash"],
                       "torch_cudnn_ms": peers["cudnn"]}
                row["varlen_over_fixed"] = (row["varlen_tflops"]
                                            / row["fixed_tflops"])
                if args.backward:
                    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
                    out = fa.flash_attn_varlen_func(
                        *leaves, cu, cu, max(lengths), max(lengths),
                        causal=causal, check_offsets=False)
                    row["varlen_bwd_ms"] = backward_time(out, leaves)
                    fixed = [t.clone().requires_grad_() for t in (fq, fk, fv)]
                    out = fa.flash_attn_func(*fixed, causal=causal)
                    row["fixed_bwd_ms"] = backward_time(out, fixed)
                    row["torch_flash_bwd_ms"] = torch_varlen_backward(
                        q, k, v, cu, max(lengths), causal)
                    del out, leaves, fixed
                    bwd = {key: 2.5 * f / row[key + "_ms"] / 1e9
                           for key, f in (("varlen_bwd", flops),
                                          ("fixed_bwd", fixed_flops),
                                          ("torch_flash_bwd", flops))}
                    print(f"       backward: varlen {row['varlen_bwd_ms']:.3f}"
                          f" ms {bwd['varlen_bwd']:.0f} TF/s, fixed "
                          f"{row['fixed_bwd_ms']:.3f} ms "
                          f"{bwd['fixed_bwd']:.0f} TF/s (var/fixed "
                          f"{bwd['varlen_bwd'] / bwd['fixed_bwd']:.2f}), "
                          f"torch varlen fa2 "
                          f"{row['torch_flash_bwd_ms']:.3f} ms "
                          f"{bwd['torch_flash_bwd']:.0f} TF/s")
                rows.append(row)
                print(f"{d:>4} {mean:>5} {len(lengths):>5} "
                      f"{'yes' if causal else 'no':>6} {varlen_ms:>9.3f} "
                      f"{row['varlen_tflops']:>6.0f} {fixed_ms:>9.3f} "
                      f"{row['fixed_tflops']:>6.0f} "
                      f"{row['varlen_over_fixed']:>9.2f} {sdpa_ms:>8.3f} "
                      f"{kind:>10} {peers['flash']:>7.3f} "
                      f"{flops / peers['flash'] / 1e9:>8.0f} "
                      f"{peers['cudnn']:>8.3f} "
                      f"{flops / peers['cudnn'] / 1e9:>10.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
