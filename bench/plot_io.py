"""The IO model against measured DRAM traffic: reads bench/measure_io.py's
JSON, asks fa-compile for the model of each measured problem (fa's
schedule as the runtime picked it, and standard attention), prints a
Markdown table and draws bytes vs sequence length (log-log), one panel
per dtype.

    python3 bench/plot_io.py io-measured.json -o io.png
        [--fa-compile build/bin/fa-compile] [--arch sm_90a]
        [--markdown table.md]

A model row is bytes read + written; "measured" is dram__bytes_read.sum +
dram__bytes_write.sum of the same forward. "compulsory" is the floor: Q, K,
V read once, O and LSE written once.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def model(fa_compile, arch, row, schedule):
    """fa-compile's IO model for the measured problem and schedule."""
    shape = ",".join(str(v) for v in (row["batch"], row["heads"], row["heads"],
                                      row["seq"], row["seq"]))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "io.json")
        command = [fa_compile, f"--head-dim={row['head_dim']}",
                   f"--dtype={DTYPES[row['dtype']]}", f"--arch={arch}",
                   f"--strategy={schedule['strategy']}",
                   f"--block-m={schedule['block_m']}",
                   f"--block-n={schedule['block_n']}",
                   f"--num-warps={schedule['num_warps']}",
                   "--emit=fa", f"-o={os.devnull}",
                   f"--io-shape={shape}", f"--io-json={path}"]
        if schedule["strategy"] != "simt":
            command.append(f"--stages={schedule['stages']}")
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"plot_io: {' '.join(command)} failed:\n{result.stderr}")
        with open(path) as f:
            return json.load(f)


def total(estimate):
    return estimate["bytes_read"] + estimate["bytes_written"]


def gb(value):
    return f"{value / 1e9:.3g}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("measured")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--fa-compile", default="build/bin/fa-compile")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    with open(args.measured) as f:
        measured = json.load(f)
    rows = measured["rows"]

    # (dtype, seq) -> {"fa": row, "standard": row, "model": fa-compile json}
    problems = {}
    for row in rows:
        entry = problems.setdefault((row["dtype"], row["seq"]), {})
        entry[row["impl"]] = row
    table = ["| dtype | S | fa schedule | compulsory | fa model | "
             "fa measured | standard model | standard measured | "
             "standard / fa measured |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for (dtype, seq), entry in sorted(problems.items()):
        if "fa" not in entry or "standard" not in entry:
            sys.exit(f"plot_io: {dtype} S={seq} lacks a measurement of fa "
                     "or standard attention")
        schedule = entry["fa"]["schedule"]
        entry["model"] = model(args.fa_compile, args.arch, entry["fa"],
                               schedule)
        fa_measured, standard_measured = (total(entry[k])
                                          for k in ("fa", "standard"))
        table.append(
            f"| {dtype} | {seq} | {schedule['strategy']} "
            f"{schedule['block_m']}x{schedule['block_n']} | "
            f"{gb(total(entry['model']['compulsory']))} GB | "
            f"{gb(total(entry['model']['tiled']))} GB | "
            f"{gb(fa_measured)} GB | "
            f"{gb(total(entry['model']['standard']))} GB | "
            f"{gb(standard_measured)} GB | "
            f"{standard_measured / fa_measured:.1f}x |")
    text = "\n".join(table)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")

    dtypes = sorted({dtype for dtype, _ in problems})
    figure, axes = plt.subplots(1, len(dtypes), figsize=(6 * len(dtypes), 4.5),
                                squeeze=False)
    for axis, dtype in zip(axes[0], dtypes):
        seqs = sorted(seq for d, seq in problems if d == dtype)
        entries = [problems[(dtype, seq)] for seq in seqs]
        first = entries[0]
        series = (
            ("standard attention, measured", "tab:red", "o-",
             [total(e["standard"]) for e in entries]),
            ("standard attention, model", "tab:red", "x--",
             [total(e["model"]["standard"]) for e in entries]),
            ("fa, measured", "tab:blue", "o-",
             [total(e["fa"]) for e in entries]),
            ("fa, model (no cache)", "tab:blue", "x--",
             [total(e["model"]["tiled"]) for e in entries]),
            ("compulsory (Q, K, V, O, LSE once)", "tab:gray", ":",
             [total(e["model"]["compulsory"]) for e in entries]),
        )
        for label, color, style, values in series:
            axis.plot(seqs, values, style, color=color, label=label)
        schedule = first["fa"]["schedule"]
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("sequence length N")
        axis.set_ylabel("HBM bytes (read + written)")
        axis.set_title(f"{dtype}, D={first['fa']['head_dim']}, "
                       f"H={first['fa']['heads']}, fa {schedule['strategy']} "
                       f"{schedule['block_m']}x{schedule['block_n']}")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(f"Attention forward DRAM traffic on "
                    f"{measured.get('device', 'the GPU')} (ncu) vs the IO model")
    figure.tight_layout()
    figure.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
