//===- SplitKv.cpp - How many parts a split-KV forward uses -------*- C++ -*-===//
#include "lib/SplitKv.h"
#include "lib/Strategy/Registry.h"
#include "lib/Strategy/SpecRules.h"

#include <algorithm>

namespace fa {

int64_t chooseKvParts(int64_t programs, int64_t keyTiles,
                      int64_t multiprocessors, int64_t residentBlocks) {
  if (programs <= 0 || keyTiles <= 0 || multiprocessors <= 0)
    return 1;
  // Most of the blocks that keep the SMs busy already: splitting adds the
  // merge and saves little. Where an SM holds two blocks or more, that is
  // two an SM: one block of narrow tiles keeps too few bytes in flight (B
  // 16 decode at 8 K/V heads on 32-key tiles, 128 programs on 132 SMs,
  // unsplit: 0.72 of the streaming read's bandwidth, H100).
  int64_t busyBlocks =
      multiprocessors * std::clamp<int64_t>(residentBlocks, 1, 2);
  if (programs * 5 >= busyBlocks * 4)
    return 1;
  int64_t wanted = (2 * multiprocessors + programs - 1) / programs;
  // Blocks past one wave would wait for a whole part's time.
  if (residentBlocks > 0)
    wanted =
        std::min(wanted, std::max<int64_t>(1, residentBlocks * multiprocessors /
                                                  programs));
  int64_t byTiles = keyTiles / kMinTilesPerPart;
  return std::max<int64_t>(1, std::min({wanted, byTiles, kMaxKvParts}));
}

int64_t blockNForPage(int64_t pageRows, int64_t widest, int64_t narrowest) {
  for (int64_t blockN = widest; blockN >= std::max<int64_t>(narrowest, 1);
       blockN /= 2)
    if (pageRows % blockN == 0)
      return blockN;
  return 0;
}

KernelSpec fitToPages(KernelSpec spec, int64_t pageRows, int64_t widest) {
  if (!spec.pagedKv || spec.pageGather || pageRows < 1)
    return spec;
  if (spec.blockN == 0)
    spec.blockN = blockNForPage(pageRows, widest, kNarrowestPageTile);
  if (spec.blockN == 0 || pageRows % spec.blockN != 0)
    spec.pageGather = true;
  return spec;
}

KernelSpec decodeRequest(const KernelSpec &request, int64_t queryRows,
                         int64_t pageRows, const std::string &arch,
                         const DecodeShape &shape) {
  if (request.backward || request.blockMaskProgram || queryRows < 1 ||
      queryRows > kDecodeRows || request.blockM || request.numWarps ||
      request.stages)
    return request;
  KernelSpec decode = request;
  if (decode.arch.empty())
    decode.arch = arch;
  // The split kernel's strategy: auto asks the strategies in order.
  decode.splitKv = true;
  for (const StrategyModel *model : registeredStrategies()) {
    if (request.strategy != Strategy::automatic &&
        request.strategy != model->kind)
      continue;
    if (!model->decodeTiles || !model->takesProblem(decode))
      continue;
    KernelSpec candidate = decode;
    candidate.strategy = model->kind;
    DecodeShape paged = shape;
    paged.pageRows = pageRows;
    std::optional<KernelSpec> tiles = model->decodeTiles(candidate, paged);
    if (!tiles)
      return request;
    // A page the decode tiles do not fit: their rows gathered, which the
    // H200 measured faster than narrower tiles a page holds (pages of 8
    // gathered in 32-key tiles: 102 us at B 8, 8k keys; pages of 16 read
    // in 16-key tiles: 119 us).
    if (pageRows > 0 && pageRows % tiles->blockN != 0)
      tiles->pageGather = true;
    tiles->splitKv = request.splitKv;
    if (!validateSpec(*tiles).empty()) // on the arch it will run on
      return request;
    tiles->arch = request.arch;
    return *tiles;
  }
  return request;
}

std::string checkKvParts(int64_t parts) {
  if (parts < 0 || parts > kMaxKvParts)
    return "kv splits must be 0 (chosen by the runtime), 1 (no split) or up "
           "to " +
           std::to_string(kMaxKvParts) + ", got " + std::to_string(parts);
  return "";
}

} // namespace fa
