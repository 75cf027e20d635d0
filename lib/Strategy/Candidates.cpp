//===- Candidates.cpp - Ranked default configs of a strategy ----*- C++ -*-===//
#include "lib/Strategy/Candidates.h"

#include "llvm/ADT/STLExtras.h"

namespace fa {

bool hasTiles(const KernelSpec &spec, const TileConfig &config) {
  return spec.blockM == config.blockM && spec.blockN == config.blockN &&
         spec.numWarps == config.numWarps && spec.stages == config.stages;
}

void CandidateCollector::consider(const TileConfig &c) {
  if (candidates.size() >= limit ||
      (request.blockM && request.blockM != c.blockM) ||
      (request.blockN && request.blockN != c.blockN) ||
      (request.numWarps && request.numWarps != c.numWarps) ||
      (request.stages && request.stages != c.stages))
    return;
  if (!fits(c))
    return;
  if (llvm::any_of(candidates,
                   [&](const KernelSpec &s) { return hasTiles(s, c); }))
    return;
  KernelSpec spec = request;
  spec.blockM = c.blockM;
  spec.blockN = c.blockN;
  spec.numWarps = c.numWarps;
  spec.stages = c.stages;
  candidates.push_back(spec);
}

std::vector<KernelSpec> CandidateCollector::take(const TileConfig &fallback) && {
  if (!candidates.empty())
    return std::move(candidates);
  KernelSpec spec = request;
  spec.numWarps = spec.numWarps ? spec.numWarps : fallback.numWarps;
  spec.blockM = spec.blockM ? spec.blockM : fallback.blockM;
  spec.blockN = spec.blockN ? spec.blockN : fallback.blockN;
  spec.stages = spec.stages ? spec.stages : fallback.stages;
  return {spec};
}

} // namespace fa
