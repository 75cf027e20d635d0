#!/usr/bin/env bash
# Packs what `scripts/gpu-run.sh writer-warp` runs: the runtime library
# built with each of WgmmaModel's kWriterWarp modes ("none", the default;
# "deterministic"; "every": the wgmma backward's dQ writer warp, opt-in
# until it has been checked and measured on a GPU) and fa-gpu-tests built
# with "deterministic", into .gpu/writer-libs.tar.xz (git-ignored; with
# scripts/pack-gpu.sh's files it fits the device tool's carry). The header
# is restored afterwards (the static build then rebuilds once more).
set -euo pipefail
cd "$(dirname "$0")/.."
header=lib/Strategy/WgmmaModel.h
grep -q 'kWriterWarp = "none"' "$header" ||
  { echo "pack-writer-ab.sh: $header's kWriterWarp is not \"none\"" >&2; exit 1; }
saved=$(mktemp)
cp "$header" "$saved"
trap 'cp "$saved" "$header"; rm -f "$saved"' EXIT
if [ ! -f build-static/build.ninja ]; then
  cmake -G Ninja -S . -B build-static -DFA_LINK_MODE=static \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang-22 \
    -DCMAKE_CXX_COMPILER=clang++-22 >/dev/null
fi
libs=$(mktemp -d)
for mode in none deterministic every; do
  sed -i "s/kWriterWarp = \"[a-z]*\"/kWriterWarp = \"$mode\"/" "$header"
  targets=(fa_runtime)
  [ "$mode" = deterministic ] && targets+=(fa-gpu-tests)
  ninja -C build-static -j "${FA_JOBS:-2}" "${targets[@]}"
  strip -o "$libs/$mode.so" build-static/lib/libfa_runtime.so
  [ "$mode" = deterministic ] &&
    strip -o "$libs/fa-gpu-tests-deterministic" build-static/test/Gpu/fa-gpu-tests
done
mkdir -p .gpu
# The three libraries are nearly identical: one archive, a wide dictionary.
tar -C "$libs" -cf - none.so deterministic.so every.so fa-gpu-tests-deterministic |
  xz -T2 --lzma2=preset=6,dict=256MiB > .gpu/writer-libs.tar.xz
rm -rf "$libs"
ls -la .gpu/writer-libs.tar.xz
