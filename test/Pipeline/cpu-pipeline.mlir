// RUN: fa-opt %s --fa-tile-pipeline="block-m=8 block-n=32" --fa-cpu-loops | FileCheck %s --check-prefix=LOOPS
// RUN: fa-opt %s --fa-cpu-pipeline="block-m=8 block-n=32" | FileCheck %s --check-prefix=LLVM

// The lecture's tiles (B_r = 8, B_c = 32) for D = 128, causal, down to plain
// loops: the grid loop nest, the K/V loop carrying the online-softmax state
// in buffers, exp for P and the correction, log for LSE.
// LOOPS-LABEL: func @attention
// LOOPS-NOT: fa.
// LOOPS-NOT: tensor<
// LOOPS-NOT: linalg.
// LOOPS: scf.for
// LOOPS: scf.for
// LOOPS: scf.for
// LOOPS: scf.for {{.*}} iter_args({{.*}}) -> (memref<8xf32>, memref<8xf32>, memref<8x128xf32>
// LOOPS: math.exp
// LOOPS: math.exp
// LOOPS: scf.yield
// LOOPS: math.log
// LOOPS: memref.store {{.*}} : memref<?x?x?x128xf32>
// LOOPS: memref.store {{.*}} : memref<?x?x?xf32>

// LLVM-LABEL: llvm.func @attention
// LLVM-NOT: fa.
// LLVM-NOT: scf.
// LLVM-NOT: memref.
// LLVM: llvm.intr.exp
// LLVM: llvm.intr.log
// LLVM: llvm.return
func.func @attention(%q: memref<?x?x?x128xf32>, %k: memref<?x?x?x128xf32>,
                     %v: memref<?x?x?x128xf32>, %o: memref<?x?x?x128xf32>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x128xf32>, memref<?x?x?x128xf32>, memref<?x?x?x128xf32>
    into memref<?x?x?x128xf32>, memref<?x?x?xf32>
  return
}
