// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-wgmma="num-warps=4 stages=2" --fa-warp-specialize --cse | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=192 block-n=64" --fa-place-wgmma="num-warps=12 stages=2" --fa-warp-specialize --cse | FileCheck %s --check-prefix=THREE
// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-wgmma="num-warps=4 stages=2" --fa-wgmma-pipeline --fa-warp-specialize --cse | FileCheck %s --check-prefix=PIPE

// Pipelined (fa-wgmma-pipeline), Q's last use is the last Q K^T in the K/V
// loop under kv_begin < kv_end: Q is released right after that loop, before
// the last P V, and at once when the range is empty, so that the producer
// loads the next visit's Q during the last P V and the stores.
// PIPE-LABEL: func.func @attention
// PIPE: nvvm.setmaxregister increase
// PIPE: scf.if %{{.*}} -> (
// PIPE: scf.for
// PIPE: fa.tile_matmul %{{.*}}, %{{.*}} {async, transpose_rhs}
// PIPE: scf.yield
// PIPE-NEXT: }
// PIPE-NEXT: %c9 = arith.constant 9 : index
// PIPE-NEXT: %[[QEMPTY:.*]] = arith.addi %c0, %c9
// PIPE-NEXT: nvgpu.mbarrier.arrive %{{.*}}[%[[QEMPTY]]]
// PIPE: fa.tile_matmul %{{.*}}, %{{.*}} acc(%{{.*}}) :
// PIPE: } else {
// PIPE-NEXT: %c9{{.*}} = arith.constant 9 : index
// PIPE-NEXT: %[[QEMPTYNONE:.*]] = arith.addi %c0, %c9
// PIPE-NEXT: nvgpu.mbarrier.arrive %{{.*}}[%[[QEMPTYNONE]]]
// PIPE-NEXT: scf.yield
// PIPE: fa.finalize

// Three consumer warpgroups keep one block per tile (the persistent
// producer's registers would leave them too few): no rounds, no q_empty.
// THREE-LABEL: func.func @attention
// THREE: num_barriers = 9
// THREE-NOT: scf.for %{{.*}} = %c0_i32
// THREE: nvvm.setmaxregister decrease 24
// THREE: fa.launch = #fa.launch<strategy = wgmma, threads = 512
// THREE-NOT: fa.persistent
// THREE-SAME: fa.tensor_maps

// The persistent Hopper schedule (fa-warp-specialize's default where the
// register model allows it): D = 128, one consumer warpgroup, B_c = 64, a
// ring of 2 K/V slots, the causal mask. The runtime launches min(tiles,
// SMs) blocks; both roles of a block walk its rounds of work items (all
// counted in 32 bits), and each item's visits: with the causal mask item k
// of a (batch, head) pair is query tile T - 1 - k and its mirror k (the
// middle tile of an odd T alone), so that all items are about equally long.
// CHECK-LABEL: func.func @attention
// CHECK: %[[B:.*]] = memref.dim %arg3, %c0
// CHECK: %[[H:.*]] = memref.dim %arg3, %c1
// CHECK: %[[SK:.*]] = memref.dim %arg4, %c2
// CHECK: %[[TILES:.*]] = arith.ceildivui
// CHECK: fa.grid (%{{.*}}, %{{.*}}, %{{.*}}) in (%[[B]], %[[H]], %[[TILES]])
// Barriers as in the per-tile schedule plus q_empty (9), which the 128
// consumer threads complete.
// CHECK: %[[BARS:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 10>
// CHECK: nvgpu.mbarrier.init %[[BARS]][%c9], %c128
// CHECK: gpu.barrier
// Items: (T + 1) / 2 per pair.
// CHECK: %[[PAIRS:.*]] = arith.index_castui %{{.*}} : index to i32
// CHECK: %[[T:.*]] = arith.index_castui %[[TILES]] : index to i32
// CHECK: %[[TPLUS:.*]] = arith.addi %[[T]], %c1_i32 : i32
// CHECK: %[[PERPAIR:.*]] = arith.divui %[[TPLUS]], %c2_i32 : i32
// CHECK: %[[ITEMS:.*]] = arith.muli %[[PAIRS]], %[[PERPAIR]] : i32
// Round r gives block b item r x blocks + (r even ? b : blocks - 1 - b);
// the block has the whole rounds and the last one if its item exists.
// CHECK: %[[BLOCK:.*]] = arith.index_castui %block_id_x : index to i32
// CHECK: %[[BLOCKS:.*]] = arith.index_castui %grid_dim_x : index to i32
// CHECK: %[[REST:.*]] = arith.subi %[[BLOCKS]], %[[BLOCK]] : i32
// CHECK: %[[MIRROR:.*]] = arith.subi %[[REST]], %c1_i32 : i32
// CHECK: %[[FULL:.*]] = arith.divui %[[ITEMS]], %[[BLOCKS]] : i32
// CHECK: %[[LASTODD:.*]] = arith.trunci %[[FULL]] : i32 to i1
// CHECK: %[[LASTPOS:.*]] = arith.select %[[LASTODD]], %[[MIRROR]], %[[BLOCK]] : i32
// CHECK: %[[LASTSTART:.*]] = arith.muli %[[FULL]], %[[BLOCKS]] : i32
// CHECK: %[[LASTITEM:.*]] = arith.addi %[[LASTSTART]], %[[LASTPOS]] : i32
// CHECK: %[[INLAST:.*]] = arith.cmpi ult, %[[LASTITEM]], %[[ITEMS]] : i32
// CHECK: %[[EXTRA:.*]] = arith.extui %[[INLAST]] : i1 to i32
// CHECK: %[[ROUNDS:.*]] = arith.addi %[[FULL]], %[[EXTRA]] : i32
// The (batch, head) pairs of an L2 section: 12 MiB / (Sk x 512 bytes of a
// K row and a V row), at least one, at most all.
// CHECK: %[[SKPOS:.*]] = arith.maxui %[[SK]], %c1
// CHECK: %[[PER:.*]] = arith.divui %c24576, %[[SKPOS]]
// CHECK: %[[SECTION:.*]] = arith.maxui %[[PER]], %c1
// CHECK: %[[SECTIONFIT:.*]] = arith.index_castui %[[SECTION]] : index to i32
// CHECK: %[[SECTION32:.*]] = arith.minui %[[SECTIONFIT]], %[[PAIRS]] : i32
// CHECK: scf.if
// Producer: the rounds and each item's visits, carrying the ring position
// of the next K/V tile and the tiles visited so far.
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: scf.for %[[R:.*]] = %c0_i32 to %[[ROUNDS]] step %c1_i32 iter_args(%{{.*}} = %c0_i32, %{{.*}} = %c0_i32) -> (i32, i32) : i32 {
// CHECK: %[[ODD:.*]] = arith.trunci %[[R]] : i32 to i1
// CHECK: %[[POS:.*]] = arith.select %[[ODD]], %[[MIRROR]], %[[BLOCK]] : i32
// CHECK: %[[START:.*]] = arith.muli %[[R]], %[[BLOCKS]] : i32
// CHECK: %[[W:.*]] = arith.addi %[[START]], %[[POS]] : i32
// w -> (pair, rank): section w / (pairs x items per pair); in it the ranks
// in order, the pairs innermost (the last section may be smaller).
// CHECK: %[[PERSECTION:.*]] = arith.muli %[[SECTION32]], %[[PERPAIR]] : i32
// CHECK: %[[SECTIONNO:.*]] = arith.divui %[[W]], %[[PERSECTION]] : i32
// CHECK: %[[FIRSTPAIR:.*]] = arith.muli %[[SECTIONNO]], %[[SECTION32]] : i32
// CHECK: %[[INSECTION:.*]] = arith.remui %[[W]], %[[PERSECTION]] : i32
// CHECK: %[[LEFT:.*]] = arith.subi %{{.*}}, %[[FIRSTPAIR]] : i32
// CHECK: %[[SIZE:.*]] = arith.minui %[[SECTION32]], %[[LEFT]] : i32
// CHECK: %[[PAIR:.*]] = arith.addi %[[FIRSTPAIR]], %{{.*}} : i32
// CHECK: arith.divui %[[PAIR]], %{{.*}} : i32
// CHECK: arith.remui %[[PAIR]], %{{.*}} : i32
// CHECK: %[[RANK:.*]] = arith.divui %[[INSECTION]], %[[SIZE]] : i32
// Two visits, one for the middle tile (2k + 1 = T).
// CHECK: %[[TWICE:.*]] = arith.muli %[[RANK]], %c2_i32 : i32
// CHECK: %[[ODDROW:.*]] = arith.addi %[[TWICE]], %c1_i32 : i32
// CHECK: %[[MIDDLE:.*]] = arith.cmpi eq, %[[ODDROW]], %[[T]] : i32
// CHECK: %[[VISITS:.*]] = arith.select %[[MIDDLE]], %c1_i32, %c2_i32 : i32
// CHECK: scf.for %[[V:.*]] = %c0_i32 to %[[VISITS]] step %c1_i32 iter_args(%[[BASE:.*]] = %{{.*}}, %[[COUNT:.*]] = %{{.*}}) -> (i32, i32) : i32 {
// Visit 0: tile T - 1 - k; visit 1: tile k.
// CHECK: %[[LAST:.*]] = arith.subi %[[T]], %c1_i32 : i32
// CHECK: %[[LONGER:.*]] = arith.subi %[[LAST]], %[[RANK]] : i32
// CHECK: %[[FIRSTVISIT:.*]] = arith.cmpi eq, %[[V]], %c0_i32 : i32
// CHECK: %[[TILE32:.*]] = arith.select %[[FIRSTVISIT]], %[[LONGER]], %[[RANK]] : i32
// CHECK: %[[TILE:.*]] = arith.index_castui %[[TILE32]] : i32 to index
// Q's slot is free once the consumers released the previous visit's Q
// (q_empty, phase count - 1; a fresh barrier passes parity 1).
// CHECK: %[[QROUND:.*]] = arith.trunci %[[COUNT]] : i32 to i1
// CHECK: %[[QFREE:.*]] = arith.xori %[[QROUND]], %true
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%c9], %[[QFREE]]
// CHECK: %[[QROW:.*]] = arith.muli %[[TILE]], %c64
// CHECK: nvgpu.mbarrier.arrive.expect_tx %[[BARS]][%c0], %c16384
// CHECK: nvgpu.tma.async.load %{{.*}}[%c0, %[[QROW]], %{{.*}}, %{{.*}}], %[[BARS]][%c0]
// The K/V ring runs on from the previous visits: n = base + j - begin.
// CHECK: %[[BEGIN:.*]], %[[END:.*]] = fa.kv_tile_range %[[QROW]]
// CHECK: scf.for %[[J:.*]] = %[[BEGIN]] to %[[END]] step %c1 {
// CHECK: %[[REL:.*]] = arith.subi %[[J]], %[[BEGIN]]
// CHECK: %[[BASEIDX:.*]] = arith.index_castui %[[BASE]] : i32 to index
// CHECK: %[[N:.*]] = arith.addi %[[BASEIDX]], %[[REL]]
// CHECK: arith.remui %[[N]], %c2
// CHECK: }
// The next visit starts after this one's K/V tiles (none for an empty
// range).
// CHECK: %[[HIGH:.*]] = arith.maxsi %[[BEGIN]], %[[END]]
// CHECK: %[[COUNTED:.*]] = arith.subi %[[HIGH]], %[[BEGIN]]
// CHECK: %[[COUNTED32:.*]] = arith.index_castui %[[COUNTED]] : index to i32
// CHECK: %[[NEXTBASE:.*]] = arith.addi %[[BASE]], %[[COUNTED32]] : i32
// CHECK: %[[NEXTCOUNT:.*]] = arith.addi %[[COUNT]], %c1_i32 : i32
// CHECK: scf.yield %[[NEXTBASE]], %[[NEXTCOUNT]] : i32, i32
// Consumers: the same rounds and visits, the program with the visit's
// (batch, head, tile) for the grid's indices.
// CHECK: nvvm.setmaxregister increase 240
// CHECK: scf.for %{{.*}} = %c0_i32 to %[[ROUNDS]] step %c1_i32
// CHECK: %[[CBATCH:.*]] = arith.index_castui %{{.*}} : i32 to index
// CHECK: %[[CHEAD:.*]] = arith.index_castui %{{.*}} : i32 to index
// CHECK: scf.for %{{.*}} = %c0_i32 to %{{.*}} step %c1_i32 iter_args(%[[CBASE:.*]] = %{{.*}}, %[[CCOUNT:.*]] = %{{.*}}) -> (i32, i32) : i32 {
// CHECK: %[[CTILE:.*]] = arith.index_castui %{{.*}} : i32 to index
// CHECK: %[[CQROW:.*]] = arith.muli %[[CTILE]], %c64
// CHECK: fa.kv_tile_range %[[CQROW]]
// Q of visit c: q_full's phase c.
// CHECK: %[[CQROUND:.*]] = arith.trunci %[[CCOUNT]] : i32 to i1
// CHECK: nvgpu.mbarrier.try_wait.parity %[[BARS]][%c0], %[[CQROUND]]
// CHECK: scf.for
// CHECK: arith.index_castui %[[CBASE]] : i32 to index
// CHECK: fa.tile_matmul
// CHECK: scf.yield
// After the K/V loop, Q is released: the producer loads the next visit's
// Q while this one is normalized and stored.
// CHECK: nvgpu.mbarrier.arrive %[[BARS]][%{{.*}}]
// CHECK-NEXT: fa.finalize
// CHECK: fa.store_tile %{{.*}}, %arg6[%[[CBATCH]], %[[CHEAD]], %[[CQROW]]]
// CHECK: fa.store_tile %{{.*}}, %arg7[%[[CBATCH]], %[[CHEAD]], %[[CQROW]]]
// CHECK: scf.yield %{{.*}}, %{{.*}} : i32, i32
// The grid is marked for the runtime's launch.
// CHECK: fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 82944, stages = 2, registers = {{[0-9]+}}, producer_warps = 4>, fa.persistent
func.func @attention(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                     %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// Without a mask every tile is an item of its own: T items per pair, one
// visit each (tile T - 1 - k).
// CHECK-LABEL: func.func @attention_full
// CHECK: %[[TILES:.*]] = arith.ceildivui
// CHECK: %[[PAIRS:.*]] = arith.index_castui %{{.*}} : index to i32
// CHECK: %[[T:.*]] = arith.index_castui %[[TILES]] : index to i32
// CHECK: %[[ITEMS:.*]] = arith.muli %[[PAIRS]], %[[T]] : i32
// CHECK: scf.for %{{.*}} = %c0_i32 to %c1_i32 step %c1_i32
// CHECK: fa.persistent
func.func @attention_full(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                          %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                          %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// A mask_mod whose visited keys grow with the query row as the causal
// mask's do (prefix-LM: the prompt, then causal) pairs each tile with its
// mirror as the causal mask does: (T + 1) / 2 items per pair.
// CHECK-LABEL: func.func @prefix_lm
// CHECK: %[[TILES:.*]] = arith.ceildivui
// CHECK: %[[T:.*]] = arith.index_castui %[[TILES]] : index to i32
// CHECK: %[[TPLUS:.*]] = arith.addi %[[T]], %c1_i32 : i32
// CHECK: arith.divui %[[TPLUS]], %c2_i32 : i32
// CHECK: fa.persistent
func.func @prefix_lm(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                     %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %q_idx: index, %kv_idx: index, %q_len: index,
         %kv_len: index):
      %prefix = arith.constant 512 : index
      %in_prefix = arith.cmpi slt, %kv_idx, %prefix : index
      %shift = arith.subi %kv_len, %q_len : index
      %diag = arith.addi %q_idx, %shift : index
      %causal = arith.cmpi sle, %kv_idx, %diag : index
      %keep = arith.ori %in_prefix, %causal : i1
      fa.yield %keep : i1
    }
  return
}

// -----

// A sliding window visits as many keys from every row: T items per pair.
// CHECK-LABEL: func.func @window
// CHECK: %[[TILES:.*]] = arith.ceildivui
// CHECK: %[[PAIRS:.*]] = arith.index_castui %{{.*}} : index to i32
// CHECK: %[[T:.*]] = arith.index_castui %[[TILES]] : index to i32
// CHECK: %[[ITEMS:.*]] = arith.muli %[[PAIRS]], %[[T]] : i32
// CHECK: fa.persistent
func.func @window(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                  %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                  %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %q_idx: index, %kv_idx: index, %q_len: index,
         %kv_len: index):
      %shift = arith.subi %kv_len, %q_len : index
      %diag = arith.addi %q_idx, %shift : index
      %window = arith.constant 256 : index
      %first = arith.subi %diag, %window : index
      %after = arith.cmpi sge, %kv_idx, %first : index
      %before = arith.cmpi sle, %kv_idx, %diag : index
      %keep = arith.andi %after, %before : i1
      fa.yield %keep : i1
    }
  return
}

// -----

// A varlen batch's grid is ragged (its tile count bounds the packed rows):
// one block per tile of the longest sequence, not the persistent rounds,
// and the TMA loads keep the sequence's rows and limit.
// CHECK-LABEL: func.func @varlen
// CHECK-NOT: scf.for %{{.*}} = %c0_i32
// CHECK: nvvm.setmaxregister decrease 24
// The producer's TMA rows are the sequence's: its first row plus the
// tile's (Q, then each K/V tile of the consumers' range).
// CHECK: %[[QSTART:.*]] = arith.muli %{{.*}}, %c64
// CHECK: %[[QFIRST:.*]] = arith.minui
// CHECK: %[[QROW:.*]] = arith.addi %[[QFIRST]], %[[QSTART]]
// CHECK: nvgpu.tma.async.load %{{.*}}[%c0, %[[QROW]], %{{.*}}, %c0]
// CHECK: scf.for %[[J:.*]] = %kv_begin to %kv_end
// CHECK: %[[KVSTART:.*]] = arith.muli %[[J]], %c64
// CHECK: %[[KVROW:.*]] = arith.addi %{{.*}}, %[[KVSTART]]
// CHECK: nvgpu.tma.async.load %{{.*}}[%c0, %[[KVROW]], %{{.*}}, %c0]
// CHECK: fa.launch = #fa.launch<strategy = wgmma
// CHECK-NOT: fa.persistent
// CHECK-SAME: fa.tensor_maps
// CHECK-SAME: ragged
func.func @varlen(%q: memref<1x?x?x128xf16>, %k: memref<1x?x?x128xf16>,
                  %v: memref<1x?x?x128xf16>, %o: memref<1x?x?x128xf16>,
                  %lse: memref<1x?x?xf32>, %cq: memref<?xi32>, %ck: memref<?xi32>) {
  fa.attention %q, %k, %v into %o, %lse cu_seqlens(%cq, %ck) {scale = 0.0883883461 : f32, mask = #fa.mask<causal>}
    : memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>
    into memref<1x?x?x128xf16>, memref<1x?x?xf32> cu_seqlens memref<?xi32>, memref<?xi32>
  return
}
