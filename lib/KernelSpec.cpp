//===- KernelSpec.cpp - Everything that changes a generated kernel --*- C++ -*-===//
#include "lib/KernelSpec.h"
#include "lib/GpuTarget.h"

#include <cmath>

namespace fa {

/// Head dims beyond this are not attention as anyone runs it, and would only
/// make register and shared-memory tiles absurd.
static constexpr int64_t kMaxHeadDim = 512;
static constexpr int64_t kMaxBlockSize = 1024;

double KernelSpec::effectiveScale() const {
  return scale > 0.0 ? scale : 1.0 / std::sqrt(double(headDim));
}

std::string KernelSpec::validate() const {
  auto range = [](const char *name, int64_t value, int64_t lo, int64_t hi) {
    if (value >= lo && value <= hi)
      return std::string();
    return std::string(name) + " must be in [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "], got " + std::to_string(value);
  };
  for (std::string error :
       {range("head-dim", headDim, 1, kMaxHeadDim),
        range("block-m", blockM, 1, kMaxBlockSize),
        range("block-n", blockN, 1, kMaxBlockSize),
        range("num-warps", numWarps, 1, 32)})
    if (!error.empty())
      return error;
  if (!lookupGpuArch(arch))
    return "unsupported arch '" + arch + "'; expected one of " +
           supportedGpuArchs();
  if (scale < 0.0 || !std::isfinite(scale))
    return "softmax scale must be positive and finite, got " +
           std::to_string(scale);
  return "";
}

std::string KernelSpec::kernelName() const {
  return "fa_fwd_d" + std::to_string(headDim) + "_" + toString(dtype) +
         (causal ? "_causal_" : "_full_") + std::to_string(blockM) + "x" +
         std::to_string(blockN) + "_w" + std::to_string(numWarps);
}

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

bool parseElementType(const std::string &text, ElementType &type) {
  for (ElementType t : {ElementType::f32, ElementType::f16, ElementType::bf16})
    if (text == toString(t)) {
      type = t;
      return true;
    }
  return false;
}

} // namespace fa
