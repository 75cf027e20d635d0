"""A chunked prefill against a KV cache (fa.flash_attn_with_kvcache with
Sq query rows per entry): the kernels' device time of the mma and wgmma
strategies on the same cache, contiguous or paged, unsplit or split into
parts, in one run. The rows show what the wgmma kernels (which read a
paged cache with TMA boxes a page each, and walk a split part's tiles)
gain over mma before `auto` gives them these problems.

    python3 bench/bench_prefill.py [--batch 8] [--context 8192] [--rows 512]
        [--heads 32 --kv-heads 8] [--dims 64,128] [--pages 0,64,256]
        [--splits 1,3] [--dtype bfloat16] [--json out.json]

Every entry holds between 0.56 and 1 times `context` keys (cache_seqlens
drawn once), the queries are the last `rows` of them (causal, aligned to
the end) or see them all (full). Time: the device time of fa's kernels
(torch.profiler over 20 calls, L2 flushed before each; bench_decode's
kernel_ms); TFLOP/s from the visited scores (4 D per (row, key) pair
and head; causal: each entry's rows x rows / 2 pairs past the diagonal
left out).
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import fa  # noqa: E402
from bench_decode import kernel_ms  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--pages", default="0,64,256")
    parser.add_argument("--splits", default="1,3")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    batch, context, rows = args.batch, args.context, args.rows
    hq, hkv = args.heads, args.kv_heads
    torch.manual_seed(0)
    lengths = torch.randint(context * 9 // 16, context + 1, (batch,),
                            dtype=torch.int32, device="cuda")
    keys = lengths.sum().item()
    results = []
    print(f"B {batch}, cache {context} (filled {keys // batch} on average), "
          f"{rows} query rows, Hq {hq}, Hkv {hkv}, {args.dtype}")
    print(f"{'D':>4} {'causal':>6} {'page':>5} {'parts':>5} "
          f"{'mma us':>8} {'wgmma us':>9} {'x mma':>6} {'wgmma TF/s':>10}")
    for d in (int(x) for x in args.dims.split(",")):
        q = torch.randn(batch, rows, hq, d, device="cuda", dtype=dtype)
        k = torch.randn(batch, context, hkv, d, device="cuda", dtype=dtype)
        v = torch.randn_like(k)
        for page in (int(x) for x in args.pages.split(",")):
            k_fa, v_fa, table = k, v, None
            if page:
                per_entry = context // page
                order = torch.randperm(batch * per_entry, device="cuda")
                table = order.view(batch, per_entry).to(torch.int32)
                k_fa = torch.empty(batch * per_entry, page, hkv, d,
                                   device="cuda", dtype=dtype)
                v_fa = torch.empty_like(k_fa)
                k_fa[table.long()] = k.view(batch, per_entry, page, hkv, d)
                v_fa[table.long()] = v.view(batch, per_entry, page, hkv, d)
            for causal in (False, True):
                for parts in (int(x) for x in args.splits.split(",")):
                    times = {}
                    for strategy in ("mma", "wgmma"):
                        def call():
                            return fa.flash_attn_with_kvcache(
                                q, k_fa, v_fa, cache_seqlens=lengths,
                                block_table=table, causal=causal,
                                num_splits=parts, check_lengths=False,
                                strategy=strategy)
                        times[strategy] = kernel_ms(call, "fa_")
                    # 4 D flops a (row, key) pair; causal: each entry's
                    # rows x rows / 2 pairs past the diagonal left out.
                    flops = 4.0 * rows * keys * d * hq
                    if causal:
                        flops -= 2.0 * rows * rows * d * hq * batch
                    row = {"head_dim": d, "causal": causal, "page": page,
                           "parts": parts, "mma_ms": times["mma"],
                           "wgmma_ms": times["wgmma"],
                           "wgmma_tflops": flops / times["wgmma"] / 1e9}
                    results.append(row)
                    print(f"{d:>4} {str(causal):>6} {page:>5} {parts:>5} "
                          f"{times['mma'] * 1e3:>8.1f} "
                          f"{times['wgmma'] * 1e3:>9.1f} "
                          f"{times['mma'] / times['wgmma']:>6.2f} "
                          f"{row['wgmma_tflops']:>10.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
