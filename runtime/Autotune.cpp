//===- Autotune.cpp - Timed choice among the default candidates --*- C++ -*-===//
#include "runtime/Autotune.h"
#include "lib/Strategy/SpecRules.h"
#include "lib/TextNesting.h"
#include "runtime/KernelMetadata.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SHA256.h"

#include <algorithm>

namespace fa {

int64_t lengthBucket(int64_t queryLength, int64_t keyLength) {
  int64_t length = std::max<int64_t>({queryLength, keyLength, 64});
  int64_t bucket = 64;
  while (bucket < length && bucket < (int64_t(1) << 40))
    bucket *= 2;
  return bucket;
}

std::string autotuneKey(const KernelSpec &request, int64_t bucket,
                        const std::string &compilerVersion,
                        const std::string &assemblerId) {
  llvm::SHA256 hash;
  for (const std::string &part :
       {std::string("fa-autotune v1"), compilerVersion, canonicalText(request),
        request.arch, "bucket=" + std::to_string(bucket), assemblerId}) {
    hash.update(part);
    hash.update(llvm::StringRef("\n"));
  }
  std::array<uint8_t, 32> digest = hash.final();
  return "autotune-" + llvm::toHex(digest, /*LowerCase=*/true);
}

static llvm::json::Object tilesOf(const KernelSpec &spec) {
  return llvm::json::Object{{"block_m", spec.blockM},
                            {"block_n", spec.blockN},
                            {"num_warps", spec.numWarps},
                            {"stages", spec.stages}};
}

std::string tunedChoiceJson(const std::string &key, const KernelSpec &request,
                            int64_t bucket,
                            const KernelSpec &chosen,
                            const std::vector<TimedCandidate> &timings) {
  llvm::json::Array timed;
  for (const TimedCandidate &t : timings) {
    llvm::json::Object entry = tilesOf(t.spec);
    entry["milliseconds"] = t.milliseconds;
    timed.push_back(std::move(entry));
  }
  llvm::json::Object root{{"key", key},
                          {"request", canonicalText(request)},
                          {"bucket", bucket},
                          {"chosen", tilesOf(chosen)},
                          {"timings", std::move(timed)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(root));
  return text;
}

std::string parseTunedChoice(const std::string &json,
                             const KernelSpec &request, int64_t bucket,
                             KernelSpec &chosen) {
  // Bounded before the (recursive) JSON parser sees it.
  if (json.size() > kMaxMetadataBytes)
    return "larger than " + std::to_string(kMaxMetadataBytes) + " bytes";
  if (std::string error =
          checkTextNesting(json, "the record", kMaxMetadataNesting);
      !error.empty())
    return error;
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed) {
    std::string why = llvm::toString(parsed.takeError());
    return "not JSON: " + why;
  }
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return "not a JSON object";
  std::optional<llvm::StringRef> text = root->getString("request");
  if (!text || *text != canonicalText(request))
    return "it was made for another request";
  if (root->getInteger("bucket") != bucket)
    return "it was made for another length bucket";
  const llvm::json::Object *tiles = root->getObject("chosen");
  if (!tiles)
    return "it names no chosen tiles";
  KernelSpec spec = request;
  auto field = [&](const char *name, int64_t &out) {
    std::optional<int64_t> value = tiles->getInteger(name);
    if (!value)
      return false;
    out = *value;
    return true;
  };
  if (!field("block_m", spec.blockM) || !field("block_n", spec.blockN) ||
      !field("num_warps", spec.numWarps) || !field("stages", spec.stages))
    return "its tiles are incomplete";
  spec.strategy = resolveStrategy(request);
  if (spec.needsDefaults())
    return "its tiles are incomplete";
  if (std::string error = validateSpec(spec); !error.empty())
    return "its tiles are invalid: " + error;
  chosen = spec;
  return "";
}

} // namespace fa
