//===- KernelCompiler.h - From a kernel spec to PTX and cubin ------*- C++ -*-===//
//
// The in-process compiler entry point: the same staged pipeline for
// fa-compile, the runtime's JIT and the tests. Only ptxas runs as a
// subprocess.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_KERNELCOMPILER_H
#define FA_COMPILER_KERNELCOMPILER_H

#include "lib/CudaToolkit.h"
#include "lib/KernelSpec.h"
#include "lib/LaunchPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::fa {

/// The stages of the pipeline, in order.
enum class Stage { fa, tiled, placed, gpu, llvm, ptx, cubin };

const char *stageName(Stage stage);
std::optional<Stage> parseStage(llvm::StringRef name);
/// "fa|tiled|placed|gpu|llvm|ptx|cubin"
std::string stageNames();

/// The problem-level module of a spec: func @<kernel name>(Q, K, V, O, LSE)
/// holding one fa.attention, or for a backward spec func @<kernel name>(Q,
/// K, V, O, dO, LSE, dQ, dK, dV, delta, dq_accum) holding one
/// fa.attention_backward. A variant's regions are parsed from the spec's
/// texts; null, with the diagnostics emitted, when they do not parse or
/// verify.
OwningOpRef<ModuleOp> buildAttentionModule(MLIRContext &ctx,
                                           const ::fa::KernelSpec &spec);

/// The captured tensors of the (one) attention op of a problem-level
/// module: the kernel's last parameters, in order.
std::vector<::fa::CaptureType> captureTypesOf(ModuleOp module);

/// Which stage an IR module is at (to resume compilation from a file).
FailureOr<Stage> detectStage(ModuleOp module);

/// The problem of an input module: head dim and element type of its
/// kernel's first 4-d memref argument with a static head dim (Q), at any
/// stage that has one.
struct ProblemType {
  int64_t headDim;
  ::fa::ElementType dtype;
};
std::optional<ProblemType> readProblemType(ModuleOp module);

/// Lowers `module` from stage `from` to stage `to` (at most Stage::llvm);
/// `onStage` sees the module after each stage. Errors are emitted as MLIR
/// diagnostics.
LogicalResult lowerModule(ModuleOp module, Stage from, Stage to,
                          const ::fa::KernelSpec &spec,
                          llvm::function_ref<void(Stage, ModuleOp)> onStage);

/// The PTX of a module at the llvm stage (runs LLVM's NVPTX back end).
FailureOr<std::string> emitPtx(ModuleOp module);

/// A compiled kernel and what it takes to launch it.
struct CompiledKernel {
  std::string name;
  std::string ptx;
  std::vector<char> cubin;                     // empty unless assembled
  std::vector<::fa::KernelResources> resources; // from ptxas -v
  /// How the runtime launches it: one launch per kernel of the module, in
  /// the order they run (the forward has one, the backward three).
  std::vector<::fa::LaunchPlan> launches;
  ::fa::CompileSeconds seconds; // assemble: 0 unless assembled
};

/// The launches of the kernels of a module at the gpu or llvm stage, in
/// module order, with what their launch attributes say: entry point,
/// threads, dynamic shared memory, tensor maps (grid and parameters are
/// the caller's to fill).
FailureOr<std::vector<::fa::LaunchPlan>> readKernelLaunches(ModuleOp module);

/// spec -> PTX, and -> cubin + resource report with `assemble`.
llvm::Expected<CompiledKernel> compileKernel(const ::fa::KernelSpec &spec,
                                             bool assemble);

/// What the ranking of default tiles reads in `spec`'s variant texts
/// (::fa::defaultCandidates' traits). An invalid spec and a text that
/// does not parse give no traits (validateSpec and the compile name the
/// error).
::fa::VariantTraits variantTraits(const ::fa::KernelSpec &spec);

/// A context with every dialect and interface the pipeline needs.
std::unique_ptr<MLIRContext> createCompilerContext();

} // namespace mlir::fa

#endif // FA_COMPILER_KERNELCOMPILER_H
