// RUN: fa-opt %s --fa-tile-backward="block-m=16 block-n=32" --cse | FileCheck %s

// The deterministic backward of a packed varlen batch: a turn counter per
// (sequence, head, query tile of the sequence). With the causal mask the
// K/V tiles take their turns last to first, so the dK/dV grid's slot J is
// K/V tile (the sequence's tiles - 1 - J) while J is below the sequence's
// own K/V tile count, else J itself (a tile past the sequence's keys, which
// no query sees): the runtime launches the longest sequence's tile count,
// not the packed keys'.
// CHECK-LABEL: func @varlen_deterministic
// CHECK-SAME: %[[ORDER:[^:]*]]: memref<?x4x?xi32>, %[[CQ:[^:]*]]: memref<?xi32>, %[[CK:[^:]*]]: memref<?xi32>)
// The delta program starts its counter, indexed by the sequence.
// CHECK: fa.grid (%[[S1:.*]], %[[H1:.*]], %[[T1:.*]]) in
// CHECK: memref.store %{{.*}}, %[[ORDER]][%[[S1]], %[[H1]], %[[T1]]]
// CHECK: } attributes {program = "delta", ragged}
// CHECK: fa.grid (%[[S:.*]], %[[KVH:.*]], %[[J:.*]]) in
// CHECK: memref.load %[[CK]]
// CHECK: %[[KFIRST:.*]] = arith.minui
// CHECK: memref.load %[[CK]]
// CHECK: %[[KEND:.*]] = arith.maxui %{{.*}}, %[[KFIRST]]
// CHECK: %[[SK:.*]] = arith.subi %[[KEND]], %[[KFIRST]] : index
// CHECK-NEXT: %[[TILES:.*]] = arith.ceildivui %[[SK]], %c32 : index
// CHECK: %[[OWN:.*]] = arith.cmpi ult, %[[J]], %[[TILES]] : index
// CHECK: %[[LAST:.*]] = arith.subi %[[TILES]], %c1 : index
// CHECK: %[[REVERSED:.*]] = arith.subi %[[LAST]], %[[J]] : index
// CHECK: %[[KV:.*]] = arith.select %[[OWN]], %[[REVERSED]], %[[J]] : index
// CHECK: %[[KVSTART:.*]] = arith.muli %[[KV]], %c32 : index
// CHECK: scf.for
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %{{.*}}, %[[END:.*]] = fa.kv_tile_range
// CHECK: %[[QLAST:.*]] = arith.subi %[[END]], %c1 : index
// CHECK: %[[TURN:.*]] = arith.subi %[[QLAST]], %[[KV]] : index
// CHECK: fa.wait_turn %[[ORDER]][%[[S]], %{{.*}}, %[[I]]], %[[TURN]]
// CHECK: } attributes {program = "dkdv", ragged}
func.func @varlen_deterministic(%q: memref<1x4x?x64xf16>, %k: memref<1x2x?x64xf16>,
                                %lse: memref<1x4x?xf32>, %acc: memref<1x4x?x64xf32>,
                                %order: memref<?x4x?xi32>, %cq: memref<?xi32>, %ck: memref<?xi32>) {
  fa.attention_backward %q, %k, %k, %q, %q, %lse into %q, %k, %k
      workspace %lse, %acc, %order cu_seqlens(%cq, %ck) {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<1x4x?x64xf16>, memref<1x2x?x64xf16>, memref<1x2x?x64xf16>,
      memref<1x4x?x64xf16>, memref<1x4x?x64xf16>, memref<1x4x?xf32>
    into memref<1x4x?x64xf16>, memref<1x2x?x64xf16>, memref<1x2x?x64xf16>
    workspace memref<1x4x?xf32>, memref<1x4x?x64xf32>, memref<?x4x?xi32>
    cu_seqlens memref<?xi32>, memref<?xi32>
  return
}
