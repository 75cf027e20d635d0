func.func @bad(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
               %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
               %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %sq: index, %sk: index):
      %m = memref.alloca() : memref<4xf32>
      fa.yield %s : f32
    }
  return
}
