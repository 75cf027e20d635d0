// RUN: fa-opt %s --split-input-file --fa-tma-reduce --verify-diagnostics

// The TMA engine's reduction is wgmma's: a staged tile in a program of
// another strategy has no lowering.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @not_wgmma(%accum: memref<?x?x?x64xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %part = arith.constant dense<0.0> : tensor<64x64xf32, #fa.mma<warps = 4>>
    %staged = fa.convert_layout %part {fa.shared_offset = 0 : i64} : tensor<64x64xf32, #fa.mma<warps = 4>> -> tensor<64x64xf32, #sw>
    // expected-error @+1 {{a tile staged in swizzled shared memory is added by the TMA engine: only in a placed wgmma program}}
    fa.accumulate_tile %staged, %accum[%b, %h, %t] : tensor<64x64xf32, #sw> -> memref<?x?x?x64xf32>
  } attributes {fa.launch = #fa.launch<strategy = mma, threads = 128, shared_bytes = 17408, stages = 1, registers = 64>}
  return
}

// -----

// The tensor map is built for a function argument: a destination made in
// the function has none.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @local_destination(%n: index) {
  %accum = memref.alloc(%n, %n, %n) : memref<?x?x?x64xf32>
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %part = arith.constant dense<0.0> : tensor<64x64xf32, #fa.mma<warps = 4>>
    %staged = fa.convert_layout %part {fa.shared_offset = 0 : i64} : tensor<64x64xf32, #fa.mma<warps = 4>> -> tensor<64x64xf32, #sw>
    // expected-error @+1 {{a TMA-reduced destination must be a function argument (its tensor map is built for it)}}
    fa.accumulate_tile %staged, %accum[%b, %h, %t] : tensor<64x64xf32, #sw> -> memref<?x?x?x64xf32>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 17408, stages = 1, registers = 64>}
  return
}
