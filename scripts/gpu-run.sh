#!/usr/bin/env bash
# Runs on the GPU machine over a copy of the working tree, with the static,
# stripped, xz-compressed binaries in .gpu/ (made by scripts/pack-gpu.sh):
# the GPU test suite, compute-sanitizer on the kernels, the Python binding's
# tests against torch, and the benchmarks against SDPA. Logs go to $OUT.
#   scripts/gpu-run.sh [tests|quick-tests|sanitize|python|bench|bench-backward|
#                       sweep|sweep-timed|sweep-timed-mma|sweep-mma|io|
#                       sweep-wgmma|profile|profile-wgmma|profile-backward|
#                       profile-backward-source|profile-source|grad-seeds|
#                       host-overhead|clock-probe|bench-sinks|
#                       block-mask|bench-variants|profile-block-mask|
#                       bench-varlen|fp8|wide-backward|
#                       paged-varlen-deterministic|varlen-backward|
#                       sinks-serving-wgmma|kvcache-auto|driver-only|
#                       ab-backward|
#                       transposed-scores|writer-warp|writer-tables|
#                       dq-chains|fp8-producer|rotated-staging|
#                       staged-row-values|staged-row-values-bench|
#                       profile-rows|variants-check|variants-ab|
#                       variants-flex|decode-sinks|
#                       nvjitlink|all]...
# Exits non-zero when any step fails (every step still runs).
#   FA_GPU_TEST_FILTER   gtest filter for the tests step (default: all)
#   FA_GPU_TEST_SHARDS   the tests step's gtest shards (default 8; the long
#                        tests come in parts, so each shard is ~1/8 of the
#                        suite, which is more than one device call's limit)
#   FA_GPU_TEST_SHARD    the shards to run, e.g. 0,1,2 (default: all). They
#                        run in parallel over the visible GPUs (logs
#                        gpu-tests-shard<i>.log); on one GPU, run a few per
#                        call.
#   FA_GPU_TEST_PER_GPU  shards run at once on each GPU (default 1). The
#                        suite's time is the host's (compiles, the float64
#                        references), so several share a GPU well.
#   FA_GPU_TEST_CACHE_DIR  the kernel cache every test and shard shares
#                        (default /tmp/fa-gpu-test-cache): a kernel compiles
#                        once per machine.
#   FA_BENCH_ARGS        extra arguments of bench/bench_attention.py
#   FA_BENCH_BACKWARD_ARGS  extra arguments of bench/bench_backward.py
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fa-gpu-out}
mkdir -p "$OUT" /tmp/fa-bin
for f in .gpu/*.xz; do
  xz -dc "$f" > "/tmp/fa-bin/$(basename "$f" .xz)"
done
chmod +x /tmp/fa-bin/* 2>/dev/null
export FA_RUNTIME_LIB=/tmp/fa-bin/libfa_runtime.so
export FA_CACHE_DIR=/tmp/fa-cache
export PATH=/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"

failed=()
run() { # name command...
  local name=$1; shift
  echo "== $name: $*"
  local start=$SECONDS
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$OUT/$name.log"
  echo "== $name: rc=$rc in $((SECONDS - start)) s"
  [ "$rc" -eq 0 ] || failed+=("$name")
}

# A filtered part of a GPU test binary in 6 gtest shards at once (one
# kernel cache): logs NAME<i>.log, each shard's case lines printed, a
# shard that did not pass (or ran past TIMEOUT s) a failed step NAME<i>.
run_filtered_shards() { # name timeout binary filter
  local name=$1 limit=$2 binary=$3 filter=$4 i
  for i in 0 1 2 3 4 5; do
    GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i \
      FA_GPU_TEST_CACHE_DIR=/tmp/fa-$name-cache \
      timeout "$limit" "$binary" --gtest_filter="$filter" \
      > "$OUT/$name$i.log" 2>&1 &
  done
  wait
  for i in 0 1 2 3 4 5; do
    grep -E '^\[ *(OK|FAILED) *\]|tests? ran' "$OUT/$name$i.log" | tail -n 12
    grep -q '^\[  PASSED  \]' "$OUT/$name$i.log" || failed+=("$name$i")
  done
}

# The GPU suite's shards: those of FA_GPU_TEST_SHARD, spread over the GPUs
# and FA_GPU_TEST_PER_GPU lanes on each (shard i, at position k in the
# list, in lane k % lanes), each lane's in turn. Each shard is a step of its
# own (gpu-tests-shard<i>).
run_test_shards() {
  local total=${FA_GPU_TEST_SHARDS:-8}
  local list=${FA_GPU_TEST_SHARD:-$(seq -s, 0 $((total - 1)))}
  local perGpu=${FA_GPU_TEST_PER_GPU:-1}
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  [ "$gpus" -ge 1 ] || gpus=1
  local lanes=$((gpus * perGpu))
  export FA_GPU_TEST_CACHE_DIR=${FA_GPU_TEST_CACHE_DIR:-/tmp/fa-gpu-test-cache}
  local shards=() k=0 lane
  IFS=, read -r -a shards <<< "$list"
  for lane in $(seq 0 $((lanes - 1))); do
    (
      for k in "${!shards[@]}"; do
        [ $((k % lanes)) -eq "$lane" ] || continue
        local i=${shards[$k]} start=$SECONDS
        CUDA_VISIBLE_DEVICES=$((lane % gpus)) GTEST_TOTAL_SHARDS=$total \
          GTEST_SHARD_INDEX=$i \
          /tmp/fa-bin/fa-gpu-tests --gtest_filter="${FA_GPU_TEST_FILTER:-*}" \
          > "$OUT/gpu-tests-shard$i.log" 2>&1
        echo "$? $((SECONDS - start))" > "$OUT/gpu-tests-shard$i.rc"
      done
    ) &
  done
  wait
  for i in "${shards[@]}"; do
    local rc=1 seconds=?
    [ -f "$OUT/gpu-tests-shard$i.rc" ] && read -r rc seconds < "$OUT/gpu-tests-shard$i.rc"
    grep -E '^\[ *(OK|FAILED|SKIPPED) *\]|tests? ran' "$OUT/gpu-tests-shard$i.log" | tail -n 30
    echo "== gpu-tests-shard$i (of $total): rc=$rc in $seconds s"
    [ "$rc" -eq 0 ] || failed+=("gpu-tests-shard$i")
  done
}

steps=${*:-all}
for step in $steps; do
  case $step in
  tests | all)
    run_test_shards ;;&
  quick-tests)
    FA_GPU_TEST_QUICK=1 run gpu-tests-quick /tmp/fa-bin/fa-gpu-tests ;;
  sanitize | all)
    for tool in memcheck racecheck synccheck; do
      FA_GPU_TEST_QUICK=1 run "sanitizer-$tool" compute-sanitizer --tool "$tool" \
        --error-exitcode 9 /tmp/fa-bin/fa-gpu-tests \
        --gtest_filter="${FA_SANITIZE_FILTER:-*MatchesFloat64Reference*}"
    done ;;&
  python | all)
    run python-tests python3 python/tests/test_attention.py
    run python-sinks python3 python/tests/test_sinks.py
    run python-varlen python3 python/tests/test_varlen.py
    run python-variants python3 python/tests/test_variants.py
    run python-kvcache python3 python/tests/test_kvcache.py
    run python-training python3 python/tests/test_training.py ;;&
  grad-seeds | all)
    # FlashAttention's gradient criterion over 40 seeds per shape (median,
    # max of fa's error / torch's; seeds over the bound).
    run grad-seeds python3 bench/gradient_error_seeds.py \
      --json "$OUT/grad-seeds.json" ;;&
  bench | all)
    run bench python3 bench/bench_attention.py --json "$OUT/bench.json" \
      ${FA_BENCH_ARGS:-} ;;&
  bench-sinks)
    run bench-sinks python3 bench/bench_sinks.py --json "$OUT/sinks.json" ;;&
  block-mask)
    # Block masks: the GPU cases (quick; the captures' too), memcheck on
    # them, the Python tests of captured tensors and block masks.
    FA_GPU_TEST_QUICK=1 run block-mask-tests /tmp/fa-bin/fa-gpu-tests \
      --gtest_filter='*BlockMask*:*Captures*'
    FA_GPU_TEST_QUICK=1 run block-mask-memcheck compute-sanitizer \
      --tool memcheck --error-exitcode 9 /tmp/fa-bin/fa-gpu-tests \
      --gtest_filter='*BlockMask*'
    run python-captures python3 python/tests/test_captures.py ;;&
  fp8)
    # FP8 (e4m3, wgmma): the quick cases first (a hang ends here, inside
    # its timeout), then the whole test, the sanitizers on the quick cases,
    # the speed next to bf16 and SDPA, the RMSE table, the Python tests.
    FA_GPU_TEST_QUICK=1 run fp8-quick timeout 60 /tmp/fa-bin/fa-gpu-tests \
      --gtest_filter='*Float8*'
    if grep -q '^\[  PASSED  \]' "$OUT/fp8-quick.log"; then
      run fp8-tests timeout 200 /tmp/fa-bin/fa-gpu-tests \
        --gtest_filter='*Float8*'
      for tool in memcheck racecheck synccheck; do
        FA_GPU_TEST_QUICK=1 run "fp8-sanitizer-$tool" timeout 120 \
          compute-sanitizer --tool "$tool" --error-exitcode 9 \
          /tmp/fa-bin/fa-gpu-tests --gtest_filter='*Float8*'
      done
      run fp8-bench timeout 240 python3 bench/bench_attention.py \
        --dtypes bfloat16 --dims 128,256 --seqs 4096,16384 --fp8 \
        --json "$OUT/fp8-bench.json"
      run fp8-accuracy timeout 120 python3 bench/fp8_accuracy.py \
        --json "$OUT/fp8-accuracy.json"
      run python-fp8 timeout 120 python3 python/tests/test_fp8.py
    fi ;;&
  wide-backward)
    # The 16-bit backward past head dim 128 on mma (the default there on
    # sm_90 since 2026-12-04): its explicit-tile cases (D 160, 192), then
    # its speed against the simt kernel it replaced, SDPA and cuDNN.
    run wide-backward-tests timeout 300 /tmp/fa-bin/fa-gpu-tests \
      --gtest_filter='*BackwardMmaExplicitTiles*:*WideHeadBackwardDefaults*'
    run wide-backward-bench timeout 280 python3 bench/bench_backward.py \
      --dtypes bfloat16 --dims 192,256 --seqs 1024,4096 \
      --configs simt:32x32w4s1,64x64w8s1,64x64w8s2 \
      --json "$OUT/wide-backward.json" ;;&
  paged-varlen-deterministic)
    # Added 2026-12-05, not yet run on a GPU: a paged varlen batch
    # (flash_attn_varlen_func with block_table; its Python cases, then under
    # memcheck) and the deterministic backward of every built-in variant
    # (a dQ turn off by one hangs: the timeout says so).
    run paged-varlen timeout 150 bash -c "cd python/tests && python3 -m \
      unittest -v test_varlen -k test_paged_keys"
    run paged-varlen-memcheck timeout 100 bash -c "cd python/tests && \
      compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m \
      unittest test_varlen -k test_paged_keys_checks"
    run deterministic-variants timeout 220 /tmp/fa-bin/fa-gpu-tests \
      --gtest_filter='*DeterministicBackwardVariants*'
    run deterministic-python timeout 110 bash -c "cd python/tests && \
      python3 -m unittest -v test_varlen -k test_backward_deterministic && \
      python3 -m unittest -v test_variants -k deterministic_window" ;;&
  varlen-backward)
    # The varlen backward on wgmma (2026-12-05): the varlen GPU cases (every
    # strategy; NaN in every input of the odd sequences), memcheck and
    # racecheck on the quick backward cases, the Python varlen and KV-cache
    # tests (auto: wgmma on sm_90a, deterministic too), then the speed
    # against the fixed-length kernel and FlashAttention-2's varlen
    # backward, and the host-overhead bench (its crash at exit fixed).
    run varlen-gpu-tests timeout 240 /tmp/fa-bin/fa-gpu-tests \
      --gtest_filter='*Varlen*:*SplitKv*'
    for tool in memcheck racecheck; do
      FA_GPU_TEST_QUICK=1 run "varlen-$tool" timeout 120 compute-sanitizer \
        --tool "$tool" --error-exitcode 9 /tmp/fa-bin/fa-gpu-tests \
        --gtest_filter='*Varlen*'
    done
    run python-varlen timeout 150 python3 python/tests/test_varlen.py
    run python-kvcache timeout 100 python3 python/tests/test_kvcache.py
    run bench-varlen-backward timeout 150 python3 bench/bench_varlen.py \
      --backward --json "$OUT/varlen-backward.json"
    run host-overhead timeout 60 python3 bench/bench_attention.py \
      --host-overhead ;;&
  kvcache-auto)
    # Auto takes wgmma for a paged or split prefill (run on an H100,
    # 2026-12-05 (z)). The KV-cache tests with auto, then which kernels a
    # paged prefill (pages of 64, one part and three) compiled in a fresh
    # cache: *_paged*_wgmma.
    run kvcache-auto timeout 200 bash -c "cd python/tests && \
      python3 -m unittest -v test_kvcache"
    PYTHONPATH=$PWD/python FA_CACHE_DIR=/tmp/fa-cache-auto \
      run kvcache-auto-kernels timeout 120 \
      python3 -c "
import torch, fa
b, sq, hq, hkv, d, page, pages = 2, 300, 8, 2, 128, 64, 8
q = torch.randn(b, sq, hq, d, device='cuda', dtype=torch.bfloat16)
kc = torch.randn(b * pages, page, hkv, d, device='cuda', dtype=torch.bfloat16)
table = torch.arange(b * pages, device='cuda', dtype=torch.int32).view(b, pages)
lens = torch.full((b,), 400, device='cuda', dtype=torch.int32)
for parts in (1, 3):
    fa.flash_attn_with_kvcache(q, kc, kc.clone(), cache_seqlens=lens,
                               block_table=table, causal=True,
                               num_splits=parts)
torch.cuda.synchronize()"
    # (the cache's file names are hashes: the kernel names are inside)
    grep -rhao 'fa_fwd[A-Za-z0-9_]*' /tmp/fa-cache-auto | sort -u ;;&
  sinks-serving-wgmma)
    # Added 2026-12-05 (third session), not yet run on a GPU. The
    # deterministic backward with sinks (the GPU sinks cases now also run
    # it, three repeats compared bit for bit, dSinks included; a program
    # waiting on the shares' barriers would hang: the timeout says so),
    # racecheck on it (a static shared array between two barriers), the
    # Python sinks tests (flash_attn_func's s_aux too); then wgmma with a
    # paged cache and with split-KV (by name: auto keeps mma): the Python
    # KV-cache cases, memcheck on them, and their speed against mma.
    run sinks-gpu-tests timeout 280 /tmp/fa-bin/fa-gpu-tests \
      --gtest_filter='*SinksMatchFloat64Reference*:*BackwardDeterministic'
    FA_GPU_TEST_QUICK=1 run sinks-racecheck timeout 150 compute-sanitizer \
      --tool racecheck --error-exitcode 9 /tmp/fa-bin/fa-gpu-tests \
      --gtest_filter='*SinksMatchFloat64Reference*'
    run python-sinks timeout 150 python3 python/tests/test_sinks.py
    run python-kvcache-wgmma timeout 150 bash -c "cd python/tests && \
      python3 -m unittest -v test_kvcache"
    run kvcache-wgmma-memcheck timeout 150 bash -c "cd python/tests && \
      compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m \
      unittest test_kvcache -k wgmma"
    run bench-prefill timeout 200 python3 bench/bench_prefill.py \
      --json "$OUT/prefill.json" ;;&
  bench-varlen)
    # Packed varlen batches against the fixed-length kernel and SDPA.
    run bench-varlen python3 bench/bench_varlen.py \
      --json "$OUT/varlen.json" ${FA_BENCH_VARLEN_ARGS:-} ;;&
  bench-variants)
    # The variants against FlexAttention (packed documents with and
    # without a block mask, the block masks' own cost).
    run bench-variants python3 bench/bench_variants.py \
      --json "$OUT/variants.json" ${FA_BENCH_VARIANTS_ARGS:-} ;;&
  clock-probe)
    # SM clock and power while fa wgmma, cuDNN and FLASH_ATTENTION each run
    # back to back (D=128, S=4k and 16k; FA_CLOCK_ARGS adds arguments).
    run clock-probe python3 bench/clock_probe.py ${FA_CLOCK_ARGS:-} ;;
  host-overhead)
    # CPU time per call of fa.attention and of SDPA (D=128, S=4k); then per
    # C ABI call, without Python (fa-host-overhead, the real driver).
    run host-overhead python3 bench/bench_attention.py --host-overhead
    run host-overhead-c /tmp/fa-bin/fa-host-overhead 20000 ;;
  bench-backward | all)
    run bench-backward python3 bench/bench_backward.py \
      --json "$OUT/bench-backward.json" ${FA_BENCH_BACKWARD_ARGS:-} ;;&
  ab-backward)
    # The backward of the packed library (B) against a baseline library (A:
    # .gpu/base/libfa_runtime.so.xz, packed from the commit to compare
    # with), each in its own process and kernel cache, alternated A B A B.
    if [ -f .gpu/base/libfa_runtime.so.xz ]; then
      mkdir -p /tmp/fa-base
      xz -dc .gpu/base/libfa_runtime.so.xz > /tmp/fa-base/libfa_runtime.so
      for r in 1 2; do
        FA_RUNTIME_LIB=/tmp/fa-base/libfa_runtime.so FA_CACHE_DIR=/tmp/fa-cache-a \
          run "ab-backward-A$r" python3 bench/bench_backward.py \
          --json "$OUT/ab-backward-A$r.json" ${FA_BENCH_BACKWARD_ARGS:-}
        FA_CACHE_DIR=/tmp/fa-cache-b run "ab-backward-B$r" python3 \
          bench/bench_backward.py --json "$OUT/ab-backward-B$r.json" \
          ${FA_BENCH_BACKWARD_ARGS:-}
      done
    else
      echo "== ab-backward: no baseline .gpu/base/libfa_runtime.so.xz"
      failed+=(ab-backward)
    fi ;;&
  transposed-scores)
    # Added 2026-12-05 (fourth session), not yet run on a GPU: the wgmma
    # backward with transposed scores (pack with wgmma::transposesScores
    # returning true where it is to be tried): the gradient matrix, the
    # deterministic test, the variants (quick) and varlen backward, then
    # racecheck and memcheck on the matrix's first part (quick).
    run transposed-wgmma timeout 400 /tmp/fa-bin/fa-gpu-tests \
      --gtest_filter='*BackwardWgmmaMatchesFloat64Gradients*:GpuAttention.BackwardDeterministic'
    FA_GPU_TEST_QUICK=1 run transposed-variants timeout 300 \
      /tmp/fa-bin/fa-gpu-tests \
      --gtest_filter='*BackwardVariantsMatchFloat64Gradients*:*VarlenBackwardMatchesEachSequence*'
    for tool in racecheck memcheck; do
      FA_GPU_TEST_QUICK=1 run "transposed-$tool" timeout 150 compute-sanitizer \
        --tool "$tool" --error-exitcode 9 /tmp/fa-bin/fa-gpu-tests \
        --gtest_filter='*BackwardWgmmaMatchesFloat64Gradients/0'
    done ;;&
  sweep | all)
    run sweep python3 bench/sweep_tiles.py ;;&
  sweep-timed)
    # fa-sweep's timed mode: the lecture's SIMT grid at D=128 and the mma
    # grid at D=128 fp16, checked and timed, JSON for bench/plot_sweep.py.
    run sweep-timed-simt /tmp/fa-bin/fa-sweep --head-dim=128 --time --quiet \
      --json "$OUT/sweep-timed-simt-d128.json" ;;&
  sweep-timed | sweep-timed-mma)
    run sweep-timed-mma /tmp/fa-bin/fa-sweep --head-dim=128 --dtype=f16 \
      --strategy=mma --time --quiet --json "$OUT/sweep-timed-mma-d128.json" ;;
  sweep-mma | all)
    run sweep-mma python3 bench/sweep_mma.py ;;&
  sweep-wgmma | all)
    run sweep-wgmma python3 bench/sweep_mma.py --strategy wgmma ;;&
  io)
    # DRAM bytes of fa's forward and of standard attention under ncu, over
    # sequence lengths (bench/plot_io.py adds the IO model).
    run io python3 bench/measure_io.py --json "$OUT/io-measured.json" ;;
  nvjitlink)
    # The GPU suite (quick) with kernels assembled by libnvJitLink.
    FA_ASSEMBLER=nvjitlink FA_CACHE_DIR=/tmp/fa-cache-nvjitlink \
      FA_GPU_TEST_QUICK=1 run nvjitlink /tmp/fa-bin/fa-gpu-tests ;;
  driver-only)
    # The suites with ptxas hidden: kernels assembled by the driver's JIT.
    run driver-only bash scripts/gpu-driver-only.sh ;;
  profile-wgmma)
    run profile-wgmma bash scripts/profile-wgmma.sh ;;
  profile-backward)
    run profile-backward bash scripts/profile-backward.sh ;;
  profile-backward-source)
    # Stall samples per SASS instruction of the D=128 dkdv kernel.
    run profile-backward-source bash scripts/profile-source.sh dkdv-d128 ;;
  profile-rows)
    # Per row of the forward and backward speed tables, ncu's time, tensor
    # pipe share, issue slots and largest stalls (scripts/profile-rows.sh).
    run profile-rows timeout 400 bash scripts/profile-rows.sh all ;;
  profile-source)
    # The same for the kernels named in FA_PROFILE_TARGETS.
    run profile-source bash scripts/profile-source.sh \
      ${FA_PROFILE_TARGETS:-wgmma-d128 wgmma-d256} ;;
  profile-block-mask)
    # The packed-documents forward with and without its whole ranges:
    # whole tiles counted, ncu on one launch of each.
    run profile-block-mask bash scripts/profile-block-mask.sh ;;
  writer-tables | dq-chains)
    # Run 2026-12-06 (docs/benchmarks.md (ac), as .gpu/s1.sh): the writer's
    # tests pass but racecheck finds write-write hazards on varlen dkdv; two
    # or four dQ chains are slower than one.
    # writer-tables: the writer warp on varlen and block-mask dkdv programs
    # (WgmmaModel's kWriterWarpForRaggedAndTables). Needs
    #   scripts/pack-model-ab.sh .gpu/tables-libs.tar.xz \
    #     kWriterWarpForRaggedAndTables --tests-with true false true
    # dq-chains: the deterministic backward's dQ chains (WgmmaModel's
    # kDeterministicDqChains). Needs
    #   scripts/pack-model-ab.sh .gpu/chains-libs.tar.xz \
    #     kDeterministicDqChains --tests-with 1 1 2 4
    # Each: the wgmma backward GPU tests (those of varlen, block masks,
    # sinks; GpuAttention.BackwardDeterministicChains) with the test binary
    # of the archive, in 8 parallel shards, racecheck beside them; then
    # (writer-tables) the Python varlen and block-mask tests with the new
    # library, or (dq-chains) the backward bench of each library.
    archive=.gpu/tables-libs.tar.xz
    [ "$step" = dq-chains ] && archive=.gpu/chains-libs.tar.xz
    if [ -f "$archive" ]; then
      libs=/tmp/fa-$step && mkdir -p "$libs"
      xz -dc "$archive" | tar -xf - -C "$libs"
      tests=$(ls "$libs"/fa-gpu-tests-* | head -n 1) && chmod +x "$tests"
      filter='*BackwardWgmma*:GpuAttention.VarlenBackwardMatchesEachSequence:GpuAttention.BackwardDeterministicChains:*BlockMask*:*SinksMatchFloat64Reference*:*BackwardVariants*'
      for i in 0 1 2 3 4 5 6 7; do
        GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i \
          timeout 400 "$tests" --gtest_filter="$filter" \
          > "$OUT/$step-tests$i.log" 2>&1 &
      done
      FA_GPU_TEST_QUICK=1 FA_GPU_TEST_CACHE_DIR=/tmp/fa-$step-race \
        timeout 400 compute-sanitizer --tool racecheck --error-exitcode 9 \
        "$tests" --gtest_filter='*BackwardWgmma*/0:GpuAttention.BackwardDeterministicChains:GpuAttention.VarlenBackwardMatchesEachSequence' \
        > "$OUT/$step-racecheck.log" 2>&1 &
      wait
      for i in 0 1 2 3 4 5 6 7; do
        grep -q '^\[  PASSED  \]' "$OUT/$step-tests$i.log" || failed+=("$step-tests$i")
      done
      grep -q 'RACECHECK SUMMARY: 0 hazards' "$OUT/$step-racecheck.log" ||
        failed+=("$step-racecheck")
      if [ "$step" = writer-tables ]; then
        FA_RUNTIME_LIB=$libs/true.so FA_CACHE_DIR=/tmp/fa-cache-tables \
          run writer-tables-python-varlen timeout 150 python3 python/tests/test_varlen.py
        FA_RUNTIME_LIB=$libs/true.so FA_CACHE_DIR=/tmp/fa-cache-tables \
          run writer-tables-python-block-mask timeout 150 \
          python3 python/tests/test_captures.py GpuBlockMaskTest
      else
        for k in 1 2 4; do
          FA_RUNTIME_LIB=$libs/$k.so FA_CACHE_DIR=/tmp/fa-cache-chains$k \
            run "dq-chains-bench$k" python3 bench/bench_backward.py \
            --dtypes bfloat16 --dims 64,128 --seqs 1024,4096,16384 \
            --json "$OUT/dq-chains-bench$k.json"
        done
      fi
    else
      echo "== $step: no $archive (scripts/pack-model-ab.sh, above)"
      failed+=("$step")
    fi ;;
  rotated-staging)
    # The wgmma backward's rotating stagings (WgmmaModel's kRotatedStaging;
    # run 2026-12-06, docs/benchmarks.md (ad), as .gpu/s4.sh). Needs
    #   scripts/pack-model-ab.sh .gpu/rot-libs.tar.xz kRotatedStaging \
    #     --tests-with '"grad-scores"' '"grad-scores"' '"none"' '"both"'
    # (the first value is the header's). The backward tests with the
    # "grad-scores" build in 6 shards, racecheck on the wgmma backward's
    # quick cases, then the backward bench of each library in its own
    # process and kernel cache, alternated twice.
    if [ -f .gpu/rot-libs.tar.xz ]; then
      libs=/tmp/fa-rotated && mkdir -p "$libs"
      xz -dc .gpu/rot-libs.tar.xz | tar -xf - -C "$libs"
      chmod +x "$libs/fa-gpu-tests-grad-scores"
      filter='*BackwardWgmma*:GpuAttention.VarlenBackwardMatchesEachSequence:*BackwardVariants*:GpuAttention.BackwardDeterministic*'
      run_filtered_shards rotated-tests 240 "$libs/fa-gpu-tests-grad-scores" \
        "$filter"
      FA_GPU_TEST_QUICK=1 FA_GPU_TEST_CACHE_DIR=/tmp/fa-rotated-race \
        run rotated-staging-racecheck timeout 240 compute-sanitizer \
        --tool racecheck --error-exitcode 9 "$libs/fa-gpu-tests-grad-scores" \
        --gtest_filter='*BackwardWgmmaMatchesFloat64Gradients*'
      for round in 1 2; do
        for lib in grad-scores none both; do
          FA_RUNTIME_LIB=$libs/$lib.so FA_CACHE_DIR=/tmp/fa-rotated-$lib \
            run "rotated-staging-bench-$lib-$round" python3 \
            bench/bench_backward.py --dtypes bfloat16 --dims 64,128 \
            --seqs 1024,4096,16384
        done
      done
    else
      echo "== $step: no .gpu/rot-libs.tar.xz (scripts/pack-model-ab.sh, above)"
      failed+=("$step")
    fi ;;
  fp8-producer)
    # FP8 with the producer's V transpose at D 128 (the default since
    # fe19d58; its D 128 kernels are byte-identical to those the GPU suite
    # passed with in docs/benchmarks.md (ac), but it was not timed). Needs
    #   scripts/pack-model-ab.sh .gpu/fp8-libs.tar.xz \
    #     kProducerTransposesValue --tests-with true true false
    # The Float8 GPU test (whole), racecheck on its quick cases and the
    # Python FP8 tests with the default library, then the FP8 bench of the
    # producer (true) and consumers (false) libraries, alternated.
    if [ -f .gpu/fp8-libs.tar.xz ]; then
      libs=/tmp/fa-fp8-producer && mkdir -p "$libs"
      xz -dc .gpu/fp8-libs.tar.xz | tar -xf - -C "$libs"
      chmod +x "$libs/fa-gpu-tests-true"
      FA_GPU_TEST_CACHE_DIR=/tmp/fa-fp8p-tests run fp8-producer-tests \
        timeout 200 "$libs/fa-gpu-tests-true" --gtest_filter='*Float8*'
      FA_GPU_TEST_QUICK=1 FA_GPU_TEST_CACHE_DIR=/tmp/fa-fp8p-race \
        run fp8-producer-racecheck timeout 200 compute-sanitizer \
        --tool racecheck --error-exitcode 9 "$libs/fa-gpu-tests-true" \
        --gtest_filter='*Float8*'
      FA_RUNTIME_LIB=$libs/true.so FA_CACHE_DIR=/tmp/fa-fp8p-py \
        run fp8-producer-python timeout 200 python3 python/tests/test_fp8.py
      for run in true-1 false-1 true-2 false-2; do
        lib=${run%-*}
        FA_RUNTIME_LIB=$libs/$lib.so FA_CACHE_DIR=/tmp/fa-fp8p-$lib \
          run "fp8-producer-bench-$run" python3 bench/bench_attention.py \
          --dtypes bfloat16 --dims 64,128 --seqs 4096,16384 --fp8
      done
    else
      echo "== $step: no .gpu/fp8-libs.tar.xz (scripts/pack-model-ab.sh, above)"
      failed+=("$step")
    fi ;;
  staged-row-values | staged-row-values-bench)
    # The wgmma backward's LSE and D through shared memory (WgmmaModel's
    # kStagedRowValues; docs/benchmarks.md (ae)). Needs
    #   scripts/pack-model-ab.sh .gpu/rows-libs.tar.xz kStagedRowValues \
    #     --tests-with true true false
    # staged-row-values: the backward GPU tests of the true build in 6
    # shards (wgmma backward, varlen, variants, deterministic, sinks, block
    # masks, wide heads), racecheck on the quick wgmma backward cases,
    # memcheck on the varlen backward's, the Python varlen and training
    # backward tests. staged-row-values-bench: the backward bench of each
    # library in its own process and kernel cache, alternated twice, then
    # the D 64 dkdv kernel's stalls per SASS instruction with each.
    if [ -f .gpu/rows-libs.tar.xz ]; then
      libs=/tmp/fa-rows && mkdir -p "$libs"
      [ -f "$libs/true.so" ] || xz -dc .gpu/rows-libs.tar.xz | tar -xf - -C "$libs"
      chmod +x "$libs/fa-gpu-tests-true"
      if [ "$step" = staged-row-values ]; then
        # (Each limit keeps the step inside one device call.)
        filter='*BackwardWgmma*:GpuAttention.VarlenBackwardMatchesEachSequence:*BackwardVariants*:GpuAttention.BackwardDeterministic*:*SinksMatchFloat64Reference*:*BlockMaskMatchesFloat64Reference*:GpuAttention.WideHeadBackwardDefaults'
        run_filtered_shards rows-tests 270 "$libs/fa-gpu-tests-true" "$filter"
        FA_GPU_TEST_QUICK=1 FA_GPU_TEST_CACHE_DIR=/tmp/fa-rows-racecheck \
          run rows-racecheck timeout 120 compute-sanitizer --tool racecheck \
          --error-exitcode 9 "$libs/fa-gpu-tests-true" \
          --gtest_filter='*BackwardWgmmaMatchesFloat64Gradients*'
        FA_GPU_TEST_QUICK=1 FA_GPU_TEST_CACHE_DIR=/tmp/fa-rows-memcheck \
          run rows-memcheck timeout 90 compute-sanitizer --tool memcheck \
          --error-exitcode 9 "$libs/fa-gpu-tests-true" \
          --gtest_filter='GpuAttention.VarlenBackwardMatchesEachSequence'
        FA_RUNTIME_LIB=$libs/true.so FA_CACHE_DIR=/tmp/fa-rows-py \
          run rows-python-varlen timeout 60 python3 python/tests/test_varlen.py
        FA_RUNTIME_LIB=$libs/true.so FA_CACHE_DIR=/tmp/fa-rows-py \
          run rows-python-training timeout 60 python3 \
          python/tests/test_training.py BackwardTest
      else
        for round in 1 2; do
          for lib in true false; do
            FA_RUNTIME_LIB=$libs/$lib.so FA_CACHE_DIR=/tmp/fa-rows-$lib \
              run "rows-bench-$lib-$round" python3 bench/bench_backward.py \
              --dtypes bfloat16 --dims 64,128 --seqs 1024,4096,16384 \
              --json "$OUT/rows-bench-$lib-$round.json"
          done
        done
        for lib in true false; do
          mkdir -p "$OUT/profile-$lib"
          FA_RUNTIME_LIB=$libs/$lib.so FA_CACHE_DIR=/tmp/fa-rows-$lib \
            OUT=$OUT/profile-$lib run "rows-profile-$lib" timeout 200 \
            bash scripts/profile-source.sh dkdv-d64
        done
      fi
    else
      echo "== $step: no .gpu/rows-libs.tar.xz (scripts/pack-model-ab.sh, above)"
      failed+=("$step")
    fi ;;
  writer-warp)
    # The wgmma backward's dQ writer warp (WgmmaModel's kWriterWarp; run
    # 2026-12-05, docs/benchmarks.md (ab)). Needs .gpu/writer-libs.tar.xz:
    #   scripts/pack-model-ab.sh .gpu/writer-libs.tar.xz kWriterWarp \
    #     --tests-with '"deterministic"' '"every"' '"none"' '"deterministic"'
    # Correctness with
    # "deterministic" (fa-gpu-tests built with it: the deterministic
    # backward tests in 6 parallel shards, then racecheck and synccheck on
    # the quick subset), the Python deterministic tests with the
    # "deterministic" and "every" libraries, then the backward bench of
    # all three (none = today's default), each in its own process and
    # kernel cache, alternated twice.
    if [ -f .gpu/writer-libs.tar.xz ]; then
      mkdir -p /tmp/fa-writer
      xz -dc .gpu/writer-libs.tar.xz | tar -xf - -C /tmp/fa-writer
      chmod +x /tmp/fa-writer/fa-gpu-tests-deterministic
      filter='GpuAttention.BackwardDeterministic:*BackwardWgmmaMatchesFloat64Gradients*:*DeterministicBackwardVariants*:GpuAttention.VarlenBackwardMatchesEachSequence:*SinksMatchFloat64Reference*'
      run_filtered_shards writer-tests 280 \
        /tmp/fa-writer/fa-gpu-tests-deterministic "$filter"
      for tool in racecheck synccheck; do
        FA_GPU_TEST_QUICK=1 run "writer-$tool" timeout 150 compute-sanitizer \
          --tool "$tool" --error-exitcode 9 \
          /tmp/fa-writer/fa-gpu-tests-deterministic \
          --gtest_filter=GpuAttention.BackwardDeterministic
      done
      for mode in deterministic every; do
        FA_RUNTIME_LIB=/tmp/fa-writer/$mode.so FA_CACHE_DIR=/tmp/fa-cache-$mode \
          run "writer-python-$mode" python3 python/tests/test_training.py \
          BackwardTest.test_deterministic_is_bitwise_reproducible
      done
      for r in 1 2; do
        for mode in none deterministic every; do
          FA_RUNTIME_LIB=/tmp/fa-writer/$mode.so FA_CACHE_DIR=/tmp/fa-cache-$mode \
            run "writer-bench-$mode$r" python3 bench/bench_backward.py \
            --dtypes bfloat16 --dims 64,128 --seqs 1024,4096,16384 \
            --json "$OUT/writer-bench-$mode$r.json"
        done
      done
    else
      echo "== writer-warp: no .gpu/writer-libs.tar.xz (scripts/pack-model-ab.sh, above)"
      failed+=(writer-warp)
    fi ;;
  variants-check)
    # Every GPU case with a score_mod or mask_mod (variants forward,
    # backward and deterministic; sinks; captures; block masks) in 6
    # shards, then the Python variants, captures and sinks tests and the
    # whole transformers models (Gemma-2- and gpt-oss-style).
    run_filtered_shards variant-tests 300 /tmp/fa-bin/fa-gpu-tests \
      '*Variants*:*SinksMatch*:*CapturesMatch*:*BlockMaskMatches*'
    run python-variants timeout 200 python3 python/tests/test_variants.py
    run python-captures timeout 150 python3 python/tests/test_captures.py
    run python-sinks timeout 200 python3 python/tests/test_sinks.py
    run python-models timeout 240 python3 python/tests/test_models.py ;;
  variants-ab)
    # bench/bench_variants.py (D 128, S 4k and 16k, forward and forward +
    # backward, no FlexAttention) with the two runtime libraries of
    # .gpu/variants-ab.tar.xz in turn, old, new, new, old, each in its own
    # process and kernel cache. The archive: two stripped static
    # libfa_runtime.so builds as old.so and new.so in one xz stream with a
    # wide dictionary (the 2026-12-06 one: tanh.approx and
    # fa-split-index-to-float off / on).
    if [ -f .gpu/variants-ab.tar.xz ]; then
      mkdir -p /tmp/fa-ab
      xz -dc .gpu/variants-ab.tar.xz | tar -C /tmp/fa-ab -xf -
      for lib in old new new2 old2; do
        FA_RUNTIME_LIB=/tmp/fa-ab/${lib%2}.so FA_CACHE_DIR=/tmp/fa-cache-${lib%2} \
          run "variants-ab-$lib" timeout 200 python3 bench/bench_variants.py \
          --no-flex --json "$OUT/variants-$lib.json"
      done
    else
      echo "== variants-ab: no .gpu/variants-ab.tar.xz"
      failed+=(variants-ab)
    fi ;;
  decode-sinks)
    # The packed GQA decode with sinks (..._rowsinks; forward() packs it
    # with runtime/Runtime.h's kPackDecodeWithSinks, on since this step
    # passed, docs/benchmarks.md (ah)): the sinks gtests (a GQA
    # decode shape among them) in 6 shards, memcheck on the quick part 0,
    # test_kvcache (decode with sinks, split, paged) and the gpt-oss
    # models (generation decodes through the dense call), then decode's
    # time with and without sinks (gpt-oss's 64/8 heads).
    run_filtered_shards decode-sinks-tests 300 /tmp/fa-bin/fa-gpu-tests \
      '*SinksMatch*:*SplitKvMatches*'
    FA_GPU_TEST_QUICK=1 run decode-sinks-memcheck timeout 200 \
      compute-sanitizer --tool memcheck --error-exitcode 9 \
      /tmp/fa-bin/fa-gpu-tests --gtest_filter='*SinksMatch*/0'
    run decode-sinks-kvcache timeout 150 python3 python/tests/test_kvcache.py
    run decode-sinks-models timeout 240 python3 python/tests/test_models.py
    for sinks in "" --sinks; do
      run "decode-bench${sinks:+-sinks}" timeout 100 python3 \
        bench/bench_decode.py --heads 64 --kv-heads 8 --head-dim 64 \
        --batches 1,8,64 --contexts 8192,32768 $sinks
    done ;;
  variants-flex)
    # The shipped library's variants against FlexAttention (torch.compile'd
    # flex_attention, the same functions; its compiles take most of the
    # step's time).
    run variants-flex timeout 500 python3 bench/bench_variants.py \
      --json "$OUT/variants-flex.json" ;;
  profile)
    # The default D=128 f16 kernels: ncu's tensor-pipe, stall and bank
    # conflict metrics, and the SASS instruction mix of the cubin.
    run profile bash scripts/profile-mma.sh ;;
  esac
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "== FAILED: ${failed[*]}"
  exit 1
fi
echo "== all steps passed"
