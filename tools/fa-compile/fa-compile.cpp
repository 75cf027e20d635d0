//===- fa-compile.cpp - Compile an attention kernel to any stage ---*- C++ -*-===//
//
//   fa-compile --head-dim=128 --block-m=8 --block-n=32 --emit=cubin -o k.cubin --report
//   fa-compile tiled.mlir --emit=ptx            (resume from an IR file)
//
// Emits one stage of the pipeline (fa|tiled|placed|gpu|llvm|ptx|cubin),
// optionally every stage into --dump-dir, and with --report one line per
// kernel with its registers, shared memory and spills from ptxas.
//
//===----------------------------------------------------------------------===//

#include "compiler/KernelCompiler.h"
#include "compiler/Tiling/TileArithmetic.h"
#include "compiler/Tiling/Variants.h"
#include "dialect/FAOps.h"
#include "lib/CudaToolkit.h"
#include "lib/IOModel.h"
#include "lib/KernelSpec.h"
#include "lib/Strategy/Registry.h"
#include "lib/Strategy/SpecRules.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "lib/TextNesting.h"

#include <chrono>
#include <utility>
#include <vector>
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;
using namespace mlir::fa;
namespace cl = llvm::cl;

static cl::OptionCategory category("fa-compile options");
static cl::opt<std::string> inputFile(
    cl::Positional, cl::desc("[input.mlir] (IR at any stage; default: build "
                             "the problem from the options)"),
    cl::init(""), cl::cat(category));
static cl::opt<int64_t> headDim("head-dim", cl::desc("head dimension D"),
                                cl::init(128), cl::cat(category));
static cl::opt<std::string>
    dtype("dtype",
          cl::desc("f32 | f16 | bf16 | e4m3 (FP8: the forward, with Q, K "
                   "and V descales f32 [B, Hkv] after the other operands)"),
          cl::init("f32"), cl::cat(category));
static cl::opt<std::string>
    outDtype("out-dtype",
             cl::desc("O's element type with --dtype=e4m3: bf16 (default) | "
                      "f16"),
             cl::init(""), cl::cat(category));
static cl::opt<bool> causal("causal", cl::desc("causal mask (bottom-right)"),
                            cl::init(false), cl::cat(category));
static cl::opt<bool> backward(
    "backward",
    cl::desc("the backward: dQ, dK, dV from dO and the forward's LSE "
             "(lowered to the tile level so far: --emit=fa|tiled)"),
    cl::init(false), cl::cat(category));
static cl::opt<std::string> scoreModFile(
    "score-mod",
    cl::desc("a score_mod variant: a file holding one func.func (score: f32, "
             "b, h, q_idx, kv_idx, q_len, kv_len: index) -> f32"),
    cl::value_desc("FILE"), cl::cat(category));
static cl::opt<std::string> maskModFile(
    "mask-mod",
    cl::desc("a mask_mod variant: a file holding one func.func (b, h, q_idx, "
             "kv_idx, q_len, kv_len: index) -> i1"),
    cl::value_desc("FILE"), cl::cat(category));
static cl::opt<bool> sinks(
    "sinks",
    cl::desc("attention sinks: one f32 logit per query head joins each row's "
             "softmax denominator (an extra kernel parameter; the backward "
             "also writes their gradient)"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> sinksPerRow(
    "sinks-per-row",
    cl::desc("with --sinks: one logit per query head and row, head-major "
             "(sinks [Hq * Sq]): the runtime's packed GQA decode, whose rows "
             "are a K/V head's query heads (kernel name ..._rowsinks)"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> blockMask(
    "block-mask",
    cl::desc("with --mask-mod: the kernel takes a block mask, tables of the "
             "keys each 16 query rows keep (backward: the rows that keep "
             "each 16 keys), and visits only the tiles they meet"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> blockMaskProgram(
    "block-mask-program",
    cl::desc("compile the block mask program of --mask-mod (and --causal): "
             "the kernels that fill a block mask's tables (fa.block_mask) "
             "instead of attention"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> varlen(
    "varlen",
    cl::desc("a packed variable-length batch: the kernel takes Q, O [1, Hq, "
             "total_q, D], K, V [1, Hkv, total_k, D] and the i32 sequence "
             "offsets cu_seqlens_q, cu_seqlens_k [B + 1] (forward and backward)"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> kvLens(
    "kv-lens",
    cl::desc("a KV cache's filled lengths: the forward takes i32 kv_lens [B] "
             "after the other operands and batch entry b attends to its "
             "first kv_lens[b] keys (flash-attn's cache_seqlens)"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> splitKv(
    "split-kv",
    cl::desc("split-KV (decode): the forward takes f32 partials [N * B, Hq, "
             "Sq, D] and [N * B, Hq, Sq] after the other operands, runs each "
             "query tile's keys in N parts (kernel <name>_split) and merges "
             "them by their log-sum-exps (<name>_combine); N is the "
             "partials' size at launch"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> pagedKv(
    "paged-kv",
    cl::desc("a paged KV cache: the forward takes K, V as a pool of pages "
             "[num_pages, Hkv, P, D] and an i32 block_table [B, max_pages] "
             "after kv_lens; block-n must divide P unless --page-gather"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> pageGather(
    "page-gather",
    cl::desc("with a paged KV cache: read the K/V tiles row by row, each "
             "row's page looked up in the block_table, so that the kernel "
             "takes any page size (kernel name ..._pagedrows)"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> cacheBatchIndex(
    "cache-batch-idx",
    cl::desc("K/V entries by index: the forward takes an i32 "
             "cache_batch_idx [B] after block_table, and batch entry b reads "
             "K/V entry cache_batch_idx[b]"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> deterministic(
    "deterministic",
    cl::desc("with --backward: add dQ in a fixed order (bitwise identical "
             "results run to run)"),
    cl::init(false), cl::cat(category));
static cl::opt<int64_t> dqChains(
    "dq-chains",
    cl::desc("with --deterministic: split each query tile's dQ turns into "
             "this many chains, summed by the dq kernel (0: the strategy's "
             "default)"),
    cl::init(0), cl::cat(category));
static cl::opt<std::string> strategy(
    "strategy",
    cl::desc("simt | mma | wgmma | auto (default: simt for f32, mma for "
             "f16/bf16; wgmma needs --arch=sm_90a)"),
    cl::init("auto"), cl::cat(category));
static cl::opt<int64_t> blockM(
    "block-m",
    cl::desc("query rows per tile (B_r; simt default 8, else the strategy's "
             "default)"),
    cl::init(0), cl::cat(category));
static cl::opt<int64_t> blockN(
    "block-n", cl::desc("key/value rows per tile (B_c; simt default 32)"),
    cl::init(0), cl::cat(category));
static cl::opt<int64_t> numWarps(
    "num-warps", cl::desc("warps per block (simt default 8)"), cl::init(0),
    cl::cat(category));
static cl::opt<int64_t> stages(
    "stages", cl::desc("K/V tiles in flight (mma: 1..4; 0 = default)"),
    cl::init(0), cl::cat(category));
static cl::opt<int64_t> sequenceLength(
    "length",
    cl::desc("sequence length the default tiles are chosen for (the longer "
             "of query and key, as the runtime does; 0 = not known, the "
             "ranking measured at 4k)"),
    cl::init(0), cl::cat(category));
static cl::opt<double> scale("scale",
                             cl::desc("softmax scale (default 1/sqrt(D))"),
                             cl::init(0.0), cl::cat(category));
static cl::opt<std::string> arch("arch",
                                 cl::desc("sm_80 | sm_86 | sm_89 | sm_90 | sm_90a"),
                                 cl::init("sm_90a"), cl::cat(category));
static cl::opt<std::string> emit("emit", cl::desc("stage to emit: " "fa|tiled|placed|gpu|llvm|ptx|cubin"),
                                 cl::init("ptx"), cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("output file ('-': stdout)"),
                                       cl::value_desc("FILE"), cl::init("-"),
                                       cl::cat(category));
static cl::opt<std::string> dumpDir("dump-dir",
                                    cl::desc("also write every stage here"),
                                    cl::value_desc("DIR"), cl::init(""),
                                    cl::cat(category));
static cl::opt<bool> timings(
    "timings",
    cl::desc("print the wall time of each step on stderr: choosing default "
             "tiles (trial compiles), every stage, the NVPTX back end, ptxas"),
    cl::init(false), cl::cat(category));

static cl::opt<bool> report("report",
                            cl::desc("print registers, shared memory and "
                                     "spills per kernel (runs ptxas)"),
                            cl::init(false), cl::cat(category));

static cl::opt<std::string> ioShape(
    "io-shape",
    cl::desc("B,Hq,Hkv,Sq,Sk of the problem --report models the HBM traffic "
             "of (default: 16k tokens, Hq*D = 2048: B=4, S=4096)"),
    cl::value_desc("B,Hq,Hkv,Sq,Sk"), cl::init(""), cl::cat(category));
static cl::opt<std::string> ioJson(
    "io-json",
    cl::desc("write the IO model of the schedule on the --io-shape problem "
             "as JSON (exact bytes and FLOPs; bench/plot_io.py reads it)"),
    cl::value_desc("FILE"), cl::init(""), cl::cat(category));

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "fa-compile") << message << "\n";
  return 1;
}

static bool writeFile(llvm::StringRef path, llvm::StringRef contents,
                      std::string &error) {
  auto file = openOutputFile(path, &error);
  if (!file)
    return false;
  file->os() << contents;
  // A full disk or /dev/full: an error naming the file, not LLVM's abort
  // on a stream destroyed with its error unchecked.
  file->os().flush();
  if (std::error_code ec = file->os().error()) {
    error = "cannot write " + path.str() + ": " + ec.message();
    file->os().clear_error();
    return false;
  }
  file->keep();
  return true;
}

/// One line per diagnostic: "fa-compile: error: <where>: <message>", where
/// is a file position or the kernel's name.
static LogicalResult printDiagnostic(Diagnostic &diag) {
  llvm::raw_ostream &os = llvm::errs();
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error:
    llvm::WithColor::error(os, "fa-compile");
    break;
  case DiagnosticSeverity::Warning:
    llvm::WithColor::warning(os, "fa-compile");
    break;
  default:
    llvm::WithColor::note(os, "fa-compile");
    break;
  }
  Location loc = diag.getLocation();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn() << ": ";
  else if (auto name = dyn_cast<NameLoc>(loc))
    os << name.getName().getValue() << ": ";
  os << diag << "\n";
  return success();
}

static std::string printModule(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "fa attention kernel compiler\n");

  ::fa::KernelSpec spec;
  spec.headDim = headDim;
  if (!::fa::parseElementType(dtype, spec.dtype))
    return fail("unknown --dtype '" + dtype +
                "'; expected f32, f16, bf16 or e4m3");
  if (!outDtype.empty()) {
    ::fa::ElementType out;
    if (!::fa::parseElementType(outDtype, out))
      return fail("unknown --out-dtype '" + outDtype +
                  "'; expected f16 or bf16");
    spec.outDtype = out;
  }
  spec.causal = causal;
  spec.backward = backward;
  spec.deterministic = deterministic;
  spec.dqChains = dqChains;
  spec.sinks = sinks;
  spec.sinksPerRow = sinksPerRow;
  spec.blockMask = blockMask;
  spec.blockMaskProgram = blockMaskProgram;
  spec.varlen = varlen;
  spec.kvLens = kvLens;
  spec.splitKv = splitKv;
  spec.pagedKv = pagedKv;
  spec.pageGather = pageGather;
  spec.cacheBatchIndex = cacheBatchIndex;
  for (auto [file, text, option] :
       {std::tuple<const std::string &, std::string &, const char *>{
            scoreModFile, spec.scoreMod, "--score-mod"},
        {maskModFile, spec.maskMod, "--mask-mod"}}) {
    if (file.empty())
      continue;
    auto buffer = llvm::MemoryBuffer::getFile(file);
    if (!buffer)
      return fail(std::string("cannot read ") + option + " file " + file +
                  ": " + buffer.getError().message());
    text = (*buffer)->getBuffer().str();
  }
  if (!::fa::parseStrategy(strategy, spec.strategy))
    return fail("unknown --strategy '" + strategy + "'; expected one of " +
                ::fa::strategyNames());
  // The problem of the IO model: FlashAttention's benchmark shape unless
  // given.
  ::fa::AttentionProblem io;
  io.batch = 4;
  io.qHeads = io.kvHeads = std::max<int64_t>(1, 2048 / std::max<int64_t>(1, headDim));
  io.qLen = io.kvLen = 4096;
  if (!ioShape.empty()) {
    llvm::SmallVector<llvm::StringRef> fields;
    llvm::StringRef(ioShape).split(fields, ',');
    // The model's range: batch and heads within a grid dimension (65535),
    // lengths up to 2^24 tokens (its per-tile loops stay short and its
    // products far from overflow).
    constexpr int64_t kMaxCount = 65535, kMaxLength = int64_t(1) << 24;
    const int64_t highest[5] = {kMaxCount, kMaxCount, kMaxCount, kMaxLength,
                                kMaxLength};
    int64_t values[5];
    bool ok = fields.size() == 5;
    for (size_t i = 0; ok && i < 5; ++i)
      ok = !fields[i].trim().getAsInteger(10, values[i]) && values[i] >= 0 &&
           values[i] <= highest[i];
    if (!ok || values[2] < 1 || values[1] % std::max<int64_t>(values[2], 1))
      return fail("--io-shape must be B,Hq,Hkv,Sq,Sk (B, Hq in [0, 65535], "
                  "Hkv in [1, 65535], Hq a multiple of Hkv, Sq, Sk in [0, " +
                  std::to_string(kMaxLength) + "]), got '" + ioShape + "'");
    io.batch = values[0];
    io.qHeads = values[1];
    io.kvHeads = values[2];
    io.qLen = values[3];
    io.kvLen = values[4];
  }
  std::optional<Stage> target = parseStage(emit);
  if (!target)
    return fail("unknown --emit '" + emit + "'; expected " + stageNames());
  if (*target == Stage::cubin && outputFile == "-" && dumpDir.empty())
    return fail("--emit=cubin writes a binary: give -o FILE");

  std::unique_ptr<MLIRContext> ctx = createCompilerContext();
  llvm::SourceMgr sourceMgr;
  ScopedDiagnosticHandler diagnostics(ctx.get(), printDiagnostic);
  OwningOpRef<ModuleOp> module;
  Stage from = Stage::fa;
  if (!inputFile.empty()) {
    auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(inputFile);
    if (!buffer)
      return fail("cannot read " + inputFile + ": " +
                  buffer.getError().message());
    // Input MLIR's parser cannot take (deep nesting, index dense arrays).
    if (std::string error =
            ::fa::checkTextBeforeParsing((*buffer)->getBuffer(), inputFile);
        !error.empty())
      return fail(error);
    sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(ctx.get()));
    if (!module)
      return 1;
    FailureOr<Stage> stage = detectStage(*module);
    if (failed(stage))
      return 1;
    from = *stage;
    if (from > *target)
      return fail("the input is at stage '" + std::string(stageName(from)) +
                  "', past --emit=" + emit);
    // The input fixes the problem: its head dim and element type are the
    // spec's (the strategy and defaults depend on them), and options that
    // would describe another problem are errors, not silently ignored.
    if (causal.getNumOccurrences())
      return fail("--causal describes a problem built from the options; " +
                  inputFile + " fixes its own mask");
    if (scale.getNumOccurrences())
      return fail("--scale describes a problem built from the options; " +
                  inputFile + " fixes its own scale");
    if (backward.getNumOccurrences())
      return fail("--backward describes a problem built from the options; " +
                  inputFile + " is a forward or a backward by itself");
    if (spec.hasVariant())
      return fail("--score-mod and --mask-mod describe a problem built from "
                  "the options; " +
                  inputFile + " carries its own regions");
    if (deterministic.getNumOccurrences() || dqChains.getNumOccurrences())
      return fail(std::string(deterministic.getNumOccurrences()
                                  ? "--deterministic"
                                  : "--dq-chains") +
                  " describes a problem built from the options; " + inputFile +
                  " fixes its own");
    if (sinks.getNumOccurrences() || sinksPerRow.getNumOccurrences())
      return fail(std::string(sinks.getNumOccurrences() ? "--sinks"
                                                        : "--sinks-per-row") +
                  " describes a problem built from the options; " + inputFile +
                  " has its sinks operand or not");
    if (blockMask.getNumOccurrences())
      return fail("--block-mask describes a problem built from the options; " +
                  inputFile + " has its range table operand or not");
    if (blockMaskProgram.getNumOccurrences())
      return fail("--block-mask-program describes a program built from the "
                  "options; " +
                  inputFile + " holds its own ops");
    if (varlen.getNumOccurrences())
      return fail("--varlen describes a problem built from the options; " +
                  inputFile + " has its cu_seqlens operands or not");
    if (kvLens.getNumOccurrences())
      return fail("--kv-lens describes a problem built from the options; " +
                  inputFile + " has its kv_lens operand or not");
    if (cacheBatchIndex.getNumOccurrences())
      return fail("--cache-batch-idx describes a problem built from the "
                  "options; " +
                  inputFile + " has its cache_batch_idx operand or not");
    if (pagedKv.getNumOccurrences())
      return fail("--paged-kv describes a problem built from the options; " +
                  inputFile + " has its block_table operand or not");
    if (splitKv.getNumOccurrences())
      return fail("--split-kv describes a problem built from the options; " +
                  inputFile + " has its partials operands or not");
    module->walk([&](AttentionOp op) {
      spec.sinks = op.getSinks() != nullptr;
      spec.sinksPerRow = op.getSinksPerRow();
      spec.blockMask = op.getKeyRanges() != nullptr;
      spec.varlen = op.getCuSeqlensQ() != nullptr;
      spec.kvLens = op.getKvLens() != nullptr;
      spec.splitKv = op.getPartialOutput() != nullptr;
      spec.pagedKv = op.getBlockTable() != nullptr;
      spec.cacheBatchIndex = op.getCacheBatchIdx() != nullptr;
      // FP8 inputs: O's own type.
      Type output = cast<MemRefType>(op.getOutput().getType()).getElementType();
      if (output != cast<MemRefType>(op.getQuery().getType()).getElementType())
        spec.outDtype =
            output.isF16() ? ::fa::ElementType::f16 : ::fa::ElementType::bf16;
    });
    module->walk([&](AttentionBackwardOp op) {
      spec.backward = true;
      spec.deterministic = op.getDqOrder() != nullptr;
      spec.dqChains = op.getDqChains();
      spec.sinks = op.getSinks() != nullptr;
      spec.blockMask = op.getQueryRanges() != nullptr;
    });
    if (std::optional<ProblemType> problem = readProblemType(*module)) {
      if (headDim.getNumOccurrences() && headDim != problem->headDim)
        return fail("--head-dim=" + std::to_string(headDim) +
                    " does not match the input's head dim " +
                    std::to_string(problem->headDim));
      if (dtype.getNumOccurrences() && spec.dtype != problem->dtype)
        return fail("--dtype=" + dtype + " does not match the input's " +
                    ::fa::toString(problem->dtype));
      spec.headDim = problem->headDim;
      spec.dtype = problem->dtype;
    }
  }
  spec.blockM = blockM;
  spec.blockN = blockN;
  spec.numWarps = numWarps;
  spec.stages = stages;
  // A strategy's reference kernel (simt's: the lecture's) fills the tile
  // options left out; elsewhere the resource model's first default, as the
  // runtime takes.
  if (auto *reference =
          ::fa::strategyModel(::fa::resolveStrategy(spec)).referenceTiles) {
    if (std::optional<::fa::TileConfig> tiles = reference(spec)) {
      if (!spec.blockM)
        spec.blockM = tiles->blockM;
      if (!spec.blockN)
        spec.blockN = tiles->blockN;
      if (!spec.numWarps)
        spec.numWarps = tiles->numWarps;
    }
  }
  spec.arch = arch;
  spec.scale = scale;
  if (std::string error = validateSpec(spec); !error.empty())
    return fail(error);
  if (sequenceLength < 0)
    return fail("--length must be >= 0 (0 = not known), got " +
                std::to_string(sequenceLength));
  const ::fa::KernelSpec requested = spec;
  // --timings: each step's wall time, in the order the steps ran.
  std::vector<std::pair<std::string, double>> steps;
  auto stepStart = std::chrono::steady_clock::now();
  auto endStep = [&](const std::string &name) {
    auto now = std::chrono::steady_clock::now();
    steps.push_back(
        {name, std::chrono::duration<double>(now - stepStart).count()});
    stepStart = now;
  };
  ::fa::VariantTraits traits = variantTraits(requested);
  spec = withDefaults(spec, sequenceLength, traits);
  // Defaulted tiles, where ptxas is at hand: the runtime's rule
  // (Runtime::prepare), the first candidate that assembles without spills,
  // else the first that compiles; every stage with tiles shows that kernel.
  // The resource models' register estimates cannot see every spill ptxas
  // makes. Without ptxas: the model's first candidate.
  std::vector<::fa::KernelSpec> candidates;
  if (requested.needsDefaults() && inputFile.empty() &&
      (report || *target != Stage::fa))
    candidates = defaultCandidates(requested, sequenceLength, traits);
  // One candidate leaves nothing to choose: no trial compile. The chosen
  // trial's PTX and cubin are the kernel's: they are not made twice.
  std::optional<CompiledKernel> chosenTrial;
  size_t trialsCompiled = 0;
  if (candidates.size() > 1) {
    if (llvm::Expected<std::string> ptxas = ::fa::findPtxas()) {
      // Each trial is compiled once: by itself, or with the wave it
      // belongs to (after a spill, several at once).
      std::vector<std::optional<CompiledKernel>> trials(candidates.size());
      std::vector<char> compiledYet(candidates.size(), 0);
      auto compileTrial = [&](size_t i) {
        llvm::Expected<CompiledKernel> compiled =
            compileKernel(candidates[i], /*assemble=*/true);
        if (compiled)
          trials[i] = std::move(*compiled);
        else
          llvm::consumeError(compiled.takeError());
        compiledYet[i] = 1;
      };
      size_t next = 0;
      std::optional<size_t> chosen = ::fa::chooseDefaultCandidate(
          candidates,
          [&](const ::fa::KernelSpec &) -> std::optional<int64_t> {
            size_t i = next++;
            if (!compiledYet[i])
              compileTrial(i);
            if (!trials[i])
              return std::nullopt;
            int64_t bytes = 0;
            for (const ::fa::KernelResources &k : trials[i]->resources)
              bytes += k.spilledBytes();
            return bytes;
          },
          [&](size_t first, size_t last) {
            ::fa::runConcurrently(first, last, compileTrial);
          },
          ::fa::trialWave(),
          ::fa::firstTrialWave(requested, traits, ::fa::trialWave()));
      trialsCompiled = llvm::count(compiledYet, 1);
      if (chosen) {
        spec = candidates[*chosen];
        chosenTrial = std::move(trials[*chosen]);
      }
    } else {
      llvm::consumeError(ptxas.takeError());
    }
  }
  if (candidates.size() > 1) {
    std::string label =
        "default tiles (trial compiles: " + std::to_string(trialsCompiled) +
        " of " + std::to_string(candidates.size()) + " candidates";
    if (chosenTrial)
      label += llvm::formatv(", the chosen one's: lower {0:F3}, NVPTX "
                             "{1:F3}, ptxas {2:F3}; reused",
                             chosenTrial->seconds.lower,
                             chosenTrial->seconds.codegen,
                             chosenTrial->seconds.assemble)
                   .str();
    endStep(label + ")");
  }
  if (inputFile.empty()) {
    module = buildAttentionModule(*ctx, spec);
    if (!module)
      return 1;
  }
  endStep(inputFile.empty() ? "build fa" : "parse");

  if (!dumpDir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(dumpDir))
      return fail("cannot create --dump-dir " + dumpDir + ": " + ec.message());
  auto dumpPath = [&](Stage stage, const char *extension) {
    llvm::SmallString<256> path(dumpDir);
    llvm::sys::path::append(path, std::to_string(int(stage)) + "-" +
                                      stageName(stage) + extension);
    return std::string(path);
  };
  std::string error;
  bool dumpFailed = false;
  auto dumpStage = [&](Stage stage, ModuleOp m) {
    endStep(stageName(stage));
    if (!dumpDir.empty() &&
        !writeFile(dumpPath(stage, ".mlir"), printModule(m), error))
      dumpFailed = true;
    stepStart = std::chrono::steady_clock::now(); // dumps are not timed
  };
  if (!dumpDir.empty() && inputFile.empty()) {
    if (!writeFile(dumpPath(Stage::fa, ".mlir"), printModule(*module), error))
      return fail(error);
    stepStart = std::chrono::steady_clock::now();
  }
  // A mask_mod's K/V tiles per query tile on the --io-shape problem, for
  // the IO model: the problem op's own ranges, folded before lowering
  // (batch 0 and head 0 stand for every program).
  ::fa::VisitedKVTiles visited;
  // And the scores it keeps (the compulsory FLOPs), where it can be read.
  std::optional<double> keptScores;
  if ((!ioJson.empty() || report) && from == Stage::fa)
    module->walk([&](Operation *op) {
      Region *maskMod = nullptr;
      MaskKind mask = MaskKind::none;
      if (auto forward = dyn_cast<AttentionOp>(op)) {
        maskMod = &forward.getMaskMod();
        mask = forward.getMask();
      } else if (auto backward = dyn_cast<AttentionBackwardOp>(op)) {
        maskMod = &backward.getMaskMod();
        mask = backward.getMask();
      }
      if (!maskMod || maskMod->empty())
        return;
      if (std::optional<std::vector<int64_t>> folded = foldVisitedKVTiles(
              ctx.get(), mask, *maskMod, io.qLen, io.kvLen, spec.blockM,
              spec.blockN, /*batch=*/0, /*head=*/0,
              /*skipsHole=*/!spec.splitKv && !spec.blockMask))
        visited = std::move(*folded);
      if (!ioJson.empty())
        keptScores = countKeptScores(*maskMod, mask, io.qLen, io.kvLen,
                                     /*batch=*/0, /*head=*/0);
    });
  if (failed(lowerModule(*module, from, std::min(*target, Stage::llvm), spec,
                         dumpStage)))
    return 1;
  if (dumpFailed)
    return fail(error);

  bool needPtx = *target >= Stage::ptx || report;
  std::string ptx;
  ::fa::PtxasResult assembled;
  if (needPtx) {
    if (from > Stage::llvm || *target < Stage::llvm) {
      if (report)
        return fail("--report needs --emit=llvm, ptx or cubin");
    }
    if (chosenTrial) {
      ptx = chosenTrial->ptx;
    } else {
      FailureOr<std::string> emitted = emitPtx(*module);
      if (failed(emitted))
        return 1;
      ptx = std::move(*emitted);
      endStep("ptx (NVPTX back end)");
    }
    if (!dumpDir.empty() &&
        !writeFile(dumpPath(Stage::ptx, ".ptx"), ptx, error))
      return fail(error);
    bool assemble = *target == Stage::cubin || report;
    if (chosenTrial) {
      assembled.cubin = std::move(chosenTrial->cubin);
      assembled.kernels = std::move(chosenTrial->resources);
    } else if (assemble) {
      stepStart = std::chrono::steady_clock::now();
      auto result = ::fa::runPtxas(ptx, spec.arch);
      if (!result)
        return fail(llvm::toString(result.takeError()));
      assembled = std::move(*result);
      endStep("cubin (ptxas)");
    }
    if (assemble && !dumpDir.empty() &&
        !writeFile(
            dumpPath(Stage::cubin, ".cubin"),
            llvm::StringRef(assembled.cubin.data(), assembled.cubin.size()),
            error))
      return fail(error);
  }

  if (timings) {
    double total = 0;
    for (const auto &[name, seconds] : steps)
      total += seconds;
    llvm::errs() << "timings (wall, s):";
    for (const auto &[name, seconds] : steps)
      llvm::errs() << llvm::format(" %s %.3f;", name.c_str(), seconds);
    llvm::errs() << llvm::format(" total %.3f\n", total);
  }

  // The requested stage.
  bool toStdout = outputFile == "-";
  if (!(toStdout && *target == Stage::cubin)) {
    std::string contents;
    if (*target <= Stage::llvm)
      contents = printModule(*module);
    else if (*target == Stage::ptx)
      contents = ptx;
    else
      contents.assign(assembled.cubin.begin(), assembled.cubin.end());
    if (!writeFile(outputFile, contents, error))
      return fail(error);
  }

  // The IO model of this schedule on the --io-shape problem (only when
  // asked for: its per-tile sums grow with the lengths).
  io.headDim = spec.headDim;
  io.causal = spec.causal;
  int64_t elementBytes = ::fa::elementBytes(spec.dtype);
  ::fa::IOEstimate tiled, standard;
  // (The IO model is attention's: a block mask program has none.)
  bool attentionIO = !spec.blockMaskProgram;
  if (!ioJson.empty() && !attentionIO)
    return fail("--io-json models attention's traffic; a block mask "
                "program (--block-mask-program) has no IO model");
  if ((!ioJson.empty() || report) && attentionIO) {
    tiled = spec.backward ? ::fa::tiledBackwardIO(io, elementBytes, spec.blockM,
                                                  spec.blockN, visited,
                                                  spec.dqChainsOrOne())
                          : ::fa::tiledForwardIO(io, elementBytes, spec.blockM,
                                                 spec.blockN, visited);
    standard = ::fa::standardAttentionIO(io, elementBytes);
  }
  if (!ioJson.empty()) {
    auto estimate = [](const ::fa::IOEstimate &e) {
      return llvm::json::Object{{"bytes_read", e.bytesRead},
                                {"bytes_written", e.bytesWritten},
                                {"flops", e.flops}};
    };
    llvm::json::Object doc{{"batch", io.batch},
                           {"q_heads", io.qHeads},
                           {"kv_heads", io.kvHeads},
                           {"q_len", io.qLen},
                           {"kv_len", io.kvLen},
                           {"head_dim", io.headDim},
                           {"causal", io.causal},
                           {"dtype", ::fa::toString(spec.dtype)},
                           {"backward", spec.backward},
                           {"strategy", ::fa::toString(resolveStrategy(spec))},
                           {"block_m", spec.blockM},
                           {"block_n", spec.blockN},
                           {"tiled", estimate(tiled)},
                           {"standard", estimate(standard)},
                           {"compulsory", estimate(::fa::compulsoryForwardIO(
                                              io, elementBytes, keptScores))}};
    std::string text;
    llvm::raw_string_ostream json(text);
    json << llvm::formatv("{0:2}", llvm::json::Value(std::move(doc))) << "\n";
    if (!writeFile(ioJson, text, error))
      return fail(error);
  }

  if (report) {
    FailureOr<std::vector<::fa::LaunchPlan>> launches =
        readKernelLaunches(*module);
    if (failed(launches))
      return 1;
    // Keep stdout for the IR when it goes there.
    llvm::raw_ostream &os = toStdout && *target != Stage::cubin ? llvm::errs()
                                                                : llvm::outs();
    // Spills the strategy measured this tile faster with (the default rule's
    // toleratedSpillBytes) are reported, not warned about.
    int64_t spilledBytes = 0;
    for (const ::fa::KernelResources &k : assembled.kernels)
      spilledBytes += k.spilledBytes();
    int64_t tolerated = ::fa::toleratedSpillBytes(spec);
    bool spillsTolerated = tolerated > 0 && spilledBytes <= tolerated;
    for (const ::fa::KernelResources &k : assembled.kernels) {
      auto launch = llvm::find_if(*launches, [&](const ::fa::LaunchPlan &l) {
        return l.function == k.name;
      });
      if (launch == launches->end())
        return fail("ptxas reports a kernel " + k.name +
                    " that the module does not launch");
      os << k.name << ": registers=" << k.registers
         << " threads=" << launch->threads
         << " shared-dynamic=" << launch->sharedBytes << "B"
         << " shared-static=" << k.staticSharedBytes << "B"
         << " stack=" << k.stackFrameBytes << "B"
         << " spill-stores=" << k.spillStoreBytes << "B"
         << " spill-loads=" << k.spillLoadBytes << "B\n";
      if (k.spills() && spillsTolerated)
        llvm::WithColor::note(os, "fa-compile")
            << k.name << " spills " << k.spilledBytes() << " bytes, within the "
            << tolerated << " its strategy measured this tile faster with\n";
      else if (k.spills())
        llvm::WithColor::warning(os, "fa-compile")
            << k.name << " spills registers to local memory ("
            << k.spillStoreBytes << " bytes stored, " << k.spillLoadBytes
            << " bytes loaded): reduce block-m or raise num-warps\n";
    }
    if (attentionIO)
      os << "io model (B=" << io.batch << " Hq=" << io.qHeads
         << " Hkv=" << io.kvHeads << " Sq=" << io.qLen << " Sk=" << io.kvLen
         << "): " << (spec.backward ? "tiled backward " : "tiled forward ")
         << ::fa::formatBytes(tiled.bytes()) << " HBM ("
         << ::fa::formatBytes(tiled.bytesRead) << " read, "
         << ::fa::formatBytes(tiled.bytesWritten) << " written), "
         << llvm::format("%.4g", tiled.flops * 1e-9)
         << " GFLOP; standard attention forward "
         << ::fa::formatBytes(standard.bytes()) << " HBM\n";
    // fa-compile assembles with ptxas (the runtime can also use the
    // driver's JIT); the report names it.
    if (llvm::Expected<std::string> version = ::fa::ptxasVersion())
      os << "assembler: ptxas " << *version << "\n";
    else
      llvm::consumeError(version.takeError());
  }
  return 0;
}
