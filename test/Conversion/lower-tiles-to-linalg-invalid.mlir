// RUN: fa-opt %s --fa-lower-tiles-to-linalg --verify-diagnostics

func.func @untiled(%q: memref<?x?x?x64xf32>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{'fa.attention' op must be tiled before the CPU lowering (run fa-tile)}}
  fa.attention %q, %q, %q into %q, %lse {scale = 1.0 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32>
  return
}

func.func @untiled_backward(%q: memref<?x?x?x64xf32>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{'fa.attention_backward' op must be tiled before the CPU lowering (run fa-tile-backward)}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q workspace %lse, %q {scale = 1.0 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32> workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
  return
}
