// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 transposed-scores=1" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 transposed-scores=1" --fa-wgmma-pipeline | FileCheck %s --check-prefix=PIPE
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 transposed-scores=1" --fa-wgmma-pipeline --fa-warp-specialize --fa-tma-reduce --fa-prefetch-row-values --fa-pingpong --fa-place-simt="num-warps=8" -o %t.mlir
// RUN: fa-compile %t.mlir --strategy=wgmma --arch=sm_90a --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=LOADS < %t.ptx

// Transposed scores (FlashAttention-3's SdP_swapAB): the dkdv program
// computes S^T = K Q^T and dP^T = V dO^T, so that each warpgroup's
// accumulator rows are its 64 keys, and the tile ops read them as S and dP
// through fa.transpose: the same registers, as #fa.mma<transposed> tiles.
// CHECK-LABEL: func @backward_d64
// CHECK: program = "delta"
// 1. LSE and D in the transposed row slots (16 a thread; none ahead).
// CHECK: %[[LSE:.*]] = fa.load_tile {{[^{]*}} -> tensor<64xf32, #fa.mma<warps = 8, transposed = true>>
// CHECK-NEXT: %[[D:.*]] = fa.load_tile {{[^{]*}} -> tensor<64xf32, #fa.mma<warps = 8, transposed = true>>
// 2. S^T = K Q^T: K (resident) is the left operand, each warpgroup its 64
// keys; read as S for the mask and P = exp(S - LSE).
// CHECK: %[[ST:.*]] = fa.tile_matmul %[[K:.*]], %[[Q:.*]] {transpose_rhs} : tensor<128x64xf16, #fa.swizzled_shared<bytes = 128>>, tensor<64x64xf16, #fa.swizzled_shared<bytes = 128>> -> tensor<128x64xf32, #fa.mma<warps = 8>>
// CHECK-NEXT: %[[S:.*]] = fa.transpose %[[ST]] : tensor<128x64xf32, #fa.mma<warps = 8>> -> tensor<64x128xf32, #fa.mma<warps = 8, transposed = true>>
// CHECK-NEXT: %[[SM:.*]] = fa.mask %[[S]]{{.*}} : tensor<64x128xf32, #fa.mma<warps = 8, transposed = true>>
// CHECK-NEXT: %[[P:.*]] = fa.recompute_probs %[[SM]], %[[LSE]]
// CHECK-NEXT: %[[P16:.*]] = arith.truncf %[[P]] : tensor<64x128xf32, #fa.mma<warps = 8, transposed = true>> to tensor<64x128xf16, #fa.mma<warps = 8, transposed = true>>
// 3. dV += P^T dO: P^T is P's twin, A fragments in registers (no staging,
// no transposed read).
// CHECK-NEXT: %[[PT:.*]] = fa.transpose %[[P16]] : tensor<64x128xf16, #fa.mma<warps = 8, transposed = true>> -> tensor<128x64xf16, #fa.mma<warps = 8>>
// CHECK-NEXT: %[[PA:.*]] = fa.convert_layout %[[PT]] : tensor<128x64xf16, #fa.mma<warps = 8>> -> tensor<128x64xf16, #fa.mma_operand<warps = 8>>
// CHECK-NEXT: fa.tile_matmul %[[PA]], %[[DO:.*]] acc(%{{.*}}) : tensor<128x64xf16, #fa.mma_operand<warps = 8>>
// 4. dP^T = V dO^T, read as dP; dS = P (dP - D).
// CHECK-NEXT: %[[DPT:.*]] = fa.tile_matmul %[[V:.*]], %[[DO]] {transpose_rhs}
// CHECK-NEXT: %[[DP:.*]] = fa.transpose %[[DPT]]
// CHECK-NEXT: %[[DS:.*]] = fa.softmax_grad %[[P]], %[[DP]], %[[D]]
// CHECK-NEXT: %[[DS16:.*]] = arith.truncf %[[DS]]
// 5. dS^T: A fragments for dK += dS^T Q, and staged (the only staged
// tile) for dQ = dS K, which reads it transposed.
// CHECK-NEXT: %[[DST:.*]] = fa.transpose %[[DS16]]
// CHECK-NEXT: %[[DSA:.*]] = fa.convert_layout %[[DST]] : tensor<128x64xf16, #fa.mma<warps = 8>> -> tensor<128x64xf16, #fa.mma_operand<warps = 8>>
// CHECK-NEXT: %[[DSS:.*]] = fa.convert_layout %[[DST]] {fa.shared_offset = {{[0-9]+}} : i64} : tensor<128x64xf16, #fa.mma<warps = 8>> -> tensor<128x64xf16, #fa.swizzled_shared<bytes = 128>>
// CHECK-NEXT: fa.tile_matmul %[[DSA]], %[[Q]] acc(%{{.*}}) : tensor<128x64xf16, #fa.mma_operand<warps = 8>>
// CHECK-NEXT: %[[DQ:.*]] = fa.tile_matmul %[[DSS]], %[[K]] {transpose_lhs} : {{.*}} -> tensor<64x64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// CHECK-NOT: fa.convert_layout %[[P16]]
//
// fa-wgmma-pipeline finds the five products through the transposes: S^T
// and dP^T start together, dQ before dK.
// PIPE-LABEL: func @backward_d64
// PIPE: %[[ST:.*]] = fa.tile_matmul {{.*}} {async, transpose_rhs}
// PIPE-NEXT: %[[DPT:.*]] = fa.tile_matmul {{.*}} {async, transpose_rhs}
// PIPE-NEXT: %[[STW:.*]] = fa.async_wait %[[ST]] {pending = 1 : i64}
// PIPE-NEXT: fa.transpose %[[STW]]
// PIPE: fa.tile_matmul {{.*}} acc(%{{.*}}) {async}
// PIPE-NEXT: %[[DPW:.*]] = fa.async_wait %[[DPT]] {pending = 1 : i64}
// PIPE-NEXT: fa.transpose %[[DPW]]
// PIPE: %[[DQ:.*]] = fa.tile_matmul {{.*}} {async, transpose_lhs}
// PIPE-NEXT: fa.tile_matmul {{.*}} acc(%{{.*}}) {async}
// PIPE-NEXT: fa.async_wait %[[DQ]] {pending = 1 : i64}
//
// The kernel: of each warpgroup's 24 wgmma per iteration, dV's and dK's 8
// read A from registers ({a0, a1, a2, a3}); S^T, dP^T and dQ read both
// operands through descriptors.
// PTX-LABEL: .entry backward_d64_dkdv
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{{.*}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 0, 0;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{{.*}}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, p, 1, 1, 1;
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {{{.*}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 1, 1;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{{.*}}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, p, 1, 1, 1;
// PTX-NOT: wgmma.mma_async
// PTX: .entry
//
// A thread's 16 LSE (and D) values: where the query tile lies wholly
// before the end of the rows, plain loads at immediate offsets from one
// address (queries 2t, 2t + 1, 2t + 8, ..., 2t + 57: +0 .. +228 bytes);
// the tail tile tests each row.
// LOADS-LABEL: .entry backward_d64_dkdv
// LOADS: ld.global.b32 {{%r[0-9]+}}, [[[ADDR:%rd[0-9]+]]+4];
// LOADS-NEXT: ld.global.b32 {{%r[0-9]+}}, [[[ADDR]]+32];
// LOADS-COUNT-12: ld.global.b32 {{%r[0-9]+}}, [[[ADDR]]+{{[0-9]+}}];
// LOADS-NEXT: ld.global.b32 {{%r[0-9]+}}, [[[ADDR]]+228];
// LOADS: .entry
func.func @backward_d64(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                        %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>,
                        %dq: memref<?x?x?x64xf16>, %dk: memref<?x?x?x64xf16>, %dv: memref<?x?x?x64xf16>,
                        %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>,
      memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
    into memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
  return
}

