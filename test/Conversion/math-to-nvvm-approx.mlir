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
