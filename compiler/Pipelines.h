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
#include <string>

namespace mlir::fa {

/// Tile sizes of the problem -> tile step.
struct TileOptions {
  int64_t blockM = 64;
  int64_t blockN = 64;
  /// A paged cache read row by row (fa-tile's page-gather).
  bool pageGather = false;
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

/// Options of the GPU stages.
struct GpuOptions {
  std::string arch = "sm_90a";
  int64_t numWarps = 8;
  /// "simt", "mma" or "wgmma": which placement pass runs.
  std::string strategy = "simt";
  /// K/V tiles in flight (mma).
  int64_t stages = 2;
  /// The wgmma backward's transposed scores (fa-place-wgmma's option): -1
  /// where the resource model says so, 0 never, 1 always.
  int64_t transposedScores = -1;
  /// The wgmma backward's rotated stagings (fa-place-wgmma's option):
  /// "model", "none", "grad-scores" or "both".
  std::string rotatedStaging = "model";
  /// The wgmma backward's LSE and D through shared memory (fa-place-wgmma's
  /// staged-row-values): -1 the model, 0 never, 1 always.
  int64_t stagedRowValues = -1;
};

/// tiled -> placed: every tile gets a home (fa-place-simt, fa-place-mma or
/// fa-place-wgmma).
void buildPlacePipeline(OpPassManager &pm, const GpuOptions &options);

/// placed -> gpu: gpu.module with one gpu.func kernel per program, lowered
/// for `options.arch`.
void buildGpuKernelPipeline(OpPassManager &pm, const GpuOptions &options);

/// gpu -> llvm: NVVM/LLVM dialect inside the gpu.module, target attached.
void buildGpuToNVVMPipeline(OpPassManager &pm, const GpuOptions &options);

/// llvm -> ptx: fa-serialize-to-ptx (LLVM's NVPTX back end, nothing linked);
/// the PTX text ends up in a gpu.binary.
void buildNVVMToPtxPipeline(OpPassManager &pm);

/// Registers the pipelines above with the textual pass-pipeline parser
/// (fa-tile-pipeline, fa-cpu-loops, fa-cpu-to-llvm, fa-cpu-pipeline,
/// fa-place-pipeline, fa-gpu-kernel, fa-gpu-to-nvvm, fa-nvvm-to-ptx).
void registerPipelines();

} // namespace mlir::fa

#endif // FA_COMPILER_PIPELINES_H
