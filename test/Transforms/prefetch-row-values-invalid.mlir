// RUN: fa-opt %s --split-input-file --fa-prefetch-row-values --verify-diagnostics

#rows = #fa.mma<warps = 8, warps_n = 2, rows_first = 1>

// A row that depends on what the loop carries: the next iteration's index
// is not known at the top of this one.
func.func @carried_row(%lse: memref<?x?x?xf32>, %lb: index, %ub: index, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %zero = arith.constant dense<0.0> : tensor<64xf32, #rows>
    %sum:2 = scf.for %i = %lb to %ub step %c1 iter_args(%acc = %zero, %carried = %lb) -> (tensor<64xf32, #rows>, index) {
      // expected-error @+1 {{is marked fa.prefetch but its indices depend on more than the induction variable and values from outside the loop}}
      %l = fa.load_tile %lse[%b, %h, %carried] {fa.prefetch} : memref<?x?x?xf32> -> tensor<64xf32, #rows>
      %y = arith.addf %acc, %l : tensor<64xf32, #rows>
      %next = arith.addi %carried, %c64 : index
      scf.yield %y, %next : tensor<64xf32, #rows>, index
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 0, stages = 1, registers = 64>}
  return
}

// -----

#rows = #fa.mma<warps = 8, warps_n = 2, rows_first = 1>

// A source the program also writes: the next tile's values could change
// before their iteration.
func.func @written_source(%written: memref<?x?x?xf32>, %lb: index, %ub: index, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    scf.for %i = %lb to %ub step %c1 {
      %row = arith.muli %i, %c64 : index
      // expected-error @+1 {{is marked fa.prefetch but its program also writes its source: the next iteration's values may not be there yet}}
      %w = fa.load_tile %written[%b, %h, %row] {fa.prefetch} : memref<?x?x?xf32> -> tensor<64xf32, #rows>
      %x = arith.addf %w, %w : tensor<64xf32, #rows>
      fa.store_tile %x, %written[%b, %h, %row] : tensor<64xf32, #rows> -> memref<?x?x?xf32>
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 0, stages = 1, registers = 64>}
  return
}

// -----

#rows = #fa.mma<warps = 8, warps_n = 2, rows_first = 1>

// Outside a loop there is no next iteration.
func.func @not_in_a_loop(%lse: memref<?x?x?xf32>, %out: memref<?x?x?xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{is marked fa.prefetch but is not in the body of an scf.for}}
    %l = fa.load_tile %lse[%b, %h, %t] {fa.prefetch} : memref<?x?x?xf32> -> tensor<64xf32, #rows>
    fa.store_tile %l, %out[%b, %h, %t] : tensor<64xf32, #rows> -> memref<?x?x?xf32>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 0, stages = 1, registers = 64>}
  return
}

// -----

#rows = #fa.mma<warps = 8, warps_n = 2, rows_first = 1>

// A write through a view of the source (here a cast) writes the source.
func.func @written_through_a_view(%written: memref<?x?x?xf32>, %lb: index, %ub: index, %n: index) {
  %view = memref.cast %written : memref<?x?x?xf32> to memref<4x?x?xf32>
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    scf.for %i = %lb to %ub step %c1 {
      %row = arith.muli %i, %c64 : index
      // expected-error @+1 {{is marked fa.prefetch but its program also writes its source: the next iteration's values may not be there yet}}
      %w = fa.load_tile %written[%b, %h, %row] {fa.prefetch} : memref<?x?x?xf32> -> tensor<64xf32, #rows>
      %x = arith.addf %w, %w : tensor<64xf32, #rows>
      fa.store_tile %x, %view[%b, %h, %row] : tensor<64xf32, #rows> -> memref<4x?x?xf32>
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 0, stages = 1, registers = 64>}
  return
}

// -----

#rows = #fa.mma<warps = 8, warps_n = 2, rows_first = 1>

// Outside an fa.grid nothing says who else touches the source.
func.func @not_in_a_program(%lse: memref<?x?x?xf32>, %lb: index, %ub: index, %n: index) {
  %c1 = arith.constant 1 : index
  scf.for %i = %lb to %ub step %c1 {
    // expected-error @+1 {{is marked fa.prefetch but is not in an fa.grid program (nothing says what else reads or writes its source)}}
    %l = fa.load_tile %lse[%n, %n, %i] {fa.prefetch} : memref<?x?x?xf32> -> tensor<64xf32, #rows>
  }
  return
}
