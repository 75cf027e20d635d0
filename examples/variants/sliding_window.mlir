// Sliding-window attention (Mistral, Gemma): query row i sees the keys j
// with i + Sk - Sq - 1024 <= j <= i + Sk - Sq. The mask is affine, so each
// query tile visits only the K/V tiles of its window and tests elements only
// on the window's two edges. f16, head dim 128.
//   fa-compile examples/variants/sliding_window.mlir --strategy=wgmma --emit=ptx
func.func @sliding_window(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
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
      %window = arith.constant 1024 : index
      %first = arith.subi %diag, %window : index
      %after = arith.cmpi sge, %kv_idx, %first : index
      %before = arith.cmpi sle, %kv_idx, %diag : index
      %keep = arith.andi %after, %before : i1
      fa.yield %keep : i1
    }
  return
}
