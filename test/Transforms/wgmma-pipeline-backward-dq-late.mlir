// RUN: fa-opt %s --fa-wgmma-pipeline | FileCheck %s

// A dkdv loop whose dQ is read (staged and added) before dK starts: dQ
// cannot be waited for with dK in flight (one pending group would be dQ
// itself), so it stays a synchronous product where it is; the rest of the
// iteration is overlapped as usual.
// (The placed program of wgmma-pipeline-backward.mlir, dQ's add moved up.)
// CHECK-LABEL: func @dq_read_before_dk
// CHECK: fa.softmax_grad
// CHECK: %[[DSS:.*]] = fa.convert_layout
// CHECK-NEXT: %[[DQ:.*]] = fa.tile_matmul %[[DSS]], %{{[0-9]+}} :
// CHECK-NEXT: %[[DQS:.*]] = fa.convert_layout %[[DQ]]
// CHECK-NEXT: fa.accumulate_tile %[[DQS]]
// CHECK-NEXT: %[[DK:.*]] = fa.tile_matmul %[[DSS]], %{{.*}} acc(%{{.*}}) {async, transpose_lhs}
// CHECK-NEXT: fa.async_wait %{{.*}} {pending = 0 : i64}
// CHECK-NEXT: fa.async_wait %[[DK]] {pending = 0 : i64}
module {
  func.func @dq_read_before_dk(%arg0: memref<?x?x?x128xbf16>, %arg1: memref<?x?x?x128xbf16>, %arg2: memref<?x?x?x128xbf16>, %arg3: memref<?x?x?x128xbf16>, %arg4: memref<?x?x?x128xbf16>, %arg5: memref<?x?x?xf32>, %arg6: memref<?x?x?x128xbf16>, %arg7: memref<?x?x?x128xbf16>, %arg8: memref<?x?x?x128xbf16>, %arg9: memref<?x?x?xf32>, %arg10: memref<?x?x?x128xf32>) {
    %c2 = arith.constant 2 : index
    %dim = memref.dim %arg0, %c2 : memref<?x?x?x128xbf16>
    %c64 = arith.constant 64 : index
    %0 = arith.ceildivui %dim, %c64 : index
    %c0 = arith.constant 0 : index
    %dim_0 = memref.dim %arg0, %c0 : memref<?x?x?x128xbf16>
    %c1 = arith.constant 1 : index
    %dim_1 = memref.dim %arg0, %c1 : memref<?x?x?x128xbf16>
    fa.grid (%b, %h, %tile) in (%dim_0, %dim_1, %0) {
      %c64_19 = arith.constant 64 : index
      %3 = arith.muli %tile, %c64_19 : index
      %4 = fa.load_tile %arg4[%b, %h, %3] : memref<?x?x?x128xbf16> -> tensor<64x128xbf16>
      %5 = fa.load_tile %arg3[%b, %h, %3] : memref<?x?x?x128xbf16> -> tensor<64x128xbf16>
      %6 = fa.row_dot %4, %5 : tensor<64x128xbf16> -> tensor<64xf32>
      fa.store_tile %6, %arg9[%b, %h, %3] : tensor<64xf32> -> memref<?x?x?xf32>
      %cst = arith.constant dense<0.000000e+00> : tensor<64x128xf32>
      fa.store_tile %cst, %arg10[%b, %h, %3] : tensor<64x128xf32> -> memref<?x?x?x128xf32>
    } attributes {program = "delta"}
    %c1_2 = arith.constant 1 : index
    %dim_3 = memref.dim %arg0, %c1_2 : memref<?x?x?x128xbf16>
    %c2_4 = arith.constant 2 : index
    %dim_5 = memref.dim %arg0, %c2_4 : memref<?x?x?x128xbf16>
    %c1_6 = arith.constant 1 : index
    %dim_7 = memref.dim %arg1, %c1_6 : memref<?x?x?x128xbf16>
    %c2_8 = arith.constant 2 : index
    %dim_9 = memref.dim %arg1, %c2_8 : memref<?x?x?x128xbf16>
    %c128 = arith.constant 128 : index
    %1 = arith.ceildivui %dim_9, %c128 : index
    %c0_10 = arith.constant 0 : index
    %dim_11 = memref.dim %arg0, %c0_10 : memref<?x?x?x128xbf16>
    fa.grid (%b, %h, %tile) in (%dim_11, %dim_7, %1) {
      %c128_19 = arith.constant 128 : index
      %3 = arith.muli %tile, %c128_19 : index
      %4 = fa.load_tile %arg1[%b, %h, %3] {fa.shared_offset = 0 : i64} : memref<?x?x?x128xbf16> -> tensor<128x128xbf16, #fa.swizzled_shared<bytes = 128>>
      %5 = fa.load_tile %arg2[%b, %h, %3] {fa.shared_offset = 32768 : i64} : memref<?x?x?x128xbf16> -> tensor<128x128xbf16, #fa.swizzled_shared<bytes = 128>>
      %6 = arith.divui %dim_3, %dim_7 : index
      %7 = arith.muli %h, %6 : index
      %q_begin, %q_end = fa.q_tile_range %3, %dim_5, %dim_9 {block_m = 64 : i64, block_n = 128 : i64}
      %c0_20 = arith.constant 0 : index
      %c1_21 = arith.constant 1 : index
      %c64_22 = arith.constant 64 : index
      %cst = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #fa.mma<warps = 8>>
      %cst_23 = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #fa.mma<warps = 8>>
      %8:2 = scf.for %arg11 = %c0_20 to %6 step %c1_21 iter_args(%arg12 = %cst, %arg13 = %cst_23) -> (tensor<128x128xf32, #fa.mma<warps = 8>>, tensor<128x128xf32, #fa.mma<warps = 8>>) {
        %11 = arith.addi %7, %arg11 : index
        %12:2 = scf.for %arg14 = %q_begin to %q_end step %c1_21 iter_args(%arg15 = %arg12, %arg16 = %arg13) -> (tensor<128x128xf32, #fa.mma<warps = 8>>, tensor<128x128xf32, #fa.mma<warps = 8>>) {
          %13 = arith.muli %arg14, %c64_22 : index
          %14 = fa.load_tile %arg5[%b, %11, %13] : memref<?x?x?xf32> -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
          %15 = fa.load_tile %arg9[%b, %11, %13] : memref<?x?x?xf32> -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
          %16 = fa.load_tile %arg0[%b, %11, %13] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 65536 : i64} : memref<?x?x?x128xbf16> -> tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>
          %17 = fa.load_tile %arg4[%b, %11, %13] {fa.pipeline_stages = 2 : i64, fa.shared_offset = 98304 : i64} : memref<?x?x?x128xbf16> -> tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>
          %18 = fa.tile_matmul %16, %4 {transpose_rhs} : tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>, tensor<128x128xbf16, #fa.swizzled_shared<bytes = 128>> -> tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
          %19 = fa.mask %18, %13, %3, %dim_5, %dim_9 : tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
          %20 = fa.recompute_probs %19, %14 {scale = 0.0883883461 : f32} : tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>, tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
          %21 = arith.truncf %20 : tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>> to tensor<64x128xbf16, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
          %22 = fa.convert_layout %21 {fa.shared_offset = 131072 : i64} : tensor<64x128xbf16, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>> -> tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>
          %23 = fa.tile_matmul %22, %17 acc(%arg16) {transpose_lhs} : tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>, tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>> -> tensor<128x128xf32, #fa.mma<warps = 8>>
          %24 = fa.tile_matmul %17, %5 {transpose_rhs} : tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>, tensor<128x128xbf16, #fa.swizzled_shared<bytes = 128>> -> tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
          %25 = fa.softmax_grad %20, %24, %15 {scale = 0.0883883461 : f32} : tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>, tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
          %26 = arith.truncf %25 : tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>> to tensor<64x128xbf16, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
          %27 = fa.convert_layout %26 {fa.shared_offset = 147456 : i64} : tensor<64x128xbf16, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>> -> tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>
          %29 = fa.tile_matmul %27, %4 : tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>, tensor<128x128xbf16, #fa.swizzled_shared<bytes = 128>> -> tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
          %30 = fa.convert_layout %29 {fa.shared_offset = 163840 : i64} : tensor<64x128xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>> -> tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>>
          fa.accumulate_tile %30, %arg10[%b, %11, %13] : tensor<64x128xf32, #fa.swizzled_shared<bytes = 128>> -> memref<?x?x?x128xf32>
          %28 = fa.tile_matmul %27, %16 acc(%arg15) {transpose_lhs} : tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>>, tensor<64x128xbf16, #fa.swizzled_shared<bytes = 128>> -> tensor<128x128xf32, #fa.mma<warps = 8>>
          scf.yield %28, %23 : tensor<128x128xf32, #fa.mma<warps = 8>>, tensor<128x128xf32, #fa.mma<warps = 8>>
        }
        scf.yield %12#0, %12#1 : tensor<128x128xf32, #fa.mma<warps = 8>>, tensor<128x128xf32, #fa.mma<warps = 8>>
      }
      %9 = arith.truncf %8#0 : tensor<128x128xf32, #fa.mma<warps = 8>> to tensor<128x128xbf16, #fa.mma<warps = 8>>
      fa.store_tile %9, %arg7[%b, %h, %3] : tensor<128x128xbf16, #fa.mma<warps = 8>> -> memref<?x?x?x128xbf16>
      %10 = arith.truncf %8#1 : tensor<128x128xf32, #fa.mma<warps = 8>> to tensor<128x128xbf16, #fa.mma<warps = 8>>
      fa.store_tile %10, %arg8[%b, %h, %3] : tensor<128x128xbf16, #fa.mma<warps = 8>> -> memref<?x?x?x128xbf16>
    } attributes {fa.launch = #fa.launch<strategy = wgmma, threads = 256, shared_bytes = 197632, stages = 2, registers = 220>, program = "dkdv"}
    %c2_12 = arith.constant 2 : index
    %dim_13 = memref.dim %arg0, %c2_12 : memref<?x?x?x128xbf16>
    %c64_14 = arith.constant 64 : index
    %2 = arith.ceildivui %dim_13, %c64_14 : index
    %c0_15 = arith.constant 0 : index
    %dim_16 = memref.dim %arg0, %c0_15 : memref<?x?x?x128xbf16>
    %c1_17 = arith.constant 1 : index
    %dim_18 = memref.dim %arg0, %c1_17 : memref<?x?x?x128xbf16>
    fa.grid (%b, %h, %tile) in (%dim_16, %dim_18, %2) {
      %c64_19 = arith.constant 64 : index
      %3 = arith.muli %tile, %c64_19 : index
      %4 = fa.load_tile %arg10[%b, %h, %3] : memref<?x?x?x128xf32> -> tensor<64x128xf32>
      %5 = arith.truncf %4 : tensor<64x128xf32> to tensor<64x128xbf16>
      fa.store_tile %5, %arg6[%b, %h, %3] : tensor<64x128xbf16> -> memref<?x?x?x128xbf16>
    } attributes {program = "dq"}
    return
  }
}

