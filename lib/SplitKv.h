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

#include "lib/KernelSpec.h"
#include "lib/Strategy/Registry.h"

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
/// the programs fill the SMs already (two blocks an SM where
/// `residentBlocks` >= 2, else one); else enough parts for about two
/// blocks per SM, but no more than one wave of `residentBlocks` blocks an
/// SM (0: not known), each part at least kMinTilesPerPart tiles, at most
/// kMaxKvParts.
int64_t chooseKvParts(int64_t programs, int64_t keyTiles,
                      int64_t multiprocessors, int64_t residentBlocks = 0);

/// The widest of `widest`, widest / 2, ... down to `narrowest` that divides
/// `pageRows` (a K/V tile lies in one page of a paged cache), or 0 if none
/// does.
int64_t blockNForPage(int64_t pageRows, int64_t widest, int64_t narrowest);

/// The narrowest K/V tile a paged cache's prefill defaults read a tile a
/// page (one page lookup a tile); a page that no tile this wide or wider
/// divides is read row by row (KernelSpec::pageGather). (The decode tiles
/// gather any page they do not fit: measured faster than narrower tiles.)
constexpr int64_t kNarrowestPageTile = 16;

/// `spec` (a paged forward) fitted to pages of `pageRows` rows: a block-n
/// left to the defaults becomes the widest of `widest`, widest / 2, ...
/// down to kNarrowestPageTile that divides the page; where none does, or
/// the spec's own block-n does not, the rows are gathered (pageGather).
/// Other specs unchanged.
KernelSpec fitToPages(KernelSpec spec, int64_t pageRows, int64_t widest);

/// Query rows a head (after the query groups are packed) up to which a
/// forward is a decode: its query tile holds every row, and its time is
/// the K/V read.
constexpr int64_t kDecodeRows = 16;

/// `request` with the decode tiles of the strategy it resolves to (the
/// first registered one with decode tiles that takes the problem, for
/// auto; StrategyModel::decodeTiles, for `shape`) where it is a forward of
/// at most kDecodeRows query rows a head whose tiles are left to the
/// defaults, on `arch` where the request names none. `pageRows` > 0: a
/// paged cache of pages of that many rows (a block-n the request sets is
/// kept), read a tile a page where the block-n divides the page, else row
/// by row (pageGather). Otherwise `request` unchanged.
KernelSpec decodeRequest(const KernelSpec &request, int64_t queryRows,
                         int64_t pageRows, const std::string &arch,
                         const DecodeShape &shape = {});

/// "" when `parts` is a number of parts a caller may ask for (0: the
/// heuristic's choice, 1: no split, up to kMaxKvParts), else why not.
std::string checkKvParts(int64_t parts);

} // namespace fa

#endif // FA_LIB_SPLITKV_H
