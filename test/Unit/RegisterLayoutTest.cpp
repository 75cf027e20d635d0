//===- RegisterLayoutTest.cpp - The register layouts of the encodings -----===//
//
// TileEncodingInterface::getRegisterLayout for every register encoding:
// each element of a tile is held exactly once (per replica of a row), the
// tables match the encodings' documented pictures, per-row slots agree with
// the 2-d slots, and the row-reduction lane masks combine exactly the lanes
// that hold a row.
//
//===----------------------------------------------------------------------===//

#include "dialect/FADialect.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>

using namespace mlir;
using namespace mlir::fa;

namespace {

class RegisterLayoutTest : public ::testing::Test {
protected:
  RegisterLayoutTest() { context.loadDialect<FADialect>(); }

  RegisterLayout layoutOf(Attribute encoding, ArrayRef<int64_t> shape) {
    FailureOr<RegisterLayout> layout =
        cast<TileEncodingInterface>(encoding).getRegisterLayout(shape);
    EXPECT_TRUE(succeeded(layout));
    return *layout;
  }

  /// (thread, slot) pairs holding each element of the tile.
  static std::map<std::pair<int64_t, int64_t>,
                  std::vector<std::pair<int64_t, int64_t>>>
  holders(const RegisterLayout &layout, int64_t threads) {
    std::map<std::pair<int64_t, int64_t>,
             std::vector<std::pair<int64_t, int64_t>>>
        held;
    for (int64_t t = 0; t < threads; ++t)
      for (int64_t s = 0; s < layout.numSlots(); ++s)
        held[layout.elementOf(t, s)].push_back({t, s});
    return held;
  }

  /// Every element of a rows x cols tile is held `copies` times and
  /// nothing outside [0, rows) x [0, paddedCols) is held.
  static void expectCovers(const RegisterLayout &layout, int64_t threads,
                           int64_t rows, int64_t cols, int64_t copies,
                           int64_t paddedCols = 0) {
    auto held = holders(layout, threads);
    int64_t width = paddedCols ? paddedCols : cols;
    EXPECT_EQ(int64_t(held.size()), rows * width);
    for (auto &[element, by] : held) {
      EXPECT_GE(element.first, 0);
      EXPECT_LT(element.first, rows);
      EXPECT_GE(element.second, 0);
      EXPECT_LT(element.second, width);
      EXPECT_EQ(int64_t(by.size()), copies)
          << "element (" << element.first << ", " << element.second << ")";
    }
  }

  /// Slots agree with row slots, and slotsOfRow lists them in order.
  static void expectRowSlotsConsistent(const RegisterLayout &layout) {
    ASSERT_EQ(layout.rowSlotOf.size(), layout.rowOffset.size());
    for (int64_t s = 0; s < layout.numSlots(); ++s)
      EXPECT_EQ(layout.rowOffset[s],
                layout.rowSlotOffset[layout.rowSlotOf[s]]);
    int64_t listed = 0;
    for (int64_t r = 0; r < layout.numRowSlots(); ++r) {
      SmallVector<int64_t> slots = layout.slotsOfRow(r);
      EXPECT_TRUE(std::is_sorted(slots.begin(), slots.end()));
      listed += slots.size();
    }
    EXPECT_EQ(listed, layout.numSlots());
  }

  /// The lanes a row reduction combines (the closure of the XOR masks
  /// within the warp) are exactly the threads that hold the row.
  static void expectReductionCoversRow(const RegisterLayout &layout,
                                       int64_t threads) {
    ASSERT_TRUE(layout.rowsInOneWarp);
    for (int64_t t = 0; t < threads; ++t) {
      std::set<int64_t> reached = {t};
      for (int64_t mask : layout.rowReduceMasks) {
        std::set<int64_t> next = reached;
        for (int64_t u : reached)
          next.insert(u ^ mask);
        reached = next;
      }
      int64_t row = layout.elementOf(t, 0).first;
      std::set<int64_t> sharing;
      for (int64_t u = 0; u < threads; ++u)
        for (int64_t s = 0; s < layout.numSlots(); ++s)
          if (layout.elementOf(u, s).first == row)
            sharing.insert(u);
      EXPECT_EQ(reached, sharing) << "thread " << t;
      // Masks are applied in the order given, each once: 2^n lanes.
      EXPECT_EQ(int64_t(reached.size()),
                int64_t(1) << layout.rowReduceMasks.size());
    }
  }

  MLIRContext context;
};

// The picture in #fa.blocked's description: threads = [2, 4] on 4 x 8;
// thread 5 holds (r1, c1), (r1, c5), (r3, c1), (r3, c5).
TEST_F(RegisterLayoutTest, BlockedMatchesItsPicture) {
  auto blocked = BlockedEncodingAttr::get(&context, 2, 4);
  RegisterLayout layout = layoutOf(blocked, {4, 8});
  ASSERT_EQ(layout.numSlots(), 4);
  EXPECT_EQ(layout.elementOf(5, 0), std::make_pair(int64_t(1), int64_t(1)));
  EXPECT_EQ(layout.elementOf(5, 1), std::make_pair(int64_t(1), int64_t(5)));
  EXPECT_EQ(layout.elementOf(5, 2), std::make_pair(int64_t(3), int64_t(1)));
  EXPECT_EQ(layout.elementOf(5, 3), std::make_pair(int64_t(3), int64_t(5)));
  EXPECT_EQ(layout.numRowSlots(), 2);
  EXPECT_EQ(layout.rowReduceMasks, (SmallVector<int64_t>{2, 1}));
  EXPECT_EQ(layout.vectorWidth, 1);
  expectCovers(layout, 8, 4, 8, 1);
  expectRowSlotsConsistent(layout);
  expectReductionCoversRow(layout, 8);
}

TEST_F(RegisterLayoutTest, BlockedShapes) {
  // The lecture's kernel: 8 warps as a 8 x 32 grid on an 8 x 32 score tile,
  // and its per-row vectors.
  auto blocked = BlockedEncodingAttr::get(&context, 8, 32);
  RegisterLayout scores = layoutOf(blocked, {8, 32});
  expectCovers(scores, 256, 8, 32, 1);
  expectReductionCoversRow(scores, 256);
  EXPECT_EQ(scores.rowReduceMasks, (SmallVector<int64_t>{16, 8, 4, 2, 1}));
  RegisterLayout rows = layoutOf(blocked, {8});
  EXPECT_FALSE(rows.is2d());
  EXPECT_EQ(rows.numSlots(), 1);
  // One thread per row holds it whole: no shuffles, contiguous columns.
  auto column = BlockedEncodingAttr::get(&context, 4, 1);
  RegisterLayout whole = layoutOf(column, {8, 16});
  expectCovers(whole, 4, 8, 16, 1);
  expectRowSlotsConsistent(whole);
  EXPECT_TRUE(whole.rowReduceMasks.empty());
  EXPECT_EQ(whole.vectorWidth, 16);
}

// #fa.mma's picture: lane (g, t) holds (g, 2t), (g, 2t + 1), (g + 8, 2t),
// (g + 8, 2t + 1) of each 16 x 8 fragment; warp w the rows of slice w.
TEST_F(RegisterLayoutTest, MmaAccumulatorMatchesItsTable) {
  auto mma = MmaEncodingAttr::get(&context, 4);
  RegisterLayout layout = layoutOf(mma, {128, 64});
  // 128 / 4 warps = 32 rows = 2 row blocks; 8 n8 blocks; 4 elements each.
  ASSERT_EQ(layout.numSlots(), 2 * 8 * 4);
  int64_t lane5 = 5; // g = 1, t = 1
  EXPECT_EQ(layout.elementOf(lane5, 0), std::make_pair(int64_t(1), int64_t(2)));
  EXPECT_EQ(layout.elementOf(lane5, 1), std::make_pair(int64_t(1), int64_t(3)));
  EXPECT_EQ(layout.elementOf(lane5, 2), std::make_pair(int64_t(9), int64_t(2)));
  EXPECT_EQ(layout.elementOf(lane5, 3), std::make_pair(int64_t(9), int64_t(3)));
  EXPECT_EQ(layout.elementOf(lane5, 4), std::make_pair(int64_t(1), int64_t(10)));
  // Second row block, warp 2: rows 64 + 16 + g.
  EXPECT_EQ(layout.elementOf(2 * 32 + lane5, 8 * 4).first, 64 + 16 + 1);
  EXPECT_EQ(layout.numRowSlots(), 4);
  EXPECT_EQ(layout.vectorWidth, 2);
  expectCovers(layout, 128, 128, 64, 1);
  expectRowSlotsConsistent(layout);
  expectReductionCoversRow(layout, 128);
  // Per-row values: rows g and g + 8 of each row block, in the 4 lanes of
  // a quad.
  RegisterLayout rows = layoutOf(mma, {128});
  EXPECT_EQ(rows.numSlots(), 4);
  expectCovers(rows, 128, 128, 1, 4);
  expectRowSlotsConsistent(rows);
}

TEST_F(RegisterLayoutTest, MmaWarpGrid) {
  // 8 warps as 4 x 2: warp w owns rows (w / 2) * 32.., columns (w % 2) * 64..
  auto mma = MmaEncodingAttr::get(&context, 8, 2);
  RegisterLayout layout = layoutOf(mma, {128, 128});
  EXPECT_FALSE(layout.rowsInOneWarp);
  expectCovers(layout, 256, 128, 128, 1);
  expectRowSlotsConsistent(layout);
  EXPECT_EQ(layout.elementOf(3 * 32, 0), std::make_pair(int64_t(32), int64_t(64)));
  // Each row's per-row value is held by the 4 lanes of a quad in both warps
  // of its row slice.
  RegisterLayout rows = layoutOf(mma, {128});
  expectCovers(rows, 256, 128, 1, 8);
}

TEST_F(RegisterLayoutTest, MmaWarpGridRowsFirst) {
  // 8 warps as 4 x 2 numbered down the rows first: warp w owns rows
  // (w % 4) * 16.., columns (w / 4) * 64..; warpgroup g (warps 4g..4g+3)
  // holds the 64 rows of column slice g, one wgmma m64n64 accumulator.
  auto mma = MmaEncodingAttr::get(&context, 8, 2, /*rowsFirst=*/1);
  RegisterLayout layout = layoutOf(mma, {64, 128});
  EXPECT_FALSE(layout.rowsInOneWarp);
  expectCovers(layout, 256, 64, 128, 1);
  expectRowSlotsConsistent(layout);
  EXPECT_EQ(layout.elementOf(3 * 32, 0), std::make_pair(int64_t(48), int64_t(0)));
  EXPECT_EQ(layout.elementOf(4 * 32, 0), std::make_pair(int64_t(0), int64_t(64)));
  EXPECT_EQ(layout.elementOf(5 * 32 + 5, 2),
            std::make_pair(int64_t(16 + 1 + 8), int64_t(64 + 2)));
  for (int64_t warp = 0; warp < 8; ++warp) {
    EXPECT_EQ(mma.warpRowSlice(warp), warp % 4);
    EXPECT_EQ(mma.warpColumnSlice(warp), warp / 4);
  }
  // Per-row values: in both warpgroups.
  RegisterLayout rows = layoutOf(mma, {64});
  expectCovers(rows, 256, 64, 1, 8);
}

// A transposed #fa.mma tile: each thread holds, in the same slots, the
// transposes of its twin's elements (the wgmma backward's S as S^T's
// accumulator); its per-row values are the twin's columns, and the row
// slots of the 2-d and 1-d tiles agree.
TEST_F(RegisterLayoutTest, MmaTransposedIsItsTwinSwapped) {
  auto transposed = MmaEncodingAttr::get(&context, 8, 1, 0, true);
  auto twin = MmaEncodingAttr::get(&context, 8);
  EXPECT_EQ(transposed.getTwin(), twin);
  EXPECT_EQ(twin.getTwin(), transposed);
  // S: 64 queries x 128 keys; the twin S^T: 128 keys (16 a warp) x 64.
  RegisterLayout layout = layoutOf(transposed, {64, 128});
  RegisterLayout twinLayout = layoutOf(twin, {128, 64});
  ASSERT_EQ(layout.numSlots(), twinLayout.numSlots());
  for (int64_t t = 0; t < 256; ++t)
    for (int64_t s = 0; s < layout.numSlots(); ++s) {
      auto [row, col] = twinLayout.elementOf(t, s);
      EXPECT_EQ(layout.elementOf(t, s), std::make_pair(col, row));
    }
  EXPECT_EQ(cast<TileEncodingInterface>(Attribute(transposed))
                .getRegistersPerThread({64, 128}),
            32);
  expectCovers(layout, 256, 64, 128, 1);
  expectRowSlotsConsistent(layout);
  EXPECT_FALSE(layout.rowsInOneWarp);
  EXPECT_EQ(layout.vectorWidth, 1);
  // Lane (g, t) = (1, 1) of warp 5 holds queries 2, 3, 10, 11, ... (16
  // rows) and keys 5 * 16 + 1 and + 9.
  int64_t thread = 5 * 32 + 5;
  EXPECT_EQ(layout.numRowSlots(), 16);
  EXPECT_EQ(layout.elementOf(thread, 0),
            std::make_pair(int64_t(2), int64_t(81)));
  EXPECT_EQ(layout.elementOf(thread, 2),
            std::make_pair(int64_t(2), int64_t(89)));
  EXPECT_EQ(layout.elementOf(thread, 4),
            std::make_pair(int64_t(10), int64_t(81)));
  // Per-row values (LSE, D): the same 16 queries in the same row slots,
  // held by the 8 lanes of one t in each of the 8 warps.
  RegisterLayout rows = layoutOf(transposed, {64});
  EXPECT_EQ(rows.numSlots(), 16);
  EXPECT_EQ(cast<TileEncodingInterface>(Attribute(transposed))
                .getRegistersPerThread({64}),
            16);
  expectCovers(rows, 256, 64, 1, 64);
  expectRowSlotsConsistent(rows);
  for (int64_t r = 0; r < rows.numRowSlots(); ++r)
    EXPECT_EQ(rows.elementOf(thread, r).first,
              layout.elementOf(thread, layout.slotsOfRow(r).front()).first);
  // The lanes of a warp that share a row are those the masks reach.
  std::set<int64_t> reached = {5};
  for (int64_t mask : rows.rowReduceMasks) {
    std::set<int64_t> next = reached;
    for (int64_t u : reached)
      next.insert(u ^ mask);
    reached = next;
  }
  std::set<int64_t> sharing;
  for (int64_t u = 0; u < 32; ++u)
    if (rows.elementOf(u, 0).first == rows.elementOf(5, 0).first)
      sharing.insert(u);
  EXPECT_EQ(reached, sharing);
}

// #fa.mma_operand: a0a1 (g, 2t..), a2a3 (g + 8, 2t..), a4a5 (g, 2t + 8..),
// a6a7 (g + 8, 2t + 8..); columns padded to 16.
TEST_F(RegisterLayoutTest, MmaOperand) {
  auto operand = MmaOperandEncodingAttr::get(&context, 2);
  RegisterLayout layout = layoutOf(operand, {32, 40});
  ASSERT_EQ(layout.numSlots(), 3 * 8);
  EXPECT_EQ(layout.elementOf(5, 4), std::make_pair(int64_t(1), int64_t(10)));
  EXPECT_EQ(layout.elementOf(5, 6), std::make_pair(int64_t(9), int64_t(10)));
  expectCovers(layout, 64, 32, 40, 1, /*paddedCols=*/48);
  expectRowSlotsConsistent(layout);
  expectReductionCoversRow(layout, 64);
  EXPECT_TRUE(failed(operand.getRegisterLayout(ArrayRef<int64_t>{32})));
}

TEST_F(RegisterLayoutTest, SharedTilesHaveNone) {
  EXPECT_TRUE(failed(SharedEncodingAttr::get(&context, 1)
                         .getRegisterLayout(ArrayRef<int64_t>{16, 16})));
  EXPECT_TRUE(failed(SwizzledSharedEncodingAttr::get(&context, 128)
                         .getRegisterLayout(ArrayRef<int64_t>{64, 64})));
}

TEST_F(RegisterLayoutTest, ThreadIdTerms) {
  // ((t % 32) / 4) * 1 + (t / 64) * 32
  SmallVector<ThreadIdTerm> terms = {ThreadIdTerm{32, 4, 1},
                                     ThreadIdTerm{0, 64, 32}};
  EXPECT_EQ(RegisterLayout::evaluate(terms, 0), 0);
  EXPECT_EQ(RegisterLayout::evaluate(terms, 37), 1);
  EXPECT_EQ(RegisterLayout::evaluate(terms, 64 + 31), 32 + 7);
}

} // namespace
