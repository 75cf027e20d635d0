// The default attention problem: head dim 128, fp32, causal, dynamic
// batch/heads/lengths, GQA allowed (Hq a multiple of Hkv).
func.func @attention(%q: memref<?x?x?x128xf32>, %k: memref<?x?x?x128xf32>,
                     %v: memref<?x?x?x128xf32>, %o: memref<?x?x?x128xf32>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse
    {scale = 0.0883883461 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x128xf32>, memref<?x?x?x128xf32>, memref<?x?x?x128xf32>
    into memref<?x?x?x128xf32>, memref<?x?x?xf32>
  return
}
