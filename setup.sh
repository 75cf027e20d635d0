#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds the project and runs the main job.
#   ./setup.sh            install packages (apt), configure, build, main job
#   FA_SKIP_MAIN=1 ./setup.sh   everything but the main job (CI)
# Safe to re-run: installed packages are skipped and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(cmake ninja-build g++ libgtest-dev libgmock-dev python3
          libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools clang-22
          zlib1g-dev libzstd-dev xz-utils python3-matplotlib)
BUILD_DIR=${FA_BUILD_DIR:-build}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

echo "== configuring ($BUILD_DIR)"
cmake -G Ninja -S . -B "$BUILD_DIR" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 >/dev/null
echo "== building"
ninja -C "$BUILD_DIR" -j "${FA_JOBS:-2}"

if [ "${FA_SKIP_MAIN:-0}" != 1 ]; then
  echo "== main job: the default kernel (D=128, fp32, B_r=8, B_c=32, 8 warps) -> PTX -> cubin"
  mkdir -p "$BUILD_DIR/kernels"
  "$BUILD_DIR/bin/fa-compile" --head-dim=128 --block-m=8 --block-n=32 --num-warps=8 \
    --arch=sm_90a --emit=cubin -o "$BUILD_DIR/kernels/attention_d128.cubin" \
    --dump-dir "$BUILD_DIR/kernels/attention_d128" --report
  echo "== stages written to $BUILD_DIR/kernels/attention_d128/ (fa, tiled, placed, gpu, llvm, ptx, cubin)"
fi
