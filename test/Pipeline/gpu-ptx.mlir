// REQUIRES: ptxas
// The lecture's kernel (D = 128, B_r = 8, B_c = 32, 8 warps) from this
// problem down to PTX, for each target, and ptxas assembles it. PTX
// generation needs no CUDA toolkit (no libdevice): the toolkit variables
// point nowhere for the first run.
// RUN: env CUDA_ROOT=%t.none CUDA_HOME=%t.none CUDA_PATH=%t.none fa-compile %s --block-m=8 --block-n=32 --arch=sm_90a --emit=ptx -o %t.sm90a.ptx
// RUN: FileCheck %s --input-file=%t.sm90a.ptx
// RUN: %ptxas -arch=sm_90a %t.sm90a.ptx -o %t.sm90a.cubin
// RUN: fa-compile %s --block-m=8 --block-n=32 --arch=sm_90 --emit=ptx -o %t.sm90.ptx
// RUN: %ptxas -arch=sm_90 %t.sm90.ptx -o %t.sm90.cubin
// RUN: fa-compile %s --block-m=8 --block-n=32 --arch=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: FileCheck %s --check-prefix=SM80 --input-file=%t.sm80.ptx
// RUN: %ptxas -arch=sm_80 %t.sm80.ptx -o %t.sm80.cubin

// PTX 8.1 on Hopper (vector reductions), 8.0 before.
// CHECK: .version 8.1
// CHECK: .target sm_90a
// SM80: .version 8.0
// SM80: .target sm_80
// The dynamic shared memory that holds Q_i, K_j, V_j and P: an extern
// symbol, the dynamic region's start (fa-extern-dynamic-shared).
// CHECK: .extern .shared .align 16 .b8 __dynamic_shmem__0[];
// The kernel entry with the memref descriptors of Q, K, V, O and LSE.
// CHECK: .visible .entry attention(
// CHECK-NEXT: .param .u64 {{.*}}attention_param_0
// CHECK: .maxntid 256, 1, 1
// Global -> shared tile copies between barriers.
// CHECK: ld.global
// CHECK: st.shared
// CHECK: bar.sync 0;
// S = Q K^T from shared memory with FMAs.
// CHECK: ld.shared
// CHECK: fma.rn.f32
// Row max and row sum across the lanes of a row.
// CHECK: shfl.sync.bfly.b32
// p = exp2(...): the hardware approximation.
// CHECK: ex2.approx.ftz.f32
// LSE = m + log2(l) * ln 2
// CHECK: lg2.approx.ftz.f32
// CHECK: st.global
func.func @attention(%q: memref<?x?x?x128xf32>, %k: memref<?x?x?x128xf32>,
                     %v: memref<?x?x?x128xf32>, %o: memref<?x?x?x128xf32>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32, mask = #fa.mask<causal>}
    : memref<?x?x?x128xf32>, memref<?x?x?x128xf32>, memref<?x?x?x128xf32>
    into memref<?x?x?x128xf32>, memref<?x?x?xf32>
  return
}
