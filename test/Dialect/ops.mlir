// RUN: fa-opt %s | fa-opt | FileCheck %s
// RUN: fa-opt %s --mlir-print-op-generic | fa-opt | FileCheck %s

// Problem level: GQA (8 query heads over 2 K/V heads), f16, causal.
// CHECK-LABEL: func @attention_problem
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} {mask = #fa.mask<causal>, scale = 1.250000e-01 : f32}
// CHECK-SAME: memref<?x8x?x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16> into memref<?x8x?x64xf16>, memref<?x8x?xf32>
func.func @attention_problem(%q: memref<?x8x?x64xf16>, %k: memref<?x2x?x64xf16>,
                             %v: memref<?x2x?x64xf16>, %o: memref<?x8x?x64xf16>,
                             %lse: memref<?x8x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x8x?x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32>
  return
}

// The mask defaults to none and is then not printed.
// CHECK-LABEL: func @attention_default_mask
// CHECK: fa.attention
// CHECK-NOT: mask
// CHECK-SAME: scale = 1.000000e+00 : f32
func.func @attention_default_mask(%q: memref<1x1x4x16xf32>, %o: memref<1x1x4x16xf32>,
                                  %lse: memref<1x1x4xf32>) {
  fa.attention %q, %q, %q into %o, %lse {scale = 1.0 : f32}
    : memref<1x1x4x16xf32>, memref<1x1x4x16xf32>, memref<1x1x4x16xf32>
    into memref<1x1x4x16xf32>, memref<1x1x4xf32>
  return
}

// A packed varlen batch: the offset tables, and at the tile level a
// ragged grid whose loads and stores name their sequence's rows.
// CHECK-LABEL: func @varlen
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} cu_seqlens(%[[CQ:.*]], %[[CK:.*]]) {scale = 1.250000e-01 : f32}
// CHECK-SAME: cu_seqlens memref<?xi32>, memref<?xi32>
// CHECK: fa.grid
// CHECK: fa.load_tile %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] sequence(%[[FIRST:.*]], %[[END:.*]]) : memref<1x8x?x64xf16> -> tensor<16x64xf16>
// CHECK: fa.store_tile %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] sequence(%[[FIRST]], %[[END]]) : tensor<16x64xf16> -> memref<1x8x?x64xf16>
// CHECK: ragged
func.func @varlen(%q: memref<1x8x?x64xf16>, %k: memref<1x2x?x64xf16>,
                  %lse: memref<1x8x?xf32>, %cq: memref<?xi32>, %ck: memref<?xi32>,
                  %n: index, %first: index, %end: index) {
  fa.attention %q, %k, %k into %q, %lse cu_seqlens(%cq, %ck) {scale = 0.125 : f32}
    : memref<1x8x?x64xf16>, memref<1x2x?x64xf16>, memref<1x2x?x64xf16>
    into memref<1x8x?x64xf16>, memref<1x8x?xf32> cu_seqlens memref<?xi32>, memref<?xi32>
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %tile = fa.load_tile %q[%b, %h, %t] sequence(%first, %end) : memref<1x8x?x64xf16> -> tensor<16x64xf16>
    fa.store_tile %tile, %q[%b, %h, %t] sequence(%first, %end) : tensor<16x64xf16> -> memref<1x8x?x64xf16>
  } attributes {ragged}
  return
}

// The varlen backward: the offset tables after the workspaces; a dQ add
// names its sequence's rows.
// CHECK-LABEL: func @varlen_backward
// CHECK: fa.attention_backward {{.*}} workspace %{{.*}}, %{{.*}} cu_seqlens(%{{.*}}, %{{.*}}) {scale = 1.250000e-01 : f32}
// CHECK-SAME: cu_seqlens memref<?xi32>, memref<?xi32>
// CHECK: fa.accumulate_tile %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] sequence(%{{.*}}, %{{.*}}) : tensor<16x64xf32> -> memref<1x8x?x64xf32>
func.func @varlen_backward(%q: memref<1x8x?x64xf16>, %k: memref<1x2x?x64xf16>,
                           %lse: memref<1x8x?xf32>, %acc: memref<1x8x?x64xf32>,
                           %cq: memref<?xi32>, %ck: memref<?xi32>,
                           %part: tensor<16x64xf32>, %i: index) {
  fa.attention_backward %q, %k, %k, %q, %q, %lse into %q, %k, %k
      workspace %lse, %acc cu_seqlens(%cq, %ck) {scale = 0.125 : f32}
    : memref<1x8x?x64xf16>, memref<1x2x?x64xf16>, memref<1x2x?x64xf16>,
      memref<1x8x?x64xf16>, memref<1x8x?x64xf16>, memref<1x8x?xf32>
    into memref<1x8x?x64xf16>, memref<1x2x?x64xf16>, memref<1x2x?x64xf16>
    workspace memref<1x8x?xf32>, memref<1x8x?x64xf32>
    cu_seqlens memref<?xi32>, memref<?xi32>
  fa.accumulate_tile %part, %acc[%i, %i, %i] sequence(%i, %i) : tensor<16x64xf32> -> memref<1x8x?x64xf32>
  return
}

// Tile level: every op of one program.
// CHECK-LABEL: func @tile_ops
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %[[T:.*]]) in (%{{.*}}, %{{.*}}, %{{.*}}) {
// CHECK: %[[Q:.*]] = fa.load_tile %{{.*}}[%[[B]], %[[H]], %{{.*}}] : memref<?x?x?x32xf32> -> tensor<16x32xf32>
// CHECK: %[[BEGIN:.*]], %[[END:.*]] = fa.kv_tile_range %{{.*}}, %{{.*}}, %{{.*}} {block_m = 16 : i64, block_n = 8 : i64, mask = #fa.mask<causal>}
// CHECK: %[[S:.*]] = fa.tile_matmul %[[Q]], %{{.*}} {transpose_rhs} : tensor<16x32xf32>, tensor<8x32xf32> -> tensor<16x8xf32>
// CHECK: %[[SM:.*]] = fa.mask %[[S]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {mask = #fa.mask<causal>} : tensor<16x8xf32>
// CHECK: %[[M:.*]], %[[P:.*]], %[[L:.*]], %[[ALPHA:.*]] = fa.online_softmax %[[SM]], %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f32} : tensor<16x8xf32>, tensor<16xf32>
// CHECK: %[[ACC:.*]] = fa.rescale %{{.*}}, %[[ALPHA]] : tensor<16x32xf32>, tensor<16xf32>
// CHECK: fa.tile_matmul %[[P]], %{{.*}} acc(%[[ACC]]) : tensor<16x8xf32>, tensor<8x32xf32> -> tensor<16x32xf32>
// CHECK: %[[O:.*]], %[[LSE:.*]] = fa.finalize
// CHECK: fa.store_tile %[[O]], %{{.*}}[%[[B]], %[[H]], %{{.*}}] : tensor<16x32xf32> -> memref<?x?x?x32xf32>
// CHECK: fa.store_tile %[[LSE]], %{{.*}}[%[[B]], %[[H]], %{{.*}}] : tensor<16xf32> -> memref<?x?x?xf32>
func.func @tile_ops(%q: memref<?x?x?x32xf32>, %kv: memref<?x?x?x32xf32>,
                    %o: memref<?x?x?x32xf32>, %lse: memref<?x?x?xf32>,
                    %nb: index, %nh: index, %nt: index, %sq: index, %sk: index) {
  fa.grid (%b, %h, %t) in (%nb, %nh, %nt) {
    %c16 = arith.constant 16 : index
    %q_start = arith.muli %t, %c16 : index
    %q_tile = fa.load_tile %q[%b, %h, %q_start] : memref<?x?x?x32xf32> -> tensor<16x32xf32>
    %begin, %end = fa.kv_tile_range %q_start, %sq, %sk {block_m = 16 : i64, block_n = 8 : i64, mask = #fa.mask<causal>}
    %k_tile = fa.load_tile %kv[%b, %h, %begin] : memref<?x?x?x32xf32> -> tensor<8x32xf32>
    %s = fa.tile_matmul %q_tile, %k_tile {transpose_rhs} : tensor<16x32xf32>, tensor<8x32xf32> -> tensor<16x8xf32>
    %sm = fa.mask %s, %q_start, %begin, %sq, %sk {mask = #fa.mask<causal>} : tensor<16x8xf32>
    %m0 = arith.constant dense<0xFF800000> : tensor<16xf32>
    %l0 = arith.constant dense<0.0> : tensor<16xf32>
    %acc0 = arith.constant dense<0.0> : tensor<16x32xf32>
    %m, %p, %l, %alpha = fa.online_softmax %sm, %m0, %l0 {scale = 0.5 : f32} : tensor<16x8xf32>, tensor<16xf32>
    %acc1 = fa.rescale %acc0, %alpha : tensor<16x32xf32>, tensor<16xf32>
    %acc2 = fa.tile_matmul %p, %k_tile acc(%acc1) : tensor<16x8xf32>, tensor<8x32xf32> -> tensor<16x32xf32>
    %out, %row_lse = fa.finalize %acc2, %m, %l : tensor<16x32xf32>, tensor<16xf32>
    fa.store_tile %out, %o[%b, %h, %q_start] : tensor<16x32xf32> -> memref<?x?x?x32xf32>
    fa.store_tile %row_lse, %lse[%b, %h, %q_start] : tensor<16xf32> -> memref<?x?x?xf32>
  }
  return
}

// A split-KV part of a K/V tile range.
// CHECK-LABEL: func @kv_range_part
// CHECK: fa.kv_tile_range %{{.*}}, %{{.*}}, %{{.*}} part(%{{.*}} of %{{.*}}) {block_m = 16 : i64, block_n = 8 : i64}
func.func @kv_range_part(%q_start: index, %sq: index, %sk: index, %p: index, %n: index) -> (index, index) {
  %begin, %end = fa.kv_tile_range %q_start, %sq, %sk part(%p of %n) {block_m = 16 : i64, block_n = 8 : i64}
  return %begin, %end : index, index
}

// Placement level of the mma strategy: fragment encodings and the launch.
// CHECK-LABEL: func @mma_placement
// CHECK: fa.convert_layout %{{.*}} : tensor<128x64xf16, #fa.mma<warps = 4>> -> tensor<128x64xf16, #fa.mma_operand<warps = 4>>
// CHECK: fa.launch = #fa.launch<strategy = mma, threads = 128, shared_bytes = 104448, stages = 2, registers = 244>
func.func @mma_placement(%p: tensor<128x64xf16, #fa.mma<warps = 4>>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %a = fa.convert_layout %p : tensor<128x64xf16, #fa.mma<warps = 4>> -> tensor<128x64xf16, #fa.mma_operand<warps = 4>>
  } attributes {fa.launch = #fa.launch<strategy = mma, threads = 128, shared_bytes = 104448, stages = 2, registers = 244>}
  return
}

// A staged tile handed to its readers (the deterministic backward's writer
// warp) and the turns taken by one warp.
// CHECK-LABEL: func @hand_off_and_warp_turns
// CHECK: fa.hand_off %{{.*}} barrier 13 threads 288 : tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
// CHECK: fa.wait_turn %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}], %{{.*}} {by_warp} : memref<?x?x?xi32>
// CHECK: fa.pass_turn %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}], %{{.*}} {by_warp} : memref<?x?x?xi32>
func.func @hand_off_and_warp_turns(%dq: tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>, %order: memref<?x?x?xi32>, %i: index) {
  fa.hand_off %dq barrier 13 threads 288 : tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
  fa.wait_turn %order[%i, %i, %i], %i {by_warp} : memref<?x?x?xi32>
  fa.pass_turn %order[%i, %i, %i], %i {by_warp} : memref<?x?x?xi32>
  return
}

// A shared-to-shared copy into a buffer of another layout (the producer's
// transposed 8-bit V).
// CHECK-LABEL: func @copy_tile_transposed
// CHECK: fa.copy_tile %{{.*}} into %{{.*}} : tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>> into tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
func.func @copy_tile_transposed(%v: tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>>, %v_t: tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>) {
  fa.copy_tile %v into %v_t : tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>> into tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
  return
}

// 8-bit rows of 64 bytes (e4m3 at head dim 64) in the 64-byte swizzle,
// copied transposed into the 128-byte one.
// CHECK-LABEL: func @copy_tile_transposed_64
// CHECK: fa.copy_tile %{{.*}} into %{{.*}} : tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 64>> into tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
func.func @copy_tile_transposed_64(%v: tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 64>>, %v_t: tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>) {
  fa.copy_tile %v into %v_t : tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 64>> into tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
  return
}

// The wgmma backward reads S^T's accumulator as S: #fa.mma with
// `transposed` (false is the default and not printed), and the same
// registers the other way round for P^T (fa.transpose).
// CHECK-LABEL: func @mma_transposed
// CHECK-SAME: tensor<64xf32, #fa.mma<warps = 8, transposed = true>>
// CHECK: fa.transpose %{{.*}} : tensor<128x64xf32, #fa.mma<warps = 8>> -> tensor<64x128xf32, #fa.mma<warps = 8, transposed = true>>
// CHECK: %[[P:.*]] = fa.recompute_probs
// CHECK: fa.transpose %[[P]] : tensor<64x128xf32, #fa.mma<warps = 8, transposed = true>> -> tensor<128x64xf32, #fa.mma<warps = 8>>
func.func @mma_transposed(%s_t: tensor<128x64xf32, #fa.mma<warps = 8, transposed = false>>, %lse: tensor<64xf32, #fa.mma<warps = 8, transposed = true>>) -> tensor<128x64xf32, #fa.mma<warps = 8>> {
  %s = fa.transpose %s_t : tensor<128x64xf32, #fa.mma<warps = 8>> -> tensor<64x128xf32, #fa.mma<warps = 8, transposed = true>>
  %p = fa.recompute_probs %s, %lse {scale = 1.0 : f32} : tensor<64x128xf32, #fa.mma<warps = 8, transposed = true>>, tensor<64xf32, #fa.mma<warps = 8, transposed = true>>
  %p_t = fa.transpose %p : tensor<64x128xf32, #fa.mma<warps = 8, transposed = true>> -> tensor<128x64xf32, #fa.mma<warps = 8>>
  return %p_t : tensor<128x64xf32, #fa.mma<warps = 8>>
}

// A 2-d warp grid round-trips; warps_n = 1 is the default and not printed.
// CHECK-LABEL: func private @mma_grid
// CHECK-SAME: tensor<128x128xf32, #fa.mma<warps = 8, warps_n = 2>>
// CHECK-SAME: tensor<128xf32, #fa.mma<warps = 8, warps_n = 2>>
// CHECK-SAME: tensor<128x64xf32, #fa.mma<warps = 8>>
func.func private @mma_grid(tensor<128x128xf32, #fa.mma<warps = 8, warps_n = 2>>,
                            tensor<128xf32, #fa.mma<warps = 8, warps_n = 2>>,
                            tensor<128x64xf32, #fa.mma<warps = 8, warps_n = 1>>)

// Warps numbered down the rows first (the wgmma backward's S, dP, dQ):
// rows_first = 0 is the default and not printed.
// CHECK-LABEL: func private @mma_rows_first
// CHECK-SAME: tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// CHECK-SAME: tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2>>
func.func private @mma_rows_first(tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>,
                                  tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 0>>)

// Encodings on element types without a bit width parse (the fuzzer found
// the shared-size check reading one: a crash); ops reject such tiles.
// CHECK-LABEL: func private @widthless
// CHECK-SAME: tensor<8x32xindex, #fa.shared<pad = 0>>
// CHECK-SAME: tensor<8x32xcomplex<f32>, #fa.blocked<threads = [8, 32]>>
func.func private @widthless(tensor<8x32xindex, #fa.shared<pad = 0>>,
                             tensor<8x32xcomplex<f32>, #fa.blocked<threads = [8, 32]>>)

// The backward at the problem level.
// CHECK-LABEL: func @backward
// CHECK: fa.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}}, %{{.*}} workspace %{{.*}}, %{{.*}} {mask = #fa.mask<causal>, scale = 1.250000e-01 : f32}
// CHECK-SAME: into memref<?x8x?x64xbf16>, memref<?x2x?x64xbf16>, memref<?x2x?x64xbf16> workspace memref<?x8x?xf32>, memref<?x8x?x64xf32>
func.func @backward(%q: memref<?x8x?x64xbf16>, %k: memref<?x2x?x64xbf16>, %v: memref<?x2x?x64xbf16>,
                    %o: memref<?x8x?x64xbf16>, %do: memref<?x8x?x64xbf16>, %lse: memref<?x8x?xf32>,
                    %dq: memref<?x8x?x64xbf16>, %dk: memref<?x2x?x64xbf16>, %dv: memref<?x2x?x64xbf16>,
                    %delta: memref<?x8x?xf32>, %accum: memref<?x8x?x64xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x8x?x64xbf16>, memref<?x2x?x64xbf16>, memref<?x2x?x64xbf16>,
      memref<?x8x?x64xbf16>, memref<?x8x?x64xbf16>, memref<?x8x?xf32>
    into memref<?x8x?x64xbf16>, memref<?x2x?x64xbf16>, memref<?x2x?x64xbf16>
    workspace memref<?x8x?xf32>, memref<?x8x?x64xf32>
  return
}

// The backward's tile ops.
// CHECK-LABEL: func @backward_tile_ops
// CHECK: %[[QB:.*]], %[[QE:.*]] = fa.q_tile_range %{{.*}}, %{{.*}}, %{{.*}} {block_m = 16 : i64, block_n = 8 : i64, mask = #fa.mask<causal>}
// CHECK: fa.row_dot %{{.*}}, %{{.*}} : tensor<16x32xf16> -> tensor<16xf32>
// CHECK: %[[P:.*]] = fa.recompute_probs %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f32} : tensor<16x8xf32>, tensor<16xf32>
// CHECK: fa.tile_matmul %[[P]], %{{.*}} {transpose_lhs} : tensor<16x8xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
// CHECK: %[[DS:.*]] = fa.softmax_grad %[[P]], %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f32} : tensor<16x8xf32>, tensor<16xf32>
// CHECK: fa.accumulate_tile %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : tensor<16x32xf32> -> memref<?x?x?x32xf32>
func.func @backward_tile_ops(%do: tensor<16x32xf16>, %o: tensor<16x32xf16>, %s: tensor<16x8xf32>,
                             %lse: tensor<16xf32>, %q: tensor<16x32xf32>, %k: tensor<8x32xf32>,
                             %accum: memref<?x?x?x32xf32>, %i: index, %sq: index, %sk: index) {
  %q_begin, %q_end = fa.q_tile_range %i, %sq, %sk {block_m = 16 : i64, block_n = 8 : i64, mask = #fa.mask<causal>}
  %d = fa.row_dot %do, %o : tensor<16x32xf16> -> tensor<16xf32>
  %p = fa.recompute_probs %s, %lse {scale = 0.5 : f32} : tensor<16x8xf32>, tensor<16xf32>
  %dv = fa.tile_matmul %p, %q {transpose_lhs} : tensor<16x8xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %ds = fa.softmax_grad %p, %s, %d {scale = 0.5 : f32} : tensor<16x8xf32>, tensor<16xf32>
  %dq = fa.tile_matmul %ds, %k : tensor<16x8xf32>, tensor<8x32xf32> -> tensor<16x32xf32>
  fa.accumulate_tile %dq, %accum[%i, %i, %q_begin] : tensor<16x32xf32> -> memref<?x?x?x32xf32>
  return
}
