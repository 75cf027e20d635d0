"""Attention variants: fa's generated kernels against FlexAttention
(torch.compile'd flex_attention, the same score_mod / mask_mod) and fa's
own plain kernel, forward and forward + backward, in one run.

    python3 bench/bench_variants.py [--seqs 4096,16384] [--dtype bfloat16]
        [--json out.json] [--no-flex] [--only softcap,alibi]

FlashAttention's convention (B*S = 16384 tokens, H*D = 2048, D = 128),
causal (prefix-LM: its own mask only). TFLOP/s are counted on the scores a variant keeps (a sliding window
of W: each row's min(i + 1, W + 1) keys; packed documents: the causal
pairs inside each document), so a kernel that skips the tiles
a mask drops keeps its rate; "time / plain" says how much of the plain
causal kernel's time the variant takes. Timing: triton.testing.do_bench
(median, CUDA events, L2 flushed). With --gpu-time, each row also gives
the GPU time of a call (torch.profiler: the device time of every kernel
the call launches, averaged over 20 calls) for fa and Flex: do_bench's
events also count the GPU's idle gaps while a call's host work runs,
which for sub-millisecond kernels can exceed the kernels (a block-mask
forward of 0.36 ms read 0.44-0.95 ms in event loops, docs/benchmarks.md
(aw)).
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import fa  # noqa: E402
from fa import variants as V  # noqa: E402
# The GPU time of a call: the device time of every kernel it launches
# (torch.profiler), host gaps excluded.
from bench_attention import kernel_ms as gpu_time  # noqa: E402

try:
    from triton.testing import do_bench
except ImportError:  # pragma: no cover
    do_bench = None

WINDOW = 1024
DOCUMENT = 1024  # mean document length of the packed-documents mask
PREFIX = 512  # prefix-LM's prompt: every query sees it, then causal
CHUNK = 1024  # chunked local attention's chunk (causal inside it)
SINKS = 4  # sink tokens beside the window (StreamingLLM)


def kept_pairs(seq, window):
    """Causal (query, key) pairs a window of `window` keeps per head."""
    if window is None:
        return seq * (seq + 1) // 2
    full = min(seq, window + 1)
    return full * (full + 1) // 2 + (seq - full) * (window + 1)


def kept_sink_window_pairs(seq, window, sinks):
    """Causal pairs per head that `sinks` sink tokens and a window of
    `window` keep: the window's, and each sink key the window leaves."""
    extra = sum(min(sinks, max(0, row - window)) for row in range(seq))
    return kept_pairs(seq, window) + extra


def document_ids(batch, seq, mean_length):
    """Packed documents: int32 ids [B, S] in runs of 1 to 2 * mean_length
    positions (fixed seed)."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.empty(batch, seq, dtype=torch.int32)
    for b in range(batch):
        position, doc = 0, 0
        while position < seq:
            length = int(torch.randint(1, 2 * mean_length, (1,),
                                       generator=generator))
            ids[b, position:position + length] = doc
            position += length
            doc += 1
    return ids.cuda()


def kept_document_pairs(ids):
    """Causal pairs inside documents, per head (summed over the batch)."""
    total = 0
    for row in ids.cpu():
        _, counts = torch.unique_consecutive(row, return_counts=True)
        total += int((counts * (counts + 1) // 2).sum())
    return total / ids.shape[0]


def variants(heads, batch, seq):
    """(name, fa kwargs, flex score_mod, flex mask_mod, kept causal pairs
    per (batch, head))."""
    slopes = [2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)]
    slope_table = torch.tensor(slopes, device="cuda")
    ids = document_ids(batch, seq, DOCUMENT)
    causal = kept_pairs(seq, None)
    block_mask = fa.block_mask(V.document(ids), batch, None, seq, seq,
                               causal=True)
    return [
        ("causal", {}, None, None, causal),
        # Not causal: the prompt's keys for every row, causal after them
        # (the rows before the prompt's end see all of it).
        (f"prefix {PREFIX}", {"mask_mod": V.prefix_lm(PREFIX),
                              "causal": False}, None,
         lambda b, h, q, kv: (kv < PREFIX) | (q >= kv),
         causal + PREFIX * (PREFIX - 1) // 2),
        (f"window {WINDOW}", {"mask_mod": V.sliding_window(WINDOW, 0)}, None,
         lambda b, h, q, kv: (q - kv <= WINDOW), kept_pairs(seq, WINDOW)),
        # StreamingLLM's sink tokens and a window: the forward visits the
        # sinks' tile and the window's, not every tile up to the row.
        (f"sinks {SINKS} + window {WINDOW}", {"mask_mod": V.or_masks(
            lambda b, h, q, kv: kv < SINKS, V.sliding_window(WINDOW, 0))},
         None, lambda b, h, q, kv: (kv < SINKS) | (q - kv <= WINDOW),
         kept_sink_window_pairs(seq, WINDOW, SINKS)),
        (f"chunked {CHUNK}", {"mask_mod": V.chunked(CHUNK)}, None,
         lambda b, h, q, kv: (q // CHUNK) == (kv // CHUNK),
         (seq // CHUNK) * kept_pairs(CHUNK, None)),
        ("softcap 50", {"score_mod": V.softcap(50.0)},
         lambda s, b, h, q, kv: 50.0 * torch.tanh(s / 50.0), None, causal),
        ("alibi", {"score_mod": V.alibi(slopes)},
         lambda s, b, h, q, kv: s - slope_table[h] * (q - kv).abs(), None,
         causal),
        # The slopes as a captured tensor: one kernel for any values.
        ("alibi tensor", {"score_mod": V.alibi(slope_table)},
         lambda s, b, h, q, kv: s - slope_table[h] * (q - kv).abs(), None,
         causal),
        # Packed documents: the ids read per element, every tile the
        # causal mask leaves visited ...
        (f"docs ~{DOCUMENT}", {"mask_mod": V.document(ids)}, None,
         lambda b, h, q, kv: ids[b, q] == ids[b, kv],
         kept_document_pairs(ids)),
        # ... and with fa's block mask (made once, outside the timing, as
        # Flex's create_block_mask is): only the tiles inside documents.
        (f"docs ~{DOCUMENT} bm",
         {"block_mask": block_mask}, None,
         lambda b, h, q, kv: ids[b, q] == ids[b, kv],
         kept_document_pairs(ids)),
        # ... and with its whole ranges emptied: every visited tile tests
        # the mask per score (what the whole ranges save).
        (f"docs ~{DOCUMENT} bm, no whole ranges",
         {"block_mask": without_whole_ranges(block_mask)}, None,
         lambda b, h, q, kv: ids[b, q] == ids[b, kv],
         kept_document_pairs(ids)),
        # ... and the block mask's row once more, after the A/B pair (an
        # earlier run measured the first of the pair 1.9x slower than the
        # same kernel timed alone).
        (f"docs ~{DOCUMENT} bm, again", {"block_mask": block_mask}, None,
         lambda b, h, q, kv: ids[b, q] == ids[b, kv],
         kept_document_pairs(ids)),
    ]


def warm_up(fn, seconds=0.3):
    """Runs `fn` for `seconds` of wall time (the GPU's clocks back up after
    the idle of a compile)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        fn()
        torch.cuda.synchronize()


def without_whole_ranges(block_mask):
    """A copy of `block_mask` whose whole ranges are empty (end 0)."""
    key_ranges = block_mask.key_ranges.clone()
    query_ranges = block_mask.query_ranges.clone()
    key_ranges[..., 3] = 0
    query_ranges[..., 3] = 0
    return fa.BlockMask(block_mask.mask_mod, block_mask.text,
                        block_mask.causal, key_ranges, query_ranges,
                        block_mask.shape)


def block_mask_times(batch, seq, flex_create):
    """ms to make the packed documents' block mask: fa.block_mask (its
    generated program, compiled before) and Flex's create_block_mask."""
    ids = document_ids(batch, seq, DOCUMENT)
    times = {"fa": do_bench(lambda: fa.block_mask(
        V.document(ids), batch, None, seq, seq, causal=True))}
    if flex_create is not None:
        def mask(b, h, q, kv):
            return (q >= kv) & (ids[b, q] == ids[b, kv])
        times["flex"] = do_bench(lambda: flex_create(mask, batch, 1, seq,
                                                     seq))
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seqs", default="4096,16384")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--json", default="")
    parser.add_argument("--no-flex", action="store_true")
    parser.add_argument("--only", default="",
                        help="comma-separated variant names (their "
                        "beginnings) to run beside the plain causal row, "
                        "e.g. softcap,alibi")
    parser.add_argument("--gpu-time", action="store_true",
                        help="also the GPU time per call (torch.profiler, "
                        "host gaps excluded) of fa and Flex")
    args = parser.parse_args()
    only = [name for name in args.only.split(",") if name]
    dtype = getattr(torch, args.dtype)
    d = args.head_dim
    heads = 2048 // d
    flex = create_block_mask = None
    if not args.no_flex:
        try:
            from torch.nn.attention.flex_attention import (create_block_mask,
                                                           flex_attention)
            flex = torch.compile(flex_attention, dynamic=False)
            # One compile per variant and length: past dynamo's default of
            # 8 recompiles flex_attention silently falls back to its
            # unfused (materializing) implementation.
            torch._dynamo.config.recompile_limit = 256
        except ImportError:
            print("no flex_attention in this torch; fa only")
    rows = []
    print(f"{'variant':<12} {'S':>6} {'dir':>4} {'fa ms':>8} {'fa TF/s':>8} "
          f"{'/plain':>7} {'flex ms':>8} {'flex TF/s':>9} {'fa/flex':>8} "
          f"{'first call s':>12}")
    print("first call s: the first forward call (its kernel's cold compile "
          "included); fwd+bwd rows: the first backward after it (the "
          "backward's kernels)")
    for seq in (int(s) for s in args.seqs.split(",")):
        batch = max(1, 16384 // seq)
        torch.manual_seed(0)
        q, k, v = (torch.randn(batch, heads, seq, d, device="cuda",
                               dtype=dtype, requires_grad=True)
                   for _ in range(3))
        grad = torch.randn_like(q)
        plain = {}
        for name, kwargs, score_mod, mask_mod, pairs in variants(
                heads, batch, seq):
            if only and name != "causal" and not name.startswith(
                    tuple(only)):
                continue
            flops = 4 * batch * heads * d * pairs
            start = time.perf_counter()
            kwargs = {"causal": True, **kwargs}
            fa.attention(q, k, v, **kwargs)
            torch.cuda.synchronize()
            first = time.perf_counter() - start
            fwd = lambda: fa.attention(q, k, v, **kwargs)

            def fwd_bwd():
                out = fa.attention(q, k, v, **kwargs)
                torch.autograd.grad(out, (q, k, v), grad)
            start = time.perf_counter()
            fwd_bwd()
            torch.cuda.synchronize()
            first_backward = time.perf_counter() - start
            # The GPU idled through the compiles: run it for a while first,
            # or the first timing of a short kernel comes out up to 2x slow
            # (the window forward at 4k: 0.53 ms here, 0.27 timed alone).
            warm_up(fwd_bwd)
            results = {"fwd": do_bench(fwd), "fwd+bwd": do_bench(fwd_bwd)}
            gpu = {}
            if args.gpu_time:
                gpu = {"fwd": gpu_time(fwd), "fwd+bwd": gpu_time(fwd_bwd)}
            flex_results = {}
            flex_gpu = {}
            # (Flex's row of the same mask is the previous one.)
            if flex is not None and not name.endswith(("no whole ranges",
                                                        "again")):
                def causal_mask(b, h, qi, kv):
                    return qi >= kv
                mask_fn = causal_mask if mask_mod is None else \
                    (lambda b, h, qi, kv: (qi >= kv) & mask_mod(b, h, qi, kv))
                if not kwargs["causal"]:
                    mask_fn = mask_mod
                # A mask that reads the batch (documents) gets one block
                # mask per batch element.
                per_batch = name.startswith("docs")
                block_mask = create_block_mask(
                    mask_fn, batch if per_batch else 1, 1, seq, seq)
                ffwd = lambda: flex(q, k, v, score_mod=score_mod,
                                    block_mask=block_mask)

                def ffwd_bwd():
                    out = ffwd()
                    torch.autograd.grad(out, (q, k, v), grad)
                try:
                    warm_up(ffwd_bwd)
                    flex_results = {"fwd": do_bench(ffwd),
                                    "fwd+bwd": do_bench(ffwd_bwd)}
                    if args.gpu_time:
                        flex_gpu = {"fwd": gpu_time(ffwd),
                                    "fwd+bwd": gpu_time(ffwd_bwd)}
                except Exception as error:  # report, keep going
                    print(f"flex failed on {name}: {error}")
            for direction, ms in results.items():
                # fwd + bwd: 2.5x the forward's FLOPs (FlashAttention's).
                work = flops * (3.5 if direction == "fwd+bwd" else 1.0)
                if name == "causal":
                    plain[direction] = ms
                fms = flex_results.get(direction)
                row = {"variant": name, "seq": seq, "dir": direction,
                       "fa_ms": ms, "fa_tflops": work / ms / 1e9,
                       "time_vs_plain": ms / plain[direction],
                       "flex_ms": fms,
                       "flex_tflops": work / fms / 1e9 if fms else None,
                       "first_call_s": (first_backward
                                        if direction == "fwd+bwd" else first)}
                if gpu:
                    row["fa_gpu_ms"] = gpu[direction]
                    row["flex_gpu_ms"] = flex_gpu.get(direction)
                rows.append(row)
                print(f"{name:<12} {seq:>6} {direction:>4} {ms:>8.3f} "
                      f"{row['fa_tflops']:>8.1f} {row['time_vs_plain']:>7.3f} "
                      f"{fms if fms else float('nan'):>8.3f} "
                      f"{row['flex_tflops'] or float('nan'):>9.1f} "
                      f"{(fms / ms) if fms else float('nan'):>8.2f} "
                      f"{row['first_call_s']:>12.2f}"
                      + (f"  GPU time fa {gpu[direction] or float('nan'):.3f} "
                         f"flex {flex_gpu.get(direction) or float('nan'):.3f} "
                         "ms" if gpu else ""))
        if only:
            continue
        times = block_mask_times(batch, seq, create_block_mask
                                 if flex is not None else None)
        print(f"block mask of docs ~{DOCUMENT}, S={seq}: fa.block_mask "
              f"{times['fa']:.3f} ms, flex create_block_mask "
              f"{times.get('flex', float('nan')):.3f} ms")
        rows.append({"variant": f"block mask docs ~{DOCUMENT}", "seq": seq,
                     "fa_ms": times["fa"], "flex_ms": times.get("flex")})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
