#!/usr/bin/env bash
# On the GPU machine (gpu-run.sh profile-block-mask): the packed-documents
# forward of bench/bench_variants.py (bf16, D 128, causal, B x S = 16k,
# documents of ~1024) with its block mask, and with the same block mask
# whose whole ranges are emptied: how many visited tiles each treats as
# whole, then ncu (speed of light, warp states, instruction mix, source
# counters) on one launch of each and the 40 SASS instructions with the
# most stall samples. Before ncu, both are timed in one process (forward
# and forward + backward with do_bench, as bench_variants.py does, and the
# kernels torch.profiler sees per call) with the default tiles and each of
# FA_PROFILE_TILES (e.g. "192x64w12s2"). FA_PROFILE_NCU=0: the timing only.
# Writes to $OUT/bm-*.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fa-gpu-out}
S=${FA_PROFILE_SEQ:-16384}
status=0
cat > /tmp/fa-profile-bm.py <<PY
import os, sys, torch
sys.path.insert(0, "python"); sys.path.insert(0, "bench")
import fa
from fa import variants as V
import bench_variants as BV
s, d = $S, 128
b, h = max(1, 16384 // s), 2048 // d
ids = BV.document_ids(b, s, BV.DOCUMENT)
bm = fa.block_mask(V.document(ids), b, None, s, s, causal=True)
which = os.environ["FA_PROFILE_WHICH"]
if which == "partial":
    bm = BV.without_whole_ranges(bm)
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
           for _ in range(3))
# Visited and whole (query tile, key tile) pairs for 192 x 64 tiles.
t = bm.key_ranges.cpu()
bm_rows, bn = 192, 64
visited = whole = 0
for bb in range(b):
    for q0 in range(0, s, bm_rows):
        groups = t[bb, 0, q0 // 16:(min(q0 + bm_rows, s) + 15) // 16]
        lo, hi = int(groups[:, 0].min()), int(groups[:, 1].max())
        wlo, whi = int(groups[:, 2].max()), int(groups[:, 3].min())
        causal_end = (min(q0 + bm_rows, s) + bn - 1) // bn
        for j in range(lo // bn, min(causal_end, (hi + bn - 1) // bn)):
            visited += 1
            whole += wlo <= j * bn and (j + 1) * bn <= whi
print(f"{which}: visited tiles {visited}, whole {whole} "
      f"({100 * whole / max(visited, 1):.1f}%)")
for _ in range(2):
    fa.attention(q, k, v, causal=True, block_mask=bm)
torch.cuda.synchronize()
PY
cat > /tmp/fa-time-bm.py <<PY
import os, sys, torch
sys.path.insert(0, "python"); sys.path.insert(0, "bench")
import fa
from fa import variants as V
import bench_variants as BV
from triton.testing import do_bench
from torch.profiler import profile, ProfilerActivity
s, d = $S, 128
b, h = max(1, 16384 // s), 2048 // d
ids = BV.document_ids(b, s, BV.DOCUMENT)
masks = {"whole": fa.block_mask(V.document(ids), b, None, s, s, causal=True)}
masks["partial"] = BV.without_whole_ranges(masks["whole"])
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16,
                       requires_grad=True) for _ in range(3))
grad = torch.randn_like(q)
# Forward tiles: the default, then each of FA_PROFILE_TILES (MxNwWsS).
configs = [{}] + [dict(zip(("block_m", "block_n", "num_warps", "stages"),
                           map(int, t.replace("x", " ").replace("w", " ")
                               .replace("s", " ").split())))
                  for t in os.environ.get("FA_PROFILE_TILES", "").split()]
for config in configs:
    for which, bm in list(masks.items()) * 2:
        fwd = lambda: fa.attention(q, k, v, causal=True, block_mask=bm,
                                   **config)
        def fwd_bwd():
            torch.autograd.grad(fwd(), (q, k, v), grad)
        fwd_bwd(); torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                fwd_bwd()
            torch.cuda.synchronize()
        kernels = [(e.key[:60], round(e.device_time_total / e.count, 1))
                   for e in prof.key_averages() if e.device_time_total > 0
                   and e.key.startswith("fa_")]
        print(f"{config or 'default'} {which}: fwd {do_bench(fwd):.3f} ms, "
              f"fwd+bwd {do_bench(fwd_bwd):.3f} ms; kernels (us):", kernels)
PY
python3 /tmp/fa-time-bm.py 2>&1 | tee "$OUT/bm-timing.txt" || status=1
[ "${FA_PROFILE_NCU:-1}" = 0 ] && exit $status
for which in whole partial; do
  FA_PROFILE_WHICH=$which python3 /tmp/fa-profile-bm.py || status=1
  FA_PROFILE_WHICH=$which ncu --clock-control none --kernel-name regex:fa_fwd \
    --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section InstructionStats --section SourceCounters --section LaunchStats \
    --section Occupancy --section MemoryWorkloadAnalysis \
    --metrics sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,smsp__inst_executed.sum,smsp__sass_branch_targets_threads_divergent.sum,lts__t_sector_hit_rate.pct \
    --export "$OUT/bm-$which" --force-overwrite \
    python3 /tmp/fa-profile-bm.py > "$OUT/bm-$which-run.txt" 2>&1 || status=1
  tail -3 "$OUT/bm-$which-run.txt"
  ncu --import "$OUT/bm-$which.ncu-rep" --print-details all \
    > "$OUT/bm-$which-details.txt" 2>&1
  grep -iE "stall|warp cycles|issued|eligible|duration|executed|divergent|registers|sm__cycles_active|hit_rate|throughput" \
    "$OUT/bm-$which-details.txt" | head -45
  ncu --import "$OUT/bm-$which.ncu-rep" --page source --print-source sass --csv \
    > "$OUT/bm-$which-sass.csv" 2>&1
  python3 scripts/top-stalls.py "$OUT/bm-$which-sass.csv" 40 \
    > "$OUT/bm-$which-top.txt" 2>&1
  head -45 "$OUT/bm-$which-top.txt"
done
exit $status
