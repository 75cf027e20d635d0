#!/usr/bin/env bash
# Packs an A/B of one of lib/Strategy/WgmmaModel.h's constants for the GPU
# machine: the runtime library built with each value (VALUE.so, quotes
# dropped from the name) and, with --tests-with V, fa-gpu-tests built with V
# (fa-gpu-tests-V), into one xz archive (the libraries are nearly identical:
# one archive, a wide dictionary, fits the device tool's carry). The header
# is restored afterwards (the static build then rebuilds once more).
#   scripts/pack-model-ab.sh OUT.tar.xz CONSTANT [--tests-with V] VALUE...
# The first VALUE must be the header's current one (the shipped default).
#   scripts/pack-model-ab.sh .gpu/writer-libs.tar.xz kWriterWarp \
#     --tests-with '"deterministic"' '"none"' '"deterministic"' '"every"'
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1 constant=$2
shift 2
testsWith=
if [ "${1:-}" = --tests-with ]; then testsWith=$2; shift 2; fi
[ $# -ge 1 ] || { echo "usage: $0 OUT.tar.xz CONSTANT [--tests-with V] VALUE..." >&2; exit 2; }
header=lib/Strategy/WgmmaModel.h
pattern="constexpr [^=]*[ *]$constant = "
current=$(sed -n "s/^$pattern\(.*\);$/\1/p" "$header")
[ -n "$current" ] || { echo "pack-model-ab.sh: no $constant in $header" >&2; exit 1; }
[ "$current" = "$1" ] ||
  { echo "pack-model-ab.sh: $constant is $current in $header, not $1" >&2; exit 1; }
saved=$(mktemp)
cp "$header" "$saved"
trap 'cp "$saved" "$header"; rm -f "$saved"' EXIT
if [ ! -f build-static/build.ninja ]; then
  cmake -G Ninja -S . -B build-static -DFA_LINK_MODE=static \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang-22 \
    -DCMAKE_CXX_COMPILER=clang++-22 >/dev/null
fi
files=$(mktemp -d)
names=()
for value in "$@"; do
  sed -i "s/^\($pattern\).*;$/\1$value;/" "$header"
  name=${value//\"/}
  targets=(fa_runtime)
  [ "$value" = "$testsWith" ] && targets+=(fa-gpu-tests)
  ninja -C build-static -j "${FA_JOBS:-2}" "${targets[@]}"
  strip -o "$files/$name.so" build-static/lib/libfa_runtime.so
  names+=("$name.so")
  if [ "$value" = "$testsWith" ]; then
    strip -o "$files/fa-gpu-tests-$name" build-static/test/Gpu/fa-gpu-tests
    names+=("fa-gpu-tests-$name")
  fi
done
mkdir -p "$(dirname "$out")"
tar -C "$files" -cf - "${names[@]}" |
  xz -T2 --lzma2=preset=6,dict=256MiB > "$out"
rm -rf "$files"
ls -la "$out"
