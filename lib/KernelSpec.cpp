//===- KernelSpec.cpp - Everything that changes a generated kernel --*- C++ -*-===//
#include "lib/KernelSpec.h"
#include "lib/GpuTarget.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"

#include <algorithm>
#include <vector>
#include <cmath>
#include <cstring>
#include <optional>

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

int64_t simtThreadColumns(int64_t blockN, int64_t headDim) {
  int64_t cols = 32;
  while (cols > 1 && (blockN % cols != 0 || headDim % cols != 0))
    cols /= 2;
  return cols;
}

/// Shared memory of the SIMT kernel: Q, K, V and P tiles, rows padded by
/// 4 elements when every row is a multiple of 4 (else 1), each buffer
/// 16-byte aligned (as fa-place-simt lays it out).
static int64_t simtSharedBytes(int64_t bm, int64_t bn, int64_t d,
                               int64_t elementBytes) {
  int64_t pad = d % 4 == 0 && bn % 4 == 0 ? 4 : 1;
  auto aligned = [&](int64_t elements) {
    return (elements * elementBytes + 15) / 16 * 16;
  };
  // Q, K, V and P, all in the input precision.
  return aligned(bm * (d + pad)) + 2 * aligned(bn * (d + pad)) +
         aligned(bm * (bn + pad));
}

/// Whether (bm, bn, warps) fits: the thread grid divides the tiles, the
/// shared memory fits the arch, and the per-thread tiles (accumulator,
/// scores, row state, 32 for the rest) stay within the registers a thread
/// of the block can have (maxRegistersPerThread).
static bool simtConfigFits(int64_t bm, int64_t bn, int64_t warps, int64_t d,
                           int64_t elementBytes, int64_t maxShared) {
  int64_t cols = simtThreadColumns(bn, d);
  int64_t rows = warps * 32 / cols;
  if (rows == 0 || bm % rows != 0)
    return false;
  int64_t registers = (bm / rows) * (d / cols + bn / cols + 4) + 32;
  return registers <= maxRegistersPerThread(warps * 32) &&
         simtSharedBytes(bm, bn, d, elementBytes) +
                 kStaticSharedMemoryReserve <=
             maxShared;
}

/// The first `limit` default candidates of `request` (see
/// KernelSpec::defaultCandidates).
static std::vector<KernelSpec> collectDefaultCandidates(const KernelSpec &request,
                                                        size_t limit) {
  const int64_t blockM = request.blockM, blockN = request.blockN,
                numWarps = request.numWarps, headDim = request.headDim;
  if (blockM && blockN && numWarps)
    return {request};
  // Ranked by throughput measured on the H200 (docs/benchmarks.md), with
  // vectorized shared loads (rows padded to 16 bytes): larger
  // tiles with several rows and columns per thread reuse each shared-memory
  // read for more FMAs. Those that fit the arch and the given fields, in
  // rank order; the last ones fit every head dim.
  struct Config {
    int64_t bm, bn, warps;
  };
  static constexpr Config kSmallHeads[] = {
      {128, 128, 16}, {64, 64, 8}, {128, 64, 8}, {64, 64, 4}, {32, 64, 4},
      {32, 32, 4}};
  static constexpr Config kLargeHeads[] = {
      {128, 64, 8}, {64, 128, 8}, {64, 64, 8}, {32, 64, 4}, {32, 32, 4},
      {16, 32, 4}};
  int64_t elementBytes = request.dtype == ElementType::f32 ? 4 : 2;
  int64_t maxShared = 48 * 1024;
  if (std::optional<GpuArch> target = lookupGpuArch(request.arch))
    maxShared = target->maxSharedMemoryPerBlock;
  std::vector<KernelSpec> candidates;
  auto consider = [&](int64_t bm, int64_t bn, int64_t warps) {
    if (candidates.size() >= limit ||
        (blockM && blockM != bm) || (blockN && blockN != bn) ||
        (numWarps && numWarps != warps) ||
        !simtConfigFits(bm, bn, warps, headDim, elementBytes, maxShared))
      return;
    if (llvm::any_of(candidates, [&](const KernelSpec &c) {
          return c.blockM == bm && c.blockN == bn && c.numWarps == warps;
        }))
      return;
    KernelSpec spec = request;
    spec.blockM = bm;
    spec.blockN = bn;
    spec.numWarps = warps;
    candidates.push_back(spec);
  };
  for (const Config &c : headDim <= 64 ? llvm::ArrayRef<Config>(kSmallHeads)
                                       : llvm::ArrayRef<Config>(kLargeHeads))
    consider(c.bm, c.bn, c.warps);
  // Head dims the table does not fit (odd ones, very large ones): the
  // largest tiles that fit, searched from big to small.
  for (int64_t bm : {64, 32, 16, 8})
    for (int64_t bn : {64, 32, 16, 8})
      for (int64_t warps : {8, 4, 2, 1})
        consider(bm, bn, warps);
  if (!candidates.empty())
    return candidates;
  // Nothing fits (the compiler will say why): 32 keys per tile, 4 warps,
  // one tile row per thread row.
  KernelSpec spec = request;
  if (spec.blockN == 0)
    spec.blockN = 32;
  if (spec.numWarps == 0)
    spec.numWarps = 4;
  if (spec.blockM == 0) {
    int64_t threadRows =
        spec.numWarps * 32 / simtThreadColumns(spec.blockN, spec.headDim);
    spec.blockM = std::max<int64_t>(16, threadRows);
    spec.blockM = (spec.blockM + threadRows - 1) / threadRows * threadRows;
  }
  return {spec};
}

std::vector<KernelSpec> KernelSpec::defaultCandidates() const {
  return collectDefaultCandidates(*this, SIZE_MAX);
}

KernelSpec KernelSpec::withDefaults() const {
  return collectDefaultCandidates(*this, 1).front();
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
