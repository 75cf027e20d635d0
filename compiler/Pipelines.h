//===- Pipelines.h - Named stages of the fa compiler ---------------*- C++ -*-===//
//
// The one definition of each compilation stage, shared by fa-opt's
// registered pipelines, fa-compile, the CPU runner and the tests.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_PIPELINES_H
#define FA_COMPILER_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <cstdint>

namespace mlir::fa {

/// Tile sizes of the problem -> tile step.
struct TileOptions {
  int64_t blockM = 64;
  int64_t blockN = 64;
};

/// fa -> tiled: fa.attention becomes the tiled FlashAttention-2 algorithm.
void buildTilePipeline(OpPassManager &pm, const TileOptions &options);

/// tiled -> cpu-loops: tile ops become linalg on tensors, are bufferized and
/// become plain scf/memref/arith/math loops.
void buildCpuLoopsPipeline(OpPassManager &pm);

/// cpu-loops -> llvm: the LLVM dialect that the ExecutionEngine runs.
void buildCpuToLLVMPipeline(OpPassManager &pm);

/// All of the above: fa -> llvm for the CPU.
void buildCpuPipeline(OpPassManager &pm, const TileOptions &options);

/// Registers the pipelines above with the textual pass-pipeline parser
/// (fa-tile-pipeline, fa-cpu-loops, fa-cpu-to-llvm, fa-cpu-pipeline).
void registerPipelines();

} // namespace mlir::fa

#endif // FA_COMPILER_PIPELINES_H
