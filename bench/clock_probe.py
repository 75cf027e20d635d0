"""SM clock and board power while one attention implementation runs back to
back: is a kernel's speed in a long benchmark set by a lower clock (power
cap) rather than by its schedule? For each implementation (fa wgmma, SDPA
cuDNN, SDPA FLASH_ATTENTION) on the same f16 problem (FlashAttention's
convention, B*S = 16384, H*D = 2048, no mask unless --causal), launches it
without pause for --seconds while nvidia-smi samples every 50 ms, then
prints the median SM clock, the median power, the throughput over the
window, and the same throughput scaled to the highest clock seen (what the
schedule would give at equal clocks).

    python3 bench/clock_probe.py [--dim 128] [--seqs 4096,16384]
        [--seconds 4] [--causal]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import fa  # noqa: E402


# The GPU torch runs on (device 0 of CUDA_VISIBLE_DEVICES: an index or a
# UUID, both of which nvidia-smi -i takes); other GPUs of the host are not
# sampled.
DEVICE = (os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
          or "0")


def sampled(fn, seconds):
    """Runs fn back to back for `seconds`; returns (calls per second, SM
    clocks in MHz, power in W) sampled by nvidia-smi meanwhile."""
    fn()
    torch.cuda.synchronize()
    smi = subprocess.Popen(
        ["nvidia-smi", "-i", DEVICE, "--query-gpu=clocks.sm,power.draw",
         "--format=csv,noheader,nounits", "-lms", "50"],
        stdout=subprocess.PIPE, text=True)
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            fn()
        calls += 10
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    smi.terminate()
    out, _ = smi.communicate()
    clocks, power = [], []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            clocks.append(float(parts[0]))
            power.append(float(parts[1]))
        except (ValueError, IndexError):
            continue
    return calls / elapsed, clocks, power


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--seqs", default="4096,16384")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--causal", action="store_true")
    args = parser.parse_args()
    d = args.dim
    for s in (int(x) for x in args.seqs.split(",")):
        b, h = max(1, 16384 // s), 2048 // d
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16)
                   for _ in range(3))
        flops = 4 * b * h * s * s * d / (2 if args.causal else 1)

        def sdpa(backend):
            def run():
                with sdpa_kernel(backend):
                    F.scaled_dot_product_attention(q, k, v,
                                                   is_causal=args.causal)
            return run
        impls = [("fa wgmma", lambda: fa.attention(q, k, v, causal=args.causal,
                                                   strategy="wgmma")),
                 ("sdpa cudnn", sdpa(SDPBackend.CUDNN_ATTENTION)),
                 ("sdpa flash", sdpa(SDPBackend.FLASH_ATTENTION))]
        rows = []
        for name, fn in impls:
            rate, clocks, power = sampled(fn, args.seconds)
            rows.append((name, rate * flops / 1e12,
                         statistics.median(clocks) if clocks else 0.0,
                         max(clocks) if clocks else 0.0,
                         statistics.median(power) if power else 0.0))
        top = max(r[3] for r in rows) or 1.0
        print(f"D={d} S={s} B={b} H={h} causal={args.causal}, "
              f"{args.seconds:.0f} s each:")
        for name, tf, clock, _, watts in rows:
            scaled = tf * top / clock if clock else 0.0
            print(f"  {name:10s} {tf:6.1f} TFLOP/s  SM clock {clock:6.0f} MHz"
                  f"  power {watts:5.0f} W  at {top:.0f} MHz: {scaled:6.1f}")


if __name__ == "__main__":
    main()
