#!/usr/bin/env bash
# On the GPU machine (gpu-run.sh profile-source): where one default kernel
# stalls, per SASS instruction. ncu samples warp states (SourceCounters,
# WarpStateStats, SchedulerStats) on one launch, S=4k, B=4, H*D=2048,
# f16, no mask; the report is exported, its source page printed as CSV and
# the 60 instructions with the most stall samples listed with their three
# largest stall reasons. Writes to $OUT/<target>-*.
#   scripts/profile-source.sh [dkdv-d128|wgmma-d128|wgmma-d256|mma-d128]...
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fa-gpu-out}
status=0
for target in "${@:-dkdv-d128}"; do
  case $target in
  dkdv-d128) d=128 kernel=dkdv call='o, lse = fa.attention(q, k, v, return_lse=True)
fa.attention_backward(torch.randn_like(q), q, k, v, o, lse)' ;;
  wgmma-d*) d=${target#wgmma-d} kernel=fa_fwd call='fa.attention(q, k, v, strategy="wgmma")' ;;
  mma-d*) d=${target#mma-d} kernel=fa_fwd call='fa.attention(q, k, v, strategy="mma")' ;;
  *) echo "unknown target $target"; status=2; continue ;;
  esac
  cat > /tmp/fa-profile-source.py <<PY
import sys, torch
sys.path.insert(0, "python")
import fa
d, s, b = $d, 4096, 4
q, k, v = (torch.randn(b, 2048 // d, s, d, device="cuda", dtype=torch.float16)
           for _ in range(3))
$call
torch.cuda.synchronize()
PY
  echo "== $target"
  ncu --clock-control none --kernel-name regex:$kernel --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SchedulerStats \
    --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --export "$OUT/$target" --force-overwrite \
    python3 /tmp/fa-profile-source.py > "$OUT/$target-run.txt" 2>&1 || status=1
  tail -3 "$OUT/$target-run.txt"
  ncu --import "$OUT/$target.ncu-rep" --print-details all \
    > "$OUT/$target-details.txt" 2>&1
  grep -iE "stall|warp cycles|issued|eligible|duration|pipe|throughput" \
    "$OUT/$target-details.txt" | head -50
  ncu --import "$OUT/$target.ncu-rep" --page source --print-source sass --csv \
    > "$OUT/$target-sass.csv" 2>&1
  python3 - "$OUT/$target-sass.csv" > "$OUT/$target-top.txt" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
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
for r in sorted(body, key=lambda r: -num(r[samples]))[:60]:
    top = sorted(stall_cols, key=lambda i: -num(r[i]))[:3]
    why = " ".join(f"{cols[i]}:{100 * num(r[i]) / total:.1f}" for i in top if num(r[i]))
    print(f"{100 * num(r[samples]) / total:5.1f}%  {r[src][:70]:70s} {why}")
PY
  head -70 "$OUT/$target-top.txt"
done
exit $status
