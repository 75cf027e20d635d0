//===- CpuVarlenTest.cpp - Packed variable-length batches on the CPU -*- C++ -*-===//
//
// Varlen kernels (a packed batch: Q [1, Hq, total_q, D], K/V [1, Hkv,
// total_k, D], sequence offsets cu_seqlens_q / cu_seqlens_k) compiled
// through the tiling passes and the CPU lowering, against the float64
// reference run on each sequence alone. The lengths include 0 and 1,
// sequences with more queries than keys and the reverse (whose rows see no
// key under the causal mask), sequences shorter and longer than a tile;
// a variant checks that its indices and lengths are the sequence's own.
// Rows of the tensors past the last sequence, and every row with offsets
// that break the rules, stay untouched or inside the tensors.
//
//===----------------------------------------------------------------------===//

#include "compiler/Cpu/CpuRunner.h"
#include "lib/ReferenceAttention.h"
#include "lib/Variants.h"
#include "test/Common/CpuKernels.h"
#include "test/Common/GuardedBuffer.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace mlir::fa;

namespace {

/// As CpuExecutionTest's bound: f32 kernels against float64, O(1) scores.
constexpr double kTolerance = 2e-5;
constexpr int64_t kHeadDim = 32;

struct Case {
  bool causal = false;
  int64_t blockM = 8, blockN = 32;
  bool softcapWindow = false; // score_mod and mask_mod of the sequence
  bool sinks = false;
  bool deterministic = false; // the backward's
};

/// Query and key lengths per sequence: empty sequences, a single row, more
/// queries than keys and the reverse, several tiles with tails.
struct Lengths {
  std::vector<int64_t> q, k;
};
const Lengths kBatches[] = {
    {{5, 0, 1, 37, 20, 9}, {5, 3, 70, 37, 45, 0}},
    {{64}, {64}},
    {{1, 1, 1}, {1, 17, 33}},
    // An empty first sequence, then one of more than 8 x 8 rows (the
    // deterministic sinks' sum takes its shares in two chunks).
    {{0, 150, 3}, {7, 90, 0}},
};

std::vector<int32_t> offsetsOf(const std::vector<int64_t> &lengths) {
  std::vector<int32_t> offsets = {0};
  for (int64_t l : lengths)
    offsets.push_back(offsets.back() + int32_t(l));
  return offsets;
}

CpuKernelConfig configFor(const Case &c) {
  CpuKernelConfig config;
  config.headDim = kHeadDim;
  config.tiles = {c.blockM, c.blockN};
  config.scale = 1.0f / std::sqrt(float(kHeadDim));
  config.causal = c.causal;
  config.sinks = c.sinks;
  config.varlen = true;
  if (c.softcapWindow) {
    config.scoreMod = fa::variants::softcap(2.0);
    config.maskMod = fa::variants::slidingWindow(9, 2);
  }
  return config;
}

/// One sequence of `c` alone (Sq, Sk its own lengths), as the float64
/// reference takes it: the variant sees the sequence's own indices and
/// lengths; `sinks` (Hq logits) with c.sinks.
fa::AttentionProblem sequenceProblem(const Case &c, int64_t sq, int64_t sk,
                                     int64_t hq, int64_t hkv, double scale,
                                     const std::vector<float> &sinks) {
  fa::AttentionProblem p;
  p.batch = 1;
  p.qHeads = hq;
  p.kvHeads = hkv;
  p.qLen = sq;
  p.kvLen = sk;
  p.headDim = kHeadDim;
  p.causal = c.causal;
  p.scale = scale;
  if (c.sinks)
    p.sinks.assign(sinks.begin(), sinks.end());
  if (c.softcapWindow) {
    p.scoreMod = [](double s, int64_t, int64_t, int64_t, int64_t) {
      return 2.0 * std::tanh(s / 2.0);
    };
    p.maskMod = [sq, sk](int64_t, int64_t, int64_t i, int64_t j) {
      int64_t diag = i + sk - sq;
      return j >= diag - 9 && j <= diag + 2;
    };
  }
  return p;
}

/// Copies rows [first, first + rows) of every head of a packed [1, H,
/// total, width] buffer (width = D, or 1 for LSE) into a [1, H, rows,
/// width] one (`toAlone`), or back.
void copyRows(std::vector<float> &packed, std::vector<float> &alone,
              int64_t heads, int64_t total, int64_t first, int64_t rows,
              int64_t width, bool toAlone) {
  alone.resize(size_t(heads * rows * width));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t d = 0; d < width; ++d) {
        float &p = packed[size_t(((h * total) + first + r) * width + d)];
        float &a = alone[size_t(((h * rows) + r) * width + d)];
        if (toAlone)
          a = p;
        else
          p = a;
      }
}

/// The largest |error| of one sequence's O and LSE against the float64
/// reference (infinite for a NaN, or an LSE of -inf where the reference's
/// is finite or the reverse).
double forwardError(const fa::ReferenceResult &want,
                    const std::vector<float> &output,
                    const std::vector<float> &lse) {
  double worst = 0.0;
  for (size_t i = 0; i < want.output.size(); ++i) {
    double err = std::fabs(double(output[i]) - want.output[i]);
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  for (size_t i = 0; i < want.lse.size(); ++i) {
    double err = std::isinf(want.lse[i])
                     ? (lse[i] == float(want.lse[i]) ? 0.0 : INFINITY)
                     : std::fabs(double(lse[i]) - want.lse[i]);
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  return worst;
}

/// Runs `c` on each batch of kBatches (Hq = 4, Hkv = 2; `spareRows` rows
/// after the last sequence that no sequence owns) and returns the largest
/// error against the per-sequence reference; spare rows must keep their
/// NaN.
/// `parts` > 0: the split-KV kernel, the keys in that many parts.
double runBatches(const Case &c, int64_t spareRows, int64_t parts = 0) {
  CpuKernelConfig config = configFor(c);
  config.splitKv = parts > 0;
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
  const int64_t hq = 4, hkv = 2, d = kHeadDim;
  double worst = 0.0;
  for (const Lengths &lengths : kBatches) {
    std::vector<int32_t> cuQ = offsetsOf(lengths.q), cuK = offsetsOf(lengths.k);
    int64_t batch = int64_t(lengths.q.size());
    int64_t totalQ = cuQ.back() + spareRows, totalK = cuK.back();
    SCOPED_TRACE(testing::Message()
                 << "tiles " << c.blockM << "x" << c.blockN << " causal "
                 << c.causal << " softcap+window " << c.softcapWindow
                 << " sinks " << c.sinks << " sequences " << batch
                 << " total_q " << totalQ << " total_k " << totalK
                 << " parts " << parts);
    std::mt19937_64 rng(99 + totalQ * 7 + totalK);
    auto q = fa::test::randomNormal(hq * totalQ * d, rng);
    auto k = fa::test::randomNormal(hkv * totalK * d, rng);
    auto v = fa::test::randomNormal(hkv * totalK * d, rng);
    std::vector<float> sinks = {0.5f, -INFINITY, 3.0f, -2.0f};
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> o(size_t(hq * totalQ * d), nan),
        lse(size_t(hq * totalQ), nan);
    AttentionShape shape{batch, hq, hkv, totalQ, totalK};
    llvm::Error error = kernel.run(
        shape, q.data(), k.data(), v.data(), o.data(), lse.data(),
        c.sinks ? sinks.data() : nullptr, {}, {},
        CpuSequenceOffsets{cuQ.data(), cuK.data()}, nullptr,
        std::max<int64_t>(parts, 1));
    if (error) {
      ADD_FAILURE() << llvm::toString(std::move(error));
      return INFINITY;
    }
    for (int64_t b = 0; b < batch; ++b) {
      int64_t sq = lengths.q[b], sk = lengths.k[b];
      SCOPED_TRACE(testing::Message() << "sequence " << b << " Sq=" << sq
                                      << " Sk=" << sk);
      fa::AttentionProblem p = sequenceProblem(
          c, sq, sk, hq, hkv, kernel.getConfig().scale, sinks);
      std::vector<float> qs, ks, vs, os, lses;
      copyRows(q, qs, hq, totalQ, cuQ[b], sq, d, true);
      copyRows(k, ks, hkv, totalK, cuK[b], sk, d, true);
      copyRows(v, vs, hkv, totalK, cuK[b], sk, d, true);
      copyRows(o, os, hq, totalQ, cuQ[b], sq, d, true);
      copyRows(lse, lses, hq, totalQ, cuQ[b], sq, 1, true);
      fa::ReferenceResult want =
          fa::referenceAttention(p, qs.data(), ks.data(), vs.data());
      worst = std::max(worst, forwardError(want, os, lses));
    }
    // No program writes a row that no sequence owns.
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t r = cuQ.back(); r < totalQ; ++r) {
        EXPECT_TRUE(std::isnan(lse[size_t(h * totalQ + r)]))
            << "spare row " << r << " of head " << h << " was written";
        for (int64_t e = 0; e < d; ++e)
          if (!std::isnan(o[size_t((h * totalQ + r) * d + e)])) {
            ADD_FAILURE() << "spare row " << r << " of head " << h
                          << " was written";
            break;
          }
      }
  }
  return worst;
}

TEST(CpuVarlen, MatchesEachSequenceAlone) {
  for (bool causal : {false, true})
    for (auto [bm, bn] : {std::pair<int64_t, int64_t>{8, 32}, {16, 16}})
      EXPECT_LE(runBatches({causal, bm, bn}, /*spareRows=*/0), kTolerance);
}

TEST(CpuVarlen, LeavesRowsPastTheLastSequenceAlone) {
  EXPECT_LE(runBatches({/*causal=*/true, 8, 32}, /*spareRows=*/11),
            kTolerance);
}

TEST(CpuVarlen, VariantsAndSinksSeeTheSequencesOwnIndices) {
  for (bool causal : {false, true}) {
    Case c{causal, 8, 32, /*softcapWindow=*/true, /*sinks=*/true};
    EXPECT_LE(runBatches(c, /*spareRows=*/0), kTolerance);
  }
}

/// A sanity check of the test itself: the same batch with the sequences'
/// offsets shifted by one key makes the kernel attend to the wrong keys,
/// and the comparison notices.
TEST(CpuVarlen, ShiftedKeyOffsetsAreNoticed) {
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(configFor({}));
  const int64_t hq = 2, hkv = 2, d = kHeadDim;
  std::vector<int32_t> cuQ = {0, 10, 30}, cuK = {0, 12, 40};
  std::mt19937_64 rng(5);
  auto q = fa::test::randomNormal(hq * 30 * d, rng);
  auto k = fa::test::randomNormal(hkv * 40 * d, rng);
  auto v = fa::test::randomNormal(hkv * 40 * d, rng);
  auto runWith = [&](std::vector<int32_t> keys) {
    std::vector<float> o(size_t(hq * 30 * d)), lse(size_t(hq * 30));
    llvm::Error error =
        kernel.run({2, hq, hkv, 30, 40}, q.data(), k.data(), v.data(),
                   o.data(), lse.data(), nullptr, {}, {},
                   CpuSequenceOffsets{cuQ.data(), keys.data()});
    EXPECT_FALSE(error) << llvm::toString(std::move(error));
    return o;
  };
  std::vector<float> right = runWith(cuK), shifted = runWith({0, 13, 40});
  double largest = 0.0;
  for (size_t i = 0; i < right.size(); ++i)
    largest = std::max(largest, double(std::fabs(right[i] - shifted[i])));
  EXPECT_GT(largest, 1e-2);
}

/// Offsets that break every rule (decreasing, past the rows, negative)
/// still keep every access inside the tensors: each buffer ends at an
/// unmapped page, so a read or write past its end faults.
TEST(CpuVarlen, OffsetsOutsideTheRowsStayInsideTheTensors) {
  CpuAttentionKernel &kernel =
      fa::test::getCpuKernel(configFor({/*causal=*/true}));
  const int64_t hq = 2, hkv = 1, d = kHeadDim, totalQ = 20, totalK = 24;
  auto guarded = [](int64_t elements) {
    auto buffer = std::make_unique<fa::test::GuardedBuffer>(
        size_t(elements) * sizeof(float));
    std::memset(buffer->data(), 0, size_t(elements) * sizeof(float));
    return buffer;
  };
  auto q = guarded(hq * totalQ * d), k = guarded(hkv * totalK * d),
       v = guarded(hkv * totalK * d), o = guarded(hq * totalQ * d),
       lse = guarded(hq * totalQ);
  std::vector<int32_t> cuQ = {0, 15, 3, 1000, -7, 20};
  std::vector<int32_t> cuK = {5, 2, 24, -1, 30, 2000000000};
  llvm::Error error = kernel.run(
      {5, hq, hkv, totalQ, totalK}, q->data(), k->data(), v->data(),
      o->data(), static_cast<float *>(lse->data()), nullptr, {}, {},
      CpuSequenceOffsets{cuQ.data(), cuK.data()});
  EXPECT_FALSE(error) << llvm::toString(std::move(error));
}

/// The varlen backward against the float64 gradients of each sequence
/// alone (O and LSE from the varlen forward, which the tests above check):
/// dQ of rows past the last sequence stays NaN; sinks' gradient sums the
/// sequences'. Returns the largest error relative to each gradient's
/// largest magnitude.
double runBackwardBatches(const Case &c, int64_t spareRows) {
  CpuKernelConfig config = configFor(c);
  CpuAttentionKernel &forward = fa::test::getCpuKernel(config);
  config.backward = true;
  config.deterministic = c.deterministic;
  CpuAttentionKernel &backward = fa::test::getCpuKernel(config);
  const int64_t hq = 4, hkv = 2, d = kHeadDim;
  double worst = 0.0;
  for (const Lengths &lengths : kBatches) {
    std::vector<int32_t> cuQ = offsetsOf(lengths.q), cuK = offsetsOf(lengths.k);
    int64_t batch = int64_t(lengths.q.size());
    int64_t totalQ = cuQ.back() + spareRows, totalK = cuK.back();
    SCOPED_TRACE(testing::Message()
                 << "backward tiles " << c.blockM << "x" << c.blockN
                 << " causal " << c.causal << " softcap+window "
                 << c.softcapWindow << " sinks " << c.sinks << " sequences "
                 << batch << " total_q " << totalQ << " total_k " << totalK);
    std::mt19937_64 rng(7 + totalQ * 5 + totalK);
    auto q = fa::test::randomNormal(hq * totalQ * d, rng);
    auto k = fa::test::randomNormal(hkv * totalK * d, rng);
    auto v = fa::test::randomNormal(hkv * totalK * d, rng);
    auto gradOutput = fa::test::randomNormal(hq * totalQ * d, rng);
    std::vector<float> sinks = {0.5f, -INFINITY, 3.0f, -2.0f};
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> o(size_t(hq * totalQ * d), 0.0f),
        lse(size_t(hq * totalQ), 0.0f);
    AttentionShape shape{batch, hq, hkv, totalQ, totalK};
    CpuSequenceOffsets offsets{cuQ.data(), cuK.data()};
    const float *sinkLogits = c.sinks ? sinks.data() : nullptr;
    if (llvm::Error error =
            forward.run(shape, q.data(), k.data(), v.data(), o.data(),
                        lse.data(), sinkLogits, {}, {}, offsets)) {
      ADD_FAILURE() << llvm::toString(std::move(error));
      return INFINITY;
    }
    std::vector<float> dq(q.size(), nan), dk(k.size(), nan),
        dv(v.size(), nan), dsinks(size_t(hq), nan);
    if (llvm::Error error = backward.runBackward(
            shape, q.data(), k.data(), v.data(), o.data(), gradOutput.data(),
            lse.data(), dq.data(), dk.data(), dv.data(), sinkLogits,
            c.sinks ? dsinks.data() : nullptr, {}, {}, offsets)) {
      ADD_FAILURE() << llvm::toString(std::move(error));
      return INFINITY;
    }
    std::vector<double> wantSinks(size_t(hq), 0.0);
    for (int64_t b = 0; b < batch; ++b) {
      int64_t sq = lengths.q[b], sk = lengths.k[b];
      SCOPED_TRACE(testing::Message() << "sequence " << b << " Sq=" << sq
                                      << " Sk=" << sk);
      fa::AttentionProblem p = sequenceProblem(
          c, sq, sk, hq, hkv, forward.getConfig().scale, sinks);
      std::vector<float> qs, ks, vs, dos, dqs, dks, dvs;
      copyRows(q, qs, hq, totalQ, cuQ[b], sq, d, true);
      copyRows(k, ks, hkv, totalK, cuK[b], sk, d, true);
      copyRows(v, vs, hkv, totalK, cuK[b], sk, d, true);
      copyRows(gradOutput, dos, hq, totalQ, cuQ[b], sq, d, true);
      copyRows(dq, dqs, hq, totalQ, cuQ[b], sq, d, true);
      copyRows(dk, dks, hkv, totalK, cuK[b], sk, d, true);
      copyRows(dv, dvs, hkv, totalK, cuK[b], sk, d, true);
      fa::ReferenceGradients want = fa::referenceAttentionBackward(
          p, qs.data(), ks.data(), vs.data(), dos.data());
      auto compare = [&](const std::vector<float> &got,
                         const std::vector<double> &exact) {
        double scale = 1.0;
        for (double x : exact)
          scale = std::max(scale, std::fabs(x));
        for (size_t i = 0; i < exact.size(); ++i) {
          double err = std::fabs(double(got[i]) - exact[i]) / scale;
          worst = std::max(worst, std::isnan(err) ? INFINITY : err);
        }
      };
      compare(dqs, want.gradQuery);
      compare(dks, want.gradKey);
      compare(dvs, want.gradValue);
      for (size_t h = 0; c.sinks && h < want.gradSinks.size(); ++h)
        wantSinks[h] += want.gradSinks[h];
    }
    if (c.sinks) {
      std::vector<float> got(dsinks.begin(), dsinks.end());
      for (size_t h = 0; h < got.size(); ++h) {
        double err = std::fabs(double(got[h]) - wantSinks[h]) /
                     std::max(1.0, std::fabs(wantSinks[h]));
        worst = std::max(worst, std::isnan(err) ? INFINITY : err);
      }
    }
    // No program adds to or writes a row that no sequence owns.
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t r = cuQ.back(); r < totalQ; ++r)
        for (int64_t e = 0; e < d; ++e)
          if (!std::isnan(dq[size_t((h * totalQ + r) * d + e)])) {
            ADD_FAILURE() << "spare row " << r << " of head " << h
                          << " of dQ was written";
            h = hq;
            break;
          }
  }
  return worst;
}

TEST(CpuVarlenBackward, MatchesEachSequenceAlone) {
  for (bool causal : {false, true})
    for (auto [bm, bn] : {std::pair<int64_t, int64_t>{8, 32}, {16, 16}})
      EXPECT_LE(runBackwardBatches({causal, bm, bn}, /*spareRows=*/0),
                kTolerance);
}

/// The deterministic mode: each sequence's turn counters; with the causal
/// mask its own K/V tiles last to first (the grid's slots past them see no
/// key), with a window first to last from each query tile's first tile.
/// The CPU lowering asserts every turn.
TEST(CpuVarlenBackward, DeterministicTurnsPerSequence) {
  for (bool causal : {false, true})
    for (auto [bm, bn] : {std::pair<int64_t, int64_t>{8, 32}, {16, 16}}) {
      Case c{causal, bm, bn};
      c.deterministic = true;
      EXPECT_LE(runBackwardBatches(c, /*spareRows=*/0), kTolerance);
      c.softcapWindow = true;
      EXPECT_LE(runBackwardBatches(c, /*spareRows=*/5), kTolerance);
    }
}

TEST(CpuVarlenBackward, LeavesRowsPastTheLastSequenceAlone) {
  EXPECT_LE(runBackwardBatches({/*causal=*/true, 8, 32}, /*spareRows=*/11),
            kTolerance);
}

/// Deterministic too: the sinks' gradient from each sequence's own query
/// tiles' shares, summed per head in a fixed order (the CPU's delta grid
/// also runs the tiles past a sequence's rows, whose shares are 0).
TEST(CpuVarlenBackward, VariantsAndSinksSeeTheSequencesOwnIndices) {
  for (bool deterministic : {false, true})
    for (bool causal : {false, true}) {
      Case c{causal, 8, 32, /*softcapWindow=*/true, /*sinks=*/true};
      c.deterministic = deterministic;
      EXPECT_LE(runBackwardBatches(c, /*spareRows=*/0), kTolerance);
    }
}

/// A sanity check of the backward comparison: gradients of a batch whose
/// key offsets are shifted by one differ from the right ones.
TEST(CpuVarlenBackward, ShiftedKeyOffsetsAreNoticed) {
  CpuKernelConfig config = configFor({});
  config.backward = true;
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
  const int64_t hq = 2, hkv = 2, d = kHeadDim;
  std::vector<int32_t> cuQ = {0, 10, 30}, cuK = {0, 12, 40};
  std::mt19937_64 rng(6);
  auto q = fa::test::randomNormal(hq * 30 * d, rng);
  auto k = fa::test::randomNormal(hkv * 40 * d, rng);
  auto v = fa::test::randomNormal(hkv * 40 * d, rng);
  auto o = fa::test::randomNormal(hq * 30 * d, rng);
  auto gradOutput = fa::test::randomNormal(hq * 30 * d, rng);
  std::vector<float> lse(size_t(hq * 30), 3.0f);
  auto runWith = [&](std::vector<int32_t> keys) {
    std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
    llvm::Error error = kernel.runBackward(
        {2, hq, hkv, 30, 40}, q.data(), k.data(), v.data(), o.data(),
        gradOutput.data(), lse.data(), dq.data(), dk.data(), dv.data(),
        nullptr, nullptr, {}, {}, CpuSequenceOffsets{cuQ.data(), keys.data()});
    EXPECT_FALSE(error) << llvm::toString(std::move(error));
    return dk;
  };
  std::vector<float> right = runWith(cuK), shifted = runWith({0, 13, 40});
  double largest = 0.0;
  for (size_t i = 0; i < right.size(); ++i)
    largest = std::max(largest, double(std::fabs(right[i] - shifted[i])));
  EXPECT_GT(largest, 1e-2);
}

/// A KV cache's filled lengths (kv_lens): batch entry b attends to its
/// first kv_lens[b] keys (clamped to the cache), the causal mask aligned
/// to the end of the filled part; keys past it hold NaN and must never
/// reach a score or a product. With varlen, the lengths count within each
/// sequence's keys.
/// `parts` > 0: the split-KV kernel, the keys in that many parts; `sinks`:
/// with a sink logit per head (joined once, after the parts' merge).
double runKvLens(bool causal, bool variant, bool varlen, int64_t parts = 0,
                 bool sinks = false) {
  const Case c{causal, 8, 32, variant, sinks};
  CpuKernelConfig config = configFor(c);
  config.varlen = varlen;
  config.kvLens = true;
  config.splitKv = parts > 0;
  std::vector<float> sinkLogits = {0.5f, -INFINITY, 3.0f, -2.0f};
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
  const int64_t hq = 4, hkv = 2, d = kHeadDim, cache = 70;
  // Lengths: empty, one key, a tail, a full cache, past the cache.
  std::vector<int32_t> lens = {0, 1, 37, 70, 75};
  std::vector<int64_t> qLens = {3, 1, 5, 9, 2};
  int64_t batch = int64_t(lens.size());
  // Not varlen: [B, H, S, D] with Sq the longest; varlen: packed rows,
  // each sequence's cache `cache` keys long.
  int64_t sq = 9;
  std::vector<int32_t> cuQ = {0}, cuK = {0};
  for (int64_t b = 0; b < batch; ++b) {
    cuQ.push_back(cuQ.back() + int32_t(qLens[b]));
    cuK.push_back(cuK.back() + int32_t(cache));
  }
  int64_t qRows = varlen ? cuQ.back() : batch * sq;
  int64_t kRows = batch * cache;
  std::mt19937_64 rng(31 + causal * 2 + variant + varlen * 4);
  auto q = fa::test::randomNormal(hq * qRows * d, rng);
  auto k = fa::test::randomNormal(hkv * kRows * d, rng);
  auto v = fa::test::randomNormal(hkv * kRows * d, rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Index of key row r of entry b, head h, in the tensors' layout.
  auto keyAt = [&](int64_t b, int64_t h, int64_t r) {
    return varlen ? (h * kRows + cuK[b] + r) * d
                  : ((b * hkv + h) * cache + r) * d;
  };
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hkv; ++h)
      for (int64_t r = std::min<int64_t>(lens[b], cache); r < cache; ++r)
        for (int64_t e = 0; e < d; ++e)
          k[size_t(keyAt(b, h, r) + e)] = v[size_t(keyAt(b, h, r) + e)] = nan;
  std::vector<float> o(q.size(), nan), lse(size_t(hq * qRows), nan);
  AttentionShape shape{batch, hq, hkv, varlen ? qRows : sq,
                       varlen ? kRows : cache};
  llvm::Error error = kernel.run(
      shape, q.data(), k.data(), v.data(), o.data(), lse.data(),
      sinks ? sinkLogits.data() : nullptr, {}, {},
      varlen ? CpuSequenceOffsets{cuQ.data(), cuK.data()}
             : CpuSequenceOffsets{},
      lens.data(), std::max<int64_t>(parts, 1));
  if (error) {
    ADD_FAILURE() << llvm::toString(std::move(error));
    return INFINITY;
  }
  double worst = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t rows = varlen ? qLens[b] : sq;
    int64_t used = std::min<int64_t>(lens[b], cache);
    SCOPED_TRACE(testing::Message() << "entry " << b << " Sq=" << rows
                                    << " kv_len=" << used << " causal "
                                    << causal << " variant " << variant
                                    << " varlen " << varlen << " parts "
                                    << parts << " sinks " << sinks);
    // The filled length is the reference's key length.
    fa::AttentionProblem p = sequenceProblem(
        c, rows, used, hq, hkv, kernel.getConfig().scale, sinkLogits);
    std::vector<float> qs(size_t(hq * rows * d)), ks(size_t(hkv * used * d)),
        vs(ks.size());
    auto queryAt = [&](int64_t h, int64_t i) {
      return varlen ? (h * qRows + cuQ[b] + i) * d : ((b * hq + h) * sq + i) * d;
    };
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t e = 0; e < d; ++e)
          qs[size_t((h * rows + i) * d + e)] = q[size_t(queryAt(h, i) + e)];
    for (int64_t h = 0; h < hkv; ++h)
      for (int64_t r = 0; r < used; ++r)
        for (int64_t e = 0; e < d; ++e) {
          ks[size_t((h * used + r) * d + e)] = k[size_t(keyAt(b, h, r) + e)];
          vs[size_t((h * used + r) * d + e)] = v[size_t(keyAt(b, h, r) + e)];
        }
    fa::ReferenceResult want =
        fa::referenceAttention(p, qs.data(), ks.data(), vs.data());
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t e = 0; e < d; ++e) {
          double err = std::fabs(double(o[size_t(queryAt(h, i) + e)]) -
                                 want.output[size_t((h * rows + i) * d + e)]);
          worst = std::max(worst, std::isnan(err) ? INFINITY : err);
        }
        double wantLse = want.lse[size_t(h * rows + i)];
        double gotLse = lse[size_t(queryAt(h, i) / d)];
        double err = std::isinf(wantLse)
                         ? (gotLse == wantLse ? 0.0 : INFINITY)
                         : std::fabs(gotLse - wantLse);
        worst = std::max(worst, std::isnan(err) ? INFINITY : err);
      }
  }
  return worst;
}

TEST(CpuKvLens, AttendsToTheFilledPartOnly) {
  for (bool causal : {false, true})
    EXPECT_LE(runKvLens(causal, /*variant=*/false, /*varlen=*/false),
              kTolerance);
}

TEST(CpuKvLens, VariantsSeeTheFilledLength) {
  EXPECT_LE(runKvLens(/*causal=*/true, /*variant=*/true, /*varlen=*/false),
            kTolerance);
}

TEST(CpuKvLens, CountsWithinEachVarlenSequence) {
  for (bool causal : {false, true})
    EXPECT_LE(runKvLens(causal, /*variant=*/false, /*varlen=*/true),
              kTolerance);
}

/// Split-KV: the keys of each query tile in parts (a program each), merged
/// by their log-sum-exps. 1 part; 2, 3 (uneven); 7 and 40 parts of at most
/// three 32-key tiles (most parts see no key; a part's partial results
/// start as NaN, so one that is not written shows); with causal rows,
/// variants, sinks and varlen sequences.
TEST(CpuSplitKv, MergesThePartsOfTheKeys) {
  for (int64_t parts : {1, 2, 3, 7, 40})
    for (bool causal : {false, true})
      EXPECT_LE(runKvLens(causal, /*variant=*/false, /*varlen=*/false, parts),
                kTolerance)
          << parts << " parts";
}

TEST(CpuSplitKv, JoinsTheSinksOnceAfterTheMerge) {
  for (int64_t parts : {1, 3})
    EXPECT_LE(runKvLens(/*causal=*/true, /*variant=*/false, /*varlen=*/false,
                        parts, /*sinks=*/true),
              kTolerance)
        << parts << " parts";
}

TEST(CpuSplitKv, VariantsAndVarlenSequences) {
  EXPECT_LE(runKvLens(/*causal=*/true, /*variant=*/true, /*varlen=*/false, 3),
            kTolerance);
  EXPECT_LE(runKvLens(/*causal=*/false, /*variant=*/false, /*varlen=*/true, 2),
            kTolerance);
  // Without kv_lens: varlen batches (sequences without keys or rows, spare
  // rows no sequence owns left alone), with sinks and variants.
  for (int64_t parts : {2, 5}) {
    EXPECT_LE(runBatches({true, 8, 32, false, false}, 3, parts), kTolerance);
    EXPECT_LE(runBatches({false, 8, 16, true, true}, 0, parts), kTolerance);
  }
}

TEST(CpuSplitKv, PartsAreChecked) {
  CpuKernelConfig config = configFor({});
  config.varlen = false;
  config.splitKv = true;
  CpuAttentionKernel &split = fa::test::getCpuKernel(config);
  std::vector<float> t(size_t(kHeadDim), 0.0f), lse(1);
  AttentionShape shape{1, 1, 1, 1, 1};
  llvm::Error error = split.run(shape, t.data(), t.data(), t.data(), t.data(),
                                lse.data(), nullptr, {}, {}, {}, nullptr, 0);
  EXPECT_EQ(llvm::toString(std::move(error)),
            "kvParts is 0: a split-KV kernel needs at least 1 part");
  config.splitKv = false;
  CpuAttentionKernel &whole = fa::test::getCpuKernel(config);
  error = whole.run(shape, t.data(), t.data(), t.data(), t.data(), lse.data(),
                    nullptr, {}, {}, {}, nullptr, 2);
  EXPECT_EQ(llvm::toString(std::move(error)),
            "kvParts is 2: only a split-KV kernel takes parts");
}

/// Writes one entry's `rows` keys and values ([Hkv, rows, D] each) into a
/// pool of pages [pages, Hkv, P, D] through its table row `pages` (key j
/// at page pages[j / P], row j % P).
void writeThroughPages(const std::vector<float> &keys,
                       const std::vector<float> &values, int64_t rows,
                       const int32_t *pages, int64_t page, int64_t hkv,
                       int64_t d, std::vector<float> &k,
                       std::vector<float> &v) {
  for (int64_t h = 0; h < hkv; ++h)
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t e = 0; e < d; ++e) {
        size_t pool =
            size_t(((pages[j / page] * hkv + h) * page + j % page) * d + e);
        size_t own = size_t((h * rows + j) * d + e);
        k[pool] = keys[own];
        v[pool] = values[own];
      }
}

/// A paged KV cache: entry b's keys are its table's pages (P rows each) of
/// a pool, shuffled, with pages no table names full of NaN; kv_lens counts
/// the filled keys. Against the float64 reference of each entry's
/// contiguous keys. `parts` > 0: split-KV too. `gather`: each K/V row's
/// page looked up on its own (any page size; K/V tiles of 16 rows).
double runPaged(int64_t page, int64_t parts, bool causal, bool gather = false) {
  const Case c{causal, 8, 16, /*variant=*/false, /*sinks=*/false};
  CpuKernelConfig config = configFor(c);
  config.varlen = false;
  config.kvLens = true;
  config.pagedKv = true;
  config.tiles.pageGather = gather;
  config.splitKv = parts > 0;
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
  const int64_t hq = 4, hkv = 2, d = kHeadDim, sq = 3, maxPages = 5;
  std::vector<int32_t> lens = {0, 1, int32_t(page + 3),
                               int32_t(maxPages * page),
                               int32_t(std::min<int64_t>(7, maxPages * page))};
  int64_t batch = int64_t(lens.size()), count = batch * maxPages + 2;
  // Page p of entry b is pool page table[b, p]: a shuffled permutation.
  std::vector<int32_t> table(size_t(batch * maxPages));
  std::vector<int32_t> order(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    order[size_t(i)] = int32_t((i * 7 + 3) % count);
  std::copy(order.begin(), order.begin() + table.size(), table.begin());
  std::mt19937_64 rng(77 + page + parts * 3 + causal);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> k(size_t(count * hkv * page * d), nan), v(k.size(), nan);
  auto q = fa::test::randomNormal(batch * hq * sq * d, rng);
  // The logical keys of each entry, written through the table.
  std::vector<std::vector<float>> keys(static_cast<size_t>(batch)),
      values(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t used = lens[size_t(b)];
    keys[size_t(b)] = fa::test::randomNormal(hkv * used * d, rng);
    values[size_t(b)] = fa::test::randomNormal(hkv * used * d, rng);
    writeThroughPages(keys[size_t(b)], values[size_t(b)], used,
                      &table[size_t(b * maxPages)], page, hkv, d, k, v);
  }
  std::vector<float> o(q.size(), nan), lse(size_t(batch * hq * sq), nan);
  AttentionShape shape{batch, hq, hkv, sq, page};
  llvm::Error error = kernel.run(
      shape, q.data(), k.data(), v.data(), o.data(), lse.data(), nullptr, {},
      {}, {}, lens.data(), std::max<int64_t>(parts, 1),
      CpuPages{table.data(), maxPages, count});
  if (error) {
    ADD_FAILURE() << llvm::toString(std::move(error));
    return INFINITY;
  }
  double worst = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t used = lens[size_t(b)];
    SCOPED_TRACE(testing::Message()
                 << "entry " << b << " kv_len=" << used << " page " << page
                 << " parts " << parts << " causal " << causal << " gather "
                 << gather);
    fa::AttentionProblem p = sequenceProblem(c, sq, used, hq, hkv,
                                             kernel.getConfig().scale, {});
    std::vector<float> qs(q.begin() + b * hq * sq * d,
                          q.begin() + (b + 1) * hq * sq * d);
    fa::ReferenceResult want = fa::referenceAttention(
        p, qs.data(), keys[size_t(b)].data(), values[size_t(b)].data());
    for (size_t i = 0; i < want.output.size(); ++i) {
      double err = std::fabs(double(o[size_t(b * hq * sq * d) + i]) -
                             want.output[i]);
      worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    }
    for (size_t i = 0; i < want.lse.size(); ++i) {
      double got = lse[size_t(b * hq * sq) + i];
      double err = std::isinf(want.lse[i])
                       ? (got == want.lse[i] ? 0.0 : INFINITY)
                       : std::fabs(got - want.lse[i]);
      worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    }
  }
  return worst;
}

TEST(CpuPagedKv, ReadsEachEntrysPages) {
  for (int64_t page : {16, 32, 48})
    for (bool causal : {false, true})
      EXPECT_LE(runPaged(page, /*parts=*/0, causal), kTolerance)
          << "page " << page;
}

TEST(CpuPagedKv, SplitsThePagedKeys) {
  for (int64_t parts : {2, 7})
    EXPECT_LE(runPaged(32, parts, /*causal=*/true), kTolerance)
        << parts << " parts";
}

// Pages smaller than a K/V tile, or that it does not divide: each row's
// page is looked up (a 16-row tile spans up to 16 pages of 1 row, or
// straddles pages of 3, 5 or 24), with and without split-KV.
TEST(CpuPagedKv, GathersRowsOfAnyPageSize) {
  for (int64_t page : {1, 3, 5, 16, 24})
    for (bool causal : {false, true})
      EXPECT_LE(runPaged(page, /*parts=*/0, causal, /*gather=*/true),
                kTolerance)
          << "page " << page;
  for (int64_t parts : {2, 7})
    EXPECT_LE(runPaged(3, parts, /*causal=*/true, /*gather=*/true), kTolerance)
        << parts << " parts";
}

TEST(CpuPagedKv, TilesThatStraddlePagesNeedTheGather) {
  CpuKernelConfig config = configFor({false, 8, 16, false, false});
  config.varlen = false;
  config.pagedKv = true;
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
  std::vector<float> t(size_t(4 * kHeadDim), 0.0f), lse(1);
  std::vector<int32_t> table = {0};
  AttentionShape shape{1, 1, 1, 1, /*kvLen (the page)=*/4};
  llvm::Error error =
      kernel.run(shape, t.data(), t.data(), t.data(), t.data(), lse.data(),
                 nullptr, {}, {}, {}, nullptr, 1, CpuPages{table.data(), 1, 1});
  EXPECT_EQ(llvm::toString(std::move(error)),
            "page size 4 must be a multiple of block_n 16 (a K/V tile is read "
            "from one page; pageGather reads any page size)");
}

/// A paged varlen batch: the packed queries of kBatches' sequences against
/// keys in a paged pool (table row b = sequence b; cu_seqlens_k counts
/// each sequence's keys), pages no table names full of NaN. `usedKeys`:
/// kv_lens too, some shorter than the sequence's keys and one longer
/// (clamped to them). Against the float64 reference of each sequence alone.
double runPagedVarlen(int64_t page, int64_t parts, bool causal, bool gather,
                      bool usedKeys) {
  const Case c{causal, 8, 16, /*variant=*/false, /*sinks=*/false};
  CpuKernelConfig config = configFor(c);
  config.pagedKv = true;
  config.tiles.pageGather = gather;
  config.splitKv = parts > 0;
  config.kvLens = usedKeys;
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
  const int64_t hq = 4, hkv = 2, d = kHeadDim;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  double worst = 0.0;
  for (const Lengths &lengths : kBatches) {
    std::vector<int32_t> cuQ = offsetsOf(lengths.q), cuK = offsetsOf(lengths.k);
    int64_t batch = int64_t(lengths.q.size()), totalQ = cuQ.back();
    int64_t longest = *std::max_element(lengths.k.begin(), lengths.k.end());
    int64_t maxPages = std::max<int64_t>((longest + page - 1) / page, 1);
    // Pool pages (i * 7 + 3) % count: a permutation, count prime to 7.
    int64_t count = batch * maxPages + 2;
    if (count % 7 == 0)
      ++count;
    // Sequence b's keys: the first used[b] of its cu_seqlens_k count.
    std::vector<int32_t> lens(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b)
      lens[size_t(b)] =
          int32_t(b == 1 ? lengths.k[b] + 5 : lengths.k[b] * 2 / 3);
    SCOPED_TRACE(testing::Message()
                 << "page " << page << " parts " << parts << " causal "
                 << causal << " gather " << gather << " kv_lens " << usedKeys
                 << " sequences " << batch);
    std::vector<int32_t> table(static_cast<size_t>(batch * maxPages));
    for (int64_t i = 0; i < int64_t(table.size()); ++i)
      table[size_t(i)] = int32_t((i * 7 + 3) % count);
    std::mt19937_64 rng(31 + page + parts * 3 + causal + totalQ);
    auto q = fa::test::randomNormal(hq * totalQ * d, rng);
    std::vector<float> k(size_t(count * hkv * page * d), nan), v(k.size(), nan);
    std::vector<std::vector<float>> keys, values;
    for (int64_t b = 0; b < batch; ++b) {
      int64_t sk = lengths.k[b];
      keys.push_back(fa::test::randomNormal(hkv * sk * d, rng));
      values.push_back(fa::test::randomNormal(hkv * sk * d, rng));
      writeThroughPages(keys.back(), values.back(), sk,
                        &table[size_t(b * maxPages)], page, hkv, d, k, v);
    }
    std::vector<float> o(q.size(), nan), lse(size_t(hq * totalQ), nan);
    AttentionShape shape{batch, hq, hkv, totalQ, page};
    llvm::Error error = kernel.run(
        shape, q.data(), k.data(), v.data(), o.data(), lse.data(), nullptr, {},
        {}, CpuSequenceOffsets{cuQ.data(), cuK.data()},
        usedKeys ? lens.data() : nullptr, std::max<int64_t>(parts, 1),
        CpuPages{table.data(), maxPages, count});
    if (error) {
      ADD_FAILURE() << llvm::toString(std::move(error));
      return INFINITY;
    }
    for (int64_t b = 0; b < batch; ++b) {
      int64_t sq = lengths.q[b], stored = lengths.k[b];
      int64_t sk =
          usedKeys ? std::min<int64_t>(lens[size_t(b)], stored) : stored;
      SCOPED_TRACE(testing::Message()
                   << "sequence " << b << " Sq=" << sq << " Sk=" << sk);
      // The reference's K, V: the first sk keys of the sequence's.
      std::vector<float> ks(size_t(hkv * sk * d)), vs(ks.size());
      for (int64_t h = 0; h < hkv; ++h)
        for (int64_t j = 0; j < sk * d; ++j) {
          ks[size_t(h * sk * d + j)] =
              keys[size_t(b)][size_t(h * stored * d + j)];
          vs[size_t(h * sk * d + j)] =
              values[size_t(b)][size_t(h * stored * d + j)];
        }
      fa::AttentionProblem p =
          sequenceProblem(c, sq, sk, hq, hkv, kernel.getConfig().scale, {});
      std::vector<float> qs, os, lses;
      copyRows(q, qs, hq, totalQ, cuQ[b], sq, d, true);
      copyRows(o, os, hq, totalQ, cuQ[b], sq, d, true);
      copyRows(lse, lses, hq, totalQ, cuQ[b], sq, 1, true);
      fa::ReferenceResult want =
          fa::referenceAttention(p, qs.data(), ks.data(), vs.data());
      worst = std::max(worst, forwardError(want, os, lses));
    }
  }
  return worst;
}

TEST(CpuPagedVarlen, ReadsEachSequencesPages) {
  for (int64_t page : {16, 48})
    for (bool causal : {false, true})
      EXPECT_LE(runPagedVarlen(page, /*parts=*/0, causal, /*gather=*/false,
                               /*usedKeys=*/false),
                kTolerance)
          << "page " << page << " causal " << causal;
}

TEST(CpuPagedVarlen, UsedKeysSplitsAndRowByRowPages) {
  for (bool gather : {false, true})
    for (int64_t parts : {0, 3})
      EXPECT_LE(runPagedVarlen(gather ? 5 : 16, parts, /*causal=*/true, gather,
                               /*usedKeys=*/true),
                kTolerance);
  EXPECT_LE(runPagedVarlen(1, /*parts=*/0, /*causal=*/false, /*gather=*/true,
                           /*usedKeys=*/false),
            kTolerance);
}

/// K/V entries by index (cache_batch_idx): batch entry b reads cache entry
/// index[b] of a cache with more entries than queries; the entries no
/// index names, and each entry past its length, hold NaN.
TEST(CpuCacheBatchIndex, ReadsTheIndexedEntries) {
  for (int64_t parts : {0, 3}) {
    const Case c{/*causal=*/true, 8, 16, false, false};
    CpuKernelConfig config = configFor(c);
    config.varlen = false;
    config.kvLens = true;
    config.cacheBatchIndex = true;
    config.splitKv = parts > 0;
    CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
    const int64_t hq = 4, hkv = 2, d = kHeadDim, sq = 2, cache = 40;
    const int64_t entries = 4;
    std::vector<int32_t> index = {3, 0, 2}, lens = {33, 0, 40};
    int64_t batch = int64_t(index.size());
    std::mt19937_64 rng(5 + parts);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    auto q = fa::test::randomNormal(batch * hq * sq * d, rng);
    std::vector<float> k(size_t(entries * hkv * cache * d), nan),
        v(k.size(), nan);
    std::vector<std::vector<float>> keys, values;
    for (int64_t b = 0; b < batch; ++b) {
      int64_t used = lens[size_t(b)], entry = index[size_t(b)];
      keys.push_back(fa::test::randomNormal(hkv * used * d, rng));
      values.push_back(fa::test::randomNormal(hkv * used * d, rng));
      for (int64_t h = 0; h < hkv; ++h)
        for (int64_t j = 0; j < used; ++j)
          for (int64_t e = 0; e < d; ++e) {
            size_t at = size_t(((entry * hkv + h) * cache + j) * d + e);
            k[at] = keys.back()[size_t((h * used + j) * d + e)];
            v[at] = values.back()[size_t((h * used + j) * d + e)];
          }
    }
    std::vector<float> o(q.size(), nan), lse(size_t(batch * hq * sq), nan);
    AttentionShape shape{batch, hq, hkv, sq, cache};
    llvm::Error error = kernel.run(
        shape, q.data(), k.data(), v.data(), o.data(), lse.data(), nullptr,
        {}, {}, {}, lens.data(), std::max<int64_t>(parts, 1), {},
        CpuCacheIndex{index.data(), entries});
    ASSERT_FALSE(error) << llvm::toString(std::move(error));
    for (int64_t b = 0; b < batch; ++b) {
      int64_t used = lens[size_t(b)];
      fa::AttentionProblem p = sequenceProblem(c, sq, used, hq, hkv,
                                               kernel.getConfig().scale, {});
      std::vector<float> qs(q.begin() + b * hq * sq * d,
                            q.begin() + (b + 1) * hq * sq * d);
      fa::ReferenceResult want = fa::referenceAttention(
          p, qs.data(), keys[size_t(b)].data(), values[size_t(b)].data());
      double worst = 0.0;
      for (size_t i = 0; i < want.output.size(); ++i) {
        double err = std::fabs(double(o[size_t(b * hq * sq * d) + i]) -
                               want.output[i]);
        worst = std::max(worst, std::isnan(err) ? INFINITY : err);
      }
      EXPECT_LE(worst, kTolerance) << "entry " << b << " (cache entry "
                                   << index[size_t(b)] << ") parts " << parts;
    }
  }
}

} // namespace
