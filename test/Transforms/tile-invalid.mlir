// RUN: fa-opt %s --split-input-file --fa-tile="block-m=0" --verify-diagnostics
// RUN: not fa-opt %s --split-input-file --fa-tile="block-n=4096" 2>&1 | FileCheck %s --check-prefix=BLOCK-N

// Tile sizes are checked before anything is rewritten.
// expected-error @+1 {{block-m must be in [1, 1024], got 0}}
func.func @attention(%q: memref<?x?x?x64xf32>, %lse: memref<?x?x?xf32>) {
  fa.attention %q, %q, %q into %q, %lse {scale = 1.0 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32>
  return
}
// BLOCK-N: error: block-n must be in [1, 1024], got 4096
