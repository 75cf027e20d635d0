// RUN: fa-opt %s --fa-tile="block-m=32 block-n=64" --cse | FileCheck %s

// Split-KV: the forward becomes two programs. "split" runs every part of
// every query tile: grid batch index p is part p / B of batch entry p % B
// (N = dim(po, 0) / B parts); the part visits its share of the query
// tile's K/V range (fa.kv_tile_range's part(s of N): ceil(tiles / N) tiles
// from begin + s ceil(tiles / N), cut at the range's end), and stores its
// normalized output and LSE in f32 to batch entry s B + b of the partials
// (no sinks here).
// CHECK-LABEL: func.func @split
// CHECK-SAME: %[[Q:[^:]*]]: memref<?x?x?x128xbf16>, %{{[^:]*}}: memref<?x?x?x128xbf16>, %{{[^:]*}}: memref<?x?x?x128xbf16>, %[[O:[^:]*]]: memref<?x?x?x128xbf16>, %[[LSE:[^:]*]]: memref<?x?x?xf32>, %[[SINKS:[^:]*]]: memref<?xf32>, %[[PO:[^:]*]]: memref<?x?x?x128xf32>, %[[PLSE:[^:]*]]: memref<?x?x?xf32>)
// CHECK: %[[BATCH:.*]] = memref.dim %[[Q]], %c0
// CHECK: %[[PARTS_BATCH:.*]] = memref.dim %[[PO]], %c0
// The split program first lets the combine launch (its programs then
// wait for every part: fa.wait_previous_program).
// CHECK: fa.grid (%[[P:.*]], %[[H:.*]], %[[QT:.*]]) in (%[[PARTS_BATCH]], %{{.*}}, %{{.*}}) {
// CHECK-NEXT: fa.launch_next_program
// CHECK: %[[PART:.*]] = arith.divui %[[P]], %[[BATCH]]
// CHECK: %[[B:.*]] = arith.remui %[[P]], %[[BATCH]]
// CHECK: %[[PARTS:.*]] = arith.divui %[[PARTS_BATCH]], %[[BATCH]]
// CHECK: %[[LO:.*]], %[[HI:.*]] = fa.kv_tile_range %{{.*}}, %{{.*}}, %{{.*}} part(%[[PART]] of %[[PARTS]])
// CHECK: %[[LOOP:.*]]:3 = scf.for %{{.*}} = %[[LO]] to %[[HI]]
// CHECK-NOT: fa.join_sink
// CHECK: %[[PO_TILE:.*]], %[[PLSE_TILE:.*]] = fa.finalize %[[LOOP]]#2, %[[LOOP]]#0, %[[LOOP]]#1
// CHECK: %[[SB:.*]] = arith.muli %[[PART]], %[[BATCH]]
// CHECK: %[[ENTRY:.*]] = arith.addi %[[SB]], %[[B]]
// CHECK: fa.store_tile %[[PO_TILE]], %[[PO]][%[[ENTRY]], %[[H]], %{{.*}}] : tensor<32x128xf32>
// CHECK: fa.store_tile %[[PLSE_TILE]], %[[PLSE]][%[[ENTRY]], %[[H]], %{{.*}}] : tensor<32xf32>
// CHECK: } attributes {program = "split"}

// "combine" runs each tile of 4 query rows once (a decode's packed rows):
// it merges the N parts into (0, -inf) by their log-sum-exps, then the
// sink joins the merged result as the online softmax's state (m = LSE,
// l = 1), and O (rounded to bf16) and LSE are stored. The parts come in
// chunks of sixteen (D <= 128), loaded before they are merged (a merge
// waits for the one before it: loads issued one part at a time would wait
// out their latency per part); the N % 16 parts after the last whole chunk
// are merged one at a time.
// CHECK: fa.grid (%[[CB:.*]], %[[CH:.*]], %[[CT:.*]]) in (%[[BATCH]], %{{.*}}, %{{.*}}) {
// CHECK-NEXT: fa.wait_previous_program
// CHECK-NOT: fa.load_tile
// CHECK: %[[ROW:.*]] = arith.muli %[[CT]], %c4
// CHECK: %[[N:.*]] = arith.divui %[[PARTS_BATCH]], %[[BATCH]]
// CHECK: %[[NC:.*]] = arith.divui %[[N]], %c16
// CHECK: %[[WHOLE:.*]] = arith.muli %[[NC]], %c16
// CHECK: %[[CHUNKS:.*]]:2 = scf.for %[[C:.*]] = %c0 to %[[WHOLE]] step %c16 iter_args(%[[CACC:.*]] = %{{.*}}, %[[CSTATE:.*]] = %{{.*}}) -> (tensor<4x128xf32>, tensor<4xf32>)
// CHECK: %[[CE0:.*]] = arith.addi %{{.*}}, %[[CB]]
// CHECK: %[[T0:.*]] = fa.load_tile %[[PO]][%[[CE0]], %[[CH]], %[[ROW]]]
// CHECK: %[[L0:.*]] = fa.load_tile %[[PLSE]][%[[CE0]], %[[CH]], %[[ROW]]]
// CHECK: %[[C1:.*]] = arith.addi %[[C]], %c1
// CHECK: %[[T1:.*]] = fa.load_tile %[[PO]]
// CHECK: %[[L1:.*]] = fa.load_tile %[[PLSE]]
// CHECK-COUNT-14: arith.addi %[[C]], %c{{[2-9]|1[0-5]}}
// CHECK: %[[L15:.*]] = fa.load_tile %[[PLSE]]
// CHECK-NEXT: %[[O0:.*]], %[[S0:.*]] = fa.merge_partial %[[CACC]], %[[CSTATE]] with %[[T0]], %[[L0]]
// CHECK-NEXT: %[[O1:.*]], %[[S1:.*]] = fa.merge_partial %[[O0]], %[[S0]] with %[[T1]], %[[L1]]
// CHECK-COUNT-13: fa.merge_partial
// CHECK-NEXT: %[[O15:.*]], %[[S15:.*]] = fa.merge_partial %{{.*}} with %{{.*}}, %[[L15]]
// CHECK-NEXT: scf.yield %[[O15]], %[[S15]]
// CHECK: %[[MERGED:.*]]:2 = scf.for %[[S:.*]] = %[[WHOLE]] to %[[N]] step %c1 iter_args(%[[ACC:.*]] = %[[CHUNKS]]#0, %[[STATE:.*]] = %[[CHUNKS]]#1) -> (tensor<4x128xf32>, tensor<4xf32>)
// CHECK: %[[SB2:.*]] = arith.muli %[[S]], %[[BATCH]]
// CHECK: %[[E:.*]] = arith.addi %[[SB2]], %[[CB]]
// CHECK: %[[T:.*]] = fa.load_tile %[[PO]][%[[E]], %[[CH]], %[[ROW]]] : memref<?x?x?x128xf32> -> tensor<4x128xf32>
// CHECK: %[[TL:.*]] = fa.load_tile %[[PLSE]][%[[E]], %[[CH]], %[[ROW]]] : memref<?x?x?xf32> -> tensor<4xf32>
// CHECK: %[[NO:.*]], %[[NL:.*]] = fa.merge_partial %[[ACC]], %[[STATE]] with %[[T]], %[[TL]] : tensor<4x128xf32>, tensor<4xf32>
// CHECK: scf.yield %[[NO]], %[[NL]]
// CHECK: %[[SINK:.*]] = memref.load %[[SINKS]][%[[CH]]]
// CHECK: %[[M:.*]], %[[L:.*]], %[[ALPHA:.*]] = fa.join_sink %[[SINK]], %[[MERGED]]#1, %{{.*}} : tensor<4xf32>
// CHECK: %[[R:.*]] = fa.rescale %[[MERGED]]#0, %[[ALPHA]]
// CHECK: %[[OUT:.*]], %[[OUT_LSE:.*]] = fa.finalize %[[R]], %[[M]], %[[L]]
// CHECK: %[[OUT16:.*]] = arith.truncf %[[OUT]] : tensor<4x128xf32> to tensor<4x128xbf16>
// CHECK: fa.store_tile %[[OUT16]], %[[O]][%[[CB]], %[[CH]], %[[ROW]]]
// CHECK: fa.store_tile %[[OUT_LSE]], %[[LSE]][%[[CB]], %[[CH]], %[[ROW]]]
// CHECK: } attributes {program = "combine"}
func.func @split(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>,
                 %o: memref<?x?x?x128xbf16>, %lse: memref<?x?x?xf32>, %sinks: memref<?xf32>,
                 %po: memref<?x?x?x128xf32>, %plse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse sinks %sinks partials(%po, %plse) {scale = 0.125 : f32}
    : memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>
    into memref<?x?x?x128xbf16>, memref<?x?x?xf32> sinks memref<?xf32>
    partials memref<?x?x?x128xf32>, memref<?x?x?xf32>
  return
}
