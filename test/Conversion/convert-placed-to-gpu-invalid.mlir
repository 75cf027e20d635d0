// RUN: fa-opt %s --split-input-file --fa-convert-placed-to-gpu --verify-diagnostics

func.func @unplaced(%n: index) {
  // expected-error @+1 {{'fa.grid' op is not placed (run a placement pass first)}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  }
  return
}

// -----

// Programs of one function become kernels <function>_<program>: each needs
// a name of its own.
func.func @two_programs(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {program = "a", fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 0>}
  // expected-error @+1 {{'fa.grid' op needs a program name of its own: its function holds 2 programs}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {program = "a", fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 0, stages = 1, registers = 0>}
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

// -----

// The kernel takes the function's name: PTX (and LLVM's NVPTX backend)
// accept identifiers only.
func.func @"a b/c"(%n: index) {
  // expected-error @+1 {{makes a kernel named 'a b/c': kernel names (the function's, with the program's) must be identifiers ([A-Za-z_][A-Za-z0-9_]*)}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 0, stages = 1, registers = 32>}
  return
}
