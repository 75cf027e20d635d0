//===- CpuExecutionTest.cpp - fa.attention executed on the CPU -----*- C++ -*-===//
//
// Compiles fa.attention through fa-tile and the CPU lowering, runs it with the
// ExecutionEngine on random inputs and compares O and LSE with the float64
// full-softmax reference.
//
//===----------------------------------------------------------------------===//

#include "compiler/Cpu/CpuRunner.h"
#include "lib/ReferenceAttention.h"
#include "test/Common/CpuKernels.h"
#include "test/Common/LowPrecision.h"


#include "gtest/gtest.h"

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <tuple>

using namespace mlir::fa;

namespace {

/// f32 error bound for O and LSE against the float64 reference.
///
/// Inputs are standard normal and the scale is 1/sqrt(D), so scores are
/// O(1) and every output element is a convex combination of V entries. The
/// kernel's error comes from f32 dot products of length D <= 128, f32 exp
/// and the P V sums over up to 129 keys; with round-to-nearest these grow
/// like sqrt(n) * 2^-24, i.e. around 1e-6 here, which is what the matrix
/// shows (max |error| < 2e-6 over all cases when this bound was set). We
/// allow 10x that. An algorithmic slip (a missed rescale, a wrong mask row,
/// a dropped tile) moves results by 1e-2 or more on these sizes.
constexpr double kTolerance = 2e-5;

using fa::test::randomNormal;

CpuAttentionKernel &getKernel(const CpuKernelConfig &config) {
  return fa::test::getCpuKernel(config);
}

using fa::test::problemFor;

struct RunResult {
  std::vector<float> output;
  std::vector<float> lse;
};

/// Runs the kernel with outputs poisoned with NaN, so that an element the
/// kernel forgets to write fails every comparison.
RunResult runKernel(const CpuAttentionKernel &kernel,
                    const AttentionShape &shape, const std::vector<float> &q,
                    const std::vector<float> &k, const std::vector<float> &v) {
  fa::AttentionProblem p = problemFor(kernel.getConfig(), shape);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  RunResult result{std::vector<float>(std::max<int64_t>(p.qElements(), 1), nan),
                   std::vector<float>(std::max<int64_t>(p.lseElements(), 1), nan)};
  llvm::Error error = kernel.run(shape, q.data(), k.data(), v.data(),
                                 result.output.data(), result.lse.data());
  EXPECT_FALSE(error) << llvm::toString(std::move(error));
  return result;
}

/// Max |kernel - reference| over O and LSE; LSE = -inf must match exactly.
void expectMatchesReference(const RunResult &got,
                            const fa::ReferenceResult &want,
                            double tolerance) {
  double maxOutputError = 0.0, maxLseError = 0.0;
  for (size_t i = 0; i < want.output.size(); ++i) {
    double err = std::fabs(double(got.output[i]) - want.output[i]);
    if (!(err <= tolerance)) {
      ADD_FAILURE() << "O[" << i << "] = " << got.output[i] << ", expected "
                    << want.output[i];
      return;
    }
    maxOutputError = std::max(maxOutputError, err);
  }
  for (size_t i = 0; i < want.lse.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      EXPECT_TRUE(std::isinf(got.lse[i]) && got.lse[i] < 0)
          << "LSE[" << i << "] = " << got.lse[i] << ", expected -inf";
      continue;
    }
    double err = std::fabs(double(got.lse[i]) - want.lse[i]);
    if (!(err <= tolerance)) {
      ADD_FAILURE() << "LSE[" << i << "] = " << got.lse[i] << ", expected "
                    << want.lse[i];
      return;
    }
    maxLseError = std::max(maxLseError, err);
  }
  testing::Test::RecordProperty("max_output_error", std::to_string(maxOutputError));
  testing::Test::RecordProperty("max_lse_error", std::to_string(maxLseError));
}

void checkRandomCase(const CpuKernelConfig &config, const AttentionShape &shape) {
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
  auto q = randomNormal(p.qElements(), rng);
  auto k = randomNormal(std::max<int64_t>(p.kvElements(), 1), rng);
  auto v = randomNormal(std::max<int64_t>(p.kvElements(), 1), rng);
  RunResult got = runKernel(getKernel(config), shape, q, k, v);
  expectMatchesReference(got, fa::referenceAttention(p, q.data(), k.data(),
                                                     v.data()),
                         kTolerance);
}

//===----------------------------------------------------------------------===//
// The matrix: head dims x tile sizes x causal, each over lengths and heads.
//===----------------------------------------------------------------------===//

using MatrixParam = std::tuple<int64_t, std::pair<int64_t, int64_t>, bool>;

class CpuAttentionMatrix : public testing::TestWithParam<MatrixParam> {};

TEST_P(CpuAttentionMatrix, MatchesFloat64Reference) {
  auto [headDim, tiles, causal] = GetParam();
  CpuKernelConfig config;
  config.headDim = headDim;
  config.tiles = {tiles.first, tiles.second};
  config.causal = causal;
  config.scale = 1.0f / std::sqrt(float(headDim));

  // (Sq, Sk): single rows, lengths that are not multiples of any tile,
  // exact multiples, and Sq != Sk in both directions.
  const std::pair<int64_t, int64_t> lengths[] = {
      {1, 1},   {7, 7},    {100, 100}, {129, 129}, {128, 128},
      {1, 129}, {129, 7},  {7, 100},   {100, 1},   {64, 129}};
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
    HeadDimsTilesMasks, CpuAttentionMatrix,
    testing::Combine(testing::Values<int64_t>(16, 32, 64, 128),
                     testing::Values(std::make_pair<int64_t, int64_t>(8, 32),
                                     std::make_pair<int64_t, int64_t>(16, 16),
                                     std::make_pair<int64_t, int64_t>(64, 64)),
                     testing::Bool()),
    matrixCaseName);

//===----------------------------------------------------------------------===//
// The online softmax itself.
//===----------------------------------------------------------------------===//

/// The worked example of the accumulation notes: two queries, four keys, two
/// K/V tiles of two keys each, scale 1. Q0's running max grows from 2 to 3
/// in the second tile (old state rescaled by e^-1), Q1's stays 2.
TEST(CpuOnlineSoftmax, WorkedExampleOfTheNotes) {
  CpuKernelConfig config;
  config.headDim = 2;
  config.tiles = {2, 2};
  config.scale = 1.0f;
  AttentionShape shape;
  shape.qLen = 2;
  shape.kvLen = 4;
  std::vector<float> q = {1, 0, 0, 1};
  std::vector<float> k = {1, 2, 2, 1, 3, 0, 2, 1};
  std::vector<float> v = {2, 0, 0, 2, 0, 2, 1, 1};
  RunResult got = runKernel(getKernel(config), shape, q, k, v);
  // The notes give O to three decimals and l ~ 1.871 for both rows.
  const double expectedOutput[] = {0.341, 1.659, 1.266, 0.734};
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(got.output[i], expectedOutput[i], 1e-3) << "O[" << i << "]";
  EXPECT_NEAR(got.lse[0], 3.0 + std::log(1.871), 1e-3);
  EXPECT_NEAR(got.lse[1], 2.0 + std::log(1.871), 1e-3);
}

/// One row split into 16 K/V tiles whose scores rise tile after tile, so the
/// running max changes at every step (and drops the old state by e^-8 per
/// tile at the end): the online result must equal the full softmax.
TEST(CpuOnlineSoftmax, RunningMaxChangingEveryTileEqualsFullSoftmax) {
  CpuKernelConfig config;
  config.headDim = 16;
  config.tiles = {8, 4};
  config.scale = 1.0f;
  AttentionShape shape;
  shape.qLen = 3;
  shape.kvLen = 64;
  std::mt19937_64 rng(std::random_device{}());
  std::vector<float> q(shape.qLen * 16, 0.0f);
  q[0] = 1.0f;       // row 0: scores rise slowly (0.25 per key)
  q[16] = 8.0f;      // row 1: scores rise fast (2 per key)
  q[32 + 1] = 1.0f;  // row 2: random scores
  std::vector<float> k = randomNormal(shape.kvLen * 16, rng);
  for (int64_t j = 0; j < shape.kvLen; ++j)
    k[j * 16] = 0.25f * float(j) - 8.0f;
  std::vector<float> v = randomNormal(shape.kvLen * 16, rng);

  // Precondition: each tile of rows 0 and 1 raises the running max.
  for (int row = 0; row < 2; ++row) {
    float runningMax = -std::numeric_limits<float>::infinity();
    for (int64_t tile = 0; tile < shape.kvLen / 4; ++tile) {
      float tileMax = -std::numeric_limits<float>::infinity();
      for (int64_t j = tile * 4; j < tile * 4 + 4; ++j)
        tileMax = std::max(tileMax, q[row * 16] * k[j * 16]);
      ASSERT_GT(tileMax, runningMax) << "row " << row << " tile " << tile;
      runningMax = tileMax;
    }
  }
  RunResult got = runKernel(getKernel(config), shape, q, k, v);
  fa::AttentionProblem p = problemFor(config, shape);
  expectMatchesReference(
      got, fa::referenceAttention(p, q.data(), k.data(), v.data()), 1e-5);
}

/// Causal with Sq > Sk: the first Sq - Sk rows see no key. They must come out
/// as O = 0 and LSE = -inf, never NaN; the other rows stay exact.
TEST(CpuOnlineSoftmax, RowsWithoutKeysGiveZeroAndMinusInfinity) {
  CpuKernelConfig config;
  config.headDim = 16;
  config.tiles = {4, 4};
  config.causal = true;
  config.scale = 0.25f;
  AttentionShape shape;
  shape.qHeads = 2;
  shape.qLen = 11;
  shape.kvLen = 3;
  std::mt19937_64 rng(std::random_device{}());
  auto q = randomNormal(2 * 11 * 16, rng);
  auto k = randomNormal(3 * 16, rng);
  auto v = randomNormal(3 * 16, rng);
  shape.kvHeads = 1;
  RunResult got = runKernel(getKernel(config), shape, q, k, v);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 11 - 3; ++i) {
      int64_t row = h * 11 + i;
      EXPECT_EQ(got.lse[row], -std::numeric_limits<float>::infinity())
          << "row " << row;
      for (int c = 0; c < 16; ++c)
        EXPECT_EQ(got.output[row * 16 + c], 0.0f) << "row " << row;
    }
  fa::AttentionProblem p = problemFor(config, shape);
  expectMatchesReference(
      got, fa::referenceAttention(p, q.data(), k.data(), v.data()), kTolerance);
}

/// No keys at all (Sk = 0): every row is empty.
TEST(CpuOnlineSoftmax, EmptyKeySequence) {
  CpuKernelConfig config;
  config.headDim = 16;
  config.tiles = {8, 8};
  AttentionShape shape;
  shape.qLen = 5;
  shape.kvLen = 0;
  std::mt19937_64 rng(std::random_device{}());
  auto q = randomNormal(5 * 16, rng);
  std::vector<float> k(1, 1.0f), v(1, 1.0f);
  RunResult got = runKernel(getKernel(config), shape, q, k, v);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(got.lse[i], -std::numeric_limits<float>::infinity());
    for (int c = 0; c < 16; ++c)
      EXPECT_EQ(got.output[i * 16 + c], 0.0f);
  }
}

//===----------------------------------------------------------------------===//
// f16 and bf16 inputs.
//===----------------------------------------------------------------------===//

using fa::test::fromBits;
using fa::test::toBits;

class CpuLowPrecision : public testing::TestWithParam<fa::ElementType> {};

/// The matmuls read 16-bit tiles and accumulate in f32; P is rounded to the
/// input type before P V and O before it is stored. Each rounding moves a
/// result by at most u = 2^-11 (f16) or 2^-8 (bf16) relative, and O is a
/// convex combination of V rows, so |O - O_ref| <= 2 u max|V| (+ f32 noise).
/// LSE comes from unrounded f32 probabilities and stays at f32 accuracy.
/// The reference runs in float64 on the rounded inputs.
TEST_P(CpuLowPrecision, MatchesReferenceWithinRoundingBound) {
  fa::ElementType type = GetParam();
  double unit = fa::test::unitRoundoff(type);
  struct Shape {
    int64_t batch, qHeads, kvHeads, qLen, kvLen;
  };
  for (bool causal : {false, true})
    for (Shape sh : {Shape{1, 4, 2, 100, 129}, Shape{1, 1, 1, 7, 7},
                     Shape{2, 8, 1, 64, 33}}) {
      CpuKernelConfig config;
      config.headDim = 64;
      config.dtype = type;
      config.tiles = {16, 32};
      config.causal = causal;
      config.scale = 0.125f;
      AttentionShape shape{sh.batch, sh.qHeads, sh.kvHeads, sh.qLen, sh.kvLen};
      fa::AttentionProblem p = problemFor(config, shape);
      uint64_t seed = std::random_device{}();
      SCOPED_TRACE(testing::Message() << fa::toString(type) << " seed=" << seed
                                      << " Sq=" << sh.qLen << " Sk=" << sh.kvLen
                                      << (causal ? " causal" : ""));
      std::mt19937_64 rng(seed);
      auto round = [&](int64_t n, std::vector<uint16_t> &bits,
                       std::vector<float> &values) {
        values = randomNormal(n, rng);
        bits.resize(n);
        for (int64_t i = 0; i < n; ++i) {
          bits[i] = toBits(values[i], type);
          values[i] = fromBits(bits[i], type);
        }
      };
      std::vector<uint16_t> qBits, kBits, vBits;
      std::vector<float> q, k, v;
      round(p.qElements(), qBits, q);
      round(p.kvElements(), kBits, k);
      round(p.kvElements(), vBits, v);
      // A quiet NaN of the type in every output element.
      std::vector<uint16_t> oBits(p.qElements(), fa::test::nanBits(type));
      std::vector<float> lse(p.lseElements(),
                             std::numeric_limits<float>::quiet_NaN());
      llvm::Error error = getKernel(config).run(
          shape, qBits.data(), kBits.data(), vBits.data(), oBits.data(),
          lse.data());
      ASSERT_FALSE(error) << llvm::toString(std::move(error));

      fa::ReferenceResult want =
          fa::referenceAttention(p, q.data(), k.data(), v.data());
      double maxV = 0.0;
      for (float x : v)
        maxV = std::max(maxV, double(std::fabs(x)));
      double tolerance = 2 * unit * maxV + 1e-5;
      double maxError = 0.0;
      for (size_t i = 0; i < oBits.size(); ++i) {
        double err = std::fabs(double(fromBits(oBits[i], type)) -
                               want.output[i]);
        ASSERT_LE(err, tolerance) << "O[" << i << "]";
        maxError = std::max(maxError, err);
      }
      for (size_t i = 0; i < lse.size(); ++i) {
        if (std::isinf(want.lse[i])) {
          ASSERT_TRUE(std::isinf(lse[i]) && lse[i] < 0) << "LSE[" << i << "]";
          continue;
        }
        ASSERT_NEAR(lse[i], want.lse[i], kTolerance) << "LSE[" << i << "]";
      }
      // The bound is not vacuous: rounding P and O does show.
      if (sh.qLen * sh.kvLen > 1000)
        EXPECT_GT(maxError, 1e-2 * unit) << "suspiciously exact";
    }
}

INSTANTIATE_TEST_SUITE_P(Types, CpuLowPrecision,
                         testing::Values(fa::ElementType::f16,
                                         fa::ElementType::bf16),
                         [](const testing::TestParamInfo<fa::ElementType> &i) {
                           return std::string(fa::toString(i.param));
                         });

//===----------------------------------------------------------------------===//
// Bad input.
//===----------------------------------------------------------------------===//

TEST(CpuRunnerErrors, RejectsHeadsThatDoNotGroup) {
  CpuKernelConfig config;
  config.headDim = 16;
  config.tiles = {8, 8};
  AttentionShape shape;
  shape.qHeads = 6;
  shape.kvHeads = 4;
  std::vector<float> buffer(6 * 16, 1.0f), lse(6, 0.0f);
  llvm::Error error =
      getKernel(config).run(shape, buffer.data(), buffer.data(), buffer.data(),
                            buffer.data(), lse.data());
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "query heads (6) must be a multiple of key/value heads (4)");
}

TEST(CpuRunnerErrors, RejectsNegativeLength) {
  CpuKernelConfig config;
  config.headDim = 16;
  config.tiles = {8, 8};
  AttentionShape shape;
  shape.qLen = -3;
  std::vector<float> buffer(16, 1.0f);
  llvm::Error error =
      getKernel(config).run(shape, buffer.data(), buffer.data(), buffer.data(),
                            buffer.data(), buffer.data());
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "query length must be non-negative, got -3");
}

TEST(CpuRunnerErrors, RejectsNonPositiveScale) {
  CpuKernelConfig config;
  config.headDim = 16;
  config.tiles = {8, 8};
  config.scale = 0.0f;
  auto kernel = CpuAttentionKernel::compile(config);
  ASSERT_FALSE(bool(kernel));
  EXPECT_EQ(llvm::toString(kernel.takeError()),
            "softmax scale must be positive and finite, got 0.000000");
}

TEST(CpuRunnerErrors, ReportsInvalidTileSizes) {
  CpuKernelConfig config;
  config.headDim = 16;
  config.tiles = {0, 8};
  auto kernel = CpuAttentionKernel::compile(config);
  ASSERT_FALSE(bool(kernel));
  std::string message = llvm::toString(kernel.takeError());
  EXPECT_NE(message.find("block-m must be in [1, 1024], got 0"),
            std::string::npos)
      << message;
}

} // namespace
