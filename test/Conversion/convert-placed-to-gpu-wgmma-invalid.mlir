// RUN: fa-opt %s --split-input-file --fa-convert-placed-to-gpu --verify-diagnostics

// wgmma's accumulator is a warpgroup's 64 rows: a warp grid numbered along
// the columns first (warps 0-3 in two row slices) is not one.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @grid_not_rows_first(%q: memref<?x?x?x64xf16>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %a = fa.load_tile %q[%b, %h, %n] {fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    %k = fa.load_tile %q[%b, %h, %n] {fa.shared_offset = 8192 : i64} : memref<?x?x?x64xf16> -> tensor<128x64xf16, #sw>
    // expected-error @+2 {{wgmma accumulators are a warpgroup's 64 rows: #fa.mma needs warps_n = 1, or rows_first with the warps along the rows in whole warpgroups}}
    // expected-error @+1 {{failed to legalize operation 'fa.tile_matmul'}}
    %s = fa.tile_matmul %a, %k {transpose_rhs} : tensor<64x64xf16, #sw>, tensor<128x64xf16, #sw> -> tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2>>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 25600, stages = 1, registers = 64>}
  return
}

// -----

// A transposed left operand (P^T, dS^T of the backward) is read from
// shared memory by an MN-major descriptor; A fragments in registers cannot
// be read transposed.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @transposed_register_lhs(%v: memref<?x?x?x64xf16>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %p = arith.constant dense<0.0> : tensor<64x64xf16, #fa.mma_operand<warps = 4>>
    %d = fa.load_tile %v[%b, %h, %n] {fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    // expected-error @+2 {{wgmma reads a transposed left operand from shared memory only}}
    // expected-error @+1 {{failed to legalize operation 'fa.tile_matmul'}}
    %o = fa.tile_matmul %p, %d {transpose_lhs} : tensor<64x64xf16, #fa.mma_operand<warps = 4>>, tensor<64x64xf16, #sw> -> tensor<64x64xf32, #fa.mma<warps = 4>>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 9216, stages = 1, registers = 64>}
  return
}
