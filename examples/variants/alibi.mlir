// ALiBi with its geometric slopes for 16 heads: score - 2^(-(h + 1) / 2) *
// |i + Sk - Sq - j|; causal. f16, head dim 64.
//   fa-compile examples/variants/alibi.mlir --strategy=mma --emit=ptx
func.func @alibi(%q: memref<?x16x?x64xf16>, %k: memref<?x16x?x64xf16>,
                 %v: memref<?x16x?x64xf16>, %o: memref<?x16x?x64xf16>,
                 %lse: memref<?x16x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse
    {scale = 0.125 : f32, mask = #fa.mask<causal>}
    : memref<?x16x?x64xf16>, memref<?x16x?x64xf16>, memref<?x16x?x64xf16>
    into memref<?x16x?x64xf16>, memref<?x16x?xf32>
    score_mod {
    ^bb0(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index,
         %q_len: index, %kv_len: index):
      %one = arith.constant 1 : index
      %h1 = arith.addi %h, %one : index
      %hi = arith.index_cast %h1 : index to i64
      %hf = arith.sitofp %hi : i64 to f32
      %step = arith.constant -0.5 : f32
      %e = arith.mulf %hf, %step : f32
      %slope = math.exp2 %e : f32
      %shift = arith.subi %kv_len, %q_len : index
      %diag = arith.addi %q_idx, %shift : index
      %d = arith.subi %diag, %kv_idx : index
      %di = arith.index_cast %d : index to i64
      %df = arith.sitofp %di : i64 to f32
      %dist = math.absf %df : f32
      %bias = arith.mulf %slope, %dist : f32
      %biased = arith.subf %score, %bias : f32
      fa.yield %biased : f32
    }
  return
}
