#!/usr/bin/env bash
# On the GPU machine (called by gpu-run.sh profile-backward): profiles the
# default backward kernels (delta, dkdv, dq) at D=64/128, S=4k, fp16, causal
# and not, with ncu: time, tensor-pipe use, occupancy, shared-memory bank
# conflicts, DRAM bytes and where warps stall. Writes to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fa-gpu-out}
cat > /tmp/fa-profile-backward.py <<'PY'
import sys, torch
sys.path.insert(0, "python")
import fa
for d in (64, 128):
    for causal in (False, True):
        h, s, b = 2048 // d, 4096, 4
        q, k, v, do = (torch.randn(b, h, s, d, device="cuda",
                                   dtype=torch.float16) for _ in range(4))
        o, lse = fa.attention(q, k, v, causal=causal, return_lse=True)
        fa.attention_backward(do, q, k, v, o, lse, causal=causal)
        torch.cuda.synchronize()
PY
ncu --clock-control none --kernel-name regex:fa_bwd --launch-skip 0 \
  --launch-count 12 \
  --metrics gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,dram__bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_barrier,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warp_latency_issue_stalled_short_scoreboard,smsp__average_warp_latency_issue_stalled_math_pipe_throttle,smsp__average_warp_latency_issue_stalled_mio_throttle,smsp__average_warp_latency_issue_stalled_lg_throttle,smsp__average_warp_latency_issue_stalled_wait,smsp__average_warp_latency_issue_stalled_not_selected,smsp__average_warp_latency_issue_stalled_selected \
  python3 /tmp/fa-profile-backward.py > "$OUT/ncu-backward.txt" 2>&1
rc=$?
grep -E "fa_bwd|duration|hmma|throughput|bank|dram__bytes|warps_active|stalled|inst_executed" "$OUT/ncu-backward.txt" | head -250
# The step fails when ncu (or the profiled script) did.
exit $rc
