// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=3 rotated-staging=both" | FileCheck %s
// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 rotated-staging=both" | FileCheck %s --check-prefix=TWO

// A rotation is not worth a stage: at D = 128 with three Q/dO stages the
// program takes 231936 of the 232432 shared bytes (230400 and the LSE and
// D rings, 3 x 512), so neither P nor dS gets a second buffer ...
// CHECK-NOT: iteration
// CHECK: shared_bytes = 231936, stages = 3

// ... with two stages both do (197632 + 2 x 16384 bytes, + 2 x 512 for the
// row values).
// TWO: fa.convert_layout %{{[^ ]*}} iteration %{{[^ ]*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 131072 : i64}
// TWO: fa.convert_layout %{{[^ ]*}} iteration %{{[^ ]*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 163840 : i64}
// TWO: shared_bytes = 231424, stages = 2
func.func @backward_d128(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>,
                         %o: memref<?x?x?x128xbf16>, %do: memref<?x?x?x128xbf16>, %lse: memref<?x?x?xf32>,
                         %dq: memref<?x?x?x128xbf16>, %dk: memref<?x?x?x128xbf16>, %dv: memref<?x?x?x128xbf16>,
                         %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x128xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>,
      memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?xf32>
    into memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x128xf32>
  return
}
