// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-simt="arch=sm_80" --verify-diagnostics
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline --fa-place-simt="arch=sm_70" 2>&1 | FileCheck %s --check-prefix=ARCH
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline --fa-place-simt="num-warps=0" 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline --fa-place-simt="pad=-64" 2>&1 | FileCheck %s --check-prefix=PAD
// The spill is a warning: the kernel still compiles, fa-opt succeeds (both
// programs below fit at these tiles).
// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=64 block-n=32" --fa-place-simt="num-warps=1" 2>&1 | FileCheck %s --check-prefix=SPILL

// ARCH: error: unsupported arch 'sm_70'; expected one of sm_80, sm_86, sm_89, sm_90, sm_90a
// WARPS: error: num-warps must be in [1, 32], got 0
// A negative pad overlapped rows (and made a negative shared total).
// PAD: error: 'fa.grid' op pad must be in [0, 64] (0: the default), got -64
// SPILL: warning: placement block-m=64 block-n=32 head-dim=256 num-warps=1 needs about {{[0-9]+}} registers per thread, over the 255 available: the kernel will spill

// 512 threads share the 64K-register file: 128 each (ptxas spills 60 bytes
// here). `not`: the D = 18 program below has no thread grid at these tiles.
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline="block-m=128 block-n=32" --fa-place-simt="num-warps=16" 2>&1 | FileCheck %s --check-prefix=BLOCKSPILL
// BLOCKSPILL: warning: placement block-m=128 block-n=32 head-dim=256 num-warps=16 needs about {{[0-9]+}} registers per thread, over the 128 available: the kernel will spill

// Q, K, V tiles of 64 x 260 floats and P of 64 x 68: 217088 bytes.
func.func @shared_memory_over_limit(%q: memref<?x?x?x256xf32>, %k: memref<?x?x?x256xf32>,
                                    %v: memref<?x?x?x256xf32>, %o: memref<?x?x?x256xf32>,
                                    %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{'fa.grid' op placement block-m=64 block-n=64 head-dim=256 num-warps=8 needs 217088 bytes of shared memory per block, over the 166896 bytes available on sm_80}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0625 : f32}
    : memref<?x?x?x256xf32>, memref<?x?x?x256xf32>, memref<?x?x?x256xf32>
    into memref<?x?x?x256xf32>, memref<?x?x?xf32>
  return
}

// -----

// D = 18: only 2 threads per row divide it, so 256 threads make 128 thread
// rows, more than the 64 rows of a tile.
func.func @thread_grid_does_not_divide(%q: memref<?x?x?x18xf32>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{'fa.grid' op thread grid 128x2 (block-m=64 block-n=64 head-dim=18 num-warps=8) does not divide the tiles: block-m 64 is not a multiple of 128 thread rows}}
  fa.attention %q, %q, %q into %q, %lse {scale = 0.25 : f32}
    : memref<?x?x?x18xf32>, memref<?x?x?x18xf32>, memref<?x?x?x18xf32>
    into memref<?x?x?x18xf32>, memref<?x?x?xf32>
  return
}
