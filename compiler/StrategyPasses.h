//===- StrategyPasses.h - The compiler's half of each strategy --*- C++ -*-===//
//
// What the compiler runs for a strategy, found by the strategy's name (the
// name of its lib/Strategy/Registry.h entry and of its fa.launch kind): the
// passes that place a tiled program (tiled -> placed) and the lowering of
// the kernels it placed (fa-convert-placed-to-gpu). Pipelines and the
// conversion ask this table; nothing else names a strategy.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_STRATEGYPASSES_H
#define FA_COMPILER_STRATEGYPASSES_H

#include "compiler/Pipelines.h"
#include "lib/GpuTarget.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::fa {

struct StrategyPasses {
  const char *name;
  /// tiled -> placed: the strategy's placement and schedule passes.
  void (*buildPlacement)(OpPassManager &pm, const GpuOptions &options);
  /// Lowers the outlined kernels whose fa.launch names this strategy; emits
  /// a diagnostic and fails on IR it cannot lower.
  LogicalResult (*lowerKernels)(ArrayRef<gpu::GPUFuncOp> kernels,
                                const ::fa::GpuArch &arch);
};

/// Every strategy's passes, in registry order.
ArrayRef<StrategyPasses> registeredStrategyPasses();
/// The passes of the strategy named `name`, or null.
const StrategyPasses *lookupStrategyPasses(StringRef name);

} // namespace mlir::fa

#endif // FA_COMPILER_STRATEGYPASSES_H
