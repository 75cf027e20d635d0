// RUN: fa-opt %s --pass-pipeline="builtin.module(gpu.module(gpu.func(fa-split-index-to-float)),cse)" | FileCheck %s

gpu.module @kernels {

// ALiBi's distance at two elements of one row, as the layout lowering
// inlines it (the key is the thread's first column plus the element's
// constant): |q + Sk - Sq - (col0 + c)|, the integer abs in its select
// form, through index -> i64. After the pass the row converts once and
// each element subtracts its constant in f32.
// CHECK-LABEL: gpu.func @alibi_row
// CHECK-SAME: (%[[DIAG:.*]]: index, %[[COL0:.*]]: index, %[[SLOPE:.*]]: f32)
// CHECK-DAG: %[[C9:.*]] = arith.constant -9.000000e+00 : f32
// CHECK-DAG: %[[C8:.*]] = arith.constant -8.000000e+00 : f32
// CHECK: %[[BASE:.*]] = arith.subi %[[DIAG]], %[[COL0]] : index
// CHECK: %[[WIDE:.*]] = arith.index_cast %[[BASE]] : index to i64
// CHECK: %[[ROW:.*]] = arith.sitofp %[[WIDE]] : i64 to f32
// CHECK: %[[D8:.*]] = arith.addf %[[ROW]], %[[C8]] : f32
// CHECK: %[[A8:.*]] = math.absf %[[D8]] : f32
// CHECK: arith.mulf %[[SLOPE]], %[[A8]] : f32
// CHECK-NOT: arith.sitofp
// CHECK: %[[D9:.*]] = arith.addf %[[ROW]], %[[C9]] : f32
// CHECK: %[[A9:.*]] = math.absf %[[D9]] : f32
// CHECK: arith.mulf %[[SLOPE]], %[[A9]] : f32
// CHECK: gpu.return
gpu.func @alibi_row(%diag: index, %col0: index, %slope: f32) -> (f32, f32) {
  %zero = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c9 = arith.constant 9 : index
  %key8 = arith.addi %col0, %c8 : index
  %d8 = arith.subi %diag, %key8 : index
  %neg8 = arith.cmpi slt, %d8, %zero : index
  %minus8 = arith.subi %zero, %d8 : index
  %abs8 = arith.select %neg8, %minus8, %d8 : index
  %wide8 = arith.index_cast %abs8 : index to i64
  %f8 = arith.sitofp %wide8 : i64 to f32
  %bias8 = arith.mulf %slope, %f8 : f32
  %key9 = arith.addi %col0, %c9 : index
  %d9 = arith.subi %diag, %key9 : index
  %neg9 = arith.cmpi slt, %d9, %zero : index
  %minus9 = arith.subi %zero, %d9 : index
  %abs9 = arith.select %neg9, %minus9, %d9 : index
  %wide9 = arith.index_cast %abs9 : index to i64
  %f9 = arith.sitofp %wide9 : i64 to f32
  %bias9 = arith.mulf %slope, %f9 : f32
  gpu.return %bias8, %bias9 : f32, f32
}

// Constants on either side of a sub and in nested sums are gathered
// (x - (3 - y) + 5 = (x - (0 - y)) + 2, which the canonicalizer after it
// folds to x + y); math.absi and the mirrored select form are absolute
// values too; an i32 sum converts in i32.
// CHECK-LABEL: gpu.func @forms
// CHECK-SAME: (%[[X:.*]]: index, %[[Y:.*]]: index, %[[Z:.*]]: i32)
// CHECK-DAG: %[[C2:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-DAG: %[[C7:.*]] = arith.constant -7.000000e+00 : f32
// CHECK: %[[NEGY:.*]] = arith.subi %{{.*}}, %[[Y]] : index
// CHECK: %[[XY:.*]] = arith.subi %[[X]], %[[NEGY]] : index
// CHECK: %[[XYW:.*]] = arith.index_cast %[[XY]] : index to i64
// CHECK: %[[XYF:.*]] = arith.sitofp %[[XYW]] : i64 to f32
// CHECK: arith.addf %[[XYF]], %[[C2]] : f32
// CHECK: %[[ZF:.*]] = arith.sitofp %[[Z]] : i32 to f32
// CHECK: %[[ZS:.*]] = arith.addf %[[ZF]], %[[C7]] : f32
// CHECK: math.absf %[[ZS]] : f32
// CHECK: %[[XW:.*]] = arith.index_cast %[[X]] : index to i64
// CHECK: %[[XF:.*]] = arith.sitofp %[[XW]] : i64 to f32
// CHECK: math.absf %[[XF]] : f32
gpu.func @forms(%x: index, %y: index, %z: i32) -> (f32, f32, f32) {
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %inner = arith.subi %c3, %y : index
  %diff = arith.subi %x, %inner : index
  %sum = arith.addi %diff, %c5 : index
  %wide = arith.index_cast %sum : index to i64
  %f = arith.sitofp %wide : i64 to f32
  %k7 = arith.constant -7 : i32
  %z7 = arith.addi %z, %k7 : i32
  %az = math.absi %z7 : i32
  %fz = arith.sitofp %az : i32 to f32
  %zero = arith.constant 0 : index
  %pos = arith.cmpi sgt, %x, %zero : index
  %negx = arith.subi %zero, %x : index
  %ax = arith.select %pos, %x, %negx : index
  %wx = arith.index_cast %ax : index to i64
  %fx = arith.sitofp %wx : i64 to f32
  gpu.return %f, %fz, %fx : f32, f32, f32
}

// What stays: a constant past 2^24 (not exact in f32), a conversion
// to f64, a select that is not an absolute value, and a sum with no
// constant.
// CHECK-LABEL: gpu.func @kept
// CHECK: %[[BIG:.*]] = arith.addi %{{.*}}, %{{.*}} : i64
// CHECK: arith.sitofp %[[BIG]] : i64 to f32
// CHECK: arith.sitofp %{{.*}} : i64 to f64
// CHECK: %[[SEL:.*]] = arith.select
// CHECK: arith.sitofp %[[SEL]] : i64 to f32
// CHECK: %[[PLAIN:.*]] = arith.addi
// CHECK: arith.sitofp %[[PLAIN]] : i64 to f32
// CHECK-NOT: arith.addf
// CHECK: gpu.return
gpu.func @kept(%a: i64, %b: i64) -> (f32, f64, f32, f32) {
  %big = arith.constant 16777217 : i64
  %s = arith.addi %a, %big : i64
  %f = arith.sitofp %s : i64 to f32
  %one = arith.constant 1 : i64
  %t = arith.addi %a, %one : i64
  %d = arith.sitofp %t : i64 to f64
  %zero = arith.constant 0 : i64
  %neg = arith.cmpi slt, %a, %zero : i64
  %sel = arith.select %neg, %b, %a : i64
  %g = arith.sitofp %sel : i64 to f32
  %plain = arith.addi %a, %b : i64
  %h = arith.sitofp %plain : i64 to f32
  gpu.return %f, %d, %g, %h : f32, f64, f32, f32
}

}
