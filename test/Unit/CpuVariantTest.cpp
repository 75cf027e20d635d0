//===- CpuVariantTest.cpp - score_mod / mask_mod variants on the CPU -*- C++ -*-===//
//
// Each built-in variant (lib/Variants.h: MLIR text the compiler turns into
// regions) compiled through the tiling passes and the CPU lowering, against
// the float64 reference with the same variant written as plain C++. Shapes
// cover Sq = Sk, Sq < Sk, Sq > Sk (rows that see no key), GQA and tails, so
// the K/V ranges derived from the masks and the whole-tile shortcuts are
// exercised on every side.
//
//===----------------------------------------------------------------------===//

#include "compiler/Cpu/CpuRunner.h"
#include "compiler/KernelCompiler.h"
#include "lib/ReferenceAttention.h"
#include "lib/Variants.h"
#include "test/Common/CpuKernels.h"
#include "test/Common/GuardedBuffer.h"
#include "test/Common/LowPrecision.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

using namespace mlir::fa;

namespace {

/// As CpuExecutionTest's bound: f32 kernels against float64, O(1) scores.
constexpr double kTolerance = 2e-5;
/// As CpuBackwardTest's: f32 gradients within 1e-5 of each gradient's size.
constexpr double kBackwardRelativeTolerance = 1e-5;

/// One variant: its spec texts and the same function in plain C++.
struct Variant {
  std::string name;
  std::string scoreMod, maskMod;
  bool causal = false;
  /// Query row i sits at key position i + Sk - Sq (the masks' alignment).
  std::function<double(double, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t)>
      score; // (s, b, h, i, j, Sq, Sk)
  std::function<bool(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t)>
      keep; // (b, h, i, j, Sq, Sk)
  /// A variant that reads tensors: fills them for a shape (B, Hq, Sq, Sk),
  /// the same on every call, and returns them for the kernel; `score` and
  /// `keep` read the same values.
  std::function<std::vector<CpuCapture>(int64_t, int64_t, int64_t, int64_t)>
      captures;
};

/// The kernel's captures of `variant` for a shape; a `reference` that
/// reads tensors fills its own copy (a mutated one may differ).
std::vector<CpuCapture> capturesFor(const Variant &variant,
                                    const Variant &reference, int64_t b,
                                    int64_t hq, int64_t sq, int64_t sk) {
  if (&reference != &variant && reference.captures)
    reference.captures(b, hq, sq, sk);
  return variant.captures ? variant.captures(b, hq, sq, sk)
                          : std::vector<CpuCapture>{};
}

/// Document ids [B, Sk] in runs of 1 to 9 keys (a run of one included).
/// `mutate`: the reference's ids with one key moved to another document.
/// The kernel's copy ends at an unmapped page: a padding key's id read
/// past Sk (an unclamped index) faults.
Variant documentVariant(bool causal, bool mutate = false) {
  auto docs = std::make_shared<std::vector<int32_t>>();
  auto guarded = std::make_shared<fa::test::GuardedBuffer>();
  Variant v{"document", "", fa::variants::document(), causal, {}, {}, {}};
  v.captures = [docs, guarded, mutate](int64_t b, int64_t, int64_t,
                                       int64_t sk) -> std::vector<CpuCapture> {
    docs->assign(size_t(b * sk), 0);
    std::mt19937 rng(unsigned(17 + sk));
    for (int64_t batch = 0; batch < b; ++batch) {
      int32_t id = 0;
      for (int64_t j = 0; j < sk;) {
        int64_t run = j == 0 ? 1 : 1 + int64_t(rng() % 9);
        for (int64_t r = 0; r < run && j < sk; ++r, ++j)
          (*docs)[size_t(batch * sk + j)] = id;
        ++id;
      }
    }
    if (mutate && sk > 2)
      (*docs)[size_t(sk / 2)] += 1000;
    guarded->resize(docs->size() * sizeof(int32_t));
    std::memcpy(guarded->data(), docs->data(), docs->size() * sizeof(int32_t));
    return {CpuCapture{guarded->data(), {b, sk}}};
  };
  v.keep = [docs](int64_t b, int64_t, int64_t i, int64_t j, int64_t sq,
                  int64_t sk) {
    int64_t position = i + sk - sq;
    return position >= 0 && (*docs)[size_t(b * sk + position)] ==
                                (*docs)[size_t(b * sk + j)];
  };
  return v;
}

/// A bias table bias[h, i, j] in f16 ([Hq, Sq, Sk]), as the kernel reads
/// it (the reference takes the rounded values).
Variant biasVariant() {
  auto bias = std::make_shared<std::vector<uint16_t>>();
  Variant v{"bias", fa::variants::scoreBias(), "", false, {}, {}, {}};
  v.captures = [bias](int64_t, int64_t hq, int64_t sq,
                      int64_t sk) -> std::vector<CpuCapture> {
    std::mt19937_64 rng(uint64_t(5 + sq * sk));
    std::vector<float> values = fa::test::randomNormal(size_t(hq * sq * sk), rng);
    bias->resize(values.size());
    for (size_t i = 0; i < values.size(); ++i)
      (*bias)[i] = fa::test::toBits(2.0f * values[i], fa::ElementType::f16);
    return {CpuCapture{bias->data(), {hq, sq, sk}}};
  };
  v.score = [bias](double s, int64_t, int64_t h, int64_t i, int64_t j,
                   int64_t sq, int64_t sk) {
    return s + fa::test::fromBits((*bias)[size_t((h * sq + i) * sk + j)],
                                  fa::ElementType::f16);
  };
  return v;
}

/// A dense keep table (i8 [B, Sq, Sk], a bool tensor's bytes: about half
/// the scores kept) and per-batch key lengths (i64 [B], sized with
/// memref.dim): the other capture widths, and a region that reads two.
Variant tableVariant() {
  auto table = std::make_shared<std::vector<int8_t>>();
  auto lengths = std::make_shared<std::vector<int64_t>>();
  std::string maskMod =
      "func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, "
      "%q_len: index, %kv_len: index, %keep: memref<?x?x?xi8>, "
      "%lengths: memref<?xi64>) -> i1 {\n"
      "  %x = memref.load %keep[%b, %q, %kv] : memref<?x?x?xi8>\n"
      "  %zero = arith.constant 0 : i8\n"
      "  %kept = arith.cmpi ne, %x, %zero : i8\n"
      "  %c0 = arith.constant 0 : index\n"
      "  %c1 = arith.constant 1 : index\n"
      "  %batches = memref.dim %lengths, %c0 : memref<?xi64>\n"
      "  %lastBatch = arith.subi %batches, %c1 : index\n"
      "  %row = arith.minui %b, %lastBatch : index\n"
      "  %n = memref.load %lengths[%row] : memref<?xi64>\n"
      "  %ni = arith.index_cast %n : i64 to index\n"
      "  %inside = arith.cmpi slt, %kv, %ni : index\n"
      "  %both = arith.andi %kept, %inside : i1\n"
      "  return %both : i1\n}\n";
  Variant v{"table", "", maskMod, false, {}, {}, {}};
  v.captures = [table, lengths](int64_t b, int64_t, int64_t sq,
                                int64_t sk) -> std::vector<CpuCapture> {
    std::mt19937 rng(unsigned(3 + sq * sk));
    table->resize(size_t(b * sq * sk));
    for (int8_t &x : *table)
      x = int8_t(rng() % 2);
    lengths->resize(size_t(b));
    for (int64_t batch = 0; batch < b; ++batch)
      (*lengths)[size_t(batch)] = sk - batch * (sk / 3);
    return {CpuCapture{table->data(), {b, sq, sk}},
            CpuCapture{lengths->data(), {b}}};
  };
  v.keep = [table, lengths](int64_t b, int64_t, int64_t i, int64_t j,
                            int64_t sq, int64_t sk) {
    return (*table)[size_t((b * sq + i) * sk + j)] != 0 &&
           j < (*lengths)[size_t(b)];
  };
  return v;
}

/// A score_mod and a mask_mod that each read a tensor: the kernel takes
/// the bias (the score_mod's), then the document ids (the mask_mod's).
Variant biasDocumentVariant() {
  Variant bias = biasVariant(), document = documentVariant(/*causal=*/true);
  Variant v{"bias_document", bias.scoreMod, document.maskMod, true,
            bias.score, document.keep, {}};
  v.captures = [bias, document](int64_t b, int64_t hq, int64_t sq,
                                int64_t sk) {
    std::vector<CpuCapture> captures = bias.captures(b, hq, sq, sk);
    for (CpuCapture &c : document.captures(b, hq, sq, sk))
      captures.push_back(std::move(c));
    return captures;
  };
  return v;
}

/// ALiBi with its slopes read from a tensor ([Hq] f32): the same function
/// as alibiVariant's constants.
Variant alibiSlopesVariant(bool causal) {
  auto slopes = std::make_shared<std::vector<float>>();
  Variant v{"alibi_slopes", fa::variants::alibiSlopes(), "", causal, {}, {},
            {}};
  v.captures = [slopes](int64_t, int64_t hq, int64_t,
                        int64_t) -> std::vector<CpuCapture> {
    slopes->resize(size_t(hq));
    for (int64_t h = 0; h < hq; ++h)
      (*slopes)[size_t(h)] = float(std::exp2(-8.0 * double(h + 1) / double(hq)));
    return {CpuCapture{slopes->data(), {hq}}};
  };
  v.score = [slopes](double s, int64_t, int64_t h, int64_t i, int64_t j,
                     int64_t sq, int64_t sk) {
    return s - double((*slopes)[size_t(h)]) * std::fabs(double(i + sk - sq - j));
  };
  return v;
}

Variant softcapVariant(double cap) {
  Variant v{"softcap", fa::variants::softcap(cap), "", false, {}, {}};
  v.score = [cap](double s, int64_t, int64_t, int64_t, int64_t, int64_t,
                  int64_t) { return cap * std::tanh(s / cap); };
  return v;
}

Variant windowVariant(int64_t left, int64_t right, bool causal = false) {
  Variant v{"window", "", fa::variants::slidingWindow(left, right), causal,
            {}, {}};
  v.keep = [left, right](int64_t, int64_t, int64_t i, int64_t j, int64_t sq,
                         int64_t sk) {
    int64_t diag = i + sk - sq;
    return (left < 0 || j >= diag - left) && (right < 0 || j <= diag + right);
  };
  return v;
}

Variant prefixVariant(int64_t prefix) {
  Variant v{"prefix_lm", "", fa::variants::prefixLm(prefix), false, {}, {}};
  v.keep = [prefix](int64_t, int64_t, int64_t i, int64_t j, int64_t sq,
                    int64_t sk) { return j < prefix || j <= i + sk - sq; };
  return v;
}

Variant chunkVariant(int64_t chunk) {
  Variant v{"same_chunk", "", fa::variants::sameChunk(chunk), false, {}, {}};
  auto floorDiv = [](int64_t a, int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
  };
  v.keep = [chunk, floorDiv](int64_t, int64_t, int64_t i, int64_t j,
                             int64_t sq, int64_t sk) {
    return floorDiv(i + sk - sq, chunk) == floorDiv(j, chunk);
  };
  return v;
}

Variant alibiVariant(int64_t heads, bool causal) {
  Variant v{"alibi", fa::variants::alibi(heads), "", causal, {}, {}};
  v.score = [heads](double s, int64_t, int64_t h, int64_t i, int64_t j,
                    int64_t sq, int64_t sk) {
    double slope = std::exp2(-8.0 * double(h + 1) / double(heads));
    return s - slope * std::fabs(double(i + sk - sq - j));
  };
  return v;
}

/// Sink tokens and a window: keys below `sinks`, or within `left` keys
/// before the diagonal and `right` after it. The forward's K/V loop skips
/// the tiles between the two intervals (fa.kv_tile_hole): on 16-key tiles
/// the 64 x 64 shape's last query tiles skip one, the 1 x 70 one three.
Variant sinkWindowVariant(int64_t sinks, int64_t left, int64_t right,
                          bool causal) {
  std::string text =
      "func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, "
      "%q_len: index, %kv_len: index) -> i1 {\n"
      "  %shift = arith.subi %kv_len, %q_len : index\n"
      "  %diag = arith.addi %q, %shift : index\n"
      "  %sinks = arith.constant " +
      std::to_string(sinks) +
      " : index\n"
      "  %sink = arith.cmpi slt, %kv, %sinks : index\n"
      "  %left = arith.constant " +
      std::to_string(left) +
      " : index\n"
      "  %right = arith.constant " +
      std::to_string(right) +
      " : index\n"
      "  %first = arith.subi %diag, %left : index\n"
      "  %last = arith.addi %diag, %right : index\n"
      "  %after = arith.cmpi sge, %kv, %first : index\n"
      "  %before = arith.cmpi sle, %kv, %last : index\n"
      "  %window = arith.andi %after, %before : i1\n"
      "  %keep = arith.ori %sink, %window : i1\n"
      "  return %keep : i1\n}\n";
  Variant v{"sinks_window", "", text, causal, {}, {}};
  v.keep = [sinks, left, right](int64_t, int64_t, int64_t i, int64_t j,
                                int64_t sq, int64_t sk) {
    int64_t diag = i + sk - sq;
    return j < sinks || (j >= diag - left && j <= diag + right);
  };
  return v;
}

/// Softcap and a window together.
Variant softcapWindowVariant() {
  Variant cap = softcapVariant(2.0), window = windowVariant(9, 2);
  Variant v{"softcap_window", cap.scoreMod, window.maskMod, false, cap.score,
            window.keep};
  return v;
}

/// Runs `variant` on `config`'s tiles over a few shapes and compares with
/// the reference; returns the largest |error| seen (O and LSE).
double runVariant(const Variant &variant, const Variant &reference,
                  int64_t blockM, int64_t blockN, bool expectMatch = true) {
  CpuKernelConfig config;
  config.headDim = 32;
  config.tiles = {blockM, blockN};
  config.scale = 1.0f / std::sqrt(32.0f);
  config.causal = variant.causal;
  config.scoreMod = variant.scoreMod;
  config.maskMod = variant.maskMod;
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
  double worst = 0.0;
  struct Shape {
    int64_t b, hq, hkv, sq, sk;
  };
  for (Shape s : {Shape{1, 2, 2, 37, 37}, Shape{2, 4, 2, 20, 45},
                  Shape{1, 2, 1, 45, 20}, Shape{1, 1, 1, 64, 64},
                  Shape{1, 1, 1, 1, 70}}) {
    SCOPED_TRACE(testing::Message()
                 << variant.name << " tiles " << blockM << "x" << blockN
                 << " B=" << s.b << " Hq=" << s.hq << " Hkv=" << s.hkv
                 << " Sq=" << s.sq << " Sk=" << s.sk);
    AttentionShape shape{s.b, s.hq, s.hkv, s.sq, s.sk};
    fa::AttentionProblem p = fa::test::problemFor(config, shape);
    if (reference.score)
      p.scoreMod = [&](double x, int64_t b, int64_t h, int64_t i, int64_t j) {
        return reference.score(x, b, h, i, j, s.sq, s.sk);
      };
    if (reference.keep)
      p.maskMod = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
        return reference.keep(b, h, i, j, s.sq, s.sk);
      };
    std::vector<CpuCapture> captures =
        capturesFor(variant, reference, s.b, s.hq, s.sq, s.sk);
    std::mt19937_64 rng(1234 + s.sq * 131 + s.sk);
    auto q = fa::test::randomNormal(p.qElements(), rng);
    auto k = fa::test::randomNormal(p.kvElements(), rng);
    auto v = fa::test::randomNormal(p.kvElements(), rng);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> o(p.qElements(), nan), lse(p.lseElements(), nan);
    llvm::Error error = kernel.run(shape, q.data(), k.data(), v.data(),
                                   o.data(), lse.data(), nullptr, captures);
    EXPECT_FALSE(error) << llvm::toString(std::move(error));
    fa::ReferenceResult want =
        fa::referenceAttention(p, q.data(), k.data(), v.data());
    for (size_t i = 0; i < want.output.size(); ++i) {
      double err = std::fabs(double(o[i]) - want.output[i]);
      worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    }
    for (size_t i = 0; i < want.lse.size(); ++i) {
      if (std::isinf(want.lse[i])) {
        bool same = std::isinf(lse[i]) && lse[i] < 0;
        worst = std::max(worst, same ? 0.0 : INFINITY);
        continue;
      }
      double err = std::fabs(double(lse[i]) - want.lse[i]);
      worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    }
    if (expectMatch)
      EXPECT_LE(worst, kTolerance);
  }
  return worst;
}

using VariantParam = std::tuple<int, std::pair<int64_t, int64_t>>;

Variant variantAt(int index) {
  switch (index) {
  case 0:
    return softcapVariant(1.5);
  case 1:
    return windowVariant(7, 0);
  case 2:
    return windowVariant(5, 3);
  case 3:
    return windowVariant(-1, 4); // only a right edge
  case 4:
    return windowVariant(11, -1, /*causal=*/true);
  case 5:
    return prefixVariant(5);
  case 6:
    return chunkVariant(6);
  case 7:
    return alibiVariant(4, /*causal=*/true);
  case 8:
    return softcapWindowVariant();
  case 9:
    return documentVariant(/*causal=*/false);
  case 10:
    return documentVariant(/*causal=*/true);
  case 11:
    return biasVariant();
  case 12:
    return tableVariant();
  case 13:
    return biasDocumentVariant();
  case 14:
    return alibiSlopesVariant(/*causal=*/true);
  case 15:
    return sinkWindowVariant(2, 5, 0, /*causal=*/true);
  default:
    return sinkWindowVariant(3, 6, 2, /*causal=*/false);
  }
}
constexpr int kNumVariants = 17;

class CpuVariants : public testing::TestWithParam<VariantParam> {};

TEST_P(CpuVariants, MatchesFloat64Reference) {
  auto [index, tiles] = GetParam();
  Variant variant = variantAt(index);
  runVariant(variant, variant, tiles.first, tiles.second);
}

INSTANTIATE_TEST_SUITE_P(
    BuiltIns, CpuVariants,
    testing::Combine(testing::Range(0, kNumVariants),
                     testing::Values(std::pair<int64_t, int64_t>{8, 32},
                                     std::pair<int64_t, int64_t>{16, 16})));

// The comparison can fail: a window one key wider than the kernel's is a
// different function, and the reference must tell them apart.
TEST(CpuVariantMutation, OffByOneWindowIsCaught) {
  Variant kernel = windowVariant(7, 0), wider = windowVariant(8, 0);
  double worst = runVariant(kernel, wider, 8, 32, /*expectMatch=*/false);
  EXPECT_GT(worst, 100 * kTolerance);
}

// A document mask that reads one key's id wrong is caught.
// A kernel that skipped one tile too many (or lost the sink tokens) would
// differ from the reference on the rows whose sinks lie before a hole.
TEST(CpuVariantMutation, DroppedSinkTokensAreCaught) {
  Variant kernel = sinkWindowVariant(2, 5, 0, /*causal=*/true),
          windowOnly = windowVariant(5, 0, /*causal=*/true);
  double worst = runVariant(kernel, windowOnly, 16, 16, /*expectMatch=*/false);
  EXPECT_GT(worst, 100 * kTolerance);
}

TEST(CpuVariantMutation, OneMovedDocumentKeyIsCaught) {
  Variant kernel = documentVariant(false),
          moved = documentVariant(false, /*mutate=*/true);
  double worst = runVariant(kernel, moved, 8, 32, /*expectMatch=*/false);
  EXPECT_GT(worst, 100 * kTolerance);
}

TEST(CpuVariantMutation, DifferentSoftcapIsCaught) {
  Variant kernel = softcapVariant(1.5), other = softcapVariant(1.6);
  double worst = runVariant(kernel, other, 8, 32, /*expectMatch=*/false);
  EXPECT_GT(worst, 100 * kTolerance);
}

/// The backward of `variant` on `blockM` x `blockN` tiles over a few
/// shapes, against the float64 gradients of the same variant in C++ (its
/// score_mod differentiated numerically); returns the largest error as a
/// fraction of each gradient's size.
/// `deterministic`: dQ added in the turn order (the CPU lowering asserts
/// that every program comes on its turn).
double runVariantBackward(const Variant &variant, const Variant &reference,
                          int64_t blockM, int64_t blockN,
                          bool expectMatch = true, bool deterministic = false) {
  CpuKernelConfig config;
  config.deterministic = deterministic;
  config.headDim = 32;
  config.tiles = {blockM, blockN};
  config.scale = 1.0f / std::sqrt(32.0f);
  config.causal = variant.causal;
  config.scoreMod = variant.scoreMod;
  config.maskMod = variant.maskMod;
  config.backward = true;
  CpuAttentionKernel &kernel = fa::test::getCpuKernel(config);
  double worst = 0.0;
  struct Shape {
    int64_t b, hq, hkv, sq, sk;
  };
  for (Shape s : {Shape{1, 2, 2, 37, 37}, Shape{2, 4, 2, 20, 45},
                  Shape{1, 2, 1, 45, 20}, Shape{1, 1, 1, 64, 64}}) {
    SCOPED_TRACE(testing::Message()
                 << variant.name << " backward tiles " << blockM << "x"
                 << blockN << " B=" << s.b << " Hq=" << s.hq << " Hkv="
                 << s.hkv << " Sq=" << s.sq << " Sk=" << s.sk);
    AttentionShape shape{s.b, s.hq, s.hkv, s.sq, s.sk};
    fa::AttentionProblem p = fa::test::problemFor(config, shape);
    auto withVariant = [&](const Variant &v, fa::AttentionProblem &problem) {
      problem.scoreMod = nullptr;
      problem.maskMod = nullptr;
      if (v.score)
        problem.scoreMod = [&v, s](double x, int64_t b, int64_t h, int64_t i,
                                   int64_t j) {
          return v.score(x, b, h, i, j, s.sq, s.sk);
        };
      if (v.keep)
        problem.maskMod = [&v, s](int64_t b, int64_t h, int64_t i,
                                  int64_t j) {
          return v.keep(b, h, i, j, s.sq, s.sk);
        };
    };
    std::vector<CpuCapture> captures =
        capturesFor(variant, reference, s.b, s.hq, s.sq, s.sk);
    std::mt19937_64 rng(99 + s.sq * 7 + s.sk);
    auto q = fa::test::randomNormal(p.qElements(), rng);
    auto k = fa::test::randomNormal(p.kvElements(), rng);
    auto v = fa::test::randomNormal(p.kvElements(), rng);
    auto gradOutput = fa::test::randomNormal(p.qElements(), rng);
    // The kernel's own forward (O, LSE of the variant it compiles).
    withVariant(variant, p);
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
        captures);
    EXPECT_FALSE(error) << llvm::toString(std::move(error));
    withVariant(reference, p);
    fa::ReferenceGradients want = fa::referenceAttentionBackward(
        p, q.data(), k.data(), v.data(), gradOutput.data());
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
      double relative = err / (size + 1e-6);
      worst = std::max(worst, relative);
      if (expectMatch)
        EXPECT_LE(relative, kBackwardRelativeTolerance);
    }
  }
  return worst;
}

class CpuVariantBackward : public testing::TestWithParam<VariantParam> {};

TEST_P(CpuVariantBackward, MatchesFloat64Gradients) {
  auto [index, tiles] = GetParam();
  Variant variant = variantAt(index);
  runVariantBackward(variant, variant, tiles.first, tiles.second);
}

INSTANTIATE_TEST_SUITE_P(
    BuiltIns, CpuVariantBackward,
    testing::Combine(testing::Range(0, kNumVariants),
                     testing::Values(std::pair<int64_t, int64_t>{8, 32},
                                     std::pair<int64_t, int64_t>{16, 16})));

/// The deterministic backward of every built-in: the turns count the K/V
/// tiles that visit each query tile (a window's from its first tile, not
/// from 0), or every tile where the mask's ranges do not agree from both
/// sides (prefix-LM's or) or read captured tensors; a program off its
/// turn fails the CPU run.
class CpuVariantDeterministicBackward
    : public testing::TestWithParam<VariantParam> {};

TEST_P(CpuVariantDeterministicBackward, MatchesFloat64Gradients) {
  auto [index, tiles] = GetParam();
  Variant variant = variantAt(index);
  runVariantBackward(variant, variant, tiles.first, tiles.second,
                     /*expectMatch=*/true, /*deterministic=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    BuiltIns, CpuVariantDeterministicBackward,
    testing::Combine(testing::Range(0, kNumVariants),
                     testing::Values(std::pair<int64_t, int64_t>{8, 32},
                                     std::pair<int64_t, int64_t>{16, 16})));

// The derivative is checked too: a kernel that left the score_mod's slope
// out (the identity's derivative, 1) would be off by the slope.
TEST(CpuVariantMutation, BackwardSeesTheScoreModSlope) {
  Variant kernel = softcapVariant(1.5), other = softcapVariant(1.0);
  double worst = runVariantBackward(kernel, other, 8, 32,
                                    /*expectMatch=*/false);
  EXPECT_GT(worst, 100 * kBackwardRelativeTolerance);
}

TEST(CpuVariantMutation, BackwardMovedDocumentKeyIsCaught) {
  Variant kernel = documentVariant(true),
          moved = documentVariant(true, /*mutate=*/true);
  double worst = runVariantBackward(kernel, moved, 8, 32,
                                    /*expectMatch=*/false);
  EXPECT_GT(worst, 100 * kBackwardRelativeTolerance);
}

TEST(CpuVariantMutation, BackwardOffByOneWindowIsCaught) {
  Variant kernel = windowVariant(7, 0), wider = windowVariant(8, 0);
  double worst = runVariantBackward(kernel, wider, 8, 32,
                                    /*expectMatch=*/false);
  EXPECT_GT(worst, 100 * kBackwardRelativeTolerance);
}

TEST(CpuVariantErrors, BackwardNamesAnOpWithoutDerivative) {
  CpuKernelConfig config;
  config.headDim = 32;
  config.backward = true;
  config.scoreMod =
      "func.func @score_mod(%s: f32, %b: index, %h: index, %q: index, "
      "%kv: index, %sq: index, %sk: index) -> f32 {\n"
      "  %c = arith.constant 3.0 : f32\n"
      "  %r = arith.remf %s, %c : f32\n"
      "  return %r : f32\n}\n";
  auto kernel = CpuAttentionKernel::compile(config);
  ASSERT_FALSE(bool(kernel));
  std::string error = llvm::toString(kernel.takeError());
  EXPECT_NE(error.find("the backward needs the derivative of the score_mod, "
                       "and 'arith.remf' has no derivative rule"),
            std::string::npos)
      << error;
}

/// The compile error of a config with these variant texts.
std::string compileError(const std::string &scoreMod,
                         const std::string &maskMod) {
  CpuKernelConfig config;
  config.headDim = 32;
  config.scoreMod = scoreMod;
  config.maskMod = maskMod;
  auto kernel = CpuAttentionKernel::compile(config);
  if (kernel)
    return "";
  return llvm::toString(kernel.takeError());
}

TEST(CpuVariantErrors, RejectsOpsOutsideArithAndMath) {
  std::string error = compileError(
      "func.func @score_mod(%s: f32, %b: index, %h: index, %q: index, "
      "%kv: index, %sq: index, %sk: index) -> f32 {\n"
      "  %m = memref.alloc() : memref<4xf32>\n"
      "  return %s : f32\n}\n",
      "");
  EXPECT_NE(error.find("score_mod region may hold arith and math ops and loads of its "
                       "captured tensors only, "
                       "got 'memref.alloc'"),
            std::string::npos)
      << error;
}

TEST(CpuVariantErrors, RejectsWrongSignature) {
  std::string error = compileError(
      "", "func.func @mask_mod(%q: index, %kv: index) -> i1 {\n"
          "  %t = arith.cmpi sle, %kv, %q : index\n"
          "  return %t : i1\n}\n");
  EXPECT_NE(error.find("mask_mod region must take (index, index, index, "
                       "index, index, index)"),
            std::string::npos)
      << error;
}

TEST(CpuVariantErrors, RejectsWrongResultType) {
  std::string error = compileError(
      "", "func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, "
          "%sq: index, %sk: index) -> index {\n"
          "  return %kv : index\n}\n");
  EXPECT_NE(error.find("mask_mod region must end in fa.yield of one 'i1'"),
            std::string::npos)
      << error;
}

TEST(CpuVariantErrors, ReportsUnparsableText) {
  std::string error = compileError("func.func @score_mod(", "");
  EXPECT_NE(error.find("the score_mod text does not parse as MLIR"),
            std::string::npos)
      << error;
}

/// The traits the ranking of default tiles reads (variantTraits): a
/// capture load whose index is computed from kv_idx, and nothing else.
::fa::VariantTraits traitsOf(const std::string &scoreMod,
                             const std::string &maskMod) {
  ::fa::KernelSpec spec;
  spec.scoreMod = scoreMod;
  spec.maskMod = maskMod;
  return variantTraits(spec);
}

TEST(VariantTraits, KeyIndexedCaptureLoads) {
  EXPECT_TRUE(traitsOf("", ::fa::variants::document()).keyIndexedCaptures);
  EXPECT_TRUE(traitsOf(::fa::variants::scoreBias(), "").keyIndexedCaptures);
  // Through a cast and an addition, in the score_mod beside a mask_mod.
  EXPECT_TRUE(traitsOf("func.func @score_mod(%s: f32, %b: index, %h: index, "
                       "%q: index, %kv: index, %sq: index, %sk: index, "
                       "%bias: memref<?xf32>) -> f32 {\n"
                       "  %one = arith.constant 1 : index\n"
                       "  %next = arith.addi %kv, %one : index\n"
                       "  %x = memref.load %bias[%next] : memref<?xf32>\n"
                       "  %r = arith.addf %s, %x : f32\n"
                       "  return %r : f32\n}\n",
                       ::fa::variants::slidingWindow(64, 0))
                  .keyIndexedCaptures);
}

TEST(VariantTraits, OtherCaptureLoadsAndTexts) {
  // Indexed by the head (ALiBi's slopes), by the query row, by the batch.
  EXPECT_FALSE(traitsOf(::fa::variants::alibiSlopes(), "").keyIndexedCaptures);
  EXPECT_FALSE(traitsOf("",
                        "func.func @mask_mod(%b: index, %h: index, %q: index, "
                        "%kv: index, %sq: index, %sk: index, "
                        "%lim: memref<?xi64>) -> i1 {\n"
                        "  %l = memref.load %lim[%q] : memref<?xi64>\n"
                        "  %n = arith.index_cast %l : i64 to index\n"
                        "  %t = arith.cmpi slt, %kv, %n : index\n"
                        "  return %t : i1\n}\n")
                   .keyIndexedCaptures);
  // No captures; no variant; a text that does not parse (the compile
  // names its error).
  EXPECT_FALSE(traitsOf(::fa::variants::softcap(30.0),
                        ::fa::variants::slidingWindow(128, 0))
                   .keyIndexedCaptures);
  EXPECT_FALSE(traitsOf("", "").keyIndexedCaptures);
  EXPECT_FALSE(traitsOf("", "func.func @mask_mod(").keyIndexedCaptures);
  // Past the nesting limit: refused before parsing (MLIR's parser recurses
  // once a bracket: 30000 levels overflow its stack), not a crash.
  EXPECT_FALSE(traitsOf("", "func.func @mask_mod(%b: index) -> i1 "
                            "attributes {x = " +
                                std::string(30000, '[') +
                                std::string(30000, ']') +
                                "} {\n  %t = arith.constant true\n"
                                "  return %t : i1\n}\n")
                   .keyIndexedCaptures);
}

} // namespace
