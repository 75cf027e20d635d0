#!/usr/bin/env bash
# On the GPU machine (gpu-run.sh profile-rows): the profile evidence for
# every row of the speed tables (issue: Hopper training kernels), one ncu
# pass over one process that runs each row once: the forward kernel of the
# 36 forward rows (f16/bf16, D 64/128/256, S 1k/4k/16k, causal and not;
# B x S = 16k, H x D = 2048) and the dkdv kernel of the 24 backward rows and
# of their deterministic mode. Per kernel: time, the tensor pipe's active
# share of the elapsed cycles, issue slots busy, and the largest stall
# reasons (cycles per issued instruction, WarpStateStats), tabled by
# scripts/profile-rows-table.py into $OUT/profile-rows.txt.
#   scripts/profile-rows.sh [forward|backward|all]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fa-gpu-out}
which=${1:-all}
cat > /tmp/fa-profile-rows.py <<PY
import sys, torch
sys.path.insert(0, "python")
import fa
which = "$which"
rows = []
for dtype in (torch.float16, torch.bfloat16):
    for d in ((64, 128, 256) if which != "backward" else ()):
        for s in (1024, 4096, 16384):
            for causal in (False, True):
                rows.append(("forward", dtype, d, s, causal))
    for mode in (("backward", "deterministic") if which != "forward" else ()):
        for d in (64, 128):
            for s in (1024, 4096, 16384):
                for causal in (False, True):
                    rows.append((mode, dtype, d, s, causal))
for mode, dtype, d, s, causal in rows:
    b, h = max(1, 16384 // s), 2048 // d
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype)
               for _ in range(3))
    if mode == "forward":
        fa.attention(q, k, v, causal=causal)
    else:
        o, lse = fa.attention(q, k, v, causal=causal, return_lse=True)
        fa.attention_backward(torch.randn_like(q), q, k, v, o, lse,
                              causal=causal,
                              deterministic=mode == "deterministic")
    torch.cuda.synchronize()
    print(f"ROW {mode} {str(dtype)[6:]} {d} {s} {causal}", flush=True)
PY
# The rows' kernels compile first (no ncu). Then one ncu pass a group: the
# forward rows' forward kernels, the backward rows' dkdv kernels (not the
# forward kernels that give them O and LSE).
rc=0
: > "$OUT/profile-rows.txt"
for group in forward backward; do
  [ "$which" = all ] || [ "$which" = "$group" ] || continue
  sed "s/^which = .*/which = \"$group\"/" /tmp/fa-profile-rows.py \
    > /tmp/fa-profile-rows-$group.py
  python3 /tmp/fa-profile-rows-$group.py > "$OUT/profile-rows-warm-$group.txt" 2>&1 ||
    { rc=1; continue; }
  kernels='fa_fwd'
  [ "$group" = backward ] && kernels='_dkdv'
  ncu --clock-control none --kernel-name regex:"$kernels" \
    --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section WarpStateStats --print-details all \
    python3 /tmp/fa-profile-rows-$group.py > "$OUT/profile-rows-ncu-$group.txt" 2>&1 ||
    rc=1
  python3 scripts/profile-rows-table.py "$OUT/profile-rows-ncu-$group.txt" \
    >> "$OUT/profile-rows.txt"
done
cat "$OUT/profile-rows.txt"
exit $rc
