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

// -----

// fa-warp-specialize adds a program's tensor maps as the function's first
// parameters; a kernel is outlined without its siblings' maps, so another
// program reading one would read a parameter its kernel does not have.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @sibling_tensor_map(%map: !llvm.ptr, %q: memref<?x?x?x64xf16>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{uses the tensor map of another program}}
    %stolen = builtin.unrealized_conversion_cast %map : !llvm.ptr to i64
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 0, stages = 1, registers = 64>, program = "delta"}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %k = fa.load_tile %q[%b, %h, %t] {fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 384, shared_bytes = 8192, stages = 1, registers = 240, producer_warps = 4>, fa.tensor_maps = [{arg = 0 : i64, box_cols = 64 : i64, box_rows = 64 : i64, tensor = "k"}], program = "dkdv"}
  return
}

// -----

// fa.copy_tile on wgmma writes an 8-bit tile transposed (the producer's V
// for 8-bit P V); other copies have no lowering.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @copy_tile_not_a_transpose(%v: memref<?x?x?x64xf16>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %a = fa.load_tile %v[%b, %h, %n] {fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    %c = fa.load_tile %v[%b, %h, %n] {fa.shared_offset = 8192 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    // expected-error @+2 {{copies an 8-bit swizzled tile into its transposed layout only}}
    // expected-error @+1 {{failed to legalize operation 'fa.copy_tile'}}
    fa.copy_tile %a into %c : tensor<64x64xf16, #sw> into tensor<64x64xf16, #sw>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 17408, stages = 1, registers = 64>}
  return
}

// -----

// A row vector in shared memory (the backward's staged LSE and D) is copied
// by fa-warp-specialize's producer; the lowering's tile copies fill 2-d
// tiles, so a placed program that skipped the warp specialization is
// refused (it once looped on the missing second dimension).
func.func @row_vector_not_specialized(%lse: memref<?x?x?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    scf.for %i = %c0 to %n step %c1 {
      // expected-error @+1 {{a shared tile copy takes a 2-d tile, got 'tensor<64xf32, #fa.shared<pad = 0>>' (a row vector in shared memory is copied by fa-warp-specialize's producer: run it first)}}
      %ls = fa.load_tile %lse[%b, %h, %i] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 0 : i64} : memref<?x?x?xf32> -> tensor<64xf32, #fa.shared<pad = 0>>
      %l = fa.convert_layout %ls : tensor<64xf32, #fa.shared<pad = 0>> -> tensor<64xf32, #fa.mma<warps = 4>>
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 1024, stages = 2, registers = 64>}
  return
}
