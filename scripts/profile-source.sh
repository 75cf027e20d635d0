#!/usr/bin/env bash
# On the GPU machine (gpu-run.sh profile-source): where one default kernel
# stalls, per SASS instruction. ncu samples warp states (SourceCounters,
# WarpStateStats, SchedulerStats) on one launch, B x S = 16k, H*D=2048,
# f16; the report is exported, its source page printed as CSV and the 60
# instructions with the most stall samples listed with their three largest
# stall reasons; the SMs' active cycles (min / mean / max: the grid's
# balance) and the L2 hit rate beside. Writes to $OUT/<target>-*.
#   scripts/profile-source.sh TARGET...
# TARGET: dkdv-d<D>[-causal], or <strategy>-d<D>[-s<S>][-causal][-<M>x<N>w<W>s<ST>]
#   with strategy mma, wgmma or fp8 (wgmma on e4m3 Q, K, V),
#   e.g. wgmma-d128, wgmma-d64-s1024-causal, wgmma-d64-s1024-128x128w8s2
#   (S = 4096 and the default tiles unless named).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fa-gpu-out}
status=0
for target in "${@:-dkdv-d128}"; do
  s=4096 causal=False tiles=""
  case $target in
  dkdv-d*)
    # The backward's dK/dV kernel: dkdv-d<D>[-causal].
    d=${target#dkdv-d} d=${d%%-*} kernel=dkdv
    [[ $target == *-causal ]] && causal=True
    [[ $d =~ ^[0-9]+$ ]] || { echo "bad head dim in $target"; status=2; continue; }
    call="o, lse = fa.attention(q, k, v, causal=$causal, return_lse=True)
fa.attention_backward(torch.randn_like(q), q, k, v, o, lse, causal=$causal)" ;;
  wgmma-d* | mma-d* | fp8-d*)
    # fp8-...: the wgmma forward on Q, K, V quantized to e4m3 (bf16 O).
    strategy=${target%%-*} kernel=fa_fwd
    for part in $(echo "${target#*-}" | tr '-' ' '); do
      case $part in
      d[0-9]*) d=${part#d} ;;
      s[0-9]*) s=${part#s} ;;
      causal) causal=True ;;
      [0-9]*x[0-9]*w[0-9]*s[0-9]*)
        [[ $part =~ ^[0-9]+x[0-9]+w[0-9]+s[0-9]+$ ]] ||
          { echo "bad tiles $part in $target (MxNwWsST)"; status=2; continue 2; }
        tiles=$(echo "$part" | sed -E 's/([0-9]+)x([0-9]+)w([0-9]+)s([0-9]+)/, block_m=\1, block_n=\2, num_warps=\3, stages=\4/') ;;
      *) echo "unknown part $part of $target"; status=2; continue 2 ;;
      esac
    done
    call="fa.attention(q, k, v, causal=$causal, strategy=\"$strategy\"$tiles)"
    [ "$strategy" = fp8 ] && call="q8, k8, v8, ds = fa.fp8.quantize(q, k, v)
fa.attention(q8, k8, v8, causal=$causal$tiles, **ds)" ;;
  *) echo "unknown target $target"; status=2; continue ;;
  esac
  cat > /tmp/fa-profile-source.py <<PY
import sys, torch
sys.path.insert(0, "python")
import fa
d, s = $d, $s
b = max(1, 16384 // s)
q, k, v = (torch.randn(b, 2048 // d, s, d, device="cuda", dtype=torch.float16)
           for _ in range(3))
$call
torch.cuda.synchronize()
PY
  echo "== $target"
  ncu --clock-control none --kernel-name regex:$kernel --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SchedulerStats \
    --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section Occupancy --section LaunchStats \
    --metrics sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,lts__t_sector_hit_rate.pct,dram__bytes.sum \
    --export "$OUT/$target" --force-overwrite \
    python3 /tmp/fa-profile-source.py > "$OUT/$target-run.txt" 2>&1 || status=1
  tail -3 "$OUT/$target-run.txt"
  ncu --import "$OUT/$target.ncu-rep" --print-details all \
    > "$OUT/$target-details.txt" 2>&1
  grep -iE "stall|warp cycles|issued|eligible|duration|pipe|throughput|occupancy|grid size|registers|sm__cycles_active|hit_rate|dram__bytes" \
    "$OUT/$target-details.txt" | head -50
  ncu --import "$OUT/$target.ncu-rep" --page source --print-source sass --csv \
    > "$OUT/$target-sass.csv" 2>&1
  python3 scripts/top-stalls.py "$OUT/$target-sass.csv" 60 \
    > "$OUT/$target-top.txt" 2>&1
  head -70 "$OUT/$target-top.txt"
done
exit $status
