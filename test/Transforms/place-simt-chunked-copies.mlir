// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=64" --fa-place-simt="num-warps=8 chunked-copies=1" | FileCheck %s
// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=64" --fa-place-simt="num-warps=8" | FileCheck %s --check-prefix=ELEMENTS
// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-pipeline="strategy=wgmma num-warps=8 stages=2" | FileCheck %s --check-prefix=WGMMA

// chunked-copies (the tensor-core strategies' runtime keeps every tensor
// row 16-byte aligned): the delta program, which only streams O and dO,
// copies them in 16-byte chunks (fa.copy_chunks), into rows padded by one
// chunk (128 + 8 bf16 = 272 bytes, a multiple of 16) ...
// CHECK-LABEL: func @backward_bf16
// CHECK: fa.load_tile {{.*}} {fa.copy_chunks, fa.shared_offset = 0 : i64} {{.*}} -> tensor<64x128xbf16, #fa.shared<pad = 8>>
// CHECK: fa.load_tile {{.*}} {fa.copy_chunks, fa.shared_offset = 17408 : i64} {{.*}} -> tensor<64x128xbf16, #fa.shared<pad = 8>>
// CHECK: fa.row_dot
// CHECK: program = "delta"
// ... while a program with matmuls keeps the strategy's own copies and rows.
// CHECK-NOT: fa.copy_chunks
// CHECK: program = "dkdv"
// CHECK-NOT: fa.copy_chunks
// CHECK: program = "dq"
//
// Without it, element by element into rows padded by 4.
// ELEMENTS-NOT: fa.copy_chunks
// ELEMENTS: fa.load_tile {{.*}} {fa.shared_offset = 0 : i64} {{.*}} -> tensor<64x128xbf16, #fa.shared<pad = 4>>
// ELEMENTS-NOT: fa.copy_chunks
//
// The wgmma place pipeline gives the delta program to fa-place-simt with
// chunked copies.
// WGMMA: fa.load_tile {{.*}} {fa.copy_chunks, fa.shared_offset = 0 : i64} {{.*}} -> tensor<64x128xbf16, #fa.shared<pad = 8>>
// WGMMA: fa.launch = #fa.launch<strategy = simt, {{.*}}>, program = "delta"
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
