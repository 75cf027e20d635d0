// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=8 block-n=32" --fa-place-simt | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=16 block-n=16" --fa-place-simt="num-warps=2" | FileCheck %s --check-prefix=SMALL
// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=8 block-n=32" --fa-place-simt="pad=1" | FileCheck %s --check-prefix=PAD1

// The lecture's kernel: d = 128, B_r = 8, B_c = 32, 8 warps as an 8 x 32
// thread grid (bdy x bdx).
// CHECK-LABEL: func @attention
// CHECK: fa.grid
// The initial state is rematerialized in the program, in registers.
// CHECK-DAG: %[[M0:.*]] = arith.constant dense<0xFF800000> : tensor<8xf32, #fa.blocked<threads = [8, 32]>>
// CHECK-DAG: %[[ACC0:.*]] = arith.constant dense<0.000000e+00> : tensor<8x128xf32, #fa.blocked<threads = [8, 32]>>
// Q_i in shared memory at offset 0, rows padded by 4 elements (rows stay
// 16-byte aligned for vector loads).
// CHECK: %[[Q:.*]] = fa.load_tile {{.*}} {fa.shared_offset = 0 : i64} : memref<?x?x?x128xf32> -> tensor<8x128xf32, #fa.shared<pad = 4>>
// The online-softmax state lives in registers across the K/V loop.
// CHECK: scf.for {{.*}} -> (tensor<8xf32, #fa.blocked<threads = [8, 32]>>, tensor<8xf32, #fa.blocked<threads = [8, 32]>>, tensor<8x128xf32, #fa.blocked<threads = [8, 32]>>)
// K_j and V_j in shared memory: 8 * 132 * 4 = 4224 bytes after Q_i, then
// 32 * 132 * 4 = 16896 bytes each.
// CHECK: %[[K:.*]] = fa.load_tile {{.*}} {fa.shared_offset = 4224 : i64} {{.*}} -> tensor<32x128xf32, #fa.shared<pad = 4>>
// CHECK: %[[V:.*]] = fa.load_tile {{.*}} {fa.shared_offset = 21120 : i64} {{.*}} -> tensor<32x128xf32, #fa.shared<pad = 4>>
// S = Q K^T is computed into the registers of the thread that owns each element.
// CHECK: %[[S:.*]] = fa.tile_matmul %[[Q]], %[[K]] {transpose_rhs} : {{.*}} -> tensor<8x32xf32, #fa.blocked<threads = [8, 32]>>
// CHECK: %{{.*}}, %[[P:.*]], %{{.*}}, %{{.*}} = fa.online_softmax
// P moves to shared memory (offset 38016) so every thread of a row can read it for P V.
// CHECK: %[[PS:.*]] = fa.convert_layout %[[P]] {fa.shared_offset = 38016 : i64} : tensor<8x32xf32, #fa.blocked<threads = [8, 32]>> -> tensor<8x32xf32, #fa.shared<pad = 4>>
// CHECK: fa.tile_matmul %[[PS]], %[[V]] acc
// CHECK: fa.store_tile {{.*}} : tensor<8x128xf32, #fa.blocked<threads = [8, 32]>> -> memref<?x?x?x128xf32>
// Launch: 256 threads, 38016 + 8 * 36 * 4 = 39168 bytes of shared memory.
// CHECK: } attributes {fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 39168, stages = 1, registers = {{[0-9]+}}>}

// Two warps over a 16 x 16 score tile: threads per row = 16 (the largest
// power of two <= 32 dividing B_c and D), so 64 / 16 = 4 thread rows.
// SMALL: tensor<16x16xf32, #fa.blocked<threads = [4, 16]>>
// SMALL: fa.launch = #fa.launch<strategy = simt, threads = 64,

// An explicit padding of 1 (for scalar column reads): 8 * 129 * 4 = 4128.
// PAD1: fa.load_tile {{.*}} {fa.shared_offset = 4128 : i64} {{.*}} -> tensor<32x128xf32, #fa.shared<pad = 1>>
// PAD1: shared_bytes = 38208
func.func @attention(%q: memref<?x?x?x128xf32>, %k: memref<?x?x?x128xf32>,
                     %v: memref<?x?x?x128xf32>, %o: memref<?x?x?x128xf32>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x128xf32>, memref<?x?x?x128xf32>, memref<?x?x?x128xf32>
    into memref<?x?x?x128xf32>, memref<?x?x?xf32>
  return
}
