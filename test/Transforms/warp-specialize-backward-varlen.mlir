// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2" --fa-wgmma-pipeline --fa-warp-specialize --fa-tma-reduce --cse | FileCheck %s
// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2" --fa-wgmma-pipeline --fa-warp-specialize="writer-warp=all" --fa-tma-reduce --cse | FileCheck %s --check-prefix=WRITER

// A varlen backward's dkdv program on wgmma. The producer's TMA boxes start
// at the sequence's first row (K/V tile t: cu_seqlens_k[b] + 128 t), and a
// box that reaches past the sequence's end brings the next sequence's rows
// (TMA reads zeros only past the tensor). The consumers zero those rows in
// all four tiles: K and V once, Q and dO after each wait. With K and V
// zero there, the keys past the end give dS = 0 and add nothing to
// dQ = dS K; with Q and dO zero (LSE and D load as 0 past the end) the
// query rows past the end have P = 1, dP = 0 and dS = 0: nothing to dK or
// dV. Their dQ rows, 0 x K, go into the next sequence's rows with the TMA
// engine's box; as 0 x inf is NaN, they are zeroed in the staged tile
// first (a zero leaves an accumulator that began at +0 bit for bit as it
// was).
// CHECK-LABEL: func.func @backward_varlen
// Producer (40 registers: the warps that copy LSE and D, whose rows past
// the sequence land as zeros: warp-specialize-backward-staged-rows.mlir):
// K at its sequence's row.
// CHECK: nvvm.setmaxregister  decrease 40
// CHECK: %[[KT:.*]] = arith.muli %tile, %c128 : index
// CHECK: %[[KFIRST:.*]] = arith.minui
// CHECK: %[[KROW:.*]] = arith.addi %[[KFIRST]], %[[KT]] : index
// CHECK: nvgpu.tma.async.load %{{.*}}[%c0, %[[KROW]], %h, %c0]
// Consumers: K's wait, then its rows [kept, 128) cleared in a uniform
// branch (predicated 16-byte stores, fence, the warpgroup's barrier).
// CHECK: nvvm.setmaxregister  increase
// CHECK: nvgpu.mbarrier.try_wait.parity %{{.*}}[%c0]
// CHECK: %[[KPAST:.*]] = arith.cmpi ult, %{{.*}}, %c128 : index
// CHECK: scf.if %[[KPAST]] {
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+0], {0, 0, 0, 0};"
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+30720], {0, 0, 0, 0};"
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// V's wait, the same clear.
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: scf.if %[[KPAST]] {
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+30720], {0, 0, 0, 0};"
// In the loop: Q's wait, then rows [kept, 64) of the 64-row tile (two
// column blocks of 64 rows: offsets up to 48 rows x 128 bytes + 8192).
// CHECK: scf.for
// CHECK: scf.for
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: memref.view {{.*}} to memref<2x64x64xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[QROW:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NEXT: %[[QEND:.*]] = arith.maxui %{{.*}}, %[[QROW]] : index
// CHECK-NEXT: %[[QKEPT:.*]] = arith.subi %[[QEND]], %[[QROW]] : index
// CHECK-NEXT: %[[QPAST:.*]] = arith.cmpi ult, %[[QKEPT]], %c64 : index
// CHECK: scf.if %[[QPAST]] {
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+14336], {0, 0, 0, 0};"
// CHECK-NEXT: nvvm.fence.proxy
// CHECK: fa.tile_matmul {{.*}} {async, transpose_rhs}
// dO's wait and its clear.
// CHECK: nvgpu.mbarrier.try_wait.parity
// CHECK: scf.if %[[QPAST]] {
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+14336], {0, 0, 0, 0};"
// The staged dQ part: its rows past the end are 0 x K, NaN where the
// sequence's own K holds inf or NaN, and the box would add them into the
// next sequence's rows: each warpgroup zeroes them in its own two boxes
// (warpgroup g's from byte 16384 g), fences, takes its barrier; then its
// first thread adds its boxes at the sequence's row.
// CHECK: fa.convert_layout {{.*}} -> tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
// CHECK-NEXT: scf.if %[[QPAST]] {
// CHECK: arith.muli %{{.*}}, %c16384 : index
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+8192], {0, 0, 0, 0};"
// CHECK: nvvm.inline_ptx "st.shared.v4.b32 [$0+14336], {0, 0, 0, 0};"
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK-NEXT: }
// CHECK: %[[BOXROW:.*]] = arith.index_castui %[[QROW]] : index to i32
// CHECK: nvvm.cp.async.bulk.tensor.reduce %{{.*}}, %{{.*}}, box[%{{.*}}, %[[BOXROW]], %{{.*}}, %{{.*}}] {redKind = #nvvm.tma_redux_kind<add>}
// With a writer warp (writer-warp=all) the warp adds the boxes, and the
// consumers still zero the staged rows past the end themselves: no other
// thread writes the staged bytes. The writer's part has no clear ...
// WRITER-LABEL: func.func @backward_varlen
// WRITER: nvvm.setmaxregister  decrease
// WRITER-NOT: st.shared.v4.b32
// WRITER: nvvm.barrier id = %c12_i32 number_of_threads = %c160_i32
// WRITER-NOT: st.shared.v4.b32
// WRITER: cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group
// WRITER-NOT: st.shared.v4.b32
// WRITER: nvvm.setmaxregister  increase
// ... each consumer warpgroup, after staging its slice, takes its own
// barrier (the rows' values came from its other threads), zeroes the rows
// past the end in its two boxes from the staging's offset (warpgroup g's
// from byte 16384 g), fences, then hands the tile off.
// WRITER: %[[STAGED:.*]] = fa.convert_layout {{.*}} {fa.shared_offset = 163840 : i64} {{.*}} -> tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
// WRITER-NEXT: scf.if %{{.*}} {
// WRITER: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// WRITER: memref.view
// WRITER: arith.muli %{{.*}}, %c16384 : index
// WRITER: nvvm.inline_ptx "st.shared.v4.b32 [$0+0], {0, 0, 0, 0};"
// WRITER: nvvm.inline_ptx "st.shared.v4.b32 [$0+14336], {0, 0, 0, 0};"
// WRITER-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// WRITER-NEXT: }
// WRITER-NEXT: fa.hand_off %[[STAGED]] barrier 12 threads 160 {per_warpgroup}
func.func @backward_varlen(%q: memref<1x?x?x128xbf16>, %k: memref<1x?x?x128xbf16>, %v: memref<1x?x?x128xbf16>,
                           %o: memref<1x?x?x128xbf16>, %do: memref<1x?x?x128xbf16>, %lse: memref<1x?x?xf32>,
                           %dq: memref<1x?x?x128xbf16>, %dk: memref<1x?x?x128xbf16>, %dv: memref<1x?x?x128xbf16>,
                           %delta: memref<1x?x?xf32>, %accum: memref<1x?x?x128xf32>,
                           %cq: memref<?xi32>, %ck: memref<?xi32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum cu_seqlens(%cq, %ck)
      {scale = 0.0883883461 : f32}
    : memref<1x?x?x128xbf16>, memref<1x?x?x128xbf16>, memref<1x?x?x128xbf16>,
      memref<1x?x?x128xbf16>, memref<1x?x?x128xbf16>, memref<1x?x?xf32>
    into memref<1x?x?x128xbf16>, memref<1x?x?x128xbf16>, memref<1x?x?x128xbf16>
    workspace memref<1x?x?xf32>, memref<1x?x?x128xf32> cu_seqlens memref<?xi32>, memref<?xi32>
  return
}
