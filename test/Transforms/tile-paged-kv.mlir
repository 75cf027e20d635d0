// RUN: fa-opt %s --split-input-file --fa-tile="block-m=16 block-n=32" --cse | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile="block-m=16 block-n=32 page-gather" --cse | FileCheck %s --check-prefix=GATHER

// A paged KV cache: K and V are a pool of pages of P = dim(K, 2) rows and
// entry b's keys are the pages block_table[b, 0..] one after another
// (kv_len = max_pages * P, then the filled length kv_lens[b]). Each K/V
// tile lies in one page (block-n divides P): the loop reads page
// table[b, start / P] (clamped into the table's row and the pool) from row
// start % P, the rows before kv_len, as a load of that page's batch entry.
// CHECK-LABEL: func.func @paged
// CHECK-SAME: %[[K:[^:]*]]: memref<?x?x?x64xf16>, %[[V:[^:]*]]: memref<?x?x?x64xf16>, %{{[^:]*}}: memref<?x?x?x64xf16>, %{{[^:]*}}: memref<?x?x?xf32>, %[[LENS:[^:]*]]: memref<?xi32>, %[[TABLE:[^:]*]]: memref<?x?xi32>)
// CHECK: %[[P:.*]] = memref.dim %[[K]], %c2
// CHECK: %[[PAGES:.*]] = memref.dim %[[TABLE]], %c1
// CHECK: %[[CAPACITY:.*]] = arith.muli %[[PAGES]], %[[P]]
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// CHECK: %[[USED:.*]] = arith.index_castui
// CHECK: %[[SK:.*]] = arith.minui %[[USED]], %[[CAPACITY]]
// CHECK: %[[LAST_PAGE:.*]] = arith.subi %[[PAGES]], %c1
// CHECK: %[[POOL:.*]] = memref.dim %[[K]], %c0
// CHECK: %[[LAST_ENTRY:.*]] = arith.subi %[[POOL]], %c1
// CHECK: scf.for %[[T:.*]] = {{.*}} iter_args
// CHECK: %[[START:.*]] = arith.muli %[[T]], %c32
// CHECK: %[[PAGE0:.*]] = arith.divui %[[START]], %[[P]]
// CHECK: %[[PAGE:.*]] = arith.minui %[[PAGE0]], %[[LAST_PAGE]]
// CHECK: %[[NUMBER:.*]] = memref.load %[[TABLE]][%[[B]], %[[PAGE]]] : memref<?x?xi32>
// CHECK: %[[ENTRY0:.*]] = arith.index_castui %[[NUMBER]] : i32 to index
// CHECK: %[[ENTRY:.*]] = arith.minui %[[ENTRY0]], %[[LAST_ENTRY]]
// CHECK: %[[ROW:.*]] = arith.remui %[[START]], %[[P]]
// CHECK: %[[LEFT:.*]] = arith.subi %[[SK]], %[[START]]
// CHECK: %[[END:.*]] = arith.addi %[[ROW]], %[[LEFT]]
// CHECK: fa.load_tile %[[K]][%[[ENTRY]], %{{.*}}, %[[ROW]]] sequence(%c0, %[[END]])
// CHECK: fa.load_tile %[[V]][%[[ENTRY]], %{{.*}}, %[[ROW]]] sequence(%c0, %[[END]])
// The mask and the K/V range see the logical keys.
// CHECK: fa.mask %{{.*}}, %{{.*}}, %[[START]], %{{.*}}, %[[SK]]
// With page-gather (pages that need not hold whole tiles), the loads
// themselves look each row's page up: they read entry b's sequence of
// pages from key start, its keys ending at kv_len; the loop reads no page.
// GATHER-LABEL: func.func @paged
// GATHER-SAME: %[[K:[^:]*]]: memref<?x?x?x64xf16>, %[[V:[^:]*]]: memref<?x?x?x64xf16>, %{{[^:]*}}: memref<?x?x?x64xf16>, %{{[^:]*}}: memref<?x?x?xf32>, %[[LENS:[^:]*]]: memref<?xi32>, %[[TABLE:[^:]*]]: memref<?x?xi32>)
// GATHER: fa.grid (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// GATHER: %[[SK:.*]] = arith.minui
// GATHER: scf.for %[[T:.*]] = {{.*}} iter_args
// GATHER: %[[START:.*]] = arith.muli %[[T]], %c32
// GATHER-NOT: memref.load
// GATHER: fa.load_tile %[[K]][%[[B]], %{{.*}}, %[[START]]] sequence(%c0, %[[SK]]) pages(%[[TABLE]] : memref<?x?xi32>) : memref<?x?x?x64xf16> -> tensor<32x64xf16>
// GATHER: fa.load_tile %[[V]][%[[B]], %{{.*}}, %[[START]]] sequence(%c0, %[[SK]]) pages(%[[TABLE]] : memref<?x?xi32>)
// GATHER: fa.mask %{{.*}}, %{{.*}}, %[[START]], %{{.*}}, %[[SK]]
func.func @paged(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                 %o: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>, %lens: memref<?xi32>,
                 %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v into %o, %lse kv_lens %lens block_table %table {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
    kv_lens memref<?xi32> block_table memref<?x?xi32>
  return
}

// -----

// K/V entries by index (cache_batch_idx): the program's K/V loads read
// entry index[b], clamped into K's batch; Q, O and LSE stay entry b's.
// CHECK-LABEL: func.func @indexed
// CHECK-SAME: %[[Q:[^:]*]]: memref<?x?x?x64xf16>, %[[K:[^:]*]]: memref<?x?x?x64xf16>, %{{[^:]*}}: memref<?x?x?x64xf16>, %{{[^:]*}}: memref<?x?x?x64xf16>, %{{[^:]*}}: memref<?x?x?xf32>, %[[INDEX:[^:]*]]: memref<?xi32>)
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// CHECK: %[[ENTRY0:.*]] = memref.load %[[INDEX]][%[[B]]] : memref<?xi32>
// CHECK: %[[ENTRY1:.*]] = arith.index_castui %[[ENTRY0]] : i32 to index
// CHECK: %[[ENTRIES:.*]] = memref.dim %[[K]], %c0
// CHECK: %[[LAST:.*]] = arith.subi %[[ENTRIES]], %c1
// CHECK: %[[ENTRY:.*]] = arith.minui %[[ENTRY1]], %[[LAST]]
// CHECK: fa.load_tile %[[Q]][%[[B]], %[[H]]
// CHECK: fa.load_tile %[[K]][%[[ENTRY]],
func.func @indexed(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                   %o: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>, %index: memref<?xi32>) {
  fa.attention %q, %k, %v into %o, %lse cache_batch_idx %index {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
    cache_batch_idx memref<?xi32>
  return
}

// -----

// A paged varlen batch: Q, O, LSE are packed (batch 0, the sequence's rows
// from cu_seqlens_q); K and V are the pool. Sequence b's keys are the first
// cu_seqlens_k[b + 1] - cu_seqlens_k[b] (at least 0, at most the table
// row's max_pages * P) of its pages: table row b, rows from 0, as for a
// batch entry. The mask sees the sequence's lengths (causal aligned to its
// bottom right).
// CHECK-LABEL: func.func @paged_varlen
// CHECK-SAME: %[[Q:[^:]*]]: memref<1x?x?x64xf16>, %[[K:[^:]*]]: memref<?x?x?x64xf16>, %{{[^:]*}}: memref<?x?x?x64xf16>, %{{[^:]*}}: memref<1x?x?x64xf16>, %{{[^:]*}}: memref<1x?x?xf32>, %[[CUQ:[^:]*]]: memref<?xi32>, %[[CUK:[^:]*]]: memref<?xi32>, %[[TABLE:[^:]*]]: memref<?x?xi32>)
// CHECK: %[[P:.*]] = memref.dim %[[K]], %c2
// CHECK: %[[PAGES:.*]] = memref.dim %[[TABLE]], %c1
// CHECK: %[[CAPACITY:.*]] = arith.muli %[[PAGES]], %[[P]]
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// CHECK: %[[NEXT:.*]] = arith.addi %[[B]], %c1
// CHECK: %[[FIRST0:.*]] = memref.load %[[CUK]][%[[B]]]
// CHECK: %[[FIRST:.*]] = arith.index_castui %[[FIRST0]]
// CHECK: %[[LAST0:.*]] = memref.load %[[CUK]][%[[NEXT]]]
// CHECK: %[[LAST1:.*]] = arith.index_castui %[[LAST0]]
// CHECK: %[[LAST:.*]] = arith.maxui %[[LAST1]], %[[FIRST]]
// CHECK: %[[COUNT:.*]] = arith.subi %[[LAST]], %[[FIRST]]
// CHECK: %[[SK:.*]] = arith.minui %[[COUNT]], %[[CAPACITY]]
// CHECK: %[[SQ:.*]] = arith.subi
// CHECK: fa.load_tile %[[Q]][%c0, %[[H]]
// CHECK: scf.for %[[T:.*]] = {{.*}} iter_args
// CHECK: %[[START:.*]] = arith.muli %[[T]], %c32
// CHECK: memref.load %[[TABLE]][%[[B]], %{{.*}}] : memref<?x?xi32>
// CHECK: %[[LEFT:.*]] = arith.subi %[[SK]], %[[START]]
// CHECK: %[[END:.*]] = arith.addi %{{.*}}, %[[LEFT]]
// CHECK: fa.load_tile %[[K]][%{{.*}}, %{{.*}}, %{{.*}}] sequence(%c0, %[[END]])
// CHECK: fa.mask %{{.*}}, %{{.*}}, %[[START]], %[[SQ]], %[[SK]] {mask = #fa.mask<causal>}
func.func @paged_varlen(%q: memref<1x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                        %o: memref<1x?x?x64xf16>, %lse: memref<1x?x?xf32>, %cuq: memref<?xi32>,
                        %cuk: memref<?xi32>, %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v into %o, %lse cu_seqlens(%cuq, %cuk) block_table %table {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<1x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<1x?x?x64xf16>, memref<1x?x?xf32>
    cu_seqlens memref<?xi32>, memref<?xi32> block_table memref<?x?xi32>
  return
}
