// RUN: not fa-opt %s --fa-tile="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2" 2>&1 | FileCheck %s

// 8-bit rows of 128 bytes hold 128 elements: the wgmma resource model
// (checkFits) refuses an 8-bit head dim of 64.
// CHECK: error: 'fa.grid' op wgmma placement (block-m=128 block-n=128 head-dim=64 num-warps=8 stages=2): an 8-bit head dim must be a multiple of 128 (whole 128-byte swizzled rows)
func.func @float8_d64(%q: memref<?x?x?x64xf8E4M3FN>, %k: memref<?x?x?x64xf8E4M3FN>, %v: memref<?x?x?x64xf8E4M3FN>, %o: memref<?x?x?x64xbf16>, %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN> into memref<?x?x?x64xbf16>, memref<?x?x?xf32>
  return
}
