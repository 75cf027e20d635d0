// RUN: fa-opt %s --split-input-file --fa-tile="block-m=16 block-n=32" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=16 block-n=32" | FileCheck %s --check-prefix=BWD

// 16-bit inputs: the score_mod's math functions may use the hardware's
// approximations (fastmath afn: tanh.approx.f32) and its divisions the
// reciprocal (arcp), in the forward and in the backward's recomputed
// scores and derivative alike; f32 inputs keep the exact forms.
// CHECK-LABEL: func @softcap_f16
// CHECK: fa.score_mod
// CHECK: arith.divf %{{.*}}, %{{.*}} fastmath<arcp> : f32
// CHECK: math.tanh %{{.*}} fastmath<afn> : f32
// CHECK-LABEL: func @softcap_f32
// CHECK: fa.score_mod
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK: math.tanh %{{.*}} : f32
// BWD-LABEL: func @softcap_f16_backward
// BWD: fa.score_mod
// BWD: math.tanh %{{.*}} fastmath<afn> : f32
// BWD: fa.score_mod_grad
// BWD: math.tanh %{{.*}} fastmath<afn> : f32
func.func @softcap_f16(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                       %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
                       %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %cap = arith.constant 30.0 : f32
      %x = arith.divf %s, %cap : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %cap : f32
      fa.yield %r : f32
    }
  return
}

// -----

func.func @softcap_f32(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>,
                       %v: memref<?x?x?x64xf32>, %o: memref<?x?x?x64xf32>,
                       %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %cap = arith.constant 30.0 : f32
      %x = arith.divf %s, %cap : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %cap : f32
      fa.yield %r : f32
    }
  return
}

// -----

func.func @softcap_f16_backward(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                                %v: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>,
                                %delta: memref<?x?x?xf32>, %acc: memref<?x?x?x64xf32>) {
  fa.attention_backward %q, %k, %v, %q, %q, %lse into %q, %k, %v
      workspace %delta, %acc {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>,
      memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
    into memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %cap = arith.constant 30.0 : f32
      %x = arith.divf %s, %cap : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %cap : f32
      fa.yield %r : f32
    }
  return
}
