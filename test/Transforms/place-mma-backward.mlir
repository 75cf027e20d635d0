// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=64" --fa-place-mma="num-warps=4 stages=2" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=64" --fa-place-pipeline="strategy=mma num-warps=4 stages=2" | FileCheck %s --check-prefix=PIPE
// RUN: not fa-opt %s --fa-tile-backward="block-m=64 block-n=48" --fa-place-mma="num-warps=4 stages=2" 2>&1 | FileCheck %s --check-prefix=BLOCKN
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=128 block-n=128" --fa-place-mma="num-warps=8 stages=1" | FileCheck %s --check-prefix=GRID
// RUN: not fa-opt %s --fa-tile-backward="block-m=128 block-n=96" --fa-place-mma="num-warps=8 stages=1" 2>&1 | FileCheck %s --check-prefix=GRIDROWS

// The backward on tensor cores, D = 128, B_r = B_c = 64, 4 warps.
// CHECK-LABEL: func @backward_f16
// 1. The delta program has no matmul: fa-place-mma leaves it unplaced ...
// CHECK: fa.row_dot {{.*}} : tensor<64x128xf16> -> tensor<64xf32>
// CHECK: program = "delta"
// CHECK-NOT: fa.launch
// 2. The dkdv program: K_j and V_j in shared memory once, rows padded to
// 136 elements (17 chunks of 16 bytes: ldmatrix reads without bank
// conflicts) ...
// CHECK: fa.grid
// CHECK: fa.load_tile {{.*}} {fa.shared_offset = 0 : i64} {{.*}} -> tensor<64x128xf16, #fa.shared<pad = 8>>
// CHECK: fa.load_tile {{.*}} {fa.shared_offset = 17408 : i64} {{.*}} -> tensor<64x128xf16, #fa.shared<pad = 8>>
// ... dK and dV accumulate in fragments (each warp owns 16 of the 64 key
// rows).
// CHECK: arith.constant dense<0.000000e+00> : tensor<64x128xf32, #fa.mma<warps = 4>>
// CHECK: scf.for
// CHECK: scf.for
// LSE_i and D_i straight into the row slots of the accumulator layout,
// first (their global loads overlap the wait for the copies) ...
// CHECK: %[[LSE:.*]] = fa.load_tile {{.*}} -> tensor<64xf32, #fa.mma<warps = 4>>
// CHECK: %[[D:.*]] = fa.load_tile {{.*}} -> tensor<64xf32, #fa.mma<warps = 4>>
// ... Q_i and dO_i stream through rings of 2 slots (after K and V).
// CHECK: %[[Q:.*]] = fa.load_tile {{.*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 34816 : i64} {{.*}} -> tensor<64x128xf16, #fa.shared<pad = 8>>
// CHECK: %[[DO:.*]] = fa.load_tile {{.*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 69632 : i64} {{.*}} -> tensor<64x128xf16, #fa.shared<pad = 8>>
// S = Q K^T: both operands read from shared memory by the matmul (Q's A
// fragments a k-step at a time: a warp never holds all of Q).
// CHECK: fa.tile_matmul %[[Q]], %{{.*}} {transpose_rhs} : tensor<64x128xf16, #fa.shared<pad = 8>>, tensor<64x128xf16, #fa.shared<pad = 8>> -> tensor<64x64xf32, #fa.mma<warps = 4>>
// CHECK: %[[P:.*]] = fa.recompute_probs %{{.*}}, %[[LSE]]
// P rounded: hi = round(P). Its rounding residual, lo = round(P - hi), is
// staged first, in a tile of its own after the P/dS tile (with hi it gives
// dS an f32-accurate P) ...
// CHECK: %[[P16:.*]] = arith.truncf %[[P]]
// CHECK-NEXT: %[[HI:.*]] = arith.extf %[[P16]] : tensor<64x64xf16, #fa.mma<warps = 4>> to tensor<64x64xf32, #fa.mma<warps = 4>>
// CHECK-NEXT: %[[REST:.*]] = arith.subf %[[P]], %[[HI]] : tensor<64x64xf32, #fa.mma<warps = 4>>
// CHECK-NEXT: %[[LO:.*]] = arith.truncf %[[REST]] : tensor<64x64xf32, #fa.mma<warps = 4>> to tensor<64x64xf16, #fa.mma<warps = 4>>
// CHECK-NEXT: %[[LOS:.*]] = fa.convert_layout %[[LO]] {fa.shared_offset = 113664 : i64} : tensor<64x64xf16, #fa.mma<warps = 4>> -> tensor<64x64xf16, #fa.shared<pad = 8>>
// ... then hi is staged (rows of 64 + 8 elements): dV += P^T dO reads it
// transposed. dS goes to the same buffer later (its write waits for P's
// readers).
// CHECK-NEXT: %[[PS:.*]] = fa.convert_layout %[[P16]] {fa.shared_offset = 104448 : i64} : tensor<64x64xf16, #fa.mma<warps = 4>> -> tensor<64x64xf16, #fa.shared<pad = 8>>
// CHECK: fa.tile_matmul %[[PS]], %[[DO]] acc(%{{.*}}) {transpose_lhs} : tensor<64x64xf16, #fa.shared<pad = 8>>, tensor<64x128xf16, #fa.shared<pad = 8>> -> tensor<64x128xf32, #fa.mma<warps = 4>>
// dP = dO V^T.
// CHECK: %[[DP:.*]] = fa.tile_matmul %[[DO]], %{{.*}} {transpose_rhs}
// dS = P (dP - D) with P = hi + lo read back from the two staged tiles: no
// form of P stays in registers while dP accumulates.
// CHECK: %[[HR:.*]] = fa.convert_layout %[[PS]] : tensor<64x64xf16, #fa.shared<pad = 8>> -> tensor<64x64xf16, #fa.mma<warps = 4>>
// CHECK-NEXT: %[[HW:.*]] = arith.extf %[[HR]] : tensor<64x64xf16, #fa.mma<warps = 4>> to tensor<64x64xf32, #fa.mma<warps = 4>>
// CHECK-NEXT: %[[LR:.*]] = fa.convert_layout %[[LOS]] : tensor<64x64xf16, #fa.shared<pad = 8>> -> tensor<64x64xf16, #fa.mma<warps = 4>>
// CHECK-NEXT: %[[LW:.*]] = arith.extf %[[LR]]
// CHECK-NEXT: %[[PW:.*]] = arith.addf %[[HW]], %[[LW]] : tensor<64x64xf32, #fa.mma<warps = 4>>
// CHECK-NEXT: %[[DS:.*]] = fa.softmax_grad %[[PW]], %[[DP]], %[[D]]
// dS staged for dK += dS^T Q ...
// CHECK: %[[DS16:.*]] = arith.truncf %[[DS]]
// CHECK-NEXT: %[[DSS:.*]] = fa.convert_layout %[[DS16]] {fa.shared_offset = 104448 : i64}
// ... and first renamed into A fragments for dQ_i = dS K_j (so that its
// registers die before dK's product runs), added atomically.
// CHECK: %[[DSA:.*]] = fa.convert_layout %[[DS16]] : tensor<64x64xf16, #fa.mma<warps = 4>> -> tensor<64x64xf16, #fa.mma_operand<warps = 4>>
// CHECK: %[[DQ:.*]] = fa.tile_matmul %[[DSA]], %{{.*}} : {{.*}} -> tensor<64x128xf32, #fa.mma<warps = 4>>
// CHECK: fa.tile_matmul %[[DSS]], %[[Q]] acc(%{{.*}}) {transpose_lhs}
// CHECK: fa.accumulate_tile %[[DQ]]
// CHECK: fa.store_tile {{.*}} : tensor<64x128xf16, #fa.mma<warps = 4>>
// CHECK: fa.store_tile {{.*}} : tensor<64x128xf16, #fa.mma<warps = 4>>
// Launch: 128 threads; 2 x 17408 (K, V) + 4 x 17408 (rings) + 9216
// (P, then dS) + 9216 (P's residual) = 122880 bytes.
// CHECK: fa.launch = #fa.launch<strategy = mma, threads = 128, shared_bytes = 122880, stages = 2, registers = {{[0-9]+}}>, program = "dkdv"
// 3. dq: unplaced as well.
// CHECK: program = "dq"
// CHECK-NOT: fa.launch
//
// The place pipeline of the mma strategy gives the delta and dq programs to
// fa-place-simt.
// PIPE-LABEL: func @backward_f16
// PIPE: fa.launch = #fa.launch<strategy = simt, {{.*}}>, program = "delta"
// PIPE: fa.launch = #fa.launch<strategy = mma, {{.*}}>, program = "dkdv"
// PIPE: fa.launch = #fa.launch<strategy = simt, {{.*}}>, program = "dq"
//
// On 8 warps the warps form a 4 x 2 grid (#fa.mma warps_n = 2): each owns
// 32 rows and half the columns of every product (32 key rows x 64 head-dim
// columns of dK and dV; 32 query rows x 64 keys of S and dP), so each
// shared operand row is read by half as many warps as with 16-row slices
// of whole rows. dQ_i = dS K_j contracts over keys that two warps share:
// it reads dS from the staged tile instead of renaming registers.
// GRID-LABEL: func @backward_f16
// GRID: arith.constant dense<0.000000e+00> : tensor<128x128xf32, #fa.mma<warps = 8, warps_n = 2>>
// GRID: fa.load_tile {{.*}} -> tensor<128xf32, #fa.mma<warps = 8, warps_n = 2>>
// GRID: fa.tile_matmul {{.*}} {transpose_rhs} : {{.*}} -> tensor<128x128xf32, #fa.mma<warps = 8, warps_n = 2>>
// GRID: fa.softmax_grad
// GRID: %[[DS16:.*]] = arith.truncf
// GRID-NEXT: %[[DSS:.*]] = fa.convert_layout %[[DS16]] {fa.shared_offset = {{[0-9]+}} : i64} : tensor<128x128xf16, #fa.mma<warps = 8, warps_n = 2>> -> tensor<128x128xf16, #fa.shared<pad = 8>>
// GRID-NOT: fa.mma_operand
// GRID: %[[DQ:.*]] = fa.tile_matmul %[[DSS]], %{{.*}} : tensor<128x128xf16, #fa.shared<pad = 8>>, {{.*}} -> tensor<128x128xf32, #fa.mma<warps = 8, warps_n = 2>>
// GRID: fa.tile_matmul %[[DSS]], %{{.*}} acc(%{{.*}}) {transpose_lhs}
// GRID: fa.accumulate_tile %[[DQ]]
// GRID: fa.launch = #fa.launch<strategy = mma, threads = 256, {{.*}}>, program = "dkdv"
//
// The grid's 4 warps along the rows need key tiles in multiples of 64.
// GRIDROWS: error: 'fa.grid' op mma backward placement (block-m=128 block-n=96 head-dim=128 num-warps=8 stages=1): block-n 96 is not a multiple of 16 x the 4 warps along the rows = 64 (each warp owns whole m16 fragments of dK and dV)
//
// Each warp owns whole m16 fragments of dK and dV: 48 key rows cannot be
// split over 4 warps.
// BLOCKN: error: 'fa.grid' op mma backward placement (block-m=64 block-n=48 head-dim=128 num-warps=4 stages=2): block-n 48 is not a multiple of 16 x num-warps = 64 (each warp owns whole m16 fragments of dK and dV)
func.func @backward_f16(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>,
                        %o: memref<?x?x?x128xf16>, %do: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>,
                        %dq: memref<?x?x?x128xf16>, %dk: memref<?x?x?x128xf16>, %dv: memref<?x?x?x128xf16>,
                        %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x128xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>,
      memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
    into memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x128xf32>
  return
}
