// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=3 rotated-staging=grad-scores" | FileCheck %s
// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=3 rotated-staging=both" | FileCheck %s --check-prefix=BOTH
// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=3 rotated-staging=none" | FileCheck %s --check-prefix=NONE
// RUN: not fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=3 rotated-staging=dS" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=3 producer-transposes-value=2" 2>&1 | FileCheck %s --check-prefix=BAD-PRODUCER

// The dkdv program's stagings of P and dS may rotate between two buffers
// by the parity of the query-tile loop's iteration (fa.pipeline_stages = 2
// and an iteration operand on the fa.convert_layout): a staging then waits
// for its previous readers only when its loop starts (the lowering), not
// every iteration. D = 64, 64 query rows, 128 K/V rows, three Q/dO stages:
// K 0, V 16384, the Q ring 32768, the dO ring 57344, P 81920; the LSE and
// D rings (3 x 256 bytes each) after dQ's staging.
// CHECK-LABEL: func @backward_d64
// CHECK: scf.for
// The iteration number, (iv - lower) / step, at the top of the loop.
// CHECK: scf.for %[[IV:.*]] = %[[LB:.*]] to %{{.*}} step %[[STEP:[^ ]*]]
// CHECK-NEXT: %[[DIST:.*]] = arith.subi %[[IV]], %[[LB]]
// CHECK-NEXT: %[[N:.*]] = arith.divui %[[DIST]], %[[STEP]]
// P stays in one buffer; dS takes two (98304 and 114688), dQ's staging
// follows them.
// CHECK: fa.convert_layout %{{[^ ]*}} {fa.shared_offset = 81920 : i64} : tensor<64x128xbf16
// CHECK: fa.convert_layout %{{[^ ]*}} iteration %[[N]] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 98304 : i64} : tensor<64x128xbf16
// CHECK: fa.convert_layout %{{[^ ]*}} {fa.shared_offset = 131072 : i64} : tensor<64x64xf32
// CHECK: shared_bytes = 150016, stages = 3

// Both: P 81920 and 98304, dS 114688 and 131072, dQ 147456.
// BOTH: fa.convert_layout %{{[^ ]*}} iteration %{{[^ ]*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 81920 : i64} : tensor<64x128xbf16
// BOTH: fa.convert_layout %{{[^ ]*}} iteration %{{[^ ]*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 114688 : i64} : tensor<64x128xbf16
// BOTH: fa.convert_layout %{{[^ ]*}} {fa.shared_offset = 147456 : i64} : tensor<64x64xf32
// BOTH: shared_bytes = 166400, stages = 3

// None: one buffer each, as without the option.
// NONE-NOT: iteration
// NONE: fa.convert_layout %{{[^ ]*}} {fa.shared_offset = 81920 : i64}
// NONE: fa.convert_layout %{{[^ ]*}} {fa.shared_offset = 98304 : i64}
// NONE: fa.convert_layout %{{[^ ]*}} {fa.shared_offset = 114688 : i64}
// NONE-NOT: iteration
// NONE: shared_bytes = 133632, stages = 3

// BAD: rotated-staging must be none, grad-scores, both or model, got 'dS'
// A forward option's bad value is refused in a backward program too.
// BAD-PRODUCER: producer-transposes-value must be -1 (the model), 0 or 1, got 2
func.func @backward_d64(%q: memref<?x?x?x64xbf16>, %k: memref<?x?x?x64xbf16>, %v: memref<?x?x?x64xbf16>,
                        %o: memref<?x?x?x64xbf16>, %do: memref<?x?x?x64xbf16>, %lse: memref<?x?x?xf32>,
                        %dq: memref<?x?x?x64xbf16>, %dk: memref<?x?x?x64xbf16>, %dv: memref<?x?x?x64xbf16>,
                        %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.125 : f32}
    : memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>,
      memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>, memref<?x?x?xf32>
    into memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
  return
}
