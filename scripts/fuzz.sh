#!/usr/bin/env bash
# Runs fa-fuzz (a build with -DFA_FUZZ=ON) seeded with the lit tests, each
# split at `// -----`, plus the IR of every stage fa-compile emits. Exits
# non-zero on a crash, a sanitizer report or a timeout (the input is left in
# $FUZZ_DIR/crashes).
#   scripts/fuzz.sh BUILD_DIR [libFuzzer options...]
#   (default options: -seed=1 -runs=3000, deterministic for CI)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: scripts/fuzz.sh BUILD_DIR [libFuzzer options]}
shift
FUZZ_DIR=${FUZZ_DIR:-$BUILD/fuzz}
rm -rf "$FUZZ_DIR/seeds"
mkdir -p "$FUZZ_DIR/seeds" "$FUZZ_DIR/corpus" "$FUZZ_DIR/crashes"
python3 - "$FUZZ_DIR/seeds" <<'PY'
import glob, os, sys
out = sys.argv[1]
for path in sorted(glob.glob("test/**/*.mlir", recursive=True)):
    for i, part in enumerate(open(path).read().split("// -----")):
        with open(os.path.join(out, f"{os.path.basename(path)}.{i}.mlir"), "w") as f:
            f.write(part)
PY
for dtype in f32 f16; do
  for strategy in simt mma wgmma; do
    for stage in fa tiled placed; do
      "$BUILD/bin/fa-compile" --head-dim=64 --dtype=$dtype --strategy=$strategy \
        --emit=$stage -o "$FUZZ_DIR/seeds/stage_${dtype}_${strategy}_$stage.mlir" \
        2>/dev/null || true
    done
  done
done
"$BUILD/bin/fa-compile" --backward --deterministic --head-dim=32 --emit=tiled \
  -o "$FUZZ_DIR/seeds/stage_backward_tiled.mlir"
options=("$@")
[ ${#options[@]} -gt 0 ] || options=(-seed=1 -runs=3000)
ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0:detect_leaks=0} \
  "$BUILD/bin/fa-fuzz" "$FUZZ_DIR/corpus" "$FUZZ_DIR/seeds" -timeout=30 \
  -max_len=16384 -rss_limit_mb=8192 -artifact_prefix="$FUZZ_DIR/crashes/" \
  -print_final_stats=1 "${options[@]}"
