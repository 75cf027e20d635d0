//===- KernelSpec.cpp - Everything that changes a generated kernel --*- C++ -*-===//
#include "lib/KernelSpec.h"
#include "lib/Strategy/SpecRules.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <thread>

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
    const std::function<std::optional<int64_t>(const KernelSpec &)>
        &compileAndSpills,
    const std::function<void(size_t first, size_t last)> &compileAhead,
    size_t wave, size_t firstWave) {
  std::optional<size_t> chosen;
  int64_t chosenSpills = 0;
  size_t aheadEnd = 1; // the first candidate is compiled alone
  if (compileAhead && firstWave > 1 && candidates.size() > 1) {
    aheadEnd = std::min(candidates.size(), firstWave);
    compileAhead(0, aheadEnd);
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (compileAhead && wave > 1 && i >= aheadEnd) {
      aheadEnd = std::min(candidates.size(), i + wave);
      compileAhead(i, aheadEnd);
    }
    std::optional<int64_t> spills = compileAndSpills(candidates[i]);
    if (!spills)
      continue;
    if (*spills <= toleratedSpillBytes(candidates[i]))
      return i;
    if (!chosen || *spills < chosenSpills) {
      chosen = i;
      chosenSpills = *spills;
    }
  }
  return chosen;
}

size_t trialWave() {
  if (const char *wave = std::getenv("FA_TRIAL_WAVE"))
    if (int value = std::atoi(wave); value >= 1 && value <= 64)
      return size_t(value);
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4);
}

void runConcurrently(size_t first, size_t last,
                     const std::function<void(size_t)> &work) {
  if (first >= last)
    return;
  std::vector<std::thread> others;
  for (size_t i = first + 1; i < last; ++i)
    others.emplace_back(work, i);
  work(first);
  for (std::thread &t : others)
    t.join();
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
