// RUN: fa-opt %s --split-input-file --fa-tile="block-m=16 block-n=32" --fa-tile-backward="block-m=16 block-n=32" --cse | FileCheck %s

// Sinks in the forward: after the K/V loop, the head's sink logit joins
// each row's state (fa.join_sink); the accumulator takes the correction
// before the deferred normalization, which then counts the sink.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[SINKS:[^:]*]]: memref<?xf32>)
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// CHECK: %[[LOOP:.*]]:3 = scf.for
// CHECK: %[[SINK:.*]] = memref.load %[[SINKS]][%[[H]]] : memref<?xf32>
// CHECK-NEXT: %[[M:.*]], %[[L:.*]], %[[ALPHA:.*]] = fa.join_sink %[[SINK]], %[[LOOP]]#0, %[[LOOP]]#1 : tensor<16xf32>
// CHECK-NEXT: %[[ACC:.*]] = fa.rescale %[[LOOP]]#2, %[[ALPHA]]
// CHECK-NEXT: %{{.*}}, %{{.*}} = fa.finalize %[[ACC]], %[[M]], %[[L]]
func.func @forward(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>, %v: memref<?x?x?x64xf32>,
                   %o: memref<?x?x?x64xf32>, %lse: memref<?x?x?xf32>, %sinks: memref<?xf32>) {
  fa.attention %q, %k, %v into %o, %lse sinks %sinks {scale = 0.125 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32> sinks memref<?xf32>
  return
}

// -----

// Sinks per row (the packed GQA decode): each row's own sink, read by the
// tile op from the [H * Sq] logits at the tile's first row.
// CHECK-LABEL: func.func @forward_per_row
// CHECK-SAME: %[[Q:[^:]*]]: memref<?x?x?x64xf32>, %{{[^:]*}}: memref<?x?x?x64xf32>, %{{[^:]*}}: memref<?x?x?x64xf32>, %{{[^:]*}}: memref<?x?x?x64xf32>, %{{[^:]*}}: memref<?x?x?xf32>, %[[SINKS:[^:]*]]: memref<?xf32>)
// CHECK: %[[SQ:.*]] = memref.dim %[[Q]], %c2
// CHECK: fa.grid (%{{.*}}, %[[H:.*]], %[[T:.*]]) in
// CHECK: %[[START:.*]] = arith.muli %[[T]], %c16
// CHECK: %[[LOOP:.*]]:3 = scf.for
// CHECK-NOT: memref.load %[[SINKS]]
// CHECK: %[[M:.*]], %[[L:.*]], %[[ALPHA:.*]] = fa.join_row_sinks %[[SINKS]][%[[H]], %[[START]], %[[SQ]]], %[[LOOP]]#0, %[[LOOP]]#1 : memref<?xf32>, tensor<16xf32>
// CHECK-NEXT: %[[ACC:.*]] = fa.rescale %[[LOOP]]#2, %[[ALPHA]]
// CHECK-NEXT: %{{.*}}, %{{.*}} = fa.finalize %[[ACC]], %[[M]], %[[L]]
func.func @forward_per_row(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>, %v: memref<?x?x?x64xf32>,
                           %o: memref<?x?x?x64xf32>, %lse: memref<?x?x?xf32>, %sinks: memref<?xf32>) {
  fa.attention %q, %k, %v into %o, %lse sinks %sinks {scale = 0.125 : f32, sinks_per_row}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32> sinks memref<?xf32>
  return
}

// -----

// Split-KV: the parts store their own results; the combine program joins
// each row's sink to the merged rows.
// CHECK-LABEL: func.func @split_per_row
// CHECK-NOT: fa.join_row_sinks
// CHECK: program = "split"
// CHECK: fa.grid
// CHECK: fa.merge_partial
// CHECK: fa.join_row_sinks %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}], %{{.*}}, %{{.*}} : memref<?xf32>, tensor<4xf32>
// CHECK: program = "combine"
func.func @split_per_row(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>, %v: memref<?x?x?x64xf32>,
                         %o: memref<?x?x?x64xf32>, %lse: memref<?x?x?xf32>, %sinks: memref<?xf32>,
                         %po: memref<?x?x?x64xf32>, %plse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse sinks %sinks partials(%po, %plse) {scale = 0.125 : f32, sinks_per_row}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32> sinks memref<?xf32>
    partials memref<?x?x?x64xf32>, memref<?x?x?xf32>
  return
}

// -----

// Sinks in the backward: the delta program also adds each row's share of
// its sink's gradient, -exp(sink - LSE) D, to grad_sinks[h]; the other
// programs are those without sinks (P from the LSE, which counts the
// sink).
// CHECK-LABEL: func.func @backward
// CHECK-SAME: %[[LSE:[^:]*]]: memref<?x?x?xf32>, %{{[^:]*}}: memref<?x?x?x64xf32>, %{{[^:]*}}: memref<?x?x?x64xf32>, %{{[^:]*}}: memref<?x?x?x64xf32>, %{{[^:]*}}: memref<?x?x?xf32>, %{{[^:]*}}: memref<?x?x?x64xf32>, %[[SINKS:[^:]*]]: memref<?xf32>, %[[DSINKS:[^:]*]]: memref<?xf32>)
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// CHECK: %[[D:.*]] = fa.row_dot
// CHECK: fa.store_tile %[[D]]
// CHECK-NEXT: %[[SINK:.*]] = memref.load %[[SINKS]][%[[H]]]
// CHECK-NEXT: %[[LSEROWS:.*]] = fa.load_tile %[[LSE]][%[[B]], %[[H]], %{{.*}}] : memref<?x?x?xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[SHARE:.*]] = fa.sink_grad %[[SINK]], %[[LSEROWS]], %[[D]] : tensor<16xf32>
// CHECK-NEXT: fa.accumulate_total %[[SHARE]], %[[DSINKS]][%[[H]]] : tensor<16xf32> -> memref<?xf32>
// CHECK: program = "delta"
// CHECK-NOT: fa.sink_grad
// CHECK-NOT: fa.accumulate_total
func.func @backward(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>, %v: memref<?x?x?x64xf32>,
                    %o: memref<?x?x?x64xf32>, %do: memref<?x?x?x64xf32>, %lse: memref<?x?x?xf32>,
                    %dq: memref<?x?x?x64xf32>, %dk: memref<?x?x?x64xf32>, %dv: memref<?x?x?x64xf32>,
                    %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>,
                    %sinks: memref<?xf32>, %dsinks: memref<?xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse sinks %sinks into %dq, %dk, %dv grad_sinks %dsinks
      workspace %delta, %accum {scale = 0.125 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>,
      memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?xf32> sinks memref<?xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32> grad_sinks memref<?xf32>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
  return
}

// -----

// Sinks in the deterministic backward: the delta program stores its query
// tile's total (fa.tile_total: the same bits in every run) in the tile's
// own element of sink_shares, with no atomic add. The dq program
// (0, h, 0) adds head h's shares, 16 (block-m) at a time, batch entry by
// batch entry, and stores the gradient; the other dq programs run the
// loops zero times but reach fa.tile_total too (it synchronizes a
// program's threads), and store nothing.
// CHECK-LABEL: func.func @deterministic_backward
// CHECK-SAME: %[[DSINKS:[^:]*]]: memref<?xf32>, %[[SHARES:[^:]*]]: memref<?x?x?xf32>)
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %[[T:.*]]) in
// CHECK: %[[SHARE:.*]] = fa.sink_grad
// CHECK-NEXT: %[[TOTAL:.*]] = fa.tile_total %[[SHARE]] : tensor<16xf32>
// CHECK-NEXT: memref.store %[[TOTAL]], %[[SHARES]][%[[B]], %[[H]], %[[T]]] : memref<?x?x?xf32>
// CHECK-NOT: fa.accumulate_total
// CHECK: program = "delta"
// CHECK: program = "dkdv"
// CHECK: fa.grid (%[[QB:.*]], %[[QH:.*]], %[[QT:.*]]) in
// CHECK: fa.store_tile
// CHECK: %[[FIRSTB:.*]] = arith.cmpi eq, %[[QB]], %c0
// CHECK: %[[FIRSTT:.*]] = arith.cmpi eq, %[[QT]], %c0
// CHECK: %[[SUMMING:.*]] = arith.andi %[[FIRSTB]], %[[FIRSTT]]
// CHECK: %[[ENTRIES:.*]] = arith.select %[[SUMMING]], %{{.*}}, %c0
// CHECK: %[[TILES:.*]] = memref.dim %[[SHARES]], %c2
// CHECK: %[[SUM:.*]] = scf.for %[[E:.*]] = %c0 to %[[ENTRIES]] step %c1 iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<16xf32>)
// CHECK-NEXT: %[[CHUNKS:.*]] = scf.for %[[C:.*]] = %c0 to %[[TILES]] step %c16 iter_args(%[[PART:.*]] = %[[ACC]]) -> (tensor<16xf32>)
// CHECK-NEXT: %[[ROWS:.*]] = fa.load_tile %[[SHARES]][%[[E]], %[[QH]], %[[C]]] sequence(%c0, %[[TILES]]) : memref<?x?x?xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[ADDED:.*]] = arith.addf %[[PART]], %[[ROWS]] : tensor<16xf32>
// CHECK-NEXT: scf.yield %[[ADDED]]
// CHECK: %[[HEAD:.*]] = fa.tile_total %[[SUM]] : tensor<16xf32>
// CHECK-NEXT: scf.if %[[SUMMING]] {
// CHECK-NEXT: memref.store %[[HEAD]], %[[DSINKS]][%[[QH]]] : memref<?xf32>
// CHECK: program = "dq"
func.func @deterministic_backward(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>, %v: memref<?x?x?x64xf32>,
                    %o: memref<?x?x?x64xf32>, %do: memref<?x?x?x64xf32>, %lse: memref<?x?x?xf32>,
                    %dq: memref<?x?x?x64xf32>, %dk: memref<?x?x?x64xf32>, %dv: memref<?x?x?x64xf32>,
                    %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>, %order: memref<?x?x?xi32>,
                    %sinks: memref<?xf32>, %dsinks: memref<?xf32>, %shares: memref<?x?x?xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse sinks %sinks into %dq, %dk, %dv grad_sinks %dsinks
      workspace %delta, %accum, %order sink_shares %shares {scale = 0.125 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>,
      memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?xf32> sinks memref<?xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32> grad_sinks memref<?xf32>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>, memref<?x?x?xi32> sink_shares memref<?x?x?xf32>
  return
}
