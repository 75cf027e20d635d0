"""Decoding one token against a KV cache (fa.flash_attn_with_kvcache):
time and the HBM bandwidth it reaches reading the cache, against SDPA
(FlashAttention-2 and cuDNN backends) on the same cache and a plain
streaming read of a buffer of the same size, in one run; fa with the
runtime's split-KV choice (num_splits=0) and unsplit (num_splits=1).

    python3 bench/bench_decode.py [--batches 1,8,64] [--contexts 1024,8192,32768]
        [--heads 32 --kv-heads 8 --head-dim 128] [--dtype bfloat16] [--page 0]
        [--sinks] [--json out.json]

Every batch entry holds `context` keys (cache_seqlens = context; the
cache is that long). --page P: fa reads a paged cache of P-row pages (the
pages of all entries shuffled in one pool); SDPA the same keys contiguous.
--sinks: fa with gpt-oss's attention sinks (SDPA's columns without them).
Bytes: K and V of every entry's filled part (B x
context x Hkv x D x 2 x element size); GB/s = bytes / time. The streaming
read: torch.sum over a buffer of those bytes (float32 accumulation), as
the attainable read bandwidth. Timing: triton.testing.do_bench (median,
L2 flushed) of each call (what a caller waits for, Python included); and
the device time of the kernels alone (torch.profiler over 20 calls, L2
flushed before each: fa's own kernels, every kernel of SDPA's call and of
the read), from which the bandwidth columns are computed.
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import fa  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from triton.testing import do_bench  # noqa: E402


def _device_us(event):
    for attr in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(event, attr, None)
        if value:
            return value
    return 0.0


def device_times(fn, calls=20, flush=None):
    """Device microseconds per call of each kernel fn launches, by name, L2
    flushed before each call (the flush's own fill left out)."""
    if flush is None:
        flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    fn()
    torch.cuda.synchronize()
    activity = torch.profiler.ProfilerActivity.CUDA
    with torch.profiler.profile(activities=[activity]) as prof:
        for _ in range(calls):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    return {e.key: _device_us(e) / calls for e in prof.key_averages()
            if "FillFunctor" not in e.key}


def kernel_ms(fn, prefix="", calls=20):
    """Device time per call of the kernels fn launches whose names start
    with `prefix` (all of them for ""), L2 flushed before each call."""
    return sum(us for name, us in device_times(fn, calls).items()
               if name.startswith(prefix)) / 1e3


def host_ms(fn, calls=200):
    """Wall time per call of back-to-back calls (no flush): the launch
    path's cost where the kernels are shorter than it."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--contexts", default="1024,8192,32768")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--page", type=int, default=0)
    parser.add_argument("--sinks", action="store_true",
                        help="fa with attention sinks (s_aux, one logit a "
                        "query head: gpt-oss's); SDPA's columns stay "
                        "without")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    hq, hkv, d = args.heads, args.kv_heads, args.head_dim
    size = torch.tensor([], dtype=dtype).element_size()
    rows = []
    print("call: do_bench of the Python call; kernel: device time of the "
          "kernels (fa's own; all of SDPA's and the read's); GB/s from "
          "kernel time")
    print(f"{'B':>4} {'ctx':>6} {'call us':>8} {'host us':>8} "
          f"{'kern us':>8} {'fa GB/s':>8} {'unsplit':>8} {'x unspl':>7} "
          f"{'flash':>7} {'cudnn':>7} {'read GB/s':>9} {'fa/read':>7}")
    for batch in (int(x) for x in args.batches.split(",")):
        for context in (int(x) for x in args.contexts.split(",")):
            torch.manual_seed(0)
            q = torch.randn(batch, 1, hq, d, device="cuda", dtype=dtype)
            k = torch.randn(batch, context, hkv, d, device="cuda",
                            dtype=dtype)
            v = torch.randn_like(k)
            lens = torch.full((batch,), context, dtype=torch.int32,
                              device="cuda")
            k_fa, v_fa, table = k, v, None
            if args.page:
                per_entry = context // args.page
                order = torch.randperm(batch * per_entry, device="cuda")
                table = order.view(batch, per_entry).to(torch.int32)
                k_fa = torch.empty(batch * per_entry, args.page, hkv, d,
                                   device="cuda", dtype=dtype)
                v_fa = torch.empty_like(k_fa)
                k_fa[table.long()] = k.view(batch, per_entry, args.page, hkv, d)
                v_fa[table.long()] = v.view(batch, per_entry, args.page, hkv, d)

            sinks = (torch.randn(hq, device="cuda", dtype=dtype)
                     if args.sinks else None)

            def call(splits=0):
                return fa.flash_attn_with_kvcache(
                    q, k_fa, v_fa, cache_seqlens=lens, block_table=table,
                    check_lengths=False, num_splits=splits, s_aux=sinks)
            ms = do_bench(call)
            call_host_ms = host_ms(call)
            fa_kernel_ms = kernel_ms(call, "fa_")
            unsplit_ms = kernel_ms(lambda: call(1), "fa_")
            # SDPA on the same cache: [B, H, S, D] views, GQA expanded by
            # enable_gqa.
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
            peers = {}
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                                  ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        def call():
                            return torch.nn.functional.\
                                scaled_dot_product_attention(
                                    qt, kt, vt, enable_gqa=True)
                        call()
                        peers[name] = kernel_ms(call)
                except Exception as error:  # noqa: BLE001
                    print(f"  ({name}: {type(error).__name__}: "
                          f"{str(error).splitlines()[0][:100]})")
                    peers[name] = float("nan")
            nbytes = 2 * batch * context * hkv * d * size
            buffer = torch.empty(nbytes // size, device="cuda", dtype=dtype)
            buffer.normal_()
            read_ms = kernel_ms(
                lambda: torch.sum(buffer, dtype=torch.float32))
            del buffer
            row = {"batch": batch, "context": context, "call_ms": ms,
                   "host_ms": call_host_ms, "fa_ms": fa_kernel_ms,
                   "fa_gbps": nbytes / fa_kernel_ms / 1e6,
                   "unsplit_ms": unsplit_ms,
                   "flash_ms": peers["flash"], "cudnn_ms": peers["cudnn"],
                   "read_gbps": nbytes / read_ms / 1e6}
            rows.append(row)
            print(f"{batch:>4} {context:>6} {ms * 1e3:>8.1f} "
                  f"{call_host_ms * 1e3:>8.1f} {fa_kernel_ms * 1e3:>8.1f} "
                  f"{row['fa_gbps']:>8.0f} {unsplit_ms * 1e3:>8.1f} "
                  f"{unsplit_ms / fa_kernel_ms:>7.2f} "
                  f"{peers['flash'] * 1e3:>7.1f} "
                  f"{peers['cudnn'] * 1e3:>7.1f} {row['read_gbps']:>9.0f} "
                  f"{row['fa_gbps'] / row['read_gbps']:>7.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
