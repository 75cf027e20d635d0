// RUN: fa-opt %s --split-input-file --fa-lower-block-mask=target=cpu | FileCheck %s --check-prefix=CPU
// RUN: fa-opt %s --split-input-file --fa-lower-block-mask | FileCheck %s --check-prefix=GPU

// The block mask program of a document mask under the causal mask.
// Both targets: the tables are emptied ([Sk, 0) per 16 rows, [Sq, 0) per
// 16 keys, for the ranges and the whole ranges), then each 16-row group
// tests its scores 16 x 16 at a time (the squares right of the group's
// last visible key are not visited: min with ceil((row end + Sk - Sq) /
// 16)), and narrows each square's query entry (its range, and where it
// kept every score its whole range) and, at the end, its own key entry
// with atomic min / max, where something was kept. Then each entry of
// each table tests the squares its whole range spans again and empties
// the range (its end to 0) at a square not kept whole.
// CPU-LABEL: func @document
// CPU-SAME: (%[[Q:.*]]: memref<?x4x?x64xf16>, %[[K:.*]]: memref<?x2x?x64xf16>, %[[KR:.*]]: memref<?x?x?x4xi32>, %[[QR:.*]]: memref<?x?x?x4xi32>, %[[DOC:.*]]: memref<?x?xi32>)
// Empty entries:
// CPU: scf.for
// CPU: scf.for
// CPU: scf.for
// CPU-COUNT-4: memref.store %{{.*}}, %[[KR]]
// CPU-COUNT-4: memref.store %{{.*}}, %[[QR]]
// The ranges: (batch, head, group), then squares, rows, keys.
// CPU: arith.ceildivsi
// CPU: scf.for {{.*}} iter_args
// CPU: scf.for {{.*}} iter_args
// CPU: scf.for {{.*}} iter_args
// CPU: memref.load %[[DOC]]
// CPU: memref.load %[[DOC]]
// CPU: arith.cmpi eq
// CPU: memref.atomic_rmw mins %{{.*}}, %[[QR]][%{{.*}}, %{{.*}}, %{{.*}}, %c0{{(_[0-9]+)?}}]
// CPU: memref.atomic_rmw maxs %{{.*}}, %[[QR]][%{{.*}}, %{{.*}}, %{{.*}}, %c1{{(_[0-9]+)?}}]
// CPU: memref.atomic_rmw mins %{{.*}}, %[[QR]][%{{.*}}, %{{.*}}, %{{.*}}, %c2{{(_[0-9]+)?}}]
// CPU: memref.atomic_rmw maxs %{{.*}}, %[[QR]][%{{.*}}, %{{.*}}, %{{.*}}, %c3{{(_[0-9]+)?}}]
// CPU: memref.atomic_rmw mins %{{.*}}, %[[KR]][%{{.*}}, %{{.*}}, %{{.*}}, %c0{{(_[0-9]+)?}}]
// CPU: memref.atomic_rmw maxs %{{.*}}, %[[KR]][%{{.*}}, %{{.*}}, %{{.*}}, %c1{{(_[0-9]+)?}}]
// CPU: memref.atomic_rmw mins %{{.*}}, %[[KR]][%{{.*}}, %{{.*}}, %{{.*}}, %c2{{(_[0-9]+)?}}]
// CPU: memref.atomic_rmw maxs %{{.*}}, %[[KR]][%{{.*}}, %{{.*}}, %{{.*}}, %c3{{(_[0-9]+)?}}]
// The checks: the key table's whole ranges, then the query table's.
// CPU: memref.load %[[KR]][%{{.*}}, %{{.*}}, %{{.*}}, %c2{{(_[0-9]+)?}}]
// CPU: memref.load %[[KR]][%{{.*}}, %{{.*}}, %{{.*}}, %c3{{(_[0-9]+)?}}]
// CPU: memref.load %[[DOC]]
// CPU: memref.load %[[DOC]]
// CPU: arith.cmpi eq
// CPU: scf.if
// CPU: memref.atomic_rmw mins %{{.*}}, %[[KR]][%{{.*}}, %{{.*}}, %{{.*}}, %c3{{(_[0-9]+)?}}]
// CPU: memref.load %[[QR]][%{{.*}}, %{{.*}}, %{{.*}}, %c2{{(_[0-9]+)?}}]
// CPU: memref.load %[[QR]][%{{.*}}, %{{.*}}, %{{.*}}, %c3{{(_[0-9]+)?}}]
// CPU: memref.atomic_rmw mins %{{.*}}, %[[QR]][%{{.*}}, %{{.*}}, %{{.*}}, %c3{{(_[0-9]+)?}}]
// CPU-NOT: fa.block_mask

// GPU: module attributes {gpu.container_module}
// GPU: gpu.module @fa_kernels
// GPU: gpu.func @document_init_keys({{.*}}) kernel attributes {fa.launch = #fa.launch<strategy = simt, threads = 128, shared_bytes = 0, stages = 1, registers = 0>, known_block_size = array<i32: 128, 1, 1>}
// GPU: gpu.thread_id  x
// GPU: memref.store
// GPU: gpu.func @document_init_queries(
// GPU: gpu.func @document_ranges(
// GPU-DAG: gpu.block_id  x
// GPU-DAG: gpu.block_id  y
// GPU-DAG: gpu.block_id  z
// GPU-DAG: %[[C128:.*]] = arith.constant 128 : index
// GPU-DAG: %[[TID:.*]] = gpu.thread_id  x
// GPU: scf.for %{{.*}} = %[[TID]] to %{{.*}} step %[[C128]]
// GPU: memref.atomic_rmw mins
// GPU: gpu.func @document_whole_keys(
// GPU: gpu.thread_id  x
// GPU: scf.for %{{.*}} step %{{.*}} {
// GPU: memref.atomic_rmw mins
// GPU: gpu.func @document_whole_queries(
// GPU: memref.atomic_rmw mins
// GPU-NOT: func.func @document
func.func @document(%q: memref<?x4x?x64xf16>, %k: memref<?x2x?x64xf16>,
                    %kr: memref<?x?x?x4xi32>, %qr: memref<?x?x?x4xi32>,
                    %doc: memref<?x?xi32>) {
  fa.block_mask %q, %k into %kr, %qr {mask = #fa.mask<causal>}
    : memref<?x4x?x64xf16>, memref<?x2x?x64xf16> into memref<?x?x?x4xi32>, memref<?x?x?x4xi32>
    captures(%doc : memref<?x?xi32>)
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index,
         %d: memref<?x?xi32>):
      %qd = memref.load %d[%b, %qi] : memref<?x?xi32>
      %kd = memref.load %d[%b, %ki] : memref<?x?xi32>
      %keep = arith.cmpi eq, %qd, %kd : i32
      fa.yield %keep : i1
    }
  return
}
