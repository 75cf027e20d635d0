// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=3" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=3 staged-row-values=0" | FileCheck %s --check-prefix=REGS
// RUN: fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=3 transposed-scores=1" | FileCheck %s --check-prefix=TRANSPOSED
// RUN: not fa-opt %s --split-input-file --fa-tile-backward="block-m=64 block-n=128" --fa-place-wgmma="num-warps=8 stages=3 staged-row-values=2" 2>&1 | FileCheck %s --check-prefix=BAD

// The dkdv program's row values, LSE_i and D_i (64 floats a query tile),
// come through shared memory where the model says so
// (WgmmaModel::stagesRowValues): each loads into a ring of a slot per Q/dO
// stage (#fa.shared, fa.pipeline_stages = 3) after dQ's staging, which
// fa-warp-specialize's producer fills with Q's slot, and each thread reads
// its rows (fa.convert_layout into S's row slots) at once, so that the
// reads pass behind the products before their first use. D = 64, three
// stages: dQ's staging at 131072 (16384 bytes), the LSE
// ring at 147456, the D ring at 147456 + 3 x 256.
// CHECK-LABEL: func @backward_d64
// CHECK: scf.for
// CHECK: %[[LSES:.*]] = fa.load_tile %arg5{{.*}} {fa.pipeline_stages = 3 : i64, fa.shared_offset = 147456 : i64} : memref<?x?x?xf32> -> tensor<64xf32, #fa.shared<pad = 0>>
// CHECK-NEXT: %[[LSE:.*]] = fa.convert_layout %[[LSES]] : tensor<64xf32, #fa.shared<pad = 0>> -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// CHECK-NEXT: %[[DSH:.*]] = fa.load_tile %arg9{{.*}} {fa.pipeline_stages = 3 : i64, fa.shared_offset = 148224 : i64} : memref<?x?x?xf32> -> tensor<64xf32, #fa.shared<pad = 0>>
// CHECK-NEXT: %[[D:.*]] = fa.convert_layout %[[DSH]] : tensor<64xf32, #fa.shared<pad = 0>> -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// CHECK-NOT: fa.prefetch
// CHECK: fa.recompute_probs %{{.*}}, %[[LSE]]
// CHECK: fa.softmax_grad %{{.*}}, %{{.*}}, %[[D]]
// The launch counts the rings and the swizzle's 1024-byte slack.
// CHECK: shared_bytes = 150016, stages = 3

// staged-row-values=0: registers, loaded ahead (fa.prefetch) at D = 64.
// REGS-LABEL: func @backward_d64
// REGS: fa.load_tile %arg5{{.*}} {fa.prefetch} : memref<?x?x?xf32> -> tensor<64xf32, #fa.mma<warps = 8, warps_n = 2, rows_first = 1>>
// REGS-NOT: #fa.shared<pad = 0>
// REGS: shared_bytes = 148480, stages = 3

// Transposed scores keep them in registers (16 rows a thread).
// TRANSPOSED-LABEL: func @backward_d64
// TRANSPOSED-NOT: #fa.shared<pad = 0>
// TRANSPOSED: program = "dkdv"

// BAD: staged-row-values must be -1 (the model), 0 or 1, got 2
func.func @backward_d64(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                        %o: memref<?x?x?x64xf16>, %do: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>,
                        %dq: memref<?x?x?x64xf16>, %dk: memref<?x?x?x64xf16>, %dv: memref<?x?x?x64xf16>,
                        %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x64xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.125 : f32}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>,
      memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
    into memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x64xf32>
  return
}

// -----

// D = 128 with three stages: the rings fit beside them (231936 of the
// 232432 bytes).
// CHECK-LABEL: func @backward_d128
// CHECK: fa.load_tile %arg5{{.*}} {fa.pipeline_stages = 3 : i64, fa.shared_offset = 229376 : i64} : memref<?x?x?xf32> -> tensor<64xf32, #fa.shared<pad = 0>>
// CHECK: shared_bytes = 231936, stages = 3
// REGS-LABEL: func @backward_d128
// TRANSPOSED-LABEL: func @backward_d128
func.func @backward_d128(%q: memref<?x?x?x128xbf16>, %k: memref<?x?x?x128xbf16>, %v: memref<?x?x?x128xbf16>,
                         %o: memref<?x?x?x128xbf16>, %do: memref<?x?x?x128xbf16>, %lse: memref<?x?x?xf32>,
                         %dq: memref<?x?x?x128xbf16>, %dk: memref<?x?x?x128xbf16>, %dv: memref<?x?x?x128xbf16>,
                         %delta: memref<?x?x?xf32>, %accum: memref<?x?x?x128xf32>) {
  fa.attention_backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv workspace %delta, %accum
      {scale = 0.0883883461 : f32}
    : memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>,
      memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?xf32>
    into memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>, memref<?x?x?x128xbf16>
    workspace memref<?x?x?xf32>, memref<?x?x?x128xf32>
  return
}
