//===- ResolvedRequest.cpp - A request, resolved once -----------*- C++ -*-===//
#include "runtime/ResolvedRequest.h"

#include "llvm/ADT/Hashing.h"

#include <cstring>
#include <tuple>

namespace fa {

RequestKey::RequestKey(const KernelSpec &spec, int64_t bucket, bool tuned)
    : headDim(spec.headDim), dtype(spec.dtype), outDtype(spec.outputDtype()),
      causal(spec.causal), backward(spec.backward),
      deterministic(spec.deterministic), dqChains(spec.dqChains),
      blockM(spec.blockM), blockN(spec.blockN), numWarps(spec.numWarps),
      stages(spec.stages), strategy(spec.strategy), arch(spec.arch),
      scaleBits(0), scoreMod(spec.scoreMod), maskMod(spec.maskMod),
      sinks(spec.sinks), sinksPerRow(spec.sinksPerRow),
      blockMask(spec.blockMask), blockMaskProgram(spec.blockMaskProgram),
      varlen(spec.varlen), kvLens(spec.kvLens), splitKv(spec.splitKv),
      pagedKv(spec.pagedKv), pageGather(spec.pageGather),
      cacheBatchIndex(spec.cacheBatchIndex), bucket(bucket), tuned(tuned) {
  // Every field of KernelSpec changes the kernel: a new one belongs here,
  // in fields() and in the hash.
  static_assert(sizeof(scaleBits) == sizeof(spec.scale));
  std::memcpy(&scaleBits, &spec.scale, sizeof(scaleBits));
}

static auto fields(const RequestKey &k) {
  return std::tie(k.headDim, k.dtype, k.outDtype, k.causal, k.backward,
                  k.deterministic, k.dqChains, k.blockM, k.blockN, k.numWarps,
                  k.stages, k.strategy, k.arch, k.scaleBits, k.scoreMod,
                  k.maskMod, k.sinks, k.sinksPerRow, k.blockMask,
                  k.blockMaskProgram, k.varlen, k.kvLens, k.splitKv, k.pagedKv,
                  k.pageGather, k.cacheBatchIndex, k.bucket, k.tuned);
}

bool RequestKey::operator==(const RequestKey &other) const {
  return fields(*this) == fields(other);
}

size_t RequestKey::Hash::operator()(const RequestKey &k) const {
  return llvm::hash_combine(
      k.headDim, int(k.dtype), int(k.outDtype), k.causal, k.backward,
      k.deterministic, k.dqChains, k.blockM, k.blockN, k.numWarps, k.stages,
      int(k.strategy), k.arch, k.scaleBits, k.scoreMod, k.maskMod, k.sinks,
      k.sinksPerRow, k.blockMask, k.blockMaskProgram, k.varlen, k.kvLens,
      k.splitKv, k.pagedKv, k.pageGather, k.cacheBatchIndex, k.bucket, k.tuned);
}

} // namespace fa
