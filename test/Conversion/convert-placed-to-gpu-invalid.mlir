// RUN: fa-opt %s --split-input-file --fa-convert-placed-to-gpu --verify-diagnostics

func.func @unplaced(%n: index) {
  // expected-error @+1 {{'fa.grid' op is not placed (run a placement pass first)}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  }
  return
}

// -----

// expected-error @+1 {{'func.func' op holds 2 fa.grid programs; a kernel holds one}}
func.func @two_programs(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 0>}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 0>}
  return
}

// -----

// Register tiles over 4 warps in a program launched with 2: the lanes of the
// missing warps would own elements nobody computes.
func.func @threads_mismatch(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{'arith.constant' op places a tile on 128 threads, but its program computes on 64}}
    %a = arith.constant dense<0.0> : tensor<64x64xf32, #fa.mma<warps = 4>>
  } attributes {fa.launch = #fa.launch<strategy = mma, threads = 64, shared_bytes = 0, stages = 1, registers = 0>}
  return
}
