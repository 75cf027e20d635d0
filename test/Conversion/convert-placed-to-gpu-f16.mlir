// RUN: fa-opt %s --fa-tile-pipeline="block-m=8 block-n=32" --fa-place-pipeline --fa-convert-placed-to-gpu --canonicalize --cse | FileCheck %s
// RUN: fa-opt %s --fa-tile-pipeline="block-m=8 block-n=32" --fa-place-pipeline --fa-gpu-kernel --fa-gpu-to-nvvm --fa-nvvm-to-ptx | FileCheck %s --check-prefix=PTX

// f16 tiles on the SIMT strategy: shared memory holds f16, every operand is
// widened to f32 as it is read, the FMAs and the softmax are f32; P and O
// are rounded to f16 in registers.
// CHECK-LABEL: gpu.func @attention
// The copies store f16 into f16 shared tiles (rows of 64 + 4 padding).
// CHECK: %[[QS:.*]] = memref.view {{.*}} to memref<8x68xf16, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}}, %[[QS]]{{.*}} : memref<8x68xf16, #gpu.address_space<workgroup>>
// CHECK: %[[KS:.*]] = memref.view {{.*}} to memref<32x68xf16, #gpu.address_space<workgroup>>
// CHECK: %[[VS:.*]] = memref.view {{.*}} to memref<32x68xf16, #gpu.address_space<workgroup>>
// S = Q K^T: 4 contraction elements per 8-byte load, widened, then FMAs.
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %c4 iter_args
// CHECK:   vector.load %[[QS]][%{{.*}}, %[[K]]] {alignment = 8 : i64} : memref<8x68xf16, #gpu.address_space<workgroup>>, vector<4xf16>
// CHECK-COUNT-4: arith.extf %{{.*}} : f16 to f32
// CHECK:   vector.load %[[KS]][%{{.*}}, %[[K]]] {alignment = 8 : i64} : memref<32x68xf16, #gpu.address_space<workgroup>>, vector<4xf16>
// CHECK-COUNT-4: arith.extf %{{.*}} : f16 to f32
// CHECK-COUNT-4: math.fma %{{.*}} : f32
// P rounded to f16 in registers, then stored to its shared tile.
// CHECK: %[[P16:.*]] = arith.truncf %{{.*}} : vector<1xf32> to vector<1xf16>
// CHECK: %[[PS:.*]] = memref.view {{.*}} to memref<8x36xf16, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}}, %[[PS]]
// P V: scalar f16 reads, widened.
// CHECK: scf.for
// CHECK:   memref.load %[[PS]]{{.*}} : memref<8x36xf16, #gpu.address_space<workgroup>>
// CHECK:   arith.extf %{{.*}} : f16 to f32
// CHECK:   memref.load %[[VS]]{{.*}} : memref<32x68xf16, #gpu.address_space<workgroup>>
// CHECK:   arith.extf %{{.*}} : f16 to f32
// CHECK:   math.fma %{{.*}} : f32
// O rounded to f16 and stored; LSE stays f32.
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xf16>
// CHECK: memref.store %{{.*}} : memref<?x?x?x64xf16>
// CHECK: memref.store %{{.*}} : memref<?x?x?xf32>

// The PTX has 16-bit global and shared accesses, 8-byte vector reads of four
// halves, conversions to and from f32.
// PTX: ld.global.b16
// PTX: st.shared.b16
// PTX: ld.shared.v4.b16
// PTX: cvt.f32.f16
// PTX: fma.rn.f32
// PTX: cvt.rn.f16.f32
// PTX: st.global.b16
func.func @attention(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                     %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}
