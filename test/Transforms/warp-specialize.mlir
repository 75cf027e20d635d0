// RUN: fa-opt %s --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-wgmma="num-warps=4 stages=2" --fa-warp-specialize="persistent=false" --cse | FileCheck %s

// The Hopper schedule: D = 128, one consumer warpgroup (64 query rows),
// B_c = 64, a ring of 2 K/V slots, one producer warpgroup.
// CHECK-LABEL: func.func @attention
// The tensor maps of Q, K, V become the first parameters.
// CHECK-SAME: (%[[QMAP:.*]]: !llvm.ptr, %[[KMAP:.*]]: !llvm.ptr, %[[VMAP:.*]]: !llvm.ptr, %{{.*}}: memref<?x?x?x128xf16>
// CHECK: fa.grid
// Prologue (all threads): the shared base aligned to the 1024-byte swizzle
// atom, and 9 barriers: q_full (0), k_full[2] (1, 2), v_full[2] (3, 4),
// k_empty[2] (5, 6), v_empty[2] (7, 8). Full barriers wait for one arrival
// (the producer's expect_tx) plus the bytes; empty barriers for the 128
// consumer threads.
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[PAD:.*]] = arith.remui %{{.*}}, %c1024
// CHECK: %[[BARS:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 9>
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c0], %c1
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c4], %c1
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c5], %c128
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c8], %c128
// CHECK: nvvm.fence.mbarrier.init
// CHECK-NEXT: gpu.barrier
// Roles: threads 128.. are the producer warpgroup.
// CHECK: %[[ISPRODUCER:.*]] = arith.cmpi uge, %[[TID]], %c128
// CHECK: scf.if %[[ISPRODUCER]] {
// Producer: gives registers back; its first thread issues every copy.
// CHECK-NEXT: nvvm.setmaxregister decrease 24
// CHECK: scf.if
// Q: announce 64 x 128 x 2 bytes on q_full, then one TMA box per 64-column
// block of the swizzled tile: coordinates (column, row, head, batch).
// CHECK: %[[QDESC:.*]] = builtin.unrealized_conversion_cast %[[QMAP]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%c0], %c16384
// CHECK: nvgpu.tma.async.load %[[QDESC]][%c0, %{{.*}}, %{{.*}}, %{{.*}}], %[[BARS]][%c0] to %{{.*}} : {{.*}} -> memref<1x1x64x64xf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.tma.async.load %[[QDESC]][%c64, {{.*}}], %[[BARS]][%c0]
// K/V: for tile n of the loop, slot s = n % 2. Before each copy, wait
// until the consumers released the slot's previous K (V): k_empty[s]
// (v_empty[s]) with the parity of round n / 2 flipped (a fresh barrier
// passes parity 1); then K into k_full[s], V into v_full[s].
// CHECK: scf.for %[[J:.*]] = %[[BEGIN:.*]] to %{{.*}} step %c1 {
// CHECK: %[[ROUND:.*]] = arith.trunci %{{.*}} : i32 to i1
// CHECK: %[[SLOT:.*]] = arith.remui %{{.*}}, %c2
// CHECK: %[[FREED:.*]] = arith.xori %[[ROUND]], %true
// CHECK: %[[KEMPTY:.*]] = arith.addi %[[SLOT]], %c5
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[KEMPTY]]], %[[FREED]]
// CHECK: %[[KFULL:.*]] = arith.addi %[[SLOT]], %c1
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%[[KFULL]]], %c16384
// CHECK: nvgpu.tma.async.load {{.*}}, %[[BARS]][%[[KFULL]]]
// CHECK: nvgpu.tma.async.load {{.*}}, %[[BARS]][%[[KFULL]]]
// CHECK: %[[VEMPTY:.*]] = arith.addi %[[SLOT]], %c7
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[VEMPTY]]], %[[FREED]]
// CHECK: %[[VFULL:.*]] = arith.addi %[[SLOT]], %c3
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%[[VFULL]]], %c16384
// CHECK: nvgpu.tma.async.load {{.*}}, %[[BARS]][%[[VFULL]]]
// CHECK: } else {
// Consumers: take the registers, wait for Q; in each iteration wait for
// the slot's K just before Q K^T and release it right after, wait for V
// just before P V and release it right after.
// CHECK-NEXT: nvvm.setmaxregister increase 240
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%c0], %false
// CHECK: %[[Q:.*]] = builtin.unrealized_conversion_cast %{{.*}} : memref<2x64x64xf16, #gpu.address_space<workgroup>> to tensor<64x128xf16, #fa.swizzled_shared<bytes = 128>>
// CHECK: scf.for
// CHECK: %[[CROUND:.*]] = arith.trunci %{{.*}} : i32 to i1
// CHECK: %[[CSLOT:.*]] = arith.remui %{{.*}}, %c2
// CHECK: %[[CKFULL:.*]] = arith.addi %[[CSLOT]], %c1
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[CKFULL]]], %[[CROUND]]
// CHECK: %[[K:.*]] = builtin.unrealized_conversion_cast
// CHECK-NEXT: fa.tile_matmul %[[Q]], %[[K]] {transpose_rhs}
// CHECK: %[[CKEMPTY:.*]] = arith.addi %[[CSLOT]], %c5
// CHECK-NEXT: nvgpu.mbarrier.arrive %[[BARS]][%[[CKEMPTY]]]
// CHECK: fa.online_softmax
// CHECK: %[[CVFULL:.*]] = arith.addi %[[CSLOT]], %c3
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[CVFULL]]], %[[CROUND]]
// CHECK: %[[V:.*]] = builtin.unrealized_conversion_cast
// CHECK-NEXT: fa.tile_matmul %{{.*}}, %[[V]] acc
// CHECK: %[[CVEMPTY:.*]] = arith.addi %[[CSLOT]], %c7
// CHECK-NEXT: nvgpu.mbarrier.arrive %[[BARS]][%[[CVEMPTY]]]
// CHECK-NEXT: scf.yield
// The epilogue stays with the consumers.
// CHECK: fa.finalize
// CHECK: fa.store_tile
// The launch gains the producer warpgroup (shared memory as placed:
// 16384 + 4 x 16384 + 1024 bytes); the runtime gets the maps.
// CHECK: fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 82944, stages = 2, registers = {{[0-9]+}}, producer_warps = 4>
// CHECK-SAME: fa.tensor_maps = [{arg = 0 : i64, box_cols = 64 : i64, box_rows = 64 : i64, tensor = "q"}, {arg = 1 : i64, box_cols = 64 : i64, box_rows = 64 : i64, tensor = "k"}, {arg = 2 : i64, box_cols = 64 : i64, box_rows = 64 : i64, tensor = "v"}]
func.func @attention(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                     %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}
