// RUN: fa-opt %s --split-input-file --fa-prefetch-row-values | FileCheck %s

#rows = #fa.mma<warps = 8, warps_n = 2, rows_first = 1>

// The rows of tile t, marked by the placement, are loaded at the top of
// iteration t - 1 (tile lb's before the loop) and carried: the latency
// hides behind an iteration. The mark is dropped; an unmarked load stays.
// CHECK-LABEL: func.func @row_values
// CHECK-SAME: (%[[LSE:[^:]*]]: memref<?x?x?xf32>, %[[D:[^:]*]]: memref<?x?x?xf32>, %[[OUT:[^:]*]]: memref<?x?x?xf32>, %[[LB:[^:]*]]: index, %[[UB:[^:]*]]: index
// CHECK: %[[ROW0:.*]] = arith.muli %[[LB]], %c64
// CHECK-NEXT: %[[LSE0:.*]] = fa.load_tile %[[LSE]][%{{.*}}, %{{.*}}, %[[ROW0]]] :
// CHECK-NEXT: %[[D0:.*]] = fa.load_tile %[[D]][%{{.*}}, %{{.*}}, %[[ROW0]]] :
// CHECK-NEXT: scf.for %[[T:.*]] = %[[LB]] to %[[UB]] step %c1 iter_args(%[[ACC:.*]] = %{{.*}}, %[[LSEC:.*]] = %[[LSE0]], %[[DC:.*]] = %[[D0]])
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[T]], %c1
// CHECK-NEXT: %[[ROWN:.*]] = arith.muli %[[NEXT]], %c64
// CHECK-NEXT: %[[LSEN:.*]] = fa.load_tile %[[LSE]][%{{.*}}, %{{.*}}, %[[ROWN]]] :
// CHECK-NEXT: %[[DN:.*]] = fa.load_tile %[[D]][%{{.*}}, %{{.*}}, %[[ROWN]]] :
// CHECK-NOT: fa.load_tile %[[LSE]]
// CHECK-NOT: fa.load_tile %[[D]]
// CHECK: fa.load_tile %[[OUT]][%{{.*}}, %{{.*}}, %{{.*}}] :
// CHECK-NEXT: arith.addf %[[LSEC]], %[[DC]]
// CHECK: scf.yield %{{.*}}, %[[LSEN]], %[[DN]]
func.func @row_values(%lse: memref<?x?x?xf32>, %d: memref<?x?x?xf32>, %out: memref<?x?x?xf32>, %lb: index, %ub: index, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %zero = arith.constant dense<0.0> : tensor<64xf32, #rows>
    %sum = scf.for %i = %lb to %ub step %c1 iter_args(%acc = %zero) -> (tensor<64xf32, #rows>) {
      %row = arith.muli %i, %c64 : index
      %l = fa.load_tile %lse[%b, %h, %row] {fa.prefetch} : memref<?x?x?xf32> -> tensor<64xf32, #rows>
      %dd = fa.load_tile %d[%b, %h, %row] {fa.prefetch} : memref<?x?x?xf32> -> tensor<64xf32, #rows>
      %u = fa.load_tile %out[%b, %h, %row] : memref<?x?x?xf32> -> tensor<64xf32, #rows>
      %x = arith.addf %l, %dd : tensor<64xf32, #rows>
      %xu = arith.addf %x, %u : tensor<64xf32, #rows>
      %y = arith.addf %acc, %xu : tensor<64xf32, #rows>
      scf.yield %y : tensor<64xf32, #rows>
    }
    fa.store_tile %sum, %out[%b, %h, %t] : tensor<64xf32, #rows> -> memref<?x?x?xf32>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 0, stages = 1, registers = 64>}
  return
}


// -----

#rows = #fa.mma<warps = 8, warps_n = 2, rows_first = 1>

// A loop of step 2 loads the rows of tile t + 2 ahead (the next iteration's
// tile, not t + 1).
// CHECK-LABEL: func.func @step_two
// CHECK-SAME: (%[[LSE:[^:]*]]: memref<?x?x?xf32>, %{{[^:]*}}: memref<?x?x?xf32>, %[[LB:[^:]*]]: index, %[[UB:[^:]*]]: index
// CHECK: %[[LSE0:.*]] = fa.load_tile %[[LSE]][%{{.*}}, %{{.*}}, %[[LB]]] :
// CHECK-NEXT: scf.for %[[T:.*]] = %[[LB]] to %[[UB]] step %c2 iter_args(%{{.*}} = %{{.*}}, %[[LSEC:.*]] = %[[LSE0]])
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[T]], %c2
// CHECK-NEXT: %[[LSEN:.*]] = fa.load_tile %[[LSE]][%{{.*}}, %{{.*}}, %[[NEXT]]] :
// CHECK-NOT: fa.load_tile
// CHECK: arith.addf %{{.*}}, %[[LSEC]]
// CHECK: scf.yield %{{.*}}, %[[LSEN]]
func.func @step_two(%lse: memref<?x?x?xf32>, %out: memref<?x?x?xf32>, %lb: index, %ub: index, %n: index) {
  fa.grid (%b, %h, %t) in (%n, %n, %n) {
    %c2 = arith.constant 2 : index
    %zero = arith.constant dense<0.0> : tensor<64xf32, #rows>
    %sum = scf.for %i = %lb to %ub step %c2 iter_args(%acc = %zero) -> (tensor<64xf32, #rows>) {
      %l = fa.load_tile %lse[%b, %h, %i] {fa.prefetch} : memref<?x?x?xf32> -> tensor<64xf32, #rows>
      %y = arith.addf %acc, %l : tensor<64xf32, #rows>
      scf.yield %y : tensor<64xf32, #rows>
    }
    fa.store_tile %sum, %out[%b, %h, %t] : tensor<64xf32, #rows> -> memref<?x?x?xf32>
  } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 0, stages = 1, registers = 64>}
  return
}
