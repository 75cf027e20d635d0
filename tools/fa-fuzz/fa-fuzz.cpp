//===- fa-fuzz.cpp - libFuzzer target: arbitrary IR through the pipelines -===//
//
// Parses the input as MLIR (fa, tiled or placed IR); when it verifies,
// lowers it from the stage it is at down to PTX with every strategy that
// takes its problem (as fa-compile would). The invariant under test, MLIR's: no input makes a pass crash, hang
// or trip a sanitizer; invalid input gets diagnostics. Seeds: the lit tests.
// Half of the mutations edit the input as IR (IRMutator.h: a dimension
// changed everywhere, element types and encodings swapped, boundary
// values, line edits), half are libFuzzer's byte edits.
//
//   fa-fuzz corpus/ test/Dialect test/Transforms test/Conversion ...
//
//===----------------------------------------------------------------------===//

#include "compiler/KernelCompiler.h"
#include "dialect/FAOps.h"
#include "lib/KernelSpec.h"
#include "lib/Strategy/Registry.h"
#include "lib/Strategy/SpecRules.h"
#include "lib/TextNesting.h"
#include "tools/fa-fuzz/IRMutator.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>

using namespace mlir;
using namespace mlir::fa;

namespace {

/// The problem fa-compile reads from an input module.
void readProblem(ModuleOp module, ::fa::KernelSpec &spec) {
  if (std::optional<ProblemType> problem = readProblemType(module)) {
    spec.headDim = problem->headDim;
    spec.dtype = problem->dtype;
  }
  module.walk([&](AttentionOp op) { spec.sinks = op.getSinks() != nullptr; });
  module.walk([&](AttentionBackwardOp op) {
    spec.backward = true;
    spec.deterministic = op.getDqOrder() != nullptr;
    spec.dqChains = op.getDqChains();
    spec.sinks = op.getSinks() != nullptr;
  });
}

} // namespace

/// LLVM's headers poison allocator slabs in code built with ASan while
/// libMLIR.so, uninstrumented, allocates from the same slabs without
/// unpoisoning: ignore manual poisoning (no false use-after-poison).
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size,
                                   size_t maxSize);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  std::mt19937 rng(seed);
  if (rng() % 2)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::string text(reinterpret_cast<const char *>(data), size);
  auto mutation = ::fa::fuzz::IRMutation(rng() % ::fa::fuzz::numIRMutations);
  if (!::fa::fuzz::mutateIR(text, mutation, rng) || text.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, text.data(), text.size());
  return text.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // One context for many inputs (creating one costs more than most runs);
  // a fresh one now and then bounds the uniqued types and attributes.
  static std::unique_ptr<MLIRContext> context;
  static int uses = 0;
  if (!context || ++uses % 256 == 0)
    context = createCompilerContext();
  ScopedDiagnosticHandler quiet(context.get(),
                                [](Diagnostic &) { return success(); });
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  // The target is the fa dialect and its pipelines: IR at the fa, tiled and
  // placed stages. Inputs with upstream GPU/LLVM dialect syntax only fuzz
  // upstream parsers, one of which (MLIR 22.1.8) overflows a heap buffer
  // on a truncated `#gpu.` attribute name; they are skipped.
  for (const char *upstream : {"gpu.", "llvm.", "nvvm.", "nvgpu."})
    if (text.contains(upstream))
      return 0;
  // The tools refuse input the parser cannot take (nesting deeper than its
  // recursion takes, dense arrays of index elements).
  if (!::fa::checkTextBeforeParsing(text, "input").empty())
    return 0;
  // The tools parse NUL-terminated file buffers; so does the target. (A run
  // of this session caught MLIR 22.1.8's parser reading 18 bytes past the
  // end of an unterminated input that ends in an unknown bare identifier;
  // the padding keeps such upstream over-reads inside the copy.)
  std::string terminated(text.str());
  terminated.append(64, '\0');
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      llvm::StringRef(terminated.data(), size), ParserConfig(context.get()));
  if (!module || failed(verify(*module)))
    return 0;
  FailureOr<Stage> stage = detectStage(*module);
  if (failed(stage) || *stage > Stage::llvm)
    return 0;
  ::fa::KernelSpec problem;
  readProblem(*module, problem);
  for (const ::fa::StrategyModel *model : ::fa::registeredStrategies()) {
    ::fa::Strategy strategy = model->kind;
    ::fa::KernelSpec spec = problem;
    spec.strategy = strategy;
    spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
    if (strategy == ::fa::Strategy::simt && !spec.backward) {
      spec.blockM = 8;
      spec.blockN = 32;
      spec.numWarps = 8;
      spec.stages = 1;
    }
    if (!validateSpec(spec).empty())
      continue;
    spec = withDefaults(spec);
    OwningOpRef<ModuleOp> copy = module->clone();
    if (succeeded(lowerModule(*copy, *stage, Stage::llvm, spec, {})))
      (void)emitPtx(*copy);
  }
  return 0;
}
