// RUN: fa-opt %s --fa-tile="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 producer-transposes-value=1" | FileCheck %s --check-prefix=PRODUCER
// RUN: fa-opt %s --fa-tile="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 producer-transposes-value=0" | FileCheck %s --check-prefix=CONSUMERS
// By default (-1) WgmmaModel's producerTransposesValue decides: head dim
// 128 with two or more stages (one stage would wait on itself).
// RUN: fa-opt %s --fa-tile="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2" | FileCheck %s --check-prefix=PRODUCER
// RUN: fa-opt %s --fa-tile="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=1" | FileCheck %s --check-prefix=ONE-STAGE
// RUN: not fa-opt %s --fa-tile="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 producer-transposes-value=2" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not fa-opt %s --fa-tile="block-m=128 block-n=128" --fa-place-wgmma="num-warps=8 stages=2 rotated-staging=dS" 2>&1 | FileCheck %s --check-prefix=BAD-ROTATION

// 8-bit V reaches P V through a transposed copy. fa-place-wgmma decides who
// writes it: the producer warpgroup, once per tile for both consumer
// warpgroups (fa.producer_writes, which fa-warp-specialize carries out), or
// each consumer warpgroup its own.
// PRODUCER-LABEL: func.func @float8_d128
// PRODUCER: %[[V:.*]] = fa.load_tile {{.*}}fa.shared_offset = 49152 : i64} {{.*}} -> tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128>>
// PRODUCER: fa.convert_layout %[[V]] {fa.producer_writes, fa.shared_offset = 81920 : i64} : {{.*}} -> tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
// CONSUMERS-LABEL: func.func @float8_d128
// CONSUMERS-NOT: fa.producer_writes
// CONSUMERS: fa.convert_layout %{{.*}} {fa.shared_offset = 81920 : i64} : {{.*}} -> tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
// CONSUMERS-NOT: fa.producer_writes
// ONE-STAGE-NOT: fa.producer_writes
// ONE-STAGE: fa.convert_layout %{{.*}} {fa.shared_offset = {{[0-9]+}} : i64} : {{.*}} -> tensor<128x128xf8E4M3FN, #fa.swizzled_shared<bytes = 128, transposed = true>>
// ONE-STAGE-NOT: fa.producer_writes
// BAD: producer-transposes-value must be -1 (the model), 0 or 1, got 2
// A backward option's bad value is refused in a forward program too.
// BAD-ROTATION: rotated-staging must be none, grad-scores, both or model, got 'dS'
func.func @float8_d128(%q: memref<?x?x?x128xf8E4M3FN>, %k: memref<?x?x?x128xf8E4M3FN>, %v: memref<?x?x?x128xf8E4M3FN>, %o: memref<?x?x?x128xbf16>, %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v into %o, %lse {scale = 0.088388 : f32}
    : memref<?x?x?x128xf8E4M3FN>, memref<?x?x?x128xf8E4M3FN>, memref<?x?x?x128xf8E4M3FN> into memref<?x?x?x128xbf16>, memref<?x?x?xf32>
  return
}
