// RUN: fa-opt %s --split-input-file --fa-tma-reduce --verify-diagnostics
// fa-warp-specialize's writer-warp names which programs get one:
// RUN: not fa-opt %S/tma-reduce.mlir --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 transposed-scores=0" --fa-wgmma-pipeline --fa-warp-specialize="writer-warp=always" 2>&1 | FileCheck %s --check-prefix=MODE
// MODE: error: 'fa.grid' op writer-warp must be none, deterministic, every or all, got 'always'

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

// -----

// The issuer waits for its previous reduction just before the tile is
// written: the staging must sit next to the add, in the same block (here
// it was hoisted out of the loop, and the buffer would be rewritten under
// a reduction still reading it).
#sw = #fa.swizzled_shared<bytes = 128>
func.func @staged_outside_the_loop(%accum: memref<?x?x?x64xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %part = arith.constant dense<0.0> : tensor<64x64xf32, #fa.mma<warps = 4>>
    %staged = fa.convert_layout %part {fa.shared_offset = 0 : i64} : tensor<64x64xf32, #fa.mma<warps = 4>> -> tensor<64x64xf32, #sw>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %n step %c1 {
      // expected-error @+1 {{expects its tile staged by an fa.convert_layout in the same block}}
      fa.accumulate_tile %staged, %accum[%b, %h, %i] : tensor<64x64xf32, #sw> -> memref<?x?x?x64xf32>
    }
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 17408, stages = 1, registers = 64>}
  return
}

// -----

// Each warpgroup reduces the boxes of its own column slice: two warpgroups
// splitting 160 columns hold 80 each, two boxes and a half.
#sw = #fa.swizzled_shared<bytes = 128>
#wg2 = #fa.mma<warps = 8, warps_n = 2, rows_first = 1>
func.func @slice_not_whole_boxes(%accum: memref<?x?x?x160xf32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %part = arith.constant dense<0.0> : tensor<64x160xf32, #wg2>
    %staged = fa.convert_layout %part {fa.shared_offset = 0 : i64} : tensor<64x160xf32, #wg2> -> tensor<64x160xf32, #sw>
    // expected-error @+1 {{each warpgroup reduces its own columns: a slice of 80 columns is not whole boxes of 32}}
    fa.accumulate_tile %staged, %accum[%b, %h, %t] : tensor<64x160xf32, #sw> -> memref<?x?x?x160xf32>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 40960, stages = 1, registers = 64>}
  return
}

// -----

// The deterministic mode orders the adds by the turn: an add after the
// turn was handed on (here: the turn passed before it) would race with the
// next program's.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @turn_passed_before_the_add(%accum: memref<?x?x?x64xf32>, %order: memref<?x?x?xi32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %part = arith.constant dense<0.0> : tensor<64x64xf32, #fa.mma<warps = 4>>
    %staged = fa.convert_layout %part {fa.shared_offset = 0 : i64} : tensor<64x64xf32, #fa.mma<warps = 4>> -> tensor<64x64xf32, #sw>
    fa.wait_turn %order[%b, %h, %t], %t : memref<?x?x?xi32>
    fa.pass_turn %order[%b, %h, %t], %t : memref<?x?x?xi32>
    // expected-error @+1 {{the program hands on a turn (fa.pass_turn), but not after this add in its block: the TMA reduction would not be ordered by the turn}}
    fa.accumulate_tile %staged, %accum[%b, %h, %t] : tensor<64x64xf32, #sw> -> memref<?x?x?x64xf32>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 17408, stages = 1, registers = 64>}
  return
}

// -----

// A program with a writer warp (fa.writer_warp) adds through it: the add
// must sit in the consumers' branch of fa-warp-specialize's roles, here
// there are none.
#sw = #fa.swizzled_shared<bytes = 128>
func.func @turns_without_roles(%accum: memref<?x?x?x64xf32>, %order: memref<?x?x?xi32>, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %part = arith.constant dense<0.0> : tensor<64x64xf32, #fa.mma<warps = 4>>
    %staged = fa.convert_layout %part {fa.shared_offset = 0 : i64} : tensor<64x64xf32, #fa.mma<warps = 4>> -> tensor<64x64xf32, #sw>
    fa.wait_turn %order[%b, %h, %t], %t : memref<?x?x?xi32>
    // expected-error @+1 {{a writer warp's program adds in its consumers' branch (fa-warp-specialize's roles)}}
    fa.accumulate_tile %staged, %accum[%b, %h, %t] : tensor<64x64xf32, #sw> -> memref<?x?x?x64xf32>
    fa.pass_turn %order[%b, %h, %t], %t : memref<?x?x?xi32>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 17408, stages = 1, registers = 64, producer_warps = 4>, fa.writer_warp}
  return
}

