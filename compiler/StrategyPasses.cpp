//===- StrategyPasses.cpp - The compiler's half of each strategy ----------===//
//
// One entry a strategy: its placement pipeline and its kernel lowering
// (compiler/Placement/Place<Name>.cpp, compiler/Conversion/<Name>/).
//
//===----------------------------------------------------------------------===//

#include "compiler/StrategyPasses.h"
#include "compiler/Conversion/Mma/MmaToGPU.h"
#include "compiler/Conversion/Simt/SimtToGPU.h"
#include "compiler/Conversion/Wgmma/WgmmaToGPU.h"
#include "compiler/Passes.h"
#include "lib/Strategy/WgmmaModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::fa;

/// `alignedRows`: the strategy's runtime rules keep every tensor row
/// 16-byte aligned (the tensor-core strategies), so that the programs it
/// leaves to simt may copy in 16-byte chunks.
static void placeSimt(OpPassManager &pm, const GpuOptions &options,
                      bool alignedRows) {
  FAPlaceSimtOptions place;
  place.numWarps = options.numWarps;
  place.arch = options.arch;
  place.chunkedCopies = alignedRows;
  pm.addNestedPass<func::FuncOp>(createFAPlaceSimt(place));
}

static void placeSimt(OpPassManager &pm, const GpuOptions &options) {
  placeSimt(pm, options, /*alignedRows=*/false);
}

static LogicalResult lowerSimt(ArrayRef<gpu::GPUFuncOp> kernels,
                               const ::fa::GpuArch &) {
  SmallVector<Operation *> ops(kernels.begin(), kernels.end());
  return lowerSimtKernels(ops);
}

static void placeMma(OpPassManager &pm, const GpuOptions &options) {
  FAPlaceMmaOptions place;
  place.numWarps = options.numWarps;
  place.stages = options.stages;
  place.arch = options.arch;
  pm.addNestedPass<func::FuncOp>(createFAPlaceMma(place));
  // The programs mma leaves unplaced (the backward's memory-bound delta
  // and dq programs) run on the simt strategy.
  placeSimt(pm, options, /*alignedRows=*/true);
}

static LogicalResult lowerMma(ArrayRef<gpu::GPUFuncOp> kernels,
                              const ::fa::GpuArch &arch) {
  FragmentTarget target{arch.vectorReductions};
  for (gpu::GPUFuncOp kernel : kernels)
    if (failed(lowerMmaKernel(kernel, target)))
      return failure();
  return success();
}

static void placeWgmma(OpPassManager &pm, const GpuOptions &options) {
  FAPlaceWgmmaOptions place;
  place.numWarps = options.numWarps;
  place.stages = options.stages;
  place.arch = options.arch;
  place.transposedScores = options.transposedScores;
  place.rotatedStaging = options.rotatedStaging;
  place.stagedRowValues = options.stagedRowValues;
  place.exp2OnFmaEvery = ::fa::wgmma::kExp2OnFmaEvery;
  place.scoreModExp2OnFmaEvery = ::fa::wgmma::kScoreModExp2OnFmaEvery;
  place.producerTransposesValue = -1;
  place.skipUnitRescale = ::fa::wgmma::kSkipUnitRescale;
  pm.addNestedPass<func::FuncOp>(createFAPlaceWgmma(place));
  pm.addNestedPass<func::FuncOp>(createFAWgmmaPipeline());
  FAWarpSpecializeOptions specialize;
  specialize.writerWarpMode = ::fa::wgmma::kWriterWarp;
  pm.addNestedPass<func::FuncOp>(createFAWarpSpecialize(specialize));
  pm.addNestedPass<func::FuncOp>(createFATmaReduce());
  pm.addNestedPass<func::FuncOp>(createFAPrefetchRowValues());
  pm.addNestedPass<func::FuncOp>(createFAPingPong());
  // The programs wgmma leaves unplaced (the backward's memory-bound delta
  // and dq programs) run on the simt strategy.
  placeSimt(pm, options, /*alignedRows=*/true);
}

static LogicalResult lowerWgmma(ArrayRef<gpu::GPUFuncOp> kernels,
                                const ::fa::GpuArch &arch) {
  FragmentTarget target{arch.vectorReductions};
  for (gpu::GPUFuncOp kernel : kernels)
    if (failed(lowerWgmmaKernel(kernel, target)))
      return failure();
  return success();
}

ArrayRef<StrategyPasses> mlir::fa::registeredStrategyPasses() {
  static const StrategyPasses strategies[] = {
      {"wgmma", placeWgmma, lowerWgmma},
      {"mma", placeMma, lowerMma},
      {"simt", placeSimt, lowerSimt},
  };
  return strategies;
}

const StrategyPasses *mlir::fa::lookupStrategyPasses(StringRef name) {
  for (const StrategyPasses &strategy : registeredStrategyPasses())
    if (name == strategy.name)
      return &strategy;
  return nullptr;
}
