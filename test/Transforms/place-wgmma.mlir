// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2" | FileCheck %s --check-prefixes=CHECK,NOSKIP
// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-wgmma="num-warps=4 stages=3" | FileCheck %s --check-prefix=SMALL
// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 skip-unit-rescale=1" | FileCheck %s --check-prefix=SKIP

// skip-unit-rescale marks the online softmax (its correction exactly 1
// where the max did not move) and the accumulator's rescale by that
// correction (multiplied only in warps where a running max moved); off by
// default.
// SKIP-LABEL: func @attention_f16
// SKIP: fa.online_softmax {{.*}}fa.skip_unit_factors
// SKIP: fa.rescale {{.*}} {fa.skip_unit_factors}
// NOSKIP-NOT: fa.skip_unit_factors

// Hopper: D = 128, B_r = 128 (two warpgroups of 64 query rows), B_c = 128,
// 2 K/V tiles in flight.
// CHECK-LABEL: func @attention_f16
// The softmax state and O live in accumulator fragments: warp w of the
// block holds rows 16w .. 16w + 15 (its warpgroup's m64 accumulator is
// its 4 warps' m16 fragments).
// CHECK-DAG: arith.constant dense<0xFF800000> : tensor<128xf32, #fa.mma<warps = 8>>
// CHECK-DAG: arith.constant dense<0.000000e+00> : tensor<128x128xf32, #fa.mma<warps = 8>>
// Q_i stays in shared memory in the 128-byte swizzle (wgmma reads it by
// descriptor): no conversion to A fragments.
// CHECK: %[[Q:.*]] = fa.load_tile {{.*}} {fa.shared_offset = 0 : i64} : memref<?x?x?x128xf16> -> tensor<128x128xf16, #fa.swizzled_shared<bytes = 128>>
// CHECK-NOT: fa.convert_layout %[[Q]]
// CHECK: scf.for
// K_j and V_j: rings of 2 slots of 128 x 128 x 2 = 32768 bytes after Q
// (32768 bytes).
// CHECK: %[[K:.*]] = fa.load_tile {{.*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 32768 : i64} {{.*}} -> tensor<128x128xf16, #fa.swizzled_shared<bytes = 128>>
// CHECK: %[[V:.*]] = fa.load_tile {{.*}} {fa.pipeline_stages = 2 : i64, fa.shared_offset = 98304 : i64} {{.*}} -> tensor<128x128xf16, #fa.swizzled_shared<bytes = 128>>
// S = Q K^T: both operands from shared memory.
// CHECK: fa.tile_matmul %[[Q]], %[[K]] {transpose_rhs} : tensor<128x128xf16, #fa.swizzled_shared<bytes = 128>>, tensor<128x128xf16, #fa.swizzled_shared<bytes = 128>> -> tensor<128x128xf32, #fa.mma<warps = 8>>
// CHECK: %{{.*}}, %[[P:.*]], %{{.*}}, %{{.*}} = fa.online_softmax {{.*}} : tensor<128x128xf32, #fa.mma<warps = 8>>, tensor<128xf32, #fa.mma<warps = 8>>
// P is rounded and becomes the register A operand of P V.
// CHECK: %[[P16:.*]] = arith.truncf %[[P]] : tensor<128x128xf32, #fa.mma<warps = 8>> to tensor<128x128xf16, #fa.mma<warps = 8>>
// CHECK: %[[PA:.*]] = fa.convert_layout %[[P16]] : tensor<128x128xf16, #fa.mma<warps = 8>> -> tensor<128x128xf16, #fa.mma_operand<warps = 8>>
// CHECK: fa.tile_matmul %[[PA]], %[[V]] acc({{.*}}) : tensor<128x128xf16, #fa.mma_operand<warps = 8>>, tensor<128x128xf16, #fa.swizzled_shared<bytes = 128>> -> tensor<128x128xf32, #fa.mma<warps = 8>>
// CHECK: fa.store_tile {{.*}} : tensor<128x128xf16, #fa.mma<warps = 8>>
// Launch: 256 threads, 32768 + 4 x 32768 bytes, plus 1024 bytes to align
// the base to the swizzle atom.
// CHECK: fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 164864, stages = 2, registers = {{[0-9]+}}>
// SMALL-LABEL: func @attention_f16
// SMALL: fa.load_tile {{.*}} {fa.pipeline_stages = 3 : i64, fa.shared_offset = 16384 : i64} {{.*}} -> tensor<64x128xf16, #fa.swizzled_shared<bytes = 128>>
// SMALL: tensor<64x64xf32, #fa.mma<warps = 4>>
// SMALL: fa.launch = #fa.launch<strategy = wgmma, threads = 128, shared_bytes = 115712, stages = 3, registers = {{[0-9]+}}>
func.func @attention_f16(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                         %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                         %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}
