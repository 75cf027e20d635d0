// REQUIRES: ptxas
// The mma strategy from the problem down to PTX, f16 and bf16, and ptxas
// assembles it for sm_90a and sm_80.
// RUN: fa-compile %s --dtype=f16 --strategy=mma --block-m=128 --block-n=64 --num-warps=8 --stages=2 --arch=sm_90a --emit=ptx -o %t.f16.ptx
// RUN: FileCheck %s --check-prefixes=CHECK,F16 --input-file=%t.f16.ptx
// RUN: %ptxas -arch=sm_90a %t.f16.ptx -o %t.f16.cubin
// RUN: sed -e 's/xf16/xbf16/g' %s > %t.bf16.mlir
// RUN: fa-compile %t.bf16.mlir --dtype=bf16 --strategy=mma --block-m=128 --block-n=64 --num-warps=8 --stages=2 --arch=sm_80 --emit=ptx -o %t.bf16.ptx
// RUN: FileCheck %s --check-prefixes=CHECK,BF16 --input-file=%t.bf16.ptx
// RUN: %ptxas -arch=sm_80 %t.bf16.ptx -o %t.bf16.cubin

// CHECK: .visible .entry attention(
// CHECK: .maxntid 256, 1, 1
// 16-byte global -> shared copies that bypass L1, zero-filling the tails.
// CHECK: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16, {{.*}};
// CHECK: cp.async.commit_group;
// CHECK: cp.async.wait_group 0;
// The loop body's instructions (in whatever block order LLVM lays out):
// A fragments of Q and B fragments of K (ldmatrix), of V (ldmatrix.trans),
// the tensor-core products, quad shuffles for the row max and sum, exp2;
// then O leaving in 16-byte stores (8 16-bit values, after the quad
// transpose) and LSE as single 32-bit stores.
// CHECK-DAG: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-DAG: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// F16-DAG: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// BF16-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK-DAG: shfl.sync.bfly.b32
// CHECK-DAG: ex2.approx
// CHECK-DAG: st.global.v4.b32
// CHECK-DAG: st.global.b32
// CHECK-NOT: st.global.v2
// CHECK-NOT: st.global.b16
func.func @attention(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                     %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}
