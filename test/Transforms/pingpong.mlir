// RUN: fa-opt %s --fa-tile-pipeline="block-m=128 block-n=64" --fa-place-wgmma="num-warps=8 stages=2" --fa-wgmma-pipeline --fa-warp-specialize --fa-pingpong --cse | FileCheck %s
// RUN: fa-opt %s --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-wgmma="num-warps=4 stages=2" --fa-wgmma-pipeline --fa-warp-specialize --fa-pingpong | FileCheck %s --check-prefix=ONE

// Two consumer warpgroups take turns at the tensor cores: warpgroup w
// waits on named barrier 1 + w before the iteration's matmuls and arrives
// on barrier 1 + (w + 1) % 2 after starting them (256 threads each: the
// waiting warpgroup and the arriving one).
// CHECK-LABEL: func.func @attention
// CHECK: %[[WG:.*]] = arith.divui %{{.*}}, %c128 : index
// CHECK: %[[MINEIDX:.*]] = arith.addi %[[WG]], %c1 : index
// CHECK: %[[MINE:.*]] = arith.index_castui %[[MINEIDX]] : index to i32
// CHECK: %[[NEXTWG:.*]] = arith.remui %[[MINEIDX]], %c2 : index
// CHECK: %[[NEXTIDX:.*]] = arith.addi %[[NEXTWG]], %c1 : index
// CHECK: %[[NEXT:.*]] = arith.index_castui %[[NEXTIDX]] : index to i32
// Warpgroup 0 goes first: warpgroup 1 arrives on its barrier.
// CHECK: %[[ISLAST:.*]] = arith.cmpi eq, %[[WG]], %c1 : index
// CHECK: scf.if %[[ISLAST]] {
// CHECK-NEXT: nvvm.barrier.arrive id = %c1_i32 number_of_threads = %c256_i32
// CHECK: scf.for
// CHECK: nvvm.barrier id = %[[MINE]] number_of_threads = %c256_i32
// CHECK-NEXT: fa.tile_matmul {{.*}} {async, transpose_rhs}
// CHECK: fa.tile_matmul {{.*}} {async}
// CHECK-NEXT: nvvm.barrier.arrive id = %[[NEXT]] number_of_threads = %c256_i32
// CHECK-NEXT: fa.async_wait
// CHECK: scf.yield
// Warpgroup 0 consumes the arrival left on its barrier.
// CHECK: %[[ISFIRST:.*]] = arith.cmpi eq, %[[WG]], %c0 : index
// CHECK: scf.if %[[ISFIRST]] {
// CHECK-NEXT: nvvm.barrier id = %c1_i32 number_of_threads = %c256_i32
// One consumer warpgroup has nobody to take turns with.
// ONE-NOT: nvvm.barrier
func.func @attention(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                     %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}
