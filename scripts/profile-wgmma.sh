#!/usr/bin/env bash
# On the GPU machine: ncu sections (speed of light, compute workload with the
# tensor pipes, warp states) of the default wgmma kernel at D=128, S=4k,
# fp16, non-causal; one launch after warm-up. Writes $OUT/ncu-wgmma.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fa-gpu-out}
cat > /tmp/fa-profile-wgmma.py <<'PY'
import sys, torch
sys.path.insert(0, "python")
import fa
d, s, b = 128, 4096, 4
q, k, v = (torch.randn(b, 2048 // d, s, d, device="cuda", dtype=torch.float16)
           for _ in range(3))
for _ in range(3):
    fa.attention(q, k, v, strategy="wgmma")
torch.cuda.synchronize()
PY
ncu --clock-control none --kernel-name regex:fa_fwd --launch-skip 2 \
  --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section WarpStateStats --section Occupancy \
  python3 /tmp/fa-profile-wgmma.py > "$OUT/ncu-wgmma.txt" 2>&1
rc=$?
grep -vE "^==PROF==|^\s*$|----" "$OUT/ncu-wgmma.txt" | head -90
exit $rc
