#!/usr/bin/env bash
# Compiles a fixed set of kernels (forward and backward, every strategy,
# f32/f16/bf16/e4m3, the GPU suite's head dims, causal and not, default and
# explicit tiles) to PTX, one file per kernel, so that a refactor of the
# code generators can be checked for byte-identical output:
#
#   scripts/ptx-snapshot.sh /tmp/ptx-before          # on the old tree
#   scripts/ptx-snapshot.sh /tmp/ptx-after           # on the new tree
#   diff -r /tmp/ptx-before /tmp/ptx-after && echo identical
#
# FA_COMPILE names the fa-compile binary (default build/bin/fa-compile).
# Defaulted tiles are chosen with ptxas where it is found (trial compiles),
# as fa-compile does; the registers and spills of each kernel go to
# OUTDIR/report.txt. Exits non-zero if any kernel fails to compile.
set -uo pipefail
out=${1:?usage: ptx-snapshot.sh OUTDIR}
fa=${FA_COMPILE:-build/bin/fa-compile}
mkdir -p "$out"
: >"$out/report.txt"

specs=(
  # simt (f32 and 16-bit on request)
  "simt-d128-f32        --head-dim=128 --block-m=8 --block-n=32 --num-warps=8"
  "simt-d128-f32-causal --head-dim=128 --block-m=8 --block-n=32 --num-warps=8 --causal"
  "simt-d64-f32         --head-dim=64"
  "simt-d64-f32-causal  --head-dim=64 --causal"
  "simt-d40-f32         --head-dim=40"
  "simt-d128-f16        --head-dim=128 --dtype=f16 --strategy=simt"
  "simt-d64-bf16-causal --head-dim=64 --dtype=bf16 --strategy=simt --causal"
  "simt-d128-f32-16x32w4 --head-dim=128 --block-m=16 --block-n=32 --num-warps=4"
  # mma
  "mma-d64-f16          --head-dim=64 --dtype=f16 --strategy=mma"
  "mma-d64-f16-causal   --head-dim=64 --dtype=f16 --strategy=mma --causal"
  "mma-d128-f16         --head-dim=128 --dtype=f16 --strategy=mma"
  "mma-d128-bf16-causal --head-dim=128 --dtype=bf16 --strategy=mma --causal"
  "mma-d256-bf16        --head-dim=256 --dtype=bf16 --strategy=mma"
  "mma-d40-f16          --head-dim=40 --dtype=f16 --strategy=mma"
  "mma-d96-f16-causal   --head-dim=96 --dtype=f16 --strategy=mma --causal"
  "mma-d128-f16-sm80    --head-dim=128 --dtype=f16 --arch=sm_80"
  "mma-d64-bf16-sm80-causal --head-dim=64 --dtype=bf16 --arch=sm_80 --causal"
  "mma-d128-f16-128x64w4s3 --head-dim=128 --dtype=f16 --strategy=mma --block-m=128 --block-n=64 --num-warps=4 --stages=3"
  # wgmma (sm_90a)
  "wgmma-d64-f16        --head-dim=64 --dtype=f16"
  "wgmma-d64-f16-causal-1k --head-dim=64 --dtype=f16 --causal --length=1024"
  "wgmma-d128-f16       --head-dim=128 --dtype=f16"
  "wgmma-d128-bf16-causal --head-dim=128 --dtype=bf16 --causal"
  "wgmma-d192-f16       --head-dim=192 --dtype=f16"
  "wgmma-d256-bf16-causal --head-dim=256 --dtype=bf16 --causal"
  "wgmma-d128-f16-64x128w4 --head-dim=128 --dtype=f16 --strategy=wgmma --block-m=64 --block-n=128 --num-warps=4 --stages=2"
  # FP8 (e4m3 on wgmma): the 64-byte swizzle at D 64/192, one stage at 256
  "fp8-d64              --head-dim=64 --dtype=e4m3 --arch=sm_90a"
  "fp8-d128-causal      --head-dim=128 --dtype=e4m3 --arch=sm_90a --causal"
  "fp8-d192-f16         --head-dim=192 --dtype=e4m3 --out-dtype=f16 --arch=sm_90a"
  "fp8-d256-causal      --head-dim=256 --dtype=e4m3 --arch=sm_90a --causal"
  # backward
  "bwd-mma-d64-f16      --backward --head-dim=64 --dtype=f16 --strategy=mma"
  "bwd-mma-d64-f16-causal --backward --head-dim=64 --dtype=f16 --causal --strategy=mma"
  "bwd-mma-d128-bf16    --backward --head-dim=128 --dtype=bf16 --strategy=mma"
  "bwd-mma-d128-f16-causal-det --backward --head-dim=128 --dtype=f16 --causal --deterministic --strategy=mma"
  "bwd-mma-d96-f16-sm80 --backward --head-dim=96 --dtype=f16 --arch=sm_80"
  "bwd-wgmma-d64-f16    --backward --head-dim=64 --dtype=f16"
  "bwd-wgmma-d128-bf16  --backward --head-dim=128 --dtype=bf16"
  "bwd-wgmma-d128-bf16-causal --backward --head-dim=128 --dtype=bf16 --causal"
  "bwd-wgmma-d128-f16-det --backward --head-dim=128 --dtype=f16 --deterministic"
  "bwd-simt-d64-f32     --backward --head-dim=64"
  "bwd-simt-d128-f32-causal --backward --head-dim=128 --causal"
  "bwd-simt-d256-bf16   --backward --head-dim=256 --dtype=bf16 --strategy=simt"
  "bwd-mma-d256-bf16-causal --backward --head-dim=256 --dtype=bf16 --causal"
  "bwd-simt-d64-f32-det --backward --head-dim=64 --causal --deterministic"
)

failed=0
for entry in "${specs[@]}"; do
  read -r name args <<<"$entry"
  # shellcheck disable=SC2086
  if ! "$fa" $args --emit=ptx -o "$out/$name.ptx" --report \
      >"$out/$name.report" 2>&1; then
    echo "FAILED: $name ($args)" >&2
    cat "$out/$name.report" >&2
    failed=1
    continue
  fi
  printf '%-32s %s\n' "$name" \
    "$(grep -Eo 'registers=[0-9]+|spill-[a-z]+=[0-9]+B' "$out/$name.report" |
       tr '\n' ' ')" >>"$out/report.txt"
  rm -f "$out/$name.report"
done
echo "${#specs[@]} kernels -> $out (registers and spills: $out/report.txt)"
exit $failed
