// RUN: fa-opt %s --pass-pipeline='builtin.module(gpu.module(gpu.func(fa-elide-redundant-barriers)))' | FileCheck %s

gpu.module @kernels {
  // Two tile writes meet: the barrier closing the first and the one opening
  // the second have only pure ops (views, dims, thread ids) between them.
  // CHECK-LABEL: gpu.func @back_to_back
  // CHECK: gpu.barrier
  // CHECK-NEXT: memref.store {{.*}}%[[A:.*]][
  // CHECK-NEXT: gpu.barrier
  // CHECK-NOT: gpu.barrier
  // CHECK: memref.store
  // CHECK-NEXT: gpu.barrier
  // CHECK-NEXT: gpu.return
  gpu.func @back_to_back(%x: f32, %i: index) kernel {
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %c0 = arith.constant 0 : index
    %c256 = arith.constant 256 : index
    %a = memref.view %smem[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    memref.store %x, %a[%i] : memref<64xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %b = memref.view %smem[%c256][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xf32, #gpu.address_space<workgroup>>
    %tid = gpu.thread_id x
    gpu.barrier
    memref.store %x, %b[%tid] : memref<64xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    gpu.return
  }

  // A load between two barriers keeps both; so does a loop (a region).
  // CHECK-LABEL: gpu.func @separated
  // CHECK: gpu.barrier
  // CHECK-NEXT: memref.load
  // CHECK-NEXT: gpu.barrier
  // CHECK-NEXT: scf.for
  // CHECK: gpu.barrier
  // CHECK-NEXT: gpu.return
  gpu.func @separated(%a: memref<64xf32, #gpu.address_space<workgroup>>, %i: index) kernel {
    gpu.barrier
    %v = memref.load %a[%i] : memref<64xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    scf.for %j = %i to %i step %i {
      memref.store %v, %a[%j] : memref<64xf32, #gpu.address_space<workgroup>>
    }
    gpu.barrier
    gpu.return
  }
}
