// RUN: fa-opt %s --split-input-file --verify-diagnostics | fa-opt | FileCheck %s

// Attention sinks: the forward takes the logits (f32 [Hq]), the backward
// the logits and their gradient; both round-trip.
// CHECK-LABEL: func.func @forward_sinks
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} sinks %{{.*}} {scale = 1.250000e-01 : f32}
// CHECK-SAME: sinks memref<8xf32>
func.func @forward_sinks(%q: memref<?x8x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>,
                         %o: memref<?x8x?x64xf16>, %lse: memref<?x8x?xf32>, %s: memref<8xf32>) {
  fa.attention %q, %k, %v into %o, %lse sinks %s {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32> sinks memref<8xf32>
  return
}

// CHECK-LABEL: func.func @backward_sinks
// CHECK: fa.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{[a-z0-9]+}} sinks %{{[a-z0-9]+}} into %{{.*}}, %{{.*}}, %{{[a-z0-9]+}} grad_sinks %{{[a-z0-9]+}} workspace %
// CHECK-SAME: sinks memref<?xf32> into {{.*}} grad_sinks memref<?xf32> workspace
func.func @backward_sinks(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                          %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>,
                          %dq: memref<?x?x?x64xf16>, %dk: memref<?x?x?x64xf16>, %dv: memref<?x?x?x64xf16>,
                          %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>,
                          %s: memref<?xf32>, %ds: memref<?xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse sinks %s into %dq, %dk, %dv grad_sinks %ds
      workspace %delta, %accum {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>,
      memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32> sinks memref<?xf32>
    into memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16> grad_sinks memref<?xf32>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
  return
}

// The deterministic backward takes the query tiles' shares of the sinks'
// gradient as a workspace shaped like the turn counters.
// CHECK-LABEL: func.func @deterministic_backward_sinks
// CHECK: workspace %{{.*}}, %{{.*}}, %{{[a-z0-9]+}} sink_shares %{{[a-z0-9]+}} {scale
// CHECK-SAME: workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>, memref<?x?x?xi32> sink_shares memref<?x?x?xf32>
func.func @deterministic_backward_sinks(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                          %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>,
                          %dq: memref<?x?x?x64xf16>, %dk: memref<?x?x?x64xf16>, %dv: memref<?x?x?x64xf16>,
                          %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>, %order: memref<?x?x?xi32>,
                          %s: memref<?xf32>, %ds: memref<?xf32>, %shares: memref<?x?x?xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse sinks %s into %dq, %dk, %dv grad_sinks %ds
      workspace %delta, %accum, %order sink_shares %shares {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>,
      memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32> sinks memref<?xf32>
    into memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16> grad_sinks memref<?xf32>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>, memref<?x?x?xi32> sink_shares memref<?x?x?xf32>
  return
}

// The tile ops: a sink joins the row state; the backward's shares; their
// sum added to one element, or (deterministic) their total as a value.
// CHECK-LABEL: func.func @tile_ops
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = fa.join_sink %{{.*}}, %{{.*}}, %{{.*}} : tensor<16xf32>
// CHECK: fa.sink_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<16xf32>
// CHECK: fa.accumulate_total %{{.*}}, %{{.*}}[%{{.*}}] : tensor<16xf32> -> memref<?xf32>
// CHECK: %[[TOTAL:.*]] = fa.tile_total %{{.*}} : tensor<16xf32>
// CHECK: memref.store %[[TOTAL]]
func.func @tile_ops(%sink: f32, %m: tensor<16xf32>, %l: tensor<16xf32>, %dsinks: memref<?xf32>, %h: index) {
  %m2, %l2, %alpha = fa.join_sink %sink, %m, %l : tensor<16xf32>
  %share = fa.sink_grad %sink, %m2, %l2 : tensor<16xf32>
  fa.accumulate_total %share, %dsinks[%h] : tensor<16xf32> -> memref<?xf32>
  %total = fa.tile_total %share : tensor<16xf32>
  memref.store %total, %dsinks[%h] : memref<?xf32>
  return
}

// -----

// The packed GQA decode's sinks: one logit per head and query row
// (sinks_per_row, Hq x Sq of them), and the tile op that joins a sink per
// row read from them.
// CHECK-LABEL: func.func @sinks_per_row
// CHECK: fa.attention {{.*}} sinks %{{.*}} {scale = 1.250000e-01 : f32, sinks_per_row}
// CHECK: fa.join_row_sinks %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}], %{{.*}}, %{{.*}} : memref<?xf32>, tensor<16xf32>
func.func @sinks_per_row(%q: memref<?x2x4x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>,
                         %o: memref<?x2x4x64xf16>, %lse: memref<?x2x4xf32>, %s: memref<8xf32>,
                         %rows: memref<?xf32>, %h: index, %start: index, %n: index,
                         %m: tensor<16xf32>, %l: tensor<16xf32>) {
  fa.attention %q, %k, %v into %o, %lse sinks %s {scale = 0.125 : f32, sinks_per_row}
    : memref<?x2x4x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>
    into memref<?x2x4x64xf16>, memref<?x2x4xf32> sinks memref<8xf32>
  %m2, %l2, %alpha = fa.join_row_sinks %rows[%h, %start, %n], %m, %l : memref<?xf32>, tensor<16xf32>
  return
}

// -----

func.func @sinks_per_row_count(%q: memref<?x2x4x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>,
                               %o: memref<?x2x4x64xf16>, %lse: memref<?x2x4xf32>, %s: memref<2xf32>) {
  // expected-error @+1 {{sinks with sinks_per_row holds one logit per query head and row: 2 does not match the 8 of the query}}
  fa.attention %q, %k, %v into %o, %lse sinks %s {scale = 0.125 : f32, sinks_per_row}
    : memref<?x2x4x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>
    into memref<?x2x4x64xf16>, memref<?x2x4xf32> sinks memref<2xf32>
  return
}

// -----

func.func @sinks_per_row_without_sinks(%q: memref<?x2x4x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>,
                                       %o: memref<?x2x4x64xf16>, %lse: memref<?x2x4xf32>) {
  // expected-error @+1 {{sinks_per_row without sinks}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32, sinks_per_row}
    : memref<?x2x4x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>
    into memref<?x2x4x64xf16>, memref<?x2x4xf32>
  return
}

// -----

func.func @join_row_sinks_needs_rows(%s: memref<?xf32>, %h: index, %m: tensor<16x4xf32>, %l: tensor<16x4xf32>) {
  // expected-error @+1 {{running max must be a 1-d tile (one value per row), got 'tensor<16x4xf32>'}}
  %m2, %l2, %alpha = fa.join_row_sinks %s[%h, %h, %h], %m, %l : memref<?xf32>, tensor<16x4xf32>
  return
}

// -----

func.func @sinks_not_per_head(%q: memref<?x8x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>,
                              %o: memref<?x8x?x64xf16>, %lse: memref<?x8x?xf32>, %s: memref<4xf32>) {
  // expected-error @+1 {{sinks holds one logit per query head: 4 does not match the 8 query heads}}
  fa.attention %q, %k, %v into %o, %lse sinks %s {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32> sinks memref<4xf32>
  return
}

// -----

func.func @sinks_without_gradient(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                                  %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>,
                                  %dq: memref<?x?x?x64xf16>, %dk: memref<?x?x?x64xf16>, %dv: memref<?x?x?x64xf16>,
                                  %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>, %s: memref<?xf32>) {
  // expected-error @+1 {{takes sinks and grad_sinks together (the sinks' gradient is an output whenever sinks are an input)}}
  fa.attention_backward %q, %k, %v, %o, %do, %lse sinks %s into %dq, %dk, %dv
      workspace %delta, %accum {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>,
      memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32> sinks memref<?xf32>
    into memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
  return
}

// -----

func.func @deterministic_sinks_without_shares(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                               %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>,
                               %dq: memref<?x?x?x64xf16>, %dk: memref<?x?x?x64xf16>, %dv: memref<?x?x?x64xf16>,
                               %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>, %order: memref<?x?x?xi32>,
                               %s: memref<?xf32>, %ds: memref<?xf32>) {
  // expected-error @+1 {{takes sink_shares exactly when it is deterministic (dq_order) and has sinks (the shares make their gradient's sum deterministic)}}
  fa.attention_backward %q, %k, %v, %o, %do, %lse sinks %s into %dq, %dk, %dv grad_sinks %ds
      workspace %delta, %accum, %order {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>,
      memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32> sinks memref<?xf32>
    into memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16> grad_sinks memref<?xf32>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>, memref<?x?x?xi32>
  return
}

// -----

func.func @shares_without_turns(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                                %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>,
                                %dq: memref<?x?x?x64xf16>, %dk: memref<?x?x?x64xf16>, %dv: memref<?x?x?x64xf16>,
                                %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>,
                                %s: memref<?xf32>, %ds: memref<?xf32>, %shares: memref<?x?x?xf32>) {
  // expected-error @+1 {{takes sink_shares exactly when it is deterministic (dq_order) and has sinks}}
  fa.attention_backward %q, %k, %v, %o, %do, %lse sinks %s into %dq, %dk, %dv grad_sinks %ds
      workspace %delta, %accum sink_shares %shares {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>,
      memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32> sinks memref<?xf32>
    into memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16> grad_sinks memref<?xf32>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32> sink_shares memref<?x?x?xf32>
  return
}

// -----

func.func @shares_of_other_tiles(%q: memref<?x4x?x64xf16>, %k: memref<?x4x?x64xf16>, %v: memref<?x4x?x64xf16>,
                                 %o: memref<?x4x?x64xf16>, %do: memref<?x4x?x64xf16>, %lse: memref<?x4x?xf32>,
                                 %dq: memref<?x4x?x64xf16>, %dk: memref<?x4x?x64xf16>, %dv: memref<?x4x?x64xf16>,
                                 %delta: memref<?x4x?xf32>, %accum: memref<?x4x?x64xf32>, %order: memref<?x4x8xi32>,
                                 %s: memref<4xf32>, %ds: memref<4xf32>, %shares: memref<?x4x7xf32>) {
  // expected-error @+1 {{sink_shares dimension 2 (7) does not match dq_order's (8)}}
  fa.attention_backward %q, %k, %v, %o, %do, %lse sinks %s into %dq, %dk, %dv grad_sinks %ds
      workspace %delta, %accum, %order sink_shares %shares {scale = 0.125 : f32}
    : memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>,
      memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?xf32> sinks memref<4xf32>
    into memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16> grad_sinks memref<4xf32>
    workspace memref<?x4x?xf32>, memref<?x4x?x64xf32>, memref<?x4x8xi32> sink_shares memref<?x4x7xf32>
  return
}

// -----

func.func @shares_per_query_head(%q: memref<?x4x?x64xf16>, %k: memref<?x4x?x64xf16>, %v: memref<?x4x?x64xf16>,
                                 %o: memref<?x4x?x64xf16>, %do: memref<?x4x?x64xf16>, %lse: memref<?x4x?xf32>,
                                 %dq: memref<?x4x?x64xf16>, %dk: memref<?x4x?x64xf16>, %dv: memref<?x4x?x64xf16>,
                                 %delta: memref<?x4x?xf32>, %accum: memref<?x4x?x64xf32>, %order: memref<?x4x?xi32>,
                                 %s: memref<4xf32>, %ds: memref<4xf32>, %shares: memref<?x2x?xf32>) {
  // expected-error @+1 {{sink_shares dimension 1 (2) does not match query (4)}}
  fa.attention_backward %q, %k, %v, %o, %do, %lse sinks %s into %dq, %dk, %dv grad_sinks %ds
      workspace %delta, %accum, %order sink_shares %shares {scale = 0.125 : f32}
    : memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>,
      memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?xf32> sinks memref<4xf32>
    into memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16> grad_sinks memref<4xf32>
    workspace memref<?x4x?xf32>, memref<?x4x?x64xf32>, memref<?x4x?xi32> sink_shares memref<?x2x?xf32>
  return
}

// -----

func.func @join_sink_needs_rows(%sink: f32, %m: tensor<16x4xf32>, %l: tensor<16x4xf32>) {
  // expected-error @+1 {{running max must be a 1-d tile (one value per row), got 'tensor<16x4xf32>'}}
  %m2, %l2, %alpha = fa.join_sink %sink, %m, %l : tensor<16x4xf32>
  return
}

// -----

func.func @total_of_rows(%t: tensor<16x4xf32>, %dsinks: memref<?xf32>, %h: index) {
  // expected-error @+1 {{tile must be a 1-d tile (one value per row), got 'tensor<16x4xf32>'}}
  fa.accumulate_total %t, %dsinks[%h] : tensor<16x4xf32> -> memref<?xf32>
  return
}

// -----

func.func @tile_total_of_rows(%t: tensor<16x4xf32>) -> f32 {
  // expected-error @+1 {{tile must be a 1-d tile (one value per row), got 'tensor<16x4xf32>'}}
  %total = fa.tile_total %t : tensor<16x4xf32>
  return %total : f32
}
