// RUN: fa-opt %s --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 transposed-scores=1" | FileCheck %s

// With sinks the dkdv program is the plain one (the sinks' gradient is the
// delta program's): its scores transpose too; LSE and D the same way.
// CHECK-LABEL: func @backward_sinks
// CHECK: program = "delta"
// CHECK: fa.load_tile {{[^{]*}} -> tensor<64xf32, #fa.mma<warps = 8, transposed = true>>
// CHECK: fa.tile_matmul %{{.*}}, %{{.*}} {transpose_rhs} : tensor<128x64xbf16, #fa.swizzled_shared<bytes = 128>>, tensor<64x64xbf16, #fa.swizzled_shared<bytes = 128>> -> tensor<128x64xf32, #fa.mma<warps = 8>>
// CHECK-NEXT: fa.transpose
// CHECK: program = "dkdv"
func.func @backward_sinks(%q: memref<?x?x?x64xbf16>, %k: memref<?x?x?x64xbf16>, %v: memref<?x?x?x64xbf16>,
                          %o: memref<?x?x?x64xbf16>, %do: memref<?x?x?x64xbf16>, %lse: memref<?x?x?xf32>,
                          %sinks: memref<?xf32>,
                          %dq: memref<?x?x?x64xbf16>, %dk: memref<?x?x?x64xbf16>, %dv: memref<?x?x?x64xbf16>,
                          %dsinks: memref<?xf32>,
                          %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse sinks %sinks into %dq, %dk, %dv grad_sinks %dsinks
      workspace %delta, %accum {scale = 0.125 : f32}
    : memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>,
      memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>, memref<?x?x?xf32> sinks memref<?xf32>
    into memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16> grad_sinks memref<?xf32>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
  return
}
