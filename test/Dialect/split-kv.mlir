// RUN: fa-opt %s | fa-opt | FileCheck %s
// RUN: fa-opt %s --mlir-print-op-generic | fa-opt | FileCheck %s

// Split-KV at the problem level: every part's output and LSE (f32, one
// batch entry per part and batch entry) are operands of fa.attention.
// CHECK-LABEL: func @split_problem
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} kv_lens %{{.*}} partials(%{{.*}}, %{{.*}})
// CHECK-SAME: kv_lens memref<?xi32> partials memref<?x8x?x128xf32>, memref<?x8x?xf32>
func.func @split_problem(%q: memref<?x8x?x128xbf16>, %k: memref<?x2x?x128xbf16>,
                         %v: memref<?x2x?x128xbf16>, %o: memref<?x8x?x128xbf16>,
                         %lse: memref<?x8x?xf32>, %lens: memref<?xi32>,
                         %po: memref<?x8x?x128xf32>, %plse: memref<?x8x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse kv_lens %lens partials(%po, %plse) {scale = 0.125 : f32}
    : memref<?x8x?x128xbf16>, memref<?x2x?x128xbf16>, memref<?x2x?x128xbf16>
    into memref<?x8x?x128xbf16>, memref<?x8x?xf32>
    kv_lens memref<?xi32> partials memref<?x8x?x128xf32>, memref<?x8x?xf32>
  return
}

// The merge of two normalized results by their log-sum-exps.
// CHECK-LABEL: func @merge
// CHECK: %{{.*}}, %{{.*}} = fa.merge_partial %{{.*}}, %{{.*}} with %{{.*}}, %{{.*}} : tensor<16x64xf32>, tensor<16xf32>
func.func @merge(%o: tensor<16x64xf32>, %lse: tensor<16xf32>,
                 %po: tensor<16x64xf32>, %plse: tensor<16xf32>) -> (tensor<16x64xf32>, tensor<16xf32>) {
  %o2, %lse2 = fa.merge_partial %o, %lse with %po, %plse : tensor<16x64xf32>, tensor<16xf32>
  return %o2, %lse2 : tensor<16x64xf32>, tensor<16xf32>
}

// A paged KV cache: K and V are a pool of pages (9 here, of 16 rows; not
// the queries' batch), the table one row of page numbers per batch entry.
// CHECK-LABEL: func @paged_problem
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} kv_lens %{{.*}} block_table %{{.*}} {scale
// CHECK-SAME: kv_lens memref<2xi32> block_table memref<2x4xi32>
func.func @paged_problem(%q: memref<2x8x1x64xf16>, %k: memref<9x2x16x64xf16>,
                         %o: memref<2x8x1x64xf16>, %lse: memref<2x8x1xf32>,
                         %lens: memref<2xi32>, %table: memref<2x4xi32>) {
  fa.attention %q, %k, %k into %o, %lse kv_lens %lens block_table %table {scale = 0.125 : f32}
    : memref<2x8x1x64xf16>, memref<9x2x16x64xf16>, memref<9x2x16x64xf16>
    into memref<2x8x1x64xf16>, memref<2x8x1xf32>
    kv_lens memref<2xi32> block_table memref<2x4xi32>
  return
}
