// Packed sequences: each query sees the causal keys of its own document.
// The document ids (i32 [B, S], one per position) are a captured tensor
// the mask_mod reads; the kernel takes them after LSE, and one kernel
// serves any packing. Data-dependent: the causal mask narrows the K/V
// range, the document test runs per element. f16, head dim 64, GQA 8/2.
//   fa-compile examples/variants/document.mlir --strategy=mma --emit=ptx
func.func @document(%q: memref<?x8x?x64xf16>, %k: memref<?x2x?x64xf16>,
                    %v: memref<?x2x?x64xf16>, %o: memref<?x8x?x64xf16>,
                    %lse: memref<?x8x?xf32>, %doc_ids: memref<?x?xi32>) {
  fa.attention %q, %k, %v into %o, %lse
    {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x8x?x64xf16>, memref<?x2x?x64xf16>, memref<?x2x?x64xf16>
    into memref<?x8x?x64xf16>, memref<?x8x?xf32>
    captures(%doc_ids : memref<?x?xi32>)
    mask_mod {
    ^bb0(%b: index, %h: index, %q_idx: index, %kv_idx: index, %q_len: index,
         %kv_len: index, %doc: memref<?x?xi32>):
      %q_doc = memref.load %doc[%b, %q_idx] : memref<?x?xi32>
      %kv_doc = memref.load %doc[%b, %kv_idx] : memref<?x?xi32>
      %keep = arith.cmpi eq, %q_doc, %kv_doc : i32
      fa.yield %keep : i1
    }
  return
}
