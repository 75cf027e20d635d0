// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=32 block-n=32" | FileCheck %s --check-prefix=TILED
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=32 block-n=32" --fa-place-pipeline="strategy=mma num-warps=2 stages=2" --fa-gpu-kernel | FileCheck %s

// Sink tokens and a causal window: the sinks' K/V tile visits every query
// tile, the others the window's. The dkdv grid starts tile 0 of every head
// and batch first (tiles_outermost); the deterministic grid keeps its turn
// order, and the causal mask alone keeps each head's tiles together (their
// programs share Q and dO in L2).
// TILED-LABEL: func @sinks_window
// TILED: } attributes {program = "delta"}
// TILED: } attributes {program = "dkdv", tiles_outermost}
// TILED: } attributes {program = "dq"}
//
// The block with linear index x + X (y + Y z) runs K/V tile
// linear / (Y Z), head (linear mod Y Z) mod Y, batch (linear mod Y Z) / Y.
// CHECK-LABEL: gpu.func @sinks_window_dkdv
// CHECK: %[[PER_TILE:.*]] = arith.muli %grid_dim_y, %grid_dim_z : index
// CHECK: %[[ROW:.*]] = arith.addi %block_id_y, %{{.*}} : index
// CHECK: %[[LINEAR:.*]] = arith.addi %block_id_x, %{{.*}} : index
// CHECK-NEXT: %[[TILE:.*]] = arith.divui %[[LINEAR]], %[[PER_TILE]] : index
// CHECK-NEXT: %[[REST:.*]] = arith.remui %[[LINEAR]], %[[PER_TILE]] : index
// CHECK-NEXT: %[[HEAD:.*]] = arith.remui %[[REST]], %grid_dim_y : index
// CHECK-NEXT: %[[BATCH:.*]] = arith.divui %[[REST]], %grid_dim_y : index
// CHECK-NEXT: arith.muli %[[TILE]], %c32 : index
// K_j of (batch, K/V head):
// CHECK: nvgpu.device_async_copy %arg1[%[[BATCH]], %[[HEAD]], 
// CHECK-LABEL: gpu.func @sinks_window_dq
func.func @sinks_window(%q: memref<?x?x?x32xf16>, %k: memref<?x?x?x32xf16>, %v: memref<?x?x?x32xf16>,
                        %o: memref<?x?x?x32xf16>, %do: memref<?x?x?x32xf16>, %lse: memref<?x?x?xf32>,
                        %dq: memref<?x?x?x32xf16>, %dk: memref<?x?x?x32xf16>, %dv: memref<?x?x?x32xf16>,
                        %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x32xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x32xf16>, memref<?x?x?x32xf16>, memref<?x?x?x32xf16>,
      memref<?x?x?x32xf16>, memref<?x?x?x32xf16>, memref<?x?x?xf32>
    into memref<?x?x?x32xf16>, memref<?x?x?x32xf16>, memref<?x?x?x32xf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x32xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %c4 = arith.constant 4 : index
      %sink = arith.cmpi slt, %ki, %c4 : index
      %c64 = arith.constant 64 : index
      %lo = arith.subi %qi, %c64 : index
      %window = arith.cmpi sge, %ki, %lo : index
      %keep = arith.ori %sink, %window : i1
      fa.yield %keep : i1
    }
  return
}

// -----

// The causal mask alone: block x is the K/V tile, y the head, z the batch.
// TILED-LABEL: func @causal
// TILED: } attributes {program = "dkdv"}
// CHECK-LABEL: gpu.func @causal_dkdv
// CHECK-NOT: gpu.grid_dim
// CHECK: %[[TILE:.*]] = gpu.block_id x
// CHECK-NOT: gpu.grid_dim
// CHECK-LABEL: gpu.func @causal_dq
func.func @causal(%q: memref<?x?x?x32xf16>, %k: memref<?x?x?x32xf16>, %v: memref<?x?x?x32xf16>,
                  %o: memref<?x?x?x32xf16>, %do: memref<?x?x?x32xf16>, %lse: memref<?x?x?xf32>,
                  %dq: memref<?x?x?x32xf16>, %dk: memref<?x?x?x32xf16>, %dv: memref<?x?x?x32xf16>,
                  %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x32xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x32xf16>, memref<?x?x?x32xf16>, memref<?x?x?x32xf16>,
      memref<?x?x?x32xf16>, memref<?x?x?x32xf16>, memref<?x?x?xf32>
    into memref<?x?x?x32xf16>, memref<?x?x?x32xf16>, memref<?x?x?x32xf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x32xf32>
  return
}
