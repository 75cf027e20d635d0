//===- SplitKv.h - How many parts a split-KV forward uses ---------*- C++ -*-===//
//
// Few query rows over many keys (decode) leave most SMs idle: a program per
// (batch, head, query tile) is too few blocks to stream the K/V cache at
// the memory's speed. Split-KV runs each query tile's keys in parts, a
// program each, and merges the parts (fa.merge_partial). This is the rule
// for how many parts.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_SPLITKV_H
#define FA_LIB_SPLITKV_H

#include <cstdint>
#include <string>

namespace fa {

/// The most parts a caller may ask for (and the heuristic chooses).
constexpr int64_t kMaxKvParts = 128;
/// K/V tiles a part should stream at least: fewer would spend more on its
/// Q tile, its partial result and the merge than on keys.
constexpr int64_t kMinTilesPerPart = 4;

/// The parts for `programs` unsplit programs (batch x heads x query
/// tiles) of `keyTiles` K/V tiles each on `multiprocessors` SMs: 1 when
/// the programs fill the SMs already; else enough parts for about two
/// blocks per SM, each part at least kMinTilesPerPart tiles, at most
/// kMaxKvParts.
int64_t chooseKvParts(int64_t programs, int64_t keyTiles,
                      int64_t multiprocessors);

/// "" when `parts` is a number of parts a caller may ask for (0: the
/// heuristic's choice, 1: no split, up to kMaxKvParts), else why not.
std::string checkKvParts(int64_t parts);

} // namespace fa

#endif // FA_LIB_SPLITKV_H
