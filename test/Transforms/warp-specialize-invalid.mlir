// RUN: fa-opt %s --split-input-file --fa-warp-specialize --verify-diagnostics

// The backward's dkdv program is split by the operands fa-tile-backward
// gives it: K and V (arguments 1, 2) loaded once, Q and dO (arguments 0, 4)
// streamed. Here Q is loaded once and K streamed: the producer would copy
// the wrong tensors once.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @dkdv_q_resident(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                           %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{warp specialization of a dkdv program expects K and V (arguments 1, 2) loaded once in the program, Q and dO (arguments 0, 4) streamed in one loop body}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %qt = fa.load_tile %q[%b, %h, %t] {fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    %vt = fa.load_tile %v[%b, %h, %t] {fa.shared_offset = 8192 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    scf.for %i = %c0 to %n step %c1 {
      %kt = fa.load_tile %k[%b, %h, %i] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 16384 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
      %dot = fa.load_tile %do[%b, %h, %i] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 32768 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
      %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<64x64xf16, #sw>, tensor<64x64xf16, #sw> -> tensor<64x64xf32, #fa.mma<warps = 4>>
      %dp = fa.tile_matmul %dot, %vt {transpose_rhs} : tensor<64x64xf16, #sw>, tensor<64x64xf16, #sw> -> tensor<64x64xf32, #fa.mma<warps = 4>>
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 49152, stages = 2, registers = 200>, program = "dkdv"}
  return
}

// -----

// Both roles count the iterations of the loops around the streamed loads;
// a loop that is not an scf.for (or a conditional) has no count to carry.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @dkdv_streamed_under_if(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                                  %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %n: index, %c: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %kt = fa.load_tile %k[%b, %h, %t] {fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    %vt = fa.load_tile %v[%b, %h, %t] {fa.shared_offset = 8192 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    scf.for %i = %c0 to %n step %c1 {
      // expected-error @+1 {{warp specialization of a dkdv program expects only scf.for loops around the streamed Q and dO loads}}
      scf.if %c {
        %qt = fa.load_tile %q[%b, %h, %i] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 16384 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
        %dot = fa.load_tile %do[%b, %h, %i] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 32768 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
        %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<64x64xf16, #sw>, tensor<64x64xf16, #sw> -> tensor<64x64xf32, #fa.mma<warps = 4>>
        %dp = fa.tile_matmul %dot, %vt {transpose_rhs} : tensor<64x64xf16, #sw>, tensor<64x64xf16, #sw> -> tensor<64x64xf32, #fa.mma<warps = 4>>
      }
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 49152, stages = 2, registers = 200>, program = "dkdv"}
  return
}

// -----

// Q and dO loaded once, not in a loop: nothing to stream.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @dkdv_nothing_streamed(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                                 %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %n: index) {
  // expected-error @+1 {{warp specialization of a dkdv program expects Q and dO loaded in a loop}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %kt = fa.load_tile %k[%b, %h, %t] {fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    %vt = fa.load_tile %v[%b, %h, %t] {fa.shared_offset = 8192 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    %qt = fa.load_tile %q[%b, %h, %t] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 16384 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    %dot = fa.load_tile %do[%b, %h, %t] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 32768 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<64x64xf16, #sw>, tensor<64x64xf16, #sw> -> tensor<64x64xf32, #fa.mma<warps = 4>>
    %dp = fa.tile_matmul %dot, %vt {transpose_rhs} : tensor<64x64xf16, #sw>, tensor<64x64xf16, #sw> -> tensor<64x64xf32, #fa.mma<warps = 4>>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 49152, stages = 2, registers = 200>, program = "dkdv"}
  return
}

// -----

// Staged row values (LSE, D) ride Q's ring: one slot per stage of the
// program, filled with Q's. A ring of 3 slots in a 2-stage program would
// be read at slots Q's barriers never announce.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @dkdv_row_values_other_stages(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                                        %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %kt = fa.load_tile %k[%b, %h, %t] {fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    %vt = fa.load_tile %v[%b, %h, %t] {fa.shared_offset = 8192 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    scf.for %i = %c0 to %n step %c1 {
      // expected-error @+1 {{staged row values must be f32 rows, one per row of Q's tile (a multiple of 32), loaded in Q's loop body into a ring of the program's stages (fa.pipeline_stages = 2, an fa.shared_offset)}}
      %ls = fa.load_tile %lse[%b, %h, %i] {fa.pipeline_stages = 3 : i64, fa.shared_offset = 49152 : i64} : memref<?x?x?xf32> -> tensor<64xf32, #fa.shared<pad = 0>>
      %qt = fa.load_tile %q[%b, %h, %i] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 16384 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
      %dot = fa.load_tile %do[%b, %h, %i] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 32768 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
      %l = fa.convert_layout %ls : tensor<64xf32, #fa.shared<pad = 0>> -> tensor<64xf32, #fa.mma<warps = 4>>
      %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<64x64xf16, #sw>, tensor<64x64xf16, #sw> -> tensor<64x64xf32, #fa.mma<warps = 4>>
      %dp = fa.tile_matmul %dot, %vt {transpose_rhs} : tensor<64x64xf16, #sw>, tensor<64x64xf16, #sw> -> tensor<64x64xf32, #fa.mma<warps = 4>>
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 50176, stages = 2, registers = 200>, program = "dkdv"}
  return
}

// -----

// Q's release (after its last use) frees the row values' slot too: a read
// of LSE after Q's last use could find the next fill there.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @dkdv_row_values_read_late(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                                     %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %kt = fa.load_tile %k[%b, %h, %t] {fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    %vt = fa.load_tile %v[%b, %h, %t] {fa.shared_offset = 8192 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
    scf.for %i = %c0 to %n step %c1 {
      // expected-error @+1 {{staged row values must be read in Q's loop body before Q's last use (Q's release frees their slot)}}
      %ls = fa.load_tile %lse[%b, %h, %i] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 49152 : i64} : memref<?x?x?xf32> -> tensor<64xf32, #fa.shared<pad = 0>>
      %qt = fa.load_tile %q[%b, %h, %i] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 16384 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
      %dot = fa.load_tile %do[%b, %h, %i] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 32768 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #sw>
      %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<64x64xf16, #sw>, tensor<64x64xf16, #sw> -> tensor<64x64xf32, #fa.mma<warps = 4>>
      %dp = fa.tile_matmul %dot, %vt {transpose_rhs} : tensor<64x64xf16, #sw>, tensor<64x64xf16, #sw> -> tensor<64x64xf32, #fa.mma<warps = 4>>
      %l = fa.convert_layout %ls : tensor<64xf32, #fa.shared<pad = 0>> -> tensor<64xf32, #fa.mma<warps = 4>>
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 50176, stages = 2, registers = 200>, program = "dkdv"}
  return
}
