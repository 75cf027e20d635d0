// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-wgmma="num-warps=4 stages=2" --fa-wgmma-pipeline --cse | FileCheck %s
// With wait-after-softmax=1 the wait for O names the softmax's row sums and
// P as what it comes after (so that its lowering keeps the assembler from
// hoisting it above them); the model's default leaves it off (above).
// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-wgmma="num-warps=4 stages=2" --fa-wgmma-pipeline="wait-after-softmax=1" --cse | FileCheck %s --check-prefix=AFTER
// AFTER-LABEL: func.func @attention
// AFTER: scf.for
// AFTER: %[[MN:.*]], %[[PN:.*]], %[[LN:.*]], %[[AN:.*]] = fa.online_softmax
// AFTER: %[[PAN:.*]] = fa.convert_layout
// AFTER: %[[ODONE:.*]] = fa.async_wait %{{.*}} after(%[[LN]], %[[PAN]] : tensor<64xf32, {{.*}}>, tensor<{{.*}}>) {pending = 0 : i64}
// AFTER-NEXT: fa.rescale %[[ODONE]], %[[AN]]
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-wgmma="num-warps=4 stages=2" --fa-wgmma-pipeline="wait-after-softmax=2" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: wait-after-softmax must be 1, 0 or -1 (the model's choice), got 2

// The online softmax of tile j overlaps P_{j-1} V_{j-1} on the tensor
// cores: D = 128, B_r = B_c = 64, one warpgroup.
// CHECK-LABEL: func.func @attention
// CHECK-DAG: %[[M0:.*]] = arith.constant dense<0xFF800000> : tensor<64xf32, #fa.mma<warps = 4>>
// CHECK-DAG: %[[L0:.*]] = arith.constant dense<0.000000e+00> : tensor<64xf32, #fa.mma<warps = 4>>
// CHECK-DAG: %[[ACC0:.*]] = arith.constant dense<0.000000e+00> : tensor<64x128xf32, #fa.mma<warps = 4>>
// CHECK: %[[Q:.*]] = fa.load_tile %arg0
// CHECK: %[[B:.*]], %[[E:.*]] = fa.kv_tile_range
// Nothing to do for an empty K/V range: the state stays initial.
// CHECK: %[[ANY:.*]] = arith.cmpi slt, %[[B]], %[[E]] : index
// CHECK: %[[R:.*]]:3 = scf.if %[[ANY]]
// Prologue, tile b: S_b, its softmax, acc_0 rescaled, P_b for the loop.
// CHECK: %[[K0:.*]] = fa.load_tile %arg1
// CHECK: %[[S0:.*]] = fa.tile_matmul %[[Q]], %[[K0]] {transpose_rhs}
// CHECK: %[[M1:.*]], %[[P1:.*]], %[[L1:.*]], %[[A1:.*]] = fa.online_softmax %{{.*}}, %[[M0]], %[[L0]]
// CHECK: %[[ACC1:.*]] = fa.rescale %[[ACC0]], %[[A1]]
// CHECK: %[[PA1:.*]] = fa.convert_layout
// Steady state, tiles b+1 .. e-1, carrying m, l, acc and P of the
// previous tile.
// CHECK: %[[NEXT:.*]] = arith.addi %[[B]], %c1
// CHECK: %[[LOOP:.*]]:4 = scf.for %[[J:.*]] = %[[NEXT]] to %[[E]] step %c1 iter_args(%[[M:.*]] = %[[M1]], %[[L:.*]] = %[[L1]], %[[ACC:.*]] = %[[ACC1]], %[[PPREV:.*]] = %[[PA1]])
// S_j = Q K_j^T is started first ...
// CHECK: %[[K:.*]] = fa.load_tile %arg1
// CHECK: %[[S:.*]] = fa.tile_matmul %[[Q]], %[[K]] {async, transpose_rhs}
// ... then O = acc + P_{j-1} V_{j-1} (V of tile j - 1).
// CHECK: %[[JPREV:.*]] = arith.subi %[[J]], %c1
// CHECK: %[[ROWPREV:.*]] = arith.muli %[[JPREV]], %c64
// CHECK: %[[VPREV:.*]] = fa.load_tile %arg2[%{{.*}}, %{{.*}}, %[[ROWPREV]]]
// CHECK: %[[O:.*]] = fa.tile_matmul %[[PPREV]], %[[VPREV]] acc(%[[ACC]]) {async}
// Wait for S_j only (matmuls finish in order), softmax while P V runs ...
// CHECK: %[[SDONE:.*]] = fa.async_wait %[[S]] {pending = 1 : i64}
// CHECK: fa.mask %[[SDONE]]
// CHECK: %[[MN:.*]], %[[PN:.*]], %[[LN:.*]], %[[AN:.*]] = fa.online_softmax %{{.*}}, %[[M]], %[[L]]
// CHECK: %[[PAN:.*]] = fa.convert_layout
// ... then wait for O and rescale it by alpha_j.
// CHECK: %[[ODONE:.*]] = fa.async_wait %[[O]] {pending = 0 : i64}
// CHECK: %[[ACCN:.*]] = fa.rescale %[[ODONE]], %[[AN]]
// CHECK: scf.yield %[[MN]], %[[LN]], %[[ACCN]], %[[PAN]]
// Epilogue: P V of the last tile, e - 1.
// CHECK: %[[LAST:.*]] = arith.subi %[[E]], %c1
// CHECK: %[[VLAST:.*]] = fa.load_tile %arg2
// CHECK: %[[ACCE:.*]] = fa.tile_matmul %[[LOOP]]#3, %[[VLAST]] acc(%[[LOOP]]#2) :
// CHECK: scf.yield %[[LOOP]]#0, %[[LOOP]]#1, %[[ACCE]]
// CHECK: } else {
// CHECK: scf.yield %[[M0]], %[[L0]], %[[ACC0]]
// CHECK: fa.finalize %[[R]]#2, %[[R]]#0, %[[R]]#1
func.func @attention(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                     %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// At head dim 256 the overlap does not pay (the model's overlapsSoftmax,
// measured): the loop stays as it was, its matmuls synchronous.
// CHECK-LABEL: func.func @attention_d256
// CHECK-NOT: async
// CHECK: scf.for
// CHECK-NOT: async
// CHECK: fa.finalize
func.func @attention_d256(%q: memref<?x?x?x256xf16>, %k: memref<?x?x?x256xf16>,
                          %v: memref<?x?x?x256xf16>, %o: memref<?x?x?x256xf16>,
                          %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0625 : f32}
    : memref<?x?x?x256xf16>, memref<?x?x?x256xf16>, memref<?x?x?x256xf16>
    into memref<?x?x?x256xf16>, memref<?x?x?xf32>
  return
}
