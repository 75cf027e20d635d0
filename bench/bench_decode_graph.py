"""Decode time end to end: a CUDA graph of 40 one-token decode calls
(fa.flash_attn_with_kvcache, the runtime's choices) rotating over enough
copies of the cache to defeat L2, replayed 15 times; the median time a
call, launch gaps included. This is the measure for split-KV decodes on
sm_90, whose merge kernel is launched while the parts run and waits for
them (programmatic dependent launch): bench_decode.py's kernel sums count
that wait as the merge's time. Beside it, the streaming read of the same
bytes (torch.sum, L2 flushed, kernel time) as in bench_decode.py.

    python3 bench/bench_decode_graph.py [--shapes 1:8192,1:32768,8:8192]
        [--heads 32 --kv-heads 8 --head-dim 128] [--page 0] [--label NAME]

A shape is B:context (bf16; every entry holds `context` keys). --page P:
a paged cache of P-row pages (each copy's pages of all entries shuffled in
one pool, as bench_decode.py's). Each graph's results are checked equal to
the eager calls' bit for bit.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import fa  # noqa: E402
from bench_decode import kernel_ms  # noqa: E402


def graph_us(step, copies, calls=40, replays=15):
    """Median microseconds a call of a graph of `calls` steps, and whether
    the graph's outputs equal the eager ones."""
    outs = [step(i) for i in range(copies)]
    torch.cuda.synchronize()
    eager = [o.clone() for o in outs]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            step(i)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    captured = [None] * copies
    with torch.cuda.graph(graph):
        for i in range(calls):
            captured[i % copies] = step(i)
    graph.replay()
    torch.cuda.synchronize()
    same = all(torch.equal(a, b) for a, b in zip(captured, eager))
    times = []
    for _ in range(replays):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    times.sort()
    return times[len(times) // 2], same


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="1:8192,1:32768,1:131072,2:8192,"
                        "8:8192,8:32768")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--page", type=int, default=0)
    parser.add_argument("--label", default="fa")
    args = parser.parse_args()
    hq, hkv, d = args.heads, args.kv_heads, args.head_dim
    for shape in args.shapes.split(","):
        batch, context = (int(x) for x in shape.split(":"))
        nbytes = 2 * batch * context * hkv * d * 2
        # (At most a graph's calls: each copy's output is compared.)
        copies = min(40, max(2, int(200e6 // nbytes) + 1))
        torch.manual_seed(0)
        q = torch.randn(batch, 1, hq, d, device="cuda", dtype=torch.bfloat16)
        caches = [tuple(torch.randn(batch, context, hkv, d, device="cuda",
                                    dtype=torch.bfloat16) for _ in range(2))
                  for _ in range(copies)]
        lens = torch.full((batch,), context, dtype=torch.int32,
                          device="cuda")
        tables = [None] * copies
        if args.page:
            per_entry = context // args.page
            for c in range(copies):
                order = torch.randperm(batch * per_entry, device="cuda")
                tables[c] = order.view(batch, per_entry).to(torch.int32)
                caches[c] = tuple(
                    torch.empty(batch * per_entry, args.page, hkv, d,
                                device="cuda", dtype=torch.bfloat16)
                    .index_copy_(0, order, t.view(batch * per_entry,
                                                  args.page, hkv, d))
                    for t in caches[c])

        def step(i):
            k, v = caches[i % copies]
            return fa.flash_attn_with_kvcache(q, k, v, cache_seqlens=lens,
                                              block_table=tables[i % copies],
                                              check_lengths=False)
        us, same = graph_us(step, copies)
        del caches
        buffer = torch.empty(nbytes // 2, device="cuda",
                             dtype=torch.bfloat16).normal_()
        read_us = kernel_ms(
            lambda: torch.sum(buffer, dtype=torch.float32)) * 1e3
        del buffer
        torch.cuda.empty_cache()
        paged = f" pages of {args.page}" if args.page else ""
        print(f"{args.label}: B {batch} ctx {context}{paged}: {us:.1f} us a "
              f"call ({nbytes / us / 1e3:.0f} GB/s), read {read_us:.1f} us: "
              f"{read_us / us:.2f} of the read; equal to eager: {same}",
              flush=True)


if __name__ == "__main__":
    main()
