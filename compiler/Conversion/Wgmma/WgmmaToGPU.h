//===- WgmmaToGPU.h - Lowering of the wgmma strategy's programs -*- C++ -*-===//
//
// The Hopper strategy's half of fa-convert-placed-to-gpu: once a program
// placed by fa-place-wgmma has been outlined into a gpu.func, its tile ops
// become cp.async copies into 128-byte-swizzled shared rings,
// wgmma.mma_async on shared-memory descriptors and register fragments, and
// per-fragment softmax arithmetic.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_CONVERSION_WGMMA_WGMMATOGPU_H
#define FA_COMPILER_CONVERSION_WGMMA_WGMMATOGPU_H

#include "compiler/Conversion/Common/FragmentTarget.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::fa {

/// Lowers the fa ops of `kernel` (an outlined program of the wgmma
/// strategy). Emits a diagnostic and fails on IR it cannot lower.
LogicalResult lowerWgmmaKernel(gpu::GPUFuncOp kernel,
                               const FragmentTarget &target);

} // namespace mlir::fa

#endif // FA_COMPILER_CONVERSION_WGMMA_WGMMATOGPU_H
