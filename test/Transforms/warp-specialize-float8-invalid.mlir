// RUN: fa-opt %s --split-input-file --fa-warp-specialize --verify-diagnostics

// The producer writes V's transposed copy where fa-place-wgmma marked its
// fa.convert_layout (to #fa.swizzled_shared<transposed>) fa.producer_writes,
// and the consumers read only that copy: any other use of the V tile (here a
// second copy) would read a ring slot the producer has already released.
#sw = #fa.swizzled_shared<bytes = 128>
#swt = #fa.swizzled_shared<bytes = 128, transposed = true>
func.func @value_with_another_use(%q: memref<?x?x?x128xf8E4M3FN>, %k: memref<?x?x?x128xf8E4M3FN>,
                                  %v: memref<?x?x?x128xf8E4M3FN>, %n: index) {
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %row = arith.muli %t, %c128 : index
    %qt = fa.load_tile %q[%b, %h, %row] {fa.shared_offset = 0 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
    %begin, %end = fa.kv_tile_range %row, %n, %n {block_m = 128 : i64, block_n = 128 : i64}
    scf.for %j = %begin to %end step %c1 {
      %kv_row = arith.muli %j, %c128 : index
      %kt = fa.load_tile %k[%b, %h, %kv_row] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 16384 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
      // expected-error @+1 {{a V tile read transposed must have that copy as its only use, marked fa.producer_writes like every other V load's copy (the producer writes all of them or none)}}
      %vt = fa.load_tile %v[%b, %h, %kv_row] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 49152 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
      %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<128x128xf8E4M3FN, #sw>, tensor<128x128xf8E4M3FN, #sw> -> tensor<128x128xf32, #fa.mma<warps = 8>>
      %m0 = arith.constant dense<0xFF800000> : tensor<128xf32, #fa.mma<warps = 8>>
      %l0 = arith.constant dense<0.0> : tensor<128xf32, #fa.mma<warps = 8>>
      %m, %p, %l, %alpha = fa.online_softmax %s, %m0, %l0 {scale = 1.0 : f32} : tensor<128x128xf32, #fa.mma<warps = 8>>, tensor<128xf32, #fa.mma<warps = 8>>
      %vtt = fa.convert_layout %vt {fa.producer_writes, fa.shared_offset = 81920 : i64} : tensor<128x128xf8E4M3FN, #sw> -> tensor<128x128xf8E4M3FN, #swt>
      %again = fa.convert_layout %vt {fa.shared_offset = 81920 : i64} : tensor<128x128xf8E4M3FN, #sw> -> tensor<128x128xf8E4M3FN, #swt>
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 115712, stages = 2, registers = 190>}
  return
}

// -----

// The transposing producer does not clear a varlen tile's rows past its
// sequence (the consumers do that on V's own ring when they read it).
#sw = #fa.swizzled_shared<bytes = 128>
#swt = #fa.swizzled_shared<bytes = 128, transposed = true>
func.func @varlen_value(%q: memref<?x?x?x128xf8E4M3FN>, %k: memref<?x?x?x128xf8E4M3FN>,
                        %v: memref<?x?x?x128xf8E4M3FN>, %n: index, %first: index, %last: index) {
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %row = arith.muli %t, %c128 : index
    %qt = fa.load_tile %q[%b, %h, %row] {fa.shared_offset = 0 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
    %begin, %end = fa.kv_tile_range %row, %n, %n {block_m = 128 : i64, block_n = 128 : i64}
    scf.for %j = %begin to %end step %c1 {
      %kv_row = arith.muli %j, %c128 : index
      %kt = fa.load_tile %k[%b, %h, %kv_row] sequence(%first, %last) {fa.pipeline_stages = 2 : i64, fa.shared_offset = 16384 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
      // expected-error @+1 {{the producer's transposed V does not take a varlen sequence (its rows past the sequence are not cleared)}}
      %vt = fa.load_tile %v[%b, %h, %kv_row] sequence(%first, %last) {fa.pipeline_stages = 2 : i64, fa.shared_offset = 49152 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
      %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<128x128xf8E4M3FN, #sw>, tensor<128x128xf8E4M3FN, #sw> -> tensor<128x128xf32, #fa.mma<warps = 8>>
      %m0 = arith.constant dense<0xFF800000> : tensor<128xf32, #fa.mma<warps = 8>>
      %l0 = arith.constant dense<0.0> : tensor<128xf32, #fa.mma<warps = 8>>
      %m, %p, %l, %alpha = fa.online_softmax %s, %m0, %l0 {scale = 1.0 : f32} : tensor<128x128xf32, #fa.mma<warps = 8>>, tensor<128xf32, #fa.mma<warps = 8>>
      %vtt = fa.convert_layout %vt {fa.producer_writes, fa.shared_offset = 81920 : i64} : tensor<128x128xf8E4M3FN, #sw> -> tensor<128x128xf8E4M3FN, #swt>
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 115712, stages = 2, registers = 190>}
  return
}

// -----

// Every transposed copy of V (the loop's and a peeled last one) is one
// ring: the same tile type at the same offset.
#sw = #fa.swizzled_shared<bytes = 128>
#swt = #fa.swizzled_shared<bytes = 128, transposed = true>
func.func @transposed_copies_disagree(%q: memref<?x?x?x128xf8E4M3FN>, %k: memref<?x?x?x128xf8E4M3FN>,
                                      %v: memref<?x?x?x128xf8E4M3FN>, %n: index) {
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %row = arith.muli %t, %c128 : index
    %qt = fa.load_tile %q[%b, %h, %row] {fa.shared_offset = 0 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
    %begin, %end = fa.kv_tile_range %row, %n, %n {block_m = 128 : i64, block_n = 128 : i64}
    scf.for %j = %begin to %end step %c1 {
      %kv_row = arith.muli %j, %c128 : index
      %kt = fa.load_tile %k[%b, %h, %kv_row] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 16384 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
      %vt = fa.load_tile %v[%b, %h, %kv_row] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 49152 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
      %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<128x128xf8E4M3FN, #sw>, tensor<128x128xf8E4M3FN, #sw> -> tensor<128x128xf32, #fa.mma<warps = 8>>
      %m0 = arith.constant dense<0xFF800000> : tensor<128xf32, #fa.mma<warps = 8>>
      %l0 = arith.constant dense<0.0> : tensor<128xf32, #fa.mma<warps = 8>>
      %m, %p, %l, %alpha = fa.online_softmax %s, %m0, %l0 {scale = 1.0 : f32} : tensor<128x128xf32, #fa.mma<warps = 8>>, tensor<128xf32, #fa.mma<warps = 8>>
      %vtt = fa.convert_layout %vt {fa.producer_writes, fa.shared_offset = 81920 : i64} : tensor<128x128xf8E4M3FN, #sw> -> tensor<128x128xf8E4M3FN, #swt>
    }
    %last_row = arith.muli %end, %c128 : index
    %vl = fa.load_tile %v[%b, %h, %last_row] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 49152 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
    // expected-error @+1 {{transposed V copies must share their tile type and shared ring}}
    %vlt = fa.convert_layout %vl {fa.producer_writes, fa.shared_offset = 98304 : i64} : tensor<128x128xf8E4M3FN, #sw> -> tensor<128x128xf8E4M3FN, #swt>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 131072, stages = 2, registers = 190>}
  return
}

// -----

// One K/V stage: V tile n's copy would wait for the slot that the producer's
// own transpose of tile n - 1, after that copy, empties (it hung on the GPU).
#sw = #fa.swizzled_shared<bytes = 128>
#swt = #fa.swizzled_shared<bytes = 128, transposed = true>
func.func @one_stage(%q: memref<?x?x?x128xf8E4M3FN>, %k: memref<?x?x?x128xf8E4M3FN>,
                     %v: memref<?x?x?x128xf8E4M3FN>, %n: index) {
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %row = arith.muli %t, %c128 : index
    %qt = fa.load_tile %q[%b, %h, %row] {fa.shared_offset = 0 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
    %begin, %end = fa.kv_tile_range %row, %n, %n {block_m = 128 : i64, block_n = 128 : i64}
    scf.for %j = %begin to %end step %c1 {
      %kv_row = arith.muli %j, %c128 : index
      %kt = fa.load_tile %k[%b, %h, %kv_row] {fa.pipeline_stages = 1 : i64, fa.shared_offset = 16384 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
      %vt = fa.load_tile %v[%b, %h, %kv_row] {fa.pipeline_stages = 1 : i64, fa.shared_offset = 32768 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #sw>
      %s = fa.tile_matmul %qt, %kt {transpose_rhs} : tensor<128x128xf8E4M3FN, #sw>, tensor<128x128xf8E4M3FN, #sw> -> tensor<128x128xf32, #fa.mma<warps = 8>>
      %m0 = arith.constant dense<0xFF800000> : tensor<128xf32, #fa.mma<warps = 8>>
      %l0 = arith.constant dense<0.0> : tensor<128xf32, #fa.mma<warps = 8>>
      %m, %p, %l, %alpha = fa.online_softmax %s, %m0, %l0 {scale = 1.0 : f32} : tensor<128x128xf32, #fa.mma<warps = 8>>, tensor<128xf32, #fa.mma<warps = 8>>
      // expected-error @+1 {{the producer's V transpose needs 2 or more K/V stages, got 1 (with one, V tile n's copy waits for the slot that the transpose of tile n - 1, after it, empties)}}
      %vtt = fa.convert_layout %vt {fa.producer_writes, fa.shared_offset = 49152 : i64} : tensor<128x128xf8E4M3FN, #sw> -> tensor<128x128xf8E4M3FN, #swt>
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 82000, stages = 1, registers = 190>}
  return
}
