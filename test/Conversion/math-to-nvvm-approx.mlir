// RUN: fa-opt %s --fa-math-to-nvvm-approx | FileCheck %s

// f32 exp2/log2 become the PTX approximations (ex2.approx.ftz.f32,
// lg2.approx.ftz.f32); other types keep their math op.
// CHECK-LABEL: func @approx
// CHECK-SAME: (%[[X:.*]]: f32, %[[Y:.*]]: f64)
// CHECK: %[[E:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[X]]) : (f32) -> f32
// CHECK: %[[L:.*]] = llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"(%[[E]]) : (f32) -> f32
// CHECK: %[[D:.*]] = math.exp2 %[[Y]] : f64
// CHECK: return %[[L]], %[[D]]
func.func @approx(%x: f32, %y: f64) -> (f32, f64) {
  %e = math.exp2 %x : f32
  %l = math.log2 %e : f32
  %d = math.exp2 %y : f64
  return %l, %d : f32, f64
}

// A variant's math: f32 tanh on the hardware exp2 and reciprocal,
// 1 - 2 / (2^(2 log2(e) x) + 1); abs as the LLVM intrinsic NVPTX selects
// (not a libdevice call); tan through its expansion.
// CHECK-LABEL: func @variant_math
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK: %[[K:.*]] = arith.constant 2.885390{{[0-9]*}}e+00 : f32
// CHECK: %[[S:.*]] = arith.mulf %[[X]], %[[K]] : f32
// CHECK: %[[P:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[S]])
// CHECK: %[[D:.*]] = arith.addf %[[P]]
// CHECK: %[[R:.*]] = llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"(%[[D]])
// CHECK: %[[T:.*]] = math.fma %{{.*}}, %[[R]], %{{.*}} : f32
// CHECK: llvm.call_intrinsic "llvm.fabs"(%[[T]]) : (f32) -> f32
// CHECK-NOT: math.tan
// CHECK-NOT: math.absf
// CHECK: return
func.func @variant_math(%x: f32) -> (f32, f32) {
  %t = math.tanh %x : f32
  %a = math.absf %t : f32
  %u = math.tan %a : f32
  return %a, %u : f32, f32
}

// tanh marked fastmath afn (a 16-bit kernel's score_mod): LLVM's tanh with
// afn, which NVPTX selects as tanh.approx.f32; f64 keeps its math op.
// CHECK-LABEL: func @approximate_tanh
// CHECK-SAME: (%[[X:.*]]: f32, %[[Y:.*]]: f64)
// CHECK: %[[T:.*]] = llvm.intr.tanh(%[[X]]) {fastmathFlags = #llvm.fastmath<afn>} : (f32) -> f32
// CHECK-NOT: llvm.nvvm.rcp.approx
// CHECK: %[[D:.*]] = math.tanh %[[Y]] fastmath<afn> : f64
// CHECK: return %[[T]], %[[D]]
func.func @approximate_tanh(%x: f32, %y: f64) -> (f32, f64) {
  %t = math.tanh %x fastmath<afn> : f32
  %d = math.tanh %y fastmath<afn> : f64
  return %t, %d : f32, f64
}
