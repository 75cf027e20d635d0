// RUN: fa-opt %s --fa-tile-pipeline="block-m=8 block-n=32" --fa-place-pipeline --fa-convert-placed-to-gpu --canonicalize --cse | FileCheck %s
// RUN: fa-opt %s --fa-tile-pipeline="block-m=8 block-n=32" --fa-place-pipeline --fa-gpu-kernel --fa-gpu-to-nvvm --fa-nvvm-to-ptx | FileCheck %s --check-prefix=PTX

// With D and B_c multiples of 4, shared rows are padded by 4 (132 floats),
// so every row starts 16-byte aligned: S = Q K^T reads 4 contraction
// elements of a Q row and of a K row per step with one 16-byte load each.
// CHECK-LABEL: gpu.func @attention
// CHECK: %[[QS:.*]] = memref.view {{.*}} to memref<8x132xf32, #gpu.address_space<workgroup>>
// CHECK: %[[KS:.*]] = memref.view {{.*}} to memref<32x132xf32, #gpu.address_space<workgroup>>
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %c4 iter_args
// CHECK:   %[[QV:.*]] = vector.load %[[QS]][%{{.*}}, %[[K]]] {alignment = 16 : i64} : memref<8x132xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK:   %[[KV:.*]] = vector.load %[[KS]][%{{.*}}, %[[K]]] {alignment = 16 : i64} : memref<32x132xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// s += q[k] * k[k], in order k, k+1, k+2, k+3
// CHECK-COUNT-4: math.fma
// P V stays scalar: one P element (broadcast) and 4 V elements per key.
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c1{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32)
// CHECK-NOT: vector.load
// CHECK: gpu.return

// PTX: ld.shared.v4.b32
func.func @attention(%q: memref<?x?x?x128xf32>, %k: memref<?x?x?x128xf32>,
                     %v: memref<?x?x?x128xf32>, %o: memref<?x?x?x128xf32>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf32>, memref<?x?x?x128xf32>, memref<?x?x?x128xf32>
    into memref<?x?x?x128xf32>, memref<?x?x?xf32>
  return
}
