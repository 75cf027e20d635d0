// RUN: not fa-opt %s --fa-place-mma="num-warps=4" 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: not fa-opt %s --fa-place-wgmma="num-warps=4" 2>&1 | FileCheck %s --check-prefix=WGMMA

// The tensor-core placements read a matmul's right operand from a loaded
// shared tile (mma with ldmatrix, wgmma through a descriptor): a tiled
// program whose P V takes P itself as the right operand is refused, by
// the strategy's name, at that matmul (Placement.cpp's shared check).
// MMA: error: 'fa.tile_matmul' op the mma strategy reads the right operand from a loaded shared tile
// MMA-NEXT: fa.tile_matmul %p16, %p16
// WGMMA: error: 'fa.tile_matmul' op the wgmma strategy reads the right operand from a loaded shared tile
// WGMMA-NEXT: fa.tile_matmul %p16, %p16
func.func @attention(%arg0: memref<?x?x?x64xf16>, %arg1: memref<?x?x?x64xf16>, %arg2: memref<?x?x?x64xf16>, %arg3: memref<?x?x?x64xf16>, %arg4: memref<?x?x?xf32>) {
  %cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %cst_0 = arith.constant dense<0.000000e+00> : tensor<64xf32>
  %cst_1 = arith.constant dense<0xFF800000> : tensor<64xf32>
  %c64 = arith.constant 64 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %dim = memref.dim %arg0, %c0 : memref<?x?x?x64xf16>
  %dim_2 = memref.dim %arg0, %c1 : memref<?x?x?x64xf16>
  %dim_3 = memref.dim %arg0, %c2 : memref<?x?x?x64xf16>
  %dim_4 = memref.dim %arg1, %c1 : memref<?x?x?x64xf16>
  %dim_5 = memref.dim %arg1, %c2 : memref<?x?x?x64xf16>
  %0 = arith.ceildivui %dim_3, %c64 : index
  fa.grid (%b, %h, %tile) in (%dim, %dim_2, %0) {
    %1 = arith.divui %dim_2, %dim_4 : index
    %2 = arith.divui %h, %1 : index
    %3 = arith.muli %tile, %c64 : index
    %4 = fa.load_tile %arg0[%b, %h, %3] : memref<?x?x?x64xf16> -> tensor<64x64xf16>
    %kv_begin, %kv_end = fa.kv_tile_range %3, %dim_3, %dim_5 {block_m = 64 : i64, block_n = 64 : i64}
    %5:3 = scf.for %arg5 = %kv_begin to %kv_end step %c1 iter_args(%arg6 = %cst_1, %arg7 = %cst_0, %arg8 = %cst) -> (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) {
      %7 = arith.muli %arg5, %c64 : index
      %8 = fa.load_tile %arg1[%b, %2, %7] : memref<?x?x?x64xf16> -> tensor<64x64xf16>
      %9 = fa.load_tile %arg2[%b, %2, %7] : memref<?x?x?x64xf16> -> tensor<64x64xf16>
      %10 = fa.tile_matmul %4, %8 {transpose_rhs} : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
      %11 = fa.mask %10, %3, %7, %dim_3, %dim_5 : tensor<64x64xf32>
      %m_new, %p, %l_new, %alpha = fa.online_softmax %11, %arg6, %arg7 {scale = 1.250000e-01 : f32} : tensor<64x64xf32>, tensor<64xf32>
      %12 = fa.rescale %arg8, %alpha : tensor<64x64xf32>, tensor<64xf32>
      %p16 = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xf16>
      %14 = fa.tile_matmul %p16, %p16 acc(%12) : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
      scf.yield %m_new, %l_new, %14 : tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>
    }
    %o, %lse = fa.finalize %5#2, %5#0, %5#1 : tensor<64x64xf32>, tensor<64xf32>
    %6 = arith.truncf %o : tensor<64x64xf32> to tensor<64x64xf16>
    fa.store_tile %6, %arg3[%b, %h, %3] : tensor<64x64xf16> -> memref<?x?x?x64xf16>
    fa.store_tile %lse, %arg4[%b, %h, %3] : tensor<64xf32> -> memref<?x?x?xf32>
  }
  return
}
