//===- Candidates.h - Ranked default configs of a strategy ------*- C++ -*-===//
//
// What the tensor-core strategies' defaults share: walking configs best
// first and keeping those that agree with every field the request fixes,
// fit (the strategy's rules and register budget) and are not listed yet,
// up to a limit.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_STRATEGY_CANDIDATES_H
#define FA_LIB_STRATEGY_CANDIDATES_H

#include "lib/KernelSpec.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace fa {

/// The tile fields a default chooses.
struct TileConfig {
  int64_t blockM, blockN, numWarps, stages;
};

/// Whether `spec` has exactly the tiles, warps and stages of `config`.
bool hasTiles(const KernelSpec &spec, const TileConfig &config);

class CandidateCollector {
public:
  CandidateCollector(const KernelSpec &request, size_t limit,
                     std::function<bool(const TileConfig &)> fits)
      : request(request), limit(limit), fits(std::move(fits)) {}

  /// Lists `config` if it agrees with the request, fits and is new.
  void consider(const TileConfig &config);

  /// The candidates so far, best first; if none, the request with its
  /// missing fields set to `fallback`'s (the compiler then says why it
  /// does not fit).
  std::vector<KernelSpec> take(const TileConfig &fallback) &&;

private:
  KernelSpec request;
  size_t limit;
  std::function<bool(const TileConfig &)> fits;
  std::vector<KernelSpec> candidates;
};

} // namespace fa

#endif // FA_LIB_STRATEGY_CANDIDATES_H
