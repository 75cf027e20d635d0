"""The deterministic backward with masks that narrow the visited tiles:
packed documents (~1024 tokens, a block mask) causal or not, and a sliding
window of 1024 (causal). fa.attention_backward's time in the default mode
and with deterministic=True, in one run; with --peers also SDPA's backward
on the same inputs (FlashAttention-2 and cuDNN dense, causal or not, with no
document mask; the efficient kernel with the documents as a boolean mask).

    python3 bench/bench_deterministic_masks.py [--seqs 4096,16384]
        [--head-dim 128] [--heads 16] [--peers] [--label NAME]

bf16, B 1. Times in us: triton.testing.do_bench medians (10 warm-up, 100
timed). "max |det - nondet|" is the largest difference between the two
modes' gradients (rounding: they add dQ's shares in different orders).
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import fa  # noqa: E402
from fa import variants as V  # noqa: E402
from bench_variants import document_ids  # noqa: E402
from triton.testing import do_bench  # noqa: E402


def bench_us(fn):
    fn()
    torch.cuda.synchronize()
    return do_bench(fn, warmup=10, rep=100) * 1e3


def sdpa_backward_us(backend, q, k, v, grad, **kwargs):
    """SDPA's backward alone (the forward's graph kept), or None."""
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    try:
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(*leaves, **kwargs)
            return bench_us(lambda: torch.autograd.grad(
                out, leaves, grad, retain_graph=True))
    except RuntimeError as error:
        print(f"  ({backend.name}: {str(error)[:80]})")
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seqs", default="4096,16384")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--peers", action="store_true")
    parser.add_argument("--label", default="fa")
    args = parser.parse_args()
    batch, heads, dim = 1, args.heads, args.head_dim
    for seq in [int(s) for s in args.seqs.split(",")]:
        torch.manual_seed(0)
        q, k, v = (torch.randn(batch, heads, seq, dim, device="cuda",
                               dtype=torch.bfloat16) for _ in range(3))
        ids = document_ids(batch, seq, 1024)
        cases = [(f"documents {'causal' if causal else 'full'}", causal,
                  dict(block_mask=fa.block_mask(V.document(ids), batch, None,
                                                seq, seq, causal=causal)))
                 for causal in (True, False)]
        cases.append(("window 1024 causal", True,
                      dict(mask_mod=V.sliding_window(1024, 0))))
        for name, causal, kwargs in cases:
            out, lse = fa.attention(q, k, v, causal=causal, return_lse=True,
                                    **kwargs)
            grad = torch.randn_like(out)

            def backward(deterministic):
                return fa.attention_backward(grad, q, k, v, out, lse,
                                             causal=causal,
                                             deterministic=deterministic,
                                             **kwargs)
            default_us = bench_us(lambda: backward(False))
            det_us = bench_us(lambda: backward(True))
            difference = max((a.float() - b.float()).abs().max().item()
                             for a, b in zip(backward(False), backward(True)))
            print(f"{args.label} S {seq} D {dim} {name}: default "
                  f"{default_us:.1f} us, deterministic {det_us:.1f} us "
                  f"({det_us / default_us:.2f}x), max |det - nondet| "
                  f"{difference:.2e}", flush=True)
            if not (args.peers and name.startswith("documents")):
                continue
            mode = "causal" if causal else "full"
            for label, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                                   ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                us = sdpa_backward_us(backend, q, k, v, grad, is_causal=causal)
                if us is not None:
                    print(f"  SDPA {label} dense {mode}: {us:.1f} us")
            doc = ids[0].to("cuda")
            keep = doc[:, None] == doc[None, :]
            if causal:
                keep &= torch.ones(seq, seq, dtype=torch.bool,
                                   device="cuda").tril()
            us = sdpa_backward_us(SDPBackend.EFFICIENT_ATTENTION, q, k, v,
                                  grad, attn_mask=keep)
            if us is not None:
                print(f"  SDPA efficient, documents {mode} (boolean mask): "
                      f"{us:.1f} us")
            del keep


if __name__ == "__main__":
    main()
