// RUN: fa-opt %s --pass-pipeline='builtin.module(gpu.module(gpu.func(fa-hoist-capture-loads)))' | FileCheck %s

gpu.module @kernels {
  // A document mask's loop: the key's id (its index from the loop and the
  // thread's column) leaves the marked branch and rises above the wait for
  // the scores; the row's id (loop-invariant) rises to the loop body's
  // start but stays in the loop; the pure ops computing the key's index
  // move with it. The unmarked load of another tensor stays.
  // CHECK-LABEL: gpu.func @document_mask
  // CHECK: scf.for %[[T:.*]] = 
  // CHECK-NEXT: %[[TILE:.*]] = arith.muli %[[T]],
  // CHECK-NEXT: %[[KEY:.*]] = arith.addi %[[TILE]], %[[COL:.*]] :
  // CHECK-NEXT: %[[CLAMPED:.*]] = arith.minui %[[KEY]],
  // CHECK-NEXT: %[[ID:.*]] = memref.load %[[DOC:.*]][%{{.*}}, %[[CLAMPED]]] {fa.capture_load}
  // CHECK-NEXT: %[[ROW:.*]] = memref.load %[[DOC]][%{{.*}}, %{{.*}}] {fa.capture_load}
  // CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
  // CHECK-NEXT: memref.load %{{.*}}[%[[T]]] : memref<?xf32>
  // CHECK-NEXT: scf.if
  // CHECK-NEXT: arith.cmpi eq, %[[ROW]], %[[ID]]
  // CHECK: {fa.hoist_capture_loads}
  gpu.func @document_mask(%doc: memref<?x?xi32>, %other: memref<?xf32>,
                          %b: index, %q: index, %col: index, %last: index,
                          %n: index, %partial: i1, %s: f32) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %ninf = arith.constant 0xFF800000 : f32
    scf.for %t = %c0 to %n step %c1 {
      nvvm.wgmma.wait.group.sync.aligned 0
      %o = memref.load %other[%t] : memref<?xf32>
      %r = scf.if %partial -> (f32) {
        %tile = arith.muli %t, %c64 : index
        %key = arith.addi %tile, %col : index
        %clamped = arith.minui %key, %last : index
        %row_id = memref.load %doc[%b, %q] {fa.capture_load} : memref<?x?xi32>
        %key_id = memref.load %doc[%b, %clamped] {fa.capture_load} : memref<?x?xi32>
        %keep = arith.cmpi eq, %row_id, %key_id : i32
        %v = arith.select %keep, %s, %ninf : f32
        scf.yield %v : f32
      } else {
        scf.yield %s : f32
      } {fa.hoist_capture_loads}
      %sum = arith.addf %r, %o : f32
      memref.store %sum, %other[%t] : memref<?xf32>
    }
    gpu.return
  }

  // A load whose index an impure op computes (a division may trap: not
  // speculated) stays in its branch; so does every load of an unmarked
  // branch (a warp-specialized kernel's producer must not gain registers).
  // A capture load indexed by another capture's value moves with it (here
  // to the function's start).
  // CHECK-LABEL: gpu.func @stays
  // CHECK-NEXT: %[[BUCKET:.*]] = memref.load %{{.*}}[%{{.*}}] {fa.capture_load} : memref<?xi32>
  // CHECK-NEXT: %[[INDEX:.*]] = arith.index_cast %[[BUCKET]]
  // CHECK-NEXT: %[[BIAS:.*]] = memref.load %{{.*}}[%[[INDEX]]] {fa.capture_load} : memref<?xf32>
  // CHECK-NEXT: scf.if
  // CHECK-NEXT: arith.divui
  // CHECK-NEXT: memref.load {{.*}} {fa.capture_load}
  // CHECK: } {fa.hoist_capture_loads}
  // CHECK-NEXT: scf.if
  // CHECK-NEXT: memref.load {{.*}} {fa.capture_load}
  // CHECK: scf.yield
  // CHECK: }{{$}}
  // CHECK-NEXT: scf.if
  // CHECK-NEXT: arith.addf %[[BIAS]]
  gpu.func @stays(%ids: memref<?xi32>, %bias: memref<?xf32>, %i: index,
                  %d: index, %c: i1, %s: f32) kernel {
    %a = scf.if %c -> (i32) {
      %j = arith.divui %i, %d : index
      %v = memref.load %ids[%j] {fa.capture_load} : memref<?xi32>
      scf.yield %v : i32
    } else {
      %zero = arith.constant 0 : i32
      scf.yield %zero : i32
    } {fa.hoist_capture_loads}
    %b = scf.if %c -> (i32) {
      %v = memref.load %ids[%i] {fa.capture_load} : memref<?xi32>
      scf.yield %v : i32
    } else {
      %zero = arith.constant 0 : i32
      scf.yield %zero : i32
    }
    %x = scf.if %c -> (f32) {
      %bucket = memref.load %ids[%i] {fa.capture_load} : memref<?xi32>
      %index = arith.index_cast %bucket : i32 to index
      %v = memref.load %bias[%index] {fa.capture_load} : memref<?xf32>
      %w = arith.addf %v, %s : f32
      scf.yield %w : f32
    } else {
      scf.yield %s : f32
    } {fa.hoist_capture_loads}
    gpu.return
  }
}

// Nested marked branches: the load leaves both; the pure op computing its
// index, defined mid-block before the branches, rises with it to the top
// of the loop body (above the wait), and the load follows it.
// CHECK-LABEL: gpu.func @nested
// CHECK: scf.for %[[T:[^ ]*]] =
// CHECK-NEXT: %[[KEY:.*]] = arith.addi %[[T]], %{{.*}} : index
// CHECK-NEXT: %[[ID:.*]] = memref.load %{{.*}}[%[[KEY]]] {fa.capture_load}
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: scf.if
// CHECK-NEXT: scf.if
// CHECK-NOT: memref.load
// CHECK: arith.cmpi eq, %[[ID]],
gpu.module @nested_kernels {
  gpu.func @nested(%doc: memref<?xi32>, %n: index, %col: index, %p: i1, %r: i1, %s: f32) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %ninf = arith.constant 0xFF800000 : f32
    scf.for %t = %c0 to %n step %c1 {
      nvvm.wgmma.wait.group.sync.aligned 0
      %k = arith.addi %t, %col : index
      %a = scf.if %p -> (f32) {
        %b = scf.if %r -> (f32) {
          %id = memref.load %doc[%k] {fa.capture_load} : memref<?xi32>
          %z = arith.constant 0 : i32
          %keep = arith.cmpi eq, %id, %z : i32
          %v = arith.select %keep, %s, %ninf : f32
          scf.yield %v : f32
        } else {
          scf.yield %s : f32
        } {fa.hoist_capture_loads}
        scf.yield %b : f32
      } else {
        scf.yield %s : f32
      } {fa.hoist_capture_loads}
      %ai = arith.fptosi %a : f32 to i32
      memref.store %ai, %doc[%t] : memref<?xi32>
    }
    gpu.return
  }
}
