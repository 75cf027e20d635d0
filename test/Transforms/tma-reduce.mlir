// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 transposed-scores=0" --fa-wgmma-pipeline --fa-warp-specialize --fa-tma-reduce --cse | FileCheck %s --check-prefix=CONSUMERS
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 transposed-scores=0" --fa-wgmma-pipeline --fa-warp-specialize="writer-warp=deterministic" --fa-tma-reduce --cse | FileCheck %s

// The dkdv program's dQ part (f32, 64 query rows x D = 128), staged by the
// placement in the 128-byte swizzle, is added to the accumulator by the
// TMA engine. The kernel takes a fifth tensor map, the accumulator's,
// after the maps of K, V, Q and dO. The two consumer warpgroups hold
// columns 0..63 and 64..127 of dQ (#fa.mma rows_first, warps_n = 2): each
// warpgroup's first thread reduces its own two boxes.
// CHECK-LABEL: func.func @backward_bf16
// CHECK-NOT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.global>}
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[ACCMAP:.*]]: !llvm.ptr, %{{.*}}: memref<?x?x?x128xbf16>
// CHECK: %[[TID:.*]] = gpu.thread_id  x
// CHECK: scf.for
// CHECK: scf.for
// 1. Before the tile is written, each issuer (thread % 128 == 0) waits
// until its previous reduction has read the buffer (the staging's leading
// barrier, its warpgroup's, then tells the warpgroup).
// CHECK: fa.tile_matmul {{%[0-9]+, %[0-9]+}} {async} : tensor<64x128xbf16
// CHECK: %[[DQ:.*]] = fa.async_wait
// CHECK-NEXT: %[[LANE:.*]] = arith.remui %[[TID]], %c128
// CHECK-NEXT: %[[ISSUER:.*]] = arith.cmpi eq, %[[LANE]], %c0
// CHECK-NEXT: scf.if %[[ISSUER]] {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK-NEXT: }
// CHECK-NEXT: %[[STAGED:.*]] = fa.convert_layout %[[DQ]] {fa.shared_offset = 163840 : i64} : {{.*}} -> tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
// 2. The staged tile as its buffer (4 boxes of 64 rows x 32 f32 columns);
// warpgroup g's issuer reduces boxes 2g and 2g + 1 (columns 64 g + 32 k,
// 8 KiB apart) into dq_accum[b, h, row, ...], then commits them as one
// group.
// CHECK-NEXT: %[[BUF:.*]] = builtin.unrealized_conversion_cast %[[STAGED]] : tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>> to memref<4x64x32xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: scf.if %[[ISSUER]] {
// CHECK-NEXT: %[[G:.*]] = arith.divui %[[TID]], %c128
// CHECK-NEXT: %[[FIRSTCOL:.*]] = arith.muli %[[G]], %c64
// CHECK-NEXT: %[[COL0:.*]] = arith.index_castui %[[FIRSTCOL]] : index to i32
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[BUF]]
// CHECK: %[[ROW:.*]] = arith.index_castui %{{.*}} : index to i32
// CHECK: %[[HEAD:.*]] = arith.index_castui %{{.*}} : index to i32
// CHECK: %[[BATCH:.*]] = arith.index_castui %{{.*}} : index to i32
// CHECK: arith.muli %[[G]], %c16384
// CHECK: nvvm.cp.async.bulk.tensor.reduce %[[ACCMAP]], %{{.*}}, box[%[[COL0]], %[[ROW]], %[[HEAD]], %[[BATCH]]] {redKind = #nvvm.tma_redux_kind<add>}
// CHECK: arith.constant 8192 : i64
// CHECK: %[[COL1:.*]] = arith.addi %[[COL0]], %c32_i32
// CHECK: nvvm.cp.async.bulk.tensor.reduce %[[ACCMAP]], %{{.*}}, box[%[[COL1]], %[[ROW]], %[[HEAD]], %[[BATCH]]]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// Without turns the issuer neither fences nor waits for the adds here.
// CHECK-NEXT: }
// CHECK-NOT: fa.accumulate_tile
// 3. After the loops, every issuer's groups have finished (reading shared
// memory and writing global memory) before the block leaves.
// CHECK: scf.yield
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK: scf.if %[[ISSUER_END:.*]] {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0{{$}}
// CHECK: fa.tensor_maps = [{{.*}}tensor = "do"}, {arg = 4 : i64, box_cols = 32 : i64, box_rows = 64 : i64, tensor = "dq_accum"}]
// CHECK: program = "dkdv"
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

// -----

// The deterministic mode adds dQ in turns with the same reduction, here
// (writer-warp=deterministic; the others have no turns) issued by a writer
// warp of the producer warpgroup (warp 9: threads 288..319) that walks the
// consumers' loop nest (in 32-bit counters) and takes the turns, so that
// the consumers do not hold them. Each consumer warpgroup stages its own 64
// columns of dQ and meets the writer on a pair of named barriers of its
// 128 threads and the writer's 32: 14 + g (the buffer may be written: the
// writer's arrival, once ahead) and 12 + g (it is written). The writer
// takes the turn first (it does not depend on the tile), then per slice
// waits for it and has lane 0 reduce its two boxes (one bulk group each,
// from one 32-bit shared address); then frees each slice once its group
// has read it (wait_group.read 1, then 0), waits for the adds to finish
// and hands the turn on. The producer keeps 40 registers (the writer's
// loop; the warps that copy the staged LSE and D), the consumers take 232.
// CHECK-LABEL: func.func @deterministic_bf16
// CHECK: nvvm.setmaxregister  decrease 40
// CHECK: scf.if
// CHECK: nvgpu.tma.async.load
// CHECK: } else {
// CHECK: %[[WARP:.*]] = arith.divui %{{.*}}, %c32{{(_[0-9]+)?}} : index
// CHECK: %[[WRITER:.*]] = arith.cmpi eq, %[[WARP]], %c9 : index
// CHECK-NEXT: scf.if %[[WRITER]] {
// CHECK: %[[BUF:.*]] = memref.view {{.*}} to memref<4x64x32xf32, #gpu.address_space<workgroup>>
// CHECK: %[[LANE0:.*]] = arith.cmpi eq
// CHECK: llvm.call_intrinsic "llvm.nvvm.barrier.cta.arrive.aligned.count"(%[[EMPTY0:.*]], %[[MEETING:.*]]) :
// CHECK: llvm.call_intrinsic "llvm.nvvm.barrier.cta.arrive.aligned.count"(%[[EMPTY1:.*]], %[[MEETING]]) :
// CHECK: scf.for {{.*}} : i32 {
// CHECK: scf.for {{.*}} : i32 {
// CHECK: fa.wait_turn %{{.*}}, %tile {by_warp}
// CHECK: memref.extract_aligned_pointer_as_index %[[BUF]]
// CHECK: nvvm.barrier id = %c12_i32 number_of_threads = %[[MEETING]]
// CHECK-NEXT: scf.if %[[LANE0]] {
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.global>}
// CHECK: nvvm.inline_ptx "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [$0, {$1, $2, $3, $4}], [$5+0];"
// CHECK: [$5+8192]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK: nvvm.barrier id = %c13_i32 number_of_threads = %[[MEETING]]
// CHECK-NEXT: scf.if %[[LANE0]] {
// CHECK-NOT: nvvm.fence.proxy
// CHECK: [$5+16384]
// CHECK: [$5+24576]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK-NEXT: }
// CHECK-NEXT: scf.if %[[LANE0]] {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 1 {read}
// CHECK-NEXT: }
// CHECK-NEXT: llvm.call_intrinsic "llvm.nvvm.barrier.cta.arrive.aligned.count"(%[[EMPTY0]], %[[MEETING]]) :
// CHECK-NEXT: scf.if %[[LANE0]] {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK-NEXT: }
// CHECK-NEXT: llvm.call_intrinsic "llvm.nvvm.barrier.cta.arrive.aligned.count"(%[[EMPTY1]], %[[MEETING]]) :
// CHECK-NEXT: scf.if %[[LANE0]] {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0{{$}}
// CHECK-NEXT: }
// CHECK-NEXT: fa.pass_turn %{{.*}}, %tile {by_warp}
// The consumers: no turn, no add; each warpgroup stages its slice between
// its barriers (14 + g, 12 + g), and waits once more at the end (after the
// dK and dV stores) for the writer's last arrival.
// CHECK: nvvm.setmaxregister  increase 232
// CHECK-NOT: fa.wait_turn
// CHECK: %[[WG:.*]] = arith.divui %{{.*}}, %c128
// CHECK-NEXT: arith.constant 14 : index
// CHECK-NEXT: %[[WG14:.*]] = arith.addi %[[WG]], %c14
// CHECK-NEXT: %[[EMPTY:.*]] = arith.index_castui %[[WG14]] : index to i32
// CHECK: nvvm.barrier id = %[[EMPTY]] number_of_threads = %c160_i32
// CHECK-NEXT: %[[STAGED:.*]] = fa.convert_layout {{.*}} -> tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
// CHECK-NEXT: fa.hand_off %[[STAGED]] barrier 12 threads 160 {per_warpgroup} : tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
// CHECK-NOT: fa.pass_turn
// CHECK-NOT: fa.accumulate_tile
// CHECK: scf.yield
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK: fa.store_tile
// CHECK: fa.store_tile
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c160_i32
// CHECK-NEXT: }
// CHECK: dq_accum
// Without a writer warp (writer-warp=none, the default) the consumers take
// the turns themselves: the tile is staged before the wait for the turn
// (the staging does not hold it), the issuers reduce and then wait for
// their reductions to finish (wait_group 0, not only .read), and the turn
// is handed on after that. (The producer keeps 40 registers for the warps
// that copy the staged LSE and D, 24 without them.)
// CONSUMERS-LABEL: func.func @deterministic_bf16
// CONSUMERS: nvvm.setmaxregister  decrease 40
// CONSUMERS-NOT: fa.writer_warp
// CONSUMERS: fa.tile_matmul {{%[0-9]+, %[0-9]+}} {async} : tensor<64x128xbf16
// CONSUMERS: %[[DQ:.*]] = fa.async_wait
// CONSUMERS-NEXT: %[[LANE:.*]] = arith.remui %{{.*}}, %c128
// CONSUMERS-NEXT: %[[ISSUER:.*]] = arith.cmpi eq, %[[LANE]], %c0
// CONSUMERS-NEXT: scf.if %[[ISSUER]] {
// CONSUMERS-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// CONSUMERS-NEXT: }
// CONSUMERS-NEXT: fa.convert_layout %[[DQ]] {{.*}} -> tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
// CONSUMERS-NEXT: fa.wait_turn
// CONSUMERS-NOT: by_warp
// CONSUMERS: scf.if %[[ISSUER]] {
// CONSUMERS-NEXT: arith.divui
// CONSUMERS-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.global>}
// CONSUMERS-COUNT-2: nvvm.cp.async.bulk.tensor.reduce
// CONSUMERS-NEXT: nvvm.cp.async.bulk.commit.group
// CONSUMERS-NEXT: nvvm.cp.async.bulk.wait_group 0{{$}}
// CONSUMERS-NEXT: }
// CONSUMERS-NEXT: fa.pass_turn
// CONSUMERS-NOT: fa.accumulate_tile
// CONSUMERS: dq_accum
func.func @deterministic_bf16(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>,
                              %o: memref<?x?x?x128xbf16>, %do: memref<?x?x?x128xbf16>, %lse: memref<?x?x?xf32>,
                              %dq: memref<?x?x?x128xbf16>, %dk: memref<?x?x?x128xbf16>, %dv: memref<?x?x?x128xbf16>,
                              %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x128xf32>, %order: memref<?x?x?xi32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum, %order
      {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>,
      memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?xf32>
    into memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x128xf32>, memref<?x?x?xi32>
  return
}

// -----

// At D = 64 a warpgroup's slice of dQ is one box: one issuer (the first
// consumer thread, thread % 256 == 0) reduces both boxes of the tile, and
// the staging keeps the consumers' barriers (measured faster there).
// CHECK-LABEL: func.func @backward_d64
// CHECK: fa.tile_matmul {{%[0-9]+, %[0-9]+}} {async} : tensor<64x128xf16
// CHECK: %[[DQ:.*]] = fa.async_wait
// CHECK-NEXT: %[[LANE:.*]] = arith.remui %{{.*}}, %c256
// CHECK-NEXT: %[[ISSUER:.*]] = arith.cmpi eq, %[[LANE]], %c0
// CHECK-NEXT: scf.if %[[ISSUER]] {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: fa.convert_layout %[[DQ]] {{.*}} -> tensor<64x64xf32, #fa.swizzled_shared<bytes = 128>>
// CHECK: scf.if %[[ISSUER]] {
// CHECK: nvvm.cp.async.bulk.tensor.reduce
// CHECK: nvvm.cp.async.bulk.tensor.reduce
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
func.func @backward_d64(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                        %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>,
                        %dq: memref<?x?x?x64xf16>, %dk: memref<?x?x?x64xf16>, %dv: memref<?x?x?x64xf16>,
                        %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>,
      memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
    into memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
  return
}
