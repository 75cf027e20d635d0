// RUN: fa-opt %s --fa-tile-pipeline="block-m=32 block-n=32 page-gather" --fa-place-mma="num-warps=2 stages=2" --fa-convert-placed-to-gpu | FileCheck %s

// A paged K/V tile read row by row (fa.load_tile's pages): each 16-byte
// cp.async chunk's row k of entry b's keys is row k % P of page
// table[b, k / P], the page index clamped into the table's row and the page
// number into the pool. A thread's rows step by 4 (64 threads, 16 chunks a
// row): the first row is divided by P, the next ones add 4's pages and rows
// with a carry. A thread looks up the rows of all its rounds (8 here)
// before its first copy (independent loads: one latency), and V's copies
// take K's lookups (the same rows of a pool of the same shape).
// CHECK-LABEL: gpu.func @paged
// CHECK-SAME: %[[K:[^:]*]]: memref<?x?x?x128xf16>, %[[V:[^:]*]]: memref<?x?x?x128xf16>, %{{[^:]*}}: memref<?x?x?x128xf16>, %{{[^:]*}}: memref<?x?x?xf32>, %{{[^:]*}}: memref<?xi32>, %[[TABLE:[^:]*]]: memref<?x?xi32>)
// The prologue's copies of tile 0.
// CHECK: scf.if
// CHECK: %[[P:.*]] = memref.dim %[[K]], %c2
// CHECK: %[[STEP_PAGES:.*]] = arith.divui %c4{{.*}}, %[[P]]
// CHECK: %[[STEP_ROWS:.*]] = arith.remui %c4{{.*}}, %[[P]]
// CHECK: %[[PAGE:.*]] = arith.divui %[[ROW:.*]], %[[P]]
// CHECK: %[[IN_PAGE:.*]] = arith.remui %[[ROW]], %[[P]]
// CHECK: %[[PAGES:.*]] = memref.dim %[[TABLE]], %c1
// CHECK: %[[LAST_PAGE:.*]] = arith.subi %[[PAGES]], %c1
// CHECK: %[[POOL:.*]] = memref.dim %[[K]], %c0
// CHECK: %[[LAST_ENTRY:.*]] = arith.subi %[[POOL]], %c1
// CHECK: %[[PAGE_IN_TABLE:.*]] = arith.minui %[[PAGE]], %[[LAST_PAGE]]
// CHECK: %[[NUMBER:.*]] = memref.load %[[TABLE]][%{{.*}}, %[[PAGE_IN_TABLE]]]
// CHECK: %[[ENTRY0:.*]] = arith.index_castui %[[NUMBER]]
// CHECK: %[[ENTRY:.*]] = arith.minui %[[ENTRY0]], %[[LAST_ENTRY]]
// The second round's row: 4 rows on, past the page's end or not.
// CHECK: %[[NEXT:.*]] = arith.addi %[[IN_PAGE]], %[[STEP_ROWS]]
// CHECK: %[[CARRY:.*]] = arith.cmpi uge, %[[NEXT]], %[[P]]
// CHECK: %[[WRAPPED:.*]] = arith.subi %[[NEXT]], %[[P]]
// CHECK: %[[IN_PAGE1:.*]] = arith.select %[[CARRY]], %[[WRAPPED]], %[[NEXT]]
// CHECK: %[[PAGE1A:.*]] = arith.addi %[[PAGE]], %[[STEP_PAGES]]
// CHECK: %[[ONE_IF_CARRY:.*]] = arith.select %[[CARRY]]
// CHECK: %[[PAGE1:.*]] = arith.addi %[[PAGE1A]], %[[ONE_IF_CARRY]]
// CHECK: %[[PAGE1_IN_TABLE:.*]] = arith.minui %[[PAGE1]]
// CHECK: memref.load %[[TABLE]][%{{.*}}, %[[PAGE1_IN_TABLE]]]
// CHECK-COUNT-6: memref.load %[[TABLE]]
// CHECK-NOT: memref.load
// CHECK: nvgpu.device_async_copy %[[K]][%[[ENTRY]], %{{.*}}, %[[IN_PAGE]], %{{.*}}]
// CHECK: nvgpu.device_async_copy %[[K]][%{{.*}}, %{{.*}}, %[[IN_PAGE1]], %{{.*}}]
// CHECK-COUNT-6: nvgpu.device_async_copy %[[K]]
// CHECK-NOT: memref.load
// CHECK: nvgpu.device_async_copy %[[V]][%[[ENTRY]], %{{.*}}, %[[IN_PAGE]], %{{.*}}]
// CHECK-COUNT-7: nvgpu.device_async_copy %[[V]]
// The loop's copies of tile j + 1: the same, eight lookups for K and V.
// CHECK: scf.for
// CHECK-COUNT-8: memref.load %[[TABLE]]
// CHECK-NOT: memref.load
// CHECK-COUNT-8: nvgpu.device_async_copy %[[K]]
// CHECK-NOT: memref.load
// CHECK-COUNT-8: nvgpu.device_async_copy %[[V]]
func.func @paged(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
                 %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>, %lens: memref<?xi32>,
                 %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v into %o, %lse kv_lens %lens block_table %table {scale = 0.125 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
    kv_lens memref<?xi32> block_table memref<?x?xi32>
  return
}
