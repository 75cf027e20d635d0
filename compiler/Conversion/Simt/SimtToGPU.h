//===- SimtToGPU.h - Lowering of the simt strategy's programs ---*- C++ -*-===//
//
// The SIMT strategy's half of fa-convert-placed-to-gpu: once programs placed
// by fa-place-simt have been outlined into gpu.func kernels, their tile ops
// become per-thread loops over #fa.blocked elements, shared-memory copies
// between barriers and warp shuffles.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_CONVERSION_SIMT_SIMTTOGPU_H
#define FA_COMPILER_CONVERSION_SIMT_SIMTTOGPU_H

#include "mlir/IR/Operation.h"

namespace mlir::fa {

/// Lowers the fa ops of `kernels` (outlined programs of the simt strategy).
/// Emits a diagnostic and fails on IR it cannot lower.
LogicalResult lowerSimtKernels(ArrayRef<Operation *> kernels);

} // namespace mlir::fa

#endif // FA_COMPILER_CONVERSION_SIMT_SIMTTOGPU_H
