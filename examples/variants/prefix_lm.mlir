// Prefix-LM: every query sees the first 512 keys (the prompt) and the
// causal keys after them. An `or` of two affine conditions: the K/V range
// per query tile is their hull. bf16, head dim 128.
//   fa-compile examples/variants/prefix_lm.mlir --strategy=wgmma --emit=ptx
func.func @prefix_lm(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>,
                     %v: memref<?x?x?x128xbf16>, %o: memref<?x?x?x128xbf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>
    into memref<?x?x?x128xbf16>, memref<?x?x?xf32>
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
