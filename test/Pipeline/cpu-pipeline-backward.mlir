// RUN: fa-opt %s --fa-tile-pipeline="block-m=16 block-n=32" --fa-cpu-loops | FileCheck %s --check-prefix=LOOPS
// RUN: fa-opt %s --fa-cpu-pipeline="block-m=16 block-n=32" | FileCheck %s --check-prefix=LLVM

// The backward (D = 64, causal, GQA) down to plain loops: three grid loop
// nests in order; in the main one bufferization keeps dK and dV in buffers
// that the head and query tile loops update in place, and P is recomputed
// with exp (no log: the LSE is an input).
// LOOPS-LABEL: func @backward
// LOOPS-NOT: fa.
// LOOPS-NOT: tensor<
// LOOPS-NOT: linalg.
// Preprocessing: D into delta.
// LOOPS: scf.for
// LOOPS: memref.store {{.*}} : memref<?x8x?xf32>
// Main grid: the K/V tile, the dK and dV buffers, then the query heads and
// tiles.
// LOOPS: memref.alloc() {{.*}} : memref<32x64xf32>
// LOOPS: scf.for
// LOOPS: scf.for
// LOOPS: math.exp
// dQ contributions added into the accumulator.
// LOOPS: memref.load {{.*}} : memref<?x8x?x64xf32>
// LOOPS: arith.addf
// LOOPS: memref.store {{.*}} : memref<?x8x?x64xf32>
// dK and dV stored once per program.
// LOOPS: memref.store {{.*}} : memref<?x2x?x64xf32>
// LOOPS: memref.store {{.*}} : memref<?x2x?x64xf32>
// Postprocessing: dQ from the accumulator.
// LOOPS: memref.load {{.*}} : memref<?x8x?x64xf32>
// LOOPS-NOT: math.log

// LLVM-LABEL: llvm.func @backward
// LLVM-NOT: fa.
// LLVM-NOT: scf.
// LLVM-NOT: memref.
// LLVM: llvm.intr.exp
// LLVM: llvm.return
func.func @backward(%q: memref<?x8x?x64xf32>, %k: memref<?x2x?x64xf32>, %v: memref<?x2x?x64xf32>,
                    %o: memref<?x8x?x64xf32>, %do: memref<?x8x?x64xf32>, %lse: memref<?x8x?xf32>,
                    %dq: memref<?x8x?x64xf32>, %dk: memref<?x2x?x64xf32>, %dv: memref<?x2x?x64xf32>,
                    %delta: memref<?x8x?xf32>, %accum: memref<?x8x?x64xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x8x?x64xf32>, memref<?x2x?x64xf32>, memref<?x2x?x64xf32>,
      memref<?x8x?x64xf32>, memref<?x8x?x64xf32>, memref<?x8x?xf32>
    into memref<?x8x?x64xf32>, memref<?x2x?x64xf32>, memref<?x2x?x64xf32>
    workspace memref<?x8x?xf32>, memref<?x8x?x64xf32>
  return
}
