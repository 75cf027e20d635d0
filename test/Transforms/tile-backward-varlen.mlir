// RUN: fa-opt %s --fa-tile-backward="block-m=16 block-n=32" --cse | FileCheck %s

// A packed varlen batch's backward: the three grids run per (sequence,
// head, tile of the packed rows) and are ragged; every load, store and dQ
// add names its sequence's rows (read from cu_seqlens, clamped into the
// tensors), and the masks and ranges see the sequence's own lengths.
// CHECK-LABEL: func @varlen_backward
// CHECK-SAME: %[[Q:[^:]*]]: memref<1x4x?x64xf16>, %[[K:[^:]*]]: memref<1x2x?x64xf16>
// CHECK-SAME: %[[DELTA:[^:]*]]: memref<1x4x?xf32>, %[[ACC:[^:]*]]: memref<1x4x?x64xf32>, %[[CQ:[^:]*]]: memref<?xi32>, %[[CK:[^:]*]]: memref<?xi32>)
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[OFFSETS:.*]] = memref.dim %[[CQ]], %[[C0]]
// CHECK: %[[SEQUENCES:.*]] = arith.subi %[[OFFSETS]], %{{.*}} : index
// The delta grid reads the query offsets only.
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %[[T:.*]]) in (%[[SEQUENCES]],
// CHECK-NOT: memref.load %[[CK]]
// CHECK: %[[QF:.*]] = arith.minui
// CHECK: %[[QE:.*]] = arith.maxui %{{.*}}, %[[QF]]
// CHECK: fa.row_dot
// CHECK: fa.store_tile %{{.*}}, %[[DELTA]][%[[C0]], %[[H]], %{{.*}}] sequence(%[[QF]], %[[QE]])
// CHECK: fa.store_tile %{{.*}}, %[[ACC]][%[[C0]], %[[H]], %{{.*}}] sequence(%[[QF]], %[[QE]])
// CHECK: } attributes {program = "delta", ragged}
// The dK/dV grid: one program per K/V tile of a sequence.
// CHECK: fa.grid (%[[B:.*]], %[[KVH:.*]], %[[J:.*]]) in (%[[SEQUENCES]],
// CHECK: memref.load %[[CQ]][%[[B]]]
// CHECK: %[[QFIRST:.*]] = arith.minui
// CHECK: %[[QEND:.*]] = arith.maxui %{{.*}}, %[[QFIRST]]
// CHECK: memref.load %[[CK]][%[[B]]]
// CHECK: %[[KFIRST:.*]] = arith.minui
// CHECK: %[[KEND:.*]] = arith.maxui %{{.*}}, %[[KFIRST]]
// CHECK: %[[SQ:.*]] = arith.subi %[[QEND]], %[[QFIRST]]
// CHECK: %[[SK:.*]] = arith.subi %[[KEND]], %[[KFIRST]]
// CHECK: %[[KVSTART:.*]] = arith.muli %[[J]]
// CHECK: fa.load_tile %[[K]][%[[C0]], %[[KVH]], %[[KVSTART]]] sequence(%[[KFIRST]], %[[KEND]])
// A K/V tile past its sequence's keys is seen by no query.
// CHECK: %[[HASKEYS:.*]] = arith.cmpi ult, %[[KVSTART]], %[[SK]]
// CHECK: %[[RANGESQ:.*]] = arith.select %[[HASKEYS]], %[[SQ]], %[[C0]]
// CHECK: fa.q_tile_range %[[KVSTART]], %[[RANGESQ]], %[[SK]] {{.*}}mask = #fa.mask<causal>}
// CHECK: %[[QSTART:.*]] = arith.muli
// CHECK: fa.load_tile %[[Q]][%[[C0]], %{{.*}}, %[[QSTART]]] sequence(%[[QFIRST]], %[[QEND]])
// CHECK: fa.mask %{{.*}}, %[[QSTART]], %[[KVSTART]], %[[SQ]], %[[SK]] {mask = #fa.mask<causal>}
// dQ is added to the sequence's rows only.
// CHECK: fa.accumulate_tile %{{.*}}, %[[ACC]][%[[C0]], %{{.*}}, %[[QSTART]]] sequence(%[[QFIRST]], %[[QEND]])
// CHECK: fa.store_tile %{{.*}}[%[[C0]], %[[KVH]], %[[KVSTART]]] sequence(%[[KFIRST]], %[[KEND]])
// CHECK: fa.store_tile %{{.*}}[%[[C0]], %[[KVH]], %[[KVSTART]]] sequence(%[[KFIRST]], %[[KEND]])
// CHECK: } attributes {program = "dkdv", ragged}
// CHECK: fa.grid
// CHECK-NOT: memref.load %[[CK]]
// CHECK: fa.load_tile %[[ACC]][{{.*}}] sequence(
// CHECK: } attributes {program = "dq", ragged}
func.func @varlen_backward(%q: memref<1x4x?x64xf16>, %k: memref<1x2x?x64xf16>, %v: memref<1x2x?x64xf16>,
                           %o: memref<1x4x?x64xf16>, %do: memref<1x4x?x64xf16>, %lse: memref<1x4x?xf32>,
                           %dq: memref<1x4x?x64xf16>, %dk: memref<1x2x?x64xf16>, %dv: memref<1x2x?x64xf16>,
                           %delta: memref<1x4x?xf32>, %acc: memref<1x4x?x64xf32>,
                           %cq: memref<?xi32>, %ck: memref<?xi32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv
      workspace %delta, %acc cu_seqlens(%cq, %ck) {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<1x4x?x64xf16>, memref<1x2x?x64xf16>, memref<1x2x?x64xf16>,
      memref<1x4x?x64xf16>, memref<1x4x?x64xf16>, memref<1x4x?xf32>
    into memref<1x4x?x64xf16>, memref<1x2x?x64xf16>, memref<1x2x?x64xf16>
    workspace memref<1x4x?xf32>, memref<1x4x?x64xf32>
    cu_seqlens memref<?xi32>, memref<?xi32>
  return
}
