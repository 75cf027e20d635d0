// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=16 block-n=32" --cse | FileCheck %s

// The FlashAttention-2 backward as three grids that run in order.
// CHECK-LABEL: func @causal_gqa
// CHECK-SAME: (%[[Q:[^:]*]]: {{[^,]*}}, %[[K:[^:]*]]: {{[^,]*}}, %[[V:[^:]*]]: {{[^,]*}}, %[[O:[^:]*]]: {{[^,]*}}, %[[DO:[^:]*]]: {{[^,]*}}, %[[LSE:[^:]*]]: {{[^,]*}}, %[[DQ:[^:]*]]: {{[^,]*}}, %[[DK:[^:]*]]: {{[^,]*}}, %[[DV:[^:]*]]: {{[^,]*}}, %[[DELTA:[^:]*]]: {{[^,]*}}, %[[ACCUM:[^:]*]]: {{[^)]*}})
//
// 1. Preprocessing, one program per (batch, query head, query tile):
//    D_i = rowsum(dO_i * O_i), and the program's rows of the dQ accumulator = 0.
// CHECK: fa.grid (%[[B1:.*]], %[[H1:.*]], %[[T1:.*]]) in
// CHECK: %[[ROW1:.*]] = arith.muli %[[T1]], %[[C16:.*]] : index
// CHECK: %[[DOT1:.*]] = fa.load_tile %[[DO]][%[[B1]], %[[H1]], %[[ROW1]]] {{.*}} -> tensor<16x64xf16>
// CHECK: %[[OT1:.*]] = fa.load_tile %[[O]][%[[B1]], %[[H1]], %[[ROW1]]] {{.*}} -> tensor<16x64xf16>
// CHECK: %[[D1:.*]] = fa.row_dot %[[DOT1]], %[[OT1]] : tensor<16x64xf16> -> tensor<16xf32>
// CHECK: fa.store_tile %[[D1]], %[[DELTA]][%[[B1]], %[[H1]], %[[ROW1]]]
// CHECK: fa.store_tile %{{.*}}, %[[ACCUM]][%[[B1]], %[[H1]], %[[ROW1]]] : tensor<16x64xf32>
//
// 2. One program per (batch, K/V head, K/V tile): K_j, V_j, dK_j, dV_j on chip.
// CHECK: fa.grid (%[[B:.*]], %[[KVH:.*]], %[[J:.*]]) in
// CHECK: %[[KVSTART:.*]] = arith.muli %[[J]], %{{.*}} : index
// CHECK: %[[KT:.*]] = fa.load_tile %[[K]][%[[B]], %[[KVH]], %[[KVSTART]]] {{.*}} -> tensor<32x64xf16>
// CHECK: %[[VT:.*]] = fa.load_tile %[[V]][%[[B]], %[[KVH]], %[[KVSTART]]] {{.*}} -> tensor<32x64xf16>
// GQA: this K/V head serves query heads [KVH * G, (KVH + 1) * G).
// CHECK: %[[GROUP:.*]] = arith.divui
// CHECK: %[[FIRST:.*]] = arith.muli %[[KVH]], %[[GROUP]] : index
// Causal block skipping: only the query tiles that see key KVSTART.
// CHECK: %[[QB:.*]], %[[QE:.*]] = fa.q_tile_range %[[KVSTART]], %{{.*}}, %{{.*}} {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
// CHECK: %[[HEADS:.*]]:2 = scf.for %[[G:.*]] = %{{.*}} to %[[GROUP]] step %{{.*}} iter_args(%[[DKH:.*]] = %[[ZERO:.*]], %[[DVH:.*]] = %[[ZERO]])
// CHECK: %[[H:.*]] = arith.addi %[[FIRST]], %[[G]] : index
// CHECK: %[[TILES:.*]]:2 = scf.for %[[I:.*]] = %[[QB]] to %[[QE]] step %{{.*}} iter_args(%[[DKA:.*]] = %[[DKH]], %[[DVA:.*]] = %[[DVH]])
// Stream Q_i, dO_i, LSE_i, D_i.
// CHECK: %[[QSTART:.*]] = arith.muli %[[I]], %{{.*}} : index
// CHECK: %[[QT:.*]] = fa.load_tile %[[Q]][%[[B]], %[[H]], %[[QSTART]]]
// CHECK: %[[DOT:.*]] = fa.load_tile %[[DO]][%[[B]], %[[H]], %[[QSTART]]]
// CHECK: %[[LSET:.*]] = fa.load_tile %[[LSE]][%[[B]], %[[H]], %[[QSTART]]] {{.*}} -> tensor<16xf32>
// CHECK: %[[DT:.*]] = fa.load_tile %[[DELTA]][%[[B]], %[[H]], %[[QSTART]]] {{.*}} -> tensor<16xf32>
// P = exp(scale Q_i K_j^T - LSE_i), masked scores 0.
// CHECK: %[[S:.*]] = fa.tile_matmul %[[QT]], %[[KT]] {transpose_rhs} : tensor<16x64xf16>, tensor<32x64xf16> -> tensor<16x32xf32>
// CHECK: %[[SM:.*]] = fa.mask %[[S]], %[[QSTART]], %[[KVSTART]], {{.*}} {mask = #fa.mask<causal>}
// CHECK: %[[P:.*]] = fa.recompute_probs %[[SM]], %[[LSET]] {scale = 1.250000e-01 : f32}
// dV_j += P^T dO_i (P rounded to f16, as tensor cores need).
// CHECK: %[[P16:.*]] = arith.truncf %[[P]] : tensor<16x32xf32> to tensor<16x32xf16>
// CHECK: %[[DVN:.*]] = fa.tile_matmul %[[P16]], %[[DOT]] acc(%[[DVA]]) {transpose_lhs} : tensor<16x32xf16>, tensor<16x64xf16> -> tensor<32x64xf32>
// dS = scale P (dO_i V_j^T - D_i)
// CHECK: %[[DP:.*]] = fa.tile_matmul %[[DOT]], %[[VT]] {transpose_rhs} : tensor<16x64xf16>, tensor<32x64xf16> -> tensor<16x32xf32>
// CHECK: %[[DS:.*]] = fa.softmax_grad %[[P]], %[[DP]], %[[DT]] {scale = 1.250000e-01 : f32}
// CHECK: %[[DS16:.*]] = arith.truncf %[[DS]]
// dK_j += dS^T Q_i
// CHECK: %[[DKN:.*]] = fa.tile_matmul %[[DS16]], %[[QT]] acc(%[[DKA]]) {transpose_lhs} : tensor<16x32xf16>, tensor<16x64xf16> -> tensor<32x64xf32>
// dQ_i += dS K_j, added into the shared f32 accumulator.
// CHECK: %[[DQP:.*]] = fa.tile_matmul %[[DS16]], %[[KT]] : tensor<16x32xf16>, tensor<32x64xf16> -> tensor<16x64xf32>
// CHECK: fa.accumulate_tile %[[DQP]], %[[ACCUM]][%[[B]], %[[H]], %[[QSTART]]]
// CHECK: scf.yield %[[DKN]], %[[DVN]]
// CHECK: scf.yield %[[TILES]]#0, %[[TILES]]#1
// dK_j and dV_j are stored once, after every query head of the group.
// CHECK: %[[DK16:.*]] = arith.truncf %[[HEADS]]#0
// CHECK: fa.store_tile %[[DK16]], %[[DK]][%[[B]], %[[KVH]], %[[KVSTART]]]
// CHECK: %[[DV16:.*]] = arith.truncf %[[HEADS]]#1
// CHECK: fa.store_tile %[[DV16]], %[[DV]][%[[B]], %[[KVH]], %[[KVSTART]]]
// Each head's K/V tiles one after another (no tiles_outermost).
// CHECK: } attributes {program = "dkdv"}
//
// 3. dQ = the accumulator rounded to f16.
// CHECK: fa.grid (%[[B3:.*]], %[[H3:.*]], %[[T3:.*]]) in
// CHECK: %[[ROW3:.*]] = arith.muli %[[T3]]
// CHECK: %[[ACC3:.*]] = fa.load_tile %[[ACCUM]][%[[B3]], %[[H3]], %[[ROW3]]] {{.*}} -> tensor<16x64xf32>
// CHECK: %[[DQ16:.*]] = arith.truncf %[[ACC3]]
// CHECK: fa.store_tile %[[DQ16]], %[[DQ]][%[[B3]], %[[H3]], %[[ROW3]]]
// CHECK-NOT: fa.attention_backward
func.func @causal_gqa(%q: memref<?x8x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>,
                      %o: memref<?x8x?x64xf16>, %do: memref<?x8x?x64xf16>, %lse: memref<?x8x?xf32>,
                      %dq: memref<?x8x?x64xf16>, %dk: memref<?x2x?x64xf16>, %dv: memref<?x2x?x64xf16>,
                      %delta: memref<?x8x?xf32>, %accum: memref<?x8x?x64xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x8x?x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>,
      memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?xf32>
    into memref<?x8x?x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>
    workspace memref<?x8x?xf32>, memref<?x8x?x64xf32>
  return
}

// -----

// No mask and a key length that is a multiple of block-n: no fa.mask, and
// every query tile visits every K/V tile. f32 needs no rounding.
// CHECK-LABEL: func @full_f32
// CHECK: fa.q_tile_range
// CHECK-NOT: mask = #fa.mask<causal>
// CHECK-NOT: fa.mask
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @full_f32(%q: memref<?x4x?x32xf32>, %k: memref<?x4x64x32xf32>, %v: memref<?x4x64x32xf32>,
                    %o: memref<?x4x?x32xf32>, %do: memref<?x4x?x32xf32>, %lse: memref<?x4x?xf32>,
                    %dq: memref<?x4x?x32xf32>, %dk: memref<?x4x64x32xf32>, %dv: memref<?x4x64x32xf32>,
                    %delta: memref<?x4x?xf32>, %accum: memref<?x4x?x32xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.2 : f32}
    : memref<?x4x?x32xf32>, memref<?x4x64x32xf32>, memref<?x4x64x32xf32>,
      memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?xf32>
    into memref<?x4x?x32xf32>, memref<?x4x64x32xf32>, memref<?x4x64x32xf32>
    workspace memref<?x4x?xf32>, memref<?x4x?x32xf32>
  return
}

// -----

// Deterministic: the delta program starts each query tile's turn counter
// at 0, and each K/V tile adds its share of dQ on its turn. With the causal
// mask the turns go last K/V tile to first: the grid's tile index J is a
// launch slot for K/V tile (tiles - 1 - J), and its turn at query tile I is
// (I's last K/V tile - its own), so K/V tile j adds right after j + 1 did.
// CHECK-LABEL: func @deterministic
// CHECK-SAME: %[[ORDER:[^:]*]]: memref<?x4x?xi32>)
// CHECK: fa.grid (%[[B1:.*]], %[[H1:.*]], %[[T1:.*]]) in
// CHECK: memref.store %{{.*}}, %[[ORDER]][%[[B1]], %[[H1]], %[[T1]]] : memref<?x4x?xi32>
// CHECK: } attributes {program = "delta"}
// CHECK: %[[TILES:.*]] = arith.ceildivui %{{.*}}, %[[C32:.*]] : index
// CHECK: fa.grid (%[[B:.*]], %[[KVH:.*]], %[[J:.*]]) in
// CHECK: %[[LAST:.*]] = arith.subi %[[TILES]], %[[ONE:.*]] : index
// CHECK-NEXT: %[[KV:.*]] = arith.subi %[[LAST]], %[[J]] : index
// CHECK-NEXT: %[[KVSTART:.*]] = arith.muli %[[KV]], %[[C32]] : index
// CHECK: fa.q_tile_range %[[KVSTART]]
// CHECK: scf.for
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[QSTART:.*]] = arith.muli %[[I]]
// CHECK: %{{.*}}, %[[END:.*]] = fa.kv_tile_range %[[QSTART]], {{.*}} {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
// CHECK-NEXT: %[[QLAST:.*]] = arith.subi %[[END]], %[[ONE]] : index
// CHECK-NEXT: %[[TURN:.*]] = arith.subi %[[QLAST]], %[[KV]] : index
// CHECK-NEXT: fa.wait_turn %[[ORDER]][%[[B]], %[[H:.*]], %[[I]]], %[[TURN]]
// CHECK-NEXT: fa.accumulate_tile
// CHECK-NEXT: fa.pass_turn %[[ORDER]][%[[B]], %[[H]], %[[I]]], %[[TURN]]
// CHECK: } attributes {program = "dkdv"}
func.func @deterministic(%q: memref<?x4x?x32xf32>, %lse: memref<?x4x?xf32>, %accum: memref<?x4x?x32xf32>,
                         %order: memref<?x4x?xi32>) {
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q workspace %lse, %accum, %order
      {scale = 0.2 : f32, mask = #fa.mask<causal>}
    : memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>,
      memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?xf32>
    into memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>
    workspace memref<?x4x?xf32>, memref<?x4x?x32xf32>, memref<?x4x?xi32>
  return
}

// -----

// Deterministic without a mask: every K/V tile visits every query tile from
// the first, in grid order; the turn is the K/V tile itself.
// CHECK-LABEL: func @deterministic_full
// CHECK: } attributes {program = "delta"}
// CHECK: fa.grid (%[[B:.*]], %[[KVH:.*]], %[[J:.*]]) in
// CHECK-NEXT: %[[KVSTART:.*]] = arith.muli %[[J]], %c32
// CHECK: scf.for
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NOT: fa.kv_tile_range
// CHECK: fa.wait_turn %{{.*}}[%[[B]], %[[H:.*]], %[[I]]], %[[J]]
// CHECK-NEXT: fa.accumulate_tile
// CHECK-NEXT: fa.pass_turn %{{.*}}[%[[B]], %[[H]], %[[I]]], %[[J]]
// CHECK: } attributes {program = "dkdv"}
func.func @deterministic_full(%q: memref<?x4x?x32xf32>, %lse: memref<?x4x?xf32>, %accum: memref<?x4x?x32xf32>,
                              %order: memref<?x4x?xi32>) {
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q workspace %lse, %accum, %order
      {scale = 0.2 : f32}
    : memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>,
      memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?xf32>
    into memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>
    workspace memref<?x4x?xf32>, memref<?x4x?x32xf32>, memref<?x4x?xi32>
  return
}

// -----

// Deterministic in three chains (dq_chains = 3): dq_accum and dq_order hold
// three copies of the 4 heads. The delta program zeroes every chain's copy
// and counter (copy c of head h at c * 4 + h); K/V tile J, the J-th to
// visit every query tile, adds to chain J mod 3 on that chain's turn J / 3;
// the dq program sums the copies in chain order.
// CHECK-LABEL: func @deterministic_chains
// CHECK-SAME: %[[ACCUM:[^:]*]]: memref<?x12x?x32xf32>, %[[ORDER:[^:]*]]: memref<?x12x?xi32>)
// CHECK: fa.grid (%[[B1:.*]], %[[H1:.*]], %[[T1:.*]]) in
// CHECK: fa.store_tile %{{.*}}, %[[ACCUM]][%[[B1]], %[[H1]], %[[ROW1:.*]]] :
// CHECK: memref.store %{{.*}}, %[[ORDER]][%[[B1]], %[[H1]], %[[T1]]]
// CHECK: %[[OFF1:.*]] = arith.muli %c1{{.*}}, %[[HQ:.*]] : index
// CHECK-NEXT: %[[COPY1:.*]] = arith.addi %[[OFF1]], %[[H1]] : index
// CHECK-NEXT: fa.store_tile %{{.*}}, %[[ACCUM]][%[[B1]], %[[COPY1]], %[[ROW1]]] :
// CHECK-NEXT: memref.store %{{.*}}, %[[ORDER]][%[[B1]], %[[COPY1]], %[[T1]]]
// CHECK: %[[OFF2:.*]] = arith.muli %c2{{.*}}, %[[HQ]] : index
// CHECK-NEXT: %[[COPY2:.*]] = arith.addi %[[OFF2]], %[[H1]] : index
// CHECK-NEXT: fa.store_tile %{{.*}}, %[[ACCUM]][%[[B1]], %[[COPY2]], %[[ROW1]]] :
// CHECK-NEXT: memref.store %{{.*}}, %[[ORDER]][%[[B1]], %[[COPY2]], %[[T1]]]
// CHECK: } attributes {program = "delta"}
// CHECK: fa.grid (%[[B:.*]], %[[KVH:.*]], %[[J:.*]]) in
// CHECK: scf.for
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[CHAIN:.*]] = arith.remui %[[J]], %[[C3:.*]] : index
// CHECK-NEXT: %[[TURN:.*]] = arith.divui %[[J]], %[[C3]] : index
// CHECK-NEXT: %[[OFF:.*]] = arith.muli %[[CHAIN]], %{{.*}} : index
// CHECK-NEXT: %[[COPY:.*]] = arith.addi %[[OFF]], %[[H:.*]] : index
// CHECK-NEXT: fa.wait_turn %[[ORDER]][%[[B]], %[[COPY]], %[[I]]], %[[TURN]]
// CHECK-NEXT: fa.accumulate_tile %{{.*}}, %[[ACCUM]][%{{.*}}, %[[COPY]], %{{.*}}]
// CHECK-NEXT: fa.pass_turn %[[ORDER]][%[[B]], %[[COPY]], %[[I]]], %[[TURN]]
// CHECK: } attributes {program = "dkdv"}
// CHECK: fa.grid (%[[B3:.*]], %[[H3:.*]], %{{.*}}) in
// CHECK: %[[P0:.*]] = fa.load_tile %[[ACCUM]][%[[B3]], %[[H3]], %[[ROW3:.*]]]
// CHECK: %[[P1:.*]] = fa.load_tile %[[ACCUM]][%[[B3]], %{{.*}}, %[[ROW3]]]
// CHECK-NEXT: %[[S1:.*]] = arith.addf %[[P0]], %[[P1]] : tensor<16x32xf32>
// CHECK: %[[P2:.*]] = fa.load_tile %[[ACCUM]][%[[B3]], %{{.*}}, %[[ROW3]]]
// CHECK-NEXT: %[[S2:.*]] = arith.addf %[[S1]], %[[P2]] : tensor<16x32xf32>
// CHECK-NEXT: fa.store_tile %[[S2]]
// CHECK: } attributes {program = "dq"}
func.func @deterministic_chains(%q: memref<?x4x?x32xf32>, %lse: memref<?x4x?xf32>, %accum: memref<?x12x?x32xf32>,
                                %order: memref<?x12x?xi32>) {
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q workspace %lse, %accum, %order
      {scale = 0.2 : f32, dq_chains = 3 : i64}
    : memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>,
      memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?xf32>
    into memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>
    workspace memref<?x4x?xf32>, memref<?x12x?x32xf32>, memref<?x12x?xi32>
  return
}

// -----

// Deterministic with a window (a mask_mod whose ranges agree from both
// sides): the visits form a band, so the grid and the turns run last to
// first (the longest chain of waits is the window's width, not the
// diagonal): grid slot S is K/V tile J = tiles - 1 - S, and its turn at
// query tile I counts back from I's last K/V tile, the end of I's range
// with the mask_mod (a window's last tile is not the last).
// CHECK-LABEL: func @deterministic_window
// CHECK: } attributes {program = "delta"}
// CHECK: %[[TILES:.*]] = arith.ceildivui %{{.*}}, %c32
// CHECK: fa.grid (%[[B:.*]], %[[KVH:.*]], %[[S:.*]]) in
// CHECK-NEXT: %[[LAST:.*]] = arith.subi %[[TILES]], %c1
// CHECK-NEXT: %[[J:.*]] = arith.subi %[[LAST]], %[[S]]
// CHECK-NEXT: %[[KVSTART:.*]] = arith.muli %[[J]], %c32
// CHECK: fa.q_tile_range %[[KVSTART]]
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[QSTART:.*]] = arith.muli %[[I]]
// CHECK: %{{.*}}, %[[END:.*]] = fa.kv_tile_range %[[QSTART]], {{.*}} at(%[[B]], %[[H:.*]]) {block_m = 16 : i64, block_n = 32 : i64} mask_mod {
// CHECK: %[[ENDLAST:.*]] = arith.subi %[[END]], %c1 : index
// CHECK-NEXT: %[[TURN:.*]] = arith.subi %[[ENDLAST]], %[[J]] : index
// CHECK-NEXT: fa.wait_turn %{{.*}}[%[[B]], %[[H]], %[[I]]], %[[TURN]]
// CHECK-NEXT: fa.accumulate_tile
// CHECK-NEXT: fa.pass_turn %{{.*}}[%[[B]], %[[H]], %[[I]]], %[[TURN]]
// CHECK: } attributes {program = "dkdv"}
func.func @deterministic_window(%q: memref<?x4x?x32xf32>, %lse: memref<?x4x?xf32>, %accum: memref<?x4x?x32xf32>,
                                %order: memref<?x4x?xi32>) {
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q workspace %lse, %accum, %order
      {scale = 0.2 : f32}
    : memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>,
      memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?xf32>
    into memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>
    workspace memref<?x4x?xf32>, memref<?x4x?x32xf32>, memref<?x4x?xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %w = arith.constant 40 : index
      %first = arith.subi %qi, %w : index
      %after = arith.cmpi sge, %ki, %first : index
      %before = arith.cmpi sle, %ki, %qi : index
      %keep = arith.andi %after, %before : i1
      fa.yield %keep : i1
    }
  return
}

// -----

// Deterministic with prefix-LM's or (ranges that need not agree from both
// sides): every K/V tile visits every query tile (one range for every
// head, without the mask_mod), the turn is J itself.
// CHECK-LABEL: func @deterministic_prefix
// CHECK: } attributes {program = "delta"}
// CHECK: fa.grid (%[[B:.*]], %[[KVH:.*]], %[[J:.*]]) in
// CHECK: fa.q_tile_range %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} {block_m = 16 : i64, block_n = 32 : i64}{{$}}
// CHECK: scf.for
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NOT: fa.kv_tile_range
// CHECK: fa.wait_turn %{{.*}}[%[[B]], %[[H:.*]], %[[I]]], %[[J]]
// CHECK: } attributes {program = "dkdv"}
func.func @deterministic_prefix(%q: memref<?x4x?x32xf32>, %lse: memref<?x4x?xf32>, %accum: memref<?x4x?x32xf32>,
                                %order: memref<?x4x?xi32>) {
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q workspace %lse, %accum, %order
      {scale = 0.2 : f32}
    : memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>,
      memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?xf32>
    into memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>
    workspace memref<?x4x?xf32>, memref<?x4x?x32xf32>, memref<?x4x?xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %n = arith.constant 70 : index
      %prefix = arith.cmpi slt, %ki, %n : index
      %causal = arith.cmpi sle, %ki, %qi : index
      %keep = arith.ori %prefix, %causal : i1
      fa.yield %keep : i1
    }
  return
}

// -----

// Deterministic with a chunked mask: each side bounds its index by whole
// chunks from the other's (both exactly the tile pairs whose box meets
// the chunk comparison), so the ranges agree and the turns run last to
// first as a window's do.
// CHECK-LABEL: func @deterministic_chunked
// CHECK: } attributes {program = "delta"}
// CHECK: fa.grid (%{{.*}}, %{{.*}}, %[[S:.*]]) in
// CHECK-NEXT: %[[LAST:.*]] = arith.subi %{{.*}}, %c1
// CHECK-NEXT: %[[J:.*]] = arith.subi %[[LAST]], %[[S]]
// CHECK: fa.q_tile_range {{.*}} mask_mod {
// CHECK: %{{.*}}, %[[END:.*]] = fa.kv_tile_range {{.*}} mask_mod {
// CHECK: %[[ENDLAST:.*]] = arith.subi %[[END]], %c1 : index
// CHECK-NEXT: %[[TURN:.*]] = arith.subi %[[ENDLAST]], %[[J]] : index
// CHECK-NEXT: fa.wait_turn %{{.*}}, %[[TURN]]
// CHECK: } attributes {program = "dkdv"}
func.func @deterministic_chunked(%q: memref<?x4x?x32xf32>, %lse: memref<?x4x?xf32>, %accum: memref<?x4x?x32xf32>,
                                 %order: memref<?x4x?xi32>) {
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q workspace %lse, %accum, %order
      {scale = 0.2 : f32}
    : memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>,
      memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?xf32>
    into memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>
    workspace memref<?x4x?xf32>, memref<?x4x?x32xf32>, memref<?x4x?xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c = arith.constant 96 : index
      %qc = arith.floordivsi %qi, %c : index
      %kc = arith.floordivsi %ki, %c : index
      %keep = arith.cmpi eq, %qc, %kc : index
      fa.yield %keep : i1
    }
  return
}

// -----

// Deterministic with a constraint on 2 q alone: the forward's side keeps all
// keys of a query tile or none (no kv term), the backward's cannot bound
// the query rows by it (coefficient 2): the ranges would disagree, so every
// K/V tile visits every query tile, the turn J itself.
// CHECK-LABEL: func @deterministic_rows_scaled
// CHECK: fa.grid (%[[B:.*]], %[[KVH:.*]], %[[J:.*]]) in
// CHECK: fa.q_tile_range %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} {block_m = 16 : i64, block_n = 32 : i64}{{$}}
// CHECK-NOT: fa.kv_tile_range
// CHECK: fa.wait_turn %{{.*}}, %[[J]]
// CHECK: } attributes {program = "dkdv"}
func.func @deterministic_rows_scaled(%q: memref<?x4x?x32xf32>, %lse: memref<?x4x?xf32>, %accum: memref<?x4x?x32xf32>,
                                     %order: memref<?x4x?xi32>) {
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q workspace %lse, %accum, %order
      {scale = 0.2 : f32}
    : memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>,
      memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?xf32>
    into memref<?x4x?x32xf32>, memref<?x4x?x32xf32>, memref<?x4x?x32xf32>
    workspace memref<?x4x?xf32>, memref<?x4x?x32xf32>, memref<?x4x?xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %two = arith.constant 2 : index
      %twice = arith.muli %qi, %two : index
      %keep = arith.cmpi slt, %twice, %sk : index
      fa.yield %keep : i1
    }
  return
}
