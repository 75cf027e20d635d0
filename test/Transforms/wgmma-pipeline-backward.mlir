// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2" --fa-wgmma-pipeline | FileCheck %s

// The backward's dkdv loop, reordered within the iteration so that each
// warpgroup's element-wise work overlaps its own tensor-core products.
// CHECK-LABEL: func @backward_bf16
// CHECK: program = "delta"
// CHECK: scf.for
// CHECK: scf.for
// 0. Each thread's rows of LSE and D read from their staged slots ...
// CHECK: %[[LSE:.*]] = fa.convert_layout {{.*}} : tensor<64xf32, #fa.shared<pad = 0>>
// CHECK: %[[D:.*]] = fa.convert_layout {{.*}} : tensor<64xf32, #fa.shared<pad = 0>>
// 1. S = Q K^T and dP = dO V^T both start ...
// CHECK: %[[S:.*]] = fa.tile_matmul %[[Q:.*]], %{{.*}} {async, transpose_rhs}
// CHECK-NEXT: %[[DP:.*]] = fa.tile_matmul %[[DO:.*]], %{{.*}} {async, transpose_rhs}
// 2. ... S is waited for with dP still running (one group pending); the
// mask and P = exp(S - LSE) overlap dP ...
// CHECK-NEXT: %[[SW:.*]] = fa.async_wait %[[S]] {pending = 1 : i64}
// CHECK-NEXT: %[[SM:.*]] = fa.mask %[[SW]]
// CHECK-NEXT: %[[P:.*]] = fa.recompute_probs %[[SM]], %[[LSE]]
// 3. P staged, dV += P^T dO started; dP waited for with dV still running;
// dS = P (dP - D) overlaps dV ...
// CHECK: %[[PS:.*]] = fa.convert_layout
// CHECK-NEXT: %[[DV:.*]] = fa.tile_matmul %[[PS]], %[[DO]] acc(%{{.*}}) {async, transpose_lhs}
// CHECK-NEXT: %[[DPW:.*]] = fa.async_wait %[[DP]] {pending = 1 : i64}
// CHECK-NEXT: %[[DS:.*]] = fa.softmax_grad %[[P]], %[[DPW]], %[[D]]
// 4. dS staged, dQ = dS K and dK += dS^T Q started in that order; dQ
// waited for with dK still running (dV is done with it), so that dQ's
// staging and its add to global overlap dK; dV and dK waited for at the
// end (every product of the iteration done: the staging buffers and the
// Q/dO ring are free when the next iteration starts) and pinned before
// the loop carries them.
// CHECK: %[[DSS:.*]] = fa.convert_layout
// CHECK-NEXT: %[[DQ:.*]] = fa.tile_matmul %[[DSS]], %{{.*}} {async}
// CHECK-NEXT: %[[DK:.*]] = fa.tile_matmul %[[DSS]], %[[Q]] acc(%{{.*}}) {async, transpose_lhs}
// CHECK-NEXT: %[[DQW:.*]] = fa.async_wait %[[DQ]] {pending = 1 : i64}
// CHECK-NEXT: %[[DQS:.*]] = fa.convert_layout %[[DQW]]
// CHECK-NEXT: fa.accumulate_tile %[[DQS]]
// CHECK-NEXT: %[[DVW:.*]] = fa.async_wait %[[DV]] {pending = 0 : i64}
// CHECK-NEXT: %[[DKW:.*]] = fa.async_wait %[[DK]] {pending = 0 : i64}
// CHECK-NEXT: scf.yield %[[DKW]], %[[DVW]]
func.func @backward_bf16(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>,
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

// -----

// A score_mod reads the raw S twice (its value, then its derivative at
// dS): the loop is reordered all the same, every reader of S after its
// wait.
// CHECK-LABEL: func @backward_softcap
// CHECK: %[[S:.*]] = fa.tile_matmul %{{.*}}, %{{.*}} {async, transpose_rhs}
// CHECK-NEXT: %[[DP:.*]] = fa.tile_matmul %{{.*}}, %{{.*}} {async, transpose_rhs}
// CHECK-NEXT: %[[SW:.*]] = fa.async_wait %[[S]] {pending = 1 : i64}
// CHECK-NEXT: %[[SM:.*]] = fa.score_mod %[[SW]]
// CHECK: %[[DPW:.*]] = fa.async_wait %[[DP]] {pending = 1 : i64}
// CHECK-NEXT: %[[DS:.*]] = fa.softmax_grad %{{.*}}, %[[DPW]]
// CHECK-NEXT: fa.score_mod_grad %[[DS]], %[[SW]]
// CHECK: fa.async_wait %{{.*}} {pending = 0 : i64}
func.func @backward_softcap(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>,
                            %o: memref<?x?x?x128xbf16>, %do: memref<?x?x?x128xbf16>, %lse: memref<?x?x?xf32>,
                            %dq: memref<?x?x?x128xbf16>, %dk: memref<?x?x?x128xbf16>, %dv: memref<?x?x?x128xbf16>,
                            %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x128xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>,
      memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?xf32>
    into memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x128xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %cap = arith.constant 50.0 : f32
      %x = arith.divf %s, %cap : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %cap : f32
      fa.yield %r : f32
    }
  return
}
