// RUN: fa-opt %s --split-input-file --verify-diagnostics

// The placement level's attributes are verified: launch configurations,
// fragment encodings, shared offsets and pipeline stages.

func.func @launch_threads(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  // expected-error @+1 {{threads must be a whole number of warps in [32, 1024], got 48}}
  } attributes {fa.launch = #fa.launch<strategy = mma, threads = 48, shared_bytes = 0, stages = 2, registers = 0>}
  return
}

// -----

func.func @launch_stages(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  // expected-error @+1 {{stages must be in [1, 4], got 0}}
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 64, shared_bytes = 0, stages = 0, registers = 0>}
  return
}

// -----

func.func @launch_bytes(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  // expected-error @+1 {{shared_bytes must be in [0, 232448], got -16}}
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 64, shared_bytes = -16, stages = 1, registers = 0>}
  return
}

// -----

func.func @launch_kind(%n: index) {
  // expected-error @+1 {{'fa.launch' must be a #fa.launch, got 128 : i64}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.launch = 128 : i64}
  return
}

// -----

func.func @unknown_attribute(%n: index) {
  // expected-error @+1 {{unknown fa attribute 'fa.num_threads'}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.num_threads = 128 : i64}
  return
}

// -----

func.func @negative_offset(%k: memref<?x?x?x64xf16>, %i: index) {
  // expected-error @+1 {{'fa.shared_offset' must be an integer in [0, 232432], got -128 : i64}}
  %t = fa.load_tile %k[%i, %i, %i] {fa.shared_offset = -128 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #fa.shared<pad = 8>>
  return
}

// -----

func.func @zero_stages(%k: memref<?x?x?x64xf16>, %i: index) {
  // expected-error @+1 {{'fa.pipeline_stages' must be an integer in [1, 4], got 0 : i64}}
  %t = fa.load_tile %k[%i, %i, %i] {fa.shared_offset = 0 : i64, fa.pipeline_stages = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #fa.shared<pad = 8>>
  return
}

// -----

func.func @offset_on_matmul(%a: tensor<16x16xf32>) {
  // expected-error @+1 {{'fa.shared_offset' belongs on fa.load_tile or fa.convert_layout}}
  %s = fa.tile_matmul %a, %a {transpose_rhs, fa.shared_offset = 0 : i64} : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  return
}

// -----

// expected-error @+1 {{warps must be in [1, 32], got 0}}
func.func private @mma_warps(tensor<64x64xf32, #fa.mma<warps = 0>>)

// -----

// expected-error @+1 {{warps must be in [1, 32], got 64}}
func.func private @operand_warps(tensor<64x64xf16, #fa.mma_operand<warps = 64>>)

// -----

// Register encodings must divide their tiles: each thread owns the same
// number of elements (the lowerings unroll over them).
// expected-error @+1 {{#fa.blocked thread grid 8x32 does not divide the tile's 4 rows}}
func.func private @blocked_rows(tensor<4x32xf32, #fa.blocked<threads = [8, 32]>>)

// -----

// expected-error @+1 {{#fa.blocked thread grid 8x32 does not divide the tile's 40 columns}}
func.func private @blocked_cols(tensor<8x40xf32, #fa.blocked<threads = [8, 32]>>)

// -----

// expected-error @+1 {{#fa.mma over 4 warps needs rows in multiples of 16 x 4 = 64, got 8}}
func.func private @mma_rows(tensor<8x64xf32, #fa.mma<warps = 4>>)

// -----

// expected-error @+1 {{#fa.mma needs columns in multiples of 8, got 36}}
func.func private @mma_cols(tensor<64x36xf32, #fa.mma<warps = 4>>)

// -----

// A 2-d warp grid: warps_n warps along the columns, warps / warps_n along
// the rows; warps_n divides warps.
// expected-error @+1 {{warps_n must divide warps = 8, got 3}}
func.func private @mma_warps_n(tensor<128x64xf32, #fa.mma<warps = 8, warps_n = 3>>)

// -----

// expected-error @+1 {{warps_n must divide warps = 4, got 0}}
func.func private @mma_warps_n_zero(tensor<64x64xf32, #fa.mma<warps = 4, warps_n = 0>>)

// -----

// rows_first is a flag.
// expected-error @+1 {{rows_first must be 0 or 1, got 2}}
func.func private @mma_rows_first(tensor<64x64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 2>>)

// -----

// 8 warps as 4 x 2: rows in multiples of 64, columns of 16.
// expected-error @+1 {{#fa.mma over 4 warps along the rows needs rows in multiples of 16 x 4 = 64, got 32}}
func.func private @mma_grid_rows(tensor<32x64xf32, #fa.mma<warps = 8, warps_n = 2>>)

// -----

// expected-error @+1 {{#fa.mma over 2 warps along the columns needs columns in multiples of 8 x 2 = 16, got 40}}
func.func private @mma_grid_cols(tensor<64x40xf32, #fa.mma<warps = 8, warps_n = 2>>)

// -----

// expected-error @+1 {{#fa.mma sets warps_n twice}}
func.func private @mma_twice(tensor<64x64xf32, #fa.mma<warps = 8, warps_n = 2, warps_n = 2>>)

// -----

// expected-error @+1 {{#fa.mma has warps, warps_n, rows_first and transposed, got cols}}
func.func private @mma_unknown(tensor<64x64xf32, #fa.mma<warps = 8, cols = 2>>)

// -----

// expected-error @+1 {{transposed is true or false, got yes}}
func.func private @mma_transposed_value(tensor<64x64xf32, #fa.mma<warps = 4, transposed = yes>>)

// -----

// A transposed tile is verified as its twin (128 x 36 over 8 warps).
// expected-error @+1 {{#fa.mma (transposed: its twin) needs columns in multiples of 8, got 36}}
func.func private @mma_transposed_twin(tensor<36x128xf32, #fa.mma<warps = 8, transposed = true>>)

// -----

// expected-error @+1 {{a 1-d transposed #fa.mma tile holds the twin's columns: rows in multiples of 8 x 2 = 16, got 40}}
func.func private @mma_transposed_rows(tensor<40xf32, #fa.mma<warps = 8, warps_n = 2, transposed = true>>)

// -----

func.func @transpose_shape(%s: tensor<128x64xf32, #fa.mma<warps = 8>>) {
  // expected-error @+1 {{transposes a 2-d tile: the result's shape is the source's swapped}}
  %t = fa.transpose %s : tensor<128x64xf32, #fa.mma<warps = 8>> -> tensor<64x128xf16, #fa.mma<warps = 8, transposed = true>>
  return
}

// -----

func.func @transpose_layouts(%s: tensor<128x64xf32, #fa.mma<warps = 8>>) {
  // expected-error @+1 {{needs encodings whose register layouts are each other's transposes}}
  %t = fa.transpose %s : tensor<128x64xf32, #fa.mma<warps = 8>> -> tensor<64x128xf32, #fa.mma<warps = 4, transposed = true>>
  return
}

// -----

func.func @transpose_shared(%s: tensor<128x64xf16, #fa.swizzled_shared<bytes = 128>>) {
  // expected-error @+1 {{reads a register tile the other way: both types need a register encoding}}
  %t = fa.transpose %s : tensor<128x64xf16, #fa.swizzled_shared<bytes = 128>> -> tensor<64x128xf16, #fa.mma<warps = 8, transposed = true>>
  return
}

// -----

// expected-error @+1 {{#fa.mma_operand holds f16, bf16 or f8E4M3FN, got 'f32'}}
func.func private @operand_type(tensor<64x64xf32, #fa.mma_operand<warps = 4>>)

// -----

// A warp-specialized launch keeps at least one warp that computes.
func.func @launch_producer_warps(%n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  // expected-error @+1 {{producer_warps must be in [0, threads / 32 = 4), got 4}}
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 0, stages = 2, registers = 0, producer_warps = 4>}
  return
}

// -----

// The 128-byte swizzle holds 16-bit or 8-bit elements (wgmma's operands) or f32
// (the staged dQ part the TMA engine adds) ...
// expected-error @+1 {{#fa.swizzled_shared holds f16, bf16, f32 or f8E4M3FN, got 'f64'}}
func.func @swizzled_f64(%x: tensor<64x64xf64, #fa.swizzled_shared<bytes = 128>>) {
  return
}

// -----

// ... in blocks of 128 bytes: 32 f32 columns.
// expected-error @+1 {{#fa.swizzled_shared needs columns in multiples of 32 (128-byte rows), got 48}}
func.func @swizzled_f32_columns(%x: tensor<64x48xf32, #fa.swizzled_shared<bytes = 128>>) {
  return
}

// -----

// ... in whole 128-byte rows (64 elements) ...
// expected-error @+1 {{#fa.swizzled_shared needs columns in multiples of 64 (128-byte rows), got 72}}
func.func @swizzled_columns(%x: tensor<64x72xf16, #fa.swizzled_shared<bytes = 128>>) {
  return
}

// -----

// ... and whole 8-row swizzle atoms.
// expected-error @+1 {{#fa.swizzled_shared needs rows in multiples of 8 (1024-byte swizzle atoms), got 12}}
func.func @swizzled_rows(%x: tensor<12x64xbf16, #fa.swizzled_shared<bytes = 128>>) {
  return
}

// -----

// expected-error @+1 {{the swizzle width must be 128 or 64 bytes, got 32}}
func.func @swizzled_width(%x: tensor<64x64xf16, #fa.swizzled_shared<bytes = 32>>) {
  return
}

// -----

// The 64-byte swizzle is for 8-bit rows.
// expected-error @+1 {{the 64-byte swizzle holds 8-bit tiles stored by rows (f8E4M3FN, not transposed), got 'f16'}}
func.func @swizzled_width_16bit(%x: tensor<64x32xf16, #fa.swizzled_shared<bytes = 64>>) {
  return
}

// -----

// expected-error @+1 {{the 64-byte swizzle holds 8-bit tiles stored by rows (f8E4M3FN, not transposed), got 'f8E4M3FN' transposed}}
func.func @swizzled_width_transposed(%x: tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 64, transposed = true>>) {
  return
}

// -----

// 64-byte rows: 8-row atoms of 512 bytes.
// expected-error @+1 {{#fa.swizzled_shared needs rows in multiples of 8 (512-byte swizzle atoms), got 12}}
func.func @swizzled_rows_64(%x: tensor<12x64xf8E4M3FN, #fa.swizzled_shared<bytes = 64>>) {
  return
}

// -----

// The tensor maps a kernel takes name Q, K, V, dO or the dQ accumulator
// with a positive box.
func.func @tensor_maps(%n: index) {
  // expected-error @below {{'fa.tensor_maps' must be an array of {arg, tensor = "q" | "k" | "v" | "do" | "dq_accum", box_rows, box_cols} with positive sizes}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.tensor_maps = [{arg = 0 : i64, tensor = "o", box_rows = 64 : i64, box_cols = 64 : i64}]}
  return
}

// -----

// A TMA box is at most 256 rows of 64 16-bit columns (the 128-byte swizzle).
func.func @tensor_map_box(%n: index) {
  // expected-error @below {{'fa.tensor_maps' box of "k" is 64 x 128: a TMA box has at most 256 rows of 64 columns (128 bytes of 16-bit elements, the swizzle span)}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.tensor_maps = [{arg = 0 : i64, tensor = "k", box_rows = 64 : i64, box_cols = 128 : i64}]}
  return
}

// -----

// The dQ accumulator is f32: 32 columns make the 128 bytes.
func.func @tensor_map_box_f32(%n: index) {
  // expected-error @below {{'fa.tensor_maps' box of "dq_accum" is 64 x 64: a TMA box has at most 256 rows of 32 columns (128 bytes of f32 elements, the swizzle span)}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.tensor_maps = [{arg = 0 : i64, tensor = "dq_accum", box_rows = 64 : i64, box_cols = 64 : i64}]}
  return
}

// -----

func.func @tensor_map_rows(%n: index) {
  // expected-error @below {{'fa.tensor_maps' box of "q" is 512 x 64: a TMA box has at most 256 rows}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.tensor_maps = [{arg = 0 : i64, tensor = "q", box_rows = 512 : i64, box_cols = 64 : i64}]}
  return
}

// -----

// One map per tensor, each in a kernel parameter of its own.
func.func @tensor_map_parameter_twice(%n: index) {
  // expected-error @below {{'fa.tensor_maps' names kernel parameter 0 twice: each map is a parameter of its own}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.tensor_maps = [{arg = 0 : i64, tensor = "q", box_rows = 64 : i64, box_cols = 64 : i64}, {arg = 0 : i64, tensor = "v", box_rows = 64 : i64, box_cols = 64 : i64}]}
  return
}

// -----

func.func @tensor_map_tensor_twice(%n: index) {
  // expected-error @below {{'fa.tensor_maps' maps tensor "k" twice: each tensor has one map}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.tensor_maps = [{arg = 0 : i64, tensor = "k", box_rows = 64 : i64, box_cols = 64 : i64}, {arg = 1 : i64, tensor = "k", box_rows = 64 : i64, box_cols = 64 : i64}]}
  return
}

// -----

// Placement attributes stay within what one block can have: shared memory
// up to the largest arch's 232448 bytes, rings of up to 4 stages, producer
// warps only with the wgmma strategy (whose warp specialization they are).
// expected-error @+1 {{shared_bytes must be in [0, 232448], got 1099511627776}}
func.func private @huge_shared() attributes {x = #fa.launch<strategy = simt, threads = 128, shared_bytes = 1099511627776, stages = 1, registers = 32>}

// -----

// expected-error @+1 {{stages must be in [1, 4], got 100000}}
func.func private @many_stages() attributes {x = #fa.launch<strategy = mma, threads = 128, shared_bytes = 0, stages = 100000, registers = 32>}

// -----

// expected-error @+1 {{producer_warps belong to the wgmma strategy's warp specialization, got 8 on simt}}
func.func private @simt_producers() attributes {x = #fa.launch<strategy = simt, threads = 512, shared_bytes = 0, stages = 1, registers = 32, producer_warps = 8>}

// -----

// threads is checked first, and producer_warps without overflowing.
// expected-error @+1 {{producer_warps must be in [0, threads / 32 = 12), got 288230376151711744}}
func.func private @huge_producers() attributes {x = #fa.launch<strategy = wgmma, threads = 384, shared_bytes = 0, stages = 1, registers = 32, producer_warps = 288230376151711744>}

// -----

// Tiles: static dims in [1, 65536] (the lowerings unroll over a thread's
// elements), whatever the encoding.
// expected-error @+1 {{#fa.shared tiles need static dims in [1, 65536], got 0}}
func.func private @zero_rows(tensor<0x64xf32, #fa.shared<pad = 0>>)

// -----

// expected-error @+1 {{#fa.blocked tiles need static dims in [1, 65536], got ?}}
func.func private @dynamic_rows(tensor<?x32xf32, #fa.blocked<threads = [8, 32]>>)

// -----

// expected-error @+1 {{#fa.blocked tile of 65536x64 puts 16384 elements in each thread, over the limit of 2048}}
func.func private @huge_register_tile(tensor<65536x64xf32, #fa.blocked<threads = [8, 32]>>)

// -----

// expected-error @+1 {{#fa.shared tile needs 264192 bytes of shared memory, over the 232448 of a block}}
func.func private @huge_shared_tile(tensor<512x129xf32, #fa.shared<pad = 0>>)

// -----

// expected-error @+1 {{row padding must be in [0, 65536], got 4611686018427387904}}
func.func private @huge_pad(tensor<8x32xf32, #fa.shared<pad = 4611686018427387904>>)

// -----

// Shared offsets are 16-byte aligned (cp.async, ldmatrix and vector
// accesses move 16-byte chunks) and inside a block's shared memory.
func.func @offsets(%src: memref<?x?x?x32xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{'fa.shared_offset' must be a multiple of 16 bytes, got 18434}}
    %a = fa.load_tile %src[%b, %h, %n] {fa.shared_offset = 18434 : i64} : memref<?x?x?x32xf32> -> tensor<8x32xf32, #fa.shared<pad = 0>>
  }
  return
}

// -----

func.func @offsets(%src: memref<?x?x?x32xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @+1 {{'fa.shared_offset' must be an integer in [0, 232432], got 4611686018427387904 : i64}}
    %a = fa.load_tile %src[%b, %h, %n] {fa.shared_offset = 4611686018427387904 : i64} : memref<?x?x?x32xf32> -> tensor<8x32xf32, #fa.shared<pad = 0>>
  }
  return
}

// -----

// fa.persistent marks a grid whose blocks walk many tiles: a unit attribute.
func.func @persistent_unit(%n: index) {
  // expected-error @below {{'fa.persistent' must be a unit attribute, got 1 : i64}}
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
  } attributes {fa.persistent = 1 : i64}
  return
}

// -----

// fa.producer_writes marks the transposed 8-bit V copy that the producer
// warpgroup writes: a unit attribute of a convert into transposed shared
// memory ...
func.func @producer_writes_untransposed(%v: memref<?x?x?x128xf8E4M3FN>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %vt = fa.load_tile %v[%b, %h, %t] {fa.shared_offset = 0 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>>
    // expected-error @below {{'fa.producer_writes' is a unit attribute of an fa.convert_layout into transposed swizzled shared memory}}
    %c = fa.convert_layout %vt {fa.producer_writes, fa.shared_offset = 16384 : i64} : tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>> -> tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>>
  }
  return
}

// -----

// ... and nothing else.
func.func @producer_writes_value(%v: memref<?x?x?x128xf8E4M3FN>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %vt = fa.load_tile %v[%b, %h, %t] {fa.shared_offset = 0 : i64} : memref<?x?x?x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>>
    // expected-error @below {{'fa.producer_writes' is a unit attribute of an fa.convert_layout into transposed swizzled shared memory}}
    %c = fa.convert_layout %vt {fa.producer_writes = 1 : i64, fa.shared_offset = 16384 : i64} : tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>> -> tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
  }
  return
}

// -----

// fa.prefetch asks for a load of per-row values into registers one
// iteration ahead: a unit attribute of fa.load_tile ...
func.func @prefetch_unit(%lse: memref<?x?x?xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @below {{'fa.prefetch' is a unit attribute of fa.load_tile}}
    %l = fa.load_tile %lse[%b, %h, %t] {fa.prefetch = 1 : i64} : memref<?x?x?xf32> -> tensor<64xf32, #fa.mma<warps = 4>>
  }
  return
}

// -----

// ... of a rank-1 register tile.
func.func @prefetch_shared(%q: memref<?x?x?x64xf16>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @below {{'fa.prefetch' prefetches per-row values into registers: a rank-1 tile with a register encoding, got 'tensor<64x64xf16, #fa.shared<pad = 8>>'}}
    %x = fa.load_tile %q[%b, %h, %t] {fa.prefetch} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #fa.shared<pad = 8>>
  }
  return
}

// -----

// Only 8-bit tiles are stored transposed (the K-major B of 8-bit wgmma) ...
// expected-error @+1 {{#fa.swizzled_shared stores 8-bit tiles transposed (the K-major B of 8-bit wgmma), got 'f16'}}
func.func @swizzled_transposed_f16(%x: tensor<64x64xf16, #fa.swizzled_shared<bytes = 128, transposed = true>>) {
  return
}

// -----

// ... whose rows then run along the 128-byte storage rows: 128 of them.
// expected-error @+1 {{#fa.swizzled_shared needs rows in multiples of 128 (128-byte rows), got 64}}
func.func @swizzled_transposed_rows(%x: tensor<64x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>) {
  return
}

// -----

// fa.hand_off publishes a tile in shared memory ...
func.func @hand_off_registers(%x: tensor<128x128xf32, #fa.mma<warps = 8>>) {
  // expected-error @+1 {{hands off a tile in shared memory, got 'tensor<128x128xf32, #fa.mma<warps = 8>>'}}
  fa.hand_off %x barrier 13 threads 288 : tensor<128x128xf32, #fa.mma<warps = 8>>
  return
}

// -----

// ... on a named barrier other than the block's barrier 0 ...
func.func @hand_off_barrier_zero(%x: tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>) {
  // expected-error @+1 {{named barrier must be in 1..15, got 0}}
  fa.hand_off %x barrier 0 threads 288 : tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
  return
}

// -----

// ... that counts whole warps.
func.func @hand_off_partial_warp(%x: tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>) {
  // expected-error @+1 {{a named barrier counts whole warps (1..1024 threads, a multiple of 32), got 270}}
  fa.hand_off %x barrier 13 threads 270 : tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
  return
}

// -----

// fa.exp2_on_fma marks an online softmax ...
func.func @exp2_on_fma_elsewhere(%x: tensor<128x128xf32, #fa.mma<warps = 8>>) {
  // expected-error @+1 {{'fa.exp2_on_fma' is a positive integer attribute of fa.online_softmax, got 2 : i64}}
  %y = arith.addf %x, %x {fa.exp2_on_fma = 2 : i64} : tensor<128x128xf32, #fa.mma<warps = 8>>
  return
}

// -----

// ... with a positive share.
func.func @exp2_on_fma_zero(%s: tensor<16x8xf32>, %m0: tensor<16xf32>, %l0: tensor<16xf32>) {
  // expected-error @+1 {{'fa.exp2_on_fma' is a positive integer attribute of fa.online_softmax, got 0 : i64}}
  %m, %p, %l, %alpha = fa.online_softmax %s, %m0, %l0 {scale = 0.5 : f32, fa.exp2_on_fma = 0 : i64} : tensor<16x8xf32>, tensor<16xf32>
  return
}

// -----

// ... a signless integer.
func.func @exp2_on_fma_unsigned(%s: tensor<16x8xf32>, %m0: tensor<16xf32>, %l0: tensor<16xf32>) {
  // expected-error @+1 {{'fa.exp2_on_fma' is a positive integer attribute of fa.online_softmax, got 2 : ui64}}
  %m, %p, %l, %alpha = fa.online_softmax %s, %m0, %l0 {scale = 0.5 : f32, fa.exp2_on_fma = 2 : ui64} : tensor<16x8xf32>, tensor<16xf32>
  return
}

// -----

// A staging that rotates among buffers (fa.pipeline_stages on an
// fa.convert_layout) picks one by its iteration operand: an iteration
// without a rotation ...
func.func @rotation_without_stages(%x: tensor<64x64xbf16, #fa.mma<warps = 4>>, %n: index) {
  // expected-error @below {{has an iteration operand but no rotation to pick a buffer of: it needs fa.pipeline_stages >= 2}}
  %s = fa.convert_layout %x iteration %n {fa.shared_offset = 0 : i64} : tensor<64x64xbf16, #fa.mma<warps = 4>> -> tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>>
  return
}

// -----

// ... a rotation without an iteration ...
func.func @rotation_without_iteration(%x: tensor<64x64xbf16, #fa.mma<warps = 4>>) {
  // expected-error @below {{rotates among 2 staging buffers (fa.pipeline_stages) but has no iteration operand to pick one}}
  %s = fa.convert_layout %x {fa.pipeline_stages = 2 : i64, fa.shared_offset = 0 : i64} : tensor<64x64xbf16, #fa.mma<warps = 4>> -> tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>>
  return
}

// -----

// ... into registers ...
func.func @rotation_into_registers(%x: tensor<64x64xbf16, #fa.mma<warps = 4>>, %n: index) {
  // expected-error @below {{rotates among staging buffers, so its result must be a shared tile}}
  %s = fa.convert_layout %x iteration %n {fa.pipeline_stages = 2 : i64} : tensor<64x64xbf16, #fa.mma<warps = 4>> -> tensor<64x64xbf16, #fa.mma<warps = 4, warps_n = 1>>
  return
}

// -----

// ... outside a loop's body ...
func.func @rotation_outside_loop(%x: tensor<64x64xbf16, #fa.mma<warps = 4>>, %n: index) {
  // expected-error @below {{rotates among staging buffers by iteration, so it must sit directly in a loop's body}}
  %s = fa.convert_layout %x iteration %n {fa.pipeline_stages = 2 : i64, fa.shared_offset = 0 : i64} : tensor<64x64xbf16, #fa.mma<warps = 4>> -> tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>>
  return
}

// -----

// ... or read in another iteration than the one that wrote it (a reader
// outside the loop's body) ...
func.func @rotation_read_after_loop(%x: tensor<64x64xbf16, #fa.mma<warps = 4>>, %k: tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%prev = %k) -> (tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>>) {
    // expected-error @below {{rotates among staging buffers, so every reader must be a matmul of the same iteration (the same block), not scf.yield}}
    %s = fa.convert_layout %x iteration %i {fa.pipeline_stages = 2 : i64, fa.shared_offset = 0 : i64} : tensor<64x64xbf16, #fa.mma<warps = 4>> -> tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>>
    scf.yield %s : tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>>
  }
  return
}

// -----

// ... or by an async matmul not waited for in its iteration.
func.func @rotation_unwaited_reader(%x: tensor<64x64xbf16, #fa.mma<warps = 4>>, %k: tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : tensor<64x64xf32, #fa.mma<warps = 4>>
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<64x64xf32, #fa.mma<warps = 4>>) {
    // expected-error @below {{rotates among staging buffers, so its async readers must be waited for in the same iteration (an fa.async_wait in the same block)}}
    %s = fa.convert_layout %x iteration %i {fa.pipeline_stages = 2 : i64, fa.shared_offset = 0 : i64} : tensor<64x64xbf16, #fa.mma<warps = 4>> -> tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>>
    %d = fa.tile_matmul %s, %k acc(%acc) {async} : tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>>, tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>> -> tensor<64x64xf32, #fa.mma<warps = 4>>
    scf.yield %d : tensor<64x64xf32, #fa.mma<warps = 4>>
  }
  return
}

// -----

// fa.producer_writes marks a copy the producer makes from the swizzled
// tile its TMA loads fill: not one from registers.
func.func @producer_writes_from_registers(%x: tensor<128x128xf8E4M3FN, #fa.mma<warps = 8>>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    // expected-error @below {{'fa.producer_writes' marks a copy the producer makes from a tile in swizzled shared memory, got 'tensor<128x128xf8E4M3FN, #fa.mma<warps = 8>>'}}
    %c = fa.convert_layout %x {fa.producer_writes, fa.shared_offset = 32768 : i64} : tensor<128x128xf8E4M3FN, #fa.mma<warps = 8>> -> tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
  }
  return
}

// -----

// fa.copy_chunks copies 16-byte chunks into padded shared rows: a row of
// 64 + 4 f16 (136 bytes) leaves every other row's chunks unaligned.
func.func @copy_chunks_unaligned_pitch(%k: memref<?x?x?x64xf16>, %i: index) {
  // expected-error @+1 {{'fa.copy_chunks' copies 16-byte chunks: the tile's rows (64 elements) and their shared pitch (68) must be multiples of 16 bytes}}
  %t = fa.load_tile %k[%i, %i, %i] {fa.copy_chunks, fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #fa.shared<pad = 4>>
  return
}

// -----

// ... and fills shared tiles only.
func.func @copy_chunks_into_registers(%k: memref<?x?x?x64xf16>, %i: index) {
  // expected-error @+1 {{'fa.copy_chunks' is a unit attribute of an fa.load_tile into a 2-d #fa.shared tile}}
  %t = fa.load_tile %k[%i, %i, %i] {fa.copy_chunks} : memref<?x?x?x64xf16> -> tensor<64x64xf16, #fa.blocked<threads = [8, 32]>>
  return
}

// -----

// ... of 16-bit elements (8 a chunk, as the tensor-core copies of Q, K, V).
func.func @copy_chunks_of_f32(%k: memref<?x?x?x64xf32>, %i: index) {
  // expected-error @+1 {{'fa.copy_chunks' copies chunks of 8 16-bit elements, got a tile of 'f32'}}
  %t = fa.load_tile %k[%i, %i, %i] {fa.copy_chunks, fa.shared_offset = 0 : i64} : memref<?x?x?x64xf32> -> tensor<32x64xf32, #fa.shared<pad = 4>>
  return
}

// -----

// The dialect's attributes are verified before the op's result types: a
// generic-form load of a memref gets the attribute's error, read safely.
func.func @copy_chunks_of_a_memref(%k: memref<?x?x?x64xf16>, %i: index) {
  // expected-error @+1 {{'fa.copy_chunks' is a unit attribute of an fa.load_tile into a 2-d #fa.shared tile}}
  %t = "fa.load_tile"(%k, %i, %i, %i) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>}> {fa.copy_chunks} : (memref<?x?x?x64xf16>, index, index, index) -> memref<4xf16>
  return
}

// -----

func.func @prefetch_of_a_memref(%k: memref<?x?x?x64xf16>, %i: index) {
  // expected-error @+1 {{'fa.prefetch' prefetches per-row values into registers: a rank-1 tile with a register encoding, got 'memref<4xf16>'}}
  %t = "fa.load_tile"(%k, %i, %i, %i) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>}> {fa.prefetch} : (memref<?x?x?x64xf16>, index, index, index) -> memref<4xf16>
  return
}
