// RUN: fa-opt %s --split-input-file --fa-convert-placed-to-gpu --cse | FileCheck %s

// The global -> shared tile copy. Thread t of T copies elements t, t + T,
// t + 2T, ... of the row-major tile. When T divides the tile, the copy is
// unrolled into batches of up to 8 independent global loads followed by
// their shared stores, so a thread waits for global memory once per batch,
// not once per element. That needs the tile's column count to divide T (each
// thread stays in one column, T / cols rows per step); other tiles use a
// strided loop, one load and its store per step.
#smem = #fa.shared<pad = 1>

// CHECK-LABEL: gpu.func @copies
// CHECK-SAME: (%[[SRC:.*]]: memref<?x?x?x32xf32>, %[[WIDESRC:.*]]: memref<?x?x?x40xf32>)

// 8 x 32 on 64 threads: 4 elements each, one batch.
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[SMALL:.*]] = memref.view {{.*}} to memref<8x33xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[C4:.*]] = arith.constant 4 : index
// CHECK: scf.for %{{.*}} = %[[C0]] to %[[C4]] step %[[C4]] {
// CHECK-COUNT-4: memref.load %[[SRC]]
// CHECK-NOT: memref.load
// CHECK-COUNT-4: memref.store %{{.*}}, %[[SMALL]]
// CHECK: }
// CHECK: gpu.barrier

// 32 x 32 on 64 threads: 16 elements each, two batches of 8.
// CHECK: %[[LARGE:.*]] = memref.view {{.*}} to memref<32x33xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: %[[C16:.*]] = arith.constant 16 : index
// CHECK: %[[C8:.*]] = arith.constant 8 : index
// CHECK: scf.for %{{.*}} = %[[C0]] to %[[C16]] step %[[C8]] {
// CHECK-COUNT-8: memref.load %[[SRC]]
// CHECK-NOT: memref.load
// CHECK-COUNT-8: memref.store %{{.*}}, %[[LARGE]]
// CHECK: }
// CHECK: gpu.barrier

// 3 x 32 = 96 elements on 64 threads: T does not divide the tile, so a
// strided loop from the thread id.
// CHECK: %[[ODD:.*]] = memref.view {{.*}} to memref<3x33xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %[[TID]] to %{{.*}} step %{{.*}} {
// CHECK: memref.load %[[SRC]]
// CHECK-NOT: memref.load
// CHECK: memref.store %{{.*}}, %[[ODD]]
// CHECK-NEXT: }
// CHECK: gpu.barrier

// 8 x 40 = 320 elements = 5 per thread, but 40 columns do not divide 64
// threads: the strided loop too.
// CHECK: %[[WIDE:.*]] = memref.view {{.*}} to memref<8x41xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %[[TID]] to %{{.*}} step %{{.*}} {
// CHECK: memref.load %[[WIDESRC]]
// CHECK-NOT: memref.load
// CHECK: memref.store %{{.*}}, %[[WIDE]]
// CHECK-NEXT: }
// CHECK: gpu.barrier
func.func @copies(%src: memref<?x?x?x32xf32>, %wide_src: memref<?x?x?x40xf32>) {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  fa.grid (%b, %h, %t) in (%c1, %c1, %c1) {
    %small = fa.load_tile %src[%b, %h, %c0] {fa.shared_offset = 0 : i64} : memref<?x?x?x32xf32> -> tensor<8x32xf32, #smem>
    %large = fa.load_tile %src[%b, %h, %c0] {fa.shared_offset = 1056 : i64} : memref<?x?x?x32xf32> -> tensor<32x32xf32, #smem>
    %odd = fa.load_tile %src[%b, %h, %c0] {fa.shared_offset = 5280 : i64} : memref<?x?x?x32xf32> -> tensor<3x32xf32, #smem>
    %wide = fa.load_tile %wide_src[%b, %h, %c0] {fa.shared_offset = 5680 : i64} : memref<?x?x?x40xf32> -> tensor<8x40xf32, #smem>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 64, shared_bytes = 8300, stages = 1, registers = 32>}
  return
}

// -----

// Tiles marked fa.copy_chunks (the delta program of a tensor-core backward,
// whose rows the runtime keeps 16-byte aligned) are copied in 16-byte
// cp.async chunks instead: 64 x 128 bf16 on 256 threads is 1024 chunks, 4 a
// thread, into rows padded by one chunk (136 elements). Both tiles' copies
// are issued before one wait and one barrier.
#chunked = #fa.shared<pad = 8>
// CHECK-LABEL: gpu.func @chunked_copies
// CHECK-COUNT-4: nvgpu.device_async_copy {{.*}} : memref<?x?x?x128xbf16> to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: nvgpu.device_async_wait
// CHECK-COUNT-4: nvgpu.device_async_copy {{.*}} : memref<?x?x?x128xbf16> to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: gpu.barrier
// CHECK: nvgpu.device_async_create_group
// CHECK-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: memref.load %{{.*}} : memref<?x?x?x128xbf16>
// CHECK: gpu.return
func.func @chunked_copies(%o: memref<?x?x?x128xbf16>, %do: memref<?x?x?x128xbf16>, %out: memref<?x?x?xf32>) {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  fa.grid (%b, %h, %t) in (%c1, %c1, %c1) {
    %x = fa.load_tile %o[%b, %h, %c0] {fa.copy_chunks, fa.shared_offset = 0 : i64} : memref<?x?x?x128xbf16> -> tensor<64x128xbf16, #chunked>
    %y = fa.load_tile %do[%b, %h, %c0] {fa.copy_chunks, fa.shared_offset = 17408 : i64} : memref<?x?x?x128xbf16> -> tensor<64x128xbf16, #chunked>
    %d = fa.row_dot %x, %y : tensor<64x128xbf16, #chunked> -> tensor<64xf32, #fa.blocked<threads = [8, 32]>>
    fa.store_tile %d, %out[%b, %h, %c0] : tensor<64xf32, #fa.blocked<threads = [8, 32]>> -> memref<?x?x?xf32>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 256, shared_bytes = 34816, stages = 1, registers = 32>}
  return
}
