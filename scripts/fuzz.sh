#!/usr/bin/env bash
# Runs fa-fuzz (a build with -DFA_FUZZ=ON) seeded with the lit tests, each
# split at `// -----`, plus the IR of every stage fa-compile emits. Exits
# non-zero on a crash, a sanitizer report or a timeout (the input is left in
# $FUZZ_DIR/crashes); then fa-fuzz-cache, the kernel cache's reader, and
# fa-fuzz-request, the C ABI's request path.
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

# The kernel cache's reader (fa-fuzz-cache): seeds in the three forms its
# first byte picks (an entry file, metadata framed into one, an autotune
# record), shaped like what the runtime writes.
if [ -x "$BUILD/bin/fa-fuzz-cache" ]; then
  rm -rf "$FUZZ_DIR/cache-seeds"
  mkdir -p "$FUZZ_DIR/cache-seeds" "$FUZZ_DIR/cache-corpus"
  python3 - "$FUZZ_DIR/cache-seeds" <<'PY'
import hashlib, json, os, struct, sys
out = sys.argv[1]
key = "a" * 64
launch = {"function": "fa_fwd_d128_f32_full_8x32_w8", "threads": 256,
          "shared_bytes": 20000, "persistent": False, "tensor_maps": [],
          "grid": [{"extent": "query_length", "tile": 8},
                   {"extent": "query_heads", "tile": 1},
                   {"extent": "batch", "tile": 1}],
          "params": ["q", "k", "v", "o", "lse"]}
metadata = json.dumps({"key": key, "name": "fa_fwd_d128_f32_full_8x32_w8",
                       "spec": "", "num_threads": 256,
                       "shared_memory_bytes": 20000, "registers": 128,
                       "stack_frame_bytes": 0, "spill_store_bytes": 0,
                       "spill_load_bytes": 0, "assembler": "ptxas",
                       "launches": [launch]}, separators=(",", ":")).encode()
cubin = b"\x7fELF\x02" + bytes(59)
body = b"FAKRNL01" + struct.pack("<Q", len(metadata)) + metadata + \
    struct.pack("<Q", len(cubin)) + cubin
entry = body + hashlib.sha256(body).digest()
record = json.dumps({"request": "", "bucket": 4096,
                     "chosen": {"block_m": 64, "block_n": 128,
                                "num_warps": 8, "stages": 2},
                     "timings": []}).encode()
# A warp-specialized wgmma backward kernel's launch: tensor maps of the
# 16-bit inputs and of the f32 dQ accumulator (boxes of 128-byte rows).
tma_launch = dict(launch, function="fa_bwd_d128_bf16_full_64x128_w8_s3_wgmma_dkdv",
                  threads=384, shared_bytes=230400,
                  tensor_maps=[{"operand": "k", "box_rows": 128, "box_cols": 64},
                               {"operand": "do", "box_rows": 64, "box_cols": 64},
                               {"operand": "dq_accum", "box_rows": 64, "box_cols": 32}],
                  params=["q", "k", "v", "o", "do", "lse", "dq", "dk", "dv",
                          "delta", "dq_accum"])
tma_metadata = json.dumps({"key": key, "name": tma_launch["function"],
                           "spec": "", "num_threads": 384,
                           "shared_memory_bytes": 230400, "registers": 168,
                           "stack_frame_bytes": 0, "spill_store_bytes": 0,
                           "spill_load_bytes": 0, "assembler": "ptxas",
                           "launches": [tma_launch]},
                          separators=(",", ":")).encode()
for name, data in (("entry", b"\x00" + entry), ("metadata", b"\x01" + metadata),
                   ("metadata-tma", b"\x01" + tma_metadata),
                   ("record", b"\x02" + record)):
    open(os.path.join(out, name), "wb").write(data)
PY
  ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0:detect_leaks=0} \
    "$BUILD/bin/fa-fuzz-cache" "$FUZZ_DIR/cache-corpus" "$FUZZ_DIR/cache-seeds" \
    -timeout=30 -max_len=65536 -rss_limit_mb=4096 \
    -artifact_prefix="$FUZZ_DIR/crashes/cache-" -print_final_stats=1 \
    "${options[@]}"
fi

# The C ABI's request path (fa-fuzz-request): no seeds needed, the input's
# bytes are the call's values (all zeros: a default request).
if [ -x "$BUILD/bin/fa-fuzz-request" ]; then
  mkdir -p "$FUZZ_DIR/request-corpus"
  ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0:detect_leaks=0} \
    "$BUILD/bin/fa-fuzz-request" "$FUZZ_DIR/request-corpus" \
    -timeout=30 -max_len=4096 -rss_limit_mb=4096 \
    -artifact_prefix="$FUZZ_DIR/crashes/request-" -print_final_stats=1 \
    "${options[@]}"
fi
