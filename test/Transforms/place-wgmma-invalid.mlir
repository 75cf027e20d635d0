// RUN: fa-opt %s --split-input-file --fa-tile-pipeline="block-m=128 block-n=64" --fa-place-wgmma="num-warps=8" --verify-diagnostics
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-wgmma="num-warps=8" 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline="block-m=128 block-n=64" --fa-place-wgmma="num-warps=8 arch=sm_80" 2>&1 | FileCheck %s --check-prefix=ARCH
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline="block-m=128 block-n=64" --fa-place-wgmma="num-warps=6" 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline="block-m=128 block-n=24" --fa-place-wgmma="num-warps=8" 2>&1 | FileCheck %s --check-prefix=BLOCKN
// RUN: not fa-opt %s --split-input-file --fa-tile-pipeline="block-m=128 block-n=256" --fa-place-wgmma="num-warps=8 stages=4" 2>&1 | FileCheck %s --check-prefix=SMEM

// ROWS: block-m must be 64 x warpgroups = 128 (each warpgroup owns 64 query rows)
// ARCH: the wgmma strategy needs arch sm_90a, got sm_80
// WARPS: num-warps must be 4, 8, 12 or 16 (whole warpgroups)
// BLOCKN: block-n must be a multiple of 16 up to 256 (the N of Q K^T, and whole k16 steps of P V)
// SMEM: wgmma placement (block-m=128 block-n=256 head-dim=64 num-warps=8 stages=4) needs 279552 bytes of shared memory per block, over the 232432 bytes available on sm_90a

// f32 tiles: wgmma here computes on 16-bit inputs.
func.func @attention_f32(%q: memref<?x?x?x64xf32>, %k: memref<?x?x?x64xf32>,
                         %v: memref<?x?x?x64xf32>, %o: memref<?x?x?x64xf32>,
                         %lse: memref<?x?x?xf32>) {
  // expected-error @below {{the wgmma strategy needs f16 or bf16 tiles, got 'f32'}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf32>, memref<?x?x?x64xf32>, memref<?x?x?x64xf32>
    into memref<?x?x?x64xf32>, memref<?x?x?xf32>
  return
}

// -----

// A head dim of 72 is not whole 128-byte swizzled rows.
func.func @attention_d72(%q: memref<?x?x?x72xf16>, %k: memref<?x?x?x72xf16>,
                         %v: memref<?x?x?x72xf16>, %o: memref<?x?x?x72xf16>,
                         %lse: memref<?x?x?xf32>) {
  // expected-error @below {{the head dim must be a multiple of 64 up to 256}}
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x72xf16>, memref<?x?x?x72xf16>, memref<?x?x?x72xf16>
    into memref<?x?x?x72xf16>, memref<?x?x?xf32>
  return
}

// -----

// A valid program (D = 64, f16): the other runs above reject its config.
func.func @attention_d64(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                         %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
                         %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}
