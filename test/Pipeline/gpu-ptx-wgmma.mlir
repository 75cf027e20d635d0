// REQUIRES: ptxas
// The wgmma strategy from the problem down to PTX (warp-specialized: TMA
// producer, wgmma consumers), f16 and bf16, and ptxas assembles it for
// sm_90a (the only target with wgmma and setmaxnreg).
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

// With fa-wgmma-pipeline's wait-after-softmax=1 the K/V loop's wait for
// P_{j-1} V_{j-1} stays after the softmax of tile j: a block boundary (a
// branch on the row sum, always taken) ends the softmax, since ptxas
// hoists a wgmma wait to the start of its block. The default (the model's
// kWaitAfterSoftmax, off until timed on a GPU) has no boundary.
// RUN: fa-compile %t.bf16.mlir --dtype=bf16 --strategy=wgmma --block-m=128 --block-n=128 --num-warps=8 --stages=2 --arch=sm_90a --emit=tiled -o %t.tiled.mlir
// RUN: fa-opt %t.tiled.mlir --fa-place-wgmma="num-warps=8 stages=2" --fa-wgmma-pipeline="wait-after-softmax=1" --fa-warp-specialize --fa-tma-reduce --fa-prefetch-row-values --fa-pingpong -o %t.after.mlir
// RUN: fa-compile %t.after.mlir --arch=sm_90a --emit=ptx -o %t.after.ptx
// RUN: FileCheck %s --check-prefix=ORDER --input-file=%t.after.ptx
// RUN: %ptxas -arch=sm_90a %t.after.ptx -o %t.after.cubin
// RUN: FileCheck %s --check-prefix=DEFAULT --input-file=%t.bf16.ptx
// DEFAULT-NOT: ROW_SUM_SEEN
// ORDER: ex2.approx
// ORDER: setp.neu.f32 ROW_SUM_SEEN, %r{{[0-9]+}}, 0fFF800000;
// ORDER-NEXT: @ROW_SUM_SEEN bra.uni AFTER_SOFTMAX;
// ORDER-NEXT: NEVER: bra.uni NEVER;
// ORDER-NEXT: AFTER_SOFTMAX:
// ORDER-NOT: ex2.approx
// ORDER: wgmma.wait_group.sync.aligned 0;
// ORDER-NEXT: // begin inline asm
// ORDER-NEXT: // end inline asm
// ORDER-NEXT: mbarrier.arrive.shared.b64
// ORDER-NEXT: mul.rn.f32

// CHECK: .target sm_90a
// The tiles live in the dynamic region, declared extern: its start follows
// the static mbarrier array below, and the tiles are aligned up from there
// (a static 1-byte base ptxas placed in front of the barriers made the Q
// tile cover them).
// CHECK: .extern .shared .align 16 .b8 __dynamic_shmem__0[];
// CHECK-NOT: .shared .align 16 .b8 __dynamic_shmem__0;
// The tensor maps of Q, K and V come first, by value (grid constants).
// CHECK: .visible .entry attention(
// CHECK-NEXT: .param .align 64 .b8 attention_param_0[128],
// CHECK-NEXT: .param .align 64 .b8 attention_param_1[128],
// CHECK-NEXT: .param .align 64 .b8 attention_param_2[128],
// Two consumer warpgroups and the producer warpgroup; one block per SM, so
// the kernel has a register cap at entry that setmaxnreg can move.
// CHECK: .maxntid 384, 1, 1
// CHECK-NEXT: .minnctapersm 1
// Prologue: thread 0 initializes the barriers (q_full, k_full[2],
// v_full[2]: one arrival; empty[2]: the 256 consumer threads).
// CHECK: mbarrier.init.shared.b64
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK-NEXT: bar.sync 0;
// The producer returns registers and issues TMA boxes (64 columns each)
// after announcing the bytes; its K/V loop waits for the released slot.
// CHECK: setmaxnreg.dec.sync.aligned.u32 40;
// CHECK-DAG: mbarrier.arrive.expect_tx.shared.b64
// CHECK-DAG: cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK-DAG: mbarrier.try_wait.parity.shared.b64
// The consumers take registers (168 at entry plus their share of the
// producer's 128: 232; the persistent schedule keeps the producer at 40),
// wait for their tiles, run the MMAs and release each slot. No block-wide
// barrier after the prologue.
// CHECK: setmaxnreg.inc.sync.aligned.u32 232;
// CHECK-NOT: bar.sync
// CHECK-DAG: mbarrier.try_wait.parity.shared.b64
// CHECK-DAG: wgmma.fence.sync.aligned;
// F16-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, p, 1, 1, 0, 0;
// F16-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, p, 1, 1, 1;
// BF16-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// BF16-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}, %rd{{[0-9]+}}, p, 1, 1, 1;
// CHECK-DAG: wgmma.commit_group.sync.aligned;
// CHECK-DAG: wgmma.wait_group.sync.aligned 0;
// CHECK-DAG: shfl.sync.bfly.b32
// CHECK-DAG: ex2.approx
// CHECK-DAG: mbarrier.arrive.shared.b64
// O in 16-byte stores, LSE in 32-bit ones.
// CHECK-DAG: st.global.v4.b32
// CHECK-DAG: st.global.b32
func.func @attention(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                     %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                     %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    into memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}
