//===- KernelCompiler.cpp - From a kernel spec to PTX and cubin ----*- C++ -*-===//
#include "compiler/KernelCompiler.h"
#include "compiler/Pipelines.h"
#include "compiler/Registration.h"
#include "compiler/Tiling/Variants.h"
#include "dialect/FAOps.h"
#include "lib/Strategy/Registry.h"
#include "lib/Strategy/SpecRules.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <chrono>

using namespace mlir;
using namespace mlir::fa;

static constexpr Stage kStages[] = {Stage::fa,  Stage::tiled, Stage::placed,
                                    Stage::gpu, Stage::llvm,  Stage::ptx,
                                    Stage::cubin};

const char *mlir::fa::stageName(Stage stage) {
  switch (stage) {
  case Stage::fa:
    return "fa";
  case Stage::tiled:
    return "tiled";
  case Stage::placed:
    return "placed";
  case Stage::gpu:
    return "gpu";
  case Stage::llvm:
    return "llvm";
  case Stage::ptx:
    return "ptx";
  case Stage::cubin:
    return "cubin";
  }
  return "?";
}

std::optional<Stage> mlir::fa::parseStage(llvm::StringRef name) {
  for (Stage stage : kStages)
    if (name == stageName(stage))
      return stage;
  return std::nullopt;
}

std::string mlir::fa::stageNames() {
  std::string names;
  for (Stage stage : kStages)
    names += (names.empty() ? "" : "|") + std::string(stageName(stage));
  return names;
}

std::unique_ptr<MLIRContext> mlir::fa::createCompilerContext() {
  DialectRegistry registry;
  registerCompilerDialects(registry);
  auto ctx = std::make_unique<MLIRContext>(registry);
  ctx->loadAllAvailableDialects();
  // Diagnostics name the config; the whole op would bury the message.
  ctx->printOpOnDiagnostic(false);
  return ctx;
}

/// Moves the body of the one func.func of `text` (a variant of the spec)
/// into `region`, its func.return becoming fa.yield; the op's verifier then
/// checks the signature and the ops.
static LogicalResult parseVariantInto(MLIRContext &ctx, StringRef text,
                                      StringRef name, Region &region,
                                      Location loc) {
  ParserConfig config(&ctx);
  OwningOpRef<ModuleOp> parsed =
      parseSourceString<ModuleOp>(text, config, name);
  if (!parsed)
    return emitError(loc) << "the " << name
                          << " text does not parse as MLIR (see above)";
  auto funcs = llvm::to_vector(parsed->getOps<func::FuncOp>());
  if (funcs.size() != 1 || funcs[0].isExternal() ||
      !funcs[0].getBody().hasOneBlock() ||
      std::distance(parsed->getBody()->begin(), parsed->getBody()->end()) != 1)
    return emitError(loc) << "the " << name
                          << " text must be exactly one func.func with a "
                             "body of one block";
  region.takeBody(funcs[0].getBody());
  Operation *terminator = region.front().getTerminator();
  OpBuilder b(terminator);
  YieldOp::create(b, terminator->getLoc(), terminator->getOperands());
  terminator->erase();
  return success();
}

/// The element types a captured tensor may have.
static bool isCaptureElement(Type type) {
  return type.isF32() || type.isF16() || type.isBF16() ||
         type.isSignlessInteger(32) || type.isSignlessInteger(64) ||
         type.isSignlessInteger(8);
}

/// A parsed variant region's captured tensors: its arguments past the
/// score (score_mod) and the indices, each a memref of 1-4 dynamic sizes.
static FailureOr<SmallVector<Type>>
regionCaptures(Region &region, VariantRegion kind, StringRef name,
               Location loc) {
  SmallVector<Type> types;
  if (region.empty())
    return types;
  unsigned first =
      (kind == VariantRegion::scoreMod ? 1 : 0) + kNumVariantIndexArgs;
  Block &block = region.front();
  // Too few arguments: the op's verifier names the signature.
  for (BlockArgument arg : block.getArguments().drop_front(
           std::min<unsigned>(first, block.getNumArguments()))) {
    auto type = dyn_cast<MemRefType>(arg.getType());
    if (!type || !type.getLayout().isIdentity() || type.getMemorySpace() ||
        type.getRank() < 1 || type.getRank() > 4 ||
        !llvm::all_of(type.getShape(), ShapedType::isDynamic) ||
        !isCaptureElement(type.getElementType()))
      return emitError(loc)
             << "the " << name << "'s argument " << arg.getArgNumber()
             << " (past the indices) must be a captured tensor, a memref of "
                "1 to 4 dynamic sizes of f32, f16, bf16, i32, i64 or i8 "
                "(e.g. memref<?x?xi32>), got "
             << arg.getType();
    types.push_back(type);
  }
  return types;
}

/// The spec's variant texts into `scoreMod` and `maskMod` (regions of no
/// op yet), and the problem's captured tensors: the score_mod's, then the
/// mask_mod's. Each region then takes all of them, in that order.
static FailureOr<SmallVector<Type>>
parseVariant(MLIRContext &ctx, const ::fa::KernelSpec &spec, Region &scoreMod,
             Region &maskMod, Location loc) {
  for (auto [text, name, region] :
       {std::tuple<const std::string &, StringRef, Region &>{
            spec.scoreMod, "score_mod", scoreMod},
        {spec.maskMod, "mask_mod", maskMod}})
    if (!text.empty() &&
        failed(parseVariantInto(ctx, text, name, region, loc)))
      return failure();
  FailureOr<SmallVector<Type>> scoreCaptures =
      regionCaptures(scoreMod, VariantRegion::scoreMod, "score_mod", loc);
  FailureOr<SmallVector<Type>> maskCaptures =
      regionCaptures(maskMod, VariantRegion::maskMod, "mask_mod", loc);
  if (failed(scoreCaptures) || failed(maskCaptures))
    return failure();
  size_t count = scoreCaptures->size() + maskCaptures->size();
  if (count > size_t(::fa::kMaxCaptures))
    return emitError(loc) << "the variant captures " << count
                          << " tensors; a kernel takes at most "
                          << ::fa::kMaxCaptures;
  if (!scoreMod.empty())
    for (Type type : *maskCaptures)
      scoreMod.front().addArgument(type, loc);
  if (!maskMod.empty())
    for (auto [i, type] : llvm::enumerate(*scoreCaptures))
      maskMod.front().insertArgument(unsigned(kNumVariantIndexArgs + i), type,
                                     loc);
  SmallVector<Type> captures = std::move(*scoreCaptures);
  llvm::append_range(captures, *maskCaptures);
  return captures;
}

::fa::VariantTraits mlir::fa::variantTraits(const ::fa::KernelSpec &spec) {
  ::fa::VariantTraits traits;
  // An invalid spec (a text past the size or nesting limits among others)
  // is not parsed: validateSpec names what is wrong.
  if (!spec.hasVariant() || !::fa::validateSpec(spec).empty())
    return traits;
  // Dialects load as the parser meets them; errors are the compile's.
  DialectRegistry registry;
  registerCompilerDialects(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  Location loc = UnknownLoc::get(&ctx);
  for (auto [text, name, kind] :
       {std::tuple<const std::string &, StringRef, VariantRegion>{
            spec.scoreMod, "score_mod", VariantRegion::scoreMod},
        {spec.maskMod, "mask_mod", VariantRegion::maskMod}}) {
    Region region;
    if (!text.empty() &&
        succeeded(parseVariantInto(ctx, text, name, region, loc)) &&
        readsCapturesByKey(region, kind))
      traits.keyIndexedCaptures = true;
  }
  return traits;
}

std::vector<::fa::CaptureType> mlir::fa::captureTypesOf(ModuleOp module) {
  std::vector<::fa::CaptureType> types;
  module.walk([&](Operation *op) {
    OperandRange captures = OperandRange(nullptr, 0);
    if (auto forward = dyn_cast<AttentionOp>(op))
      captures = forward.getCaptures();
    else if (auto backward = dyn_cast<AttentionBackwardOp>(op))
      captures = backward.getCaptures();
    else if (auto program = dyn_cast<BlockMaskOp>(op))
      captures = program.getCaptures();
    else
      return;
    types.clear();
    for (Value capture : captures) {
      auto type = cast<MemRefType>(capture.getType());
      std::string element;
      llvm::raw_string_ostream os(element);
      os << type.getElementType();
      // One of ::fa::ScalarType's names: FA_CaptureMemRef's element types.
      types.push_back({*::fa::scalarTypeNamed(element), int(type.getRank())});
    }
  });
  return types;
}

OwningOpRef<ModuleOp>
mlir::fa::buildAttentionModule(MLIRContext &ctx, const ::fa::KernelSpec &spec) {
  OpBuilder b(&ctx);
  // Diagnostics about the kernel then start with its name.
  Location loc = NameLoc::get(b.getStringAttr(kernelName(spec)));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto typeOf = [&](::fa::ElementType dtype) -> Type {
    switch (dtype) {
    case ::fa::ElementType::f32:
      return b.getF32Type();
    case ::fa::ElementType::f16:
      return b.getF16Type();
    case ::fa::ElementType::bf16:
      return b.getBF16Type();
    case ::fa::ElementType::e4m3:
      return b.getType<Float8E4M3FNType>();
    }
    return Type();
  };
  Type element = typeOf(spec.dtype);
  // Any batch/head/row strides (e.g. [B, S, H, D] tensors viewed as
  // [B, H, S, D]); the head dim is contiguous.
  int64_t dyn = ShapedType::kDynamic;
  auto rowsLayout = StridedLayoutAttr::get(&ctx, dyn, {dyn, dyn, dyn, 1});
  auto lseLayout = StridedLayoutAttr::get(&ctx, dyn, {dyn, dyn, 1});
  auto tensor4 =
      MemRefType::get({dyn, dyn, dyn, spec.headDim}, element, rowsLayout);
  auto lseType = MemRefType::get({dyn, dyn, dyn}, b.getF32Type(), lseLayout);
  auto sinksType = MemRefType::get(
      {dyn}, b.getF32Type(), StridedLayoutAttr::get(&ctx, dyn, {dyn}));
  // A block mask's [first, end, whole_first, whole_end) table, row-major.
  auto rangeTableType = MemRefType::get(
      {dyn, dyn, dyn, ::fa::kRangeTableColumns}, b.getI32Type());
  // The variant's regions first: their captured tensors are parameters.
  Region scoreMod, maskMod;
  FailureOr<SmallVector<Type>> captures =
      parseVariant(ctx, spec, scoreMod, maskMod, loc);
  if (failed(captures))
    return nullptr;
  auto scale = b.getF32FloatAttr(spec.effectiveScale());
  auto mask =
      MaskKindAttr::get(&ctx, spec.causal ? MaskKind::causal : MaskKind::none);
  if (spec.blockMaskProgram) {
    // (Q, K, key_ranges, query_ranges, the mask_mod's captures): Q and K
    // for their sizes only, of any element type.
    auto sized = MemRefType::get({dyn, dyn, dyn, dyn}, b.getI8Type(),
                                 StridedLayoutAttr::get(&ctx, dyn,
                                                        {dyn, dyn, dyn, dyn}));
    SmallVector<Type> params = {sized, sized, rangeTableType, rangeTableType};
    llvm::append_range(params, *captures);
    auto func = func::FuncOp::create(b, loc, kernelName(spec),
                                     b.getFunctionType(params, {}));
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    auto args = entry->getArguments();
    auto program = BlockMaskOp::create(b, loc, args[0], args[1], args[2],
                                       args[3], args.drop_front(4), mask);
    program.getMaskMod().takeBody(maskMod);
    if (failed(verify(program)))
      return nullptr;
    func::ReturnOp::create(b, loc);
    return module;
  }
  if (spec.backward) {
    // (Q, K, V, O, dO, LSE, dQ, dK, dV, delta, dq_accum): the workspaces
    // are f32, delta shaped like LSE and dq_accum like Q.
    // Deterministic: a 12th parameter, the i32 turn counters
    // [B, Hq, query tiles] (dq_chains: dq_accum and the counters hold that
    // many copies of the heads).
    auto accum = MemRefType::get({dyn, dyn, dyn, spec.headDim}, b.getF32Type(),
                                 rowsLayout);
    SmallVector<Type> params = {tensor4, tensor4, tensor4,  tensor4,
                                tensor4, lseType, tensor4,  tensor4,
                                tensor4, lseType, accum};
    if (spec.deterministic)
      params.push_back(
          MemRefType::get({dyn, dyn, dyn}, b.getI32Type(), lseLayout));
    // Sinks: the logits and their gradient, f32 [Hq] each; deterministic,
    // then each query tile's share of the gradient, f32 [B, Hq, query
    // tiles].
    size_t sinksArg = params.size();
    bool sinkShares = spec.sinks && spec.deterministic;
    if (spec.sinks)
      params.append({sinksType, sinksType});
    if (sinkShares)
      params.push_back(
          MemRefType::get({dyn, dyn, dyn}, b.getF32Type(), lseLayout));
    // A block mask's query ranges; deterministic, its key ranges too (they
    // order the turns).
    size_t rangesArg = params.size();
    bool keyRanges = spec.blockMask && spec.deterministic;
    if (spec.blockMask)
      params.push_back(rangeTableType);
    if (keyRanges)
      params.push_back(rangeTableType);
    // A varlen batch's sequence offsets, i32 [B + 1] each.
    size_t cuSeqlensArg = params.size();
    if (spec.varlen)
      params.append(2, MemRefType::get({dyn}, b.getI32Type()));
    // The sinks, their gradient, a block mask and the offsets come before
    // the captures.
    size_t firstCapture = params.size();
    llvm::append_range(params, *captures);
    auto func = func::FuncOp::create(b, loc, kernelName(spec),
                                     b.getFunctionType(params, {}));
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    auto args = entry->getArguments();
    auto attention = AttentionBackwardOp::create(
        b, loc, args[0], args[1], args[2], args[3], args[4], args[5], args[6],
        args[7], args[8], args[9], args[10],
        spec.deterministic ? args[11] : Value(),
        spec.sinks ? args[sinksArg] : Value(),
        spec.sinks ? args[sinksArg + 1] : Value(),
        sinkShares ? args[sinksArg + 2] : Value(),
        spec.blockMask ? args[rangesArg] : Value(),
        keyRanges ? args[rangesArg + 1] : Value(),
        spec.varlen ? args[cuSeqlensArg] : Value(),
        spec.varlen ? args[cuSeqlensArg + 1] : Value(),
        args.drop_front(firstCapture), scale, mask);
    if (spec.dqChainsOrOne() > 1)
      attention.setDqChains(spec.dqChainsOrOne());
    attention.getScoreMod().takeBody(scoreMod);
    attention.getMaskMod().takeBody(maskMod);
    if (spec.hasVariant() && failed(verify(attention)))
      return nullptr;
  } else {
    // (Q, K, V, O, LSE), and the sink logits f32 [Hq] with sinks, the
    // sequence offsets i32 [B + 1] of a varlen batch. O of FP8 inputs is
    // 16-bit.
    auto outputType = MemRefType::get({dyn, dyn, dyn, spec.headDim},
                                      typeOf(spec.outputDtype()), rowsLayout);
    SmallVector<Type> params = {tensor4, tensor4, tensor4, outputType, lseType};
    if (spec.sinks)
      params.push_back(sinksType);
    size_t cuSeqlensArg = params.size();
    if (spec.varlen)
      params.append(2, MemRefType::get({dyn}, b.getI32Type()));
    // A KV cache's filled lengths, i32 [B].
    size_t kvLensArg = params.size();
    if (spec.kvLens)
      params.push_back(MemRefType::get({dyn}, b.getI32Type()));
    // A paged cache's page table, i32 [B, max_pages].
    size_t tableArg = params.size();
    if (spec.pagedKv)
      params.push_back(MemRefType::get({dyn, dyn}, b.getI32Type()));
    // K/V entries by index, i32 [B].
    size_t indexArg = params.size();
    if (spec.cacheBatchIndex)
      params.push_back(MemRefType::get({dyn}, b.getI32Type()));
    // Split-KV: every part's output and LSE, f32.
    size_t partialsArg = params.size();
    if (spec.splitKv) {
      params.push_back(MemRefType::get({dyn, dyn, dyn, spec.headDim},
                                       b.getF32Type()));
      params.push_back(MemRefType::get({dyn, dyn, dyn}, b.getF32Type()));
    }
    size_t rangesArg = params.size();
    if (spec.blockMask)
      params.push_back(rangeTableType);
    // FP8: the descale factors of Q, K and V, f32 [B, Hkv] each.
    size_t descalesArg = params.size();
    bool float8 = spec.dtype == ::fa::ElementType::e4m3;
    if (float8)
      params.append(
          3, MemRefType::get({dyn, dyn}, b.getF32Type(),
                             StridedLayoutAttr::get(&ctx, dyn, {dyn, dyn})));
    size_t firstCapture = params.size();
    llvm::append_range(params, *captures);
    auto func = func::FuncOp::create(b, loc, kernelName(spec),
                                     b.getFunctionType(params, {}));
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    auto args = entry->getArguments();
    auto attention =
        AttentionOp::create(b, loc, args[0], args[1], args[2], args[3], args[4],
                            spec.sinks ? args[5] : Value(),
                            spec.blockMask ? args[rangesArg] : Value(),
                            spec.varlen ? args[cuSeqlensArg] : Value(),
                            spec.varlen ? args[cuSeqlensArg + 1] : Value(),
                            spec.kvLens ? args[kvLensArg] : Value(),
                            spec.pagedKv ? args[tableArg] : Value(),
                            spec.cacheBatchIndex ? args[indexArg] : Value(),
                            spec.splitKv ? args[partialsArg] : Value(),
                            spec.splitKv ? args[partialsArg + 1] : Value(),
                            float8 ? args[descalesArg] : Value(),
                            float8 ? args[descalesArg + 1] : Value(),
                            float8 ? args[descalesArg + 2] : Value(),
                            args.drop_front(firstCapture), scale, mask);
    attention.setSinksPerRow(spec.sinksPerRow);
    attention.getScoreMod().takeBody(scoreMod);
    attention.getMaskMod().takeBody(maskMod);
    if (spec.hasVariant() && failed(verify(attention)))
      return nullptr;
  }
  func::ReturnOp::create(b, loc);
  return module;
}

FailureOr<Stage> mlir::fa::detectStage(ModuleOp module) {
  bool hasAttention = false, hasGrid = false, placed = false;
  bool hasGpuFunc = false, hasLLVMKernel = false, hasBinary = false;
  module.walk([&](Operation *op) {
    if (isa<AttentionOp, AttentionBackwardOp, BlockMaskOp>(op))
      hasAttention = true;
    if (auto grid = dyn_cast<GridOp>(op)) {
      hasGrid = true;
      placed |= grid->hasAttr(FADialect::getLaunchAttrName());
    }
    if (isa<gpu::GPUFuncOp>(op))
      hasGpuFunc = true;
    if (isa<LLVM::LLVMFuncOp>(op) && op->getParentOfType<gpu::GPUModuleOp>())
      hasLLVMKernel = true;
    if (isa<gpu::BinaryOp>(op))
      hasBinary = true;
  });
  if (hasBinary)
    return module.emitError("the module is already PTX (a gpu.binary)");
  if (hasAttention)
    return Stage::fa;
  if (hasGrid)
    return placed ? Stage::placed : Stage::tiled;
  if (hasGpuFunc)
    return Stage::gpu;
  if (hasLLVMKernel)
    return Stage::llvm;
  return module.emitError("no attention kernel in the module (expected "
                          "fa.attention, fa.grid, gpu.func or a lowered "
                          "gpu.module)");
}

std::optional<ProblemType> mlir::fa::readProblemType(ModuleOp module) {
  std::optional<ProblemType> problem;
  module.walk([&](FunctionOpInterface function) {
    for (Type type : function.getArgumentTypes()) {
      auto memref = dyn_cast<MemRefType>(type);
      if (!memref || memref.getRank() != 4 || memref.isDynamicDim(3))
        continue;
      Type element = memref.getElementType();
      ::fa::ElementType dtype = element.isF16()    ? ::fa::ElementType::f16
                                : element.isBF16() ? ::fa::ElementType::bf16
                                : isa<Float8E4M3FNType>(element)
                                    ? ::fa::ElementType::e4m3
                                    : ::fa::ElementType::f32;
      problem = ProblemType{memref.getDimSize(3), dtype};
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return problem;
}

LogicalResult
mlir::fa::lowerModule(ModuleOp module, Stage from, Stage to,
                      const ::fa::KernelSpec &spec,
                      llvm::function_ref<void(Stage, ModuleOp)> onStage) {
  GpuOptions gpu{spec.arch, spec.numWarps,
                 ::fa::toString(resolveStrategy(spec)), spec.stages};
  if (spec.backward && to > Stage::tiled)
    if (std::string error = ::fa::checkLowersBackward(
            ::fa::strategyModel(resolveStrategy(spec)));
        !error.empty())
      return module.emitError() << error;
  for (Stage next : kStages) {
    if (next <= from || next > to || next > Stage::llvm)
      continue;
    PassManager pm(module.getContext());
    switch (next) {
    case Stage::tiled:
      buildTilePipeline(pm, {spec.blockM, spec.blockN, spec.pageGather});
      break;
    case Stage::placed:
      buildPlacePipeline(pm, gpu);
      break;
    case Stage::gpu:
      buildGpuKernelPipeline(pm, gpu);
      break;
    case Stage::llvm:
      buildGpuToNVVMPipeline(pm, gpu);
      break;
    default:
      break;
    }
    if (failed(pm.run(module)))
      return failure();
    if (onStage)
      onStage(next, module);
  }
  return success();
}

FailureOr<std::string> mlir::fa::emitPtx(ModuleOp module) {
  // Serialize a copy: the module stays at the llvm stage.
  OwningOpRef<ModuleOp> copy = module.clone();
  PassManager pm(module.getContext());
  buildNVVMToPtxPipeline(pm);
  if (failed(pm.run(*copy)))
    return failure();
  std::string ptx;
  copy->walk([&](gpu::BinaryOp binary) {
    for (Attribute object : binary.getObjects())
      ptx += cast<gpu::ObjectAttr>(object).getObject().getValue().str();
  });
  if (ptx.empty())
    return module.emitError("the NVPTX back end produced no PTX");
  return ptx;
}

FailureOr<std::vector<::fa::LaunchPlan>>
mlir::fa::readKernelLaunches(ModuleOp module) {
  std::vector<::fa::LaunchPlan> launches;
  module.walk([&](Operation *op) {
    auto launch = op->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
    if (!launch || !isa<gpu::GPUFuncOp, LLVM::LLVMFuncOp>(op))
      return;
    ::fa::LaunchPlan plan;
    plan.function = cast<SymbolOpInterface>(op).getName().str();
    plan.sharedBytes = launch.getSharedBytes();
    plan.threads = launch.getThreads();
    plan.persistent = op->hasAttr(FADialect::getPersistentAttrName());
    // A kernel that waits for the one before it (fa.wait_previous_program
    // where the arch launches early) may be launched while that one runs.
    op->walk([&](NVVM::GriddepcontrolOp control) {
      if (control.getKind() == NVVM::GridDepActionKind::wait)
        plan.dependentLaunch = true;
    });
    if (auto maps =
            op->getAttrOfType<ArrayAttr>(FADialect::getTensorMapsAttrName()))
      for (Attribute map : maps) {
        auto dict = cast<DictionaryAttr>(map); // checked by the dialect
        StringRef tensor = dict.getAs<StringAttr>("tensor").getValue();
        ::fa::LaunchPlan::TensorMap m;
        // "q" | "k" | "v" | "do" | "dq_accum": checked by the dialect.
        m.operand = *::fa::LaunchPlan::operandNamed(tensor);
        m.boxRows = dict.getAs<IntegerAttr>("box_rows").getInt();
        m.boxCols = dict.getAs<IntegerAttr>("box_cols").getInt();
        if (auto bytes = dict.getAs<IntegerAttr>("element_bytes"))
          m.elementBytes = bytes.getInt();
        plan.tensorMaps.push_back(m);
      }
    launches.push_back(std::move(plan));
  });
  if (launches.empty())
    return module.emitError("no kernel with launch attributes in the module");
  return launches;
}

/// The launches of a several-kernel module in the order they run: the
/// kernel named <spec's kernel name><suffix> of each of `programs`, each
/// completed by `complete` with its program's tiles; `what` names the
/// module in the error for a kernel that is missing.
static LogicalResult orderLaunches(
    ModuleOp module, const ::fa::KernelSpec &spec, StringRef what,
    ArrayRef<std::pair<const char *, ::fa::LaunchPlan::GridDim>> programs,
    std::vector<::fa::LaunchPlan> &launches,
    function_ref<void(::fa::LaunchPlan &, ::fa::LaunchPlan::GridDim)>
        complete) {
  std::vector<::fa::LaunchPlan> ordered;
  for (auto [suffix, tiles] : programs) {
    std::string function = kernelName(spec) + suffix;
    auto it = llvm::find_if(launches, [&](const ::fa::LaunchPlan &plan) {
      return plan.function == function;
    });
    if (it == launches.end())
      return module.emitError() << what << " has no kernel " << function;
    ::fa::LaunchPlan plan = *it;
    complete(plan, tiles);
    ordered.push_back(std::move(plan));
  }
  launches = std::move(ordered);
  return success();
}

/// Completes the launches read from the module with their grids and
/// parameters. fa-convert-placed-to-gpu maps a program's (tile, head,
/// batch) to block (x, y, z) and keeps the function's parameters.
static LogicalResult planLaunches(ModuleOp module, const ::fa::KernelSpec &spec,
                                  const std::vector<::fa::CaptureType> &captures,
                                  std::vector<::fa::LaunchPlan> &launches) {
  using Plan = ::fa::LaunchPlan;
  if (spec.blockMaskProgram) {
    // fa-lower-block-mask's programs, in order: the two tables emptied (a
    // thread per entry), then one block per (16-row group, table head,
    // batch), then the whole-range checks, one block per entry of each
    // table; the runtime launches them with the tables' heads as the query
    // heads.
    const std::pair<const char *, Plan::GridDim> programs[] = {
        {"_init_keys",
         {Plan::Extent::queryLength, ::fa::kBlockMaskGroup * 128}},
        {"_init_queries",
         {Plan::Extent::keyLength, ::fa::kBlockMaskGroup * 128}},
        {"_ranges", {Plan::Extent::queryLength, ::fa::kBlockMaskGroup}},
        {"_whole_keys", {Plan::Extent::queryLength, ::fa::kBlockMaskGroup}},
        {"_whole_queries", {Plan::Extent::keyLength, ::fa::kBlockMaskGroup}}};
    return orderLaunches(
        module, spec, "the block mask program", programs, launches,
        [&](Plan &plan, Plan::GridDim tiles) {
          plan.grid = {tiles, Plan::GridDim{Plan::Extent::queryHeads, 1},
                       Plan::GridDim{Plan::Extent::batch, 1}};
          plan.params = {Plan::Operand::query, Plan::Operand::key,
                         Plan::Operand::keyRanges, Plan::Operand::queryRanges};
          plan.addCaptures(captures);
        });
  }
  if (!spec.backward && spec.splitKv) {
    // fa-tile's split-KV programs: every part of every query tile, then the
    // merge of each tile's parts.
    const std::pair<const char *, Plan::GridDim> programs[] = {
        {"_split", {}}, {"_combine", {}}};
    return orderLaunches(
        module, spec, "the split-KV forward", programs, launches,
        [&](Plan &plan, Plan::GridDim) {
          bool combine = StringRef(plan.function).ends_with("_combine");
          Plan forward = Plan::forwardAttention(
              plan.function, spec.blockM, plan.threads, plan.sharedBytes,
              spec.sinks, spec.blockMask, spec.varlen, spec.kvLens,
              combine ? Plan::ForwardKernel::combine
                      : Plan::ForwardKernel::split,
              spec.pagedKv, spec.cacheBatchIndex,
              spec.dtype == ::fa::ElementType::e4m3);
          plan.grid = forward.grid;
          plan.params = std::move(forward.params);
          plan.addCaptures(captures);
        });
  }
  if (!spec.backward) {
    if (launches.size() != 1)
      return module.emitError() << "expected one forward kernel, got "
                                << launches.size();
    // The kernel's grid and parameters; the rest as read from it.
    Plan &plan = launches.front();
    Plan forward = Plan::forwardAttention(
        plan.function, spec.blockM, plan.threads, plan.sharedBytes, spec.sinks,
        spec.blockMask, spec.varlen, spec.kvLens, Plan::ForwardKernel::whole,
        spec.pagedKv, spec.cacheBatchIndex,
        spec.dtype == ::fa::ElementType::e4m3);
    plan.grid = forward.grid;
    plan.params = std::move(forward.params);
    plan.addCaptures(captures);
    return success();
  }
  // fa-tile-backward's programs: D per query tile, dK/dV per K/V tile of
  // a K/V head, dQ per query tile; in this order.
  const std::pair<const char *, Plan::GridDim> programs[] = {
      {"_delta", {Plan::Extent::queryLength, spec.blockM}},
      {"_dkdv", {Plan::Extent::keyLength, spec.blockN}},
      {"_dq", {Plan::Extent::queryLength, spec.blockM}}};
  return orderLaunches(
      module, spec, "the backward", programs, launches,
      [&](Plan &plan, Plan::GridDim tiles) {
        bool perKeyHead = tiles.extent == Plan::Extent::keyLength;
        plan.grid = {tiles,
                     Plan::GridDim{perKeyHead ? Plan::Extent::keyHeads
                                              : Plan::Extent::queryHeads,
                                   1},
                     Plan::GridDim{Plan::Extent::batch, 1}};
        plan.params = Plan::backwardParams(spec.deterministic, spec.sinks,
                                           spec.blockMask, spec.varlen);
        plan.addCaptures(captures);
      });
}

llvm::Expected<CompiledKernel>
mlir::fa::compileKernel(const ::fa::KernelSpec &requested, bool assemble) {
  std::string error = validateSpec(requested);
  if (!error.empty())
    return llvm::createStringError(error);
  ::fa::KernelSpec spec = withDefaults(requested);
  auto start = std::chrono::steady_clock::now();
  // Seconds since `start`, which moves on: each stage's own time.
  auto lap = [&start] {
    auto now = std::chrono::steady_clock::now();
    double seconds = std::chrono::duration<double>(now - start).count();
    start = now;
    return seconds;
  };
  std::unique_ptr<MLIRContext> ctx = createCompilerContext();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(ctx.get(), [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      diagnostics += (diagnostics.empty() ? "" : "\n") + diag.str();
    return success();
  });
  OwningOpRef<ModuleOp> module = buildAttentionModule(*ctx, spec);
  if (!module)
    return llvm::createStringError(diagnostics);
  CompiledKernel kernel;
  kernel.name = kernelName(spec);
  std::vector<::fa::CaptureType> captures = captureTypesOf(*module);
  if (failed(lowerModule(*module, Stage::fa, Stage::llvm, spec, {})))
    return llvm::createStringError(diagnostics);
  FailureOr<std::vector<::fa::LaunchPlan>> launches =
      readKernelLaunches(*module);
  if (failed(launches) ||
      failed(planLaunches(*module, spec, captures, *launches)))
    return llvm::createStringError(diagnostics);
  kernel.launches = std::move(*launches);
  kernel.seconds.lower = lap();
  FailureOr<std::string> ptx = emitPtx(*module);
  if (failed(ptx))
    return llvm::createStringError(diagnostics);
  kernel.ptx = std::move(*ptx);
  kernel.seconds.codegen = lap();
  if (!assemble)
    return kernel;
  auto assembled = ::fa::runPtxas(kernel.ptx, spec.arch);
  if (!assembled)
    return assembled.takeError();
  kernel.cubin = std::move(assembled->cubin);
  kernel.resources = std::move(assembled->kernels);
  kernel.seconds.assemble = lap();
  return kernel;
}
