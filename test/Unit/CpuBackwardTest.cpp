//===- CpuBackwardTest.cpp - fa.attention_backward on the CPU ------*- C++ -*-===//
//
// Compiles fa.attention_backward through fa-tile-backward and the CPU
// lowering, runs it with the ExecutionEngine on random inputs and compares
// dQ, dK and dV with the exact float64 gradients (lib/ReferenceAttention).
// The forward's O and LSE come from the float64 reference, rounded to the
// kernel's types, so that only the backward is under test.
//
//===----------------------------------------------------------------------===//

#include "compiler/Cpu/CpuRunner.h"
#include "lib/ReferenceAttention.h"
#include "test/Common/CpuKernels.h"
#include "test/Common/LowPrecision.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>

using namespace mlir::fa;
using fa::test::getCpuKernel;
using fa::test::randomNormal;

namespace {

using fa::test::problemFor;

/// One random problem: inputs, the forward's O and LSE, and dO.
struct BackwardCase {
  std::vector<float> q, k, v, o, lse, gradOutput;
};

BackwardCase randomCase(const fa::AttentionProblem &p, std::mt19937_64 &rng) {
  BackwardCase c;
  c.q = randomNormal(p.qElements(), rng);
  c.k = randomNormal(p.kvElements(), rng);
  c.v = randomNormal(p.kvElements(), rng);
  c.gradOutput = randomNormal(p.qElements(), rng);
  fa::ReferenceResult forward =
      fa::referenceAttention(p, c.q.data(), c.k.data(), c.v.data());
  c.o.assign(forward.output.begin(), forward.output.end());
  c.lse.assign(forward.lse.begin(), forward.lse.end());
  return c;
}

struct Gradients {
  std::vector<float> gradQuery, gradKey, gradValue;
};

/// Runs the f32 backward with outputs poisoned with NaN, so that an element
/// the kernel forgets to write fails every comparison.
Gradients runBackward(const CpuAttentionKernel &kernel,
                      const AttentionShape &shape, const BackwardCase &c) {
  fa::AttentionProblem p = problemFor(kernel.getConfig(), shape);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Gradients g{std::vector<float>(p.qElements(), nan),
              std::vector<float>(p.kvElements(), nan),
              std::vector<float>(p.kvElements(), nan)};
  llvm::Error error = kernel.runBackward(
      shape, c.q.data(), c.k.data(), c.v.data(), c.o.data(),
      c.gradOutput.data(), c.lse.data(), g.gradQuery.data(),
      g.gradKey.data(), g.gradValue.data());
  EXPECT_FALSE(error) << llvm::toString(std::move(error));
  return g;
}

/// Whether two results hold the same bits.
bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Largest |x| of a reference tensor: the scale its errors are measured on.
double maxAbs(const std::vector<double> &values) {
  double m = 0.0;
  for (double x : values)
    m = std::max(m, std::fabs(x));
  return m;
}

/// Max |got - want| over one gradient, which must stay within
/// `relative * max|want| + absolute`; fails with the first element outside.
double expectClose(const char *name, const std::vector<float> &got,
                   const std::vector<double> &want, double relative,
                   double absolute) {
  double tolerance = relative * maxAbs(want) + absolute, maxError = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    double err = std::fabs(double(got[i]) - want[i]);
    if (!(err <= tolerance)) {
      ADD_FAILURE() << name << "[" << i << "] = " << got[i] << ", expected "
                    << want[i] << " (tolerance " << tolerance << ")";
      return err;
    }
    maxError = std::max(maxError, err);
  }
  return maxError;
}

/// f32 error bound, relative to the largest entry of each gradient.
///
/// Every gradient is a sum of products of O(1) inputs with probabilities
/// (dV, and dS = P (dP - D)); the kernel's rounding comes from f32 dot
/// products of length D <= 128 and the sums over up to 8 heads x 129 rows,
/// growing like sqrt(n) * 2^-24 relative to the gradient's size: ~1e-6.
/// The matrix stayed below 2.5e-6 relative when this bound was set; we
/// allow 4x that.
/// A dropped tile, a wrong mask row or a missing head moves a gradient by
/// 1e-2 of its size or more on these shapes.
constexpr double kRelativeTolerance = 1e-5;

void checkRandomCase(const CpuKernelConfig &config,
                     const AttentionShape &shape) {
  std::random_device device;
  uint64_t seed = (uint64_t(device()) << 32) | device();
  SCOPED_TRACE(testing::Message()
               << "seed=" << seed << " B=" << shape.batch << " Hq="
               << shape.qHeads << " Hkv=" << shape.kvHeads << " Sq="
               << shape.qLen << " Sk=" << shape.kvLen << " D="
               << config.headDim << " tiles=" << config.tiles.blockM << "x"
               << config.tiles.blockN << (config.causal ? " causal" : ""));
  std::mt19937_64 rng(seed);
  fa::AttentionProblem p = problemFor(config, shape);
  BackwardCase c = randomCase(p, rng);
  Gradients got = runBackward(getCpuKernel(config), shape, c);
  fa::ReferenceGradients want = fa::referenceAttentionBackward(
      p, c.q.data(), c.k.data(), c.v.data(), c.gradOutput.data());
  double errors[] = {
      expectClose("dQ", got.gradQuery, want.gradQuery, kRelativeTolerance,
                  1e-6),
      expectClose("dK", got.gradKey, want.gradKey, kRelativeTolerance, 1e-6),
      expectClose("dV", got.gradValue, want.gradValue, kRelativeTolerance,
                  1e-6)};
  testing::Test::RecordProperty("max_dq_error", std::to_string(errors[0]));
  testing::Test::RecordProperty("max_dk_error", std::to_string(errors[1]));
  testing::Test::RecordProperty("max_dv_error", std::to_string(errors[2]));
}

//===----------------------------------------------------------------------===//
// The matrix: head dims x tile sizes x causal, each over lengths and heads.
//===----------------------------------------------------------------------===//

using MatrixParam = std::tuple<int64_t, std::pair<int64_t, int64_t>, bool>;

class CpuBackwardMatrix : public testing::TestWithParam<MatrixParam> {};

TEST_P(CpuBackwardMatrix, MatchesFloat64Gradients) {
  auto [headDim, tiles, causal] = GetParam();
  CpuKernelConfig config;
  config.headDim = headDim;
  config.tiles = {tiles.first, tiles.second};
  config.causal = causal;
  config.scale = 1.0f / std::sqrt(float(headDim));
  config.backward = true;

  // (Sq, Sk): single rows, lengths that are not multiples of any tile,
  // exact multiples, and Sq != Sk in both directions (with the causal mask,
  // Sq > Sk leaves rows that see no key).
  const std::pair<int64_t, int64_t> lengths[] = {
      {1, 1},  {7, 7},   {100, 100}, {128, 128}, {1, 129},
      {129, 7}, {7, 100}, {100, 1},   {64, 129}};
  // (Hq, Hkv): MHA, GQA and MQA.
  const std::pair<int64_t, int64_t> heads[] = {{1, 1}, {4, 4}, {8, 2}, {8, 1}};
  for (auto [qLen, kvLen] : lengths)
    for (auto [qHeads, kvHeads] : heads) {
      AttentionShape shape;
      shape.batch = qHeads == 4 ? 2 : 1;
      shape.qHeads = qHeads;
      shape.kvHeads = kvHeads;
      shape.qLen = qLen;
      shape.kvLen = kvLen;
      checkRandomCase(config, shape);
    }
}

std::string matrixCaseName(const testing::TestParamInfo<MatrixParam> &info) {
  auto [headDim, tiles, causal] = info.param;
  return "d" + std::to_string(headDim) + "_" + std::to_string(tiles.first) +
         "x" + std::to_string(tiles.second) + (causal ? "_causal" : "_full");
}

INSTANTIATE_TEST_SUITE_P(
    HeadDimsTilesMasks, CpuBackwardMatrix,
    testing::Combine(testing::Values<int64_t>(16, 64, 128),
                     testing::Values(std::make_pair<int64_t, int64_t>(8, 32),
                                     std::make_pair<int64_t, int64_t>(32, 16),
                                     std::make_pair<int64_t, int64_t>(64, 64)),
                     testing::Bool()),
    matrixCaseName);

//===----------------------------------------------------------------------===//
// Properties of the algorithm.
//===----------------------------------------------------------------------===//

/// Rows that see no key (causal, Sq > Sk) get dQ = 0 and add nothing to dK
/// and dV: their LSE is -inf and P must be 0, not NaN.
TEST(CpuBackward, RowsWithoutKeysGetZeroGradient) {
  CpuKernelConfig config;
  config.headDim = 16;
  config.tiles = {4, 4};
  config.causal = true;
  config.scale = 0.25f;
  config.backward = true;
  AttentionShape shape{1, 2, 1, 12, 5}; // rows 0..6 see no key
  fa::AttentionProblem p = problemFor(config, shape);
  std::mt19937_64 rng(7);
  BackwardCase c = randomCase(p, rng);
  ASSERT_TRUE(std::isinf(c.lse[0]));
  Gradients got = runBackward(getCpuKernel(config), shape, c);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 7; ++i)
      for (int64_t d = 0; d < 16; ++d)
        ASSERT_EQ(got.gradQuery[(h * 12 + i) * 16 + d], 0.0f)
            << "head " << h << " row " << i;
  fa::ReferenceGradients want = fa::referenceAttentionBackward(
      p, c.q.data(), c.k.data(), c.v.data(), c.gradOutput.data());
  expectClose("dK", got.gradKey, want.gradKey, kRelativeTolerance, 1e-6);
  expectClose("dV", got.gradValue, want.gradValue, kRelativeTolerance, 1e-6);
}

/// With one key every probability is 1: dV is the sum of dO over the query
/// rows and heads, dS (and so dQ and dK) is exactly 0.
TEST(CpuBackward, SingleKeyGradients) {
  CpuKernelConfig config;
  config.headDim = 8;
  config.tiles = {4, 4};
  config.scale = 0.5f;
  config.backward = true;
  AttentionShape shape{1, 2, 1, 6, 1};
  fa::AttentionProblem p = problemFor(config, shape);
  std::mt19937_64 rng(11);
  BackwardCase c = randomCase(p, rng);
  Gradients got = runBackward(getCpuKernel(config), shape, c);
  for (int64_t d = 0; d < 8; ++d) {
    double sum = 0.0;
    for (int64_t row = 0; row < 12; ++row)
      sum += c.gradOutput[row * 8 + d];
    EXPECT_NEAR(got.gradValue[d], sum, 1e-5) << "dV[" << d << "]";
    EXPECT_NEAR(got.gradKey[d], 0.0, 1e-6) << "dK[" << d << "]";
  }
  for (float x : got.gradQuery)
    ASSERT_NEAR(x, 0.0, 1e-6);
}

/// The CPU lowering adds dQ contributions in a fixed order: two runs give
/// bitwise identical gradients.
TEST(CpuBackward, RunsAreBitwiseIdentical) {
  CpuKernelConfig config;
  config.headDim = 32;
  config.tiles = {16, 16};
  config.causal = true;
  config.scale = 0.2f;
  config.backward = true;
  AttentionShape shape{2, 4, 2, 77, 93};
  fa::AttentionProblem p = problemFor(config, shape);
  std::mt19937_64 rng(3);
  BackwardCase c = randomCase(p, rng);
  Gradients first = runBackward(getCpuKernel(config), shape, c);
  Gradients second = runBackward(getCpuKernel(config), shape, c);
  EXPECT_TRUE(sameBits(first.gradQuery, second.gradQuery));
  EXPECT_TRUE(sameBits(first.gradKey, second.gradKey));
  EXPECT_TRUE(sameBits(first.gradValue, second.gradValue));
}

/// The deterministic mode (dQ added in a fixed K/V tile order, fa.wait_turn
/// / fa.pass_turn) computes the same gradients, and two runs give the same
/// bits. On the CPU programs run in grid order: without a mask and in one
/// chain that is the default mode's order, so dQ is bit for bit the same;
/// with the causal mask the turns (and the grid) go last K/V tile to first,
/// and with dQ chains (each chain's copy of the accumulator in its own
/// order, summed in chain order by the dq grid) the sums group differently,
/// so dQ differs in rounding only. dK and dV never depend on the order.
/// Chains: 0 (one), 2, 3 and 8 (more than the K/V tiles: chains that take
/// no turn on a query tile).
TEST(CpuBackward, DeterministicModeMatches) {
  // Sq < Sk, and Sq > Sk with the causal mask (query tiles that see no key:
  // no K/V tile takes a turn there). The CPU lowering asserts that each
  // program comes on its turn, so turns that disagree with the grid order
  // fail here rather than hang a GPU.
  for (int64_t chains : {0, 2, 3, 8})
    for (auto [causal, shape] :
         {std::pair{false, AttentionShape{2, 4, 2, 77, 93}},
          std::pair{true, AttentionShape{2, 4, 2, 77, 93}},
          std::pair{true, AttentionShape{1, 2, 1, 93, 40}}}) {
      SCOPED_TRACE(testing::Message()
                   << chains << " chains" << (causal ? " causal" : ""));
      CpuKernelConfig config;
      config.headDim = 32;
      config.tiles = {16, 16};
      config.causal = causal;
      config.scale = 0.2f;
      config.backward = true;
      fa::AttentionProblem p = problemFor(config, shape);
      std::mt19937_64 rng(5);
      BackwardCase c = randomCase(p, rng);
      Gradients any = runBackward(getCpuKernel(config), shape, c);
      config.deterministic = true;
      config.dqChains = chains;
      Gradients ordered = runBackward(getCpuKernel(config), shape, c);
      Gradients again = runBackward(getCpuKernel(config), shape, c);
      fa::ReferenceGradients want = fa::referenceAttentionBackward(
          p, c.q.data(), c.k.data(), c.v.data(), c.gradOutput.data());
      expectClose("dQ", ordered.gradQuery, want.gradQuery, kRelativeTolerance,
                  1e-6);
      EXPECT_TRUE(sameBits(ordered.gradQuery, again.gradQuery));
      if (!causal && chains == 0)
        EXPECT_TRUE(sameBits(any.gradQuery, ordered.gradQuery));
      EXPECT_TRUE(sameBits(any.gradKey, ordered.gradKey));
      EXPECT_TRUE(sameBits(any.gradValue, ordered.gradValue));
    }
}

//===----------------------------------------------------------------------===//
// f16 and bf16 inputs.
//===----------------------------------------------------------------------===//

class CpuBackwardLowPrecision
    : public testing::TestWithParam<fa::ElementType> {};

/// 16-bit inputs, outputs and dO; P and dS are rounded to the input type
/// before their matmuls, the gradients when stored. The float64 reference
/// sees the same rounded inputs (and the rounded O). Each rounding moves a
/// term by at most u relative; the terms of one gradient entry partly
/// cancel, so the error is a small multiple of u * max|gradient|: up to 3 u
/// over repeated runs when this bound was set; we allow 8 u. (Algorithmic
/// slips are the f32 matrix's job; this test covers the roundings.)
TEST_P(CpuBackwardLowPrecision, MatchesReferenceWithinRoundingBound) {
  using fa::test::fromBits;
  using fa::test::toBits;
  fa::ElementType type = GetParam();
  double unit = fa::test::unitRoundoff(type);
  for (bool causal : {false, true})
    for (AttentionShape shape : {AttentionShape{1, 4, 2, 100, 129},
                                 AttentionShape{1, 1, 1, 7, 7},
                                 AttentionShape{2, 8, 1, 64, 33}}) {
      CpuKernelConfig config;
      config.headDim = 64;
      config.dtype = type;
      config.tiles = {16, 32};
      config.causal = causal;
      config.scale = 0.125f;
      config.backward = true;
      fa::AttentionProblem p = problemFor(config, shape);
      uint64_t seed = std::random_device{}();
      SCOPED_TRACE(testing::Message()
                   << fa::toString(type) << " seed=" << seed
                   << " Sq=" << shape.qLen << " Sk=" << shape.kvLen
                   << (causal ? " causal" : ""));
      std::mt19937_64 rng(seed);
      BackwardCase c = randomCase(p, rng);
      auto round = [&](std::vector<float> &values) {
        std::vector<uint16_t> bits(values.size());
        for (size_t i = 0; i < values.size(); ++i) {
          bits[i] = toBits(values[i], type);
          values[i] = fromBits(bits[i], type);
        }
        return bits;
      };
      auto q = round(c.q), k = round(c.k), v = round(c.v);
      auto o = round(c.o), gradOutput = round(c.gradOutput);
      std::vector<uint16_t> gradQuery(p.qElements(), fa::test::nanBits(type));
      std::vector<uint16_t> gradKey(p.kvElements(), fa::test::nanBits(type));
      std::vector<uint16_t> gradValue(p.kvElements(), fa::test::nanBits(type));
      llvm::Error error = getCpuKernel(config).runBackward(
          shape, q.data(), k.data(), v.data(), o.data(), gradOutput.data(),
          c.lse.data(), gradQuery.data(), gradKey.data(), gradValue.data());
      ASSERT_FALSE(error) << llvm::toString(std::move(error));

      fa::ReferenceGradients want = fa::referenceAttentionBackward(
          p, c.q.data(), c.k.data(), c.v.data(), c.gradOutput.data());
      auto widen = [&](const std::vector<uint16_t> &bits) {
        std::vector<float> values(bits.size());
        for (size_t i = 0; i < bits.size(); ++i)
          values[i] = fromBits(bits[i], type);
        return values;
      };
      double errors[] = {
          expectClose("dQ", widen(gradQuery), want.gradQuery, 8 * unit, 1e-5),
          expectClose("dK", widen(gradKey), want.gradKey, 8 * unit, 1e-5),
          expectClose("dV", widen(gradValue), want.gradValue, 8 * unit, 1e-5)};
      // The bound is not vacuous: rounding does show.
      if (shape.qLen * shape.kvLen > 1000)
        EXPECT_GT(std::max({errors[0], errors[1], errors[2]}),
                  1e-2 * unit * maxAbs(want.gradValue))
            << "suspiciously exact";
    }
}

INSTANTIATE_TEST_SUITE_P(Types, CpuBackwardLowPrecision,
                         testing::Values(fa::ElementType::f16,
                                         fa::ElementType::bf16),
                         [](const testing::TestParamInfo<fa::ElementType> &i) {
                           return std::string(fa::toString(i.param));
                         });

//===----------------------------------------------------------------------===//
// Bad input.
//===----------------------------------------------------------------------===//

TEST(CpuBackwardErrors, DirectionMustMatchTheKernel) {
  CpuKernelConfig config;
  config.headDim = 16;
  config.tiles = {8, 8};
  config.backward = true;
  std::vector<float> buffer(16, 1.0f);
  AttentionShape shape;
  llvm::Error error =
      getCpuKernel(config).run(shape, buffer.data(), buffer.data(),
                               buffer.data(), buffer.data(), buffer.data());
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "this is a backward kernel: call runBackward");
}

TEST(CpuBackwardErrors, RejectsHeadsThatDoNotGroup) {
  CpuKernelConfig config;
  config.headDim = 16;
  config.tiles = {8, 8};
  config.backward = true;
  AttentionShape shape{1, 6, 4, 1, 1};
  std::vector<float> buffer(6 * 16, 1.0f);
  llvm::Error error = getCpuKernel(config).runBackward(
      shape, buffer.data(), buffer.data(), buffer.data(), buffer.data(),
      buffer.data(), buffer.data(), buffer.data(), buffer.data(),
      buffer.data());
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "query heads (6) must be a multiple of key/value heads (4)");
}

} // namespace
