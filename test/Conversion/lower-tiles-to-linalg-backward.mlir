// RUN: fa-opt %s --split-input-file --fa-lower-tiles-to-linalg | FileCheck %s

// The causal query-tile range: every tile for the mask `none`; with the
// causal mask begin = clamp(floordiv(kv_start + Sq - Sk, block_m), 0, end).
// CHECK-LABEL: func @q_tile_range
// CHECK-SAME: (%[[KV:.*]]: index, %[[SQ:.*]]: index, %[[SK:.*]]: index)
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK: %[[END:.*]] = arith.ceildivui %[[SQ]], %[[C16]]
// CHECK: %[[SUM:.*]] = arith.addi %[[KV]], %[[SQ]]
// CHECK: %[[FIRST_ROW:.*]] = arith.subi %[[SUM]], %[[SK]]
// CHECK: %[[FIRST:.*]] = arith.floordivsi %[[FIRST_ROW]], %[[C16]]
// CHECK: %[[LOW:.*]] = arith.maxsi %[[C0]], %[[FIRST]]
// CHECK: %[[BEGIN:.*]] = arith.minsi %[[LOW]], %[[END]]
// CHECK: return %[[BEGIN]], %[[END]]
func.func @q_tile_range(%kv_start: index, %sq: index, %sk: index) -> (index, index) {
  %begin, %end = fa.q_tile_range %kv_start, %sq, %sk {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
  return %begin, %end : index, index
}

// -----

// Prefix-LM (kv < 512 or the causal side): the query rows of a K/V tile are
// all of them only while the tile starts inside the prefix (the `kv < 512`
// side holds somewhere in it: kv_start - 511 <= 0); past it that side keeps
// nothing (+2^40 as the low bound) and the causal side's first row bounds
// the range (its first row kv_start + Sq - Sk). The range stays within the
// tiles.
// CHECK-LABEL: func @q_tile_range_prefix_lm
// CHECK-SAME: (%[[KV:[^:]*]]: index, %[[SQ:[^:]*]]: index, %[[SK:[^:]*]]: index
// CHECK: %[[TILES:.*]] = arith.ceildivui %[[SQ]], %c16
// CHECK: %[[LEAST:.*]] = arith.addi %c-511, %[[KV]]
// CHECK: %[[HOLDS:.*]] = arith.cmpi sle, %[[LEAST]], %{{.*}}
// CHECK: %[[LO:.*]] = arith.select %[[HOLDS]], %c-1099511627776, %c1099511627776
// CHECK: %[[UNION:.*]] = arith.minsi %[[LO]], %{{.*}}
// CHECK: %[[FIRST:.*]] = arith.floordivsi %[[UNION]], %c16
// CHECK: %[[BEGIN:.*]] = arith.maxsi %c0, %[[FIRST]]
// CHECK: %[[END:.*]] = arith.maxsi %[[TILES]], %[[BEGIN]]
// CHECK: %[[BEGIN_IN:.*]] = arith.minsi %[[BEGIN]], %[[TILES]]
// CHECK: %[[END_IN:.*]] = arith.minsi %[[END]], %[[TILES]]
// CHECK: return %[[BEGIN_IN]], %[[END_IN]]
func.func @q_tile_range_prefix_lm(%kv_start: index, %sq: index, %sk: index,
                                  %b: index, %h: index) -> (index, index) {
  %begin, %end = fa.q_tile_range %kv_start, %sq, %sk at(%b, %h) {block_m = 16 : i64, block_n = 32 : i64} mask_mod {
  ^bb0(%b0: index, %h0: index, %q_idx: index, %kv_idx: index, %q_len: index, %kv_len: index):
    %prefix = arith.constant 512 : index
    %in_prefix = arith.cmpi slt, %kv_idx, %prefix : index
    %shift = arith.subi %kv_len, %q_len : index
    %diag = arith.addi %q_idx, %shift : index
    %causal = arith.cmpi sle, %kv_idx, %diag : index
    %keep = arith.ori %in_prefix, %causal : i1
    fa.yield %keep : i1
  }
  return %begin, %end : index, index
}

// -----

// D = rowsum(dO * O), widened to f32 and reduced over the columns.
// CHECK-LABEL: func @row_dot
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: ^bb0(%[[A:.*]]: f16, %[[B:.*]]: f16, %[[ACC:.*]]: f32):
// CHECK: %[[AW:.*]] = arith.extf %[[A]] : f16 to f32
// CHECK: %[[BW:.*]] = arith.extf %[[B]] : f16 to f32
// CHECK: %[[PROD:.*]] = arith.mulf %[[AW]], %[[BW]]
// CHECK: arith.addf %[[ACC]], %[[PROD]]
func.func @row_dot(%do: tensor<16x32xf16>, %o: tensor<16x32xf16>) -> tensor<16xf32> {
  %d = fa.row_dot %do, %o : tensor<16x32xf16> -> tensor<16xf32>
  return %d : tensor<16xf32>
}

// -----

// P = exp(scale * s - lse), with lse = -inf (a row that saw no key) read as
// 0 so that its masked scores give exp(-inf) = 0, not NaN.
// CHECK-LABEL: func @recompute_probs
// CHECK: linalg.generic
// CHECK: ^bb0(%[[S:.*]]: f32, %[[LSE:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[X:.*]] = arith.mulf %[[S]], %{{.*}} : f32
// CHECK: %[[EMPTY:.*]] = arith.cmpf oeq, %[[LSE]], %{{.*}} : f32
// CHECK: %[[BASE:.*]] = arith.select %[[EMPTY]], %{{.*}}, %[[LSE]] : f32
// CHECK: %[[SHIFTED:.*]] = arith.subf %[[X]], %[[BASE]]
// CHECK: math.exp %[[SHIFTED]]
func.func @recompute_probs(%s: tensor<16x8xf32>, %lse: tensor<16xf32>) -> tensor<16x8xf32> {
  %p = fa.recompute_probs %s, %lse {scale = 0.5 : f32} : tensor<16x8xf32>, tensor<16xf32>
  return %p : tensor<16x8xf32>
}

// -----

// dS = scale * P * (dP - D)
// CHECK-LABEL: func @softmax_grad
// CHECK: linalg.generic
// CHECK: ^bb0(%[[P:.*]]: f32, %[[DP:.*]]: f32, %[[D:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[SCALE:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: %[[C:.*]] = arith.subf %[[DP]], %[[D]]
// CHECK: %[[G:.*]] = arith.mulf %[[P]], %[[C]]
// CHECK: arith.mulf %[[G]], %[[SCALE]]
func.func @softmax_grad(%p: tensor<16x8xf32>, %dp: tensor<16x8xf32>, %d: tensor<16xf32>) -> tensor<16x8xf32> {
  %ds = fa.softmax_grad %p, %dp, %d {scale = 0.5 : f32} : tensor<16x8xf32>, tensor<16xf32>
  return %ds : tensor<16x8xf32>
}

// -----

// P^T dO: the lhs is read transposed, (i, j, k) -> lhs[k, i].
// CHECK-DAG: #[[LHS:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG: #[[RHS:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func @matmul_transpose_lhs
// CHECK: linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction"]}
func.func @matmul_transpose_lhs(%p: tensor<16x8xf16>, %do: tensor<16x32xf16>, %acc: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %dv = fa.tile_matmul %p, %do acc(%acc) {transpose_lhs} : tensor<16x8xf16>, tensor<16x32xf16> -> tensor<8x32xf32>
  return %dv : tensor<8x32xf32>
}

// -----

// dQ rows are added into the accumulator, only the rows before the end of
// the sequence.
// CHECK-LABEL: func @accumulate_tile
// CHECK-SAME: (%[[T:.*]]: tensor<16x32xf32>, %[[DEST:.*]]: memref<?x?x?x32xf32>, %[[B:.*]]: index, %[[H:.*]]: index, %[[ROW:.*]]: index)
// CHECK: %[[BUF:.*]] = bufferization.to_buffer %[[T]] read_only
// CHECK: %[[LEN:.*]] = memref.dim %[[DEST]], %{{.*}}
// CHECK: %[[LEFT:.*]] = arith.subi %[[LEN]], %[[ROW]]
// CHECK: %[[ROWS:.*]] = arith.minsi %[[LEFT]], %{{.*}}
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[ROWS]]
// CHECK: scf.for %[[J:.*]] =
// CHECK: %[[X:.*]] = memref.load %[[BUF]][%[[I]], %[[J]]]
// CHECK: %[[R:.*]] = arith.addi %[[ROW]], %[[I]]
// CHECK: %[[OLD:.*]] = memref.load %[[DEST]][%[[B]], %[[H]], %[[R]], %[[J]]]
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]], %[[X]]
// CHECK: memref.store %[[NEW]], %[[DEST]][%[[B]], %[[H]], %[[R]], %[[J]]]
func.func @accumulate_tile(%t: tensor<16x32xf32>, %dest: memref<?x?x?x32xf32>, %b: index, %h: index, %row: index) {
  fa.accumulate_tile %t, %dest[%b, %h, %row] : tensor<16x32xf32> -> memref<?x?x?x32xf32>
  return
}

// -----

// A varlen sequence's dQ rows: counted from its first row, none added at
// or past its end.
// CHECK-LABEL: func @accumulate_tile_sequence
// CHECK-SAME: (%[[T:.*]]: tensor<16x32xf32>, %[[DEST:.*]]: memref<1x?x?x32xf32>, %[[H:.*]]: index, %[[ROW:.*]]: index, %[[FIRST:.*]]: index, %[[END:.*]]: index)
// CHECK: %[[START:.*]] = arith.addi %[[FIRST]], %[[ROW]]
// CHECK: %[[LEFT:.*]] = arith.subi %[[END]], %[[START]]
// CHECK: %[[ROWS:.*]] = arith.minsi %[[LEFT]], %{{.*}}
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[ROWS]]
// CHECK: %[[R:.*]] = arith.addi %[[START]], %[[I]]
// CHECK: memref.store %{{.*}}, %[[DEST]][%{{.*}}, %[[H]], %[[R]], %{{.*}}]
func.func @accumulate_tile_sequence(%t: tensor<16x32xf32>, %dest: memref<1x?x?x32xf32>, %h: index, %row: index, %first: index, %end: index) {
  %c0 = arith.constant 0 : index
  fa.accumulate_tile %t, %dest[%c0, %h, %row] sequence(%first, %end) : tensor<16x32xf32> -> memref<1x?x?x32xf32>
  return
}

// -----

// Programs run in grid order on the CPU: every turn must have come when it
// is waited for (asserted: on the GPU a turn out of grid order would hang);
// passing it stores turn + 1.
// CHECK-LABEL: func @turns
// CHECK-SAME: (%[[ORDER:.*]]: memref<?x?x?xi32>, %[[B:.*]]: index, %[[H:.*]]: index, %[[T:.*]]: index, %[[J:.*]]: index)
// CHECK-NOT: fa.wait_turn
// CHECK: %[[NOW:.*]] = memref.load %[[ORDER]][%[[B]], %[[H]], %[[T]]]
// CHECK: %[[TURN:.*]] = arith.index_cast %[[J]] : index to i32
// CHECK: %[[ON:.*]] = arith.cmpi eq, %[[NOW]], %[[TURN]] : i32
// CHECK: cf.assert %[[ON]], "fa.wait_turn: a program came out of its turn (the grid order and the turns disagree)"
// CHECK: %[[NEXT:.*]] = arith.addi %[[J]], %{{.*}} : index
// CHECK: %[[V:.*]] = arith.index_cast %[[NEXT]] : index to i32
// CHECK: memref.store %[[V]], %[[ORDER]][%[[B]], %[[H]], %[[T]]]
func.func @turns(%order: memref<?x?x?xi32>, %b: index, %h: index, %t: index, %j: index) {
  fa.wait_turn %order[%b, %h, %t], %j : memref<?x?x?xi32>
  fa.pass_turn %order[%b, %h, %t], %j : memref<?x?x?xi32>
  return
}

// -----

// A turn taken only where %taken holds: the check and the store in a branch
// on it.
// CHECK-LABEL: func @taken_turns
// CHECK-SAME: (%[[ORDER:.*]]: memref<?x?x?xi32>, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[J:.*]]: index, %[[TAKEN:.*]]: i1)
// CHECK: scf.if %[[TAKEN]] {
// CHECK-NEXT: memref.load %[[ORDER]]
// CHECK: cf.assert
// CHECK-NEXT: }
// CHECK-NEXT: scf.if %[[TAKEN]] {
// CHECK: arith.addi %[[J]]
// CHECK: memref.store
// CHECK-NEXT: }
func.func @taken_turns(%order: memref<?x?x?xi32>, %b: index, %h: index, %t: index, %j: index, %taken: i1) {
  fa.wait_turn %order[%b, %h, %t], %j if %taken : memref<?x?x?xi32>
  fa.pass_turn %order[%b, %h, %t], %j if %taken : memref<?x?x?xi32>
  return
}
