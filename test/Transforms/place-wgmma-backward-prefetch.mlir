// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 transposed-scores=0 staged-row-values=0" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-pipeline="strategy=wgmma num-warps=8 stages=2 transposed-scores=0 staged-row-values=0" | FileCheck %s --check-prefix=PIPE

// (The untransposed scores, S = Q K^T: transposed-scores=0. With transposed
// scores no row value goes ahead: place-wgmma-backward-transposed.mlir.
// The row values in registers: staged-row-values=0; by default they come
// through shared memory, place-wgmma-backward-staged-rows.mlir.)

// The resource model asks for LSE and D one query tile ahead where the
// consumers have registers to spare (wgmma::prefetchedRowValues): at head
// dim 64 the placement marks both loads fa.prefetch ...
// CHECK-LABEL: func @backward_d64
// CHECK: fa.load_tile {{.*}} {fa.prefetch} : memref<?x?x?xf32{{.*}}> -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// CHECK-NEXT: fa.load_tile {{.*}} {fa.prefetch} : memref<?x?x?xf32{{.*}}> -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// ... and fa-prefetch-row-values, in the wgmma pipeline after the warp
// specialization, loads the first tile's before the query-tile loop and
// the next tile's at the top of each iteration (the mark dropped).
// PIPE-LABEL: func @backward_d64
// PIPE: %[[LSE0:.*]] = fa.load_tile {{[^{]*}} -> tensor<64xf32
// PIPE-NEXT: %[[D0:.*]] = fa.load_tile {{[^{]*}} -> tensor<64xf32
// PIPE-NEXT: scf.for {{.*}} iter_args({{.*}}, %{{.*}} = %[[LSE0]], %{{.*}} = %[[D0]])
// PIPE-NEXT: arith.addi
// PIPE-NEXT: arith.muli
// PIPE-NEXT: fa.load_tile {{[^{]*}} -> tensor<64xf32
// PIPE-NEXT: fa.load_tile {{[^{]*}} -> tensor<64xf32
// PIPE-NOT: fa.prefetch
func.func @backward_d64(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                        %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>,
                        %dq: memref<?x?x?x64xf16>, %dk: memref<?x?x?x64xf16>, %dv: memref<?x?x?x64xf16>,
                        %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>,
      memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
    into memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
  return
}

// -----

// At head dim 128 dK and dV take 128 of the consumers' 240 registers: two
// more tiles of row values made ptxas spill. In a program that masks only
// past the lengths, LSE alone (read by fa.recompute_probs right after
// S = Q K^T) fits and goes ahead; D (read by fa.softmax_grad after dP) does
// not.
// CHECK-LABEL: func @backward_d128
// CHECK: %[[LSE:.*]] = fa.load_tile %arg5{{[^{]*}} {fa.prefetch} : memref<?x?x?xf32> -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// CHECK-NEXT: %[[D:.*]] = fa.load_tile %arg9{{[^{]*}} : memref<?x?x?xf32> -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// CHECK-NOT: fa.prefetch
// CHECK: fa.recompute_probs %{{.*}}, %[[LSE]]
// CHECK: fa.softmax_grad %{{.*}}, %{{.*}}, %[[D]]
func.func @backward_d128(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>,
                         %o: memref<?x?x?x128xbf16>, %do: memref<?x?x?x128xbf16>, %lse: memref<?x?x?xf32>,
                         %dq: memref<?x?x?x128xbf16>, %dk: memref<?x?x?x128xbf16>, %dv: memref<?x?x?x128xbf16>,
                         %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x128xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>,
      memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?xf32>
    into memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x128xf32>
  return
}

// -----

// With the causal mask (as with a variant or the deterministic turns) the
// program needs those registers itself (ptxas spilled 72 bytes with LSE
// ahead): no row value goes ahead.
// CHECK-LABEL: func @backward_d128_causal
// CHECK: fa.load_tile {{[^{]*}} -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// CHECK-NEXT: fa.load_tile {{[^{]*}} -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// CHECK-NOT: fa.prefetch
func.func @backward_d128_causal(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>,
                                %o: memref<?x?x?x128xbf16>, %do: memref<?x?x?x128xbf16>, %lse: memref<?x?x?xf32>,
                                %dq: memref<?x?x?x128xbf16>, %dk: memref<?x?x?x128xbf16>, %dv: memref<?x?x?x128xbf16>,
                                %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x128xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.0883883461 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>,
      memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?xf32>
    into memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x128xf32>
  return
}
