// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2" | FileCheck %s
// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=64" --fa-place-wgmma="num-warps=4 stages=1" | FileCheck %s --check-prefix=ONE
// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-pipeline="strategy=wgmma num-warps=8 stages=2" | FileCheck %s --check-prefix=PIPE
// RUN: not fa-opt %s --fa-tile-backward="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2" 2>&1 | FileCheck %s --check-prefix=ROWS

// The backward's dkdv program on warpgroup MMA, D = 128, 64 query rows,
// 128 K/V rows, two warpgroups.
// CHECK-LABEL: func @backward_bf16
// 1. The delta program has no matmul: fa-place-wgmma leaves it unplaced.
// CHECK: program = "delta"
// CHECK-NOT: fa.launch
// 2. dkdv: K_j and V_j once, in the 128-byte swizzle wgmma's descriptors
// read ...
// CHECK: fa.load_tile {{.*}} {fa.shared_offset = 0 : i64} {{.*}} -> tensor<128x128xbf16, #fa.swizzled_shared<bytes = 128>>
// CHECK: fa.load_tile {{.*}} {fa.shared_offset = 32768 : i64} {{.*}} -> tensor<128x128xbf16, #fa.swizzled_shared<bytes = 128>>
// ... dK and dV have the warpgroups along their rows (64 K/V rows each) ...
// CHECK: arith.constant dense<0.000000e+00> : tensor<128x128xf32, #fa.mma<warps = 8>>
// CHECK: scf.for
// CHECK: scf.for
// ... LSE_i and D_i stream through rings of 2 slots of shared memory,
// after the stagings below (fa-warp-specialize's producer copies them with
// Q_i); each thread reads its rows of them at once, into the row slots of
// S's layout: one m64 of query rows whose 128 keys the two warpgroups
// split, warps numbered down the rows first (a warpgroup's 4 warps hold
// one wgmma accumulator) ...
// CHECK: %[[LSES:.*]] = fa.load_tile {{.*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 196608 : i64} : memref<?x?x?xf32> -> tensor<64xf32, #fa.shared<pad = 0>>
// CHECK-NEXT: %[[LSE:.*]] = fa.convert_layout %[[LSES]] : tensor<64xf32, #fa.shared<pad = 0>> -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// CHECK-NEXT: %[[DSH:.*]] = fa.load_tile {{.*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 197120 : i64} : memref<?x?x?xf32> -> tensor<64xf32, #fa.shared<pad = 0>>
// CHECK-NEXT: %[[D:.*]] = fa.convert_layout %[[DSH]] : tensor<64xf32, #fa.shared<pad = 0>> -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// ... Q_i and dO_i through rings of 2 swizzled slots.
// CHECK: %[[Q:.*]] = fa.load_tile {{.*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 65536 : i64} {{.*}} -> tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>
// CHECK: %[[DO:.*]] = fa.load_tile {{.*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 98304 : i64} {{.*}} -> tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>
// S = Q K^T from shared memory on both sides.
// CHECK: fa.tile_matmul %[[Q]], %{{.*}} {transpose_rhs} : {{.*}} -> tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// CHECK: %[[P:.*]] = fa.recompute_probs %{{.*}}, %[[LSE]]
// P, rounded, is staged in swizzled shared memory right after it is
// computed; dV += P^T dO reads it transposed from there.
// CHECK: %[[P16:.*]] = arith.truncf %[[P]]
// CHECK-NEXT: %[[PS:.*]] = fa.convert_layout %[[P16]] {fa.shared_offset = 131072 : i64} : tensor<64x128xbf16, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>> -> tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>
// CHECK: fa.tile_matmul %[[PS]], %[[DO]] acc(%{{.*}}) {transpose_lhs} : {{.*}} -> tensor<128x128xf32, #fa.mma<warps = 8>>
// dS = P (dP - D) with P in f32; dS staged in a buffer of its own (its
// write waits only for dS's previous readers); dK += dS^T Q and dQ = dS K
// both read the staged tile.
// CHECK: %[[DP:.*]] = fa.tile_matmul %[[DO]], %{{.*}} {transpose_rhs}
// CHECK: %[[DS:.*]] = fa.softmax_grad %[[P]], %[[DP]], %[[D]]
// CHECK: %[[DS16:.*]] = arith.truncf %[[DS]]
// CHECK-NEXT: %[[DSS:.*]] = fa.convert_layout %[[DS16]] {fa.shared_offset = 147456 : i64}
// CHECK: fa.tile_matmul %[[DSS]], %[[Q]] acc(%{{.*}}) {transpose_lhs} : {{.*}} -> tensor<128x128xf32, #fa.mma<warps = 8>>
// CHECK: %[[DQ:.*]] = fa.tile_matmul %[[DSS]], %{{.*}} : {{.*}} -> tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// dQ's f32 part is staged too (128-byte swizzle: boxes of 32 columns), for
// the TMA engine to add to the accumulator (fa-tma-reduce).
// CHECK-NEXT: %[[DQS:.*]] = fa.convert_layout %[[DQ]] {fa.shared_offset = 163840 : i64} : tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>> -> tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
// CHECK-NEXT: fa.accumulate_tile %[[DQS]]
// The shared bytes: the swizzle's 1024-byte slack after the row values.
// CHECK: fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 198656, stages = 2, registers = {{[0-9]+}}>, program = "dkdv"
// 3. The dq program: unplaced too.
// CHECK: program = "dq"
// CHECK-NOT: fa.launch

// One warpgroup: both kinds of tile have the same layout.
// ONE: tensor<64x128xf32, #fa.mma<warps = 4>>
// ONE-NOT: rows_first
// ONE: fa.launch = #fa.launch<strategy = wgmma, threads = 128

// The strategy's place pipeline places the delta and dq programs on simt.
// PIPE: #fa.launch<strategy = simt
// PIPE: #fa.launch<strategy = wgmma
// PIPE: #fa.launch<strategy = simt

// 128 query rows are two m64s: the placement says which rule fails.
// ROWS: block-m must be 64 (S, dP and dQ are one m64 wgmma, the warpgroups split their columns)
func.func @backward_bf16(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>,
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
