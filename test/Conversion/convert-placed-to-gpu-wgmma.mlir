// RUN: fa-opt %s --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-wgmma="num-warps=4 stages=2" --fa-convert-placed-to-gpu | FileCheck %s

// The wgmma strategy's kernel: D = 64, B_r = 64 (one warpgroup), B_c = 64,
// 2 K/V tiles in flight.
// CHECK-LABEL: gpu.func @attention
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// The dynamic shared memory's base is aligned up to the 1024-byte swizzle
// atom: pad = (1024 - address % 1024) % 1024.
// CHECK: %[[BASE:.*]] = gpu.dynamic_shared_memory
// CHECK: %[[ADDR:.*]] = memref.extract_aligned_pointer_as_index %[[BASE]]
// CHECK: arith.remui %[[ADDR]], %c1024{{.*}} : index
// Q_i: 16-byte cp.async chunks into the 128-byte swizzle: chunk c of row r
// lands at chunk c ^ (r % 8) of block col / 64 ([1, 64, 64] for D = 64).
// CHECK: %[[SW:.*]] = arith.xori %{{.*}}, %{{.*}} : index
// CHECK: %[[COL:.*]] = arith.muli %[[SW]], %c8{{.*}} : index
// CHECK: nvgpu.device_async_copy %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %[[COL]]], 8, %{{.*}} {bypassL1} : memref<?x?x?x64xf16> to memref<1x64x64xf16, #gpu.address_space<workgroup>>
// wgmma reads shared memory through the async proxy: each thread fences
// its completed copies before the barrier that publishes them.
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// The K/V loop: wait for tile j (one newer group in flight), fence, barrier.
// CHECK: scf.for
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NEXT: nvvm.fence.proxy
// CHECK-NEXT: gpu.barrier
// S = Q K^T: 4 k16 steps of wgmma m64n64k16, both operands as descriptors.
// Per operand the low word is built once (start address / 16 in bits
// 0-13, LBO 1 in bits 16-29: 0x10000), each step adds its offset / 16 (32
// bytes: 2) and takes the constant high word (SBO 1024 / 16 = 64, 128-byte
// swizzle in bits 62-63: 0x4000004000000000); the first step ignores the
// accumulator (scale-d = 0).
// CHECK: %[[QLOW:.*]] = arith.ori %{{.*}}, %c65536_i32 : i32
// CHECK: %[[QWIDE:.*]] = arith.extui %[[QLOW]] : i32 to i64
// CHECK: %[[QDESC:.*]] = arith.ori %[[QWIDE]], %c4611686293305294848_i64 : i64
// CHECK: %[[QSTEP:.*]] = arith.addi %[[QLOW]], %c2_i32{{.*}} : i32
// CHECK: arith.extui %[[QSTEP]] : i32 to i64
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0, 0;{{.*}}"=f,{{.*}},0,1,2,{{.*}},l,l,r" {{.*}}%[[QDESC]]
// CHECK-COUNT-3: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0, 0;
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// The results pass an empty asm after the wait (pinned there).
// CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}} ""
// Softmax on the accumulator fragments: quad shuffles, exp2.
// CHECK: gpu.shuffle  xor
// CHECK: math.exp2
// O += P V: P's A fragments from registers (4 x b32), V as an MN-major
// descriptor (LBO = one 64-column block of 64 rows x 128 bytes = 8192:
// 512 << 16 in the low word; SBO 1024 in the high word), transposed B.
// CHECK: %[[VLOW:.*]] = arith.ori %{{.*}}, %c33554432_i32 : i32
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: %[[VWIDE:.*]] = arith.extui %[[VLOW]] : i32 to i64
// CHECK: arith.ori %[[VWIDE]], %c4611686293305294848_i64{{.*}} : i64
// CHECK: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, {${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}}, ${{[0-9]+}}, p, 1, 1, 1;{{.*}}"=f,{{.*}},r,r,r,r,l,r"
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
func.func @attention(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                     %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}
