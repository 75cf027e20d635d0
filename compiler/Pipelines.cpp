//===- Pipelines.cpp - Named stages of the fa compiler -------------*- C++ -*-===//
#include "compiler/Pipelines.h"
#include "compiler/StrategyPasses.h"
#include "lib/Strategy/Registry.h"
#include "compiler/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "lib/GpuTarget.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::fa;

void mlir::fa::buildTilePipeline(OpPassManager &pm,
                                 const TileOptions &options) {
  FATileOptions tile;
  tile.blockM = options.blockM;
  tile.blockN = options.blockN;
  tile.pageGather = options.pageGather;
  pm.addNestedPass<func::FuncOp>(createFATile(tile));
  FATileBackwardOptions tileBackward;
  tileBackward.blockM = options.blockM;
  tileBackward.blockN = options.blockN;
  pm.addNestedPass<func::FuncOp>(createFATileBackward(tileBackward));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::fa::buildCpuLoopsPipeline(OpPassManager &pm) {
  FALowerBlockMaskOptions blockMask;
  blockMask.target = "cpu";
  pm.addPass(createFALowerBlockMask(blockMask));
  pm.addNestedPass<func::FuncOp>(createFALowerTilesToLinalg());
  // f16/bf16 casts of whole tiles are arith ops on tensors.
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  // The online-softmax state is loop-carried; each step makes new tiles.
  bufferize.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::fa::buildCpuToLLVMPipeline(OpPassManager &pm) {
  // FP8 and bf16 conversions as integer arithmetic: no libcalls the JIT
  // lacks.
  pm.addPass(createFAExpandFloat8Casts());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::fa::buildCpuPipeline(OpPassManager &pm,
                                const TileOptions &options) {
  buildTilePipeline(pm, options);
  buildCpuLoopsPipeline(pm);
  buildCpuToLLVMPipeline(pm);
}

void mlir::fa::buildPlacePipeline(OpPassManager &pm,
                                  const GpuOptions &options) {
  // Callers name a registered strategy (registerPipelines checks the
  // option; the kernel compiler passes a resolved spec's).
  if (const StrategyPasses *strategy = lookupStrategyPasses(options.strategy))
    strategy->buildPlacement(pm, options);
}

void mlir::fa::buildGpuKernelPipeline(OpPassManager &pm,
                                      const GpuOptions &options) {
  FAConvertPlacedToGPUOptions lowering;
  lowering.arch = options.arch;
  pm.addPass(createFAConvertPlacedToGPU(lowering));
  // Block mask programs: kernels of the same gpu.module.
  pm.addPass(createFALowerBlockMask());
  // Before the canonicalizer, which rebuilds the marked branches.
  pm.nest<gpu::GPUModuleOp>().addNestedPass<gpu::GPUFuncOp>(
      createFAHoistCaptureLoads());
  // A score_mod's per-element conversions: one a row (CSE below).
  pm.nest<gpu::GPUModuleOp>().addNestedPass<gpu::GPUFuncOp>(
      createFASplitIndexToFloat());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.nest<gpu::GPUModuleOp>().addNestedPass<gpu::GPUFuncOp>(
      createFAElideRedundantBarriers());
  pm.nest<gpu::GPUModuleOp>().addNestedPass<gpu::GPUFuncOp>(
      createFACheckSharedBounds());
}

void mlir::fa::buildGpuToNVVMPipeline(OpPassManager &pm,
                                      const GpuOptions &options) {
  // Every math op becomes a PTX instruction or an LLVM intrinsic before
  // convert-gpu-to-nvvm, which would otherwise call libdevice (__nv_*): the
  // kernels must not depend on libdevice being installed where CUDA is.
  pm.addNestedPass<gpu::GPUModuleOp>(createFAMathToNVVMApprox());
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertMathToLLVMPass());
  pm.addPass(createSCFToControlFlowPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.arch;
  if (auto arch = ::fa::lookupGpuArch(options.arch))
    target.features = std::string(arch->ptxFeatures);
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  // ldmatrix and cp.async (mma strategy) before the memref descriptors of
  // their operands are lowered.
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertNVGPUToNVVMPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  // The dynamic shared base at the dynamic region's start, after the static
  // mbarriers (not a static variable in front of them).
  pm.addNestedPass<gpu::GPUModuleOp>(createFAExternDynamicShared());
  // NVVM ops built as inline PTX (mbarrier waits of the wgmma strategy).
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertNVVMToLLVMPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createFAMarkTensorMapParams());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::fa::buildNVVMToPtxPipeline(OpPassManager &pm) {
  pm.addPass(createFASerializeToPtx());
}

namespace {
struct GpuPipelineOptions : public PassPipelineOptions<GpuPipelineOptions> {
  Option<std::string> arch{*this, "arch",
                           llvm::cl::desc("target GPU architecture"),
                           llvm::cl::init("sm_90a")};
  Option<int64_t> numWarps{*this, "num-warps",
                           llvm::cl::desc("warps per block"),
                           llvm::cl::init(8)};
  Option<std::string> strategy{*this, "strategy",
                               llvm::cl::desc("simt | mma | wgmma"),
                               llvm::cl::init("simt")};
  Option<int64_t> stages{*this, "stages",
                         llvm::cl::desc("K/V tiles in flight (mma)"),
                         llvm::cl::init(2)};
  Option<int64_t> transposedScores{
      *this, "transposed-scores",
      llvm::cl::desc("the wgmma backward computes S^T and dP^T (-1: where "
                     "the resource model says so, 0: never, 1: always)"),
      llvm::cl::init(-1)};
  Option<std::string> rotatedStaging{
      *this, "rotated-staging",
      llvm::cl::desc("the wgmma backward's stagings that rotate between two "
                     "buffers: none | grad-scores | both | model"),
      llvm::cl::init("model")};
  Option<int64_t> stagedRowValues{
      *this, "staged-row-values",
      llvm::cl::desc("the wgmma backward's LSE and D through shared memory "
                     "beside Q (-1: where the resource model says so, 0: "
                     "never, 1: always)"),
      llvm::cl::init(-1)};
  GpuOptions get() const {
    return {arch,           numWarps,       strategy, stages, transposedScores,
            rotatedStaging, stagedRowValues};
  }
};

struct TilePipelineOptions : public PassPipelineOptions<TilePipelineOptions> {
  Option<int64_t> blockM{*this, "block-m",
                         llvm::cl::desc("query rows per tile (B_r)"),
                         llvm::cl::init(64)};
  Option<int64_t> blockN{*this, "block-n",
                         llvm::cl::desc("key/value rows per tile (B_c)"),
                         llvm::cl::init(64)};
  Option<bool> pageGather{
      *this, "page-gather",
      llvm::cl::desc("read a paged cache's K/V tiles row by row"),
      llvm::cl::init(false)};
  TileOptions get() const { return {blockM, blockN, pageGather}; }
};
/// Registers a pipeline over GpuPipelineOptions whose strategy option must
/// name a registered strategy: an unknown name is an error that lists them
/// (never a silent default).
void registerGpuPipeline(StringRef name, StringRef description,
                         void (*build)(OpPassManager &, const GpuOptions &)) {
  registerPassPipeline(
      name, description,
      [build](OpPassManager &pm, StringRef text,
              function_ref<LogicalResult(const Twine &)> errorHandler) {
        GpuPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (!lookupStrategyPasses(options.strategy))
          return errorHandler("unknown strategy '" + options.strategy +
                              "'; expected one of " +
                              ::fa::strategyNames(/*withAuto=*/false));
        build(pm, options.get());
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(GpuPipelineOptions());
      });
}

} // namespace

void mlir::fa::registerPipelines() {
  PassPipelineRegistration<TilePipelineOptions>(
      "fa-tile-pipeline", "fa -> tiled (fa-tile, canonicalize, cse)",
      [](OpPassManager &pm, const TilePipelineOptions &options) {
        buildTilePipeline(pm, options.get());
      });
  PassPipelineRegistration<>("fa-cpu-loops",
                             "tiled -> plain scf/memref/arith/math loops",
                             buildCpuLoopsPipeline);
  PassPipelineRegistration<>("fa-cpu-to-llvm",
                             "CPU loops -> LLVM dialect",
                             buildCpuToLLVMPipeline);
  PassPipelineRegistration<TilePipelineOptions>(
      "fa-cpu-pipeline", "fa -> LLVM dialect for CPU execution",
      [](OpPassManager &pm, const TilePipelineOptions &options) {
        buildCpuPipeline(pm, options.get());
      });
  registerGpuPipeline("fa-place-pipeline",
                      "tiled -> placed (strategy=simt|mma|wgmma)",
                      buildPlacePipeline);
  registerGpuPipeline("fa-gpu-kernel", "placed -> gpu.module kernels",
                      buildGpuKernelPipeline);
  registerGpuPipeline("fa-gpu-to-nvvm",
                      "gpu -> NVVM/LLVM dialect with the target attached",
                      buildGpuToNVVMPipeline);
  PassPipelineRegistration<>("fa-nvvm-to-ptx",
                             "NVVM/LLVM dialect -> PTX in a gpu.binary",
                             buildNVVMToPtxPipeline);
}
