// RUN: not fa-opt %s --fa-tile="block-m=128 block-n=64" --fa-place-wgmma="num-warps=8 stages=2" 2>&1 | FileCheck %s

// V's transposed copy holds the keys along 128-byte swizzled rows: the
// wgmma resource model (checkFits) refuses an 8-bit block-n of 64.
// CHECK: error: 'fa.grid' op wgmma placement (block-m=128 block-n=64 head-dim=64 num-warps=8 stages=2): 8-bit block-n must be a multiple of 128 (V's transposed copy holds the keys along 128-byte swizzled rows)
func.func @float8_block_n(%q: memref<?x?x?x64xf8E4M3FN>, %k: memref<?x?x?x64xf8E4M3FN>, %v: memref<?x?x?x64xf8E4M3FN>, %o: memref<?x?x?x64xbf16>, %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN> into memref<?x?x?x64xbf16>, memref<?x?x?xf32>
  return
}
