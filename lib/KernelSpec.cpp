//===- KernelSpec.cpp - Everything that changes a generated kernel --*- C++ -*-===//
#include "lib/KernelSpec.h"
#include "lib/TextNesting.h"
#include "lib/GpuTarget.h"
#include "lib/Strategy/Registry.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <vector>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>

#include "CompilerSourceHash.h"

#define FA_COMPILER_VERSION "0.1.0+src." FA_COMPILER_SOURCE_HASH

namespace fa {

static constexpr int64_t kMaxBlockSize = 1024;

double KernelSpec::effectiveScale() const {
  return scale > 0.0 ? scale : 1.0 / std::sqrt(double(headDim));
}

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
  return checkTextNesting(text, std::string(name) + " text");
}

std::string KernelSpec::validate() const {
  if (blockMaskProgram) {
    if (maskMod.empty())
      return "a block mask program computes a mask_mod's tables: give a "
             "mask_mod";
    if (backward)
      return "a block mask program serves the forward and the backward "
             "alike: it is not a backward";
    if (!lookupGpuArch(arch))
      return unsupportedArchMessage(arch);
    return checkVariantText("mask_mod", maskMod);
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
       {range("head-dim", headDim, 1, kMaxHeadDim),
        rangeOrDefault("block-m", blockM, kMaxBlockSize),
        rangeOrDefault("block-n", blockN, kMaxBlockSize),
        rangeOrDefault("num-warps", numWarps, 32)})
    if (!error.empty())
      return error;
  if (std::string error = strategyModel(resolvedStrategy()).checkSpec(*this);
      !error.empty())
    return error;
  if (!lookupGpuArch(arch))
    return unsupportedArchMessage(arch);
  // 0 is the default 1/sqrt(head-dim); the kernels compute in float32.
  if (scale != 0.0) {
    float asFloat = static_cast<float>(scale);
    if (!(scale > 0.0) || !std::isfinite(scale) || !std::isfinite(asFloat) ||
        asFloat < std::numeric_limits<float>::min())
      return "softmax scale must be positive and finite in float32 (0 for "
             "the default 1/sqrt(head-dim)), got " +
             formatScale(scale);
  }
  if (deterministic && !backward)
    return "deterministic applies to the backward (the forward has no "
           "accumulation across programs)";
  for (auto [name, text] : {std::pair<const char *, const std::string *>{
                                "score_mod", &scoreMod},
                            {"mask_mod", &maskMod}}) {
    if (std::string error = checkVariantText(name, *text); !error.empty())
      return error;
  }
  if (deterministic && !maskMod.empty())
    return "the deterministic backward does not take a mask_mod yet (its dQ "
           "turn order assumes the K/V range of a plain or causal mask)";
  if (blockMask && maskMod.empty())
    return "a block mask bounds the tiles of a mask_mod's kept scores: give "
           "a mask_mod with it";
  if (deterministic && sinks)
    return "the deterministic backward does not take sinks yet (their "
           "gradient is added in any order)";
  if (varlen && deterministic)
    return "the deterministic backward does not take a varlen batch "
           "(cu_seqlens) yet";
  if (varlen && blockMask)
    return "a block mask does not take a varlen batch (cu_seqlens) yet";
  if (kvLens && backward)
    return "the backward does not take kv_lens (a KV cache's lengths)";
  if (kvLens && blockMask)
    return "a block mask does not take kv_lens (a KV cache's lengths) yet";
  if (splitKv && backward)
    return "the backward does not split the keys (split-KV is a forward "
           "for few query rows)";
  if (splitKv && blockMask)
    return "a block mask does not take split-KV yet";
  if (pagedKv && backward)
    return "the backward does not take a paged KV cache (block_table)";
  if (pagedKv && varlen)
    return "a paged KV cache (block_table) does not take a varlen batch "
           "(cu_seqlens) yet";
  if (pagedKv && blockMask)
    return "a block mask does not take a paged KV cache (block_table) yet";
  if (pageGather && !pagedKv)
    return "page_gather reads a paged KV cache row by row; it needs "
           "paged_kv (a block_table)";
  if (cacheBatchIndex && (backward || varlen || pagedKv || blockMask))
    return std::string("cache_batch_idx does not take ") +
           (backward  ? "the backward"
            : varlen  ? "a varlen batch (cu_seqlens) yet"
            : pagedKv ? "a paged KV cache (block_table) yet"
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

bool KernelSpec::needsDefaults() const {
  if (blockMaskProgram)
    return false; // no tiles: one program shape
  return strategy == Strategy::automatic || !blockM || !blockN || !numWarps ||
         !stages;
}

Strategy KernelSpec::resolvedStrategy() const {
  if (strategy != Strategy::automatic)
    return strategy;
  // The first registered strategy that takes the problem (the last takes
  // every one): see registeredStrategies() for the order.
  for (const StrategyModel *model : registeredStrategies())
    if (model->takesProblem(*this))
      return model->kind;
  return registeredStrategies().back()->kind;
}

std::string KernelSpec::kernelName() const {
  if (blockMaskProgram)
    return std::string("fa_block_mask_") + (causal ? "causal" : "full") +
           "_mod" +
           llvm::utohexstr(llvm::xxh3_64bits(maskMod) >> 32,
                           /*LowerCase=*/true, /*Width=*/8);
  std::string name = std::string(backward ? "fa_bwd_d" : "fa_fwd_d") +
                     std::to_string(headDim) + "_" +
                     toString(dtype) + (causal ? "_causal_" : "_full_") +
                     std::to_string(blockM) + "x" + std::to_string(blockN) +
                     "_w" + std::to_string(numWarps);
  if (backward && deterministic)
    name += "_det";
  if (sinks)
    name += "_sinks";
  if (blockMask)
    name += "_blockmask";
  if (varlen)
    name += "_varlen";
  if (kvLens)
    name += "_kvlens";
  if (pagedKv)
    name += pageGather ? "_pagedrows" : "_paged";
  if (cacheBatchIndex)
    name += "_kvindex";
  if (splitKv)
    name += "_splitkv";
  if (hasVariant()) {
    // Which variant: a stable hash of both texts (the cache key has them
    // whole).
    uint64_t hash = llvm::xxh3_64bits(scoreMod + '\0' + maskMod);
    name += "_mod" + llvm::utohexstr(hash >> 32, /*LowerCase=*/true,
                                     /*Width=*/8);
  }
  const StrategyModel &model = strategyModel(resolvedStrategy());
  if (model.pipelined)
    name += "_s" + std::to_string(stages) + "_" + model.name;
  return name;
}

std::string KernelSpec::canonicalText() const {
  if (blockMaskProgram)
    return std::string("fa-kernel-spec v2;op=block_mask;mask=") +
           (causal ? "causal" : "none") + ";arch=" + arch +
           ";mask_mod=" + escapedVariantText(maskMod);
  // The scale as the bits of the double: no rounding in the key.
  uint64_t scaleBits;
  double s = effectiveScale();
  std::memcpy(&scaleBits, &s, sizeof(s));
  return std::string("fa-kernel-spec v2;op=") +
         (backward ? (deterministic ? "attention_bwd_deterministic"
                                    : "attention_bwd")
                   : "attention_fwd") +
         ";strategy=" + toString(resolvedStrategy()) +
         ";head_dim=" + std::to_string(headDim) + ";dtype=" + toString(dtype) +
         ";mask=" + (causal ? "causal" : "none") +
         ";block_m=" + std::to_string(blockM) +
         ";block_n=" + std::to_string(blockN) +
         ";num_warps=" + std::to_string(numWarps) +
         ";stages=" + std::to_string(stages) + ";arch=" + arch + ";scale=0x" +
         llvm::utohexstr(scaleBits, /*LowerCase=*/true) +
         // Before the variant texts, which run to the end of the line and
         // may hold any characters.
         (sinks ? ";sinks" : "") + (blockMask ? ";block_mask" : "") +
         (varlen ? ";varlen" : "") + (kvLens ? ";kv_lens" : "") +
         (pagedKv ? ";paged_kv" : "") + (pageGather ? ";page_gather" : "") +
         (cacheBatchIndex ? ";cache_batch_idx" : "") +
         (splitKv ? ";split_kv" : "") +
         (scoreMod.empty() ? ""
                           : ";score_mod=" + escapedVariantText(scoreMod)) +
         (maskMod.empty() ? "" : ";mask_mod=" + escapedVariantText(maskMod));
}

/// The first `limit` default candidates of `request`, from its strategy's
/// resource model.
static std::vector<KernelSpec> collectDefaultCandidates(KernelSpec request,
                                                        size_t limit,
                                                        int64_t length) {
  // Nothing derives from an invalid spec (the models' arithmetic assumes
  // the validated ranges): it comes back as it is, for validate() to name.
  if (!request.validate().empty() || request.blockMaskProgram)
    return {request};
  request.strategy = request.resolvedStrategy();
  return strategyModel(request.strategy)
      .defaultCandidates(request, limit, length);
}

std::vector<KernelSpec> KernelSpec::defaultCandidates(int64_t length) const {
  return collectDefaultCandidates(*this, SIZE_MAX, length);
}

KernelSpec KernelSpec::withDefaults(int64_t length) const {
  return collectDefaultCandidates(*this, 1, length).front();
}

std::optional<size_t> chooseDefaultCandidate(
    const std::vector<KernelSpec> &candidates,
    const std::function<std::optional<bool>(const KernelSpec &)>
        &compileAndSpills) {
  std::optional<size_t> chosen;
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::optional<bool> spills = compileAndSpills(candidates[i]);
    if (!spills)
      continue;
    if (!chosen || !*spills)
      chosen = i;
    if (!*spills)
      break;
  }
  return chosen;
}

std::string cacheKey(const KernelSpec &spec, const std::string &compilerVersion,
                     const std::string &ptxasVersion) {
  llvm::SHA256 hash;
  for (const std::string &part :
       {compilerVersion, spec.canonicalText(), spec.arch, ptxasVersion}) {
    hash.update(part);
    hash.update(llvm::StringRef("\n"));
  }
  std::array<uint8_t, 32> digest = hash.final();
  return llvm::toHex(digest, /*LowerCase=*/true);
}

const char *compilerVersion() { return FA_COMPILER_VERSION; }

const char *toString(ElementType type) {
  switch (type) {
  case ElementType::f32:
    return "f32";
  case ElementType::f16:
    return "f16";
  case ElementType::bf16:
    return "bf16";
  }
  return "?";
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

bool parseElementType(const std::string &text, ElementType &type) {
  for (ElementType t : {ElementType::f32, ElementType::f16, ElementType::bf16})
    if (text == toString(t)) {
      type = t;
      return true;
    }
  return false;
}

} // namespace fa
