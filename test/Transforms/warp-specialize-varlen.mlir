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
// CHECK-NOT: nvvm.inline_ptx
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
// Lane l clears 16-byte chunk l % 8 of rows l / 8 + 16 j in both column
// blocks of 128 rows x 128 bytes: predicated stores (row past the end iff
// kept - l / 8 <= 16 j) at immediate offsets from one 32-bit address.
// CHECK: %[[LANE:.*]] = arith.remui %{{.*}}, %c128
// CHECK: %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %[[VIEW]]
// CHECK: %[[BASE:.*]] = arith.index_castui %[[PTR]] : index to i32
// CHECK: %[[OFF:.*]] = arith.muli %[[LANE]], %c16
// CHECK: %[[OFF32:.*]] = arith.index_castui %[[OFF]] : index to i32
// CHECK: %[[START:.*]] = arith.addi %[[BASE]], %[[OFF32]] : i32
// CHECK: %[[LANEROW:.*]] = arith.divui %[[LANE]], %c8
// CHECK: %[[LEFT:.*]] = arith.subi %[[KEPT]], %[[LANEROW]] : index
// CHECK: %[[LEFT32:.*]] = arith.index_castui %[[LEFT]] : index to i32
// CHECK: %[[P0:.*]] = arith.cmpi sle, %[[LEFT32]], %c0_i32 : i32
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+0], {0, 0, 0, 0};" ro(%[[START]] : i32), predicate = %[[P0]]
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+16384], {0, 0, 0, 0};" ro(%[[START]] : i32), predicate = %[[P0]]
// CHECK: %[[P1:.*]] = arith.cmpi sle, %[[LEFT32]], %c16_i32 : i32
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+2048], {0, 0, 0, 0};" ro(%[[START]] : i32), predicate = %[[P1]]
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+18432], {0, 0, 0, 0};" ro(%[[START]] : i32), predicate = %[[P1]]
// CHECK: %[[P7:.*]] = arith.cmpi sle, %[[LEFT32]], %c112_i32 : i32
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+14336], {0, 0, 0, 0};" ro(%[[START]] : i32), predicate = %[[P7]]
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+30720], {0, 0, 0, 0};" ro(%[[START]] : i32), predicate = %[[P7]]
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK: }
// CHECK-NEXT: %[[V:.*]] = builtin.unrealized_conversion_cast %[[VIEW]]
// CHECK-NEXT: fa.tile_matmul %{{.*}}, %[[V]] acc(
// The last P V, after the loop, clears its tile too.
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: scf.if
// CHECK: nvvm.inline_ptx "st.shared.v4.b32
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
