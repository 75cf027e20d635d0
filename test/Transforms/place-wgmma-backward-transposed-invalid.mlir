// RUN: fa-opt %s --split-input-file --fa-place-wgmma="num-warps=8 stages=2 transposed-scores=1" --verify-diagnostics

// With transposed scores only dS^T is staged (for dQ = dS K, which reads
// dS untransposed); a second product that reads a tile of scores
// untransposed would need a second staging buffer.
func.func @two_staged_tiles(%k: memref<?x?x?x64xf16>, %q: memref<?x?x?x64xf16>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %kt = fa.load_tile %k[%b, %h, %n] : memref<?x?x?x64xf16> -> tensor<128x64xf16>
    %vt = fa.load_tile %k[%b, %h, %n] : memref<?x?x?x64xf16> -> tensor<128x64xf16>
    scf.for %i = %c0 to %n step %c1 {
      %qt = fa.load_tile %q[%b, %h, %i] : memref<?x?x?x64xf16> -> tensor<64x64xf16>
      %dot = fa.load_tile %q[%b, %h, %i] : memref<?x?x?x64xf16> -> tensor<64x64xf16>
      %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<64x64xf16>, tensor<128x64xf16> -> tensor<64x128xf32>
      %p = arith.truncf %s : tensor<64x128xf32> to tensor<64x128xf16>
      %dp = fa.tile_matmul %dot, %vt {transpose_rhs} : tensor<64x64xf16>, tensor<128x64xf16> -> tensor<64x128xf32>
      %ds = arith.truncf %dp : tensor<64x128xf32> to tensor<64x128xf16>
      // expected-error @+1 {{transposed scores: the wgmma backward stages one tile of scores (dS^T for dQ), this is a second}}
      %a = fa.tile_matmul %ds, %kt : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
      %c = fa.tile_matmul %p, %kt : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
    }
  } attributes {program = "dkdv"}
  return
}

// -----

// The scores' element-wise ops keep the tile's shape; one that changes it
// (here a tile of row sums would be a reduction) is not a transposed
// score tile.
func.func @scores_change_shape(%k: memref<?x?x?x64xf16>, %q: memref<?x?x?x64xf16>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %kt = fa.load_tile %k[%b, %h, %n] : memref<?x?x?x64xf16> -> tensor<128x64xf16>
    %vt = fa.load_tile %k[%b, %h, %n] : memref<?x?x?x64xf16> -> tensor<128x64xf16>
    scf.for %i = %c0 to %n step %c1 {
      %qt = fa.load_tile %q[%b, %h, %i] : memref<?x?x?x64xf16> -> tensor<64x64xf16>
      %dot = fa.load_tile %q[%b, %h, %i] : memref<?x?x?x64xf16> -> tensor<64x64xf16>
      %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<64x64xf16>, tensor<128x64xf16> -> tensor<64x128xf32>
      %dp = fa.tile_matmul %dot, %vt {transpose_rhs} : tensor<64x64xf16>, tensor<128x64xf16> -> tensor<64x128xf32>
      %t16 = arith.truncf %s : tensor<64x128xf32> to tensor<64x128xf16>
      // expected-error @+1 {{transposed scores: an element-wise op of scores gives another shape}}
      %x = tensor.extract_slice %t16[0, 0] [64, 64] [1, 1] : tensor<64x128xf16> to tensor<64x64xf16>
    }
  } attributes {program = "dkdv"}
  return
}

// -----

// Transposed scores rewrite the two products of scores (S and dP); a
// program with one is not the backward's dkdv program.
func.func @one_score_product(%k: memref<?x?x?x64xf16>, %q: memref<?x?x?x64xf16>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{transposed scores: expected two products of scores (S = Q K^T, dP = dO V^T), found 1}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %kt = fa.load_tile %k[%b, %h, %n] : memref<?x?x?x64xf16> -> tensor<128x64xf16>
    %vt = fa.load_tile %k[%b, %h, %n] : memref<?x?x?x64xf16> -> tensor<128x64xf16>
    scf.for %i = %c0 to %n step %c1 {
      %qt = fa.load_tile %q[%b, %h, %i] : memref<?x?x?x64xf16> -> tensor<64x64xf16>
      %dot = fa.load_tile %q[%b, %h, %i] : memref<?x?x?x64xf16> -> tensor<64x64xf16>
      %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<64x64xf16>, tensor<128x64xf16> -> tensor<64x128xf32>
      %p = arith.truncf %s : tensor<64x128xf32> to tensor<64x128xf16>
      %a = fa.tile_matmul %p, %dot {transpose_lhs} : tensor<64x128xf16>, tensor<64x64xf16> -> tensor<128x64xf32>
    }
  } attributes {program = "dkdv"}
  return
}
