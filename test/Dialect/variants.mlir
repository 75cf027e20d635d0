// RUN: fa-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// score_mod and mask_mod regions round-trip on fa.attention and on the tile
// ops that carry them (fa.score_mod, fa.mask, fa.kv_tile_range).

// CHECK-LABEL: func @regions
// CHECK: fa.attention {{.*}} score_mod {
// CHECK: math.tanh
// CHECK: fa.yield {{.*}} : f32
// CHECK: } mask_mod {
// CHECK: arith.cmpi sge
// CHECK: fa.yield {{.*}} : i1
func.func @regions(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
                   %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
                   %lse: memref<?x8x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %cap = arith.constant 30.0 : f32
      %x = arith.divf %s, %cap : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %cap : f32
      fa.yield %r : f32
    }
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c = arith.constant 256 : index
      %lo = arith.subi %qi, %c : index
      %keep = arith.cmpi sge, %ki, %lo : index
      fa.yield %keep : i1
    }
  return
}

// CHECK-LABEL: func @tile_ops
// CHECK: %[[BEGIN:.*]], %[[END:.*]] = fa.kv_tile_range %{{.*}}, %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) {block_m = 16 : i64, block_n = 32 : i64} mask_mod {
// CHECK: %hole_begin, %hole_end = fa.kv_tile_hole %[[BEGIN]], %[[END]] of %{{.*}}, %{{.*}}, %{{.*}} at(%{{.*}}, %{{.*}}) {block_m = 16 : i64, block_n = 32 : i64} mask_mod {
// CHECK: fa.score_mod %{{.*}} at(%{{.*}}, %{{.*}}) {scale = 1.250000e-01 : f32} : tensor<16x32xf32> {
// CHECK: fa.mask %{{.*}} at(%{{.*}}, %{{.*}}) : tensor<16x32xf32> mask_mod {
func.func @tile_ops(%s: tensor<16x32xf32>, %i: index, %b: index, %h: index) -> tensor<16x32xf32> {
  %begin, %end = fa.kv_tile_range %i, %i, %i at(%b, %h) {block_m = 16 : i64, block_n = 32 : i64} mask_mod {
  ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  }
  %hb, %he = fa.kv_tile_hole %begin, %end of %i, %i, %i at(%b, %h) {block_m = 16 : i64, block_n = 32 : i64} mask_mod {
  ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
    %c4 = arith.constant 4 : index
    %sink = arith.cmpi slt, %ki, %c4 : index
    %c64 = arith.constant 64 : index
    %lo = arith.subi %qi, %c64 : index
    %window = arith.cmpi sge, %ki, %lo : index
    %keep = arith.ori %sink, %window : i1
    fa.yield %keep : i1
  }
  %m = fa.score_mod %s, %i, %i, %i, %i at(%b, %h) {scale = 0.125 : f32} : tensor<16x32xf32> {
  ^bb0(%x: f32, %bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
    fa.yield %x : f32
  }
  %r = fa.mask %m, %i, %i, %i, %i at(%b, %h) : tensor<16x32xf32> mask_mod {
  ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  }
  return %r : tensor<16x32xf32>
}

// -----

func.func @load_in_region(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
                          %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
                          %lse: memref<?x8x?xf32>) {
  // expected-error @+1 {{score_mod region may hold arith and math ops and loads of its captured tensors only, got 'memref.alloca'}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %m = memref.alloca() : memref<4xf32>
      fa.yield %s : f32
    }
  return
}

// -----

func.func @control_flow(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
                        %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
                        %lse: memref<?x8x?xf32>) {
  // expected-error @+1 {{mask_mod region may hold arith and math ops and loads of its captured tensors only, got 'scf.if'}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c = arith.cmpi sle, %ki, %qi : index
      %keep = scf.if %c -> i1 {
        scf.yield %c : i1
      } else {
        scf.yield %c : i1
      }
      fa.yield %keep : i1
    }
  return
}

// -----

func.func @mask_signature(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
                          %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
                          %lse: memref<?x8x?xf32>) {
  // expected-error @+1 {{mask_mod region must take (index, index, index, index, index, index) (b, h, q_idx, kv_idx, q_len, kv_len), got 2 arguments}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32>
    mask_mod {
    ^bb0(%qi: index, %ki: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  return
}

// -----

func.func @score_result(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
                        %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
                        %lse: memref<?x8x?xf32>) {
  // expected-error @+1 {{score_mod region must end in fa.yield of one 'f32'}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c = arith.cmpi sle, %ki, %qi : index
      fa.yield %c : i1
    }
  return
}

// -----

// A region block without ops (hand-edited or fuzzed IR) has no yield: an
// error, not a read past the block's op list.
func.func @empty_score_mod(%s: tensor<16x32xf32>, %i: index, %b: index, %h: index) -> tensor<16x32xf32> {
  // expected-error @+1 {{score_mod region must end in fa.yield of one 'f32'}}
  %m = fa.score_mod %s, %i, %i, %i, %i at(%b, %h) {scale = 0.125 : f32} : tensor<16x32xf32> {
  ^bb0(%x: f32, %bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
  }
  return %m : tensor<16x32xf32>
}

// -----

func.func @mask_without_program(%s: tensor<16x32xf32>, %i: index) -> tensor<16x32xf32> {
  // expected-error @+1 {{takes the batch and head (at(%b, %h)) exactly when it has a mask_mod region}}
  %r = fa.mask %s, %i, %i, %i, %i : tensor<16x32xf32> mask_mod {
  ^bb0(%bb: index, %hh: index, %qi: index, %ki: index, %sq: index, %sk: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  }
  return %r : tensor<16x32xf32>
}

// -----

// The deterministic backward with a block mask reads both of its tables:
// the turns at a query tile go to the K/V tiles its key ranges give it.
func.func @deterministic_block_mask(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
    %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
    %lse: memref<?x8x?xf32>, %delta: memref<?x8x?xf32>,
    %acc: memref<?x8x?x64xf32>, %order: memref<?x8x?xi32>,
    %qr: memref<?x?x?x4xi32>, %kr: memref<?x?x?x4xi32>) {
  // CHECK-LABEL: func @deterministic_block_mask
  // CHECK: workspace %{{.*}}, %{{.*}}, %{{.*}} query_ranges %{{.*}} key_ranges %{{.*}} {
  fa.attention_backward %q, %k, %v, %o, %o, %lse into %q, %k, %v
      workspace %delta, %acc, %order query_ranges %qr key_ranges %kr {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>,
      memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?xf32>
    into memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    workspace memref<?x8x?xf32>, memref<?x8x?x64xf32>, memref<?x8x?xi32> query_ranges memref<?x?x?x4xi32> key_ranges memref<?x?x?x4xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  return
}

// -----

func.func @deterministic_query_ranges_alone(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
    %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
    %lse: memref<?x8x?xf32>, %delta: memref<?x8x?xf32>,
    %acc: memref<?x8x?x64xf32>, %order: memref<?x8x?xi32>,
    %qr: memref<?x?x?x4xi32>, %kr: memref<?x?x?x4xi32>) {
  // expected-error @+1 {{the deterministic backward (dq_order) with a block mask (query_ranges) takes key_ranges too}}
  fa.attention_backward %q, %k, %v, %o, %o, %lse into %q, %k, %v
      workspace %delta, %acc, %order query_ranges %qr {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>,
      memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?xf32>
    into memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    workspace memref<?x8x?xf32>, memref<?x8x?x64xf32>, memref<?x8x?xi32> query_ranges memref<?x?x?x4xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  return
}

// -----

func.func @key_ranges_without_turns(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
    %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
    %lse: memref<?x8x?xf32>, %delta: memref<?x8x?xf32>,
    %acc: memref<?x8x?x64xf32>, %order: memref<?x8x?xi32>,
    %qr: memref<?x?x?x4xi32>, %kr: memref<?x?x?x4xi32>) {
  // expected-error @+1 {{takes key_ranges only in the deterministic mode (dq_order) with a block mask (query_ranges)}}
  fa.attention_backward %q, %k, %v, %o, %o, %lse into %q, %k, %v
      workspace %delta, %acc query_ranges %qr key_ranges %kr {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>,
      memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?xf32>
    into memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    workspace memref<?x8x?xf32>, memref<?x8x?x64xf32> query_ranges memref<?x?x?x4xi32> key_ranges memref<?x?x?x4xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  return
}

// -----

func.func @block_mask_turns_in_chains(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
    %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
    %lse: memref<?x8x?xf32>, %delta: memref<?x8x?xf32>,
    %acc: memref<?x16x?x64xf32>, %order: memref<?x16x?xi32>,
    %qr: memref<?x?x?x4xi32>, %kr: memref<?x?x?x4xi32>) {
  // expected-error @+1 {{dq_chains = 2 counts turns one by one; a block mask's turns skip the K/V tiles its tables leave out}}
  fa.attention_backward %q, %k, %v, %o, %o, %lse into %q, %k, %v
      workspace %delta, %acc, %order query_ranges %qr key_ranges %kr {scale = 0.125 : f32, dq_chains = 2 : i64}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>,
      memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?xf32>
    into memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    workspace memref<?x8x?xf32>, memref<?x16x?x64xf32>, memref<?x16x?xi32> query_ranges memref<?x?x?x4xi32> key_ranges memref<?x?x?x4xi32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  return
}

// -----

// Captured tensors: the regions take them after their indices and read
// them with memref.load; the tile ops carry them with the regions.
// CHECK-LABEL: func @captures
// CHECK: fa.attention {{.*}} captures(%{{.*}}, %{{.*}} : memref<?xf32>, memref<?x?xi32>) score_mod {
// CHECK: memref.load %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK: } mask_mod {
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x?xi32>
// CHECK: fa.score_mod {{.*}} at(%{{.*}}, %{{.*}}) captures(%{{.*}} : memref<?xf32>) {scale = 1.250000e-01 : f32} : tensor<16x32xf32> {
// CHECK: fa.mask {{.*}} at(%{{.*}}, %{{.*}}) captures(%{{.*}} : memref<?x?xi32>) : tensor<16x32xf32> mask_mod {
func.func @captures(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
                    %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
                    %lse: memref<?x8x?xf32>, %slopes: memref<?xf32>,
                    %doc: memref<?x?xi32>, %s: tensor<16x32xf32>, %i: index) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32>
    captures(%slopes, %doc : memref<?xf32>, memref<?x?xi32>)
    score_mod {
    ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %sl: memref<?xf32>, %d: memref<?x?xi32>):
      %slope = memref.load %sl[%h] : memref<?xf32>
      %r = arith.mulf %x, %slope : f32
      fa.yield %r : f32
    }
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %sl: memref<?xf32>, %d: memref<?x?xi32>):
      %qd = memref.load %d[%b, %qi] : memref<?x?xi32>
      %kd = memref.load %d[%b, %ki] : memref<?x?xi32>
      %keep = arith.cmpi eq, %qd, %kd : i32
      fa.yield %keep : i1
    }
  %m = fa.score_mod %s, %i, %i, %i, %i at(%i, %i) captures(%slopes : memref<?xf32>) {scale = 0.125 : f32} : tensor<16x32xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index, %sl: memref<?xf32>):
    %slope = memref.load %sl[%h] : memref<?xf32>
    %r = arith.mulf %x, %slope : f32
    fa.yield %r : f32
  }
  %r = fa.mask %m, %i, %i, %i, %i at(%i, %i) captures(%doc : memref<?x?xi32>) : tensor<16x32xf32> mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index, %d: memref<?x?xi32>):
    %qd = memref.load %d[%b, %qi] : memref<?x?xi32>
    %kd = memref.load %d[%b, %ki] : memref<?x?xi32>
    %keep = arith.cmpi eq, %qd, %kd : i32
    fa.yield %keep : i1
  }
  return
}

// -----

func.func @capture_arguments(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
                             %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
                             %lse: memref<?x8x?xf32>, %doc: memref<?x?xi32>) {
  // expected-error @+1 {{mask_mod region must take (index, index, index, index, index, index, memref<?x?xi32>) (b, h, q_idx, kv_idx, q_len, kv_len, the captures), got 6 arguments}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32>
    captures(%doc : memref<?x?xi32>)
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %keep = arith.cmpi sle, %ki, %qi : index
      fa.yield %keep : i1
    }
  return
}

// -----

// A region reads only its captures: any other memory is refused.
func.func @load_from_elsewhere(%s: tensor<16x32xf32>, %i: index, %doc: memref<?x?xi32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{mask_mod region may hold arith and math ops and loads of its captured tensors only, got 'memref.alloca'}}
  %r = fa.mask %s, %i, %i, %i, %i at(%i, %i) captures(%doc : memref<?x?xi32>) : tensor<16x32xf32> mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index, %d: memref<?x?xi32>):
    %buffer = memref.alloca() : memref<4xi32>
    %x = memref.load %buffer[%b] : memref<4xi32>
    %keep = arith.cmpi eq, %x, %x : i32
    fa.yield %keep : i1
  }
  return %r : tensor<16x32xf32>
}

// -----

func.func @store_to_capture(%s: tensor<16x32xf32>, %i: index, %bias: memref<?xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{score_mod region may hold arith and math ops and loads of its captured tensors only, got 'memref.store'}}
  %r = fa.score_mod %s, %i, %i, %i, %i at(%i, %i) captures(%bias : memref<?xf32>) {scale = 0.125 : f32} : tensor<16x32xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index, %t: memref<?xf32>):
    memref.store %x, %t[%h] : memref<?xf32>
    fa.yield %x : f32
  }
  return %r : tensor<16x32xf32>
}

// -----

func.func @capture_without_mask(%s: tensor<16x32xf32>, %i: index, %doc: memref<?x?xi32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{takes captured tensors only with a mask_mod region}}
  %r = fa.mask %s, %i, %i, %i, %i captures(%doc : memref<?x?xi32>) : tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}

// -----

func.func @capture_type(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
                        %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
                        %lse: memref<?x8x?xf32>, %t: memref<?x?x?x?x?xf32>) {
  // expected-error @+1 {{operand #5 must be variadic of}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32>
    captures(%t : memref<?x?x?x?x?xf32>)
  return
}

// -----

func.func @dim_past_rank(%s: tensor<16x32xf32>, %i: index, %doc: memref<?x?xi32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{mask_mod region takes a captured tensor's size with a constant dimension below its rank (2)}}
  %r = fa.mask %s, %i, %i, %i, %i at(%i, %i) captures(%doc : memref<?x?xi32>) : tensor<16x32xf32> mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index, %d: memref<?x?xi32>):
    %n = memref.dim %d, %h : memref<?x?xi32>
    %keep = arith.cmpi slt, %ki, %n : index
    fa.yield %keep : i1
  }
  return %r : tensor<16x32xf32>
}

// -----

func.func @capture_in_shared_memory(%q: memref<?x8x?x64xf16>, %k: memref<?x8x?x64xf16>,
                                    %v: memref<?x8x?x64xf16>, %o: memref<?x8x?x64xf16>,
                                    %lse: memref<?x8x?xf32>, %t: memref<?xf32, 3>) {
  // expected-error @+1 {{captured tensor 0 must be a row-major memref in global memory, got 'memref<?xf32, 3>'}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x8x?x64xf16>, memref<?x8x?x64xf16>, memref<?x8x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32>
    captures(%t : memref<?xf32, 3>)
  return
}
