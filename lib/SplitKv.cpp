//===- SplitKv.cpp - How many parts a split-KV forward uses -------*- C++ -*-===//
#include "lib/SplitKv.h"

#include <algorithm>

namespace fa {

int64_t chooseKvParts(int64_t programs, int64_t keyTiles,
                      int64_t multiprocessors) {
  if (programs <= 0 || keyTiles <= 0 || multiprocessors <= 0)
    return 1;
  // Most of a wave already: splitting adds the merge and saves little.
  if (programs * 5 >= multiprocessors * 4)
    return 1;
  int64_t wanted = (2 * multiprocessors + programs - 1) / programs;
  int64_t byTiles = keyTiles / kMinTilesPerPart;
  return std::max<int64_t>(1, std::min({wanted, byTiles, kMaxKvParts}));
}

std::string checkKvParts(int64_t parts) {
  if (parts < 0 || parts > kMaxKvParts)
    return "kv splits must be 0 (chosen by the runtime), 1 (no split) or up "
           "to " +
           std::to_string(kMaxKvParts) + ", got " + std::to_string(parts);
  return "";
}

} // namespace fa
