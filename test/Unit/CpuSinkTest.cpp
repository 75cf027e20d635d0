//===- CpuSinkTest.cpp - Attention sinks on the CPU -----------------*- C++ -*-===//
//
// Kernels with attention sinks (one logit per query head that joins each
// row's softmax without a value row) compiled through the tiling passes and
// the CPU lowering, forward and backward, against the float64 reference
// (lib/ReferenceAttention: the sink as one more score of the full softmax,
// its gradient -P_sink D summed over the head's rows). The sinks range from
// far below the scores to far above them (a sink of 40 dwarfs every score:
// the kernel's max must take it, or the exponentials overflow), and the
// shapes include rows that see no key (Sq > Sk, causal), whose output is 0
// and whose LSE is the sink (-inf without one).
//
//===----------------------------------------------------------------------===//

#include "compiler/Cpu/CpuRunner.h"
#include "lib/ReferenceAttention.h"
#include "lib/Variants.h"
#include "test/Common/CpuKernels.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>
#include <random>

using namespace mlir::fa;

namespace {

/// As CpuExecutionTest's bound: f32 kernels against float64, O(1) scores.
constexpr double kTolerance = 2e-5;
/// As CpuBackwardTest's: f32 gradients within 1e-5 of each gradient's size.
constexpr double kBackwardRelativeTolerance = 1e-5;

struct Shape {
  int64_t b, hq, hkv, sq, sk;
};
const Shape kShapes[] = {{1, 4, 4, 37, 37}, {2, 4, 2, 20, 45},
                         {1, 4, 1, 45, 20}, {1, 4, 4, 1, 70}};

/// Per query head: none (-inf: the kernel without a sink), near, far
/// below and far above the O(1) scores.
std::vector<double> sinkLogits(int64_t heads) {
  const double values[] = {-INFINITY, 0.5, -30.0, 40.0};
  std::vector<double> sinks(heads);
  for (int64_t h = 0; h < heads; ++h)
    sinks[h] = values[h % 4];
  return sinks;
}

struct Case {
  bool causal = false;
  std::string maskMod; // a window, or none
  int64_t blockM = 8, blockN = 32;
  /// The backward's: dQ in turns, the sinks' gradient summed in order.
  bool deterministic = false;
};

CpuKernelConfig configFor(const Case &c, bool backward) {
  CpuKernelConfig config;
  config.headDim = 32;
  config.tiles = {c.blockM, c.blockN};
  config.scale = 1.0f / std::sqrt(32.0f);
  config.causal = c.causal;
  config.maskMod = c.maskMod;
  config.backward = backward;
  config.sinks = true;
  config.deterministic = backward && c.deterministic;
  return config;
}

/// The window of c.maskMod (keys within 6 before the diagonal) as C++.
void addWindow(const Case &c, fa::AttentionProblem &p, const Shape &s) {
  if (c.maskMod.empty())
    return;
  p.maskMod = [s](int64_t, int64_t, int64_t i, int64_t j) {
    int64_t diag = i + s.sk - s.sq;
    return j >= diag - 6 && j <= diag;
  };
}

/// The largest error of a forward's O (absolute) and LSE (relative to
/// max(1, |LSE|): it is O(|sink|) here, and so is its f32 rounding; -inf
/// where the reference's is) against the float64 reference.
double forwardError(const std::vector<float> &o, const std::vector<float> &lse,
                    const fa::ReferenceResult &want) {
  double worst = 0.0;
  for (size_t i = 0; i < want.output.size(); ++i) {
    double err = std::fabs(double(o[i]) - want.output[i]);
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  for (size_t i = 0; i < want.lse.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      worst = std::max(worst, lse[i] == -INFINITY ? 0.0 : INFINITY);
      continue;
    }
    double err = std::fabs(double(lse[i]) - want.lse[i]) /
                 std::max(1.0, std::fabs(want.lse[i]));
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  return worst;
}

/// The forward's largest error (O and LSE) over kShapes; `referenceSinks`
/// says what the reference is given (the kernel always gets the sinks).
double runForward(const Case &c, bool referenceSinks, bool expectMatch) {
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(configFor(c, false));
  double worst = 0.0;
  for (const Shape &s : kShapes) {
    SCOPED_TRACE(testing::Message()
                 << "tiles " << c.blockM << "x" << c.blockN << " causal "
                 << c.causal << " window " << !c.maskMod.empty() << " B="
                 << s.b << " Hq=" << s.hq << " Hkv=" << s.hkv << " Sq=" << s.sq
                 << " Sk=" << s.sk);
    AttentionShape shape{s.b, s.hq, s.hkv, s.sq, s.sk};
    fa::AttentionProblem p = fa::test::problemFor(kernel.getConfig(), shape);
    addWindow(c, p, s);
    std::vector<double> sinks = sinkLogits(s.hq);
    std::vector<float> sinks32(sinks.begin(), sinks.end());
    if (referenceSinks)
      p.sinks = sinks;
    std::mt19937_64 rng(4321 + s.sq * 17 + s.sk);
    auto q = fa::test::randomNormal(p.qElements(), rng);
    auto k = fa::test::randomNormal(p.kvElements(), rng);
    auto v = fa::test::randomNormal(p.kvElements(), rng);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> o(p.qElements(), nan), lse(p.lseElements(), nan);
    llvm::Error error = kernel.run(shape, q.data(), k.data(), v.data(),
                                   o.data(), lse.data(), sinks32.data());
    EXPECT_FALSE(error) << llvm::toString(std::move(error));
    worst = std::max(worst, forwardError(o, lse,
                                         fa::referenceAttention(
                                             p, q.data(), k.data(), v.data())));
    if (expectMatch)
      EXPECT_LE(worst, kTolerance);
  }
  return worst;
}

/// The backward's largest relative error (dQ, dK, dV and the sinks'
/// gradient) over kShapes, from the reference's O and LSE.
/// `referenceSinkGrad` false compares the sinks' gradient with zero.
double runBackward(const Case &c, bool referenceSinkGrad, bool expectMatch,
                   llvm::ArrayRef<Shape> shapes = kShapes) {
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(configFor(c, true));
  double worst = 0.0;
  for (const Shape &s : shapes) {
    SCOPED_TRACE(testing::Message()
                 << "backward tiles " << c.blockM << "x" << c.blockN
                 << " causal " << c.causal << " window " << !c.maskMod.empty()
                 << " deterministic " << c.deterministic << " B=" << s.b
                 << " Hq=" << s.hq << " Hkv=" << s.hkv << " Sq=" << s.sq
                 << " Sk=" << s.sk);
    AttentionShape shape{s.b, s.hq, s.hkv, s.sq, s.sk};
    fa::AttentionProblem p = fa::test::problemFor(kernel.getConfig(), shape);
    addWindow(c, p, s);
    // Sinks near the scores take a visible share of every row; -inf is no
    // sink (a zero gradient); 100 takes nearly all of it, and its
    // exponential past the rows' end (LSE and D padded with 0: exp(100)
    // overflows f32) must not turn into NaN.
    p.sinks = {0.3, -INFINITY, 1.1, 100.0};
    std::vector<float> sinks32(p.sinks.begin(), p.sinks.end());
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
        dv(p.kvElements(), nan), dsinks(s.hq, nan);
    llvm::Error error = kernel.runBackward(
        shape, q.data(), k.data(), v.data(), o.data(), gradOutput.data(),
        lse.data(), dq.data(), dk.data(), dv.data(), sinks32.data(),
        dsinks.data());
    EXPECT_FALSE(error) << llvm::toString(std::move(error));
    fa::ReferenceGradients want = fa::referenceAttentionBackward(
        p, q.data(), k.data(), v.data(), gradOutput.data());
    if (want.gradSinks.size() != size_t(s.hq)) {
      ADD_FAILURE() << "the reference has no sinks' gradient";
      return INFINITY;
    }
    if (!referenceSinkGrad)
      std::fill(want.gradSinks.begin(), want.gradSinks.end(), 0.0);
    for (auto [got, expected] :
         {std::pair<const std::vector<float> *, const std::vector<double> *>{
              &dq, &want.gradQuery},
          {&dk, &want.gradKey},
          {&dv, &want.gradValue},
          {&dsinks, &want.gradSinks}}) {
      double size = 0.0, err = 0.0;
      for (double x : *expected)
        size = std::max(size, std::fabs(x));
      for (size_t i = 0; i < expected->size(); ++i) {
        double e = std::fabs(double((*got)[i]) - (*expected)[i]);
        err = std::max(err, std::isnan(e) ? INFINITY : e);
      }
      // (A zero expected gradient is compared absolutely.)
      double relative = err / std::max(size, 1e-3);
      worst = std::max(worst, relative);
      if (expectMatch)
        EXPECT_LE(relative, kBackwardRelativeTolerance);
    }
  }
  return worst;
}

std::vector<Case> cases() {
  std::string window = fa::variants::slidingWindow(6, 0);
  return {Case{false, "", 8, 32}, Case{true, "", 8, 32},
          Case{false, "", 16, 16}, Case{true, "", 16, 16},
          Case{false, window, 8, 32}, Case{true, window, 16, 16}};
}

class CpuSinks : public testing::TestWithParam<int> {};

TEST_P(CpuSinks, ForwardMatchesFloat64Reference) {
  runForward(cases()[GetParam()], /*referenceSinks=*/true, true);
}

TEST_P(CpuSinks, BackwardMatchesFloat64Gradients) {
  runBackward(cases()[GetParam()], /*referenceSinkGrad=*/true, true);
}

/// The deterministic backward: each query tile's share stored, then summed
/// per head in (batch, tile) order, block-m shares at a time (the last
/// shape has more query tiles than block-m: several chunks, the last one
/// partly past the tiles). The gradient is stored, not added: the runner
/// fills it with NaN first.
TEST_P(CpuSinks, DeterministicBackwardMatchesFloat64Gradients) {
  Case c = cases()[GetParam()];
  c.deterministic = true;
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.push_back({3, 4, 2, 150, 40});
  runBackward(c, /*referenceSinkGrad=*/true, true, shapes);
}

INSTANTIATE_TEST_SUITE_P(Masks, CpuSinks, testing::Range(0, 6));

/// The runtime's packed GQA decode: a K/V head's G query heads as G rows
/// of one program (Q, O, LSE [B, Hkv, G, ...], the same bytes as [B, Hq, 1,
/// ...]), each row with its query head's sink (sinks_per_row: the [Hq]
/// logits as [Hkv, G]); unsplit and split into 3 parts (the sinks join in
/// the combine), G below and above block-m (rows past the queries in the
/// last tile; a second query tile). The largest error against the unpacked
/// problem's float64 reference; `perRow` false runs the kernel that reads
/// the head's sink for every row (a mutation).
double runPackedDecode(bool perRow, bool expectMatch) {
  double worst = 0.0;
  for (bool split : {false, true})
    for (int64_t group : {4, 12}) {
      CpuKernelConfig config = configFor(Case{}, false);
      config.sinksPerRow = perRow;
      config.splitKv = split;
      CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
      const int64_t batch = 2, kvHeads = 2, keys = 70;
      const int64_t qHeads = kvHeads * group;
      SCOPED_TRACE(testing::Message() << "split " << split << " G=" << group
                                      << " per row " << perRow);
      AttentionShape packed{batch, kvHeads, kvHeads, group, keys};
      fa::AttentionProblem p = fa::test::problemFor(
          config, AttentionShape{batch, qHeads, kvHeads, 1, keys});
      p.sinks = sinkLogits(qHeads);
      std::vector<float> sinks32(p.sinks.begin(), p.sinks.end());
      std::mt19937_64 rng(99 + group);
      auto q = fa::test::randomNormal(p.qElements(), rng);
      auto k = fa::test::randomNormal(p.kvElements(), rng);
      auto v = fa::test::randomNormal(p.kvElements(), rng);
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> o(p.qElements(), nan), lse(p.lseElements(), nan);
      llvm::Error error =
          kernel.run(packed, q.data(), k.data(), v.data(), o.data(), lse.data(),
                     sinks32.data(), {}, {}, {}, nullptr, split ? 3 : 1);
      EXPECT_FALSE(error) << llvm::toString(std::move(error));
      double err = forwardError(
          o, lse, fa::referenceAttention(p, q.data(), k.data(), v.data()));
      if (expectMatch)
        EXPECT_LE(err, kTolerance);
      worst = std::max(worst, err);
    }
  return worst;
}

TEST(CpuPackedDecodeSinks, RowsTakeTheirQueryHeadsSinks) {
  runPackedDecode(/*perRow=*/true, /*expectMatch=*/true);
}

// The comparisons can fail: the reference without the sinks is another
// function, and a zero sinks' gradient is not theirs; a packed decode
// that gives every row its program's head's sink is caught.
TEST(CpuSinkMutation, PackedDecodeWithTheHeadsSinkIsCaught) {
  EXPECT_GT(runPackedDecode(/*perRow=*/false, /*expectMatch=*/false),
            100 * kTolerance);
}

TEST(CpuSinkMutation, ForwardWithoutTheSinksIsCaught) {
  double worst = runForward(cases()[0], /*referenceSinks=*/false, false);
  EXPECT_GT(worst, 100 * kTolerance);
}

TEST(CpuSinkMutation, ZeroSinkGradientIsCaught) {
  for (bool deterministic : {false, true}) {
    Case c = cases()[0];
    c.deterministic = deterministic;
    double worst = runBackward(c, /*referenceSinkGrad=*/false, false);
    EXPECT_GT(worst, 100 * kBackwardRelativeTolerance);
  }
}

} // namespace
