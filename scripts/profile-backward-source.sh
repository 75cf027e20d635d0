#!/usr/bin/env bash
# On the GPU machine (called by gpu-run.sh profile-backward-source): where
# the default D=128 f16 backward's dkdv kernel stalls, per SASS instruction.
# ncu samples warp states (SourceCounters, WarpStateStats) on one launch
# (S=4k, B=4, H=16, causal off); the report is exported and its source
# page printed as CSV, then the 60 instructions with the most stall samples
# are listed with their reasons. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fa-gpu-out}
cat > /tmp/fa-profile-source.py <<'PY'
import sys, torch
sys.path.insert(0, "python")
import fa
h, s, b, d = 16, 4096, 4, 128
q, k, v, do = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16)
               for _ in range(4))
o, lse = fa.attention(q, k, v, return_lse=True)
fa.attention_backward(do, q, k, v, o, lse)
torch.cuda.synchronize()
PY
ncu --clock-control none --kernel-name regex:dkdv --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section SchedulerStats \
  --export "$OUT/dkdv-d128" --force-overwrite \
  python3 /tmp/fa-profile-source.py > "$OUT/ncu-source-run.txt" 2>&1
rc=$?
tail -5 "$OUT/ncu-source-run.txt"
ncu --import "$OUT/dkdv-d128.ncu-rep" --print-details all \
  > "$OUT/dkdv-d128-details.txt" 2>&1
grep -iE "stall|warp cycles|issued|eligible" "$OUT/dkdv-d128-details.txt" | head -40
ncu --import "$OUT/dkdv-d128.ncu-rep" --page source --print-source sass --csv \
  > "$OUT/dkdv-d128-sass.csv" 2>&1
python3 - "$OUT/dkdv-d128-sass.csv" > "$OUT/dkdv-d128-top.txt" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next((i for i, r in enumerate(rows) if any("Source" == c for c in r)), None)
if head is None:
    print("no source table:", rows[:3]); sys.exit(0)
cols = rows[head]
def col(name):
    return next((i for i, c in enumerate(cols) if c.startswith(name)), None)
src, samples = col("Source"), col("Warp Stall Sampling (All")
stall_cols = [i for i, c in enumerate(cols) if c.startswith("stall_") or "Stall" in c]
body = [r for r in rows[head + 1:] if len(r) == len(cols)]
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
total = sum(num(r[samples]) for r in body) or 1
print("columns:", [cols[i] for i in stall_cols][:40])
for r in sorted(body, key=lambda r: -num(r[samples]))[:60]:
    print(f"{100 * num(r[samples]) / total:5.1f}%  {r[src][:90]}")
PY
head -70 "$OUT/dkdv-d128-top.txt"
exit $rc
