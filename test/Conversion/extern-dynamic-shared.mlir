// RUN: fa-opt %s --fa-extern-dynamic-shared | FileCheck %s

// convert-gpu-to-nvvm gives gpu.dynamic_shared_memory an internal
// zero-size shared global, which NVPTX emitted as a 1-byte static variable
// that ptxas placed in declaration order: in front of the wgmma kernels'
// static mbarriers, so that the tiles aligned up from it covered them. The
// pass makes it external (`.extern .shared ... []`: the start of the
// dynamic region, after every static shared variable). The mbarrier array,
// a global of another address space and a non-empty shared array keep
// their linkage.
// CHECK-LABEL: gpu.module @kernels
// CHECK: llvm.mlir.global external @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK: llvm.mlir.global private @__mbarrier() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<9 x i64>
// CHECK: llvm.mlir.global internal @empty_global() {addr_space = 1 : i32} : !llvm.array<0 x i8>
// CHECK: llvm.mlir.global internal @static_tile() {addr_space = 3 : i32} : !llvm.array<64 x i8>
gpu.module @kernels {
  llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
  llvm.mlir.global private @__mbarrier() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<9 x i64>
  llvm.mlir.global internal @empty_global() {addr_space = 1 : i32} : !llvm.array<0 x i8>
  llvm.mlir.global internal @static_tile() {addr_space = 3 : i32} : !llvm.array<64 x i8>
}
