// RUN: fa-opt %s --split-input-file --fa-lower-tiles-to-linalg | FileCheck %s

// The grid becomes a sequential loop nest over (batch, head, query tile).
// CHECK-LABEL: func @grid
// CHECK-SAME: (%[[NB:.*]]: index, %[[NH:.*]]: index, %[[NT:.*]]: index
// CHECK: scf.for %[[B:.*]] = %{{.*}} to %[[NB]]
// CHECK:   scf.for %[[H:.*]] = %{{.*}} to %[[NH]]
// CHECK:     scf.for %[[T:.*]] = %{{.*}} to %[[NT]]
// CHECK:       memref.store %{{.*}}, %{{.*}}[%[[B]], %[[H]], %[[T]]]
// CHECK-NOT: fa.grid
func.func @grid(%nb: index, %nh: index, %nt: index, %out: memref<?x?x?xf32>) {
  fa.grid (%b, %h, %t) in (%nb, %nh, %nt) {
    %one = arith.constant 1.0 : f32
    memref.store %one, %out[%b, %h, %t] : memref<?x?x?xf32>
  }
  return
}

// -----

// Rows past the end of the sequence read as 0: the index is clamped to the
// last row and the value selected away.
// CHECK-LABEL: func @load_tile
// CHECK-SAME: (%[[SRC:.*]]: memref<?x?x?x8xf16>, %[[B:.*]]: index, %[[H:.*]]: index, %[[ROW:.*]]: index)
// CHECK: %[[LEN:.*]] = memref.dim %[[SRC]], %{{.*}}
// CHECK: tensor.generate
// CHECK-NEXT: ^bb0(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK: %[[R:.*]] = arith.addi %[[ROW]], %[[I]]
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[R]], %[[LEN]]
// CHECK: %[[LAST:.*]] = arith.subi %[[LEN]], %{{.*}}
// CHECK: %[[CLAMPED:.*]] = arith.minui %[[R]], %[[LAST]]
// CHECK: %[[X:.*]] = memref.load %[[SRC]][%[[B]], %[[H]], %[[CLAMPED]], %[[J]]]
// CHECK: %[[V:.*]] = arith.select %[[IN]], %[[X]], %{{.*}} : f16
// CHECK: tensor.yield %[[V]]
// CHECK: } : tensor<4x8xf16>
func.func @load_tile(%src: memref<?x?x?x8xf16>, %b: index, %h: index, %row: index) -> tensor<4x8xf16> {
  %t = fa.load_tile %src[%b, %h, %row] : memref<?x?x?x8xf16> -> tensor<4x8xf16>
  return %t : tensor<4x8xf16>
}

// -----

// A varlen sequence's rows: `row` counts from its first row, and its end
// (not the tensor's) bounds the rows read. A row past the end reads the
// sequence's last row (zero selected), row 0 for an empty sequence at the
// start, which ends at row 0 (its last row would be row -1).
// CHECK-LABEL: func @load_tile_sequence
// CHECK-SAME: (%[[SRC:.*]]: memref<1x?x?x8xf16>, %[[H:.*]]: index, %[[ROW:.*]]: index, %[[FIRST:.*]]: index, %[[END:.*]]: index)
// CHECK-NOT: memref.dim
// CHECK: %[[START:.*]] = arith.addi %[[FIRST]], %[[ROW]]
// CHECK: tensor.generate
// CHECK-NEXT: ^bb0(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK: %[[R:.*]] = arith.addi %[[START]], %[[I]]
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[R]], %[[END]]
// CHECK: %[[LIMIT:.*]] = arith.maxui %[[END]], %[[ONE:.*]] : index
// CHECK: %[[LAST:.*]] = arith.subi %[[LIMIT]], %[[ONE]]
// CHECK: %[[CLAMPED:.*]] = arith.minui %[[R]], %[[LAST]]
// CHECK: %[[X:.*]] = memref.load %[[SRC]][%{{.*}}, %[[H]], %[[CLAMPED]], %[[J]]]
// CHECK: arith.select %[[IN]], %[[X]], %{{.*}} : f16
func.func @load_tile_sequence(%src: memref<1x?x?x8xf16>, %h: index, %row: index, %first: index, %end: index) -> tensor<4x8xf16> {
  %c0 = arith.constant 0 : index
  %t = fa.load_tile %src[%c0, %h, %row] sequence(%first, %end) : memref<1x?x?x8xf16> -> tensor<4x8xf16>
  return %t : tensor<4x8xf16>
}

// -----

// A store writes the rows of its sequence before the sequence's end.
// CHECK-LABEL: func @store_tile_sequence
// CHECK-SAME: (%[[T:.*]]: tensor<4xf32>, %[[DST:.*]]: memref<1x?x?xf32>, %[[H:.*]]: index, %[[ROW:.*]]: index, %[[FIRST:.*]]: index, %[[END:.*]]: index)
// CHECK: %[[START:.*]] = arith.addi %[[FIRST]], %[[ROW]]
// CHECK-NOT: memref.dim
// CHECK: %[[LEFT:.*]] = arith.subi %[[END]], %[[START]]
// CHECK: %[[VALID:.*]] = arith.minsi %[[LEFT]], %{{.*}}
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[VALID]]
// CHECK:   %[[R:.*]] = arith.addi %[[START]], %[[I]]
// CHECK:   memref.store %{{.*}}, %[[DST]][%{{.*}}, %[[H]], %[[R]]]
func.func @store_tile_sequence(%t: tensor<4xf32>, %dst: memref<1x?x?xf32>, %h: index, %row: index, %first: index, %end: index) {
  %c0 = arith.constant 0 : index
  fa.store_tile %t, %dst[%c0, %h, %row] sequence(%first, %end) : tensor<4xf32> -> memref<1x?x?xf32>
  return
}

// -----

// Only the valid rows, min(R, S - row), are written.
// CHECK-LABEL: func @store_tile
// CHECK-SAME: (%[[T:.*]]: tensor<4xf32>, %[[DST:.*]]: memref<?x?x?xf32>, %[[B:.*]]: index, %[[H:.*]]: index, %[[ROW:.*]]: index)
// CHECK: %[[BUF:.*]] = bufferization.to_buffer %[[T]] read_only
// CHECK: %[[LEN:.*]] = memref.dim %[[DST]], %{{.*}}
// CHECK: %[[LEFT:.*]] = arith.subi %[[LEN]], %[[ROW]]
// CHECK: %[[VALID:.*]] = arith.minsi %[[LEFT]], %{{.*}}
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[VALID]]
// CHECK:   %[[X:.*]] = memref.load %[[BUF]][%[[I]]]
// CHECK:   %[[R:.*]] = arith.addi %[[ROW]], %[[I]]
// CHECK:   memref.store %[[X]], %[[DST]][%[[B]], %[[H]], %[[R]]]
func.func @store_tile(%t: tensor<4xf32>, %dst: memref<?x?x?xf32>, %b: index, %h: index, %row: index) {
  fa.store_tile %t, %dst[%b, %h, %row] : tensor<4xf32> -> memref<?x?x?xf32>
  return
}

// -----

// Without a mask every K/V tile is visited: [0, ceil(Sk / B_c)).
// CHECK-LABEL: func @kv_range_full
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[N:.*]] = arith.ceildivui %{{.*}}, %{{.*}} : index
// CHECK: return %[[C0]], %[[N]]
func.func @kv_range_full(%q0: index, %sq: index, %sk: index) -> (index, index) {
  %b, %e = fa.kv_tile_range %q0, %sq, %sk {block_m = 16 : i64, block_n = 32 : i64}
  return %b, %e : index, index
}

// -----

// Causal: the tile's last row min(q0 + B_r, Sq) - 1 sees keys up to
// row + Sk - Sq, so end = clamp(ceil((min(q0 + B_r, Sq) + Sk - Sq) / B_c), 0, ceil(Sk / B_c)).
// CHECK-LABEL: func @kv_range_causal
// CHECK-SAME: (%[[Q0:.*]]: index, %[[SQ:.*]]: index, %[[SK:.*]]: index)
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[C32:.*]] = arith.constant 32 : index
// CHECK: %[[N:.*]] = arith.ceildivui %[[SK]], %[[C32]]
// CHECK: %[[C16:.*]] = arith.constant 16 : index
// CHECK: %[[TILE_END:.*]] = arith.addi %[[Q0]], %[[C16]]
// CHECK: %[[ROWS_END:.*]] = arith.minsi %[[TILE_END]], %[[SQ]]
// CHECK: %[[T:.*]] = arith.addi %[[ROWS_END]], %[[SK]]
// CHECK: %[[VISIBLE:.*]] = arith.subi %[[T]], %[[SQ]]
// CHECK: %[[TILES:.*]] = arith.ceildivsi %[[VISIBLE]], %[[C32]]
// CHECK: %[[MIN:.*]] = arith.minsi %[[TILES]], %[[N]]
// CHECK: %[[END:.*]] = arith.maxsi %[[C0]], %[[MIN]]
// CHECK: return %[[C0]], %[[END]]
func.func @kv_range_causal(%q0: index, %sq: index, %sk: index) -> (index, index) {
  %b, %e = fa.kv_tile_range %q0, %sq, %sk {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
  return %b, %e : index, index
}

// -----

// Part p of n (split-KV): c = ceil((end - begin) / n) tiles from begin + p c,
// both ends cut at the range's end.
// CHECK-LABEL: func @kv_range_part
// CHECK-SAME: (%[[Q0:.*]]: index, %[[SQ:.*]]: index, %[[SK:.*]]: index, %[[P:.*]]: index, %[[NP:.*]]: index)
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[N:.*]] = arith.ceildivui %[[SK]], %{{.*}}
// CHECK: %[[TILES:.*]] = arith.subi %[[N]], %[[C0]]
// CHECK: %[[CHUNK:.*]] = arith.ceildivui %[[TILES]], %[[NP]]
// CHECK: %[[SKIP:.*]] = arith.muli %[[P]], %[[CHUNK]]
// CHECK: %[[FIRST:.*]] = arith.addi %[[C0]], %[[SKIP]]
// CHECK: %[[LO:.*]] = arith.minui %[[FIRST]], %[[N]]
// CHECK: %[[HI0:.*]] = arith.addi %[[LO]], %[[CHUNK]]
// CHECK: %[[HI:.*]] = arith.minui %[[HI0]], %[[N]]
// CHECK: return %[[LO]], %[[HI]]
func.func @kv_range_part(%q0: index, %sq: index, %sk: index, %p: index, %np: index) -> (index, index) {
  %b, %e = fa.kv_tile_range %q0, %sq, %sk part(%p of %np) {block_m = 16 : i64, block_n = 32 : i64}
  return %b, %e : index, index
}

// -----

// S = Q K^T: a (i, j, k) contraction with K read as (j, k); f16 products
// are formed in f32.
// CHECK-DAG: #[[LHS:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[RHST:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func @qk_matmul
// CHECK: %[[ZERO:.*]] = linalg.fill
// CHECK: linalg.generic {indexing_maps = [#[[LHS]], #[[RHST]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: outs(%[[ZERO]] : tensor<4x2xf32>)
// CHECK: ^bb0(%[[A:.*]]: f16, %[[B:.*]]: f16, %[[C:.*]]: f32):
// CHECK: %[[A32:.*]] = arith.extf %[[A]]
// CHECK: %[[B32:.*]] = arith.extf %[[B]]
// CHECK: %[[AB:.*]] = arith.mulf %[[A32]], %[[B32]]
// CHECK: arith.addf %[[C]], %[[AB]]
func.func @qk_matmul(%q: tensor<4x8xf16>, %k: tensor<2x8xf16>) -> tensor<4x2xf32> {
  %s = fa.tile_matmul %q, %k {transpose_rhs} : tensor<4x8xf16>, tensor<2x8xf16> -> tensor<4x2xf32>
  return %s : tensor<4x2xf32>
}

// -----

// acc + P V: accumulates into the given accumulator, V read as (k, j).
// CHECK-DAG: #[[RHS:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-LABEL: func @pv_matmul
// CHECK-SAME: %[[ACC:[a-z0-9_]+]]: tensor<4x8xf32>
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[RHS]], #{{.*}}]
// CHECK-SAME: outs(%[[ACC]] : tensor<4x8xf32>)
func.func @pv_matmul(%p: tensor<4x2xf32>, %v: tensor<2x8xf32>, %acc: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = fa.tile_matmul %p, %v acc(%acc) : tensor<4x2xf32>, tensor<2x8xf32> -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// S[i, j] = -inf where the key is padding (col >= Sk) or in the future
// (col > row + Sk - Sq, compared as col + Sq > row + Sk).
// CHECK-LABEL: func @causal_mask
// CHECK-SAME: (%[[S:.*]]: tensor<4x2xf32>, %[[Q0:.*]]: index, %[[K0:.*]]: index, %[[SQ:.*]]: index, %[[SK:.*]]: index)
// CHECK: linalg.generic
// CHECK: ^bb0(%[[X:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[I:.*]] = linalg.index 0
// CHECK: %[[J:.*]] = linalg.index 1
// CHECK: %[[ROW:.*]] = arith.addi %[[Q0]], %[[I]]
// CHECK: %[[COL:.*]] = arith.addi %[[K0]], %[[J]]
// CHECK: %[[PAD:.*]] = arith.cmpi uge, %[[COL]], %[[SK]]
// CHECK: %[[LHS:.*]] = arith.addi %[[COL]], %[[SQ]]
// CHECK: %[[RHS:.*]] = arith.addi %[[ROW]], %[[SK]]
// CHECK: %[[FUTURE:.*]] = arith.cmpi ugt, %[[LHS]], %[[RHS]]
// CHECK: %[[HIDDEN:.*]] = arith.ori %[[PAD]], %[[FUTURE]]
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: arith.select %[[HIDDEN]], %[[NEGINF]], %[[X]]
func.func @causal_mask(%s: tensor<4x2xf32>, %q0: index, %k0: index, %sq: index, %sk: index) -> tensor<4x2xf32> {
  %m = fa.mask %s, %q0, %k0, %sq, %sk {mask = #fa.mask<causal>} : tensor<4x2xf32>
  return %m : tensor<4x2xf32>
}

// -----

// CHECK-DAG: #[[TILE:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[VEC:.*]] = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func @online_softmax
// CHECK-SAME: (%[[S:.*]]: tensor<4x2xf32>, %[[M:.*]]: tensor<4xf32>, %[[L:.*]]: tensor<4xf32>)
// m_new = max(m, rowmax(scale * s)): a row reduction seeded with m.
// CHECK: %[[MNEW:.*]] = linalg.generic {indexing_maps = [#[[TILE]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[S]] : {{.*}}) outs(%[[M]] : tensor<4xf32>)
// CHECK:   %[[X:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:   arith.maximumf %{{.*}}, %[[X]]
// p = exp(scale * s - m_new), with 0 in place of m_new = -inf.
// CHECK: %[[P:.*]] = linalg.generic {indexing_maps = [#[[TILE]], #[[ROW]], #[[TILE]]], iterator_types = ["parallel", "parallel"]} ins(%[[S]], %[[MNEW]] : {{.*}})
// CHECK:   ^bb0(%[[SV:.*]]: f32, %[[MV:.*]]: f32, %{{.*}}: f32):
// CHECK:   %[[SX:.*]] = arith.mulf %[[SV]], %{{.*}}
// CHECK:   %[[EMPTY:.*]] = arith.cmpf oeq, %[[MV]], %{{.*}}
// CHECK:   %[[BASE:.*]] = arith.select %[[EMPTY]], %{{.*}}, %[[MV]]
// CHECK:   %[[D:.*]] = arith.subf %[[SX]], %[[BASE]]
// CHECK:   math.exp %[[D]]
// alpha = exp(m - m_new); l * alpha
// CHECK: %[[CORR:.*]]:2 = linalg.generic {indexing_maps = [#[[VEC]], #[[VEC]], #[[VEC]], #[[VEC]], #[[VEC]]], iterator_types = ["parallel"]} ins(%[[M]], %[[MNEW]], %[[L]] : {{.*}})
// CHECK:   %[[ALPHA:.*]] = math.exp
// CHECK:   %[[LS:.*]] = arith.mulf %[[ALPHA]], %{{.*}}
// CHECK:   linalg.yield %[[ALPHA]], %[[LS]]
// l_new = alpha * l + rowsum(p)
// CHECK: %[[LNEW:.*]] = linalg.generic {indexing_maps = [#[[TILE]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[P]] : {{.*}}) outs(%[[CORR]]#1 : tensor<4xf32>)
// CHECK:   arith.addf
// CHECK: return %[[MNEW]], %[[P]], %[[LNEW]], %[[CORR]]#0
func.func @online_softmax(%s: tensor<4x2xf32>, %m: tensor<4xf32>, %l: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4x2xf32>, tensor<4xf32>, tensor<4xf32>) {
  %m_new, %p, %l_new, %alpha = fa.online_softmax %s, %m, %l {scale = 0.5 : f32} : tensor<4x2xf32>, tensor<4xf32>
  return %m_new, %p, %l_new, %alpha : tensor<4xf32>, tensor<4x2xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// acc[i, j] * alpha[i]
// CHECK-LABEL: func @rescale
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4xf32>)
// CHECK:   arith.mulf
func.func @rescale(%acc: tensor<4x8xf32>, %alpha: tensor<4xf32>) -> tensor<4x8xf32> {
  %r = fa.rescale %acc, %alpha : tensor<4x8xf32>, tensor<4xf32>
  return %r : tensor<4x8xf32>
}

// -----

// O = acc / l (0 for a row with l = 0), LSE = m + log l (-inf for l = 0).
// CHECK-LABEL: func @finalize
// CHECK: linalg.generic
// CHECK:   ^bb0(%[[A:.*]]: f32, %[[L:.*]]: f32, %{{.*}}: f32):
// CHECK:   %[[O:.*]] = arith.divf %[[A]], %[[L]]
// CHECK:   %[[EMPTY:.*]] = arith.cmpf oeq, %[[L]], %{{.*}}
// CHECK:   arith.select %[[EMPTY]], %{{.*}}, %[[O]]
// CHECK: linalg.generic
// CHECK:   ^bb0(%[[MV:.*]]: f32, %[[LV:.*]]: f32, %{{.*}}: f32):
// CHECK:   %[[LOG:.*]] = math.log %[[LV]]
// CHECK:   %[[LSE:.*]] = arith.addf %[[MV]], %[[LOG]]
// CHECK:   %[[EMPTY2:.*]] = arith.cmpf oeq, %[[LV]], %{{.*}}
// CHECK:   %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:   arith.select %[[EMPTY2]], %[[NEGINF]], %[[LSE]]
func.func @finalize(%acc: tensor<4x8xf32>, %m: tensor<4xf32>, %l: tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %o, %lse = fa.finalize %acc, %m, %l : tensor<4x8xf32>, tensor<4xf32>
  return %o, %lse : tensor<4x8xf32>, tensor<4xf32>
}

// -----

// With a block mask's key ranges: the union of the tile's 16-row groups'
// ranges (entries q0 / 16 .. ceil(min(q0 + B_r, Sq) / 16) - 1 of batch b,
// head min(h, Hb - 1)) as K/V tiles floor(lo / B_c) .. ceil(hi / B_c) - 1,
// none when lo >= hi; then the causal clamp. The fold over the groups is
// kept rolled (LLVM's unroll disabled: its loop annotation).
// CHECK: #[[NOUNROLL:.*]] = #llvm.loop_unroll<disable = true>
// CHECK: #[[ROLLED:.*]] = #llvm.loop_annotation<unroll = #[[NOUNROLL]]>
// CHECK-LABEL: func @kv_range_table
// CHECK-SAME: (%[[Q0:.*]]: index, %[[SQ:.*]]: index, %[[SK:.*]]: index, %[[B:.*]]: index, %[[H:.*]]: index, %[[T:.*]]: memref<?x?x?x4xi32>)
// CHECK: %[[HB:.*]] = memref.dim %[[T]], %{{.*}}
// CHECK: %[[LASTH:.*]] = arith.subi %[[HB]], %{{.*}}
// CHECK: %[[TH:.*]] = arith.minui %[[H]], %[[LASTH]]
// CHECK: %[[HULL:.*]]:2 = scf.for %[[G:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[LO:.*]] = %{{.*}}, %[[HI:.*]] = %{{.*}})
// CHECK: %[[FIRST:.*]] = memref.load %[[T]][%[[B]], %[[TH]], %[[G]], %{{.*}}]
// CHECK: arith.minsi %[[LO]]
// CHECK: %[[END:.*]] = memref.load %[[T]][%[[B]], %[[TH]], %[[G]], %{{.*}}]
// CHECK: arith.maxsi %[[HI]]
// CHECK: } {loop_annotation = #[[ROLLED]]}
// CHECK: arith.floordivsi %[[HULL]]#0
// CHECK: arith.ceildivsi %[[HULL]]#1
// CHECK: %[[EMPTY:.*]] = arith.cmpi sge, %[[HULL]]#0, %[[HULL]]#1
// CHECK: arith.select %[[EMPTY]]
func.func @kv_range_table(%q0: index, %sq: index, %sk: index, %b: index, %h: index,
                          %t: memref<?x?x?x4xi32>) -> (index, index) {
  %begin, %end = fa.kv_tile_range %q0, %sq, %sk at(%b, %h) ranges %t : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
  return %begin, %end : index, index
}

// -----

// The whole range of a tile's groups: the largest whole_first (column 2)
// and the smallest whole_end (column 3) of entries start / 16 ..
// ceil(end / 16) - 1; none when the tile spans no group.
// CHECK-LABEL: func @whole_range_table
// CHECK-SAME: (%[[START:.*]]: index, %[[END:.*]]: index, %[[B:.*]]: index, %[[H:.*]]: index, %[[T:.*]]: memref<?x?x?x4xi32>)
// CHECK: %[[TH:.*]] = arith.minui %[[H]]
// CHECK: %[[FIRSTG:.*]] = arith.divui %[[START]]
// CHECK: %[[ENDG:.*]] = arith.ceildivui %[[END]]
// CHECK: %[[MEET:.*]]:2 = scf.for %[[G:.*]] = %[[FIRSTG]] to %[[ENDG]] step %{{.*}} iter_args(%[[LO:.*]] = %{{.*}}, %[[HI:.*]] = %{{.*}})
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: memref.load %[[T]][%[[B]], %[[TH]], %[[G]], %[[C2]]]
// CHECK: arith.maxsi %[[LO]]
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: memref.load %[[T]][%[[B]], %[[TH]], %[[G]], %[[C3]]]
// CHECK: arith.minsi %[[HI]]
// CHECK: %[[NONE:.*]] = arith.cmpi uge, %[[FIRSTG]], %[[ENDG]]
// CHECK: %[[HIOUT:.*]] = arith.select %[[NONE]], %{{.*}}, %[[MEET]]#1
// CHECK: return %[[MEET]]#0, %[[HIOUT]]
func.func @whole_range_table(%start: index, %end: index, %b: index, %h: index,
                             %t: memref<?x?x?x4xi32>) -> (index, index) {
  %lo, %hi = fa.whole_range %start, %end at(%b, %h) ranges %t : memref<?x?x?x4xi32>
  return %lo, %hi : index, index
}

// -----

// The deterministic backward's previous visitor: a walk from the K/V tile
// before j (min(j, hi) - 1) down to lo that asks each tile's query range
// (the table's hull over its 16-key groups, at kv_start = t * 32, the
// tile clamped into [lo, hi)) whether it holds query tile i, and stops at
// the first that does; found when the walk ended inside [lo, hi).
// CHECK-LABEL: func @previous_visitor
// CHECK-SAME: (%[[I:[a-z0-9_]+]]: index, %[[J:[a-z0-9_]+]]: index, %[[LO:[a-z0-9_]+]]: index, %[[HI:[a-z0-9_]+]]: index, %{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index, %[[T:[a-z0-9_]+]]: memref<?x?x?x4xi32>)
// CHECK: %[[JCLAMP:.*]] = arith.minsi %[[J]], %[[HI]]
// CHECK: %[[START:.*]] = arith.subi %[[JCLAMP]], %{{.*}}
// CHECK: %[[WALK:.*]] = scf.while (%[[TILE:.*]] = %[[START]]) : (index) -> index {
// CHECK: %[[INSIDE:.*]] = arith.cmpi sge, %[[TILE]], %[[LO]]
// CHECK: %[[ASKED:.*]] = arith.maxsi %{{.*}}, %[[LO]]
// CHECK: %[[KVSTART:.*]] = arith.muli %[[ASKED]], %{{.*}}
// CHECK: scf.for
// CHECK: memref.load %[[T]]
// CHECK: %[[FROM:.*]] = arith.cmpi sle, %{{.*}}, %[[I]]
// CHECK: %[[UPTO:.*]] = arith.cmpi slt, %[[I]], %{{.*}}
// CHECK: %[[VISITS:.*]] = arith.andi %[[FROM]], %[[UPTO]]
// CHECK: %[[NOT:.*]] = arith.xori %[[VISITS]], %{{.*}}
// CHECK: %[[GOON:.*]] = arith.andi %[[INSIDE]], %[[NOT]]
// CHECK: scf.condition(%[[GOON]]) %[[TILE]]
// CHECK: } do {
// CHECK: ^bb0(%[[AT:.*]]: index):
// CHECK: %[[NEXT:.*]] = arith.subi %[[AT]], %{{.*}}
// CHECK: scf.yield %[[NEXT]]
// CHECK: %[[FOUND:.*]] = arith.cmpi sge, %[[WALK]], %[[LO]]
// CHECK: return %[[FOUND]], %[[WALK]]
func.func @previous_visitor(%i: index, %j: index, %lo: index, %hi: index,
                            %sq: index, %sk: index, %b: index, %h: index,
                            %t: memref<?x?x?x4xi32>) -> (i1, index) {
  %found, %previous = fa.previous_visitor %i, %j in [%lo, %hi), %sq, %sk at(%b, %h) ranges %t : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64}
  return %found, %previous : i1, index
}

// -----

// Descending (the causal turns, last to first): the walk starts after
// max(j, lo - 1) and climbs to hi.
// CHECK-LABEL: func @previous_visitor_descending
// CHECK-SAME: (%[[I:[a-z0-9_]+]]: index, %[[J:[a-z0-9_]+]]: index, %[[LO:[a-z0-9_]+]]: index, %[[HI:[a-z0-9_]+]]: index
// CHECK: %[[LOW:.*]] = arith.subi %[[LO]], %{{.*}}
// CHECK: %[[JCLAMP:.*]] = arith.maxsi %[[J]], %[[LOW]]
// CHECK: %[[START:.*]] = arith.addi %[[JCLAMP]], %{{.*}}
// CHECK: %[[WALK:.*]] = scf.while (%[[TILE:.*]] = %[[START]]) : (index) -> index {
// CHECK: arith.cmpi slt, %[[TILE]], %[[HI]]
// CHECK: } do {
// CHECK: arith.addi
// CHECK: %[[FOUND:.*]] = arith.cmpi slt, %[[WALK]], %[[HI]]
// CHECK: return %[[FOUND]], %[[WALK]]
func.func @previous_visitor_descending(%i: index, %j: index, %lo: index, %hi: index,
                                       %sq: index, %sk: index, %b: index, %h: index,
                                       %t: memref<?x?x?x4xi32>) -> (i1, index) {
  %found, %previous = fa.previous_visitor %i, %j in [%lo, %hi), %sq, %sk at(%b, %h) ranges %t : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>, descending}
  return %found, %previous : i1, index
}

// -----

// A score_mod's load of a captured tensor clamps each index into the
// tensor (unsigned min with the last index) and is marked for
// fa-hoist-capture-loads.
// CHECK-LABEL: func @score_mod_capture
// CHECK-SAME: %[[H:[a-z0-9_]+]]: index, %[[T:[a-z0-9_]+]]: memref<?xf32>)
// CHECK: linalg.generic
// CHECK: %[[DIM:.*]] = memref.dim %[[T]], %{{.*}} : memref<?xf32>
// CHECK: %[[LAST:.*]] = arith.subi %[[DIM]], %{{.*}} : index
// CHECK: %[[IDX:.*]] = arith.minui %[[H]], %[[LAST]] : index
// CHECK: memref.load %[[T]][%[[IDX]]] {fa.capture_load} : memref<?xf32>
func.func @score_mod_capture(%s: tensor<4x8xf32>, %q0: index, %k0: index, %sq: index, %sk: index, %b: index, %h: index, %slopes: memref<?xf32>) -> tensor<4x8xf32> {
  %r = fa.score_mod %s, %q0, %k0, %sq, %sk at(%b, %h) captures(%slopes : memref<?xf32>) {scale = 1.0 : f32} : tensor<4x8xf32> {
  ^bb0(%x: f32, %bb: index, %hh: index, %qi: index, %ki: index, %l1: index, %l2: index, %t: memref<?xf32>):
    %v = memref.load %t[%hh] : memref<?xf32>
    %y = arith.mulf %x, %v : f32
    fa.yield %y : f32
  }
  return %r : tensor<4x8xf32>
}

// -----

// A chunked mask (floor(diag / 1024) == floor(kv / 1024)): the keys of the
// chunks of the tile's first and last rows, [1024 floor(d0 / 1024),
// 1024 (1 + floor(d1 / 1024)) - 1] with d = q + Sk - Sq, in 32-key tiles.
// CHECK-LABEL: func @kv_tile_range_chunked
// CHECK-SAME: (%[[Q0:[^:]*]]: index, %[[SQ:[^:]*]]: index, %[[SK:[^:]*]]: index
// CHECK: %[[TILES:.*]] = arith.ceildivui %[[SK]], %c32
// CHECK: %[[FIRSTCHUNK:.*]] = arith.floordivsi %{{.*}}, %c1024
// CHECK: %[[FIRSTKEYCHUNK:.*]] = arith.addi %{{.*}}, %[[FIRSTCHUNK]]
// CHECK: %[[FIRSTKEY:.*]] = arith.muli %{{.*}}, %[[FIRSTKEYCHUNK]]
// CHECK: %[[LASTCHUNK:.*]] = arith.floordivsi %{{.*}}, %c1024
// CHECK: %[[NEG:.*]] = arith.muli %[[LASTCHUNK]], %c-1
// CHECK: %[[NEGSUM:.*]] = arith.addi %{{.*}}, %[[NEG]]
// CHECK: %[[NEXT:.*]] = arith.subi %c1{{.*}}, %[[NEGSUM]]
// CHECK: %[[END:.*]] = arith.muli %{{.*}}, %[[NEXT]]
// CHECK: %[[LASTKEY:.*]] = arith.addi %[[END]], %c-1
// CHECK: arith.floordivsi %{{.*}}, %c32
// CHECK: %[[BEGIN:.*]] = arith.maxsi %c0, %{{.*}}
// CHECK: arith.floordivsi %{{.*}}, %c32
// CHECK: arith.minsi %[[TILES]], %{{.*}}
// CHECK: return %[[BEGIN]]
func.func @kv_tile_range_chunked(%q0: index, %sq: index, %sk: index,
                                 %b: index, %h: index) -> (index, index) {
  %begin, %end = fa.kv_tile_range %q0, %sq, %sk at(%b, %h) {block_m = 16 : i64, block_n = 32 : i64} mask_mod {
  ^bb0(%b0: index, %h0: index, %q_idx: index, %kv_idx: index, %q_len: index, %kv_len: index):
    %shift = arith.subi %kv_len, %q_len : index
    %diag = arith.addi %q_idx, %shift : index
    %c = arith.constant 1024 : index
    %qc = arith.floordivsi %diag, %c : index
    %kc = arith.floordivsi %kv_idx, %c : index
    %keep = arith.cmpi eq, %qc, %kc : index
    fa.yield %keep : i1
  }
  return %begin, %end : index, index
}
