// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=8 block-n=32" --fa-place-simt | FileCheck %s

// 16-bit inputs on the SIMT strategy: tiles stay in the input precision in
// shared memory (half the bytes of f32), S, the softmax state and the O
// accumulator are f32 in registers. P and O are rounded to the input type in
// registers, P before it moves to shared memory for P V (as FlashAttention
// does), O before the store.
// CHECK-LABEL: func @attention_f16
// Q_i: 8 rows of 64 + 4 padding f16 = 1088 bytes; K_j, V_j 32 x 68 x 2 = 4352.
// CHECK: %[[Q:.*]] = fa.load_tile {{.*}} {fa.shared_offset = 0 : i64} : memref<?x?x?x64xf16> -> tensor<8x64xf16, #fa.shared<pad = 4>>
// CHECK: %[[K:.*]] = fa.load_tile {{.*}} {fa.shared_offset = 1088 : i64} : memref<?x?x?x64xf16> -> tensor<32x64xf16, #fa.shared<pad = 4>>
// CHECK: %[[V:.*]] = fa.load_tile {{.*}} {fa.shared_offset = 5440 : i64} : memref<?x?x?x64xf16> -> tensor<32x64xf16, #fa.shared<pad = 4>>
// CHECK: fa.tile_matmul %[[Q]], %[[K]] {transpose_rhs} : tensor<8x64xf16, #fa.shared<pad = 4>>, tensor<32x64xf16, #fa.shared<pad = 4>> -> tensor<8x32xf32, #fa.blocked<threads = [8, 32]>>
// CHECK: %{{.*}}, %[[P:.*]], %{{.*}}, %{{.*}} = fa.online_softmax
// CHECK: %[[P16:.*]] = arith.truncf %[[P]] : tensor<8x32xf32, #fa.blocked<threads = [8, 32]>> to tensor<8x32xf16, #fa.blocked<threads = [8, 32]>>
// CHECK: %[[PS:.*]] = fa.convert_layout %[[P16]] {fa.shared_offset = 9792 : i64} : tensor<8x32xf16, #fa.blocked<threads = [8, 32]>> -> tensor<8x32xf16, #fa.shared<pad = 4>>
// CHECK: fa.tile_matmul %[[PS]], %[[V]] acc({{.*}}) : {{.*}} -> tensor<8x64xf32, #fa.blocked<threads = [8, 32]>>
// CHECK: %[[O16:.*]] = arith.truncf %{{.*}} : tensor<8x64xf32, #fa.blocked<threads = [8, 32]>> to tensor<8x64xf16, #fa.blocked<threads = [8, 32]>>
// CHECK: fa.store_tile %[[O16]], {{.*}} : tensor<8x64xf16, #fa.blocked<threads = [8, 32]>> -> memref<?x?x?x64xf16>
// CHECK: fa.store_tile {{.*}} : tensor<8xf32, #fa.blocked<threads = [8, 32]>> -> memref<?x?x?xf32>
// P: 8 x 36 x 2 = 576 bytes, 9792 + 576 = 10368 in all.
// CHECK: fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 10368, stages = 1, registers = {{[0-9]+}}>
func.func @attention_f16(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                         %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
                         %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}

// -----

// bf16 is placed the same way.
// CHECK-LABEL: func @attention_bf16
// CHECK: fa.load_tile {{.*}} -> tensor<8x64xbf16, #fa.shared<pad = 4>>
// CHECK: arith.truncf {{.*}} to tensor<8x32xbf16, #fa.blocked<threads = [8, 32]>>
// CHECK: fa.convert_layout {{.*}} -> tensor<8x32xbf16, #fa.shared<pad = 4>>
// CHECK: fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 10368, stages = 1, registers = {{[0-9]+}}>
func.func @attention_bf16(%q: memref<?x?x?x64xbf16>, %k: memref<?x?x?x64xbf16>,
                          %v: memref<?x?x?x64xbf16>, %o: memref<?x?x?x64xbf16>,
                          %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>
    into memref<?x?x?x64xbf16>, memref<?x?x?xf32>
  return
}
