// RUN: fa-opt %s --split-input-file --fa-tile="block-m=64 block-n=64" --cse | FileCheck %s

// FP8 inputs: Q K^T reads e4m3 tiles and accumulates in f32; Q's and K's
// descales scale the scores through the softmax's factor; P is quantized to
// e4m3 from 256 p (probs_scale), and the finalization divides the 256 out
// and applies V's descale. O is bf16.
// CHECK-LABEL: func @float8
// CHECK-SAME: %[[QD:[^:]*]]: memref<?x?xf32>, %[[KD:[^:]*]]: memref<?x?xf32>, %[[VD:[^:]*]]: memref<?x?xf32>)
// CHECK: fa.grid (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// CHECK: %[[KVH:.*]] = arith.divui %[[H]], %{{.*}} : index
// CHECK: %[[QTILE:.*]] = fa.load_tile {{.*}} -> tensor<64x128xf8E4M3FN>
// One factor per (batch entry, K/V head).
// CHECK-DAG: %[[INV256:.*]] = arith.constant 3.906250e-03 : f32
// CHECK-DAG: %[[QF:.*]] = memref.load %[[QD]][%[[B]], %[[KVH]]]
// CHECK-DAG: %[[KF:.*]] = memref.load %[[KD]][%[[B]], %[[KVH]]]
// CHECK: %[[FACTOR:.*]] = arith.mulf %[[QF]], %[[KF]] : f32
// CHECK: %[[VF:.*]] = memref.load %[[VD]][%[[B]], %[[KVH]]]
// CHECK: %[[OSCALE:.*]] = arith.mulf %[[INV256]], %[[VF]] : f32
// CHECK: scf.for
// CHECK: %[[KTILE:.*]] = fa.load_tile {{.*}} -> tensor<64x128xf8E4M3FN>
// CHECK: %[[VTILE:.*]] = fa.load_tile {{.*}} -> tensor<64x128xf8E4M3FN>
// CHECK: %[[S:.*]] = fa.tile_matmul %[[QTILE]], %[[KTILE]] {transpose_rhs} : tensor<64x128xf8E4M3FN>, tensor<64x128xf8E4M3FN> -> tensor<64x64xf32>
// CHECK: %{{.*}}, %[[P:.*]], %{{.*}}, %[[ALPHA:.*]] = fa.online_softmax %{{.*}}, %{{.*}}, %{{.*}} factor %[[FACTOR]] {probs_scale = 2.560000e+02 : f32, scale = 0.0883883461 : f32}
// CHECK: %[[P8:.*]] = arith.truncf %[[P]] : tensor<64x64xf32> to tensor<64x64xf8E4M3FN>
// CHECK: fa.tile_matmul %[[P8]], %[[VTILE]] acc(%{{.*}}) : tensor<64x64xf8E4M3FN>, tensor<64x128xf8E4M3FN> -> tensor<64x128xf32>
// CHECK: %[[OUT:.*]], %{{.*}} = fa.finalize %{{.*}}, %{{.*}}, %{{.*}} scaled %[[OSCALE]]
// CHECK: %[[O16:.*]] = arith.truncf %[[OUT]] : tensor<64x128xf32> to tensor<64x128xbf16>
// CHECK: fa.store_tile %[[O16]]
func.func @float8(%q: memref<?x?x?x128xf8E4M3FN>, %k: memref<?x?x?x128xf8E4M3FN>,
                  %v: memref<?x?x?x128xf8E4M3FN>, %o: memref<?x?x?x128xbf16>,
                  %lse: memref<?x?x?xf32>, %qd: memref<?x?xf32>,
                  %kd: memref<?x?xf32>, %vd: memref<?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse descales(%qd, %kd, %vd) {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf8E4M3FN>, memref<?x?x?x128xf8E4M3FN>, memref<?x?x?x128xf8E4M3FN>
    into memref<?x?x?x128xbf16>, memref<?x?x?xf32>
    descales memref<?x?xf32>, memref<?x?xf32>, memref<?x?xf32>
  return
}

// -----

// Without descales the factors are 1: no factor, O scaled by 1/256 only.
// CHECK-LABEL: func @float8_undescaled
// CHECK: %[[INV256:.*]] = arith.constant 3.906250e-03 : f32
// CHECK: fa.online_softmax %{{.*}}, %{{.*}}, %{{.*}} {probs_scale = 2.560000e+02 : f32, scale = 1.250000e-01 : f32}
// CHECK: fa.finalize %{{.*}}, %{{.*}}, %{{.*}} scaled %[[INV256]]
// CHECK: arith.truncf %{{.*}} : tensor<64x64xf32> to tensor<64x64xf16>
func.func @float8_undescaled(%q: memref<?x?x?x64xf8E4M3FN>, %k: memref<?x?x?x64xf8E4M3FN>,
                             %v: memref<?x?x?x64xf8E4M3FN>, %o: memref<?x?x?x64xf16>,
                             %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}
