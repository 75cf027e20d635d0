// RUN: not fa-opt %s --fa-tile-pipeline="block-m=128 block-n=64 page-gather" --fa-place-wgmma="num-warps=8 stages=2" --fa-wgmma-pipeline --fa-warp-specialize -o /dev/null 2>&1 | FileCheck %s

// A TMA copy reads one box of rows: a paged load read row by row (pages)
// cannot be warp-specialized, and says so.
// CHECK: error: 'fa.load_tile' op a warp-specialized (TMA) program cannot read a paged tile row by row (pages)
func.func @paged(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>,
                 %o: memref<?x?x?x128xbf16>, %lse: memref<?x?x?xf32>, %lens: memref<?xi32>,
                 %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v into %o, %lse kv_lens %lens block_table %table {scale = 0.125 : f32}
    : memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>
    into memref<?x?x?x128xbf16>, memref<?x?x?xf32>
    kv_lens memref<?xi32> block_table memref<?x?xi32>
  return
}
