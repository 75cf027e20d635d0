// RUN: fa-opt %s --fa-tile-pipeline="block-m=128 block-n=128" --fa-place-pipeline="strategy=wgmma num-warps=8 stages=2" | FileCheck %s

// A varlen forward on wgmma: TMA brings a K/V tile's rows past the
// sequence's end as the next sequence's rows (only rows past the tensor
// read as zero). Their scores are masked (P = 0), but 0 * inf or NaN in V
// is NaN: after V's wait and before P V, a tile that reaches past the end
// clears those rows. Each warpgroup clears all of them itself and fences
// them to the async proxy before its own barrier (128 threads), so no
// warpgroup waits for another. K's rows are left alone (their scores are
// masked to -inf whatever they hold).
// CHECK-LABEL: func.func @varlen
// Q K^T: K's wait, no clear.
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK-NOT: vector.store
// CHECK: fa.tile_matmul {{.*}} {async, transpose_rhs}
// P V in the loop: V's wait, then rows [kept, 128) of the tile cleared, kept
// = max(end, first + row) - (first + row).
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: %[[VIEW:.*]] = memref.view {{.*}} to memref<2x128x64xf16, #gpu.address_space<workgroup>>
// CHECK: %[[FIRST:.*]] = arith.addi
// CHECK: %[[END:.*]] = arith.maxui %{{.*}}, %[[FIRST]] : index
// CHECK: %[[KEPT:.*]] = arith.subi %[[END]], %[[FIRST]] : index
// CHECK: %[[PAST:.*]] = arith.cmpi ult, %[[KEPT]], %c128{{.*}} : index
// CHECK: scf.if %[[PAST]] {
// Lane l clears chunk l % 16 (its column block and column) of rows kept +
// l / 16, kept + l / 16 + 8, ... (16 chunks a row of 128 f16).
// CHECK: %[[LANE:.*]] = arith.remui %{{.*}}, %c128
// CHECK: %[[CHUNK:.*]] = arith.remui %[[LANE]], %c16
// CHECK: %[[COL:.*]] = arith.muli %[[CHUNK]], %c8
// CHECK: %[[BLOCK:.*]] = arith.divui %[[COL]], %c64
// CHECK: %[[INBLOCK:.*]] = arith.remui %[[COL]], %c64
// CHECK: %[[LANEROW:.*]] = arith.divui %[[LANE]], %c16
// CHECK: %[[FROM:.*]] = arith.addi %[[KEPT]], %[[LANEROW]]
// CHECK: scf.for %[[ROW:.*]] = %[[FROM]] to %c128{{.*}} step %c8
// CHECK: vector.store %{{.*}}, %[[VIEW]][%[[BLOCK]], %[[ROW]], %[[INBLOCK]]] {alignment = 16 : i64} : memref<2x128x64xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK: }
// CHECK-NEXT: %[[V:.*]] = builtin.unrealized_conversion_cast %[[VIEW]]
// CHECK-NEXT: fa.tile_matmul %{{.*}}, %[[V]] acc(
// The last P V, after the loop, clears its tile too.
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: scf.if
// CHECK: vector.store
// CHECK: nvvm.fence.proxy
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK: fa.tile_matmul %{{.*}}, %{{.*}} acc(
func.func @varlen(%q: memref<1x4x?x128xf16>, %k: memref<1x4x?x128xf16>,
                  %v: memref<1x4x?x128xf16>, %o: memref<1x4x?x128xf16>,
                  %lse: memref<1x4x?xf32>, %cq: memref<?xi32>, %ck: memref<?xi32>) {
  fa.attention %q, %k, %v into %o, %lse cu_seqlens(%cq, %ck) {scale = 0.125 : f32}
    : memref<1x4x?x128xf16>, memref<1x4x?x128xf16>, memref<1x4x?x128xf16>
    into memref<1x4x?x128xf16>, memref<1x4x?xf32> cu_seqlens memref<?xi32>, memref<?xi32>
  return
}
