// RUN: fa-opt %s --fa-tile-pipeline="block-m=64 block-n=32" --fa-place-mma="num-warps=4 stages=2" --fa-convert-placed-to-gpu | FileCheck %s
// RUN: fa-opt %s --fa-tile-pipeline="block-m=64 block-n=32" --fa-place-mma="num-warps=4 stages=1" --fa-convert-placed-to-gpu | FileCheck %s --check-prefix=ONESTAGE

// The mma strategy's kernel: D = 64, B_r = 64 (4 warps x 16 rows), B_c = 32.
// CHECK-LABEL: gpu.func @attention
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// Q: 64 rows x 64 columns in 16-byte chunks, 4 copies per thread, rows past
// the sequence zero-filled (0 source elements); then wait for all and sync.
// CHECK: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} {bypassL1}
// CHECK: %[[QG:.*]] = nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_wait %[[QG]] {numGroups = 0 : i32}
// CHECK: gpu.barrier
// Q's A fragments, once: one ldmatrix.x4 per 16 x 16 block (4 along D).
// CHECK-COUNT-4: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// Prologue of the 2-stage pipeline: K_0 and V_0 into slot 0, if the loop runs.
// CHECK: scf.if
// CHECK: nvgpu.device_async_copy
// CHECK: %[[PRO:.*]] = nvgpu.device_async_create_group
// CHECK: scf.for
// Iteration j: tile j has landed (0 newer groups pending); after the
// barrier, tile j + 1 is copied into the other slot.
// CHECK: nvgpu.device_async_wait %[[PRO]] {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_create_group
// S = Q K^T: K rows are B fragments as stored (ldmatrix, no transpose),
// two n8 blocks per ldmatrix.x4; 4 k16 steps x 2 pairs x 2 blocks = 16 mma.
// CHECK-COUNT-16: nvvm.mma.sync {{.*}} {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32)
// Tiles that cross the end of the keys (or the diagonal) are masked.
// CHECK: scf.if
// CHECK: arith.select
// Row max over the quad: shuffles by 1 and 2.
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32
// CHECK: math.exp2
// P V: V rows are k, so the B fragments come from ldmatrix.trans;
// 2 k16 steps x 4 pairs x 2 blocks = 16 mma.
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK-COUNT-16: nvvm.mma.sync
// CHECK: scf.yield
// O: a lane holds element pair t (its quad index) of each n8 block of a
// row. Each run of 4 blocks (32 columns) is transposed across the quad:
// lane masks 2 then 1, two 32-bit shuffles each, so that lane t ends with
// the 8 elements of block t. Then every lane stores 16 bytes (a quad 64
// adjacent bytes), rows past the sequence skipped: D = 64 is 2 runs.
// CHECK: llvm.bitcast {{.*}} : vector<2xf16> to i32
// CHECK-COUNT-2: gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}} : i32
// CHECK-COUNT-2: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}} : i32
// CHECK: vector.bitcast {{.*}} : vector<4xi32> to vector<8xf16>
// CHECK-COUNT-4: gpu.shuffle  xor
// CHECK: vector.bitcast {{.*}} : vector<4xi32> to vector<8xf16>
// CHECK: scf.if
// CHECK-COUNT-2: vector.store {{.*}} {alignment = 16 : i64} : memref<?x?x?x64xf16>, vector<8xf16>
// CHECK-NOT: vector.store {{.*}} vector<2xf16>
// CHECK: gpu.return
// ONESTAGE-LABEL: gpu.func @attention
// ONESTAGE: scf.for
// One stage: copy, wait for everything, then compute.
// ONESTAGE: gpu.barrier
// ONESTAGE: nvgpu.device_async_copy
// ONESTAGE: %[[G:.*]] = nvgpu.device_async_create_group
// ONESTAGE-NEXT: nvgpu.device_async_wait %[[G]] {numGroups = 0 : i32}
// ONESTAGE-NEXT: gpu.barrier
func.func @attention(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                     %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}
