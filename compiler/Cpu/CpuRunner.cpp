//===- CpuRunner.cpp - Run fa.attention on the CPU ------------------*- C++ -*-===//
#include "compiler/Cpu/CpuRunner.h"
#include "compiler/Passes.h"
#include "compiler/KernelCompiler.h"
#include "dialect/FAOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/TargetSelect.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

using namespace mlir;
using namespace mlir::fa;

namespace {

/// The spec of the problem-level kernel the CPU runner compiles.
::fa::KernelSpec toSpec(const CpuKernelConfig &config) {
  ::fa::KernelSpec spec;
  spec.headDim = config.headDim;
  spec.dtype = config.dtype;
  spec.causal = config.causal;
  spec.blockM = config.tiles.blockM;
  spec.blockN = config.tiles.blockN;
  spec.scale = config.scale;
  spec.backward = config.backward;
  spec.deterministic = config.deterministic;
  spec.scoreMod = config.scoreMod;
  spec.maskMod = config.maskMod;
  spec.sinks = config.sinks;
  return spec;
}

/// A descriptor over contiguous host memory; the element type only sets the
/// descriptor's pointer type, which the ABI does not see.
template <int Rank>
StridedMemRefType<char, Rank> contiguous(const void *data,
                                         std::array<int64_t, Rank> sizes) {
  StridedMemRefType<char, Rank> desc;
  // The kernel only reads inputs; the descriptor type has no const.
  desc.basePtr = desc.data = static_cast<char *>(const_cast<void *>(data));
  desc.offset = 0;
  int64_t stride = 1;
  for (int d = Rank - 1; d >= 0; --d) {
    desc.sizes[d] = sizes[d];
    desc.strides[d] = stride;
    stride *= sizes[d];
  }
  return desc;
}
} // namespace

CpuAttentionKernel::CpuAttentionKernel(CpuKernelConfig config,
                                       std::string entryName,
                                       std::unique_ptr<ExecutionEngine> engine)
    : config(config), entryName(std::move(entryName)),
      engine(std::move(engine)) {}

CpuAttentionKernel::~CpuAttentionKernel() = default;

llvm::Expected<std::unique_ptr<CpuAttentionKernel>>
CpuAttentionKernel::compile(const CpuKernelConfig &config) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  if (!(config.scale > 0.0f) || !std::isfinite(config.scale))
    return llvm::createStringError(
        "softmax scale must be positive and finite, got " +
        std::to_string(config.scale));
  std::unique_ptr<MLIRContext> ctx = createCompilerContext();
  std::string diagnostics;
  llvm::raw_string_ostream diagStream(diagnostics);
  ScopedDiagnosticHandler handler(ctx.get(), [&](Diagnostic &diag) {
    diagStream << diag.getLocation() << ": " << diag << "\n";
    return success();
  });

  // The same problem-level kernel the GPU path compiles, with a C wrapper
  // for the ExecutionEngine.
  ::fa::KernelSpec spec = toSpec(config);
  OwningOpRef<ModuleOp> module = buildAttentionModule(*ctx, spec);
  if (!module)
    return llvm::createStringError("invalid attention variant: " +
                                   diagnostics);
  module->walk([&](func::FuncOp func) {
    func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  UnitAttr::get(ctx.get()));
  });
  if (failed(verify(*module)))
    return llvm::createStringError("invalid attention kernel: " + diagnostics);
  PassManager pm(ctx.get());
  buildCpuPipeline(pm, config.tiles);
  if (failed(pm.run(*module)))
    return llvm::createStringError("CPU lowering failed: " + diagnostics);

  auto optimize = makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0,
                                            /*targetMachine=*/nullptr);
  ExecutionEngineOptions options;
  options.transformer = optimize;
  auto engine = ExecutionEngine::create(*module, options);
  if (!engine)
    return engine.takeError();
  return std::unique_ptr<CpuAttentionKernel>(
      new CpuAttentionKernel(config, spec.kernelName(), std::move(*engine)));
}

llvm::Error CpuAttentionKernel::checkShape(const AttentionShape &s) {
  for (auto [name, value] : {std::pair<const char *, int64_t>{"batch", s.batch},
                             {"query heads", s.qHeads},
                             {"key/value heads", s.kvHeads},
                             {"query length", s.qLen},
                             {"key/value length", s.kvLen}})
    if (value < 0 || (value == 0 && (std::string(name).find("heads") !=
                                     std::string::npos)))
      return llvm::createStringError(std::string(name) + " must be " +
                                     (value < 0 ? "non-negative" : "positive") +
                                     ", got " + std::to_string(value));
  if (s.qHeads % s.kvHeads != 0)
    return llvm::createStringError(
        "query heads (" + std::to_string(s.qHeads) +
        ") must be a multiple of key/value heads (" +
        std::to_string(s.kvHeads) + ")");
  return llvm::Error::success();
}

llvm::Error CpuAttentionKernel::run(const AttentionShape &s, const void *q,
                                    const void *k, const void *v, void *o,
                                    float *lse, const float *sinks) const {
  if (config.backward)
    return llvm::createStringError(
        "this is a backward kernel: call runBackward");
  if (llvm::Error error = checkShape(s))
    return error;
  if (!q || !k || !v || !o || !lse || (config.sinks && !sinks))
    return llvm::createStringError("null buffer pointer");

  int64_t d = config.headDim;
  auto qDesc = contiguous<4>(q, {s.batch, s.qHeads, s.qLen, d});
  auto kDesc = contiguous<4>(k, {s.batch, s.kvHeads, s.kvLen, d});
  auto vDesc = contiguous<4>(v, {s.batch, s.kvHeads, s.kvLen, d});
  auto oDesc = contiguous<4>(o, {s.batch, s.qHeads, s.qLen, d});
  auto lseDesc = contiguous<3>(lse, {s.batch, s.qHeads, s.qLen});
  if (config.sinks) {
    auto sinksDesc = contiguous<1>(sinks, {s.qHeads});
    return engine->invoke(entryName, &qDesc, &kDesc, &vDesc, &oDesc, &lseDesc,
                          &sinksDesc);
  }
  return engine->invoke(entryName, &qDesc, &kDesc, &vDesc, &oDesc, &lseDesc);
}

llvm::Error CpuAttentionKernel::runBackward(
    const AttentionShape &s, const void *q, const void *k, const void *v,
    const void *o, const void *gradOutput, const float *lse, void *gradQuery,
    void *gradKey, void *gradValue, const float *sinks,
    float *gradSinks) const {
  if (!config.backward)
    return llvm::createStringError("this is a forward kernel: call run");
  if (llvm::Error error = checkShape(s))
    return error;
  if (!q || !k || !v || !o || !gradOutput || !lse || !gradQuery || !gradKey ||
      !gradValue || (config.sinks && (!sinks || !gradSinks)))
    return llvm::createStringError("null buffer pointer");

  int64_t d = config.headDim;
  // The preprocessing grid writes every workspace element before the main
  // grid reads it; NaN makes a read of an unwritten element show.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> delta(s.batch * s.qHeads * s.qLen, nan);
  std::vector<float> gradQueryAccum(delta.size() * d, nan);
  std::array<int64_t, 4> qShape{s.batch, s.qHeads, s.qLen, d};
  std::array<int64_t, 4> kvShape{s.batch, s.kvHeads, s.kvLen, d};
  std::array<int64_t, 3> rowShape{s.batch, s.qHeads, s.qLen};
  auto qDesc = contiguous<4>(q, qShape);
  auto kDesc = contiguous<4>(k, kvShape);
  auto vDesc = contiguous<4>(v, kvShape);
  auto oDesc = contiguous<4>(o, qShape);
  auto gradOutputDesc = contiguous<4>(gradOutput, qShape);
  auto lseDesc = contiguous<3>(lse, rowShape);
  auto gradQueryDesc = contiguous<4>(gradQuery, qShape);
  auto gradKeyDesc = contiguous<4>(gradKey, kvShape);
  auto gradValueDesc = contiguous<4>(gradValue, kvShape);
  auto deltaDesc = contiguous<3>(delta.data(), rowShape);
  auto accumDesc = contiguous<4>(gradQueryAccum.data(), qShape);
  if (config.sinks) {
    // The kernel adds the rows' shares to a zeroed gradient.
    std::fill(gradSinks, gradSinks + s.qHeads, 0.0f);
    auto sinksDesc = contiguous<1>(sinks, {s.qHeads});
    auto gradSinksDesc = contiguous<1>(gradSinks, {s.qHeads});
    return engine->invoke(entryName, &qDesc, &kDesc, &vDesc, &oDesc,
                          &gradOutputDesc, &lseDesc, &gradQueryDesc,
                          &gradKeyDesc, &gradValueDesc, &deltaDesc,
                          &accumDesc, &sinksDesc, &gradSinksDesc);
  }
  if (!config.deterministic)
    return engine->invoke(entryName, &qDesc, &kDesc, &vDesc, &oDesc,
                          &gradOutputDesc, &lseDesc, &gradQueryDesc,
                          &gradKeyDesc, &gradValueDesc, &deltaDesc,
                          &accumDesc);
  // The turn counters, one per query tile (garbage until the delta program
  // zeroes them).
  int64_t qTiles = (s.qLen + config.tiles.blockM - 1) / config.tiles.blockM;
  std::vector<int32_t> order(s.batch * s.qHeads * qTiles, -1);
  auto orderDesc = contiguous<3>(order.data(), {s.batch, s.qHeads, qTiles});
  return engine->invoke(entryName, &qDesc, &kDesc, &vDesc, &oDesc,
                        &gradOutputDesc, &lseDesc, &gradQueryDesc,
                        &gradKeyDesc, &gradValueDesc, &deltaDesc, &accumDesc,
                        &orderDesc);
}
