//===- CpuBlockMaskTest.cpp - Block masks on the CPU ------------*- C++ -*-===//
//
// A block mask (fa.block_mask's tables, KernelSpec::blockMask) on the CPU:
// the generated program against tables computed here from the same mask in
// plain C++, and attention forward and backward that skip tiles by the
// tables against the float64 reference. Masks read document ids (a
// captured tensor: the compiler cannot narrow the tiles by itself), a
// head-dependent window (one table per head), and block patterns whose
// whole squares are consecutive or not (the whole ranges).
//
//===----------------------------------------------------------------------===//

#include "compiler/Cpu/CpuRunner.h"
#include "lib/LaunchPlan.h"
#include "lib/ReferenceAttention.h"
#include "lib/Variants.h"
#include "test/Common/BlockMaskTables.h"
#include "test/Common/CpuKernels.h"

#include "gtest/gtest.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>

using namespace mlir::fa;

namespace {

constexpr int64_t kGroup = fa::kBlockMaskGroup;
constexpr int64_t kColumns = fa::kRangeTableColumns;
constexpr double kTolerance = 2e-5;
constexpr double kBackwardRelativeTolerance = 1e-5;

/// keep(b, h, i, j) of a shape, as the kernels align it (row i at key
/// position i + Sk - Sq), the causal mask included where the variant has it.
using Keep = std::function<bool(int64_t, int64_t, int64_t, int64_t)>;

/// A mask the test runs: its text, causal flag, captures and C++ twin.
struct Mask {
  std::string name, text;
  bool causal = false;
  bool perHead = false; // the tables need one entry per head
  std::vector<int32_t> docs; // [B, Sk] document ids, for `document`
  std::vector<CpuCapture> captures;
  Keep keep;
};

/// Document ids [B, Sk] in runs of 1 to 40 keys.
Mask documentMask(bool causal, int64_t batch, int64_t sq, int64_t sk) {
  Mask m{causal ? "document_causal" : "document", fa::variants::document(),
         causal, false, {}, {}, {}};
  m.docs.assign(size_t(batch * sk), 0);
  std::mt19937 rng(unsigned(5 + sk));
  for (int64_t b = 0; b < batch; ++b) {
    int32_t id = 0;
    for (int64_t j = 0; j < sk; ++id) {
      int64_t run = 1 + int64_t(rng() % 40);
      for (int64_t r = 0; r < run && j < sk; ++r, ++j)
        m.docs[size_t(b * sk + j)] = id;
    }
  }
  m.captures = {CpuCapture{m.docs.data(), {batch, sk}}};
  const int32_t *docs = m.docs.data();
  m.keep = [=](int64_t b, int64_t, int64_t i, int64_t j) {
    int64_t position = i + sk - sq;
    if (position < 0 || (causal && j > position))
      return false;
    return docs[b * sk + position] == docs[b * sk + j];
  };
  return m;
}

/// Keys j with |position(i) - j| <= 3 + 5 h: a window that widens with the
/// head (affine, but here bounded by the tables).
Mask headWindowMask(int64_t sq, int64_t sk) {
  std::string text = R"(func.func @head_window(%b: index, %h: index, %q: index, %kv: index, %sq: index, %sk: index) -> i1 {
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %pos0 = arith.addi %q, %sk : index
  %pos = arith.subi %pos0, %sq : index
  %w0 = arith.muli %h, %c5 : index
  %w = arith.addi %w0, %c3 : index
  %lo = arith.subi %pos, %w : index
  %hi = arith.addi %pos, %w : index
  %a = arith.cmpi sge, %kv, %lo : index
  %c = arith.cmpi sle, %kv, %hi : index
  %keep = arith.andi %a, %c : i1
  return %keep : i1
})";
  Mask m{"head_window", text, false, true, {}, {}, {}};
  m.keep = [=](int64_t, int64_t h, int64_t i, int64_t j) {
    int64_t position = i + sk - sq, width = 3 + 5 * h;
    return j >= position - width && j <= position + width;
  };
  return m;
}

/// keep(i, j) = pattern(i / 16, j / 16) for a mask_mod of the 16 x 16
/// squares: every square is kept whole or not at all.
Mask squaresMask(std::string name, std::string squaresKept,
                 std::function<bool(int64_t, int64_t)> pattern) {
  std::string text = "func.func @" + name +
                     R"((%b: index, %h: index, %q: index, %kv: index, %sq: index, %sk: index) -> i1 {
  %c16 = arith.constant 16 : index
  %i = arith.divui %q, %c16 : index
  %j = arith.divui %kv, %c16 : index
)" + squaresKept + R"(
  return %keep : i1
})";
  Mask m{name, text, false, false, {}, {}, {}};
  m.keep = [=](int64_t, int64_t, int64_t i, int64_t j) {
    return pattern(i / 16, j / 16);
  };
  return m;
}

/// Squares on the diagonal of 2 x 2 blocks: each group's whole squares
/// are consecutive.
Mask blocksMask() {
  return squaresMask("blocks", R"(  %c2 = arith.constant 2 : index
  %bi = arith.divui %i, %c2 : index
  %bj = arith.divui %j, %c2 : index
  %keep = arith.cmpi eq, %bi, %bj : index)",
                     [](int64_t i, int64_t j) { return i / 2 == j / 2; });
}

/// Rows and keys of squares i, j with i % 3 != 1 and j % 3 != 1: a row
/// group's whole squares are not consecutive (its whole range is empty).
Mask stripesMask() {
  return squaresMask("stripes", R"(  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %ri = arith.remui %i, %c3 : index
  %rj = arith.remui %j, %c3 : index
  %ki = arith.cmpi ne, %ri, %c1 : index
  %kj = arith.cmpi ne, %rj, %c1 : index
  %keep = arith.andi %ki, %kj : i1)",
                     [](int64_t i, int64_t j) {
                       return i % 3 != 1 && j % 3 != 1;
                     });
}

using Tables = fa::test::RangeTables;

int64_t groups(int64_t length) { return (length + kGroup - 1) / kGroup; }

/// The tables the generated program computes (garbage before it runs).
Tables programTables(const Mask &mask, const AttentionShape &shape,
                     int64_t heads) {
  CpuKernelConfig config;
  config.headDim = 32;
  config.causal = mask.causal;
  config.maskMod = mask.text;
  config.blockMaskProgram = true;
  CpuAttentionKernel &program = fa::test::getCpuKernel(config);
  Tables t;
  t.keyRanges.assign(
      size_t(shape.batch * heads * groups(shape.qLen) * kColumns), -7);
  t.queryRanges.assign(
      size_t(shape.batch * heads * groups(shape.kvLen) * kColumns), -7);
  llvm::Error error =
      program.runBlockMask(shape, heads, t.keyRanges.data(),
                           t.queryRanges.data(), mask.captures);
  EXPECT_FALSE(error) << llvm::toString(std::move(error));
  return t;
}

struct Shape {
  int64_t b, hq, hkv, sq, sk;
};
const Shape kShapes[] = {{1, 2, 2, 100, 100}, {2, 4, 2, 40, 90},
                         {1, 2, 1, 90, 40},   {1, 1, 1, 1, 70},
                         {1, 2, 2, 128, 128}};

Mask maskFor(int index, const Shape &s) {
  switch (index) {
  case 0:
    return documentMask(false, s.b, s.sq, s.sk);
  case 1:
    return documentMask(true, s.b, s.sq, s.sk);
  case 2:
    return headWindowMask(s.sq, s.sk);
  case 3:
    return blocksMask();
  default:
    return stripesMask();
  }
}

class CpuBlockMask : public testing::TestWithParam<int> {};

TEST_P(CpuBlockMask, ProgramMatchesTablesWrittenHere) {
  for (const Shape &s : kShapes) {
    Mask mask = maskFor(GetParam(), s);
    for (int64_t heads : {int64_t(1), s.hq}) {
      if (mask.perHead && heads == 1)
        continue;
      SCOPED_TRACE(testing::Message()
                   << mask.name << " B=" << s.b << " heads=" << heads
                   << " Sq=" << s.sq << " Sk=" << s.sk);
      AttentionShape shape{s.b, s.hq, s.hkv, s.sq, s.sk};
      Tables got = programTables(mask, shape, heads);
      Tables want =
          fa::test::expectedRangeTables(mask.keep, s.b, heads, s.sq, s.sk);
      EXPECT_EQ(got.keyRanges, want.keyRanges);
      EXPECT_EQ(got.queryRanges, want.queryRanges);
    }
  }
}

/// The forward with `tables` (nullopt: the program's) against the float64
/// reference of `mask`; returns the largest |error| of O and LSE.
double runForward(const Mask &mask, const Shape &s, int64_t blockM,
                  int64_t blockN, const Tables *tables = nullptr) {
  CpuKernelConfig config;
  config.headDim = 32;
  config.tiles = {blockM, blockN};
  config.scale = 1.0f / std::sqrt(32.0f);
  config.causal = mask.causal;
  config.maskMod = mask.text;
  config.blockMask = true;
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
  AttentionShape shape{s.b, s.hq, s.hkv, s.sq, s.sk};
  int64_t heads = mask.perHead ? s.hq : 1;
  Tables computed;
  if (!tables) {
    computed = programTables(mask, shape, heads);
    tables = &computed;
  }
  fa::AttentionProblem p = fa::test::problemFor(config, shape);
  p.maskMod = mask.keep;
  std::mt19937_64 rng(321 + s.sq * 17 + s.sk);
  auto q = fa::test::randomNormal(p.qElements(), rng);
  auto k = fa::test::randomNormal(p.kvElements(), rng);
  auto v = fa::test::randomNormal(p.kvElements(), rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> o(p.qElements(), nan), lse(p.lseElements(), nan);
  llvm::Error error =
      kernel.run(shape, q.data(), k.data(), v.data(), o.data(), lse.data(),
                 nullptr, mask.captures,
                 CpuRangeTable{tables->keyRanges.data(), heads});
  EXPECT_FALSE(error) << llvm::toString(std::move(error));
  fa::ReferenceResult want =
      fa::referenceAttention(p, q.data(), k.data(), v.data());
  double worst = 0.0;
  for (size_t i = 0; i < want.output.size(); ++i) {
    double err = std::fabs(double(o[i]) - want.output[i]);
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  for (size_t i = 0; i < want.lse.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      worst = std::max(worst, std::isinf(lse[i]) && lse[i] < 0 ? 0.0
                                                               : INFINITY);
      continue;
    }
    double err = std::fabs(double(lse[i]) - want.lse[i]);
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  return worst;
}

TEST_P(CpuBlockMask, ForwardMatchesFloat64Reference) {
  // Tiles of the group's size, larger, smaller and not a multiple of it.
  for (auto [blockM, blockN] :
       {std::pair<int64_t, int64_t>{16, 16}, {32, 16}, {8, 32}, {24, 16}})
    for (const Shape &s : kShapes) {
      Mask mask = maskFor(GetParam(), s);
      SCOPED_TRACE(testing::Message()
                   << mask.name << " tiles " << blockM << "x" << blockN
                   << " B=" << s.b << " Hq=" << s.hq << " Sq=" << s.sq
                   << " Sk=" << s.sk);
      EXPECT_LE(runForward(mask, s, blockM, blockN), kTolerance);
    }
}

/// The backward with `tables`' query ranges (nullptr: the program's)
/// against the float64 gradients; returns the largest error relative to
/// each gradient's size. `deterministic`: the mode that adds dQ in turns,
/// which reads the key ranges too (the CPU lowering asserts every turn: a
/// program out of its turn aborts the run); `dqOut` receives dQ.
double runBackward(const Mask &mask, const Shape &s, int64_t blockM,
                   int64_t blockN, const Tables *tables = nullptr,
                   bool deterministic = false,
                   std::vector<float> *dqOut = nullptr) {
  CpuKernelConfig config;
  config.headDim = 32;
  config.tiles = {blockM, blockN};
  config.scale = 1.0f / std::sqrt(32.0f);
  config.causal = mask.causal;
  config.maskMod = mask.text;
  config.blockMask = true;
  config.backward = true;
  config.deterministic = deterministic;
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
  AttentionShape shape{s.b, s.hq, s.hkv, s.sq, s.sk};
  int64_t heads = mask.perHead ? s.hq : 1;
  Tables computed;
  if (!tables) {
    computed = programTables(mask, shape, heads);
    tables = &computed;
  }
  fa::AttentionProblem p = fa::test::problemFor(config, shape);
  p.maskMod = mask.keep;
  std::mt19937_64 rng(77 + s.sq * 5 + s.sk);
  auto q = fa::test::randomNormal(p.qElements(), rng);
  auto k = fa::test::randomNormal(p.kvElements(), rng);
  auto v = fa::test::randomNormal(p.kvElements(), rng);
  auto gradOutput = fa::test::randomNormal(p.qElements(), rng);
  fa::ReferenceResult forward =
      fa::referenceAttention(p, q.data(), k.data(), v.data());
  std::vector<float> o(forward.output.begin(), forward.output.end());
  std::vector<float> lse(forward.lse.begin(), forward.lse.end());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> dq(p.qElements(), nan), dk(p.kvElements(), nan),
      dv(p.kvElements(), nan);
  llvm::Error error = kernel.runBackward(
      shape, q.data(), k.data(), v.data(), o.data(), gradOutput.data(),
      lse.data(), dq.data(), dk.data(), dv.data(), nullptr, nullptr,
      mask.captures, CpuRangeTable{tables->queryRanges.data(), heads},
      CpuSequenceOffsets{},
      deterministic ? CpuRangeTable{tables->keyRanges.data(), heads}
                    : CpuRangeTable{});
  EXPECT_FALSE(error) << llvm::toString(std::move(error));
  if (dqOut)
    *dqOut = dq;
  fa::ReferenceGradients want = fa::referenceAttentionBackward(
      p, q.data(), k.data(), v.data(), gradOutput.data());
  double worst = 0.0;
  for (auto [got, expected] :
       {std::pair<const std::vector<float> *, const std::vector<double> *>{
            &dq, &want.gradQuery},
        {&dk, &want.gradKey},
        {&dv, &want.gradValue}}) {
    double size = 0.0, err = 0.0;
    for (double x : *expected)
      size = std::max(size, std::fabs(x));
    for (size_t i = 0; i < expected->size(); ++i) {
      double e = std::fabs(double((*got)[i]) - (*expected)[i]);
      err = std::max(err, std::isnan(e) ? INFINITY : e);
    }
    worst = std::max(worst, err / (size + 1e-6));
  }
  return worst;
}

TEST_P(CpuBlockMask, BackwardMatchesFloat64Gradients) {
  for (auto [blockM, blockN] :
       {std::pair<int64_t, int64_t>{16, 16}, {16, 32}, {32, 8}})
    for (const Shape &s : kShapes) {
      Mask mask = maskFor(GetParam(), s);
      SCOPED_TRACE(testing::Message()
                   << mask.name << " backward tiles " << blockM << "x"
                   << blockN << " B=" << s.b << " Hq=" << s.hq
                   << " Sq=" << s.sq << " Sk=" << s.sk);
      EXPECT_LE(runBackward(mask, s, blockM, blockN),
                kBackwardRelativeTolerance);
    }
}

// The deterministic mode: the K/V tiles a query tile's key ranges give it
// take its turns among those whose query ranges visit it, first to last
// (causal: last to first); every turn is asserted as it is waited for.
TEST_P(CpuBlockMask, DeterministicBackwardMatchesFloat64Gradients) {
  for (auto [blockM, blockN] :
       {std::pair<int64_t, int64_t>{16, 16}, {16, 32}, {32, 8}})
    for (const Shape &s : kShapes) {
      Mask mask = maskFor(GetParam(), s);
      SCOPED_TRACE(testing::Message()
                   << mask.name << " deterministic backward tiles " << blockM
                   << "x" << blockN << " B=" << s.b << " Hq=" << s.hq
                   << " Sq=" << s.sq << " Sk=" << s.sk);
      EXPECT_LE(runBackward(mask, s, blockM, blockN, nullptr,
                            /*deterministic=*/true),
                kBackwardRelativeTolerance);
    }
}

std::string maskName(const testing::TestParamInfo<int> &info) {
  static const char *const names[] = {"document", "document_causal",
                                      "head_window", "blocks", "stripes"};
  return names[info.param];
}

INSTANTIATE_TEST_SUITE_P(Masks, CpuBlockMask, testing::Values(0, 1, 2, 3, 4),
                         maskName);

// The whole ranges are what the tests above exercise only where a mask
// keeps whole squares: both kinds (consecutive or not) are in the
// tables.
TEST(CpuBlockMaskTables, WholeRangesOfBothKinds) {
  const int64_t sq = 100, sk = 100;
  Tables blocks =
      programTables(blocksMask(), AttentionShape{1, 2, 2, sq, sk}, 1);
  // Rows 0..15 keep keys 0..31 whole.
  EXPECT_EQ(std::vector<int32_t>(blocks.keyRanges.begin(),
                                 blocks.keyRanges.begin() + kColumns),
            (std::vector<int32_t>{0, 32, 0, 32}));
  // Rows 96..99 keep keys 96..99, whole too (the last square is short).
  size_t last = size_t((groups(sq) - 1) * kColumns);
  EXPECT_EQ(std::vector<int32_t>(blocks.keyRanges.begin() + last,
                                 blocks.keyRanges.end()),
            (std::vector<int32_t>{96, 100, 96, 100}));
  // Stripes: rows 0..15 keep key squares 0, 2, 3, 5 and 6: not
  // consecutive, so the whole range is emptied (its end set to 0).
  Tables stripes =
      programTables(stripesMask(), AttentionShape{1, 2, 2, sq, sk}, 1);
  EXPECT_EQ(std::vector<int32_t>(stripes.keyRanges.begin(),
                                 stripes.keyRanges.begin() + kColumns),
            (std::vector<int32_t>{0, 100, 0, 0}));
}

// The kernels read the tables: with every range empty no tile is visited
// (every row is as if it saw no key: O = 0, LSE = -inf), so the reference
// no longer matches; with every range whole the result is right (a table
// that is too wide costs time only).
TEST(CpuBlockMaskUse, EmptyTablesSkipEveryTile) {
  Shape s{1, 2, 2, 100, 100};
  Mask mask = documentMask(false, s.b, s.sq, s.sk);
  Tables empty;
  empty.keyRanges.assign(size_t(groups(s.sq) * kColumns), 0);
  EXPECT_GT(runForward(mask, s, 16, 16, &empty), 0.1);
}

TEST(CpuBlockMaskUse, WholeTablesAreRight) {
  Shape s{1, 2, 2, 100, 100};
  Mask mask = documentMask(true, s.b, s.sq, s.sk);
  Tables whole;
  for (int64_t g = 0; g < groups(s.sq); ++g)
    whole.keyRanges.insert(whole.keyRanges.end(),
                           {0, int32_t(s.sk), int32_t(s.sk), 0});
  EXPECT_LE(runForward(mask, s, 16, 16, &whole), kTolerance);
}

// A whole range is a promise too: the tiles inside it keep every score,
// whatever the mask_mod says. Claiming each group's kept range whole (the
// documents inside it are not) makes the forward and the backward wrong.
void claimKeptRangesWhole(std::vector<int32_t> &table) {
  for (size_t entry = 0; entry < table.size(); entry += kColumns) {
    table[entry + 2] = table[entry];
    table[entry + 3] = table[entry + 1];
  }
}

TEST(CpuBlockMaskUse, AWholeRangeTooWideIsCaughtForward) {
  Shape s{1, 2, 2, 100, 100};
  Mask mask = documentMask(true, s.b, s.sq, s.sk);
  ASSERT_LE(runForward(mask, s, 16, 16), kTolerance);
  Tables tables =
      programTables(mask, AttentionShape{s.b, s.hq, s.hkv, s.sq, s.sk}, 1);
  claimKeptRangesWhole(tables.keyRanges);
  EXPECT_GT(runForward(mask, s, 16, 16, &tables), 0.01);
}

TEST(CpuBlockMaskUse, AWholeRangeTooWideIsCaughtBackward) {
  Shape s{1, 2, 2, 100, 100};
  Mask mask = documentMask(false, s.b, s.sq, s.sk);
  ASSERT_LE(runBackward(mask, s, 16, 16), kBackwardRelativeTolerance);
  Tables tables =
      programTables(mask, AttentionShape{s.b, s.hq, s.hkv, s.sq, s.sk}, 1);
  claimKeptRangesWhole(tables.queryRanges);
  EXPECT_GT(runBackward(mask, s, 16, 16, &tables), 0.01);
}

// The last group's range cut before the K/V tile of its last key (the
// kernels skip tiles, not keys): the rows that keep keys of that tile are
// wrong.
TEST(CpuBlockMaskUse, ATableThatDropsATileIsCaught) {
  Shape s{1, 2, 2, 100, 100};
  Mask mask = documentMask(true, s.b, s.sq, s.sk);
  AttentionShape shape{s.b, s.hq, s.hkv, s.sq, s.sk};
  Tables tables = programTables(mask, shape, 1);
  // The group holding the last row: its range ends at the last key.
  size_t last = size_t((groups(s.sq) - 1) * kColumns);
  ASSERT_EQ(tables.keyRanges[last + 1], int32_t(s.sk));
  tables.keyRanges[last + 1] = int32_t((s.sk - 1) / 16 * 16);
  EXPECT_GT(runForward(mask, s, 16, 16, &tables), kTolerance);
}

// Tables whose two sides disagree (each a superset of the mask, the other
// exact): the turns at a query tile go to the tiles both give it, so the
// deterministic backward takes each turn in order (asserted) and stays
// right, with either side the wider one.
TEST(CpuBlockMaskUse, DeterministicTurnsFollowTablesThatDisagree) {
  Shape s{1, 2, 2, 100, 100};
  for (bool causal : {false, true}) {
    Mask mask = documentMask(causal, s.b, s.sq, s.sk);
    AttentionShape shape{s.b, s.hq, s.hkv, s.sq, s.sk};
    Tables exact = programTables(mask, shape, 1);
    std::vector<float> dqExact;
    ASSERT_LE(runBackward(mask, s, 16, 16, &exact, true, &dqExact),
              kBackwardRelativeTolerance);
    for (bool widenKeys : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << (causal ? "causal " : "") << "documents, the "
                   << (widenKeys ? "key" : "query") << " ranges widened");
      Tables tables = exact;
      std::vector<int32_t> &wide =
          widenKeys ? tables.keyRanges : tables.queryRanges;
      for (size_t entry = 0; entry < wide.size(); entry += kColumns) {
        wide[entry] = 0;
        wide[entry + 1] = int32_t(widenKeys ? s.sk : s.sq);
      }
      std::vector<float> dq;
      EXPECT_LE(runBackward(mask, s, 16, 16, &tables, true, &dq),
                kBackwardRelativeTolerance);
      // The extra pairs add exact zeros: the same dQ, bit for bit.
      EXPECT_EQ(dq, dqExact);
    }
  }
}

// The deterministic backward reads both tables: without the key ranges it
// is refused with the reason.
TEST(CpuBlockMaskUse, DeterministicBackwardNeedsTheKeyRanges) {
  CpuKernelConfig config;
  config.headDim = 32;
  config.tiles = {16, 16};
  config.maskMod = fa::variants::document();
  config.blockMask = config.backward = config.deterministic = true;
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
  std::vector<float> data(16 * 32, 0.0f), lse(16, 0.0f);
  std::vector<int32_t> docs(16), table(4);
  llvm::Error error = kernel.runBackward(
      AttentionShape{1, 1, 1, 16, 16}, data.data(), data.data(), data.data(),
      data.data(), data.data(), lse.data(), data.data(), data.data(),
      data.data(), nullptr, nullptr, {CpuCapture{docs.data(), {1, 16}}},
      CpuRangeTable{table.data(), 1});
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "null buffer pointer (the deterministic backward with a block "
            "mask takes its key ranges too)");
}

TEST(CpuBlockMaskUse, ProgramRefusesABadHeadCount) {
  CpuKernelConfig config;
  config.headDim = 32;
  config.maskMod = fa::variants::document();
  config.blockMaskProgram = true;
  CpuAttentionKernel &program = fa::test::getCpuKernel(config);
  std::vector<int32_t> docs(16), table(16);
  llvm::Error error = program.runBlockMask(
      AttentionShape{1, 4, 4, 16, 16}, 3, table.data(), table.data(),
      {CpuCapture{docs.data(), {1, 16}}});
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "a block mask has 1 or Hq (4) heads, got 3");
}

} // namespace
