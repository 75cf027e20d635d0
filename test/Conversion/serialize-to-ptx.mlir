// RUN: fa-opt %s --split-input-file --fa-serialize-to-ptx --verify-diagnostics | FileCheck %s
// No CUDA toolkit is consulted: the same PTX comes out where none is found.
// RUN: env CUDA_ROOT=%t.no-toolkit CUDA_HOME=%t.no-toolkit CUDA_PATH=%t.no-toolkit \
// RUN:   fa-opt %s --split-input-file --fa-serialize-to-ptx --verify-diagnostics | FileCheck %s

// Each gpu.module with an #nvvm.target becomes a gpu.binary of the same name
// holding PTX for the target's chip; the kernel is a PTX .entry.
// CHECK-NOT: gpu.module
// CHECK: gpu.binary @kernels [#gpu.object<#nvvm.target<chip = "sm_90a">, assembly = "
// CHECK-SAME: .target sm_90a
// CHECK-SAME: .visible .entry scale(
// CHECK-SAME: mul.rn.f32
gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
  llvm.func @scale(%p: !llvm.ptr<1>, %s: f32) attributes {nvvm.kernel} {
    %x = llvm.load %p : !llvm.ptr<1> -> f32
    %y = llvm.fmul %x, %s : f32
    llvm.store %y, %p : f32, !llvm.ptr<1>
    llvm.return
  }
}

// -----

// A leftover libdevice call (a math op nobody lowered) is an error that names
// the function, not a link against libdevice.
gpu.module @needs_libdevice [#nvvm.target<chip = "sm_90a">] {
  // expected-error @+1 {{kernel calls the external function '__nv_fmaf'; generated kernels must not need libdevice}}
  llvm.func @__nv_fmaf(f32, f32, f32) -> f32
  llvm.func @k(%p: !llvm.ptr<1>) attributes {nvvm.kernel} {
    %x = llvm.load %p : !llvm.ptr<1> -> f32
    %y = llvm.call @__nv_fmaf(%x, %x, %x) : (f32, f32, f32) -> f32
    llvm.store %y, %p : f32, !llvm.ptr<1>
    llvm.return
  }
}

// -----

// expected-error @+1 {{expected exactly one #nvvm.target on the gpu.module}}
gpu.module @no_target {
  llvm.func @k() attributes {nvvm.kernel} {
    llvm.return
  }
}
