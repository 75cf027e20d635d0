//===- MmaToGPU.h - Lowering of the mma strategy's programs -----*- C++ -*-===//
//
// The tensor-core strategy's half of fa-convert-placed-to-gpu: once a
// program placed by fa-place-mma has been outlined into a gpu.func, its
// tile ops become cp.async copies into shared-memory rings, ldmatrix,
// mma.sync m16n8k16 and per-fragment softmax arithmetic.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_CONVERSION_MMA_MMATOGPU_H
#define FA_COMPILER_CONVERSION_MMA_MMATOGPU_H

#include "compiler/Conversion/Common/FragmentTarget.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
class TypeConverter;
} // namespace mlir

namespace mlir::fa {

/// Lowers the fa ops of `kernel` (an outlined program of the mma strategy).
/// Emits a diagnostic and fails on IR it cannot lower.
LogicalResult lowerMmaKernel(gpu::GPUFuncOp kernel,
                             const FragmentTarget &target);

} // namespace mlir::fa

#endif // FA_COMPILER_CONVERSION_MMA_MMATOGPU_H
