//===- SpecRules.cpp - What the strategies make of a kernel spec
//-----------===//
//
// The rules that need the strategy registry: validation, the strategy auto
// resolves to, names, canonical text, cache keys and defaults. KernelSpec
// itself is plain data (lib/KernelSpec.h).
//
//===----------------------------------------------------------------------===//
#include "lib/Strategy/SpecRules.h"
#include "lib/GpuTarget.h"
#include "lib/Strategy/Registry.h"
#include "lib/TextNesting.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/xxhash.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace fa {

static constexpr int64_t kMaxBlockSize = 1024;

/// A scale as a person writes it ("nan", "-1", "1e+39"), with the digits
/// that tell a value just past float32's range from one inside it.
static std::string formatScale(double scale) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", scale);
  return text;
}

/// The limits of a variant text (`name`: score_mod or mask_mod).
static std::string checkVariantText(const char *name, const std::string &text) {
  if (text.size() > kMaxVariantTextBytes)
    return std::string(name) + " text must be at most " +
           std::to_string(kMaxVariantTextBytes) + " bytes, got " +
           std::to_string(text.size());
  return checkTextBeforeParsing(text, std::string(name) + " text");
}

/// The rules of FP8 inputs and of O's type; "" when they hold.
static std::string checkFloat8(const KernelSpec &spec) {
  bool float8 = spec.dtype == ElementType::e4m3;
  if (spec.outDtype && !float8 && *spec.outDtype != spec.dtype)
    return std::string("O's dtype differs from the inputs' only for e4m3 "
                       "inputs; got inputs ") +
           toString(spec.dtype) + ", O " + toString(*spec.outDtype);
  if (!float8)
    return "";
  ElementType out = spec.outputDtype();
  if (out != ElementType::f16 && out != ElementType::bf16)
    return std::string("e4m3 (FP8) attention writes O in f16 or bf16, got ") +
           toString(out);
  if (spec.backward)
    return "the backward takes 16-bit inputs: e4m3 (FP8) is a forward "
           "format (quantize in the forward only)";
  const char *unsupported = spec.hasVariant()      ? "a score_mod or mask_mod"
                            : spec.sinks           ? "sinks"
                            : spec.blockMask       ? "a block mask"
                            : spec.varlen          ? "a varlen batch"
                            : spec.kvLens          ? "kv_lens"
                            : spec.splitKv         ? "split-KV"
                            : spec.pagedKv         ? "a paged KV cache"
                            : spec.cacheBatchIndex ? "cache_batch_idx"
                                                   : nullptr;
  if (unsupported)
    return std::string("e4m3 (FP8) attention takes plain or causal masks "
                       "(with GQA/MQA) so far, not ") +
           unsupported;
  return "";
}

std::string validateSpec(const KernelSpec &spec) {
  if (spec.blockMaskProgram) {
    if (spec.maskMod.empty())
      return "a block mask program computes a mask_mod's tables: give a "
             "mask_mod";
    if (spec.backward)
      return "a block mask program serves the forward and the backward "
             "alike: it is not a backward";
    if (!lookupGpuArch(spec.arch))
      return unsupportedArchMessage(spec.arch);
    return checkVariantText("mask_mod", spec.maskMod);
  }
  auto range = [](const char *name, int64_t value, int64_t lo, int64_t hi) {
    if (value >= lo && value <= hi)
      return std::string();
    return std::string(name) + " must be in [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "], got " + std::to_string(value);
  };
  // Tile fields may be 0: the strategy's default.
  auto rangeOrDefault = [&](const char *name, int64_t value, int64_t hi) {
    if (value == 0)
      return std::string();
    return range(name, value, 1, hi);
  };
  for (std::string error :
       {range("head-dim", spec.headDim, 1, kMaxHeadDim),
        rangeOrDefault("block-m", spec.blockM, kMaxBlockSize),
        rangeOrDefault("block-n", spec.blockN, kMaxBlockSize),
        rangeOrDefault("num-warps", spec.numWarps, 32)})
    if (!error.empty())
      return error;
  if (std::string error = checkFloat8(spec); !error.empty())
    return error;
  if (std::string error = strategyModel(resolveStrategy(spec)).checkSpec(spec);
      !error.empty())
    return error;
  if (!lookupGpuArch(spec.arch))
    return unsupportedArchMessage(spec.arch);
  // 0 is the default 1/sqrt(head-dim); the kernels compute in float32.
  if (spec.scale != 0.0) {
    float asFloat = static_cast<float>(spec.scale);
    if (!(spec.scale > 0.0) || !std::isfinite(spec.scale) ||
        !std::isfinite(asFloat) || asFloat < std::numeric_limits<float>::min())
      return "softmax scale must be positive and finite in float32 (0 for "
             "the default 1/sqrt(head-dim)), got " +
             formatScale(spec.scale);
  }
  if (spec.deterministic && !spec.backward)
    return "deterministic applies to the backward (the forward has no "
           "accumulation across programs)";
  if (spec.dqChains < 0 || spec.dqChains > kMaxDqChains)
    return "dq_chains must be in [0, " + std::to_string(kMaxDqChains) +
           "] (0: the strategy's default), got " +
           std::to_string(spec.dqChains);
  if (spec.dqChains > 1 && !spec.deterministic)
    return "dq_chains = " + std::to_string(spec.dqChains) +
           " splits the deterministic backward's dQ turns: it needs "
           "deterministic";
  for (auto [name, text] : {std::pair<const char *, const std::string *>{
                                "score_mod", &spec.scoreMod},
                            {"mask_mod", &spec.maskMod}}) {
    if (std::string error = checkVariantText(name, *text); !error.empty())
      return error;
  }
  if (spec.blockMask && spec.maskMod.empty())
    return "a block mask bounds the tiles of a mask_mod's kept scores: give "
           "a mask_mod with it";
  if (spec.sinksPerRow && !spec.sinks)
    return "sinks_per_row reads the sinks per query row: it needs sinks";
  if (spec.sinksPerRow && (spec.backward || spec.varlen))
    return std::string("sinks per query row are the packed GQA decode's "
                       "(a forward of fixed-length rows), not a ") +
           (spec.backward ? "backward's" : "varlen batch's");
  if (spec.dqChains > 1 && spec.blockMask)
    return "dq_chains = " + std::to_string(spec.dqChains) +
           " counts the deterministic turns one by one; a block mask's "
           "turns skip the K/V tiles its tables leave out: dq_chains must "
           "be 1";
  if (spec.varlen && spec.blockMask)
    return "a block mask does not take a varlen batch (cu_seqlens) yet";
  if (spec.kvLens && spec.backward)
    return "the backward does not take kv_lens (a KV cache's lengths)";
  if (spec.kvLens && spec.blockMask)
    return "a block mask does not take kv_lens (a KV cache's lengths) yet";
  if (spec.splitKv && spec.backward)
    return "the backward does not split the keys (split-KV is a forward "
           "for few query rows)";
  if (spec.splitKv && spec.blockMask)
    return "a block mask does not take split-KV yet";
  if (spec.pagedKv && spec.backward)
    return "the backward does not take a paged KV cache (block_table)";
  if (spec.pagedKv && spec.blockMask)
    return "a block mask does not take a paged KV cache (block_table) yet";
  if (spec.pageGather && !spec.pagedKv)
    return "page_gather reads a paged KV cache row by row; it needs "
           "paged_kv (a block_table)";
  if (spec.cacheBatchIndex &&
      (spec.backward || spec.varlen || spec.pagedKv || spec.blockMask))
    return std::string("cache_batch_idx does not take ") +
           (spec.backward  ? "the backward"
            : spec.varlen  ? "a varlen batch (cu_seqlens) yet"
            : spec.pagedKv ? "a paged KV cache (block_table) yet"
                           : "a block mask yet");
  return "";
}

/// The variant texts as one line: backslashes and newlines escaped.
static std::string escapedVariantText(const std::string &text) {
  std::string escaped;
  for (char c : text) {
    if (c == '\\')
      escaped += "\\\\";
    else if (c == '\n')
      escaped += "\\n";
    else
      escaped += c;
  }
  return escaped;
}

Strategy resolveStrategy(const KernelSpec &spec) {
  if (spec.strategy != Strategy::automatic)
    return spec.strategy;
  // The first registered strategy that takes the problem (the last takes
  // every one): see registeredStrategies() for the order.
  for (const StrategyModel *model : registeredStrategies())
    if (model->takesProblem(spec))
      return model->kind;
  return registeredStrategies().back()->kind;
}

std::string kernelName(const KernelSpec &spec) {
  if (spec.blockMaskProgram)
    return std::string("fa_block_mask_") + (spec.causal ? "causal" : "full") +
           "_mod" +
           llvm::utohexstr(llvm::xxh3_64bits(spec.maskMod) >> 32,
                           /*LowerCase=*/true, /*Width=*/8);
  std::string name =
      std::string(spec.backward ? "fa_bwd_d" : "fa_fwd_d") +
      std::to_string(spec.headDim) + "_" + toString(spec.dtype) +
      (spec.dtype == ElementType::e4m3
           ? std::string("_o") + toString(spec.outputDtype())
           : std::string()) +
      (spec.causal ? "_causal_" : "_full_") + std::to_string(spec.blockM) +
      "x" + std::to_string(spec.blockN) + "_w" + std::to_string(spec.numWarps);
  if (spec.backward && spec.deterministic)
    name += "_det";
  if (spec.dqChainsOrOne() > 1)
    name += "_c" + std::to_string(spec.dqChainsOrOne());
  if (spec.sinks)
    name += spec.sinksPerRow ? "_rowsinks" : "_sinks";
  if (spec.blockMask)
    name += "_blockmask";
  if (spec.varlen)
    name += "_varlen";
  if (spec.kvLens)
    name += "_kvlens";
  if (spec.pagedKv)
    name += spec.pageGather ? "_pagedrows" : "_paged";
  if (spec.cacheBatchIndex)
    name += "_kvindex";
  if (spec.splitKv)
    name += "_splitkv";
  if (spec.hasVariant()) {
    // Which variant: a stable hash of both texts (the cache key has them
    // whole).
    uint64_t hash = llvm::xxh3_64bits(spec.scoreMod + '\0' + spec.maskMod);
    name += "_mod" + llvm::utohexstr(hash >> 32, /*LowerCase=*/true,
                                     /*Width=*/8);
  }
  const StrategyModel &model = strategyModel(resolveStrategy(spec));
  if (model.pipelined)
    name += "_s" + std::to_string(spec.stages) + "_" + model.name;
  return name;
}

std::string canonicalText(const KernelSpec &spec) {
  if (spec.blockMaskProgram)
    return std::string("fa-kernel-spec v2;op=block_mask;mask=") +
           (spec.causal ? "causal" : "none") + ";arch=" + spec.arch +
           ";mask_mod=" + escapedVariantText(spec.maskMod);
  // The scale as the bits of the double: no rounding in the key.
  uint64_t scaleBits;
  double s = spec.effectiveScale();
  std::memcpy(&scaleBits, &s, sizeof(s));
  return std::string("fa-kernel-spec v2;op=") +
         (spec.backward ? (spec.deterministic ? "attention_bwd_deterministic"
                                              : "attention_bwd")
                        : "attention_fwd") +
         ";strategy=" + toString(resolveStrategy(spec)) +
         ";head_dim=" + std::to_string(spec.headDim) +
         ";dtype=" + toString(spec.dtype) +
         (spec.dtype == ElementType::e4m3
              ? std::string(";out_dtype=") + toString(spec.outputDtype())
              : std::string()) +
         ";mask=" + (spec.causal ? "causal" : "none") +
         ";block_m=" + std::to_string(spec.blockM) +
         ";block_n=" + std::to_string(spec.blockN) +
         ";num_warps=" + std::to_string(spec.numWarps) +
         ";stages=" + std::to_string(spec.stages) + ";arch=" + spec.arch +
         ";scale=0x" + llvm::utohexstr(scaleBits, /*LowerCase=*/true) +
         // Before the variant texts, which run to the end of the line and
         // may hold any characters.
         (spec.dqChainsOrOne() > 1
              ? ";dq_chains=" + std::to_string(spec.dqChainsOrOne())
              : std::string()) +
         (spec.sinks ? ";sinks" : "") +
         (spec.sinksPerRow ? ";sinks_per_row" : "") +
         (spec.blockMask ? ";block_mask" : "") +
         (spec.varlen ? ";varlen" : "") + (spec.kvLens ? ";kv_lens" : "") +
         (spec.pagedKv ? ";paged_kv" : "") +
         (spec.pageGather ? ";page_gather" : "") +
         (spec.cacheBatchIndex ? ";cache_batch_idx" : "") +
         (spec.splitKv ? ";split_kv" : "") +
         (spec.scoreMod.empty()
              ? ""
              : ";score_mod=" + escapedVariantText(spec.scoreMod)) +
         (spec.maskMod.empty()
              ? ""
              : ";mask_mod=" + escapedVariantText(spec.maskMod));
}

/// The first `limit` default candidates of `request`, from its strategy's
/// resource model.
static std::vector<KernelSpec>
collectDefaultCandidates(KernelSpec request, size_t limit, int64_t length,
                         const VariantTraits &traits) {
  // Nothing derives from an invalid spec (the models' arithmetic assumes
  // the validated ranges): it comes back as it is, for validateSpec() to name.
  if (!validateSpec(request).empty() || request.blockMaskProgram)
    return {request};
  request.strategy = resolveStrategy(request);
  return strategyModel(request.strategy)
      .defaultCandidates(request, limit, length, traits);
}

std::vector<KernelSpec> defaultCandidates(const KernelSpec &spec,
                                          int64_t length,
                                          const VariantTraits &traits) {
  return collectDefaultCandidates(spec, SIZE_MAX, length, traits);
}

KernelSpec withDefaults(const KernelSpec &spec, int64_t length,
                        const VariantTraits &traits) {
  return collectDefaultCandidates(spec, 1, length, traits).front();
}

size_t firstTrialWave(const KernelSpec &request, const VariantTraits &traits,
                      size_t wave) {
  if (!validateSpec(request).empty() || request.blockMaskProgram)
    return 1;
  const StrategyModel &model = strategyModel(resolveStrategy(request));
  return model.expectsTrials && model.expectsTrials(request, traits) ? wave : 1;
}

int64_t toleratedSpillBytes(const KernelSpec &candidate) {
  if (candidate.strategy == Strategy::automatic)
    return 0;
  const StrategyModel &model = strategyModel(candidate.strategy);
  return model.toleratedSpillBytes ? model.toleratedSpillBytes(candidate) : 0;
}

int64_t residentBlocks(const KernelSpec &resolved) {
  if (resolved.strategy == Strategy::automatic)
    return 0;
  const StrategyModel &model = strategyModel(resolved.strategy);
  return model.residentBlocks ? model.residentBlocks(resolved) : 0;
}

std::string cacheKey(const KernelSpec &spec, const std::string &compilerVersion,
                     const std::string &ptxasVersion) {
  llvm::SHA256 hash;
  for (const std::string &part :
       {compilerVersion, canonicalText(spec), spec.arch, ptxasVersion}) {
    hash.update(part);
    hash.update(llvm::StringRef("\n"));
  }
  std::array<uint8_t, 32> digest = hash.final();
  return llvm::toHex(digest, /*LowerCase=*/true);
}

const char *toString(Strategy strategy) {
  if (strategy == Strategy::automatic)
    return "auto";
  return strategyModel(strategy).name;
}

bool parseStrategy(const std::string &text, Strategy &strategy) {
  if (text == "auto") {
    strategy = Strategy::automatic;
    return true;
  }
  const StrategyModel *model = lookupStrategy(text);
  if (model)
    strategy = model->kind;
  return model != nullptr;
}

} // namespace fa
