//===- BlockMaskTables.h - A block mask's tables, computed plainly -*- C++ -*-===//
//
// The exact tables of a block mask (fa.block_mask) from a mask written in
// C++: what the generated program must produce, for the CPU and GPU tests.
//
//===----------------------------------------------------------------------===//
#ifndef FA_TEST_COMMON_BLOCKMASKTABLES_H
#define FA_TEST_COMMON_BLOCKMASKTABLES_H

#include "lib/LaunchPlan.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace fa::test {

/// keep(b, h, i, j): whether query row i keeps key j (every mask applied).
using KeepFunction = std::function<bool(int64_t, int64_t, int64_t, int64_t)>;

struct RangeTables {
  std::vector<int32_t> keyRanges;   // [B, heads, ceil(Sq / 16), 4]
  std::vector<int32_t> queryRanges; // [B, heads, ceil(Sk / 16), 4]
};

/// The exact tables of `keep` on (B, heads, Sq, Sk): per 16 rows the
/// [first, end) of the keys kept ([Sk, 0) for none), then that of the 16
/// x 16 squares of keys kept by every row, when they are consecutive
/// ([Sk, 0) for none; [first, 0) when not consecutive); per 16 keys the
/// same for the rows (with Sq).
inline RangeTables expectedRangeTables(const KeepFunction &keep,
                                       int64_t batch, int64_t heads,
                                       int64_t sq, int64_t sk) {
  const int64_t group = fa::kBlockMaskGroup;
  // One table: groups of `grouped` indices, ranges over `other` indices.
  auto table = [&](int64_t grouped, int64_t other, bool rows) {
    int64_t groups = (grouped + group - 1) / group;
    int64_t squares = (other + group - 1) / group;
    auto kept = [&](int64_t b, int64_t h, int64_t x, int64_t y) {
      return rows ? keep(b, h, x, y) : keep(b, h, y, x);
    };
    std::vector<int32_t> t;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t g = 0; g < groups; ++g) {
          int64_t xEnd = std::min(grouped, (g + 1) * group);
          int64_t lo = other, hi = 0;
          for (int64_t x = g * group; x < xEnd; ++x)
            for (int64_t y = 0; y < other; ++y)
              if (kept(b, h, x, y)) {
                lo = std::min(lo, y);
                hi = std::max(hi, y + 1);
              }
          int64_t wholeLo = other, wholeHi = 0, wholeSquares = 0;
          for (int64_t s = 0; s < squares; ++s) {
            int64_t yEnd = std::min(other, (s + 1) * group);
            bool all = true;
            for (int64_t x = g * group; x < xEnd; ++x)
              for (int64_t y = s * group; y < yEnd; ++y)
                all = all && kept(b, h, x, y);
            if (all) {
              wholeLo = std::min(wholeLo, s * group);
              wholeHi = std::max(wholeHi, yEnd);
              ++wholeSquares;
            }
          }
          int64_t spanned = (wholeHi + group - 1) / group - wholeLo / group;
          if (wholeSquares > 0 && spanned != wholeSquares)
            wholeHi = 0;
          for (int64_t v : {lo, hi, wholeLo, wholeHi})
            t.push_back(int32_t(v));
        }
    return t;
  };
  return {table(sq, sk, /*rows=*/true), table(sk, sq, /*rows=*/false)};
}

} // namespace fa::test

#endif // FA_TEST_COMMON_BLOCKMASKTABLES_H
