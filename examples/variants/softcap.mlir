// Gemma 2's logit softcapping: every score becomes cap * tanh(score / cap)
// (cap = 50) before the softmax; causal. f16, head dim 128.
//   fa-compile examples/variants/softcap.mlir --strategy=mma --emit=ptx
func.func @softcap(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                   %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                   %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse
    {scale = 0.0883883461 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
    score_mod {
    ^bb0(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index,
         %q_len: index, %kv_len: index):
      %cap = arith.constant 50.0 : f32
      %x = arith.divf %score, %cap : f32
      %t = math.tanh %x : f32
      %capped = arith.mulf %t, %cap : f32
      fa.yield %capped : f32
    }
  return
}
