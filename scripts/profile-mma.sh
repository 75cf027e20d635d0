#!/usr/bin/env bash
# On the GPU machine (called by gpu-run.sh profile): profiles the default
# mma kernels at D=64/128/256 (S=4k, fp16, causal and not; with
# FA_PROFILE_STRATEGY=wgmma the Hopper ones) with ncu and dumps
# the SASS instruction mix of their cubins. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fa-gpu-out}
cat > /tmp/fa-profile.py <<'PY'
import sys, torch
sys.path.insert(0, "python")
import fa, os
strategy = os.environ.get("FA_PROFILE_STRATEGY", "auto")
for d in (64, 128, 256):
    for causal in (False, True):
        h, s, b = 2048 // d, 4096, 4
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16)
                   for _ in range(3))
        for _ in range(2):
            fa.attention(q, k, v, causal=causal, strategy=strategy)
        torch.cuda.synchronize()
PY
ncu --clock-control none --kernel-name regex:fa_fwd --launch-skip 0 \
  --launch-count 12 \
  --metrics gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,dram__bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_barrier,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warp_latency_issue_stalled_short_scoreboard,smsp__average_warp_latency_issue_stalled_math_pipe_throttle,smsp__average_warp_latency_issue_stalled_mio_throttle,smsp__average_warp_latency_issue_stalled_wait,smsp__average_warp_latency_issue_stalled_not_selected,smsp__average_warp_latency_issue_stalled_selected \
  python3 /tmp/fa-profile.py > "$OUT/ncu.txt" 2>&1
grep -E "fa_fwd|duration|hmma|gmma|throughput|bank|dram__bytes|warps_active|stalled.*ratio" "$OUT/ncu.txt" | head -200
# Cubins that scripts/pack-gpu.sh compiled with fa-compile.
for f in .gpu/*.cubin; do
  [ -f "$f" ] || continue
  cuobjdump --dump-sass "$f" > /tmp/sass.txt 2>/dev/null || continue
  name=$(grep -m1 -o "Function : [a-z0-9_]*" /tmp/sass.txt)
  echo "$name: HMMA $(grep -c HMMA /tmp/sass.txt) HGMMA $(grep -c HGMMA /tmp/sass.txt)" \
       "LDSM $(grep -c LDSM /tmp/sass.txt)" \
       "LDGSTS $(grep -c LDGSTS /tmp/sass.txt) BAR $(grep -c 'BAR.SYNC' /tmp/sass.txt)" \
       "LDL $(grep -c LDL /tmp/sass.txt) STL $(grep -c STL /tmp/sass.txt)" \
       "MUFU.EX2 $(grep -c MUFU.EX2 /tmp/sass.txt) SHFL $(grep -c SHFL /tmp/sass.txt)" \
       "instructions $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' /tmp/sass.txt)"
  cp /tmp/sass.txt "$OUT/$(echo "$name" | awk '{print $3}').sass"
done
