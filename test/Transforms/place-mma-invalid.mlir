// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-mma="num-warps=8" -verify-diagnostics
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline="block-m=128 block-n=24" --fa-place-mma="num-warps=4" 2>&1 | FileCheck %s --check-prefix=BLOCKN
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline="block-m=128 block-n=128" --fa-place-mma="num-warps=8 stages=4 arch=sm_86" 2>&1 | FileCheck %s --check-prefix=SMEM

// Each warp owns whole m16 fragments: 64 rows cannot be split over 8 warps.
func.func @rows(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
                %lse: memref<?x?x?xf32>) {
  // expected-error @below {{mma placement (block-m=64 block-n=64 head-dim=64 num-warps=8 stages=2): block-m 64 is not a multiple of 16 x num-warps = 128 (each warp owns whole m16 fragments)}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}

// -----

// f32 tiles are the simt strategy's.
func.func @f32(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>,
               %v: memref<?x?x?x64xf32>, %o: memref<?x?x?x64xf32>,
               %lse: memref<?x?x?xf32>) {
  // expected-error @below {{the mma strategy needs f16 or bf16 tiles, got 'f32'}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32>
  return
}

// BLOCKN: block-n 24 is not a multiple of 16 (P is the k16 operand of P V)
// SMEM: mma placement (block-m=128 block-n=128 head-dim=64 num-warps=8 stages=4) needs 165888 bytes of shared memory per block, over the 101360 bytes available on sm_86
