// The GPU pipelines take the strategy by its registered name; an unknown
// name is an error that lists the strategies, never a silent default.
// RUN: not fa-opt %s --fa-place-pipeline="strategy=bogus" 2>&1 | FileCheck %s --check-prefix=PLACE
// PLACE: error: unknown strategy 'bogus'; expected one of wgmma, mma, simt
// RUN: not fa-opt %s --fa-gpu-kernel="strategy=Mma" 2>&1 | FileCheck %s --check-prefix=KERNEL
// KERNEL: error: unknown strategy 'Mma'; expected one of wgmma, mma, simt
// RUN: not fa-opt %s --fa-gpu-to-nvvm="strategy=auto" 2>&1 | FileCheck %s --check-prefix=NVVM
// NVVM: error: unknown strategy 'auto'; expected one of wgmma, mma, simt

// A registered name places the program with that strategy's passes.
// RUN: fa-opt %s --fa-tile-pipeline="block-m=64 block-n=64" --fa-place-pipeline="strategy=mma num-warps=4 stages=2" | FileCheck %s --check-prefix=MMA
// MMA: fa.launch = #fa.launch<strategy = mma
func.func @attention(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                     %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    into memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}
