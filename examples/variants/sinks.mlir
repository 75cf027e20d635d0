// gpt-oss's attention: a learned sink logit per query head joins each
// row's softmax denominator (no value row: a row may give less than all of
// its weight to the keys), causal, with the 128-key sliding window of its
// alternate layers. bf16, head dim 64, 64 query heads over 8 K/V heads.
//   fa-compile examples/variants/sinks.mlir --strategy=wgmma --emit=ptx
// (Without the file: fa-compile --sinks [--backward] ... builds the plain
// problem with sinks.)
func.func @sinks(%q: memref<?x64x?x64xbf16>, %k: memref<?x8x?x64xbf16>,
                 %v: memref<?x8x?x64xbf16>, %o: memref<?x64x?x64xbf16>,
                 %lse: memref<?x64x?xf32>, %sinks: memref<64xf32>) {
  fa.attention %q, %k, %v into %o, %lse sinks %sinks
    {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x64x?x64xbf16>, memref<?x8x?x64xbf16>, memref<?x8x?x64xbf16>
    into memref<?x64x?x64xbf16>, memref<?x64x?xf32> sinks memref<64xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %q_idx: index, %kv_idx: index, %q_len: index,
         %kv_len: index):
      %shift = arith.subi %kv_len, %q_len : index
      %diag = arith.addi %q_idx, %shift : index
      %window = arith.constant 127 : index
      %first = arith.subi %diag, %window : index
      %keep = arith.cmpi sge, %kv_idx, %first : index
      fa.yield %keep : i1
    }
  return
}
