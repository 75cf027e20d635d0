// RUN: fa-opt %s --fa-tile-backward="block-m=32 block-n=32" --fa-place-pipeline="strategy=mma num-warps=2 stages=2" --fa-gpu-kernel | FileCheck %s
// RUN: fa-opt %s --fa-tile-backward="block-m=32 block-n=32" --fa-place-pipeline="strategy=mma num-warps=2 stages=2 arch=sm_80" --fa-gpu-kernel="arch=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: not fa-opt %s --fa-tile-backward="block-m=32 block-n=32" --fa-place-pipeline="strategy=mma num-warps=2 stages=2" --fa-gpu-kernel="arch=sm_70" 2>&1 | FileCheck %s --check-prefix=ARCH
// ARCH: error: unsupported arch 'sm_70'; expected one of sm_80, sm_86, sm_89, sm_90, sm_90a

// The backward's dkdv kernel on tensor cores: D = 32, B_r = B_c = 32, two
// warps (16 query rows of S each, 16 key rows of dK/dV each).
// The delta and dq programs are simt kernels.
// CHECK-LABEL: gpu.func @backward_delta
// CHECK-LABEL: gpu.func @backward_dkdv
// CHECK-SAME: known_block_size = array<i32: 64, 1, 1>
// K_j and V_j: copied once (16-byte cp.async), waited for, published.
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_wait
// CHECK: gpu.barrier
// The loop over the group's query heads ...
// CHECK: scf.for
// ... starts each run of the Q/dO ring after the previous run's readers
// are done (barrier), then copies the first query tile.
// CHECK-NEXT: arith.addi
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: scf.for
// Each iteration reads the thread id from an asm statement LLVM cannot
// hoist: the fragment addresses of K and V (which stay put) remain
// base + immediate inside the loop instead of registers of their own.
// CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}} "mov.u32 $0, %tid.x;", "=r"
// LSE_i and D_i: two rows per lane (g and g + 8), from global memory.
// CHECK: memref.load %arg5
// CHECK: memref.load %arg5
// CHECK: memref.load %arg9
// CHECK: memref.load %arg9
// S = Q K^T: Q's A fragments and K's B fragments read per k-step (ldmatrix).
// CHECK: nvgpu.ldmatrix %[[QBUF:[a-z0-9_]+]][{{.*}}] {numTiles = 4 : i32, transpose = false}
// CHECK: nvgpu.ldmatrix %[[KBUF:[a-z0-9_]+]][{{.*}}] {numTiles = 4 : i32, transpose = false}
// CHECK: nvvm.mma.sync
// P = exp2(s * scale * log2 e - LSE * log2 e) (masked where the tile
// crosses the diagonal or the key end).
// CHECK: math.exp2
// P's rounding residual, lo = round(P - hi), into its own tile: each lane
// stores its 32-bit pairs with no barrier (only the same lane reads them) ...
// CHECK: arith.subf {{.*}} : vector<16xf32>
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-8: vector.store %{{.*}}, %[[LOBUF:[a-z0-9_]+]][{{.*}}] {alignment = 4 : i64} : memref<32x40xf16, #gpu.address_space<workgroup>>, vector<2xf16>
// ... then hi = round(P) staged ([32, 32 + 8]) for the other warps: a
// barrier, 32-bit pairs, a barrier.
// CHECK-NOT: vector.store
// CHECK: gpu.barrier
// CHECK-COUNT-8: vector.store %{{.*}}, %[[PBUF:[a-z0-9_]+]][{{.*}}] {alignment = 4 : i64} : memref<32x40xf16, #gpu.address_space<workgroup>>, vector<2xf16>
// CHECK-NEXT: gpu.barrier
// dV += P^T dO: A fragments of P^T by ldmatrix.trans of P, B fragments of
// dO ([k][n]) by ldmatrix.trans.
// CHECK: nvgpu.ldmatrix %[[PBUF]][{{.*}}] {numTiles = 4 : i32, transpose = true}
// CHECK: nvgpu.ldmatrix %[[DOBUF:[a-z0-9_]+]][{{.*}}] {numTiles = 4 : i32, transpose = true}
// CHECK: nvvm.mma.sync
// dP = dO V^T: dO's A fragments, V's B fragments.
// CHECK: nvgpu.ldmatrix %[[DOBUF]][{{.*}}] {numTiles = 4 : i32, transpose = false}
// CHECK: nvgpu.ldmatrix %[[VBUF:[a-z0-9_]+]][{{.*}}] {numTiles = 4 : i32, transpose = false}
// dS: each lane reads its hi and lo pairs back (P = hi + lo), then dS is
// staged in hi's buffer.
// CHECK-COUNT-8: vector.load %[[PBUF]]
// CHECK-COUNT-8: vector.load %[[LOBUF]]
// CHECK: arith.addf {{.*}} : vector<16xf32>
// CHECK: gpu.barrier
// CHECK-COUNT-8: vector.store %{{.*}}, %[[PBUF]][{{.*}}] {alignment = 4 : i64} : memref<32x40xf16, #gpu.address_space<workgroup>>, vector<2xf16>
// CHECK-NEXT: gpu.barrier
// dQ_i = dS K_j first (dS renamed into A fragments; K's B fragments by
// ldmatrix.trans), added to the f32 accumulator atomically as each pair of
// n-blocks is done, valid rows only. On sm_90 a lane adds its two adjacent
// columns with one vector reduction when the accumulator's base, offset
// and strides keep every pair 8-byte aligned (checked once), else element
// by element ...
// CHECK: %{{.*}}, %[[OFFSET:.*]], %{{.*}}:4, %[[STRIDES:.*]]:4 = memref.extract_strided_metadata %arg10
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %arg10
// CHECK: arith.andi %{{.*}}, %c7{{(_[0-9]+)?}} : index
// CHECK: %[[GLOBAL:.*]] = llvm.addrspacecast %{{.*}} : !llvm.ptr to !llvm.ptr<1>
// CHECK: nvgpu.ldmatrix %[[KBUF]][{{.*}}] {numTiles = 4 : i32, transpose = true}
// CHECK: scf.if %[[ALIGNED:.*]] {
// CHECK: scf.if
// CHECK: %[[PAIR:.*]] = llvm.getelementptr %[[GLOBAL]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "red.global.add.v2.f32 [$0], {$1, $2};", "l,f,f" %[[PAIR]], %{{.*}}, %{{.*}} : (!llvm.ptr<1>, f32, f32) -> ()
// CHECK: } else {
// CHECK: scf.if
// CHECK: memref.atomic_rmw addf {{.*}}, %arg10
// Before sm_90 (no vector reductions): element by element only.
// SM80-LABEL: gpu.func @backward_dkdv
// SM80-NOT: red.global.add.v2.f32
// SM80: memref.atomic_rmw addf {{.*}}, %arg10
// SM80-NOT: red.global.add.v2.f32
// SM80-LABEL: gpu.func @backward_dq
// ... then dK += dS^T Q: ldmatrix.trans of dS and of Q.
// CHECK: nvgpu.ldmatrix %[[PBUF]][{{.*}}] {numTiles = 4 : i32, transpose = true}
// CHECK: nvgpu.ldmatrix %[[QBUF]][{{.*}}] {numTiles = 4 : i32, transpose = true}
// dK and dV leave in pairs once the loops are done.
// CHECK: vector.store {{.*}}, %arg7
// CHECK: vector.store {{.*}}, %arg8
// CHECK-LABEL: gpu.func @backward_dq
func.func @backward(%q: memref<?x?x?x32xf16>, %k: memref<?x?x?x32xf16>, %v: memref<?x?x?x32xf16>,
                    %o: memref<?x?x?x32xf16>, %do: memref<?x?x?x32xf16>, %lse: memref<?x?x?xf32>,
                    %dq: memref<?x?x?x32xf16>, %dk: memref<?x?x?x32xf16>, %dv: memref<?x?x?x32xf16>,
                    %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x32xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x32xf16>, memref<?x?x?x32xf16>, memref<?x?x?x32xf16>,
      memref<?x?x?x32xf16>, memref<?x?x?x32xf16>, memref<?x?x?xf32>
    into memref<?x?x?x32xf16>, memref<?x?x?x32xf16>, memref<?x?x?x32xf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x32xf32>
  return
}
