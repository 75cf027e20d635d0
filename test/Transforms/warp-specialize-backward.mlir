// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2" --fa-wgmma-pipeline --fa-warp-specialize --cse | FileCheck %s

// The backward's dkdv program split into a TMA producer and the two placed
// warpgroups (D = 128, 128 K/V rows, 2-slot Q/dO rings). The delta and dq
// programs are not placed on wgmma and stay as they are.
// CHECK-LABEL: func.func @backward_bf16
// The tensor maps of K, V, Q and dO become the first parameters.
// CHECK-SAME: (%[[KMAP:.*]]: !llvm.ptr, %[[VMAP:.*]]: !llvm.ptr, %[[QMAP:.*]]: !llvm.ptr, %[[DOMAP:.*]]: !llvm.ptr, %{{.*}}: memref<?x?x?x128xbf16>
// CHECK: program = "delta"
// CHECK-NOT: nvgpu.mbarrier.create
// CHECK: fa.grid
// 10 barriers: k_full (0), v_full (1), q_full[2] (2, 3), do_full[2] (4, 5)
// wait for the producer's arrival and the bytes, q_full also for the 64
// lanes that copy LSE and D with Q; q_empty[2] (6, 7) and do_empty[2]
// (8, 9) for the 256 consumer threads.
// CHECK: %[[BARS:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 10>
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c3], %c65
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c5], %c1
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c6], %c256
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c9], %c256
// CHECK: gpu.barrier
// CHECK: scf.if %{{.*}} {
// Producer (40 registers: the copying warps' loops): one thread issues K
// and V once (128 rows, two 64-column boxes each) on k_full and v_full ...
// CHECK-NEXT: nvvm.setmaxregister decrease 40
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%c0], %c32768
// CHECK: nvgpu.tma.async.load %{{.*}}[%c0, %[[KROW:.*]], %h, %b], %[[BARS]][%c0]
// CHECK: nvgpu.tma.async.load %{{.*}}[%c64, %[[KROW]], %h, %b], %[[BARS]][%c0]
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%c1], %c32768
// ... then the consumers' loop nest (the GQA group's query heads, then the
// query tiles; an inner loop's bounds cloned inside the outer one, where a
// mask_mod may narrow them per head), counting its iterations n: iteration
// n fills slot n % 2 of Q and dO, each after the consumers released the
// slot's previous tile (parity of n / 2, flipped).
// CHECK: %[[GROUP:.*]] = arith.divui
// CHECK: %{{.*}} = scf.for %[[G:.*]] = %c0 to %[[GROUP]] step %c1 iter_args(%[[NOUT:.*]] = %c0) -> (index) {
// CHECK: %[[QBEGIN:.*]], %[[QEND:.*]] = fa.q_tile_range
// CHECK-NEXT: %[[INNER:.*]] = scf.for %[[T:.*]] = %[[QBEGIN]] to %[[QEND]] step %c1 iter_args(%[[N:.*]] = %[[NOUT]]) -> (index) {
// CHECK: %[[SLOT:.*]] = arith.remui %[[N]], %c2
// CHECK: %[[FREED:.*]] = arith.xori
// CHECK: %[[QEMPTY:.*]] = arith.addi %[[SLOT]], %c6
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[QEMPTY]]], %[[FREED]]
// CHECK: %[[QFULL:.*]] = arith.addi %[[SLOT]], %c2
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%[[QFULL]]], %c16384
// CHECK: nvgpu.tma.async.load {{.*}}, %[[BARS]][%[[QFULL]]]
// CHECK: nvgpu.tma.async.load {{.*}}, %[[BARS]][%[[QFULL]]]
// CHECK: %[[DOEMPTY:.*]] = arith.addi %[[SLOT]], %c8
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[DOEMPTY]]], %[[FREED]]
// CHECK: %[[DOFULL:.*]] = arith.addi %[[SLOT]], %c4
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%[[DOFULL]]], %c16384
// CHECK: %[[NEXT:.*]] = arith.addi %[[N]], %c1
// CHECK-NEXT: scf.yield %[[NEXT]] : index
// CHECK: scf.yield %[[INNER]] : index
// Warp 2 of the producer walks the same loop nest and, once Q's slot is
// free, copies LSE's rows lane and lane + 32 of the tile into the LSE ring's
// slot (cp.async of 4 bytes; a row past the queries reads nothing and
// lands as 0), then arrives on q_full once its copies have landed.
// CHECK: %[[W2:.*]] = arith.addi %c256, %c64 : index
// CHECK: scf.if
// CHECK-NEXT: %[[LANE:.*]] = arith.subi %{{.*}}, %[[W2]] : index
// CHECK: scf.for
// CHECK: scf.for %[[RT:.*]] = %{{.*}} iter_args(%[[RN:.*]] = %{{.*}}) -> (index) {
// CHECK: %[[RSLOT:.*]] = arith.remui %[[RN]], %c2
// CHECK: %[[RQEMPTY:.*]] = arith.addi %[[RSLOT]], %c6
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[RQEMPTY]]]
// CHECK: %[[ROW0:.*]] = arith.muli %[[RT]], %c64
// CHECK: %[[ROWS:.*]] = memref.dim %[[LSE:arg[0-9]+]], %c2
// CHECK: %[[LSESLOT:.*]] = memref.view {{.*}} to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: %[[R:.*]] = arith.addi %[[ROW0]], %[[LANE]]
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi ult, %[[R]], %[[ROWS]]
// CHECK-NEXT: %[[SRC:.*]] = arith.select %[[IN]], %[[R]], %c0
// CHECK-NEXT: %[[COUNT:.*]] = arith.select %[[IN]], %c1, %c0
// CHECK-NEXT: nvgpu.device_async_copy %[[LSE]][%b, %{{.*}}, %[[SRC]]], %[[LSESLOT]][%[[LANE]]], 1, %[[COUNT]]
// CHECK: nvgpu.device_async_copy %[[LSE]]
// CHECK: %[[RQFULL:.*]] = arith.addi %[[RSLOT]], %c2
// CHECK-NEXT: %[[MBAR:.*]] = nvgpu.mbarrier.get %[[BARS]][%[[RQFULL]]]
// CHECK-NEXT: %[[MBARPTR:.*]] = llvm.inttoptr %[[MBAR]] : i32 to !llvm.ptr<3>
// CHECK-NEXT: nvvm.cp.async.mbarrier.arrive %[[MBARPTR]] {noinc = true}
// Warp 3 the same for D.
// CHECK: arith.addi %c256, %c96 : index
// CHECK: nvgpu.device_async_copy %[[DELTA:arg[0-9]+]]
// CHECK: nvgpu.device_async_copy %[[DELTA]]
// CHECK: nvvm.cp.async.mbarrier.arrive
// CHECK: } else {
// Consumers: take the registers; wait for K and V before the loops; in each
// iteration wait for Q's slot (q_full) and read their rows of LSE and D
// from it, wait for Q just before S = Q K^T (the same barrier) and for dO
// just before dP = dO V^T. dO's slot is released once dV += P^T dO is
// done, Q's (with LSE's and D's) once dK += dS^T Q is.
// CHECK-NEXT: nvvm.setmaxregister increase 232
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%c0], %false
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%{{.*}}], %false
// The consumers' loops carry the count beside dK and dV.
// CHECK: scf.for {{.*}} iter_args({{.*}}, %[[CNOUT:.*]] = %c0)
// CHECK: scf.for {{.*}} iter_args({{.*}}, %[[CN:.*]] = %[[CNOUT]])
// CHECK-NOT: fa.load_tile
// CHECK: %[[CSLOT:.*]] = arith.remui %[[CN]], %c2
// CHECK: %[[CQFULL:.*]] = arith.addi %[[CSLOT]], %c2
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[CQFULL]]]
// CHECK: %[[LSEVIEW:.*]] = memref.view {{.*}} to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[LSETILE:.*]] = builtin.unrealized_conversion_cast %[[LSEVIEW]] : memref<64xf32, #gpu.address_space<workgroup>> to tensor<64xf32, #fa.shared<pad = 0>>
// CHECK-NEXT: %[[LSEROWS:.*]] = fa.convert_layout %[[LSETILE]]
// CHECK-NOT: nvgpu.mbarrier.try_wait.parity
// CHECK: memref.view {{.*}} to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: %[[DROWS:.*]] = fa.convert_layout
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[CQFULL]]]
// CHECK: %[[Q:.*]] = builtin.unrealized_conversion_cast %{{.*}} : memref<2x64x64xbf16, #gpu.address_space<workgroup>> to tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>
// CHECK-NEXT: fa.tile_matmul %[[Q]], %{{.*}} {async, transpose_rhs}
// CHECK: %[[CDOFULL:.*]] = arith.addi %[[CSLOT]], %c4
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%[[CDOFULL]]]
// CHECK: %[[DO:.*]] = builtin.unrealized_conversion_cast
// CHECK-NEXT: fa.tile_matmul %[[DO]], %{{.*}} {async, transpose_rhs}
// CHECK: fa.recompute_probs %{{.*}}, %[[LSEROWS]]
// CHECK: %[[DV:.*]] = fa.tile_matmul %{{.*}}, %[[DO]] acc(
// CHECK: fa.softmax_grad %{{.*}}, %{{.*}}, %[[DROWS]]
// CHECK: %[[DK:.*]] = fa.tile_matmul %{{.*}}, %[[Q]] acc(
// CHECK: fa.async_wait %[[DV]] {pending = 0 : i64}
// CHECK: %[[CDOEMPTY:.*]] = arith.addi %[[CSLOT]], %c8
// CHECK-NEXT: nvgpu.mbarrier.arrive %[[BARS]][%[[CDOEMPTY]]]
// CHECK-NEXT: fa.async_wait %[[DK]] {pending = 0 : i64}
// CHECK: %[[CQEMPTY:.*]] = arith.addi %[[CSLOT]], %c6
// CHECK-NEXT: nvgpu.mbarrier.arrive %[[BARS]][%[[CQEMPTY]]]
// The launch gains the producer warpgroup; the maps name the runtime's
// operands.
// CHECK: fa.launch = #fa.launch<strategy = wgmma, threads = 384, {{.*}}, producer_warps = 4>
// CHECK-SAME: fa.tensor_maps = [{arg = 0 : i64, box_cols = 64 : i64, box_rows = 128 : i64, tensor = "k"}, {arg = 1 : i64, box_cols = 64 : i64, box_rows = 128 : i64, tensor = "v"}, {arg = 2 : i64, box_cols = 64 : i64, box_rows = 64 : i64, tensor = "q"}, {arg = 3 : i64, box_cols = 64 : i64, box_rows = 64 : i64, tensor = "do"}]
// CHECK: program = "dkdv"
// CHECK: program = "dq"
func.func @backward_bf16(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>,
                         %o: memref<?x?x?x128xbf16>, %do: memref<?x?x?x128xbf16>, %lse: memref<?x?x?xf32>,
                         %dq: memref<?x?x?x128xbf16>, %dk: memref<?x?x?x128xbf16>, %dv: memref<?x?x?x128xbf16>,
                         %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x128xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>,
      memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?xf32>
    into memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x128xf32>
  return
}
