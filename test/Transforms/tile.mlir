// RUN: fa-opt %s --split-input-file --fa-tile="block-m=16 block-n=32" --cse | FileCheck %s

// The FlashAttention-2 forward, one program per (batch, head, Q tile).
// CHECK-LABEL: func @causal_gqa
// CHECK-SAME: (%[[Q:.*]]: memref<?x?x?x64xf32>, %[[K:.*]]: memref<?x?x?x64xf32>, %[[V:.*]]: memref<?x?x?x64xf32>, %[[O:.*]]: memref<?x?x?x64xf32>, %[[LSE:.*]]: memref<?x?x?xf32>)
// Grid: B x Hq x ceil(Sq / B_r) programs.
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG: %[[BATCH:.*]] = memref.dim %[[Q]], %[[C0]] : memref<?x?x?x64xf32>
// CHECK-DAG: %[[SQ:.*]] = memref.dim %[[Q]], %[[C2]] : memref<?x?x?x64xf32>
// CHECK-DAG: %[[SK:.*]] = memref.dim %[[K]], %[[C2]] : memref<?x?x?x64xf32>
// CHECK: %[[NUM_Q_TILES:.*]] = arith.ceildivui %[[SQ]], %[[C16]] : index
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %[[QT:.*]]) in (%[[BATCH]], %{{.*}}, %[[NUM_Q_TILES]]) {
// GQA: query head h reads K/V head h / (Hq / Hkv).
// CHECK: %[[GROUP:.*]] = arith.divui
// CHECK: %[[KVH:.*]] = arith.divui %[[H]], %[[GROUP]] : index
// Q_i stays resident for the whole K/V loop.
// CHECK: %[[QSTART:.*]] = arith.muli %[[QT]], %[[C16]] : index
// CHECK: %[[QTILE:.*]] = fa.load_tile %[[Q]][%[[B]], %[[H]], %[[QSTART]]] : memref<?x?x?x64xf32> -> tensor<16x64xf32>
// State: m = -inf, l = 0, acc = 0.
// CHECK: %[[M0:.*]] = arith.constant dense<0xFF800000> : tensor<16xf32>
// CHECK: %[[L0:.*]] = arith.constant dense<0.000000e+00> : tensor<16xf32>
// CHECK: %[[ACC0:.*]] = arith.constant dense<0.000000e+00> : tensor<16x64xf32>
// Causal block skipping lives in the loop bounds.
// CHECK: %[[BEGIN:.*]], %[[END:.*]] = fa.kv_tile_range %[[QSTART]], %[[SQ]], %[[SK]] {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
// CHECK: %[[STATE:.*]]:3 = scf.for %[[J:.*]] = %[[BEGIN]] to %[[END]] step %{{.*}} iter_args(%[[M:.*]] = %[[M0]], %[[L:.*]] = %[[L0]], %[[ACC:.*]] = %[[ACC0]])
// Stream K_j and V_j.
// CHECK: %[[KVSTART:.*]] = arith.muli %[[J]], %{{.*}} : index
// CHECK: %[[KTILE:.*]] = fa.load_tile %[[K]][%[[B]], %[[KVH]], %[[KVSTART]]] : memref<?x?x?x64xf32> -> tensor<32x64xf32>
// CHECK: %[[VTILE:.*]] = fa.load_tile %[[V]][%[[B]], %[[KVH]], %[[KVSTART]]] : memref<?x?x?x64xf32> -> tensor<32x64xf32>
// S = Q_i K_j^T
// CHECK: %[[S:.*]] = fa.tile_matmul %[[QTILE]], %[[KTILE]] {transpose_rhs} : tensor<16x64xf32>, tensor<32x64xf32> -> tensor<16x32xf32>
// S = -inf above the diagonal and past Sk
// CHECK: %[[SM:.*]] = fa.mask %[[S]], %[[QSTART]], %[[KVSTART]], %[[SQ]], %[[SK]] {mask = #fa.mask<causal>}
// m_new = max(m, rowmax(scale S)); alpha = exp(m - m_new); P = exp(scale S - m_new); l_new = alpha l + rowsum(P)
// CHECK: %[[MNEW:.*]], %[[P:.*]], %[[LNEW:.*]], %[[ALPHA:.*]] = fa.online_softmax %[[SM]], %[[M]], %[[L]] {scale = 1.250000e-01 : f32}
// acc = alpha acc + P V_j
// CHECK: %[[RESCALED:.*]] = fa.rescale %[[ACC]], %[[ALPHA]]
// CHECK: %[[ACCNEW:.*]] = fa.tile_matmul %[[P]], %[[VTILE]] acc(%[[RESCALED]]) : tensor<16x32xf32>, tensor<32x64xf32> -> tensor<16x64xf32>
// CHECK: scf.yield %[[MNEW]], %[[LNEW]], %[[ACCNEW]]
// Deferred normalization once after the loop: O = acc / l, LSE = m + log l.
// CHECK: %[[OUT:.*]], %[[ROWLSE:.*]] = fa.finalize %[[STATE]]#2, %[[STATE]]#0, %[[STATE]]#1
// CHECK: fa.store_tile %[[OUT]], %[[O]][%[[B]], %[[H]], %[[QSTART]]]
// CHECK: fa.store_tile %[[ROWLSE]], %[[LSE]][%[[B]], %[[H]], %[[QSTART]]]
// CHECK-NOT: fa.attention
func.func @causal_gqa(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>,
                      %v: memref<?x?x?x64xf32>, %o: memref<?x?x?x64xf32>,
                      %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32>
  return
}

// -----

// f16 inputs: the matmuls read f16 tiles and accumulate in f32; P is rounded
// to f16 before P V (as tensor cores need) and O before it is stored.
// CHECK-LABEL: func @half_precision
// CHECK: fa.load_tile %{{.*}} : memref<?x?x?x32xf16> -> tensor<16x32xf16>
// CHECK: fa.tile_matmul %{{.*}}, %{{.*}} {transpose_rhs} : tensor<16x32xf16>, tensor<32x32xf16> -> tensor<16x32xf32>
// CHECK: %{{.*}}, %[[P:.*]], %{{.*}}, %{{.*}} = fa.online_softmax
// CHECK: %[[P16:.*]] = arith.truncf %[[P]] : tensor<16x32xf32> to tensor<16x32xf16>
// CHECK: fa.tile_matmul %[[P16]], %{{.*}} acc(%{{.*}}) : tensor<16x32xf16>, tensor<32x32xf16> -> tensor<16x32xf32>
// CHECK: %[[OUT:.*]], %{{.*}} = fa.finalize
// CHECK: %[[OUT16:.*]] = arith.truncf %[[OUT]] : tensor<16x32xf32> to tensor<16x32xf16>
// CHECK: fa.store_tile %[[OUT16]]
func.func @half_precision(%q: memref<?x?x?x32xf16>, %o: memref<?x?x?x32xf16>,
                          %lse: memref<?x?x?xf32>) {
  fa.attention %q, %q, %q into %o, %lse {scale = 0.5 : f32}
    : memref<?x?x?x32xf16>, memref<?x?x?x32xf16>, memref<?x?x?x32xf16>
    into memref<?x?x?x32xf16>, memref<?x?x?xf32>
  return
}

// -----

// No mask and Sk a known multiple of B_c: no score needs masking.
// CHECK-LABEL: func @no_mask_needed
// CHECK: fa.kv_tile_range
// CHECK-NOT: mask = #fa.mask<causal>
// CHECK-NOT: fa.mask
// CHECK: fa.online_softmax
func.func @no_mask_needed(%q: memref<2x4x100x16xf32>, %kv: memref<2x4x64x16xf32>,
                          %o: memref<2x4x100x16xf32>, %lse: memref<2x4x100xf32>) {
  fa.attention %q, %kv, %kv into %o, %lse {scale = 0.25 : f32}
    : memref<2x4x100x16xf32>, memref<2x4x64x16xf32>, memref<2x4x64x16xf32>
    into memref<2x4x100x16xf32>, memref<2x4x100xf32>
  return
}

// -----

// No mask but Sk = 65 leaves a partial last K/V tile: its padding columns
// are masked.
// CHECK-LABEL: func @tail_mask
// CHECK: fa.mask %{{.*}} : tensor<16x32xf32>
func.func @tail_mask(%q: memref<1x1x16x16xf32>, %kv: memref<1x1x65x16xf32>,
                     %o: memref<1x1x16x16xf32>, %lse: memref<1x1x16xf32>) {
  fa.attention %q, %kv, %kv into %o, %lse {scale = 0.25 : f32}
    : memref<1x1x16x16xf32>, memref<1x1x65x16xf32>, memref<1x1x65x16xf32>
    into memref<1x1x16x16xf32>, memref<1x1x16xf32>
  return
}
