// RUN: fa-opt %s --fa-tile-pipeline="block-m=16 block-n=32" --fa-place-pipeline="num-warps=4" --fa-gpu-kernel | FileCheck %s

// The backward's three programs become three kernels named after them, in
// order, each taking the function's parameters. In dkdv the dQ shares are
// atomic adds, ordered by the turn counters (deterministic): thread 0 spins
// on the counter (atomic or 0) and fences, the block waits at a barrier;
// after the adds a barrier, a fence and the counter set to turn + 1.
// CHECK: gpu.module @fa_kernels
// CHECK: gpu.func @backward_delta({{.*}}) kernel
// CHECK: gpu.shuffle xor
// CHECK: gpu.func @backward_dkdv({{.*}}) kernel
// CHECK: scf.while
// CHECK: memref.atomic_rmw ori
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: gpu.barrier
// CHECK: memref.atomic_rmw addf
// CHECK: gpu.barrier
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: memref.atomic_rmw assign
// CHECK: gpu.func @backward_dq({{.*}}) kernel
// CHECK-NOT: {{(= | )fa\.[a-z_]+ %}}
func.func @backward(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x32xf32>,
                    %o: memref<?x2x?x32xf32>, %do: memref<?x2x?x32xf32>, %lse: memref<?x2x?xf32>,
                    %dq: memref<?x2x?x32xf32>, %dk: memref<?x2x?x32xf32>, %dv: memref<?x2x?x32xf32>,
                    %delta: memref<?x2x?xf32>, %accum: memref<?x2x?x32xf32>, %order: memref<?x2x?xi32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum, %order
      {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
      memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    workspace memref<?x2x?xf32>, memref<?x2x?x32xf32>, memref<?x2x?xi32>
  return
}
