//===- KernelSpec.cpp - Everything that changes a generated kernel --*- C++ -*-===//
#include "lib/KernelSpec.h"

#include <cmath>
#include <optional>

#include "CompilerSourceHash.h"

#define FA_COMPILER_VERSION "0.1.0+src." FA_COMPILER_SOURCE_HASH

namespace fa {

double KernelSpec::effectiveScale() const {
  return scale > 0.0 ? scale : 1.0 / std::sqrt(double(headDim));
}

bool KernelSpec::needsDefaults() const {
  if (blockMaskProgram)
    return false; // no tiles: one program shape
  return strategy == Strategy::automatic || !blockM || !blockN || !numWarps ||
         !stages;
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

const char *compilerVersion() { return FA_COMPILER_VERSION; }

const char *toString(ElementType type) {
  switch (type) {
  case ElementType::f32:
    return "f32";
  case ElementType::f16:
    return "f16";
  case ElementType::bf16:
    return "bf16";
  case ElementType::e4m3:
    return "e4m3";
  }
  return "?";
}

bool parseElementType(const std::string &text, ElementType &type) {
  for (ElementType t : {ElementType::f32, ElementType::f16, ElementType::bf16,
                        ElementType::e4m3})
    if (text == toString(t)) {
      type = t;
      return true;
    }
  return false;
}

} // namespace fa
