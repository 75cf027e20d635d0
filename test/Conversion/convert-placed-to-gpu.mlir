// RUN: fa-opt %s --fa-convert-placed-to-gpu | FileCheck %s

// A placed program (one warp, thread grid 1 x 32: each thread owns two rows
// and one column of every 2 x 32 tile) becomes a gpu.func kernel.
#regs = #fa.blocked<threads = [1, 32]>
#smem = #fa.shared<pad = 1>

// The host function is gone; the kernel keeps its signature and carries
// the launch configuration.
// CHECK: module attributes {gpu.container_module}
// CHECK-NOT: func.func
// CHECK: gpu.module @fa_kernels
// CHECK: gpu.func @attention(%[[Q:.*]]: memref<?x?x?x32xf32>, %[[K:.*]]: memref<?x?x?x32xf32>, %[[V:.*]]: memref<?x?x?x32xf32>, %[[O:.*]]: memref<?x?x?x32xf32>, %[[LSE:.*]]: memref<?x?x?xf32>) kernel
// CHECK-SAME: fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 8992, stages = 1, registers = 40>
// CHECK-SAME: known_block_size = array<i32: 32, 1, 1>
// Block (x, y, z) = (query tile, head, batch).
// CHECK: %[[QT:.*]] = gpu.block_id x
// CHECK: %[[H:.*]] = gpu.block_id y
// CHECK: %[[B:.*]] = gpu.block_id z
// Q_i: a view of the dynamic shared memory at offset 0, filled by the whole
// block (thread t copies elements t and t + 32: both loads, then both
// stores; convert-placed-to-gpu-copy.mlir has the details) between barriers.
// CHECK: %[[SMEM:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: %[[QS:.*]] = memref.view %[[SMEM]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2x33xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-COUNT-2: memref.load %[[Q]][%[[B]], %[[H]], %{{.*}}, %{{.*}}] : memref<?x?x?x32xf32>
// CHECK-COUNT-2: memref.store %{{.*}}, %[[QS]][%{{.*}}, %{{.*}}] : memref<2x33xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// The online-softmax state: the two rows' m and l and the two owned acc
// elements per thread, as vectors (registers).
// CHECK: scf.for {{.*}} -> (vector<2xf32>, vector<2xf32>, vector<2xf32>) {
// K_j at offset 272 = 2 * 33 * 4 rounded up to 16.
// CHECK: %[[KS:.*]] = memref.view %{{.*}}[%c272{{.*}}][] {{.*}} to memref<32x33xf32, #gpu.address_space<workgroup>>
// S = Q K^T: per k, one Q value per owned row, one K value per owned column.
// CHECK: scf.for %[[KK:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32)
// CHECK:   memref.load %[[QS]][%{{.*}}, %[[KK]]]
// CHECK:   memref.load %[[QS]][%{{.*}}, %[[KK]]]
// CHECK:   memref.load %[[KS]][%{{.*}}, %[[KK]]]
// CHECK:   math.fma
// CHECK:   math.fma
// Causal/tail mask (the same lowering for every layout): only a tile past
// the end of the keys or across the diagonal is masked; there each owned
// score costs one 32-bit compare of its column offset (0 here: one column
// a thread) with its row's last visible column.
// CHECK: arith.cmpi uge
// CHECK: arith.cmpi ugt
// CHECK: scf.if %{{.*}} -> (vector<2xf32>)
// CHECK:   arith.minsi
// CHECK:   %[[C0:.*]] = arith.constant 0 : i32
// CHECK:   %[[HIDDEN:.*]] = arith.cmpi sgt, %[[C0]], %{{.*}} : i32
// CHECK:   arith.select %[[HIDDEN]], %{{.*}}, %{{.*}} : f32
// Row max over the 32 lanes of the row: butterfly shuffles.
// CHECK: gpu.shuffle xor %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: arith.maximumf
// CHECK-COUNT-4: gpu.shuffle xor
// p = exp2(s * scale * log2(e) - m_new * log2(e)): one FMA, one exp2.
// CHECK: %[[ARG:.*]] = math.fma %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: math.exp2 %[[ARG]] : f32
// P leaves the registers for shared memory between barriers.
// CHECK: memref.view %{{.*}}[%c8720{{.*}}][] {{.*}} to memref<2x33xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.store
// CHECK: gpu.barrier
// acc += P V over the 32 keys of the tile.
// CHECK: scf.for {{.*}} -> (f32, f32)
// CHECK: scf.yield {{.*}} : vector<2xf32>, vector<2xf32>, vector<2xf32>
// Finalize: LSE = m + log2(l) * ln 2.
// CHECK: math.log2
// Stores: O rows inside Sq; LSE by the first thread of each row.
// CHECK: scf.if
// CHECK:   memref.store %{{.*}}, %[[O]][%[[B]], %[[H]], %{{.*}}, %{{.*}}] : memref<?x?x?x32xf32>
// CHECK: arith.cmpi eq
// CHECK: scf.if
// CHECK:   memref.store %{{.*}}, %[[LSE]][%[[B]], %[[H]], %{{.*}}] : memref<?x?x?xf32>
// CHECK: gpu.return
// CHECK-NOT: fa.
func.func @attention(%arg0: memref<?x?x?x32xf32>, %arg1: memref<?x?x?x32xf32>,
                     %arg2: memref<?x?x?x32xf32>, %arg3: memref<?x?x?x32xf32>,
                     %arg4: memref<?x?x?xf32>) {
  %cst = arith.constant dense<0.000000e+00> : tensor<2x32xf32, #regs>
  %cst_0 = arith.constant dense<0.000000e+00> : tensor<2xf32, #regs>
  %cst_1 = arith.constant dense<0xFF800000> : tensor<2xf32, #regs>
  %c32 = arith.constant 32 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %dim = memref.dim %arg0, %c0 : memref<?x?x?x32xf32>
  %dim_2 = memref.dim %arg0, %c1 : memref<?x?x?x32xf32>
  %dim_3 = memref.dim %arg0, %c2 : memref<?x?x?x32xf32>
  %dim_4 = memref.dim %arg1, %c1 : memref<?x?x?x32xf32>
  %dim_5 = memref.dim %arg1, %c2 : memref<?x?x?x32xf32>
  %0 = arith.ceildivui %dim_3, %c2 : index
  fa.grid (%b, %h, %q_tile) in (%dim, %dim_2, %0) {
    %1 = arith.divui %dim_2, %dim_4 : index
    %2 = arith.divui %h, %1 : index
    %3 = arith.muli %q_tile, %c2 : index
    %4 = fa.load_tile %arg0[%b, %h, %3] {fa.shared_offset = 0 : i64} : memref<?x?x?x32xf32> -> tensor<2x32xf32, #smem>
    %kv_begin, %kv_end = fa.kv_tile_range %3, %dim_3, %dim_5 {block_m = 2 : i64, block_n = 32 : i64, mask = #fa.mask<causal>}
    %5:3 = scf.for %arg5 = %kv_begin to %kv_end step %c1 iter_args(%arg6 = %cst_1, %arg7 = %cst_0, %arg8 = %cst) -> (tensor<2xf32, #regs>, tensor<2xf32, #regs>, tensor<2x32xf32, #regs>) {
      %6 = arith.muli %arg5, %c32 : index
      %7 = fa.load_tile %arg1[%b, %2, %6] {fa.shared_offset = 272 : i64} : memref<?x?x?x32xf32> -> tensor<32x32xf32, #smem>
      %8 = fa.load_tile %arg2[%b, %2, %6] {fa.shared_offset = 4496 : i64} : memref<?x?x?x32xf32> -> tensor<32x32xf32, #smem>
      %9 = fa.tile_matmul %4, %7 {transpose_rhs} : tensor<2x32xf32, #smem>, tensor<32x32xf32, #smem> -> tensor<2x32xf32, #regs>
      %10 = fa.mask %9, %3, %6, %dim_3, %dim_5 {mask = #fa.mask<causal>} : tensor<2x32xf32, #regs>
      %m_new, %p, %l_new, %alpha = fa.online_softmax %10, %arg6, %arg7 {scale = 1.250000e-01 : f32} : tensor<2x32xf32, #regs>, tensor<2xf32, #regs>
      %11 = fa.rescale %arg8, %alpha : tensor<2x32xf32, #regs>, tensor<2xf32, #regs>
      %12 = fa.convert_layout %p {fa.shared_offset = 8720 : i64} : tensor<2x32xf32, #regs> -> tensor<2x32xf32, #smem>
      %13 = fa.tile_matmul %12, %8 acc(%11) : tensor<2x32xf32, #smem>, tensor<32x32xf32, #smem> -> tensor<2x32xf32, #regs>
      scf.yield %m_new, %l_new, %13 : tensor<2xf32, #regs>, tensor<2xf32, #regs>, tensor<2x32xf32, #regs>
    }
    %o, %lse = fa.finalize %5#2, %5#0, %5#1 : tensor<2x32xf32, #regs>, tensor<2xf32, #regs>
    fa.store_tile %o, %arg3[%b, %h, %3] : tensor<2x32xf32, #regs> -> memref<?x?x?x32xf32>
    fa.store_tile %lse, %arg4[%b, %h, %3] : tensor<2xf32, #regs> -> memref<?x?x?xf32>
  } attributes {fa.launch = #fa.launch<strategy = simt, threads = 32, shared_bytes = 8992, stages = 1, registers = 40>}
  return
}
