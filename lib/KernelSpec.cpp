//===- KernelSpec.cpp - Everything that changes a generated kernel --*- C++ -*-===//
#include "lib/KernelSpec.h"
#include "lib/GpuTarget.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "CompilerSourceHash.h"

#define FA_COMPILER_VERSION "0.1.0+src." FA_COMPILER_SOURCE_HASH

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
        range("num-warps", numWarps, 1, 32),
        range("stages", stages, 1, 1)})
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

std::string KernelSpec::canonicalText() const {
  // The scale as the bits of the double: no rounding in the key.
  uint64_t scaleBits;
  double s = effectiveScale();
  std::memcpy(&scaleBits, &s, sizeof(s));
  return "fa-kernel-spec v1;op=attention_fwd;strategy=simt;head_dim=" +
         std::to_string(headDim) + ";dtype=" + toString(dtype) +
         ";mask=" + (causal ? "causal" : "none") +
         ";block_m=" + std::to_string(blockM) +
         ";block_n=" + std::to_string(blockN) +
         ";num_warps=" + std::to_string(numWarps) +
         ";stages=" + std::to_string(stages) + ";arch=" + arch +
         ";scale=0x" + llvm::utohexstr(scaleBits, /*LowerCase=*/true);
}

KernelSpec KernelSpec::withDefaults() const {
  KernelSpec spec = *this;
  // SIMT: B_c = 32 keys per tile, one warp wide when the head dim allows;
  // 4 warps; B_r the smallest multiple of the thread rows >= 16. Measured
  // on the H200 (docs/benchmarks.md); revisit with each strategy.
  if (spec.blockN == 0)
    spec.blockN = 32;
  if (spec.numWarps == 0)
    spec.numWarps = 4;
  if (spec.blockM == 0) {
    int64_t threadCols = 32;
    while (threadCols > 1 &&
           (spec.blockN % threadCols != 0 || spec.headDim % threadCols != 0))
      threadCols /= 2;
    int64_t threadRows = spec.numWarps * 32 / threadCols;
    spec.blockM = std::max<int64_t>(16, threadRows);
    spec.blockM = (spec.blockM + threadRows - 1) / threadRows * threadRows;
  }
  return spec;
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

bool parseElementType(const std::string &text, ElementType &type) {
  for (ElementType t : {ElementType::f32, ElementType::f16, ElementType::bf16})
    if (text == toString(t)) {
      type = t;
      return true;
    }
  return false;
}

} // namespace fa
