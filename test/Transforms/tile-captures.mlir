// RUN: fa-opt %s --split-input-file --fa-tile="block-m=16 block-n=32" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=16 block-n=32" | FileCheck %s --check-prefix=BWD

// Captured tensors through the tiling: fa.score_mod and fa.mask take the
// problem's captures with their regions (each region all of them). A mask
// that reads a tensor narrows no K/V range: the range keeps the causal
// mask alone, without a mask_mod.
// CHECK-LABEL: func @bias_document
// CHECK-SAME: %[[BIAS:[a-z0-9_]+]]: memref<?x?x?xf16>, %[[DOC:[a-z0-9_]+]]: memref<?x?xi32>
// CHECK: fa.kv_tile_range %{{.*}}, %{{.*}}, %{{.*}} {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
// CHECK-NOT: mask_mod
// CHECK: scf.for
// CHECK: fa.score_mod {{.*}} captures(%[[BIAS]], %[[DOC]] : memref<?x?x?xf16>, memref<?x?xi32>)
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x?xf16>
// CHECK: fa.mask {{.*}} captures(%[[BIAS]], %[[DOC]] : memref<?x?x?xf16>, memref<?x?xi32>) {mask = #fa.mask<causal>} : tensor<16x32xf32> mask_mod {
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x?xi32>

// BWD-LABEL: func @bias_document_backward
// BWD: fa.q_tile_range %{{.*}}, %{{.*}}, %{{.*}} {block_m = 16 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
// BWD-NOT: mask_mod {
// BWD: fa.score_mod {{.*}} captures(
// BWD: fa.mask {{.*}} captures(
// BWD: fa.score_mod_grad {{.*}} captures(
func.func @bias_document(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>,
                         %v: memref<?x2x?x32xf32>, %o: memref<?x2x?x32xf32>,
                         %lse: memref<?x2x?xf32>, %bias: memref<?x?x?xf16>,
                         %doc: memref<?x?xi32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?xf32>
    captures(%bias, %doc : memref<?x?x?xf16>, memref<?x?xi32>)
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %t: memref<?x?x?xf16>, %d: memref<?x?xi32>):
      %x = memref.load %t[%h, %qi, %ki] : memref<?x?x?xf16>
      %xf = arith.extf %x : f16 to f32
      %r = arith.addf %s, %xf : f32
      fa.yield %r : f32
    }
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %t: memref<?x?x?xf16>, %d: memref<?x?xi32>):
      %qd = memref.load %d[%b, %qi] : memref<?x?xi32>
      %kd = memref.load %d[%b, %ki] : memref<?x?xi32>
      %keep = arith.cmpi eq, %qd, %kd : i32
      fa.yield %keep : i1
    }
  return
}


func.func @bias_document_backward(
    %q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x32xf32>,
    %o: memref<?x2x?x32xf32>, %lse: memref<?x2x?xf32>, %delta: memref<?x2x?xf32>,
    %acc: memref<?x2x?x32xf32>, %bias: memref<?x?x?xf16>, %doc: memref<?x?xi32>) {
  fa.attention_backward %q, %k, %v, %o, %o, %lse into %q, %k, %v
      workspace %delta, %acc {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
      memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    workspace memref<?x2x?xf32>, memref<?x2x?x32xf32>
    captures(%bias, %doc : memref<?x?x?xf16>, memref<?x?xi32>)
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %t: memref<?x?x?xf16>, %d: memref<?x?xi32>):
      %x = memref.load %t[%h, %qi, %ki] : memref<?x?x?xf16>
      %xf = arith.extf %x : f16 to f32
      %r = arith.addf %s, %xf : f32
      fa.yield %r : f32
    }
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %t: memref<?x?x?xf16>, %d: memref<?x?xi32>):
      %qd = memref.load %d[%b, %qi] : memref<?x?xi32>
      %kd = memref.load %d[%b, %ki] : memref<?x?xi32>
      %keep = arith.cmpi eq, %qd, %kd : i32
      fa.yield %keep : i1
    }
  return
}

// -----

// A mask that reads none of the captures still narrows the range: the
// range op takes it without the capture arguments.
// CHECK-LABEL: func @window_with_bias
// CHECK: fa.kv_tile_range {{.*}} at(%{{.*}}, %{{.*}}) {block_m = 16 : i64, block_n = 32 : i64} mask_mod {
// CHECK-NEXT: ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index):
func.func @window_with_bias(%q: memref<?x2x?x32xf32>, %k: memref<?x2x?x32xf32>,
                            %v: memref<?x2x?x32xf32>, %o: memref<?x2x?x32xf32>,
                            %lse: memref<?x2x?xf32>, %slopes: memref<?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x2x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>
    into memref<?x2x?x32xf32>, memref<?x2x?xf32>
    captures(%slopes : memref<?xf32>)
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %sl: memref<?xf32>):
      %slope = memref.load %sl[%h] : memref<?xf32>
      %r = arith.mulf %s, %slope : f32
      fa.yield %r : f32
    }
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %sl: memref<?xf32>):
      %c = arith.constant 64 : index
      %lo = arith.subi %qi, %c : index
      %keep = arith.cmpi sge, %ki, %lo : index
      fa.yield %keep : i1
    }
  return
}
