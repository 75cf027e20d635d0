// RUN: fa-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// A block mask's tables round-trip: key_ranges on the forward,
// query_ranges on the backward, fa.block_mask that fills both, and the
// range ops that read them.
// CHECK-LABEL: func @tables
// CHECK: fa.attention {{.*}} key_ranges %{{.*}} {scale = 1.250000e-01 : f32} : {{.*}} key_ranges memref<?x?x?x4xi32> mask_mod {
// CHECK: fa.block_mask %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} {mask = #fa.mask<causal>} : memref<?x2x?x32xf32>, memref<?x2x?x32xf32> into memref<?x?x?x4xi32>, memref<?x?x?x4xi32> mask_mod {
// CHECK: fa.kv_tile_range %{{.*}}, %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) ranges %{{.*}} : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64}
// CHECK: fa.q_tile_range %{{.*}}, %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) ranges %{{.*}} : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64}
// CHECK: %[[LO:.*]], %[[HI:.*]] = fa.whole_range %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) ranges %{{.*}} : memref<?x?x?x4xi32>
func.func @tables(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>,
                  %v: memref<?x2x?x32xf32>, %o: memref<?x2x?x32xf32>,
                  %lse: memref<?x2x?xf32>, %kr: memref<?x?x?x4xi32>,
                  %qr: memref<?x?x?x4xi32>, %i: index) {
  fa.attention %q, %k, %v into %o, %lse key_ranges %kr {scale = 0.125 : f32}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?xf32> key_ranges memref<?x?x?x4xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  fa.block_mask %q, %k into %kr, %qr {mask = #fa.mask<causal>}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32> into memref<?x?x?x4xi32>, memref<?x?x?x4xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  %b0, %e0 = fa.kv_tile_range %i, %i, %i at(%i, %i) ranges %kr : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64}
  %b1, %e1 = fa.q_tile_range %i, %i, %i at(%i, %i) ranges %qr : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64}
  %lo, %hi = fa.whole_range %i, %i at(%i, %i) ranges %kr : memref<?x?x?x4xi32>
  return
}

// -----

// kept_whole: a block mask's word that the mask_mod keeps the tile.
// CHECK-LABEL: func @kept_whole
// CHECK: fa.mask %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) kept_whole %{{.*}} : tensor<16x32xf32> mask_mod {
func.func @kept_whole(%s: tensor<16x32xf32>, %i: index, %whole: i1) -> tensor<16x32xf32> {
  %m = fa.mask %s, %i, %i, %i, %i at(%i, %i) kept_whole %whole : tensor<16x32xf32> mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  return %m : tensor<16x32xf32>
}

// -----

// Without a mask_mod there is nothing for kept_whole to skip.
func.func @kept_whole_without_mask_mod(%s: tensor<16x32xf32>, %i: index, %whole: i1) -> tensor<16x32xf32> {
  // expected-error @+1 {{kept_whole skips a mask_mod: it needs one}}
  %m = fa.mask %s, %i, %i, %i, %i kept_whole %whole : tensor<16x32xf32>
  return %m : tensor<16x32xf32>
}

// -----

// The whole ranges are columns 2 and 3 of a table of 4.
func.func @whole_range_of_pairs(%i: index, %t: memref<?x?x?x2xi32>) -> index {
  // expected-error @+1 {{ranges must be a row-major memref<?x?x?x4xi32> in global memory}}
  %lo, %hi = fa.whole_range %i, %i at(%i, %i) ranges %t : memref<?x?x?x2xi32>
  return %lo : index
}

// -----

// A table bounds a mask_mod's kept scores: without one there is nothing
// to bound.
func.func @table_without_mask_mod(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>,
                                  %v: memref<?x2x?x32xf32>, %o: memref<?x2x?x32xf32>,
                                  %lse: memref<?x2x?xf32>, %kr: memref<?x?x?x4xi32>) {
  // expected-error @+1 {{takes key_ranges (a block mask) only with a mask_mod region}}
  fa.attention %q, %k, %v into %o, %lse key_ranges %kr {scale = 0.125 : f32}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?xf32> key_ranges memref<?x?x?x4xi32>
  return
}

// -----

func.func @table_not_pairs(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>,
                           %kr: memref<?x?x?x3xi32>, %qr: memref<?x?x?x4xi32>) {
  // expected-error @+1 {{key_ranges must be a row-major memref<?x?x?x4xi32> in global memory ([first, end, whole_first, whole_end) per group), got 'memref<?x?x?x3xi32>'}}
  fa.block_mask %q, %k into %kr, %qr
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32> into memref<?x?x?x3xi32>, memref<?x?x?x4xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  return
}

// -----

func.func @range_table_without_program(%i: index, %kr: memref<?x?x?x4xi32>) {
  // expected-error @+1 {{indexes its range table by the batch and head (at(%b, %h)): give them}}
  %b0, %e0 = fa.kv_tile_range %i, %i, %i ranges %kr : memref<?x?x?x4xi32> {block_m = 16 : i64, block_n = 32 : i64}
  return
}

// -----

func.func @block_mask_bad_region(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>,
                                 %kr: memref<?x?x?x4xi32>, %qr: memref<?x?x?x4xi32>) {
  // expected-error @+1 {{mask_mod region may hold arith and math ops and loads of its captured tensors only, got 'memref.alloca'}}
  fa.block_mask %q, %k into %kr, %qr
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32> into memref<?x?x?x4xi32>, memref<?x?x?x4xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %a = memref.alloca() : memref<1xf32>
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  return
}
