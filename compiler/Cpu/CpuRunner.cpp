//===- CpuRunner.cpp - Run fa.attention on the CPU ------------------*- C++ -*-===//
#include "compiler/Cpu/CpuRunner.h"
#include "compiler/KernelCompiler.h"
#include "compiler/Passes.h"
#include "dialect/FAOps.h"
#include "lib/Strategy/SpecRules.h"

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
#include <deque>
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
  spec.outDtype = config.outDtype;
  spec.causal = config.causal;
  spec.blockM = config.tiles.blockM;
  spec.blockN = config.tiles.blockN;
  spec.scale = config.scale;
  spec.backward = config.backward;
  spec.deterministic = config.deterministic;
  spec.dqChains = config.dqChains;
  spec.scoreMod = config.scoreMod;
  spec.maskMod = config.maskMod;
  spec.sinks = config.sinks;
  spec.sinksPerRow = config.sinksPerRow;
  spec.blockMask = config.blockMask;
  spec.blockMaskProgram = config.blockMaskProgram;
  spec.varlen = config.varlen;
  spec.kvLens = config.kvLens;
  spec.splitKv = config.splitKv;
  spec.pagedKv = config.pagedKv;
  spec.pageGather = config.tiles.pageGather;
  spec.cacheBatchIndex = config.cacheBatchIndex;
  return spec;
}

/// Entries of a block mask's table over `length` rows or keys.
int64_t ceilGroups(int64_t length) {
  return (length + ::fa::kBlockMaskGroup - 1) / ::fa::kBlockMaskGroup;
}

} // namespace

namespace mlir::fa {
/// The kernel's arguments: MLIR memref descriptors over contiguous host
/// memory (allocated and aligned pointer, offset, sizes, strides: the
/// words of StridedMemRefType<T, rank>, which the C interface takes by
/// pointer), in parameter order.
class Descriptors {
public:
  void add(const void *data, llvm::ArrayRef<int64_t> sizes) {
    auto &words = storage.emplace_back();
    // The kernel only reads inputs; the descriptor has no const.
    auto pointer = int64_t(reinterpret_cast<uintptr_t>(data));
    words = {pointer, pointer, 0};
    words.resize(3 + 2 * sizes.size());
    int64_t stride = 1;
    for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
      words[3 + d] = sizes[d];
      words[3 + sizes.size() + d] = stride;
      stride *= sizes[d];
    }
  }

  /// Runs `entry`'s C interface on the descriptors.
  llvm::Error invoke(ExecutionEngine &engine, llvm::StringRef entry) {
    // The packed interface takes a pointer to each argument, here a
    // pointer to a descriptor.
    std::vector<void *> pointers, arguments;
    for (std::vector<int64_t> &words : storage)
      pointers.push_back(words.data());
    for (void *&pointer : pointers)
      arguments.push_back(&pointer);
    return engine.invokePacked("_mlir_ciface_" + entry.str(), arguments);
  }

private:
  std::deque<std::vector<int64_t>> storage;
};
} // namespace mlir::fa

CpuAttentionKernel::CpuAttentionKernel(CpuKernelConfig config,
                                       std::string entryName,
                                       std::unique_ptr<ExecutionEngine> engine,
                                       std::vector<::fa::CaptureType> captureTypes)
    : config(config), entryName(std::move(entryName)),
      engine(std::move(engine)), captureTypes(std::move(captureTypes)) {}

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
  std::vector<::fa::CaptureType> captureTypes = captureTypesOf(*module);
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
  return std::unique_ptr<CpuAttentionKernel>(new CpuAttentionKernel(
      config, kernelName(spec), std::move(*engine), std::move(captureTypes)));
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

llvm::Error CpuAttentionKernel::addCaptures(
    Descriptors &descriptors, llvm::ArrayRef<CpuCapture> captures) const {
  if (captures.size() != captureTypes.size())
    return llvm::createStringError(
        "the variant reads " + std::to_string(captureTypes.size()) +
        " captured tensors, the call gives " + std::to_string(captures.size()));
  for (auto [i, capture] : llvm::enumerate(captures)) {
    if (int64_t(capture.sizes.size()) != captureTypes[i].rank)
      return llvm::createStringError(
          "captured tensor " + std::to_string(i) + " has rank " +
          std::to_string(capture.sizes.size()) + ", the variant reads rank " +
          std::to_string(captureTypes[i].rank));
    if (!capture.data)
      return llvm::createStringError("null buffer pointer (captured tensor " +
                                     std::to_string(i) + ")");
    descriptors.add(capture.data, capture.sizes);
  }
  return llvm::Error::success();
}

llvm::Error CpuAttentionKernel::runBlockMask(
    const AttentionShape &s, int64_t heads, int32_t *keyRanges,
    int32_t *queryRanges, llvm::ArrayRef<CpuCapture> captures) const {
  if (!config.blockMaskProgram)
    return llvm::createStringError(
        "this is an attention kernel: call run or runBackward");
  if (llvm::Error error = checkShape(s))
    return error;
  if (heads != 1 && heads != s.qHeads)
    return llvm::createStringError(
        "a block mask has 1 or Hq (" + std::to_string(s.qHeads) +
        ") heads, got " + std::to_string(heads));
  if (!keyRanges || !queryRanges)
    return llvm::createStringError("null buffer pointer");
  Descriptors args;
  // Q and K for their sizes only (the program reads no element).
  args.add(nullptr, {s.batch, s.qHeads, s.qLen, config.headDim});
  args.add(nullptr, {s.batch, s.kvHeads, s.kvLen, config.headDim});
  args.add(keyRanges,
           {s.batch, heads, ceilGroups(s.qLen), ::fa::kRangeTableColumns});
  args.add(queryRanges,
           {s.batch, heads, ceilGroups(s.kvLen), ::fa::kRangeTableColumns});
  if (llvm::Error error = addCaptures(args, captures))
    return error;
  return args.invoke(*engine, entryName);
}

llvm::Error
CpuAttentionKernel::run(const AttentionShape &s, const void *q, const void *k,
                        const void *v, void *o, float *lse, const float *sinks,
                        llvm::ArrayRef<CpuCapture> captures,
                        CpuRangeTable keyRanges, CpuSequenceOffsets sequences,
                        const int32_t *kvLens, int64_t kvParts, CpuPages pages,
                        CpuCacheIndex cacheIndex, CpuDescales descales) const {
  if (config.backward || config.blockMaskProgram)
    return llvm::createStringError(
        config.backward ? "this is a backward kernel: call runBackward"
                        : "this is a block mask program: call runBlockMask");
  if (llvm::Error error = checkShape(s))
    return error;
  if (!q || !k || !v || !o || !lse || (config.sinks && !sinks) ||
      (config.blockMask && !keyRanges.data) ||
      (config.varlen && (!sequences.query || !sequences.key)) ||
      (config.kvLens && !kvLens) || (config.pagedKv && !pages.table) ||
      (config.cacheBatchIndex && !cacheIndex.index))
    return llvm::createStringError("null buffer pointer");
  bool float8 = config.dtype == ::fa::ElementType::e4m3;
  if (float8 && (!descales.query || !descales.key || !descales.value))
    return llvm::createStringError(
        "null buffer pointer (an e4m3 kernel takes q, k and v descales)");
  if (config.pagedKv && (pages.maxPages < 1 || pages.count < 1))
    return llvm::createStringError("a paged cache needs a page and a table "
                                   "column at least");
  if (config.pagedKv && !config.tiles.pageGather &&
      s.kvLen % config.tiles.blockN != 0)
    return llvm::createStringError(
        "page size " + std::to_string(s.kvLen) +
        " must be a multiple of block_n " +
        std::to_string(config.tiles.blockN) +
        " (a K/V tile is read from one page; pageGather reads any page "
        "size)");
  if (config.splitKv ? kvParts < 1 : kvParts != 1)
    return llvm::createStringError(
        "kvParts is " + std::to_string(kvParts) +
        (config.splitKv ? ": a split-KV kernel needs at least 1 part"
                        : ": only a split-KV kernel takes parts"));

  int64_t d = config.headDim;
  // A varlen batch's tensors hold one packed batch entry.
  int64_t entries = config.varlen ? 1 : s.batch;
  Descriptors args;
  args.add(q, {entries, s.qHeads, s.qLen, d});
  // A paged cache: K, V are the pool of pages, s.kvLen rows each.
  int64_t kvEntries = config.pagedKv           ? pages.count
                      : config.cacheBatchIndex ? cacheIndex.entries
                                               : entries;
  args.add(k, {kvEntries, s.kvHeads, s.kvLen, d});
  args.add(v, {kvEntries, s.kvHeads, s.kvLen, d});
  args.add(o, {entries, s.qHeads, s.qLen, d});
  args.add(lse, {entries, s.qHeads, s.qLen});
  if (config.sinks)
    args.add(sinks, {config.sinksPerRow ? s.qHeads * s.qLen : s.qHeads});
  if (config.varlen) {
    args.add(sequences.query, {s.batch + 1});
    args.add(sequences.key, {s.batch + 1});
  }
  if (config.kvLens)
    args.add(kvLens, {s.batch});
  if (config.pagedKv)
    args.add(pages.table, {s.batch, pages.maxPages});
  if (config.cacheBatchIndex)
    args.add(cacheIndex.index, {s.batch});
  // Split-KV: every part's output and LSE, f32. NaN makes a read of an
  // element no part wrote show.
  std::vector<float> partialOutput, partialLse;
  if (config.splitKv) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    partialLse.assign(kvParts * entries * s.qHeads * s.qLen, nan);
    partialOutput.assign(partialLse.size() * d, nan);
    args.add(partialOutput.data(), {kvParts * entries, s.qHeads, s.qLen, d});
    args.add(partialLse.data(), {kvParts * entries, s.qHeads, s.qLen});
  }
  if (config.blockMask)
    args.add(keyRanges.data, {s.batch, keyRanges.heads,
                              ceilGroups(s.qLen), ::fa::kRangeTableColumns});
  if (float8)
    for (const float *factors : {descales.query, descales.key, descales.value})
      args.add(factors, {s.batch, s.kvHeads});
  if (llvm::Error error = addCaptures(args, captures))
    return error;
  return args.invoke(*engine, entryName);
}

llvm::Error CpuAttentionKernel::runBackward(
    const AttentionShape &s, const void *q, const void *k, const void *v,
    const void *o, const void *gradOutput, const float *lse, void *gradQuery,
    void *gradKey, void *gradValue, const float *sinks, float *gradSinks,
    llvm::ArrayRef<CpuCapture> captures, CpuRangeTable queryRanges,
    CpuSequenceOffsets sequences, CpuRangeTable keyRanges) const {
  if (!config.backward)
    return llvm::createStringError(
        config.blockMaskProgram
            ? "this is a block mask program: call runBlockMask"
            : "this is a forward kernel: call run");
  if (llvm::Error error = checkShape(s))
    return error;
  if (config.blockMask && config.deterministic && !keyRanges.data)
    return llvm::createStringError("null buffer pointer (the deterministic "
                                   "backward with a block mask takes its key "
                                   "ranges too)");
  if (!q || !k || !v || !o || !gradOutput || !lse || !gradQuery || !gradKey ||
      !gradValue || (config.sinks && (!sinks || !gradSinks)) ||
      (config.blockMask && !queryRanges.data) ||
      (config.varlen && (!sequences.query || !sequences.key)))
    return llvm::createStringError("null buffer pointer");

  int64_t d = config.headDim;
  // A varlen batch's tensors (and workspaces) hold one packed batch entry.
  int64_t entries = config.varlen ? 1 : s.batch;
  // The preprocessing grid writes every workspace element before the main
  // grid reads it; NaN makes a read of an unwritten element show.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> delta(entries * s.qHeads * s.qLen, nan);
  // dq_chains copies of the accumulator's and the counters' heads.
  int64_t chains =
      config.deterministic && config.dqChains > 1 ? config.dqChains : 1;
  std::vector<float> gradQueryAccum(chains * delta.size() * d, nan);
  // The turn counters, one per chain and query tile (garbage until the
  // delta program zeroes them).
  int64_t qTiles = (s.qLen + config.tiles.blockM - 1) / config.tiles.blockM;
  std::vector<int32_t> order(
      config.deterministic ? s.batch * chains * s.qHeads * qTiles : 0, -1);
  llvm::SmallVector<int64_t, 4> qShape{entries, s.qHeads, s.qLen, d};
  llvm::SmallVector<int64_t, 4> kvShape{entries, s.kvHeads, s.kvLen, d};
  llvm::SmallVector<int64_t, 3> rowShape{entries, s.qHeads, s.qLen};
  Descriptors args;
  args.add(q, qShape);
  args.add(k, kvShape);
  args.add(v, kvShape);
  args.add(o, qShape);
  args.add(gradOutput, qShape);
  args.add(lse, rowShape);
  args.add(gradQuery, qShape);
  args.add(gradKey, kvShape);
  args.add(gradValue, kvShape);
  args.add(delta.data(), rowShape);
  args.add(gradQueryAccum.data(), {entries, chains * s.qHeads, s.qLen, d});
  if (config.deterministic)
    args.add(order.data(), {s.batch, chains * s.qHeads, qTiles});
  // Deterministic with sinks: the query tiles' shares of their gradient
  // (NaN until the delta program writes them).
  std::vector<float> sinkShares(
      config.deterministic && config.sinks ? s.batch * s.qHeads * qTiles : 0,
      nan);
  if (config.sinks) {
    // The kernel adds the rows' shares to a zeroed gradient; the
    // deterministic one stores their sum (NaN shows a head it missed).
    std::fill(gradSinks, gradSinks + s.qHeads, sinkShares.empty() ? 0.0f : nan);
    args.add(sinks, {s.qHeads});
    args.add(gradSinks, {s.qHeads});
  }
  if (!sinkShares.empty())
    args.add(sinkShares.data(), {s.batch, s.qHeads, qTiles});
  if (config.blockMask)
    args.add(queryRanges.data, {s.batch, queryRanges.heads,
                                ceilGroups(s.kvLen),
                                ::fa::kRangeTableColumns});
  if (config.blockMask && config.deterministic)
    args.add(keyRanges.data, {s.batch, keyRanges.heads, ceilGroups(s.qLen),
                              ::fa::kRangeTableColumns});
  if (config.varlen) {
    args.add(sequences.query, {s.batch + 1});
    args.add(sequences.key, {s.batch + 1});
  }
  if (llvm::Error error = addCaptures(args, captures))
    return error;
  return args.invoke(*engine, entryName);
}
