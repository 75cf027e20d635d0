// RUN: fa-opt %s --split-input-file --fa-place-wgmma="num-warps=8 stages=2 transposed-scores=0" --verify-diagnostics

// The wgmma backward places the dkdv program fa-tile-backward makes: K and
// V loaded once, Q and dO streamed by the query-tile loop. A program that
// loads otherwise says what it got.
func.func @one_streamed_tile(%k: memref<?x?x?x64xf16>, %q: memref<?x?x?x64xf16>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'fa.grid' op the wgmma strategy places a backward program that loads K and V once and streams Q and dO, got 2 resident and 1 streamed tiles}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %kt = fa.load_tile %k[%b, %h, %n] : memref<?x?x?x64xf16> -> tensor<128x64xf16>
    %vt = fa.load_tile %k[%b, %h, %n] : memref<?x?x?x64xf16> -> tensor<128x64xf16>
    scf.for %i = %c0 to %n step %c1 {
      %qt = fa.load_tile %q[%b, %h, %i] : memref<?x?x?x64xf16> -> tensor<64x64xf16>
      %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<64x64xf16>, tensor<128x64xf16> -> tensor<64x128xf32>
    }
  } attributes {program = "dkdv"}
  return
}

// -----

// It stages two register tiles (P, then dS) in buffers of its own; a
// program whose products read a third register tile is not one it places.
func.func @three_staged_tiles(%k: memref<?x?x?x64xf16>, %q: memref<?x?x?x64xf16>, %n: index) {
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
      %a = fa.tile_matmul %p, %dot {transpose_lhs} : tensor<64x128xf16>, tensor<64x64xf16> -> tensor<128x64xf32>
      %dp = fa.tile_matmul %dot, %vt {transpose_rhs} : tensor<64x64xf16>, tensor<128x64xf16> -> tensor<64x128xf32>
      %ds = arith.truncf %dp : tensor<64x128xf32> to tensor<64x128xf16>
      %c = fa.tile_matmul %ds, %qt {transpose_lhs} : tensor<64x128xf16>, tensor<64x64xf16> -> tensor<128x64xf32>
      %x = arith.addf %s, %dp : tensor<64x128xf32>
      %x16 = arith.truncf %x : tensor<64x128xf32> to tensor<64x128xf16>
      // expected-error @+1 {{the wgmma backward stages two register tiles (P and dS), this is a third}}
      %e = fa.tile_matmul %x16, %qt {transpose_lhs} : tensor<64x128xf16>, tensor<64x64xf16> -> tensor<128x64xf32>
    }
  } attributes {program = "dkdv"}
  return
}
