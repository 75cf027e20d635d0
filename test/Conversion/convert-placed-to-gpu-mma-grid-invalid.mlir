// RUN: fa-opt %s --split-input-file --fa-convert-placed-to-gpu --verify-diagnostics

// A 2-d warp grid (#fa.mma warps_n > 1) splits rows over warps: the
// lowerings that need whole rows in a warp say so instead of computing
// partial rows.
#acc = #fa.mma<warps = 4, warps_n = 2>
func.func @softmax_on_grid(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
    %m = arith.constant dense<0.0> : tensor<64xf32, #acc>
    // expected-error @+2 {{the row reductions of the online softmax stay within a warp: the scores' layout #fa.mma<warps = 4, warps_n = 2> spreads a row over warps}}
    // expected-error @+1 {{failed to legalize operation 'fa.online_softmax'}}
    %mn, %p, %l, %a = fa.online_softmax %s, %m, %m {scale = 1.0 : f32} : tensor<64x64xf32, #acc>, tensor<64xf32, #acc>
  } attributes {fa.launch = #fa.launch<strategy = mma, threads = 128, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

#acc = #fa.mma<warps = 4, warps_n = 2>
func.func @operand_from_grid(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %s = arith.constant dense<0.0> : tensor<64x64xf16, #acc>
    // expected-error @+2 {{A fragments hold whole rows: the accumulator needs #fa.mma with warps_n = 1}}
    // expected-error @+1 {{failed to legalize operation 'fa.convert_layout'}}
    %a = fa.convert_layout %s : tensor<64x64xf16, #acc> -> tensor<64x64xf16, #fa.mma_operand<warps = 4>>
  } attributes {fa.launch = #fa.launch<strategy = mma, threads = 128, shared_bytes = 0, stages = 1, registers = 32>}
  return
}
