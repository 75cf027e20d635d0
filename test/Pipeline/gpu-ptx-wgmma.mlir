// REQUIRES: ptxas
// The wgmma strategy from the problem down to PTX, f16 and bf16, and ptxas
// assembles it for sm_90a (the only target with wgmma).
// RUN: fa-compile %s --dtype=f16 --strategy=wgmma --block-m=128 --block-n=128 --num-warps=8 --stages=2 --arch=sm_90a --emit=ptx -o %t.f16.ptx
// RUN: FileCheck %s --check-prefixes=CHECK,F16 --input-file=%t.f16.ptx
// RUN: %ptxas -arch=sm_90a %t.f16.ptx -o %t.f16.cubin
// RUN: sed -e 's/xf16/xbf16/g' %s > %t.bf16.mlir
// RUN: fa-compile %t.bf16.mlir --dtype=bf16 --strategy=wgmma --block-m=128 --block-n=128 --num-warps=8 --stages=2 --arch=sm_90a --emit=ptx -o %t.bf16.ptx
// RUN: FileCheck %s --check-prefixes=CHECK,BF16 --input-file=%t.bf16.ptx
// RUN: %ptxas -arch=sm_90a %t.bf16.ptx -o %t.bf16.cubin
// Other targets are refused with the reason.
// RUN: not fa-compile %s --dtype=f16 --strategy=wgmma --arch=sm_80 --emit=ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=ARCH
// ARCH: the wgmma strategy needs arch sm_90a (wgmma exists only there), got sm_80

// CHECK: .target sm_90a
// CHECK: .visible .entry attention(
// CHECK: .maxntid 256, 1, 1
// 16-byte copies into the swizzled tiles, then the async-proxy fence
// before the barrier that publishes them.
// CHECK: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16, {{.*}};
// CHECK: cp.async.wait_group 0;
// CHECK-NEXT: fence.proxy.async.shared::cta;
// CHECK-NEXT: bar.sync 0;
// The loop body's instructions (in whatever block order LLVM lays out):
// Q K^T with both operands from shared memory (8 k16 steps at D = 128),
// P V with A from registers and V transposed, the fences and waits.
// CHECK-DAG: wgmma.fence.sync.aligned;
// F16-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, p, 1, 1, 0, 0;
// F16-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, p, 1, 1, 1;
// BF16-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// BF16-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, p, 1, 1, 1;
// CHECK-DAG: wgmma.commit_group.sync.aligned;
// CHECK-DAG: wgmma.wait_group.sync.aligned 0;
// CHECK-DAG: shfl.sync.bfly.b32
// CHECK-DAG: ex2.approx
// CHECK-DAG: st.global.b32
func.func @attention(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                     %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}
