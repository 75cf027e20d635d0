"""Heatmap of an fa-sweep: one cell per (block_m, block_n), for the configs
of one warp count and stage count.

    python3 bench/plot_sweep.py sweep.json -o heatmap.png
        [--metric registers|blocks_per_sm|tflops] [--warps N] [--stages N]
        [--all]

--all draws one panel per (warps, stages) of the sweep (the mma grid).
The metric defaults to tflops when the sweep was timed (a "tflops" field),
else registers. Spilling configs are hatched and marked "spills", timed
configs whose output failed the float64 check "WRONG"; configs
the resource model or the compiler rejected are gray, labeled with the
limit that rejected them. Prints one line per cell (the picture's data).
"""

import argparse
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rejection_label(reason):
    """A short name for the limit in a rejection reason."""
    # The reason proper follows the config's description
    # ("... placement (block-m=64 ... stages=1): block-m 64 is not ...").
    reason = reason.split("): ", 1)[-1]
    for pattern, label in ((r"shared memory", "shared mem"),
                           (r"thread grid|thread rows|divide", "thread grid"),
                           (r"register", "registers"),
                           (r"stages", "stages"),
                           (r"warps|fragments", "warps")):
        if re.search(pattern, reason):
            return label
    return "rejected"


def draw(fig, ax, sweep, rows, metric, warps, stages):
    """One heatmap panel: the rows of one warp count and stage count."""
    ms = sorted({r["block_m"] for r in rows})
    ns = sorted({r["block_n"] for r in rows})
    cell = {(r["block_m"], r["block_n"]): r for r in rows}
    values = [[float("nan")] * len(ns) for _ in ms]
    for i, m in enumerate(ms):
        for j, n in enumerate(ns):
            r = cell.get((m, n))
            if r and r["status"] != "rejected" and metric in r:
                values[i][j] = r[metric]
    image = ax.imshow(values, cmap="viridis", aspect="auto")
    fig.colorbar(image, ax=ax, label=metric)
    finite = [x for row in values for x in row if x == x]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)

    def text_color(value):
        # Dark text on the bright end of viridis.
        share = (value - low) / (high - low) if high > low else 0.0
        return "black" if share > 0.6 else "white"
    for i, m in enumerate(ms):
        for j, n in enumerate(ns):
            r = cell.get((m, n))
            if r is None:
                continue
            if r["status"] == "rejected":
                label = rejection_label(r.get("reason", ""))
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1,
                                           color="0.8"))
                ax.text(j, i, label, ha="center", va="center", fontsize=8)
            else:
                text = f"{r[metric]:.0f}" if metric in r else "?"
                if r["status"] == "spills":
                    ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1,
                                               fill=False, hatch="//",
                                               edgecolor="red"))
                    text += "\nspills"
                if r.get("check", "ok") != "ok":  # timed, failed its check
                    text += "\nWRONG"
                ax.text(j, i, text, ha="center", va="center", fontsize=9,
                        color=text_color(values[i][j]))
            print(f"warps={warps} stages={stages} block_m={m} block_n={n}: "
                  f"{r['status']}"
                  + (f" ({rejection_label(r.get('reason', ''))})"
                     if r["status"] == "rejected"
                     else f" {metric}={r.get(metric)}")
                  + (f" check={r['check']}" if "check" in r else ""))
    ax.set_xticks(range(len(ns)), [str(n) for n in ns])
    ax.set_yticks(range(len(ms)), [str(m) for m in ms])
    ax.set_xlabel("block_n (B_c)")
    ax.set_ylabel("block_m (B_r)")
    ax.set_title(f"D={sweep['head_dim']} {sweep['dtype']} "
                 f"{sweep['strategy']} {sweep['arch']}"
                 f"{' causal' if sweep.get('causal') else ''}, "
                 f"{warps} warps, {stages} stage(s): {metric}", fontsize=10)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("sweep")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--metric")
    parser.add_argument("--warps", type=int)
    parser.add_argument("--stages", type=int)
    parser.add_argument("--all", action="store_true",
                        help="one panel per (warps, stages) of the sweep")
    args = parser.parse_args()
    with open(args.sweep) as f:
        sweep = json.load(f)
    rows = sweep["rows"]
    if not rows:
        sys.exit("plot_sweep: the sweep has no rows")
    if args.all:
        panels = sorted({(r["num_warps"], r["stages"]) for r in rows})
    else:
        panels = [(args.warps or rows[0]["num_warps"],
                   args.stages or rows[0]["stages"])]
    selected = []
    for warps, stages in panels:
        panel = [r for r in rows if r["num_warps"] == warps
                 and r["stages"] == stages]
        if not panel:
            sys.exit(f"plot_sweep: no rows with num_warps={warps} "
                     f"stages={stages}")
        selected.append((warps, stages, panel))
    metric = args.metric or ("tflops" if any("tflops" in r for r in rows)
                             else "registers")
    ms = {r["block_m"] for r in rows}
    ns = {r["block_n"] for r in rows}
    columns = min(2, len(selected))
    lines = (len(selected) + columns - 1) // columns
    fig, axes = plt.subplots(lines, columns, squeeze=False,
                             figsize=(columns * (1.6 * len(ns) + 2),
                                      lines * (1.1 * len(ms) + 1.8)))
    for ax, (warps, stages, panel) in zip(axes.flat, selected):
        draw(fig, ax, sweep, panel, metric, warps, stages)
    for ax in list(axes.flat)[len(selected):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
