// RUN: not fa-opt %s --fa-place-pipeline="strategy=wgmma num-warps=8 stages=2" 2>&1 | FileCheck %s

// The producer of a warp-specialized forward copies the K/V tiles of one
// range less one hole (fa.kv_tile_hole): a program with a second hole (the
// tiled program of sink tokens and a window, its hole op given twice) is
// refused rather than copied for the wrong tiles.
// CHECK: error: 'fa.grid' op warp specialization expects at most one fa.kv_tile_hole, in its K/V range
module {
  func.func @fa_fwd_d128_bf16_causal_128x128_w8_mod5a50bf4d_s2_wgmma(%arg0: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %arg1: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %arg2: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %arg3: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %arg4: memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>) {
    %cst = arith.constant dense<0.000000e+00> : tensor<128x128xf32>
    %cst_0 = arith.constant dense<0.000000e+00> : tensor<128xf32>
    %cst_1 = arith.constant dense<0xFF800000> : tensor<128xf32>
    %c128 = arith.constant 128 : index
    %c2 = arith.constant 2 : index
    %c1 = arith.constant 1 : index
    %c0 = arith.constant 0 : index
    %dim = memref.dim %arg0, %c0 : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
    %dim_2 = memref.dim %arg0, %c1 : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
    %dim_3 = memref.dim %arg0, %c2 : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
    %dim_4 = memref.dim %arg1, %c1 : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
    %dim_5 = memref.dim %arg1, %c2 : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
    %0 = arith.ceildivui %dim_3, %c128 : index
    fa.grid (%b, %h, %tile) in (%dim, %dim_2, %0) {
      %1 = arith.divui %dim_2, %dim_4 : index
      %2 = arith.divui %h, %1 : index
      %3 = arith.muli %tile, %c128 : index
      %4 = fa.load_tile %arg0[%b, %h, %3] : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> -> tensor<128x128xbf16>
      %kv_begin, %kv_end = fa.kv_tile_range %3, %dim_3, %dim_5 at(%b, %h) {block_m = 128 : i64, block_n = 128 : i64, mask = #fa.mask<causal>} mask_mod {
      ^bb0(%arg5: index, %arg6: index, %arg7: index, %arg8: index, %arg9: index, %arg10: index):
        %c1024 = arith.constant 1024 : index
        %c4 = arith.constant 4 : index
        %9 = arith.cmpi slt, %arg8, %c4 : index
        %10 = arith.subi %arg7, %c1024 : index
        %11 = arith.cmpi sge, %arg8, %10 : index
        %12 = arith.ori %9, %11 : i1
        fa.yield %12 : i1
      }
      %hole_begin, %hole_end = fa.kv_tile_hole %kv_begin, %kv_end of %3, %dim_3, %dim_5 at(%b, %h) {block_m = 128 : i64, block_n = 128 : i64} mask_mod {
      ^bb0(%arg5: index, %arg6: index, %arg7: index, %arg8: index, %arg9: index, %arg10: index):
        %c1024 = arith.constant 1024 : index
        %c4 = arith.constant 4 : index
        %9 = arith.cmpi slt, %arg8, %c4 : index
        %10 = arith.subi %arg7, %c1024 : index
        %11 = arith.cmpi sge, %arg8, %10 : index
        %12 = arith.ori %9, %11 : i1
        fa.yield %12 : i1
      }
      %second_begin, %second_end = fa.kv_tile_hole %kv_begin, %kv_end of %3, %dim_3, %dim_5 at(%b, %h) {block_m = 128 : i64, block_n = 128 : i64} mask_mod {
      ^bb0(%arg5: index, %arg6: index, %arg7: index, %arg8: index, %arg9: index, %arg10: index):
        %c1024 = arith.constant 1024 : index
        %c4 = arith.constant 4 : index
        %9 = arith.cmpi slt, %arg8, %c4 : index
        %10 = arith.subi %arg7, %c1024 : index
        %11 = arith.cmpi sge, %arg8, %10 : index
        %12 = arith.ori %9, %11 : i1
        fa.yield %12 : i1
      }
      %5 = arith.subi %hole_end, %hole_begin : index
      %6 = arith.subi %kv_end, %5 : index
      %7:3 = scf.for %arg5 = %kv_begin to %6 step %c1 iter_args(%arg6 = %cst_1, %arg7 = %cst_0, %arg8 = %cst) -> (tensor<128xf32>, tensor<128xf32>, tensor<128x128xf32>) {
        %9 = arith.cmpi sge, %arg5, %hole_begin : index
        %10 = arith.select %9, %5, %c0 : index
        %11 = arith.addi %arg5, %10 : index
        %12 = arith.muli %11, %c128 : index
        %13 = fa.load_tile %arg1[%b, %2, %12] : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> -> tensor<128x128xbf16>
        %14 = fa.load_tile %arg2[%b, %2, %12] : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> -> tensor<128x128xbf16>
        %15 = fa.tile_matmul %4, %13 {transpose_rhs} : tensor<128x128xbf16>, tensor<128x128xbf16> -> tensor<128x128xf32>
        %16 = fa.mask %15, %3, %12, %dim_3, %dim_5 at(%b, %h) {mask = #fa.mask<causal>} : tensor<128x128xf32> mask_mod {
        ^bb0(%arg9: index, %arg10: index, %arg11: index, %arg12: index, %arg13: index, %arg14: index):
          %c1024 = arith.constant 1024 : index
          %c4 = arith.constant 4 : index
          %20 = arith.cmpi slt, %arg12, %c4 : index
          %21 = arith.subi %arg11, %c1024 : index
          %22 = arith.cmpi sge, %arg12, %21 : index
          %23 = arith.ori %20, %22 : i1
          fa.yield %23 : i1
        }
        %m_new, %p, %l_new, %alpha = fa.online_softmax %16, %arg6, %arg7 {scale = 0.0883883461 : f32} : tensor<128x128xf32>, tensor<128xf32>
        %17 = fa.rescale %arg8, %alpha : tensor<128x128xf32>, tensor<128xf32>
        %18 = arith.truncf %p : tensor<128x128xf32> to tensor<128x128xbf16>
        %19 = fa.tile_matmul %18, %14 acc(%17) : tensor<128x128xbf16>, tensor<128x128xbf16> -> tensor<128x128xf32>
        scf.yield %m_new, %l_new, %19 : tensor<128xf32>, tensor<128xf32>, tensor<128x128xf32>
      }
      %o, %lse = fa.finalize %7#2, %7#0, %7#1 : tensor<128x128xf32>, tensor<128xf32>
      %8 = arith.truncf %o : tensor<128x128xf32> to tensor<128x128xbf16>
      fa.store_tile %8, %arg3[%b, %h, %3] : tensor<128x128xbf16> -> memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
      fa.store_tile %lse, %arg4[%b, %h, %3] : tensor<128xf32> -> memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
    }
    return
  }
}
