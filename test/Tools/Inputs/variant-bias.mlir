func.func @score_mod(%score: f32, %b: index, %h: index, %q: index, %kv: index,
                     %q_len: index, %kv_len: index,
                     %bias: memref<?x?x?xf16>) -> f32 {
  %x = memref.load %bias[%h, %q, %kv] : memref<?x?x?xf16>
  %xf = arith.extf %x : f16 to f32
  %r = arith.addf %score, %xf : f32
  return %r : f32
}
