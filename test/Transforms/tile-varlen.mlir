// RUN: fa-opt %s --split-input-file --fa-tile="block-m=16 block-n=32" --cse | FileCheck %s

// A packed varlen batch: one program per (sequence, head, query tile of the
// packed rows); each reads its sequence's rows from cu_seqlens, clamped
// into the tensors, and every index below counts from the sequence's start.
// CHECK-LABEL: func @varlen_causal
// CHECK-SAME: (%[[Q:.*]]: memref<1x4x?x64xf16>, %[[K:.*]]: memref<1x2x?x64xf16>, %[[V:.*]]: memref<1x2x?x64xf16>, %[[O:.*]]: memref<1x4x?x64xf16>, %[[LSE:.*]]: memref<1x4x?xf32>, %[[CQ:.*]]: memref<?xi32>, %[[CK:.*]]: memref<?xi32>)
// B = sequences = entries of cu_seqlens_q - 1.
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[OFFSETS:.*]] = memref.dim %[[CQ]], %[[C0]]
// CHECK: %[[SEQUENCES:.*]] = arith.subi %[[OFFSETS]], %[[C1]]
// CHECK: %[[TOTALQ:.*]] = memref.dim %[[Q]], %c2 :
// CHECK: %[[TOTALK:.*]] = memref.dim %[[K]], %c2 :
// The grid's tile count bounds any sequence's tiles: the packed rows'.
// CHECK: %[[TILES:.*]] = arith.ceildivui %[[TOTALQ]], %{{.*}}
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %[[T:.*]]) in (%[[SEQUENCES]], %{{.*}}, %[[TILES]]) {
// The sequence's query rows [first, end): unsigned, clamped to the rows.
// CHECK: %[[QF0:.*]] = memref.load %[[CQ]][%[[B]]] : memref<?xi32>
// CHECK: %[[QF1:.*]] = arith.index_castui %[[QF0]] : i32 to index
// CHECK: %[[QFIRST:.*]] = arith.minui %[[QF1]], %[[TOTALQ]]
// CHECK: %[[NEXT:.*]] = arith.addi %[[B]], %[[C1]]
// CHECK: %[[QE0:.*]] = memref.load %[[CQ]][%[[NEXT]]]
// CHECK: %[[QE1:.*]] = arith.index_castui %[[QE0]]
// CHECK: %[[QE2:.*]] = arith.minui %[[QE1]], %[[TOTALQ]]
// CHECK: %[[QEND:.*]] = arith.maxui %[[QE2]], %[[QFIRST]]
// CHECK: memref.load %[[CK]][%[[B]]]
// CHECK: %[[KFIRST:.*]] = arith.minui %{{.*}}, %[[TOTALK]]
// CHECK: memref.load %[[CK]][%[[NEXT]]]
// CHECK: %[[KEND:.*]] = arith.maxui %{{.*}}, %[[KFIRST]]
// CHECK: %[[SQ:.*]] = arith.subi %[[QEND]], %[[QFIRST]]
// CHECK: %[[SK:.*]] = arith.subi %[[KEND]], %[[KFIRST]]
// CHECK: %[[QSTART:.*]] = arith.muli %[[T]], %{{.*}}
// CHECK: %[[QTILE:.*]] = fa.load_tile %[[Q]][%[[C0]], %[[H]], %[[QSTART]]] sequence(%[[QFIRST]], %[[QEND]])
// A query tile past its sequence's rows sees no key.
// CHECK: %[[HASROWS:.*]] = arith.cmpi ult, %[[QSTART]], %[[SQ]]
// CHECK: %[[RANGESK:.*]] = arith.select %[[HASROWS]], %[[SK]], %[[C0]]
// CHECK: %[[BEGIN:.*]], %[[END:.*]] = fa.kv_tile_range %[[QSTART]], %[[SQ]], %[[RANGESK]] {{.*}}mask = #fa.mask<causal>}
// CHECK: scf.for %[[J:.*]] = %[[BEGIN]] to %[[END]]
// CHECK: %[[KVSTART:.*]] = arith.muli %[[J]], %{{.*}}
// CHECK: fa.load_tile %[[K]][%[[C0]], %{{.*}}, %[[KVSTART]]] sequence(%[[KFIRST]], %[[KEND]])
// CHECK: fa.load_tile %[[V]][%[[C0]], %{{.*}}, %[[KVSTART]]] sequence(%[[KFIRST]], %[[KEND]])
// The causal mask is aligned to the sequence's bottom right; its padding
// columns are the sequence's.
// CHECK: fa.mask %{{.*}}, %[[QSTART]], %[[KVSTART]], %[[SQ]], %[[SK]] {mask = #fa.mask<causal>}
// CHECK: fa.store_tile %{{.*}}, %[[O]][%[[C0]], %[[H]], %[[QSTART]]] sequence(%[[QFIRST]], %[[QEND]])
// CHECK: fa.store_tile %{{.*}}, %[[LSE]][%[[C0]], %[[H]], %[[QSTART]]] sequence(%[[QFIRST]], %[[QEND]])
// CHECK: } attributes {ragged}
func.func @varlen_causal(%q: memref<1x4x?x64xf16>, %k: memref<1x2x?x64xf16>,
                         %v: memref<1x2x?x64xf16>, %o: memref<1x4x?x64xf16>,
                         %lse: memref<1x4x?xf32>, %cq: memref<?xi32>, %ck: memref<?xi32>) {
  fa.attention %q, %k, %v into %o, %lse cu_seqlens(%cq, %ck) {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<1x4x?x64xf16>, memref<1x2x?x64xf16>, memref<1x2x?x64xf16>
    into memref<1x4x?x64xf16>, memref<1x4x?xf32> cu_seqlens memref<?xi32>, memref<?xi32>
  return
}

// -----

// Without a mask and with packed keys a multiple of block-n, the sequences'
// own lengths still leave tails: the scores are masked.
// CHECK-LABEL: func @varlen_tails
// CHECK: fa.mask %{{.*}} : tensor<16x32xf32>
// CHECK-NOT: mask = #fa.mask<causal>
func.func @varlen_tails(%q: memref<1x2x64x16xf32>, %kv: memref<1x2x64x16xf32>,
                        %o: memref<1x2x64x16xf32>, %lse: memref<1x2x64xf32>,
                        %cq: memref<3xi32>, %ck: memref<3xi32>) {
  fa.attention %q, %kv, %kv into %o, %lse cu_seqlens(%cq, %ck) {scale = 0.25 : f32}
    : memref<1x2x64x16xf32>, memref<1x2x64x16xf32>, memref<1x2x64x16xf32>
    into memref<1x2x64x16xf32>, memref<1x2x64xf32> cu_seqlens memref<3xi32>, memref<3xi32>
  return
}
