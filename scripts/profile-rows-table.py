#!/usr/bin/env python3
"""Tables scripts/profile-rows.sh's ncu output: one line per profiled kernel,
matched in launch order with the rows the profiled process printed (ROW mode
dtype D S causal), with its time, the tensor pipe's share of the elapsed
cycles, issue slots busy and the four largest stall reasons (cycles per
issued instruction, all warps of the kernel: the producer's idle waits
count too)."""
import re
import sys


def main(path):
    text = open(path).read()
    rows = re.findall(r"^ROW (\S+) (\S+) (\d+) (\d+) (\S+)$", text, re.M)
    # A kernel's report starts at its name line: "  name (grid)x(block), ...".
    parts = re.split(r"^  (\S+) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\), Context",
                     text, flags=re.M)
    kernels = []
    for name, body in zip(parts[1::2], parts[2::2]):
        def value(label):
            m = re.search(r"^\s+" + re.escape(label) + r"\s+(\S+)\s+([\d,.]+)",
                          body, re.M)
            if not m:
                return float("nan")
            scale = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3}
            return float(m.group(2).replace(",", "")) * scale.get(m.group(1), 1)
        stalls = sorted(
            ((float(v), k) for k, v in re.findall(
                r"^\s+Stall ([A-Za-z ]+?)\s+inst\s+([\d.]+)", body, re.M)),
            reverse=True)[:4]
        kernels.append((name, value("Duration"), value("Tensor (All)"),
                        value("Issue Slots Busy"),
                        value("Warp Cycles Per Issued Instruction"), stalls))
    if len(kernels) != len(rows):
        print(f"warning: {len(rows)} rows, {len(kernels)} kernels profiled")
    print(f"{'mode':>13} {'dtype':>8} {'D':>4} {'S':>6} {'causal':>6} | "
          f"{'us':>8} {'tensor%':>7} {'issue%':>6} {'cyc/inst':>8} | "
          "largest stalls (cycles per issued instruction)")
    for (mode, dtype, d, s, causal), kernel in zip(rows, kernels):
        name, us, tensor, issue, cpi, stalls = kernel
        top = ", ".join(f"{k.lower()} {v:.2f}" for v, k in stalls)
        print(f"{mode:>13} {dtype:>8} {d:>4} {s:>6} {causal:>6} | "
              f"{us:8.0f} {tensor:7.1f} {issue:6.1f} {cpi:8.2f} | "
              f"{top}   [{name}]")


if __name__ == "__main__":
    main(sys.argv[1])
