// RUN: fa-opt %s --fa-tile="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2" | FileCheck %s

// 8-bit rows of head dim 64 are 64 bytes: Q, K and V are placed in the
// 64-byte swizzle (one 64-byte column block, 512-byte atoms), and V's
// transposed copy for P V, whose rows are the 128 keys, in the 128-byte
// one.
// Q's 8 KiB at 0, K's two 8 KiB slots from 8192, V's from 24576, the
// transposed copies from 40960.
// CHECK-LABEL: func.func @float8_d64
// CHECK: fa.load_tile {{.*}} {fa.shared_offset = 0 : i64} {{.*}} -> tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 64>>
// CHECK: %[[K:.*]] = fa.load_tile {{.*}} fa.shared_offset = 8192 : i64} {{.*}} -> tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 64>>
// CHECK: %[[V:.*]] = fa.load_tile {{.*}} fa.shared_offset = 24576 : i64} {{.*}} -> tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 64>>
// CHECK: fa.tile_matmul %{{.*}}, %[[K]] {transpose_rhs} : tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 64>>, tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 64>>
// CHECK: %[[VT:.*]] = fa.convert_layout %[[V]] {fa.shared_offset = 40960 : i64} : tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 64>> -> tensor<128x64xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
// CHECK: fa.tile_matmul %{{.*}}, %[[VT]] acc
func.func @float8_d64(%q: memref<?x?x?x64xf8E4M3FN>, %k: memref<?x?x?x64xf8E4M3FN>, %v: memref<?x?x?x64xf8E4M3FN>, %o: memref<?x?x?x64xbf16>, %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN>, memref<?x?x?x64xf8E4M3FN> into memref<?x?x?x64xbf16>, memref<?x?x?xf32>
  return
}
