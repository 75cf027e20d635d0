#!/usr/bin/env bash
# Builds the GPU-facing binaries with static MLIR/LLVM (build-static/),
# strips and xz-compresses them into .gpu/ (git-ignored), for the device
# tool to carry: fa-gpu-tests, libfa_runtime.so (the Python binding's
# library, JIT compiler included), fa-sweep (its timed mode) and
# fa-host-overhead (host time per C ABI call; it links libfa_runtime.so).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build-static/build.ninja ]; then
  cmake -G Ninja -S . -B build-static -DFA_LINK_MODE=static \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang-22 \
    -DCMAKE_CXX_COMPILER=clang++-22 >/dev/null
fi
ninja -C build-static -j "${FA_JOBS:-2}" fa-gpu-tests fa_runtime fa-sweep \
  fa-host-overhead
mkdir -p .gpu
rm -f .gpu/*.xz .gpu/*.cubin
for f in build-static/test/Gpu/fa-gpu-tests build-static/lib/libfa_runtime.so \
  build-static/bin/fa-sweep build-static/bin/fa-host-overhead; do
  strip -o "/tmp/$(basename "$f")" "$f"
  xz -T2 -6 -c "/tmp/$(basename "$f")" > ".gpu/$(basename "$f").xz"
done
ls -la .gpu
# The default mma and wgmma kernels as cubins, for the SASS dump of
# gpu-run.sh profile (fa-compile of the development build, when there is one).
if [ -x build/bin/fa-compile ]; then
  for strategy in mma wgmma; do
    for d in 64 128 256; do
      for mask in "" --causal; do
        build/bin/fa-compile --dtype=f16 --head-dim=$d $mask --arch=sm_90a \
          --strategy=$strategy \
          --emit=cubin -o ".gpu/${strategy}_d${d}${mask:+_causal}.cubin"
      done
    done
  done
fi
