// RUN: fa-opt %s --split-input-file --verify-diagnostics

func.func @dynamic_head_dim(%q: memref<?x?x?x?xf32>, %o: memref<?x?x?x?xf32>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{head dimension of the query must be static}}
  fa.attention %q, %q, %q into %o, %lse {scale = 1.0 : f32}
    : memref<?x?x?x?xf32>, memref<?x?x?x?xf32>, memref<?x?x?x?xf32> into memref<?x?x?x?xf32>, memref<?x?x?xf32>
  return
}

// -----

func.func @key_head_dim(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x32xf32>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{key head dimension 32 does not match query head dimension 64}}
  fa.attention %q, %k, %k into %q, %lse {scale = 1.0 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x32xf32>, memref<?x?x?x32xf32> into memref<?x?x?x64xf32>, memref<?x?x?xf32>
  return
}

// -----

func.func @value_element_type(%q: memref<?x?x?x64xf32>, %v: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{value element type 'f16' does not match query element type 'f32'}}
  fa.attention %q, %q, %v into %q, %lse {scale = 1.0 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf16> into memref<?x?x?x64xf32>, memref<?x?x?xf32>
  return
}

// -----

func.func @unsupported_element_type(%q: memref<?x?x?x64xf64>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{operand #0 must be 4D memref of 16-bit float or bfloat16 type or 32-bit float or f8E4M3FN type values}}
  fa.attention %q, %q, %q into %q, %lse {scale = 1.0 : f32}
    : memref<?x?x?x64xf64>, memref<?x?x?x64xf64>, memref<?x?x?x64xf64> into memref<?x?x?x64xf64>, memref<?x?x?xf32>
  return
}

// -----

func.func @kv_lengths(%q: memref<2x4x16x64xf32>, %k: memref<2x4x32x64xf32>, %v: memref<2x4x30x64xf32>, %lse: memref<2x4x16xf32>) {
  // expected-error @+1 {{value sequence length 30 does not match key sequence length 32}}
  fa.attention %q, %k, %v into %q, %lse {scale = 1.0 : f32}
    : memref<2x4x16x64xf32>, memref<2x4x32x64xf32>, memref<2x4x30x64xf32> into memref<2x4x16x64xf32>, memref<2x4x16xf32>
  return
}

// -----

func.func @batch(%q: memref<2x4x16x64xf32>, %k: memref<3x4x16x64xf32>, %lse: memref<2x4x16xf32>) {
  // expected-error @+1 {{key batch size 3 does not match query batch size 2}}
  fa.attention %q, %k, %k into %q, %lse {scale = 1.0 : f32}
    : memref<2x4x16x64xf32>, memref<3x4x16x64xf32>, memref<3x4x16x64xf32> into memref<2x4x16x64xf32>, memref<2x4x16xf32>
  return
}

// -----

func.func @output_length(%q: memref<2x4x16x64xf32>, %o: memref<2x4x8x64xf32>, %lse: memref<2x4x16xf32>) {
  // expected-error @+1 {{output sequence length 8 does not match query sequence length 16}}
  fa.attention %q, %q, %q into %o, %lse {scale = 1.0 : f32}
    : memref<2x4x16x64xf32>, memref<2x4x16x64xf32>, memref<2x4x16x64xf32> into memref<2x4x8x64xf32>, memref<2x4x16xf32>
  return
}

// -----

func.func @lse_heads(%q: memref<2x4x16x64xf32>, %lse: memref<2x2x16xf32>) {
  // expected-error @+1 {{lse head count 2 does not match query head count 4}}
  fa.attention %q, %q, %q into %q, %lse {scale = 1.0 : f32}
    : memref<2x4x16x64xf32>, memref<2x4x16x64xf32>, memref<2x4x16x64xf32> into memref<2x4x16x64xf32>, memref<2x2x16xf32>
  return
}

// -----

func.func @lse_element_type(%q: memref<2x4x16x64xf16>, %lse: memref<2x4x16xf16>) {
  // expected-error @+1 {{operand #4 must be 3D memref of 32-bit float values}}
  fa.attention %q, %q, %q into %q, %lse {scale = 1.0 : f32}
    : memref<2x4x16x64xf16>, memref<2x4x16x64xf16>, memref<2x4x16x64xf16> into memref<2x4x16x64xf16>, memref<2x4x16xf16>
  return
}

// -----

func.func @gqa_groups(%q: memref<1x6x16x64xf32>, %k: memref<1x4x16x64xf32>, %lse: memref<1x6x16xf32>) {
  // expected-error @+1 {{query head count 6 must be a multiple of key/value head count 4}}
  fa.attention %q, %k, %k into %q, %lse {scale = 1.0 : f32}
    : memref<1x6x16x64xf32>, memref<1x4x16x64xf32>, memref<1x4x16x64xf32> into memref<1x6x16x64xf32>, memref<1x6x16xf32>
  return
}

// -----

func.func @scale(%q: memref<?x?x?x64xf32>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{softmax scale must be positive and finite, got -1}}
  fa.attention %q, %q, %q into %q, %lse {scale = -1.0 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32> into memref<?x?x?x64xf32>, memref<?x?x?xf32>
  return
}

// -----

func.func @load_rank(%q: memref<?x?x?x64xf32>, %i: index) {
  // expected-error @+1 {{tile of rank 1 needs a memref of rank 3, got rank 4}}
  %t = fa.load_tile %q[%i, %i, %i] : memref<?x?x?x64xf32> -> tensor<16xf32>
  return
}

// -----

func.func @load_width(%q: memref<?x?x?x64xf32>, %i: index) {
  // expected-error @+1 {{tile dimension 1 (32) must cover memref dimension 3 (64) whole}}
  %t = fa.load_tile %q[%i, %i, %i] : memref<?x?x?x64xf32> -> tensor<16x32xf32>
  return
}

// -----

func.func @load_element_type(%q: memref<?x?x?x64xf16>, %i: index) {
  // expected-error @+1 {{tile element type 'f32' does not match memref element type 'f16'}}
  %t = fa.load_tile %q[%i, %i, %i] : memref<?x?x?x64xf16> -> tensor<16x64xf32>
  return
}

// -----

func.func @store_width(%t: tensor<16x32xf32>, %o: memref<?x?x?x64xf32>, %i: index) {
  // expected-error @+1 {{tile dimension 1 (32) must cover memref dimension 3 (64) whole}}
  fa.store_tile %t, %o[%i, %i, %i] : tensor<16x32xf32> -> memref<?x?x?x64xf32>
  return
}

// -----

func.func @range_block(%i: index) {
  // expected-error @+1 {{attribute 'block_n' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %b, %e = fa.kv_tile_range %i, %i, %i {block_m = 16 : i64, block_n = 0 : i64}
  return
}

// -----

func.func @matmul_contraction(%a: tensor<16x32xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+1 {{contraction sizes differ: lhs has 32, rhs has 16}}
  %s = fa.tile_matmul %a, %b {transpose_rhs} : tensor<16x32xf32>, tensor<8x16xf32> -> tensor<16x8xf32>
  return
}

// -----

func.func @matmul_result(%a: tensor<16x32xf32>, %b: tensor<8x32xf32>) {
  // expected-error @+1 {{result must be 16x8, got 16x16}}
  %s = fa.tile_matmul %a, %b {transpose_rhs} : tensor<16x32xf32>, tensor<8x32xf32> -> tensor<16x16xf32>
  return
}

// -----

func.func @matmul_mixed(%a: tensor<16x8xf32>, %b: tensor<8x32xf16>) {
  // expected-error @+1 {{lhs element type 'f32' does not match rhs element type 'f16'}}
  %s = fa.tile_matmul %a, %b : tensor<16x8xf32>, tensor<8x32xf16> -> tensor<16x32xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<16xf32>, %b: tensor<16x32xf32>) {
  // expected-error @+1 {{operands and result must be 2-d tiles}}
  %s = fa.tile_matmul %a, %b : tensor<16xf32>, tensor<16x32xf32> -> tensor<16x32xf32>
  return
}

// -----

func.func @mask_rank(%s: tensor<16xf32>, %i: index) {
  // expected-error @+1 {{scores must be a 2-d tile}}
  %m = fa.mask %s, %i, %i, %i, %i : tensor<16xf32>
  return
}

// -----

func.func @softmax_rows(%s: tensor<16x8xf32>, %m: tensor<8xf32>) {
  // expected-error @+1 {{running max must hold one value per row of scores (16), got 'tensor<8xf32>'}}
  %a, %b, %c, %d = fa.online_softmax %s, %m, %m {scale = 1.0 : f32} : tensor<16x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @softmax_scale(%s: tensor<16x8xf32>, %m: tensor<16xf32>) {
  // expected-error @+1 {{softmax scale must be positive and finite, got 0}}
  %a, %b, %c, %d = fa.online_softmax %s, %m, %m {scale = 0.0 : f32} : tensor<16x8xf32>, tensor<16xf32>
  return
}

// -----

func.func @rescale_rows(%acc: tensor<16x64xf32>, %f: tensor<32xf32>) {
  // expected-error @+1 {{correction factor must hold one value per row of accumulator (16), got 'tensor<32xf32>'}}
  %r = fa.rescale %acc, %f : tensor<16x64xf32>, tensor<32xf32>
  return
}

// -----

func.func @finalize_rows(%acc: tensor<16x64xf32>, %m: tensor<8xf32>) {
  // expected-error @+1 {{running max must hold one value per row of accumulator (16), got 'tensor<8xf32>'}}
  %o, %l = fa.finalize %acc, %m, %m : tensor<16x64xf32>, tensor<8xf32>
  return
}

// -----

func.func @grid_args(%n: index) {
  // expected-error @+1 {{expected three grid indices and three bounds}}
  fa.grid (%b, %h) in (%n, %n) {
  }
  return
}

// -----

// A static head count of 0 for K/V cannot group the query heads (the check
// once divided by it).
func.func @zero_kv_heads(%q: memref<?x8x?x64xf32>, %k: memref<?x0x?x64xf32>, %lse: memref<?x8x?xf32>) {
  // expected-error @+1 {{key/value head count must be positive, got 0}}
  fa.attention %q, %k, %k into %q, %lse {scale = 1.0 : f32}
    : memref<?x8x?x64xf32>, memref<?x0x?x64xf32>, memref<?x0x?x64xf32> into memref<?x8x?x64xf32>, memref<?x8x?xf32>
  return
}

// -----

func.func @zero_head_dim(%q: memref<?x?x?x0xf32>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{head dimension must be in [1, 512], got 0}}
  fa.attention %q, %q, %q into %q, %lse {scale = 1.0 : f32}
    : memref<?x?x?x0xf32>, memref<?x?x?x0xf32>, memref<?x?x?x0xf32> into memref<?x?x?x0xf32>, memref<?x?x?xf32>
  return
}

// -----

// Head dims beyond what any strategy compiles (2^62 overflowed placement's
// shared-memory arithmetic).
func.func @huge_head_dim(%q: memref<?x?x?x4611686018427387904xf32>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{head dimension must be in [1, 512], got 4611686018427387904}}
  fa.attention %q, %q, %q into %q, %lse {scale = 1.0 : f32}
    : memref<?x?x?x4611686018427387904xf32>, memref<?x?x?x4611686018427387904xf32>, memref<?x?x?x4611686018427387904xf32> into memref<?x?x?x4611686018427387904xf32>, memref<?x?x?xf32>
  return
}

// -----

// Device tensors in global memory, rows contiguous.
func.func @shared_space(%q: memref<?x?x?x64xf32, 3>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{query must be in the default (global) memory space, got 3}}
  fa.attention %q, %q, %q into %q, %lse {scale = 1.0 : f32}
    : memref<?x?x?x64xf32, 3>, memref<?x?x?x64xf32, 3>, memref<?x?x?x64xf32, 3> into memref<?x?x?x64xf32, 3>, memref<?x?x?xf32>
  return
}

// -----

func.func @strided_rows(%q: memref<?x?x?x64xf16, strided<[?, ?, 1, ?]>>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{query must be contiguous in its last dimension (stride 1)}}
  fa.attention %q, %q, %q into %q, %lse {scale = 1.0 : f32}
    : memref<?x?x?x64xf16, strided<[?, ?, 1, ?]>>, memref<?x?x?x64xf16, strided<[?, ?, 1, ?]>>, memref<?x?x?x64xf16, strided<[?, ?, 1, ?]>> into memref<?x?x?x64xf16, strided<[?, ?, 1, ?]>>, memref<?x?x?xf32>
  return
}

// -----

// Tiles are ranked 1 or 2, with fa placements as encodings.
func.func @rank0(%src: memref<?x?xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{result #0 must be f16, bf16, f32 or f8E4M3FN tile (rank 1 or 2, static dims in [1, 65536], no encoding or an fa placement)}}
    %a = fa.load_tile %src[%b, %h, %n] : memref<?x?xf32> -> tensor<f32>
  }
  return
}

// -----

func.func @foreign_encoding(%s: tensor<8x32xf32, #fa.mask<causal>>, %n: index) {
  // expected-error @+1 {{operand #0 must be f32 tile}}
  %m = fa.mask %s, %n, %n, %n, %n {mask = #fa.mask<causal>} : tensor<8x32xf32, #fa.mask<causal>>
  return
}

// -----

// Ops compute on register tiles; a row vector is placed like its tile.
#blocked = #fa.blocked<threads = [8, 32]>
#rows = #fa.blocked<threads = [16, 16]>
func.func @row_vector_placement(%s: tensor<16x32xf32, #blocked>, %m: tensor<16xf32, #rows>) {
  // expected-error @+1 {{running max must be placed like scores}}
  %mn, %p, %l, %a = fa.online_softmax %s, %m, %m {scale = 1.0 : f32} : tensor<16x32xf32, #blocked>, tensor<16xf32, #rows>
  return
}

// -----

func.func @shared_scores(%s: tensor<16x32xf32, #fa.shared<pad = 0>>, %n: index) {
  // expected-error @+1 {{scores must be a register tile}}
  %m = fa.mask %s, %n, %n, %n, %n {mask = #fa.mask<causal>} : tensor<16x32xf32, #fa.shared<pad = 0>>
  return
}

// -----

// A placed program (fa.launch) places every tile, for its strategy.
func.func @unplaced(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{is in a placed program (fa.launch) but its result is not placed: 'tensor<8x64xf32>'}}
    %x = arith.constant dense<0.0> : tensor<8x64xf32>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

func.func @wrong_strategy(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{register tile 'tensor<128x64xf32, #fa.mma<warps = 8>>' is not placed for the program's simt strategy (fragments belong to mma and wgmma)}}
    %x = arith.constant dense<0.0> : tensor<128x64xf32, #fa.mma<warps = 8>>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 0, stages = 1, registers = 32>}
  return
}

// -----

func.func @no_offset(%src: memref<?x?x?x32xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{puts a tile in shared memory in a placed program (fa.launch) without an fa.shared_offset}}
    %a = fa.load_tile %src[%b, %h, %n] : memref<?x?x?x32xf32> -> tensor<8x32xf32, #fa.shared<pad = 0>>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 1024, stages = 1, registers = 32>}
  return
}

// -----

// Program names become part of kernel names.
func.func @bad_program(%n: index) {
  // expected-error @+1 {{program name 'a b/c' must be an identifier ([A-Za-z_][A-Za-z0-9_]*): it becomes part of a kernel's name}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {program = "a b/c"}
  return
}

// -----

// fa.tensor_maps describe a wgmma program's TMA loads.
func.func @maps_on_simt(%n: index) {
  // expected-error @+1 {{fa.tensor_maps describe the TMA loads of a wgmma program; this program is not placed for wgmma}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 0, stages = 1, registers = 32>, fa.tensor_maps = [{arg = 0 : i64, tensor = "q", box_rows = 64 : i64, box_cols = 64 : i64}]}
  return
}

// -----

// fa.async_wait waits for an asynchronous matmul, nothing else.
func.func @wait_for_sync_matmul(%a: tensor<16x16xf16>, %b: tensor<16x16xf16>) -> tensor<16x16xf32> {
  %s = fa.tile_matmul %a, %b : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  // expected-error @+1 {{waits for a tile produced by an async fa.tile_matmul}}
  %w = fa.async_wait %s {pending = 0} : tensor<16x16xf32>
  return %w : tensor<16x16xf32>
}

// -----

// fa.async_wait's `after` tiles start with row sums (f32), the value its
// lowering branches on.
func.func @wait_after_packed_tile(%a: tensor<16x16xf16>, %b: tensor<16x16xf16>, %p: tensor<16x16xf16>) -> tensor<16x16xf32> {
  %s = fa.tile_matmul %a, %b {async} : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  // expected-error @+1 {{takes row sums (f32) first among its `after` tiles, got 'tensor<16x16xf16>'}}
  %w = fa.async_wait %s after(%p : tensor<16x16xf16>) {pending = 0} : tensor<16x16xf32>
  return %w : tensor<16x16xf32>
}

// -----

// An asynchronous product is not ready before its wait.
func.func @read_async_result(%a: tensor<16x16xf16>, %b: tensor<16x16xf16>) -> tensor<16x16xf32> {
  // expected-error @+1 {{the result of an async matmul is read only through fa.async_wait}}
  %s = fa.tile_matmul %a, %b {async} : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  return %s : tensor<16x16xf32>
}

// -----

func.func @negative_pending(%a: tensor<16x16xf16>, %b: tensor<16x16xf16>) -> tensor<16x16xf32> {
  %s = fa.tile_matmul %a, %b {async} : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
  // expected-error @+1 {{pending must be in [0, 7], got -1}}
  %w = fa.async_wait %s {pending = -1} : tensor<16x16xf32>
  return %w : tensor<16x16xf32>
}

// -----

// The backward shares the forward's shape rules...
func.func @backward_heads(%q: memref<?x6x?x64xf32>, %k: memref<?x4x?x64xf32>,
                          %lse: memref<?x6x?xf32>, %acc: memref<?x6x?x64xf32>) {
  // expected-error @+1 {{query head count 6 must be a multiple of key/value head count 4}}
  fa.attention_backward %q, %k, %k, %q, %q, %lse into %q, %k, %k workspace %lse, %acc {scale = 1.0 : f32}
    : memref<?x6x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x6x?x64xf32>, memref<?x6x?x64xf32>, memref<?x6x?xf32>
    into memref<?x6x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32> workspace memref<?x6x?xf32>, memref<?x6x?x64xf32>
  return
}

// -----

// ... and each gradient is shaped and typed like its tensor.
func.func @backward_grad_type(%q: memref<?x4x?x64xf16>, %dk: memref<?x4x?x64xf32>,
                              %lse: memref<?x4x?xf32>, %acc: memref<?x4x?x64xf32>) {
  // expected-error @+1 {{key gradient element type 'f32' must be 'f16'}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %dk, %q workspace %lse, %acc {scale = 1.0 : f32}
    : memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?xf32>
    into memref<?x4x?x64xf16>, memref<?x4x?x64xf32>, memref<?x4x?x64xf16> workspace memref<?x4x?xf32>, memref<?x4x?x64xf32>
  return
}

// -----

func.func @backward_grad_shape(%q: memref<?x4x?x64xf32>, %dq: memref<?x4x?x32xf32>,
                               %lse: memref<?x4x?xf32>, %acc: memref<?x4x?x64xf32>) {
  // expected-error @+1 {{query gradient dimension 3 (32) does not match query (64)}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %dq, %q, %q workspace %lse, %acc {scale = 1.0 : f32}
    : memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?xf32>
    into memref<?x4x?x32xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32> workspace memref<?x4x?xf32>, memref<?x4x?x64xf32>
  return
}

// -----

func.func @backward_grad_output(%q: memref<?x4x?x64xf32>, %do: memref<?x2x?x64xf32>,
                                %lse: memref<?x4x?xf32>, %acc: memref<?x4x?x64xf32>) {
  // expected-error @+1 {{output gradient dimension 1 (2) does not match query (4)}}
  fa.attention_backward %q, %q, %q, %q, %do, %lse into %q, %q, %q workspace %lse, %acc {scale = 1.0 : f32}
    : memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x2x?x64xf32>, memref<?x4x?xf32>
    into memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32> workspace memref<?x4x?xf32>, memref<?x4x?x64xf32>
  return
}

// -----

// The dQ accumulator holds f32 whatever the input type.
func.func @backward_accum_type(%q: memref<?x4x?x64xf16>, %lse: memref<?x4x?xf32>) {
  // expected-error @+1 {{operand #10 must be 4D memref of 32-bit float values}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q workspace %lse, %q {scale = 1.0 : f32}
    : memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?xf32>
    into memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16> workspace memref<?x4x?xf32>, memref<?x4x?x64xf16>
  return
}

// -----

func.func @backward_scale(%q: memref<?x4x?x64xf32>, %lse: memref<?x4x?xf32>) {
  // expected-error @+1 {{softmax scale must be positive and finite, got -1}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q workspace %lse, %q {scale = -1.0 : f32}
    : memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?xf32>
    into memref<?x4x?x64xf32>, memref<?x4x?x64xf32>, memref<?x4x?x64xf32> workspace memref<?x4x?xf32>, memref<?x4x?x64xf32>
  return
}

// -----

func.func @matmul_transposed_lhs(%a: tensor<16x8xf32>, %b: tensor<8x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{contraction sizes differ: lhs has 16, rhs has 8}}
  %r = fa.tile_matmul %a, %b {transpose_lhs} : tensor<16x8xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

func.func @row_dot_rows(%a: tensor<16x32xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{result must hold one value per row of operand (16), got 'tensor<8xf32>'}}
  %r = fa.row_dot %a, %a : tensor<16x32xf32> -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func @recompute_probs_lse(%s: tensor<16x8xf32>, %lse: tensor<8xf32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{lse must hold one value per row of scores (16), got 'tensor<8xf32>'}}
  %p = fa.recompute_probs %s, %lse {scale = 1.0 : f32} : tensor<16x8xf32>, tensor<8xf32>
  return %p : tensor<16x8xf32>
}

// -----

func.func @softmax_grad_scale(%p: tensor<16x8xf32>, %d: tensor<16xf32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{softmax scale must be positive and finite, got 0}}
  %ds = fa.softmax_grad %p, %p, %d {scale = 0.0 : f32} : tensor<16x8xf32>, tensor<16xf32>
  return %ds : tensor<16x8xf32>
}

// -----

// dQ is accumulated in f32.
func.func @accumulate_f16(%t: tensor<16x32xf32>, %m: memref<?x?x?x32xf16>, %i: index) {
  // expected-error @+1 {{accumulates into an f32 memref, got 'f16'}}
  fa.accumulate_tile %t, %m[%i, %i, %i] : tensor<16x32xf32> -> memref<?x?x?x32xf16>
  return
}

// -----

func.func @accumulate_width(%t: tensor<16x32xf32>, %m: memref<?x?x?x64xf32>, %i: index) {
  // expected-error @+1 {{tile dimension 1 (32) must cover memref dimension 3 (64) whole}}
  fa.accumulate_tile %t, %m[%i, %i, %i] : tensor<16x32xf32> -> memref<?x?x?x64xf32>
  return
}

// -----

// A placed program's shared tiles (with their ring slots) lie inside its
// shared memory.
func.func @past_shared_bytes(%src: memref<?x?x?x32xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{places 2048 bytes of shared memory at offset 1024, past the program's shared_bytes = 2048}}
    %a = fa.load_tile %src[%b, %h, %n] {fa.shared_offset = 1024 : i64, fa.pipeline_stages = 2 : i64} : memref<?x?x?x32xf32> -> tensor<8x32xf32, #fa.shared<pad = 0>>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 2048, stages = 2, registers = 32>}
  return
}

// -----

// The mma strategy moves shared rows in 16-byte chunks.
func.func @mma_row_chunks(%src: memref<?x?x?x64xf16>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{rows of 64 + pad 1 elements are not whole 16-byte chunks, which the mma strategy's copies and ldmatrix need}}
    %a = fa.load_tile %src[%b, %h, %n] {fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #fa.shared<pad = 1>>
  } attributes {fa.launch = #fa.launch<strategy = mma, threads = 128, shared_bytes = 16384, stages = 1, registers = 32>}
  return
}

// -----

// Two shared tiles share bytes only as one buffer (same offset and size:
// the mma backward stages P, then dS, in one).
func.func @overlapping_tiles(%src: memref<?x?x?x32xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-note @+1 {{that tile}}
    %a = fa.load_tile %src[%b, %h, %n] {fa.shared_offset = 0 : i64} : memref<?x?x?x32xf32> -> tensor<8x32xf32, #fa.shared<pad = 0>>
    // expected-error @+1 {{places shared bytes [512, 1536) over another tile's [0, 1024)}}
    %c = fa.load_tile %src[%b, %h, %n] {fa.shared_offset = 512 : i64} : memref<?x?x?x32xf32> -> tensor<8x32xf32, #fa.shared<pad = 0>>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 2048, stages = 1, registers = 32>}
  return
}

// -----

// Loaded tiles are live together: V at K's offset (same range) is an
// error, not a shared buffer.
func.func @value_on_key_bytes(%k: memref<?x?x?x32xf32>, %v: memref<?x?x?x32xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-note @+1 {{that tile}}
    %a = fa.load_tile %k[%b, %h, %n] {fa.shared_offset = 0 : i64} : memref<?x?x?x32xf32> -> tensor<8x32xf32, #fa.shared<pad = 0>>
    // expected-error @+1 {{places shared bytes [0, 1024) on a loaded tile's: loaded tiles are live together and share bytes with no other tile}}
    %c = fa.load_tile %v[%b, %h, %n] {fa.shared_offset = 0 : i64} : memref<?x?x?x32xf32> -> tensor<8x32xf32, #fa.shared<pad = 0>>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 2048, stages = 1, registers = 32>}
  return
}

// -----

// Nor does a staged tile take a loaded tile's bytes.
func.func @staged_on_loaded_bytes(%k: memref<?x?x?x32xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-note @+1 {{that tile}}
    %a = fa.load_tile %k[%b, %h, %n] {fa.shared_offset = 0 : i64} : memref<?x?x?x32xf32> -> tensor<8x32xf32, #fa.shared<pad = 0>>
    %r = arith.constant dense<0.0> : tensor<8x32xf32, #fa.blocked<threads = [8, 32]>>
    // expected-error @+1 {{places shared bytes [0, 1024) on a loaded tile's}}
    %s = fa.convert_layout %r {fa.shared_offset = 0 : i64} : tensor<8x32xf32, #fa.blocked<threads = [8, 32]>> -> tensor<8x32xf32, #fa.shared<pad = 0>>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 2048, stages = 1, registers = 32>}
  return
}

// -----

// wgmma's swizzled tiles start on 1024-byte swizzle atoms.
func.func @swizzle_atom(%src: memref<?x?x?x64xf16>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{places a swizzled tile at offset 512, not a multiple of the 1024-byte swizzle atom}}
    %a = fa.load_tile %src[%b, %h, %n] {fa.shared_offset = 512 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #fa.swizzled_shared<bytes = 128>>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 16384, stages = 1, registers = 32>}
  return
}

// -----

// A K/V range agrees with the loop it bounds: the tiles it loads have
// block_n rows (a range for 64-row tiles over 32-row loads would skip
// keys) ...
func.func @range_block_disagrees(%k: memref<?x?x?x32xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'fa.kv_tile_range' op bounds a loop that loads tiles of 32 rows, but block_n is 64}}
  %begin, %end = fa.kv_tile_range %n, %n, %n {block_m = 16 : i64, block_n = 64 : i64, mask = #fa.mask<causal>}
  scf.for %j = %begin to %end step %c1 {
    // expected-note @+1 {{that load}}
    %t = fa.load_tile %k[%n, %n, %j] : memref<?x?x?x32xf32> -> tensor<32x32xf32>
  }
  return
}

// -----

// ... and a causal range (which skips the tiles past the diagonal) bounds
// only a loop whose mask is causal too.
func.func @range_mask_disagrees(%k: memref<?x?x?x32xf32>, %s: tensor<16x32xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'fa.kv_tile_range' op skips the tiles of a causal mask, but the loop it bounds masks with none}}
  %begin, %end = fa.kv_tile_range %n, %n, %n {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
  scf.for %j = %begin to %end step %c1 {
    %t = fa.load_tile %k[%n, %n, %j] : memref<?x?x?x32xf32> -> tensor<32x32xf32>
    // expected-note @+1 {{that mask}}
    %m = fa.mask %s, %n, %j, %n, %n : tensor<16x32xf32>
  }
  return
}

// -----

// The backward's query range likewise: loads of block_m rows.
func.func @q_range_block_disagrees(%q: memref<?x?x?x32xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'fa.q_tile_range' op bounds a loop that loads tiles of 16 rows, but block_m is 32}}
  %begin, %end = fa.q_tile_range %n, %n, %n {block_m = 32 : i64, block_n = 32 : i64}
  scf.for %i = %begin to %end step %c1 {
    // expected-note @+1 {{that load}}
    %t = fa.load_tile %q[%n, %n, %i] : memref<?x?x?x32xf32> -> tensor<16x32xf32>
  }
  return
}

// -----

// A varlen batch packs queries and keys alike: both offset tables.
func.func @varlen_one_table(%q: memref<1x?x?x64xf16>, %lse: memref<1x?x?xf32>, %cq: memref<?xi32>) {
  // expected-error @+1 {{takes cu_seqlens_q and cu_seqlens_k together}}
  "fa.attention"(%q, %q, %q, %q, %lse, %cq) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, scale = 1.0 : f32}> ({}, {})
    : (memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?xf32>, memref<?xi32>) -> ()
  return
}

// -----

func.func @varlen_table_sizes(%q: memref<1x?x?x64xf16>, %lse: memref<1x?x?xf32>, %cq: memref<3xi32>, %ck: memref<4xi32>) {
  // expected-error @+1 {{cu_seqlens_q (3 entries) and cu_seqlens_k (4) must have one entry per sequence and one more each}}
  fa.attention %q, %q, %q into %q, %lse cu_seqlens(%cq, %ck) {scale = 1.0 : f32}
    : memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?x64xf16> into memref<1x?x?x64xf16>, memref<1x?x?xf32>
      cu_seqlens memref<3xi32>, memref<4xi32>
  return
}

// -----

func.func @varlen_empty_table(%q: memref<1x?x?x64xf16>, %lse: memref<1x?x?xf32>, %c: memref<0xi32>) {
  // expected-error @+1 {{cu_seqlens_q must hold at least one entry}}
  fa.attention %q, %q, %q into %q, %lse cu_seqlens(%c, %c) {scale = 1.0 : f32}
    : memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?x64xf16> into memref<1x?x?x64xf16>, memref<1x?x?xf32>
      cu_seqlens memref<0xi32>, memref<0xi32>
  return
}

// -----

func.func @varlen_batch(%q: memref<2x?x?x64xf16>, %lse: memref<2x?x?xf32>, %c: memref<?xi32>) {
  // expected-error @+1 {{with cu_seqlens the tensors hold one packed batch: batch dimension 2 of 'memref<2x?x?x64xf16>' must be 1}}
  fa.attention %q, %q, %q into %q, %lse cu_seqlens(%c, %c) {scale = 1.0 : f32}
    : memref<2x?x?x64xf16>, memref<2x?x?x64xf16>, memref<2x?x?x64xf16> into memref<2x?x?x64xf16>, memref<2x?x?xf32>
      cu_seqlens memref<?xi32>, memref<?xi32>
  return
}

// -----

func.func @varlen_block_mask(%q: memref<1x?x?x64xf16>, %lse: memref<1x?x?xf32>, %c: memref<?xi32>, %r: memref<?x?x?x4xi32>) {
  // expected-error @+1 {{does not take a block mask (key_ranges) with cu_seqlens yet}}
  fa.attention %q, %q, %q into %q, %lse key_ranges %r cu_seqlens(%c, %c) {scale = 1.0 : f32}
    : memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?x64xf16> into memref<1x?x?x64xf16>, memref<1x?x?xf32>
      key_ranges memref<?x?x?x4xi32> cu_seqlens memref<?xi32>, memref<?xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %sq: index, %sk: index):
      %t = arith.cmpi sle, %j, %i : index
      fa.yield %t : i1
    }
  return
}

// -----

// A sequence is its first row and its end.
func.func @load_tile_sequence(%k: memref<1x?x?x64xf16>, %i: index) -> tensor<32x64xf16> {
  // expected-error @+1 {{takes a sequence as (first, end), got 1 values}}
  %t = fa.load_tile %k[%i, %i, %i] sequence(%i) : memref<1x?x?x64xf16> -> tensor<32x64xf16>
  return %t : tensor<32x64xf16>
}

// -----

// A paged load counts its rows in the sequence its pages hold: it needs the
// sequence's end.
func.func @load_tile_pages_without_sequence(%k: memref<?x?x?x64xf16>, %table: memref<?x?xi32>, %i: index) -> tensor<32x64xf16> {
  // expected-error @+1 {{a paged load (pages) needs its sequence(first, end): the end is the number of rows its pages hold}}
  %t = fa.load_tile %k[%i, %i, %i] pages(%table : memref<?x?xi32>) : memref<?x?x?x64xf16> -> tensor<32x64xf16>
  return %t : tensor<32x64xf16>
}

// -----

func.func @load_tile_pages_type(%k: memref<?x?x?x64xf16>, %table: memref<?x?xi64>, %i: index) -> tensor<32x64xf16> {
  // expected-error @+1 {{must be 2D memref of 32-bit signless integer values, but got 'memref<?x?xi64>'}}
  %t = fa.load_tile %k[%i, %i, %i] sequence(%i, %i) pages(%table : memref<?x?xi64>) : memref<?x?x?x64xf16> -> tensor<32x64xf16>
  return %t : tensor<32x64xf16>
}

// -----

func.func @accumulate_tile_sequence(%t: tensor<16x64xf32>, %acc: memref<1x?x?x64xf32>, %i: index) {
  // expected-error @+1 {{takes a sequence as (first, end), got 3 values}}
  fa.accumulate_tile %t, %acc[%i, %i, %i] sequence(%i, %i, %i) : tensor<16x64xf32> -> memref<1x?x?x64xf32>
  return
}

// -----

// kv_lens: one length per batch entry (per sequence with cu_seqlens).
func.func @kv_lens_size(%q: memref<2x?x?x64xf16>, %lse: memref<2x?x?xf32>, %l: memref<3xi32>) {
  // expected-error @+1 {{kv_lens holds 3 entries; it needs one per batch entry (2)}}
  fa.attention %q, %q, %q into %q, %lse kv_lens %l {scale = 1.0 : f32}
    : memref<2x?x?x64xf16>, memref<2x?x?x64xf16>, memref<2x?x?x64xf16> into memref<2x?x?x64xf16>, memref<2x?x?xf32>
      kv_lens memref<3xi32>
  return
}

// -----

func.func @kv_lens_varlen_size(%q: memref<1x?x?x64xf16>, %lse: memref<1x?x?xf32>, %c: memref<4xi32>, %l: memref<4xi32>) {
  // expected-error @+1 {{kv_lens holds 4 entries; it needs one per sequence (3)}}
  fa.attention %q, %q, %q into %q, %lse cu_seqlens(%c, %c) kv_lens %l {scale = 1.0 : f32}
    : memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?x64xf16> into memref<1x?x?x64xf16>, memref<1x?x?xf32>
      cu_seqlens memref<4xi32>, memref<4xi32> kv_lens memref<4xi32>
  return
}

// -----

func.func @kv_lens_block_mask(%q: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>, %l: memref<?xi32>, %r: memref<?x?x?x4xi32>) {
  // expected-error @+1 {{does not take a block mask (key_ranges) with kv_lens yet}}
  fa.attention %q, %q, %q into %q, %lse key_ranges %r kv_lens %l {scale = 1.0 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16> into memref<?x?x?x64xf16>, memref<?x?x?xf32>
      key_ranges memref<?x?x?x4xi32> kv_lens memref<?xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %sq: index, %sk: index):
      %t = arith.cmpi sle, %j, %i : index
      fa.yield %t : i1
    }
  return
}

// -----

// The varlen backward: both tables, batch 1 everywhere (the workspaces
// too), not deterministic yet.
func.func @varlen_backward_batch(%q: memref<1x?x?x64xf16>, %lse: memref<1x?x?xf32>,
                                 %acc: memref<2x?x?x64xf32>, %c: memref<?xi32>) {
  // expected-error @+1 {{dq_accum workspace}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q
      workspace %lse, %acc cu_seqlens(%c, %c) {scale = 1.0 : f32}
    : memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?x64xf16>,
      memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?xf32>
    into memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?x64xf16>
    workspace memref<1x?x?xf32>, memref<2x?x?x64xf32>
    cu_seqlens memref<?xi32>, memref<?xi32>
  return
}

// -----

// A varlen batch's turn counters: one per sequence (not per the packed
// tensors' one batch entry).
func.func @varlen_backward_deterministic(%q: memref<1x?x?x64xf16>, %lse: memref<1x?x?xf32>,
                                         %acc: memref<1x?x?x64xf32>, %order: memref<1x?x?xi32>,
                                         %c: memref<4xi32>) {
  // expected-error @+1 {{dq_order dimension 0 (1) does not match the sequences (3)}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q
      workspace %lse, %acc, %order cu_seqlens(%c, %c) {scale = 1.0 : f32}
    : memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?x64xf16>,
      memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?xf32>
    into memref<1x?x?x64xf16>, memref<1x?x?x64xf16>, memref<1x?x?x64xf16>
    workspace memref<1x?x?xf32>, memref<1x?x?x64xf32>, memref<1x?x?xi32>
    cu_seqlens memref<4xi32>, memref<4xi32>
  return
}

// -----

// fa.capture_load marks a load of a captured tensor (fa-hoist-capture-loads
// may move it): only memref.load carries it.
func.func @capture_load_on_another_op(%t: memref<?xf32>, %i: index) -> f32 {
  %c = arith.constant 0.0 : f32
  // expected-error @+1 {{'fa.capture_load' is a unit attribute of memref.load}}
  %s = arith.addf %c, %c {fa.capture_load} : f32
  return %s : f32
}

// -----

func.func @capture_load_not_unit(%t: memref<?xf32>, %i: index) -> f32 {
  // expected-error @+1 {{'fa.capture_load' is a unit attribute of memref.load}}
  %v = memref.load %t[%i] {fa.capture_load = 1 : i64} : memref<?xf32>
  return %v : f32
}

// -----

// fa.skip_unit_factors marks an accumulator's rescale and its softmax (a
// unit attribute).
func.func @skip_unit_factors_on_a_matmul(%a: tensor<16x16xf32>) {
  // expected-error @+1 {{'fa.skip_unit_factors' is a unit attribute of fa.rescale and fa.online_softmax}}
  %s = fa.tile_matmul %a, %a {fa.skip_unit_factors} : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  return
}

// -----

func.func @skip_unit_factors_not_unit(%acc: tensor<16x64xf32>, %f: tensor<16xf32>) {
  // expected-error @+1 {{'fa.skip_unit_factors' is a unit attribute of fa.rescale and fa.online_softmax}}
  %r = fa.rescale %acc, %f {fa.skip_unit_factors = true} : tensor<16x64xf32>, tensor<16xf32>
  return
}

// -----

// fa.unchecked_key_loads versions a mask_mod's loads: a unit attribute of
// fa.mask with a mask_mod.
func.func @unchecked_key_loads_without_mask_mod(%s: tensor<16x32xf32>, %i: index) -> tensor<16x32xf32> {
  // expected-error @+1 {{'fa.unchecked_key_loads' is a unit attribute of fa.mask with a mask_mod}}
  %m = fa.mask %s, %i, %i, %i, %i {fa.unchecked_key_loads} : tensor<16x32xf32>
  return %m : tensor<16x32xf32>
}

// -----

func.func @unchecked_key_loads_on_a_rescale(%acc: tensor<16x64xf32>, %f: tensor<16xf32>) {
  // expected-error @+1 {{'fa.unchecked_key_loads' is a unit attribute of fa.mask with a mask_mod}}
  %r = fa.rescale %acc, %f {fa.unchecked_key_loads} : tensor<16x64xf32>, tensor<16xf32>
  return
}

// -----

// fa.hoist_capture_loads marks the branch whose capture loads may leave it.
func.func @hoist_capture_loads_on_a_loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'fa.hoist_capture_loads' is a unit attribute of scf.if}}
  scf.for %i = %c0 to %n step %c1 {
  } {fa.hoist_capture_loads}
  return
}

// -----

func.func @hoist_capture_loads_not_unit(%c: i1) {
  // expected-error @+1 {{'fa.hoist_capture_loads' is a unit attribute of scf.if}}
  scf.if %c {
  } {fa.hoist_capture_loads = "yes"}
  return
}

// -----

// Split-KV partials: f32, the output's heads, rows and head dim, one batch
// entry per part and batch entry, the LSE's alike.
func.func @partials_f16(%q: memref<2x?x?x64xf16>, %lse: memref<2x?x?xf32>, %plse: memref<4x?x?xf32>) {
  // expected-error @+1 {{partial output element type 'f16' must be f32}}
  fa.attention %q, %q, %q into %q, %lse partials(%q, %plse) {scale = 1.0 : f32}
    : memref<2x?x?x64xf16>, memref<2x?x?x64xf16>, memref<2x?x?x64xf16> into memref<2x?x?x64xf16>, memref<2x?x?xf32>
      partials memref<2x?x?x64xf16>, memref<4x?x?xf32>
  return
}

// -----

func.func @partials_one(%q: memref<2x?x?x64xf16>, %lse: memref<2x?x?xf32>, %plse: memref<4x?x?xf32>) {
  // expected-error @+1 {{takes partial_output and partial_lse together}}
  "fa.attention"(%q, %q, %q, %q, %lse, %plse) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0>, scale = 1.0 : f32}> ({}, {})
    : (memref<2x?x?x64xf16>, memref<2x?x?x64xf16>, memref<2x?x?x64xf16>, memref<2x?x?x64xf16>, memref<2x?x?xf32>, memref<4x?x?xf32>) -> ()
  return
}

// -----

func.func @partials_parts(%q: memref<2x?x?x64xf16>, %lse: memref<2x?x?xf32>, %po: memref<5x?x?x64xf32>, %plse: memref<5x?x?xf32>) {
  // expected-error @+1 {{partial output holds 5 batch entries: it needs one per part and batch entry, a multiple of output's 2}}
  fa.attention %q, %q, %q into %q, %lse partials(%po, %plse) {scale = 1.0 : f32}
    : memref<2x?x?x64xf16>, memref<2x?x?x64xf16>, memref<2x?x?x64xf16> into memref<2x?x?x64xf16>, memref<2x?x?xf32>
      partials memref<5x?x?x64xf32>, memref<5x?x?xf32>
  return
}

// -----

func.func @partials_head_dim(%q: memref<2x?x?x64xf16>, %lse: memref<2x?x?xf32>, %po: memref<4x?x?x32xf32>, %plse: memref<4x?x?xf32>) {
  // expected-error @+1 {{partial output dimension 3 (32) does not match output (64)}}
  fa.attention %q, %q, %q into %q, %lse partials(%po, %plse) {scale = 1.0 : f32}
    : memref<2x?x?x64xf16>, memref<2x?x?x64xf16>, memref<2x?x?x64xf16> into memref<2x?x?x64xf16>, memref<2x?x?xf32>
      partials memref<4x?x?x32xf32>, memref<4x?x?xf32>
  return
}

// -----

func.func @partials_lse_heads(%q: memref<2x8x?x64xf16>, %lse: memref<2x8x?xf32>, %po: memref<4x8x?x64xf32>, %plse: memref<4x4x?xf32>) {
  // expected-error @+1 {{partial lse dimension 1 (4) does not match lse (8)}}
  fa.attention %q, %q, %q into %q, %lse partials(%po, %plse) {scale = 1.0 : f32}
    : memref<2x8x?x64xf16>, memref<2x8x?x64xf16>, memref<2x8x?x64xf16> into memref<2x8x?x64xf16>, memref<2x8x?xf32>
      partials memref<4x8x?x64xf32>, memref<4x4x?xf32>
  return
}

// -----

func.func @partials_mismatch(%q: memref<2x?x?x64xf16>, %lse: memref<2x?x?xf32>, %po: memref<4x?x?x64xf32>, %plse: memref<6x?x?xf32>) {
  // expected-error @+1 {{partial output holds 4 batch entries, partial lse 6: they must match}}
  fa.attention %q, %q, %q into %q, %lse partials(%po, %plse) {scale = 1.0 : f32}
    : memref<2x?x?x64xf16>, memref<2x?x?x64xf16>, memref<2x?x?x64xf16> into memref<2x?x?x64xf16>, memref<2x?x?xf32>
      partials memref<4x?x?x64xf32>, memref<6x?x?xf32>
  return
}

// -----

func.func @partials_block_mask(%q: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>, %po: memref<?x?x?x64xf32>, %plse: memref<?x?x?xf32>, %r: memref<?x?x?x4xi32>) {
  // expected-error @+1 {{does not take a block mask (key_ranges) with partials (split-KV) yet}}
  fa.attention %q, %q, %q into %q, %lse key_ranges %r partials(%po, %plse) {scale = 1.0 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16> into memref<?x?x?x64xf16>, memref<?x?x?xf32>
      key_ranges memref<?x?x?x4xi32> partials memref<?x?x?x64xf32>, memref<?x?x?xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %sq: index, %sk: index):
      %t = arith.cmpi sle, %j, %i : index
      fa.yield %t : i1
    }
  return
}

// -----

func.func @merge_rows(%o: tensor<16x64xf32>, %lse: tensor<8xf32>) {
  // expected-error @+1 {{lse must hold one value per row of output (16), got 'tensor<8xf32>'}}
  %o2, %l2 = fa.merge_partial %o, %lse with %o, %lse : tensor<16x64xf32>, tensor<8xf32>
  return
}

// -----

// A page table: one row per batch entry, not with varlen; K's batch is the
// pool's pages (not checked against Q's).
func.func @block_table_rows(%q: memref<2x?x?x64xf16>, %k: memref<9x?x?x64xf16>, %lse: memref<2x?x?xf32>, %t: memref<3x?xi32>) {
  // expected-error @+1 {{block_table holds 3 rows; it needs one per batch entry (2)}}
  fa.attention %q, %k, %k into %q, %lse block_table %t {scale = 1.0 : f32}
    : memref<2x?x?x64xf16>, memref<9x?x?x64xf16>, memref<9x?x?x64xf16> into memref<2x?x?x64xf16>, memref<2x?x?xf32>
      block_table memref<3x?xi32>
  return
}

// -----

// A paged varlen batch: a table row per sequence (K, V: the pool).
func.func @block_table_varlen(%q: memref<1x?x?x64xf16>, %k: memref<9x?x?x64xf16>, %lse: memref<1x?x?xf32>, %c: memref<4xi32>, %t: memref<2x?xi32>) {
  // expected-error @+1 {{block_table holds 2 rows; it needs one per sequence (3)}}
  fa.attention %q, %k, %k into %q, %lse cu_seqlens(%c, %c) block_table %t {scale = 1.0 : f32}
    : memref<1x?x?x64xf16>, memref<9x?x?x64xf16>, memref<9x?x?x64xf16> into memref<1x?x?x64xf16>, memref<1x?x?xf32>
      cu_seqlens memref<4xi32>, memref<4xi32> block_table memref<2x?xi32>
  return
}

// -----

// K/V entries by index: one per batch entry, not with pages.
func.func @cache_batch_idx_size(%q: memref<2x?x?x64xf16>, %k: memref<5x?x?x64xf16>, %lse: memref<2x?x?xf32>, %i: memref<3xi32>) {
  // expected-error @+1 {{cache_batch_idx holds 3 entries; it needs one per batch entry (2)}}
  fa.attention %q, %k, %k into %q, %lse cache_batch_idx %i {scale = 1.0 : f32}
    : memref<2x?x?x64xf16>, memref<5x?x?x64xf16>, memref<5x?x?x64xf16> into memref<2x?x?x64xf16>, memref<2x?x?xf32>
      cache_batch_idx memref<3xi32>
  return
}

// -----

func.func @cache_batch_idx_paged(%q: memref<2x?x?x64xf16>, %k: memref<5x?x?x64xf16>, %lse: memref<2x?x?xf32>, %i: memref<2xi32>, %t: memref<2x?xi32>) {
  // expected-error @+1 {{does not take cache_batch_idx with a block_table yet}}
  fa.attention %q, %k, %k into %q, %lse block_table %t cache_batch_idx %i {scale = 1.0 : f32}
    : memref<2x?x?x64xf16>, memref<5x?x?x64xf16>, memref<5x?x?x64xf16> into memref<2x?x?x64xf16>, memref<2x?x?xf32>
      block_table memref<2x?xi32> cache_batch_idx memref<2xi32>
  return
}

// -----

func.func @float8_output(%q: memref<?x?x?x64xf8E4M3FN>, %o: memref<?x?x?x64xf32>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{with f8E4M3FN inputs writes an f16 or bf16 output, got 'f32'}}
  fa.attention %q, %q, %q into %o, %lse {scale = 1.0 : f32}
    : memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN> into memref<?x?x?x64xf32>, memref<?x?x?xf32>
  return
}

// -----

func.func @float8_key_type(%q: memref<?x?x?x64xf8E4M3FN>, %k: memref<?x?x?x64xbf16>, %o: memref<?x?x?x64xbf16>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{key element type 'bf16' does not match query element type 'f8E4M3FN'}}
  fa.attention %q, %k, %q into %o, %lse {scale = 1.0 : f32}
    : memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xbf16>, memref<?x?x?x64xf8E4M3FN> into memref<?x?x?x64xbf16>, memref<?x?x?xf32>
  return
}

// -----

func.func @descales_without_float8(%q: memref<?x?x?x64xbf16>, %lse: memref<?x?x?xf32>, %d: memref<?x?xf32>) {
  // expected-error @+1 {{takes descales with f8E4M3FN inputs only, got 'bf16'}}
  fa.attention %q, %q, %q into %q, %lse descales(%d, %d, %d) {scale = 1.0 : f32}
    : memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16> into memref<?x?x?x64xbf16>, memref<?x?x?xf32>
    descales memref<?x?xf32>, memref<?x?xf32>, memref<?x?xf32>
  return
}

// -----

func.func @descale_shape(%q: memref<2x8x16x64xf8E4M3FN>, %k: memref<2x4x16x64xf8E4M3FN>, %o: memref<2x8x16x64xbf16>, %lse: memref<2x8x16xf32>, %d: memref<2x4xf32>, %bad: memref<2x8xf32>) {
  // expected-error @+1 {{v_descale is [2, 8]; it needs one factor per batch entry and K/V head [2, 4]}}
  fa.attention %q, %k, %k into %o, %lse descales(%d, %d, %bad) {scale = 1.0 : f32}
    : memref<2x8x16x64xf8E4M3FN>, memref<2x4x16x64xf8E4M3FN>, memref<2x4x16x64xf8E4M3FN> into memref<2x8x16x64xbf16>, memref<2x8x16xf32>
    descales memref<2x4xf32>, memref<2x4xf32>, memref<2x8xf32>
  return
}

// -----

func.func @descales_all_or_none(%q: memref<?x?x?x64xf8E4M3FN>, %o: memref<?x?x?x64xbf16>, %lse: memref<?x?x?xf32>, %d: memref<?x?xf32>) {
  // expected-error @+1 {{takes the three descales (q, k, v) or none}}
  "fa.attention"(%q, %q, %q, %o, %lse, %d) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0>, scale = 1.0 : f32}> ({}, {})
    : (memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xbf16>, memref<?x?x?xf32>, memref<?x?xf32>) -> ()
  return
}

// -----

func.func @float8_backward(%q: memref<?x?x?x64xf8E4M3FN>, %lse: memref<?x?x?xf32>, %acc: memref<?x?x?x64xf32>) {
  // expected-error @+1 {{takes f16, bf16 or f32 tensors: f8E4M3FN is a forward input type}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q workspace %lse, %acc {scale = 1.0 : f32}
    : memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?xf32>
    into memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN> workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
  return
}

// -----

func.func @probs_scale(%s: tensor<16x8xf32>, %m: tensor<16xf32>) {
  // expected-error @+1 {{probs_scale must be a positive power of two, got 3}}
  %a, %b, %c, %d = fa.online_softmax %s, %m, %m {scale = 1.0 : f32, probs_scale = 3.0 : f32} : tensor<16x8xf32>, tensor<16xf32>
  return
}

// -----

// fa.copy_tile keeps the shape and element type.
func.func @copy_tile_shape(%v: tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>>, %v_t: tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>) {
  // expected-error @+1 {{must keep the shape and element type}}
  fa.copy_tile %v into %v_t : tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>> into tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
  return
}

// -----

// fa.copy_tile copies between shared buffers only.
func.func @copy_tile_registers(%v: tensor<128x128xf16, #fa.mma<warps = 4>>, %v_t: tensor<128x128xf16, #fa.swizzled_shared<bytes = 128>>) {
  // expected-error @+1 {{copies between shared buffers: both types need a #fa.swizzled_shared placement}}
  fa.copy_tile %v into %v_t : tensor<128x128xf16, #fa.mma<warps = 4>> into tensor<128x128xf16, #fa.swizzled_shared<bytes = 128>>
  return
}

// -----

// A part without the number of parts (only the generic form can say it).
func.func @kv_range_part_alone(%i: index) {
  // expected-error @+1 {{'fa.kv_tile_range' op takes a part and the number of parts together}}
  %b, %e = "fa.kv_tile_range"(%i, %i, %i, %i) <{block_m = 16 : i64, block_n = 8 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 1, 0>}> ({
  }) : (index, index, index, index) -> (index, index)
  return
}

// -----

// fa.tile_total synchronizes the program's threads: not inside a loop or a
// branch that some may skip.
func.func @tile_total_in_a_loop(%t: tensor<16xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    // expected-error @+1 {{'fa.tile_total' op must be at the top level of a program (every thread reaches it: it synchronizes them), not inside 'scf.for'}}
    %total = fa.tile_total %t : tensor<16xf32>
  }
  return
}

// -----

// dq_chains splits the deterministic mode's turns: it needs dq_order.
func.func @dq_chains_without_order(%q: memref<?x4x?x64xf16>, %lse: memref<?x4x?xf32>,
                                   %acc: memref<?x8x?x64xf32>) {
  // expected-error @+1 {{dq_chains = 2 splits the deterministic mode's turns: it needs dq_order}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q
      workspace %lse, %acc {scale = 1.0 : f32, dq_chains = 2 : i64}
    : memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>,
      memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?xf32>
    into memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>
    workspace memref<?x4x?xf32>, memref<?x8x?x64xf32>
  return
}

// -----

func.func @dq_chains_too_many(%q: memref<?x4x?x64xf16>, %lse: memref<?x4x?xf32>,
                              %acc: memref<?x36x?x64xf32>, %order: memref<?x36x?xi32>) {
  // expected-error @+1 {{dq_chains must be in [1, 8], got 9}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q
      workspace %lse, %acc, %order {scale = 1.0 : f32, dq_chains = 9 : i64}
    : memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>,
      memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?xf32>
    into memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>
    workspace memref<?x4x?xf32>, memref<?x36x?x64xf32>, memref<?x36x?xi32>
  return
}

// -----

// dq_accum holds dq_chains copies of the heads.
func.func @dq_chains_accum_heads(%q: memref<?x4x?x64xf16>, %lse: memref<?x4x?xf32>,
                                 %acc: memref<?x4x?x64xf32>, %order: memref<?x12x?xi32>) {
  // expected-error @+1 {{dq_accum workspace dimension 1 (4) does not match query (its heads times dq_chains) (12)}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q
      workspace %lse, %acc, %order {scale = 1.0 : f32, dq_chains = 3 : i64}
    : memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>,
      memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?xf32>
    into memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>
    workspace memref<?x4x?xf32>, memref<?x4x?x64xf32>, memref<?x12x?xi32>
  return
}

// -----

// And so does dq_order.
func.func @dq_chains_order_heads(%q: memref<?x4x?x64xf16>, %lse: memref<?x4x?xf32>,
                                 %acc: memref<?x12x?x64xf32>, %order: memref<?x4x?xi32>) {
  // expected-error @+1 {{dq_order dimension 1 (4) does not match query (12: its heads times dq_chains)}}
  fa.attention_backward %q, %q, %q, %q, %q, %lse into %q, %q, %q
      workspace %lse, %acc, %order {scale = 1.0 : f32, dq_chains = 3 : i64}
    : memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>,
      memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?xf32>
    into memref<?x4x?x64xf16>, memref<?x4x?x64xf16>, memref<?x4x?x64xf16>
    workspace memref<?x4x?xf32>, memref<?x12x?x64xf32>, memref<?x4x?xi32>
  return
}

// -----

// A hole is of one range: its [begin, end) on the same tiles.
func.func @hole_of_another_range(%i: index, %b: index, %h: index) {
  %begin, %end = fa.kv_tile_range %i, %i, %i {block_m = 16 : i64, block_n = 32 : i64}
  // expected-error @+1 {{'fa.kv_tile_hole' op takes the begin and end of one fa.kv_tile_range, with its block_m and block_n}}
  %hb, %he = fa.kv_tile_hole %begin, %end of %i, %i, %i at(%b, %h) {block_m = 16 : i64, block_n = 64 : i64} mask_mod {
  ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
    %c4 = arith.constant 4 : index
    %keep = arith.cmpi slt, %ki, %c4 : index
    fa.yield %keep : i1
  }
  return
}

// -----

// A range with a hole bounds no loop by its end: the loop runs over the
// visits (end - (hole end - hole begin)), mapped past the hole; one over
// [begin, end) would visit the hole's tiles (and a warp-specialized one wait
// for tiles its producer never copies).
func.func @hole_loop_over_the_range(%i: index, %b: index, %h: index) {
  %c1 = arith.constant 1 : index
  %begin, %end = fa.kv_tile_range %i, %i, %i {block_m = 16 : i64, block_n = 32 : i64}
  // expected-error @+1 {{'fa.kv_tile_hole' op skips tiles of a range whose end bounds a loop: the loop must run over the visits, to the range's end less the hole's tiles}}
  %hb, %he = fa.kv_tile_hole %begin, %end of %i, %i, %i at(%b, %h) {block_m = 16 : i64, block_n = 32 : i64} mask_mod {
  ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
    %c4 = arith.constant 4 : index
    %keep = arith.cmpi slt, %ki, %c4 : index
    fa.yield %keep : i1
  }
  // expected-note @+1 {{that loop}}
  scf.for %j = %begin to %end step %c1 {
  }
  return
}
