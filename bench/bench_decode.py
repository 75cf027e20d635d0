"""Decoding one token against a KV cache (fa.flash_attn_with_kvcache):
time and the HBM bandwidth it reaches reading the cache, against SDPA
(FlashAttention-2 and cuDNN backends) on the same cache and a plain
streaming read of a buffer of the same size, in one run; fa with the
runtime's split-KV choice (num_splits=0) and unsplit (num_splits=1).

    python3 bench/bench_decode.py [--batches 1,8,64] [--contexts 1024,8192,32768]
        [--heads 32 --kv-heads 8 --head-dim 128] [--dtype bfloat16] [--json out.json]

Every batch entry holds `context` keys (cache_seqlens = context; the
cache is that long). Bytes: K and V of every entry's filled part (B x
context x Hkv x D x 2 x element size); GB/s = bytes / time. The streaming
read: torch.sum over a buffer of those bytes (float32 accumulation), as
the attainable read bandwidth. Timing: triton.testing.do_bench (median,
L2 flushed).
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import fa  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from triton.testing import do_bench  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--contexts", default="1024,8192,32768")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    hq, hkv, d = args.heads, args.kv_heads, args.head_dim
    size = torch.tensor([], dtype=dtype).element_size()
    rows = []
    print(f"{'B':>4} {'ctx':>6} {'fa us':>8} {'fa GB/s':>8} "
          f"{'unsplit us':>10} {'x unsplit':>9} {'flash us':>9} "
          f"{'cudnn us':>9} {'read GB/s':>9} {'fa/read':>7}")
    for batch in (int(x) for x in args.batches.split(",")):
        for context in (int(x) for x in args.contexts.split(",")):
            torch.manual_seed(0)
            q = torch.randn(batch, 1, hq, d, device="cuda", dtype=dtype)
            k = torch.randn(batch, context, hkv, d, device="cuda",
                            dtype=dtype)
            v = torch.randn_like(k)
            lens = torch.full((batch,), context, dtype=torch.int32,
                              device="cuda")
            ms = do_bench(lambda: fa.flash_attn_with_kvcache(
                q, k, v, cache_seqlens=lens, check_lengths=False))
            unsplit_ms = do_bench(lambda: fa.flash_attn_with_kvcache(
                q, k, v, cache_seqlens=lens, check_lengths=False,
                num_splits=1))
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
                        peers[name] = do_bench(call)
                except Exception as error:  # noqa: BLE001
                    print(f"  ({name}: {type(error).__name__}: "
                          f"{str(error).splitlines()[0][:100]})")
                    peers[name] = float("nan")
            nbytes = 2 * batch * context * hkv * d * size
            buffer = torch.empty(nbytes // size, device="cuda", dtype=dtype)
            buffer.normal_()
            read_ms = do_bench(lambda: torch.sum(buffer, dtype=torch.float32))
            del buffer
            row = {"batch": batch, "context": context, "fa_ms": ms,
                   "fa_gbps": nbytes / ms / 1e6, "unsplit_ms": unsplit_ms,
                   "flash_ms": peers["flash"], "cudnn_ms": peers["cudnn"],
                   "read_gbps": nbytes / read_ms / 1e6}
            rows.append(row)
            print(f"{batch:>4} {context:>6} {ms * 1e3:>8.1f} "
                  f"{row['fa_gbps']:>8.0f} {unsplit_ms * 1e3:>10.1f} "
                  f"{unsplit_ms / ms:>9.2f} {peers['flash'] * 1e3:>9.1f} "
                  f"{peers['cudnn'] * 1e3:>9.1f} {row['read_gbps']:>9.0f} "
                  f"{row['fa_gbps'] / row['read_gbps']:>7.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
