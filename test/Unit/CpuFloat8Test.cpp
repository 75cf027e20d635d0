//===- CpuFloat8Test.cpp - FP8 (e4m3) attention on the CPU ---------*- C++
//-*-===//
//
// The CPU lowering's e4m3 conversions (fa-expand-float8-casts) against
// LLVM's APFloat, and the FP8 forward (e4m3 Q, K, V with descales, P
// quantized from 256 p, a 16-bit O) against the float64 reference on the
// dequantized inputs.
//
//===----------------------------------------------------------------------===//

#include "compiler/Cpu/CpuRunner.h"
#include "compiler/KernelCompiler.h"
#include "compiler/Pipelines.h"
#include "lib/ReferenceAttention.h"
#include "test/Common/CpuKernels.h"
#include "test/Common/LowPrecision.h"
#include "test/Common/Random.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/TargetSelect.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>

using namespace mlir::fa;

namespace {

//===----------------------------------------------------------------------===//
// The conversions
//===----------------------------------------------------------------------===//

/// Narrows every `in[i]` to e4m3 (its bits into `out`) and widens every
/// e4m3 code into `widened`, through the CPU pipeline's lowering.
constexpr const char *kCastsModule = R"mlir(
func.func @casts(%in: memref<?xf32>, %out: memref<?xi8>, %codes: memref<?xi8>,
                 %widened: memref<?xf32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %in, %c0 : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %in[%i] : memref<?xf32>
    %y = arith.truncf %x : f32 to f8E4M3FN
    %b = arith.bitcast %y : f8E4M3FN to i8
    memref.store %b, %out[%i] : memref<?xi8>
  }
  %m = memref.dim %codes, %c0 : memref<?xi8>
  scf.for %i = %c0 to %m step %c1 {
    %b = memref.load %codes[%i] : memref<?xi8>
    %y = arith.bitcast %b : i8 to f8E4M3FN
    %x = arith.extf %y : f8E4M3FN to f32
    memref.store %x, %widened[%i] : memref<?xf32>
  }
  return
}
)mlir";

/// A rank-1 memref descriptor.
struct Descriptor1D {
  void *allocated, *aligned;
  int64_t offset, size, stride;
};

const llvm::fltSemantics &e4m3() { return llvm::APFloat::Float8E4M3FN(); }

/// APFloat's e4m3 of `x` to nearest even, saturated to +-448 (the GPU's
/// cvt.rn.satfinite): clamping first gives the same result.
uint8_t expectedNarrowing(float x) {
  if (std::isnan(x))
    return 0x7f;
  llvm::APFloat value(std::clamp(x, -448.0f, 448.0f));
  bool losesInfo;
  value.convert(e4m3(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return uint8_t(value.bitcastToAPInt().getZExtValue());
}

TEST(CpuFloat8, ConversionsMatchAPFloat) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  std::unique_ptr<mlir::MLIRContext> ctx = createCompilerContext();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kCastsModule, ctx.get());
  ASSERT_TRUE(module);
  mlir::PassManager pm(ctx.get());
  buildCpuToLLVMPipeline(pm);
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  auto engine = mlir::ExecutionEngine::create(*module);
  ASSERT_TRUE(bool(engine)) << llvm::toString(engine.takeError());

  // Every e4m3 code, and f32 values across e4m3's range: the codes' own
  // values and the midpoints between neighbours (ties), random values of
  // every magnitude, and the specials.
  std::vector<float> in;
  std::vector<int8_t> codes(256);
  for (int c = 0; c < 256; ++c) {
    codes[c] = int8_t(c);
    llvm::APFloat value(e4m3(), llvm::APInt(8, c));
    if (value.isNaN())
      continue;
    float v = value.convertToFloat();
    in.push_back(v);
    llvm::APFloat next = value;
    next.next(/*nextDown=*/false);
    if (!next.isNaN() && next.isFinite())
      in.push_back(0.5f * (v + next.convertToFloat()));
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> exponent(-14.0f, 10.0f);
  for (int i = 0; i < 20000; ++i)
    in.push_back((i % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng)));
  for (float special : {0.0f, -0.0f, 448.0f, 464.0f, 470.0f, 1e30f,
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), 0x1p-10f,
                        0x1p-11f, 0x3p-11f, 0x1.8p-7f})
    in.push_back(special);

  std::vector<int8_t> out(in.size());
  std::vector<float> widened(256);
  Descriptor1D descriptors[] = {
      {in.data(), in.data(), 0, int64_t(in.size()), 1},
      {out.data(), out.data(), 0, int64_t(out.size()), 1},
      {codes.data(), codes.data(), 0, 256, 1},
      {widened.data(), widened.data(), 0, 256, 1}};
  void *pointers[4];
  void *arguments[4];
  for (int i = 0; i < 4; ++i) {
    pointers[i] = &descriptors[i];
    arguments[i] = &pointers[i];
  }
  llvm::Error error = (*engine)->invokePacked("_mlir_ciface_casts", arguments);
  ASSERT_FALSE(error) << llvm::toString(std::move(error));

  for (size_t i = 0; i < in.size(); ++i) {
    uint8_t got = uint8_t(out[i]);
    uint8_t want = expectedNarrowing(in[i]);
    if (std::isnan(in[i])) {
      EXPECT_EQ(got & 0x7f, 0x7f) << "NaN narrowed to " << int(got);
      continue;
    }
    ASSERT_EQ(got, want) << "narrowing " << in[i];
  }
  for (int c = 0; c < 256; ++c) {
    llvm::APFloat value(e4m3(), llvm::APInt(8, c));
    if (value.isNaN()) {
      EXPECT_TRUE(std::isnan(widened[c])) << "code " << c;
      continue;
    }
    float want = value.convertToFloat();
    EXPECT_EQ(std::memcmp(&widened[c], &want, sizeof(float)), 0)
        << "code " << c << ": " << widened[c] << ", expected " << want;
  }
}

//===----------------------------------------------------------------------===//
// The FP8 forward
//===----------------------------------------------------------------------===//

/// P is quantized to e4m3 from 256 p: a relative error of at most
/// u = 2^-4 for 256 p >= 2^-6, at most 2^-10 / 256 absolute below. O is
/// a convex combination of V rows, so with the 16-bit O's rounding
///   |O - O_ref| <= (u + u_out + Sk 2^-18) max|V| (+ f32 noise).
/// The scores and LSE come from unquantized f32 probabilities: LSE is at
/// f32 accuracy. The reference is float64 on the dequantized inputs.
TEST(CpuFloat8, ForwardMatchesReferenceWithinQuantizationBound) {
  struct Shape {
    int64_t batch, qHeads, kvHeads, qLen, kvLen;
  };
  for (fa::ElementType out : {fa::ElementType::bf16, fa::ElementType::f16})
    for (bool causal : {false, true})
      for (Shape sh : {Shape{1, 4, 2, 100, 129}, Shape{2, 2, 2, 7, 7},
                       Shape{2, 8, 1, 64, 33}, Shape{1, 2, 1, 40, 0}}) {
        CpuKernelConfig config;
        config.headDim = 64;
        config.dtype = fa::ElementType::e4m3;
        config.outDtype = out;
        config.tiles = {16, 32};
        config.causal = causal;
        config.scale = 0.125f;
        AttentionShape shape{sh.batch, sh.qHeads, sh.kvHeads, sh.qLen,
                             sh.kvLen};
        fa::AttentionProblem p = fa::test::problemFor(config, shape);
        uint64_t seed = std::random_device{}();
        SCOPED_TRACE(testing::Message()
                     << "out=" << fa::toString(out) << " seed=" << seed
                     << " Sq=" << sh.qLen << " Sk=" << sh.kvLen
                     << (causal ? " causal" : ""));
        std::mt19937_64 rng(seed);
        // Descales in [0.5, 4) per (batch entry, K/V head).
        std::uniform_real_distribution<float> factor(0.5f, 4.0f);
        auto descales = [&] {
          std::vector<float> d(sh.batch * sh.kvHeads);
          for (float &x : d)
            x = factor(rng);
          return d;
        };
        std::vector<float> qd = descales(), kd = descales(), vd = descales();
        // Normal values divided by their descale (so that quantization
        // uses e4m3's range); Q's rows of (b, h) use factor (b, h / group).
        int64_t d = config.headDim;
        fa::Float8Values q = fa::quantizeFloat8(
            fa::test::randomNormal(p.qElements(), rng),
            fa::perQueryHead(qd, sh.batch, sh.qHeads, sh.kvHeads), sh.qLen * d);
        int64_t kvElements = std::max<int64_t>(p.kvElements(), 1);
        int64_t kvRows = std::max<int64_t>(sh.kvLen * d, 1);
        fa::Float8Values k = fa::quantizeFloat8(
            fa::test::randomNormal(kvElements, rng), kd, kvRows);
        fa::Float8Values v = fa::quantizeFloat8(
            fa::test::randomNormal(kvElements, rng), vd, kvRows);

        std::vector<uint16_t> oBits(p.qElements(), fa::test::nanBits(out));
        std::vector<float> lse(std::max<int64_t>(p.lseElements(), 1),
                               std::numeric_limits<float>::quiet_NaN());
        llvm::Error error = fa::test::getCpuKernel(config).run(
            shape, q.codes.data(), k.codes.data(), v.codes.data(), oBits.data(),
            lse.data(), nullptr, {}, {}, {}, nullptr, 1, {}, {},
            CpuDescales{qd.data(), kd.data(), vd.data()});
        ASSERT_FALSE(error) << llvm::toString(std::move(error));

        fa::ReferenceResult want = fa::referenceAttention(
            p, q.values.data(), k.values.data(), v.values.data());
        double maxV = 0.0;
        for (int64_t i = 0; i < p.kvElements(); ++i)
          maxV = std::max(maxV, double(std::fabs(v.values[i])));
        double tolerance =
            fa::float8OutputBound(out, sh.kvLen, /*eightBitMma=*/false) * maxV +
            1e-5;
        double maxError = 0.0;
        for (size_t i = 0; i < oBits.size(); ++i) {
          double err = std::fabs(double(fa::test::fromBits(oBits[i], out)) -
                                 want.output[i]);
          ASSERT_LE(err, tolerance) << "O[" << i << "]";
          maxError = std::max(maxError, err);
        }
        for (int64_t i = 0; i < p.lseElements(); ++i) {
          if (std::isinf(want.lse[i])) {
            ASSERT_TRUE(std::isinf(lse[i]) && lse[i] < 0) << "LSE[" << i << "]";
            continue;
          }
          ASSERT_NEAR(lse[i], want.lse[i], 1e-4 * (1 + std::fabs(want.lse[i])))
              << "LSE[" << i << "]";
        }
        // The bound is not vacuous: P's quantization shows.
        if (sh.qLen * sh.kvLen > 1000)
          EXPECT_GT(maxError, 1e-3 * maxV) << "suspiciously exact";
      }
}

/// One key: P = 1 exactly (256 in e4m3), so O is V's row times its
/// descale, exactly in bf16 (e4m3 values have 4 significant bits): every
/// finite e4m3 code passes through the kernel's widening of V unchanged.
TEST(CpuFloat8, SingleKeyGivesEveryValueCodeExactly) {
  CpuKernelConfig config;
  config.headDim = 128;
  config.dtype = fa::ElementType::e4m3;
  config.tiles = {16, 32};
  config.scale = 0.125f;
  AttentionShape shape{1, 2, 2, 3, 1};
  fa::AttentionProblem p = fa::test::problemFor(config, shape);
  std::vector<uint8_t> q(p.qElements(), 0x38), k(p.kvElements(), 0x38);
  // Head 0's row holds codes 0..127, head 1's codes 128..255, NaN codes
  // (0x7f, 0xff) replaced by 0.
  std::vector<uint8_t> v(p.kvElements());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = (i & 0x7f) == 0x7f ? 0 : uint8_t(i);
  std::vector<float> qd = {1.0f, 1.0f}, kd = {1.0f, 1.0f}, vd = {1.0f, 0.5f};
  std::vector<uint16_t> o(p.qElements(), 0x7fc0);
  std::vector<float> lse(p.lseElements());
  llvm::Error error = fa::test::getCpuKernel(config).run(
      shape, q.data(), k.data(), v.data(), o.data(), lse.data(), nullptr, {},
      {}, {}, nullptr, 1, {}, {}, CpuDescales{qd.data(), kd.data(), vd.data()});
  ASSERT_FALSE(error) << llvm::toString(std::move(error));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t row = 0; row < 3; ++row)
      for (int64_t c = 0; c < 128; ++c) {
        float want =
            fa::fromBits(v[h * 128 + c], fa::ElementType::e4m3) * vd[h];
        float got = fa::test::fromBits(o[(h * 3 + row) * 128 + c],
                                       fa::ElementType::bf16);
        ASSERT_EQ(got, want) << "head " << h << " row " << row << " code "
                             << int(v[h * 128 + c]);
      }
}

TEST(CpuFloat8, RunWithoutDescalesIsAnError) {
  CpuKernelConfig config;
  config.headDim = 64;
  config.dtype = fa::ElementType::e4m3;
  config.tiles = {16, 32};
  AttentionShape shape{1, 1, 1, 4, 4};
  std::vector<uint8_t> x(256);
  std::vector<uint16_t> o(256);
  std::vector<float> lse(4);
  llvm::Error error = fa::test::getCpuKernel(config).run(
      shape, x.data(), x.data(), x.data(), o.data(), lse.data());
  ASSERT_TRUE(bool(error));
  EXPECT_NE(llvm::toString(std::move(error)).find("descales"),
            std::string::npos);
}

/// Rotates each D-element row of `x` by R = diag(signs) H / sqrt(D) (H the
/// Walsh-Hadamard matrix, D a power of 2): x <- x R, as
/// fa.fp8.quantize(hadamard=True) does to Q and K in Python. R R^T = I.
void rotateRows(std::vector<float> &x, int64_t d,
                const std::vector<float> &signs) {
  for (size_t row = 0; row < x.size(); row += d) {
    float *r = x.data() + row;
    for (int64_t i = 0; i < d; ++i)
      r[i] *= signs[i];
    for (int64_t half = 1; half < d; half *= 2)
      for (int64_t i = 0; i < d; i += 2 * half)
        for (int64_t j = i; j < i + half; ++j) {
          float a = r[j], b = r[j + half];
          r[j] = a + b;
          r[j + half] = a - b;
        }
    for (int64_t i = 0; i < d; ++i)
      r[i] /= std::sqrt(float(d));
  }
}

/// Incoherent processing (FlashAttention-3): rotating the head dim of Q and
/// K by the same orthogonal R leaves Q K^T unchanged but spreads large
/// entries over all D channels, so e4m3's relative rounding of each product
/// term adds up to less in the scores. The RMSE of O against float64
/// attention of the original inputs, on three kinds of data (D = 128,
/// S = 256, 2 heads; descales amax / 448 per head), for the bf16 forward
/// on the same inputs, FP8, and FP8 with the rotation:
///   normal    N(0, 1): the rotation costs at most 1.25x;
///   outliers  N(0, 1) with 0.1% of the entries of Q, K, V drawn from
///             N(0, 10^2) (FlashAttention-3's outlier data): it helps;
///   channels  4 of 128 channels of Q and K 16x larger: more than 2x.
/// bf16 stays the most accurate. The table goes to stdout
/// (docs/benchmarks.md records it).
TEST(CpuFloat8, HadamardRotationShrinksOutlierError) {
  CpuKernelConfig config;
  config.headDim = 128;
  config.outDtype = fa::ElementType::bf16;
  config.tiles = {16, 32};
  config.scale = 1.0f / std::sqrt(128.0f);
  AttentionShape shape{1, 2, 2, 256, 256};
  fa::AttentionProblem p = fa::test::problemFor(config, shape);
  int64_t d = config.headDim, perHead = shape.qLen * d;
  enum Data { normal, outliers, channels };
  enum Run { bf16, fp8, fp8Rotated };
  auto rmse = [&](Data data, Run run) {
    std::mt19937_64 draw(17 + data);
    std::vector<float> q = fa::test::randomNormal(p.qElements(), draw),
                       k = fa::test::randomNormal(p.kvElements(), draw),
                       v = fa::test::randomNormal(p.kvElements(), draw);
    std::normal_distribution<float> large(0.0f, 10.0f);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    for (std::vector<float> *t : {&q, &k, &v})
      for (size_t i = 0; i < t->size(); ++i) {
        if (data == outliers && uniform(draw) < 1e-3f)
          (*t)[i] = large(draw);
        if (int64_t c = int64_t(i) % d;
            data == channels && t != &v &&
            (c == 3 || c == 40 || c == 77 || c == 100))
          (*t)[i] *= 16.0f;
      }
    fa::ReferenceResult want =
        fa::referenceAttention(p, q.data(), k.data(), v.data());
    CpuKernelConfig kernel = config;
    std::vector<uint16_t> oBits(p.qElements());
    std::vector<float> lse(p.lseElements());
    llvm::Error error = llvm::Error::success();
    if (run == bf16) {
      kernel.dtype = fa::ElementType::bf16;
      auto bits = [](const std::vector<float> &t) {
        std::vector<uint16_t> b(t.size());
        for (size_t i = 0; i < t.size(); ++i)
          b[i] = fa::test::toBits(t[i], fa::ElementType::bf16);
        return b;
      };
      std::vector<uint16_t> qb = bits(q), kb = bits(k), vb = bits(v);
      error = fa::test::getCpuKernel(kernel).run(
          shape, qb.data(), kb.data(), vb.data(), oBits.data(), lse.data());
    } else {
      kernel.dtype = fa::ElementType::e4m3;
      if (run == fp8Rotated) {
        std::mt19937_64 coin(5);
        std::vector<float> signs(d);
        for (float &sign : signs)
          sign = (coin() & 1) ? 1.0f : -1.0f;
        rotateRows(q, d, signs);
        rotateRows(k, d, signs);
      }
      auto descales = [&](const std::vector<float> &t) {
        std::vector<float> f(t.size() / perHead);
        for (size_t h = 0; h < f.size(); ++h) {
          float amax = 0.0f;
          for (int64_t i = 0; i < perHead; ++i)
            amax = std::max(amax, std::fabs(t[h * perHead + i]));
          f[h] = amax / 448.0f;
        }
        return f;
      };
      std::vector<float> qd = descales(q), kd = descales(k), vd = descales(v);
      fa::Float8Values q8 = fa::quantizeFloat8(q, qd, perHead),
                       k8 = fa::quantizeFloat8(k, kd, perHead),
                       v8 = fa::quantizeFloat8(v, vd, perHead);
      error = fa::test::getCpuKernel(kernel).run(
          shape, q8.codes.data(), k8.codes.data(), v8.codes.data(),
          oBits.data(), lse.data(), nullptr, {}, {}, {}, nullptr, 1, {}, {},
          CpuDescales{qd.data(), kd.data(), vd.data()});
    }
    EXPECT_FALSE(error) << llvm::toString(std::move(error));
    double sum = 0.0;
    for (size_t i = 0; i < oBits.size(); ++i) {
      double err = double(fa::test::fromBits(oBits[i], fa::ElementType::bf16)) -
                   want.output[i];
      sum += err * err;
    }
    return std::sqrt(sum / double(oBits.size()));
  };
  std::cout << "RMSE of O vs float64 (CPU path, D 128, S 256):\n"
            << "data      bf16      fp8       fp8+H     fp8/fp8+H\n";
  double table[3][3];
  const char *names[3] = {"normal", "outliers", "channels"};
  for (Data data : {normal, outliers, channels}) {
    for (Run run : {bf16, fp8, fp8Rotated})
      table[data][run] = rmse(data, run);
    std::printf("%-9s %.2e  %.2e  %.2e  %.2f\n", names[data], table[data][bf16],
                table[data][fp8], table[data][fp8Rotated],
                table[data][fp8] / table[data][fp8Rotated]);
    EXPECT_LT(table[data][bf16], table[data][fp8Rotated]) << names[data];
  }
  EXPECT_LT(table[normal][fp8Rotated], 1.25 * table[normal][fp8]);
  EXPECT_LT(table[outliers][fp8Rotated], table[outliers][fp8]);
  EXPECT_GT(table[channels][fp8], 2.0 * table[channels][fp8Rotated]);
}

} // namespace
