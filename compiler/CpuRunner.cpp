//===- CpuRunner.cpp - Run fa.attention on the CPU ------------------*- C++ -*-===//
#include "compiler/CpuRunner.h"
#include "compiler/Passes.h"
#include "compiler/Registration.h"
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

using namespace mlir;
using namespace mlir::fa;

namespace {
constexpr const char *kEntryName = "attention";

/// func @attention(Q, K, V, O, LSE) { fa.attention ... }
OwningOpRef<ModuleOp> buildAttentionModule(MLIRContext &ctx,
                                           const CpuKernelConfig &config) {
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  int64_t dyn = ShapedType::kDynamic;
  Type f32 = b.getF32Type();
  Type element = f32;
  if (config.dtype == ::fa::ElementType::f16)
    element = b.getF16Type();
  else if (config.dtype == ::fa::ElementType::bf16)
    element = b.getBF16Type();
  auto tensor4 = MemRefType::get({dyn, dyn, dyn, config.headDim}, element);
  auto lseType = MemRefType::get({dyn, dyn, dyn}, f32);
  auto func = func::FuncOp::create(
      b, loc, kEntryName,
      b.getFunctionType({tensor4, tensor4, tensor4, tensor4, lseType}, {}));
  func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), b.getUnitAttr());
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  AttentionOp::create(
      b, loc, entry->getArgument(0), entry->getArgument(1),
      entry->getArgument(2), entry->getArgument(3), entry->getArgument(4),
      b.getF32FloatAttr(config.scale),
      MaskKindAttr::get(&ctx, config.causal ? MaskKind::causal : MaskKind::none));
  func::ReturnOp::create(b, loc);
  return module;
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
                                       std::unique_ptr<ExecutionEngine> engine)
    : config(config), engine(std::move(engine)) {}

CpuAttentionKernel::~CpuAttentionKernel() = default;

llvm::Expected<std::unique_ptr<CpuAttentionKernel>>
CpuAttentionKernel::compile(const CpuKernelConfig &config) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  DialectRegistry registry;
  registerCompilerDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();

  std::string diagnostics;
  llvm::raw_string_ostream diagStream(diagnostics);
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    diagStream << diag.getLocation() << ": " << diag << "\n";
    return success();
  });

  OwningOpRef<ModuleOp> module = buildAttentionModule(ctx, config);
  if (failed(verify(*module)))
    return llvm::createStringError("invalid attention kernel: " + diagnostics);
  PassManager pm(&ctx);
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
      new CpuAttentionKernel(config, std::move(*engine)));
}

llvm::Error CpuAttentionKernel::run(const AttentionShape &s, const void *q,
                                    const void *k, const void *v, void *o,
                                    float *lse) const {
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
  if (!q || !k || !v || !o || !lse)
    return llvm::createStringError("null buffer pointer");

  int64_t d = config.headDim;
  auto qDesc = contiguous<4>(q, {s.batch, s.qHeads, s.qLen, d});
  auto kDesc = contiguous<4>(k, {s.batch, s.kvHeads, s.kvLen, d});
  auto vDesc = contiguous<4>(v, {s.batch, s.kvHeads, s.kvLen, d});
  auto oDesc = contiguous<4>(o, {s.batch, s.qHeads, s.qLen, d});
  auto lseDesc = contiguous<3>(lse, {s.batch, s.qHeads, s.qLen});
  return engine->invoke(kEntryName, &qDesc, &kDesc, &vDesc, &oDesc, &lseDesc);
}
