// RUN: fa-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(gpu.module(gpu.func(fa-check-shared-bounds)))' | FileCheck %s

// Views of the dynamic shared memory at constant offsets end within the
// launch's shared bytes: [0, 512) and [512, 1024) of 1024.
// CHECK-LABEL: gpu.func @within
gpu.module @kernels {
  gpu.func @within() kernel attributes {fa.launch = #fa.launch<strategy = mma, threads = 128, shared_bytes = 1024, stages = 1, registers = 64>} {
    %c0 = arith.constant 0 : index
    %c512 = arith.constant 512 : index
    %base = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %a = memref.view %base[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16x16xf16, #gpu.address_space<workgroup>>
    %b = memref.view %base[%c512][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<8x16xf32, #gpu.address_space<workgroup>>
    gpu.return
  }
}

// -----

// A view that ends past the launch's shared bytes is an error naming both.
gpu.module @kernels {
  gpu.func @beyond() kernel attributes {fa.launch = #fa.launch<strategy = mma, threads = 128, shared_bytes = 1024, stages = 1, registers = 64>} {
    %c768 = arith.constant 768 : index
    %base = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    // expected-error @below {{'memref.view' op views shared memory bytes [768, 1280) of a kernel whose launch has 1024 bytes}}
    %a = memref.view %base[%c768][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16x16xf16, #gpu.address_space<workgroup>>
    gpu.return
  }
}

// -----

// A run-time offset (a ring slot) is not checked.
// CHECK-LABEL: gpu.func @ring_slot
gpu.module @kernels {
  gpu.func @ring_slot(%slot: index) kernel attributes {fa.launch = #fa.launch<strategy = mma, threads = 128, shared_bytes = 1024, stages = 1, registers = 64>} {
    %base = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %a = memref.view %base[%slot][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16x16xf16, #gpu.address_space<workgroup>>
    gpu.return
  }
}
