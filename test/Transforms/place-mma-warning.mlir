// RUN: fa-opt %s --fa-tile-pipeline="block-m=64 block-n=32" --fa-place-mma="num-warps=2 stages=2" -verify-diagnostics

// Two warps of 32 rows at D = 256: the O accumulator alone is 256 f32 per
// thread. The placement is legal (ptxas spills) and says so.
func.func @spills(%q: memref<?x?x?x256xf16>, %k: memref<?x?x?x256xf16>,
                  %v: memref<?x?x?x256xf16>, %o: memref<?x?x?x256xf16>,
                  %lse: memref<?x?x?xf32>) {
  // expected-warning @below {{mma placement block-m=64 block-n=32 head-dim=256 num-warps=2 needs about 340 registers per thread, over the 255 available: the kernel will spill}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0625 : f32}
    : memref<?x?x?x256xf16>, memref<?x?x?x256xf16>, memref<?x?x?x256xf16>
    into memref<?x?x?x256xf16>, memref<?x?x?xf32>
  return
}
