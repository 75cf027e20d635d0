// RUN: fa-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// A block mask's tables round-trip: key_ranges on the forward,
// query_ranges on the backward, fa.block_mask that fills both, and the
// range ops that read them.
// CHECK-LABEL: func @tables
// CHECK: fa.attention {{.*}} key_ranges %{{.*}} {scale = 1.250000e-01 : f32} : {{.*}} key_ranges memref<?x?x?x2xi32> mask_mod {
// CHECK: fa.block_mask %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} {mask = #fa.mask<causal>} : memref<?x2x?x32xf32>, memref<?x2x?x32xf32> into memref<?x?x?x2xi32>, memref<?x?x?x2xi32> mask_mod {
// CHECK: fa.kv_tile_range %{{.*}}, %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) ranges %{{.*}} : memref<?x?x?x2xi32> {block_m = 16 : i64, block_n = 32 : i64}
// CHECK: fa.q_tile_range %{{.*}}, %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) ranges %{{.*}} : memref<?x?x?x2xi32> {block_m = 16 : i64, block_n = 32 : i64}
func.func @tables(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>,
                  %v: memref<?x2x?x32xf32>, %o: memref<?x2x?x32xf32>,
                  %lse: memref<?x2x?xf32>, %kr: memref<?x?x?x2xi32>,
                  %qr: memref<?x?x?x2xi32>, %i: index) {
  fa.attention %q, %k, %v into %o, %lse key_ranges %kr {scale = 0.125 : f32}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?xf32> key_ranges memref<?x?x?x2xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  fa.block_mask %q, %k into %kr, %qr {mask = #fa.mask<causal>}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32> into memref<?x?x?x2xi32>, memref<?x?x?x2xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  %b0, %e0 = fa.kv_tile_range %i, %i, %i at(%i, %i) ranges %kr : memref<?x?x?x2xi32> {block_m = 16 : i64, block_n = 32 : i64}
  %b1, %e1 = fa.q_tile_range %i, %i, %i at(%i, %i) ranges %qr : memref<?x?x?x2xi32> {block_m = 16 : i64, block_n = 32 : i64}
  return
}

// -----

// A table bounds a mask_mod's kept scores: without one there is nothing
// to bound.
func.func @table_without_mask_mod(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>,
                                  %v: memref<?x2x?x32xf32>, %o: memref<?x2x?x32xf32>,
                                  %lse: memref<?x2x?xf32>, %kr: memref<?x?x?x2xi32>) {
  // expected-error @+1 {{takes key_ranges (a block mask) only with a mask_mod region}}
  fa.attention %q, %k, %v into %o, %lse key_ranges %kr {scale = 0.125 : f32}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?xf32> key_ranges memref<?x?x?x2xi32>
  return
}

// -----

func.func @table_not_pairs(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>,
                           %kr: memref<?x?x?x3xi32>, %qr: memref<?x?x?x2xi32>) {
  // expected-error @+1 {{key_ranges must be a row-major memref<?x?x?x2xi32> in global memory (a [first, end) pair per group), got 'memref<?x?x?x3xi32>'}}
  fa.block_mask %q, %k into %kr, %qr
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32> into memref<?x?x?x3xi32>, memref<?x?x?x2xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  return
}

// -----

func.func @range_table_without_program(%i: index, %kr: memref<?x?x?x2xi32>) {
  // expected-error @+1 {{indexes its range table by the batch and head (at(%b, %h)): give them}}
  %b0, %e0 = fa.kv_tile_range %i, %i, %i ranges %kr : memref<?x?x?x2xi32> {block_m = 16 : i64, block_n = 32 : i64}
  return
}

// -----

func.func @block_mask_bad_region(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>,
                                 %kr: memref<?x?x?x2xi32>, %qr: memref<?x?x?x2xi32>) {
  // expected-error @+1 {{mask_mod region may hold arith and math ops and loads of its captured tensors only, got 'memref.alloca'}}
  fa.block_mask %q, %k into %kr, %qr
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32> into memref<?x?x?x2xi32>, memref<?x?x?x2xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %a = memref.alloca() : memref<1xf32>
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  return
}
