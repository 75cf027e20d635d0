"""DRAM traffic of attention measured with Nsight Compute: fa's generated
forward kernel against standard attention (torch eager: S = Q K^T,
P = softmax(S), O = P V, with S and P in HBM), over sequence lengths.

    python3 bench/measure_io.py --json io.json [--seqs 1024,2048,...]
        [--heads 16] [--head-dim 128] [--dtypes float16,float32]

For each dtype, implementation and length it runs this script again under
`ncu --clock-control none --profile-from-start off` with the metrics
dram__bytes_read.sum, dram__bytes_write.sum and gpu__time_duration.sum,
and sums them over the kernels of one forward (the inputs are made and the
kernel compiled before the profiled range). The softmax scale is folded
into Q before the range so that standard attention is exactly its three
kernels. bench/plot_io.py puts these figures next to the IO model.
"""

import argparse
import csv
import io
import json
import os
import subprocess
import sys

IMPLEMENTATIONS = ("fa", "standard")


def profiled_forward(impl, dtype_name, seq, heads, head_dim):
    """The measured process: one forward inside cudaProfilerStart/Stop."""
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..",
                                    "python"))
    import fa

    dtype = getattr(torch, dtype_name)
    q, k, v = (torch.randn(1, heads, seq, head_dim, device="cuda",
                           dtype=dtype) for _ in range(3))
    scale = head_dim ** -0.5
    if impl == "fa":
        # The schedule the runtime picks, for the IO model (ncu passes the
        # application's output through).
        kernel = fa.prepare_kernel(head_dim, dtype=dtype_name)
        print("fa-kernel: " + json.dumps(
            {key: kernel[key] for key in ("name", "strategy", "block_m",
                                          "block_n", "num_warps", "stages")}))
        run = lambda: fa.attention(q, k, v)  # noqa: E731
    else:
        q = q * scale

        def run():
            s = torch.matmul(q, k.transpose(-2, -1))
            p = torch.softmax(s, dim=-1)
            return torch.matmul(p, v)
    run()  # compile (fa) and pick the cuBLAS kernels (torch) outside
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    run()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum",
           "gpu__time_duration.sum")


def measure(impl, dtype_name, seq, heads, head_dim):
    """Runs one profiled forward under ncu; returns the summed metrics and
    the kernel names."""
    command = ["ncu", "--clock-control", "none", "--profile-from-start",
               "off", "--csv", "--print-units", "base", "--metrics", ",".join(METRICS),
               sys.executable, os.path.abspath(__file__), "--profile", impl,
               dtype_name, str(seq), str(heads), str(head_dim)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"ncu failed ({result.returncode}) on {impl} "
                           f"{dtype_name} S={seq}:\n{result.stdout[-2000:]}"
                           f"{result.stderr[-2000:]}")
    # ncu's CSV starts at the header line; its own messages come before.
    lines = result.stdout.splitlines()
    schedule = next((json.loads(line[len("fa-kernel: "):]) for line in lines
                     if line.startswith("fa-kernel: ")), None)
    start = next(i for i, line in enumerate(lines)
                 if line.startswith('"ID"'))
    totals = {m: 0.0 for m in METRICS}
    kernels = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        name, value = row["Metric Name"], row["Metric Value"]
        if name not in totals:
            continue
        factor = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9,
                  "ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6,
                  "ms": 1e-3, "msecond": 1e-3, "s": 1,
                  "second": 1}[row["Metric Unit"]]
        totals[name] += float(value.replace(",", "")) * factor
        if name == METRICS[0]:
            kernels.append(row["Kernel Name"][:60])
    if not kernels:
        raise RuntimeError(f"ncu profiled no kernel for {impl} {dtype_name} "
                           f"S={seq}")
    return {"bytes_read": totals[METRICS[0]],
            "bytes_written": totals[METRICS[1]],
            "seconds": totals[METRICS[2]], "kernels": kernels,
            "schedule": schedule}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--profile":
        impl, dtype_name, seq, heads, head_dim = sys.argv[2:7]
        profiled_forward(impl, dtype_name, int(seq), int(heads),
                         int(head_dim))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    parser.add_argument("--seqs", default="512,1024,2048,4096,8192,16384")
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtypes", default="float16,float32")
    args = parser.parse_args()
    import torch
    device = torch.cuda.get_device_name()
    rows = []
    for dtype_name in args.dtypes.split(","):
        for seq in map(int, args.seqs.split(",")):
            for impl in IMPLEMENTATIONS:
                row = {"impl": impl, "dtype": dtype_name, "batch": 1,
                       "heads": args.heads, "head_dim": args.head_dim,
                       "seq": seq}
                row.update(measure(impl, dtype_name, seq, args.heads,
                                   args.head_dim))
                rows.append(row)
                print(f"{impl:8} {dtype_name:8} S={seq:6}: "
                      f"read {row['bytes_read'] / 1e6:10.1f} MB, written "
                      f"{row['bytes_written'] / 1e6:10.1f} MB, "
                      f"{row['seconds'] * 1e3:8.3f} ms, "
                      f"{len(row['kernels'])} kernel(s)", flush=True)
                # Written after every row: a cut run keeps what it measured.
                with open(args.json, "w") as f:
                    json.dump({"device": device, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
