//===- SerializeToPtx.cpp - NVVM gpu.module -> PTX gpu.binary -------*- C++ -*-===//
//
// MLIR's own NVVM serializer always looks for libdevice in a CUDA toolkit and
// reports an error where none is found, although fa kernels never call it.
// This pass drives the same LLVM machinery (ModuleToObject) without that
// lookup, and turns an accidental libdevice dependency into a clear error.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Target/LLVM/ModuleToObject.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FASERIALIZETOPTX
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;

namespace {

/// LLVM IR of one gpu.module -> PTX text, with nothing linked in.
class PtxSerializer : public LLVM::ModuleToObject {
public:
  PtxSerializer(gpu::GPUModuleOp module, NVVM::NVVMTargetAttr target)
      : ModuleToObject(*module, target.getTriple(), target.getChip(),
                       target.getFeatures(), target.getO()) {}

protected:
  /// LLVM's default pipeline at the target's level (as ModuleToObject runs
  /// it), without the SLP vectorizer: on these kernels it vectorizes nothing
  /// that reaches the PTX (byte-identical output on every kernel of
  /// scripts/ptx-snapshot.sh) and took a third of the pipeline's time.
  LogicalResult optimizeModule(llvm::Module &module, int optLevel) override {
    if (optLevel < 0 || optLevel > 3)
      return getOperation().emitError() << "invalid LLVM optimization level "
                                        << optLevel << " (expected 0 to 3)";
    FailureOr<llvm::TargetMachine *> machine = getOrCreateTargetMachine();
    if (failed(machine))
      return getOperation().emitError()
             << "no NVPTX target machine for " << triple << " " << chip;
    (*machine)->setOptLevel(static_cast<llvm::CodeGenOptLevel>(optLevel));
    llvm::PipelineTuningOptions tuning;
    tuning.LoopUnrolling = true;
    tuning.LoopInterleaving = true;
    tuning.LoopVectorization = true;
    tuning.SLPVectorization = false;
    llvm::LoopAnalysisManager loops;
    llvm::FunctionAnalysisManager functions;
    llvm::CGSCCAnalysisManager sccs;
    llvm::ModuleAnalysisManager modules;
    llvm::PassBuilder builder(*machine, tuning);
    builder.registerModuleAnalyses(modules);
    builder.registerCGSCCAnalyses(sccs);
    builder.registerFunctionAnalyses(functions);
    builder.registerLoopAnalyses(loops);
    builder.crossRegisterProxies(loops, functions, sccs, modules);
    const llvm::OptimizationLevel levels[] = {
        llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
        llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
    llvm::ModulePassManager pipeline =
        optLevel == 0 ? builder.buildO0DefaultPipeline(levels[0])
                      : builder.buildPerModuleDefaultPipeline(levels[optLevel]);
    pipeline.run(module, modules);
    return success();
  }

  FailureOr<SmallVector<char, 0>>
  moduleToObject(llvm::Module &llvmModule) override {
    FailureOr<llvm::TargetMachine *> machine = getOrCreateTargetMachine();
    if (failed(machine))
      return getOperation().emitError()
             << "no NVPTX target machine for " << triple << " " << chip;
    FailureOr<SmallString<0>> ptx = translateModuleToISA(
        llvmModule, **machine, [&] { return getOperation().emitError(); });
    if (failed(ptx))
      return failure();
    return SmallVector<char, 0>(ptx->begin(), ptx->end());
  }
};

/// The first function the module declares but does not define, if any.
LLVM::LLVMFuncOp findExternalFunction(gpu::GPUModuleOp module) {
  for (auto func : module.getOps<LLVM::LLVMFuncOp>())
    if (func.isExternal())
      return func;
  return {};
}

struct FASerializeToPtxPass
    : public mlir::fa::impl::FASerializeToPtxBase<FASerializeToPtxPass> {
  void runOnOperation() override {
    static llvm::once_flag initializeNVPTX;
    llvm::call_once(initializeNVPTX, [] {
      LLVMInitializeNVPTXTargetInfo();
      LLVMInitializeNVPTXTarget();
      LLVMInitializeNVPTXTargetMC();
      LLVMInitializeNVPTXAsmPrinter();
    });
    SmallVector<gpu::GPUModuleOp> modules(
        getOperation().getOps<gpu::GPUModuleOp>());
    for (gpu::GPUModuleOp module : modules)
      if (failed(serialize(module)))
        return signalPassFailure();
  }

  LogicalResult serialize(gpu::GPUModuleOp module) {
    ArrayAttr targets = module.getTargetsAttr();
    if (!targets || targets.size() != 1 ||
        !isa<NVVM::NVVMTargetAttr>(targets[0]))
      return module.emitError(
          "expected exactly one #nvvm.target on the gpu.module");
    auto target = cast<NVVM::NVVMTargetAttr>(targets[0]);
    if (LLVM::LLVMFuncOp external = findExternalFunction(module))
      return external.emitError()
             << "kernel calls the external function '" << external.getName()
             << "'; generated kernels must not need libdevice (lower the op "
                "that produced it to a PTX instruction or LLVM intrinsic)";

    std::optional<SmallVector<char, 0>> ptx =
        PtxSerializer(module, target).run();
    if (!ptx)
      return module.emitError("the NVPTX back end produced no PTX");

    OpBuilder builder(module);
    auto object = gpu::ObjectAttr::get(
        target, gpu::CompilationTarget::Assembly,
        builder.getStringAttr(StringRef(ptx->data(), ptx->size())));
    gpu::BinaryOp::create(builder, module.getLoc(), module.getName(),
                          /*offloadingHandler=*/nullptr,
                          ArrayRef<Attribute>{object});
    module.erase();
    return success();
  }
};

} // namespace
