// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=128 block-n=64" --fa-place-mma="num-warps=8 stages=2" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=64 block-n=32" --fa-place-mma="num-warps=2 stages=3" | FileCheck %s --check-prefix=SMALL

// FlashAttention-2 on tensor cores: D = 128, B_r = 128, B_c = 64, 8 warps
// (each owns 16 query rows), 2 K/V tiles in flight.
// CHECK-LABEL: func @attention_f16
// The softmax state and O live in accumulator fragments from the start.
// CHECK-DAG: arith.constant dense<0xFF800000> : tensor<128xf32, #fa.mma<warps = 8>>
// CHECK-DAG: arith.constant dense<0.000000e+00> : tensor<128x128xf32, #fa.mma<warps = 8>>
// Q_i in shared memory, rows padded to 136 elements (17 chunks of 16 bytes:
// odd, so the 8 rows of an ldmatrix phase hit 8 bank groups) ...
// CHECK: %[[Q:.*]] = fa.load_tile {{.*}} {fa.shared_offset = 0 : i64} : memref<?x?x?x128xf16> -> tensor<128x128xf16, #fa.shared<pad = 8>>
// ... and loaded once into A fragments, before the K/V loop.
// CHECK-NEXT: %[[QA:.*]] = fa.convert_layout %[[Q]] : tensor<128x128xf16, #fa.shared<pad = 8>> -> tensor<128x128xf16, #fa.mma_operand<warps = 8>>
// CHECK: scf.for {{.*}} -> (tensor<128xf32, #fa.mma<warps = 8>>, tensor<128xf32, #fa.mma<warps = 8>>, tensor<128x128xf32, #fa.mma<warps = 8>>)
// K_j and V_j: rings of 2 slots of 64 x 136 x 2 = 17408 bytes after Q
// (128 x 136 x 2 = 34816 bytes).
// CHECK: %[[K:.*]] = fa.load_tile {{.*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 34816 : i64} {{.*}} -> tensor<64x128xf16, #fa.shared<pad = 8>>
// CHECK: %[[V:.*]] = fa.load_tile {{.*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 69632 : i64} {{.*}} -> tensor<64x128xf16, #fa.shared<pad = 8>>
// S = Q K^T: A fragments of Q times K read from shared memory.
// CHECK: fa.tile_matmul %[[QA]], %[[K]] {transpose_rhs} : tensor<128x128xf16, #fa.mma_operand<warps = 8>>, tensor<64x128xf16, #fa.shared<pad = 8>> -> tensor<128x64xf32, #fa.mma<warps = 8>>
// CHECK: %{{.*}}, %[[P:.*]], %{{.*}}, %{{.*}} = fa.online_softmax {{.*}} : tensor<128x64xf32, #fa.mma<warps = 8>>, tensor<128xf32, #fa.mma<warps = 8>>
// P is rounded and becomes the A operand of P V in registers.
// CHECK: %[[P16:.*]] = arith.truncf %[[P]] : tensor<128x64xf32, #fa.mma<warps = 8>> to tensor<128x64xf16, #fa.mma<warps = 8>>
// CHECK: %[[PA:.*]] = fa.convert_layout %[[P16]] : tensor<128x64xf16, #fa.mma<warps = 8>> -> tensor<128x64xf16, #fa.mma_operand<warps = 8>>
// CHECK: fa.tile_matmul %[[PA]], %[[V]] acc({{.*}}) : tensor<128x64xf16, #fa.mma_operand<warps = 8>>, tensor<64x128xf16, #fa.shared<pad = 8>> -> tensor<128x128xf32, #fa.mma<warps = 8>>
// CHECK: fa.store_tile {{.*}} : tensor<128x128xf16, #fa.mma<warps = 8>>
// CHECK: fa.store_tile {{.*}} : tensor<128xf32, #fa.mma<warps = 8>>
// Launch: 256 threads, 34816 + 4 x 17408 = 104448 bytes.
// CHECK: fa.launch = #fa.launch<strategy = mma, threads = 256, shared_bytes = 104448, stages = 2, registers = {{[0-9]+}}>
// SMALL-LABEL: func @attention_f16
// SMALL: fa.load_tile {{.*}} {fa.pipeline_stages = 3 : i64, fa.shared_offset = 17408 : i64} {{.*}} -> tensor<32x128xf16, #fa.shared<pad = 8>>
// SMALL: tensor<64x32xf32, #fa.mma<warps = 2>>
// SMALL: fa.launch = #fa.launch<strategy = mma, threads = 64, shared_bytes = 69632, stages = 3, registers = {{[0-9]+}}>
func.func @attention_f16(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                         %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                         %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// A head dim that is an odd multiple of 8 (40): Q K^T runs over 48 columns,
// the 8 past the head dim zero in shared memory; rows hold 48 + 8 = 56
// elements (7 chunks of 16 bytes, odd).
// CHECK-LABEL: func @attention_d40_bf16
// CHECK: fa.load_tile {{.*}} -> tensor<128x40xbf16, #fa.shared<pad = 16>>
// CHECK: fa.convert_layout {{.*}} -> tensor<128x40xbf16, #fa.mma_operand<warps = 8>>
func.func @attention_d40_bf16(%q: memref<?x?x?x40xbf16>, %k: memref<?x?x?x40xbf16>,
                              %v: memref<?x?x?x40xbf16>, %o: memref<?x?x?x40xbf16>,
                              %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x40xbf16>, memref<?x?x?x40xbf16>, memref<?x?x?x40xbf16>
    into memref<?x?x?x40xbf16>, memref<?x?x?xf32>
  return
}
