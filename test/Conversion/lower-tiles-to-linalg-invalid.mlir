// RUN: fa-opt %s --fa-lower-tiles-to-linalg --verify-diagnostics

func.func @untiled(%q: memref<?x?x?x64xf32>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{'fa.attention' op must be tiled before the CPU lowering (run fa-tile)}}
  fa.attention %q, %q, %q into %q, %lse {scale = 1.0 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32>
  return
}
