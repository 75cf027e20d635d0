// RUN: fa-opt %s --fa-tile-pipeline="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 producer-transposes-value=1" --fa-warp-specialize="persistent=false" --cse | FileCheck %s

// 8-bit V: P V reads V transposed (8-bit wgmma takes B K-major only). The
// producer warpgroup writes the transposed copy once per tile for both
// consumer warpgroups: its first thread issues the TMA copies, and all 128
// threads transpose V tile n - 1 while tile n's copies fly.
// CHECK-LABEL: func.func @float8
// 13 barriers: q_full (0), k_full[2] (1, 2), v_full[2] (3, 4), k_empty[2]
// (5, 6; the 256 consumer threads), v_empty[2] (7, 8; the 128 producer
// threads, who read V), v_t_full[2] (9, 10; the producer's threads each
// publish their share), v_t_empty[2] (11, 12; the consumer threads).
// CHECK: %[[BARS:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 13>
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c6], %c256
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c7], %c128
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c8], %c128
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c9], %c128
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c10], %c128
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c11], %c256
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c12], %c256
// Producer: 56 registers; Q from the elected thread.
// CHECK: scf.if
// CHECK-NEXT: nvvm.setmaxregister  decrease 56
// CHECK-NEXT: %[[ELECTED:.*]] = arith.cmpi eq, %thread_id_x, %c256
// CHECK-NEXT: scf.if %[[ELECTED]] {
// CHECK: nvgpu.tma.async.load
// CHECK: }
// The loop runs to kv_end + 1: copies of tile j (j < kv_end, elected
// thread), then the transpose of tile j - 1 (j > kv_begin, all threads).
// CHECK: %kv_begin, %kv_end = fa.kv_tile_range
// CHECK: %[[PAST:.*]] = arith.addi %kv_end, %c1
// CHECK: scf.for %[[J:.*]] = %kv_begin to %[[PAST]] step %c1 {
// CHECK: %[[N:.*]] = arith.subi %[[J]], %kv_begin
// CHECK: %[[INRANGE:.*]] = arith.cmpi ult, %[[J]], %kv_end
// CHECK: %[[COPIES:.*]] = arith.andi %[[INRANGE]], %[[ELECTED]]
// CHECK: scf.if %[[COPIES]] {
// CHECK: nvgpu.tma.async.load
// CHECK: nvgpu.tma.async.load
// CHECK: }
// The elected thread's warp waits for it (its other lanes must not spin on
// copies their own warp has yet to issue).
// CHECK: nvvm.bar.warp.sync
// CHECK-NEXT: %[[PREVIOUS:.*]] = arith.cmpi ugt, %[[J]], %kv_begin
// CHECK: scf.if %[[PREVIOUS]] {
// CHECK: %[[M:.*]] = arith.addi %[[N]], %c-1
// Wait for V tile m (v_full[m % 2], parity m / 2) and for the ring's slot
// (v_t_empty[m % 2], the previous round's parity).
// CHECK: %[[ROUND:.*]] = arith.trunci
// CHECK: %[[SLOT:.*]] = arith.remui %[[M]], %c2
// CHECK: %[[VFULL:.*]] = arith.addi %[[SLOT]], %c3
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[VFULL]]], %[[ROUND]]
// CHECK: %[[FREED:.*]] = arith.xori %[[ROUND]], %true
// CHECK: %[[TEMPTY:.*]] = arith.addi %[[SLOT]], %c11
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[TEMPTY]]], %[[FREED]]
// V's slot (at 49152) into the ring's (at 81920, fa-place-wgmma's offset).
// CHECK: %[[VSLOT:.*]] = arith.muli %[[SLOT]], %c16384
// CHECK: arith.addi %c49152, %[[VSLOT]]
// CHECK: %[[V:.*]] = builtin.unrealized_conversion_cast %{{.*}} to tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>>
// CHECK: arith.addi %c81920, %[[VSLOT]]
// CHECK: %[[VT:.*]] = builtin.unrealized_conversion_cast %{{.*}} to tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
// CHECK-NEXT: fa.copy_tile %[[V]] into %[[VT]]
// Published to the async proxy (wgmma), announced on v_t_full, V released.
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: %[[TFULL:.*]] = arith.addi %[[SLOT]], %c9
// CHECK-NEXT: nvgpu.mbarrier.arrive %[[BARS]][%[[TFULL]]]
// CHECK: %[[VEMPTY:.*]] = arith.addi %[[SLOT]], %c7
// CHECK-NEXT: nvgpu.mbarrier.arrive %[[BARS]][%[[VEMPTY]]]
// Consumers: 224 registers (the producer keeps 56); no transpose of their
// own: P V waits on v_t_full and reads the ring's slot, then releases it
// on v_t_empty. V's own barriers are the producer's.
// CHECK: } else {
// CHECK-NEXT: nvvm.setmaxregister  increase 224
// CHECK-NOT: fa.convert_layout {{.*}}transposed = true
// CHECK: scf.for
// CHECK: %[[CSLOT:.*]] = arith.remui %{{.*}}, %c2
// CHECK: %[[CTFULL:.*]] = arith.addi %[[CSLOT]], %c9
// CHECK-NEXT: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[CTFULL]]]
// CHECK: %[[CVT:.*]] = builtin.unrealized_conversion_cast %{{.*}} to tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
// CHECK-NEXT: fa.tile_matmul %{{.*}}, %[[CVT]] acc
// CHECK: %[[CTEMPTY:.*]] = arith.addi %[[CSLOT]], %c11
// CHECK-NEXT: nvgpu.mbarrier.arrive %[[BARS]][%[[CTEMPTY]]]
// CHECK-NOT: arith.addi %{{.*}}, %c3 :
// CHECK: fa.finalize
func.func @float8(%q: memref<?x?x?x128xf8E4M3FN>, %k: memref<?x?x?x128xf8E4M3FN>,
                  %v: memref<?x?x?x128xf8E4M3FN>, %o: memref<?x?x?x128xbf16>,
                  %lse: memref<?x?x?xf32>, %qd: memref<?x?xf32>,
                  %kd: memref<?x?xf32>, %vd: memref<?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse descales(%qd, %kd, %vd) {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf8E4M3FN>, memref<?x?x?x128xf8E4M3FN>, memref<?x?x?x128xf8E4M3FN>
    into memref<?x?x?x128xbf16>, memref<?x?x?xf32>
    descales memref<?x?xf32>, memref<?x?xf32>, memref<?x?xf32>
  return
}

// RUN: fa-opt %s --fa-tile-pipeline="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 producer-transposes-value=0" --fa-warp-specialize="persistent=false" --cse | FileCheck %s --check-prefix=CONSUMERS
// Without the producer's copy (fa-place-wgmma's producer-transposes-value
// = 0) each consumer warpgroup keeps its own transposed copy: the usual 9
// barriers, no fa.copy_tile.
// CONSUMERS: num_barriers = 9
// CONSUMERS-NOT: fa.copy_tile
// CONSUMERS: nvvm.setmaxregister  increase 240
// CONSUMERS: fa.convert_layout %{{.*}} {fa.shared_offset = 81920 : i64} : tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>> -> tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
