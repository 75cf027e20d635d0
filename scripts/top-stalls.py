"""The SASS instructions with the most warp stall samples in an ncu
source page (--page source --print-source sass --csv), with their three
largest stall reasons, after the stall reasons of the whole kernel.

    python3 scripts/top-stalls.py SASS.csv [COUNT]
"""
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
count = int(sys.argv[2]) if len(sys.argv) > 2 else 60
head = next((i for i, r in enumerate(rows) if any("Source" == c for c in r)), None)
if head is None:
    print("no source table:", rows[:3]); sys.exit(0)
cols = rows[head]
def col(name):
    return next((i for i, c in enumerate(cols) if c.startswith(name)), None)
src, samples = col("Source"), col("Warp Stall Sampling (All")
stall_cols = [i for i, c in enumerate(cols)
              if "stall" in c.lower() and not c.startswith("Warp Stall Sampling")]
if not stall_cols:
    print("columns:", cols)
body = [r for r in rows[head + 1:] if len(r) == len(cols)]
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
total = sum(num(r[samples]) for r in body) or 1
reasons = {cols[i]: sum(num(r[i]) for r in body) for i in stall_cols}
print("all instructions, stall reasons (% of samples):",
      ", ".join(f"{k} {100 * v / total:.1f}" for k, v in
                sorted(reasons.items(), key=lambda kv: -kv[1])[:10]))
for r in sorted(body, key=lambda r: -num(r[samples]))[:count]:
    top = sorted(stall_cols, key=lambda i: -num(r[i]))[:3]
    why = " ".join(f"{cols[i]}:{100 * num(r[i]) / total:.1f}" for i in top if num(r[i]))
    print(f"{100 * num(r[samples]) / total:5.1f}%  {r[src][:70]:70s} {why}")
