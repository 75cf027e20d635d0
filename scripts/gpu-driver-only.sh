#!/usr/bin/env bash
# On the GPU machine: the GPU suite (quick) and the Python tests as on a
# machine with the NVIDIA driver and no CUDA toolkit: no CUDA in PATH,
# CUDA_HOME/CUDA_PATH/CUDA_ROOT unset, and /usr/local/cuda hidden behind an
# empty folder in a private mount namespace (when unshare is allowed; else
# FA_ASSEMBLER=driver forces the driver's JIT). Run after gpu-run.sh has
# unpacked the binaries to /tmp/fa-bin. Steps: gpu,python (default both).
# Exits non-zero when a step fails or ptxas is still visible.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/fa-gpu-out}
# The interpreter that has torch, found before PATH loses the toolkit.
export FA_PYTHON=${FA_PYTHON:-$(command -v python3)}
STEPS=${1:-gpu,python}
export STEPS
cat > /tmp/fa-driver-only.sh <<'INNER'
set -uo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset CUDA_HOME CUDA_PATH CUDA_ROOT
export FA_RUNTIME_LIB=/tmp/fa-bin/libfa_runtime.so FA_CACHE_DIR=/tmp/fa-cache-driver
rm -rf "$FA_CACHE_DIR"
failed=0
echo "ptxas visible: $(command -v ptxas || echo no) $(ls /usr/local/cuda/bin/ptxas 2>/dev/null || echo no)"
if command -v ptxas >/dev/null || [ -e /usr/local/cuda/bin/ptxas ]; then
  [ -n "${FA_ASSEMBLER:-}" ] || failed=1
fi
if [[ $STEPS == *gpu* ]]; then
  FA_GPU_TEST_QUICK=1 /tmp/fa-bin/fa-gpu-tests > "$OUT/driver-only-gpu.log" 2>&1
  rc=$?; echo "gpu-tests rc=$rc"; [ $rc -eq 0 ] || failed=1
  grep -E "cold JIT|PASSED|FAILED" "$OUT/driver-only-gpu.log"
fi
if [[ $STEPS == *python* ]]; then
  PYTHONPATH=python "$FA_PYTHON" -c "import fa; print('python assembler:', fa.prepare_kernel(128, dtype='float16')['assembler'])" || failed=1
  "$FA_PYTHON" python/tests/test_attention.py > "$OUT/driver-only-python.log" 2>&1
  rc=$?; echo "python rc=$rc"; [ $rc -eq 0 ] || failed=1
  tail -3 "$OUT/driver-only-python.log"
  # Skipped tests (no torch, no GPU) are not a pass here.
  if grep -q "skipped" "$OUT/driver-only-python.log"; then failed=1; fi
fi
exit $failed
INNER
mkdir -p /tmp/empty-cuda
if unshare -m true 2>/dev/null; then
  OUT=$OUT unshare -m bash -c "mount --bind /tmp/empty-cuda /usr/local/cuda && bash /tmp/fa-driver-only.sh"
else
  echo "no mount namespace: forcing FA_ASSEMBLER=driver"
  OUT=$OUT FA_ASSEMBLER=driver bash /tmp/fa-driver-only.sh
fi
