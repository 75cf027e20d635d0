//===- Exp2Polynomial.h - 2^x on the FMA pipe: the constants -------*- C++
//-*-===//
//
// A share of the online softmax's exponentials can leave the MUFU unit
// (ex2.approx) for the FMA and integer pipes (FlashAttention-4's emulation;
// fa.online_softmax's fa.exp2_on_fma): x's floor j by adding 1.5 * 2^23
// rounded down (the sum's low bits then hold j), f = x - j in [0, 1), 2^f
// by a cubic, and j added to the exponent field. The GPU lowering
// (buildExp2OnFma) and the host reference below use these constants; the
// unit test bounds the reference's error against std::exp2.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_EXP2POLYNOMIAL_H
#define FA_LIB_EXP2POLYNOMIAL_H

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace fa::exp2poly {

/// 2^f ~ 1 + c1 f + c2 f^2 + c3 f^3 on [0, 1], with 2^0 and 2^1 exact
/// (c1 + c2 + c3 = 1): relative error at most 1.03e-4, fitted to the
/// relative error by Lawson's iteration (e4m3's P keeps 3 mantissa bits,
/// bf16's 8: both far coarser).
constexpr float kC1 = 0.695424401f;
constexpr float kC2 = 0.226307656f;
constexpr float kC3 = 0.0782679427f;
/// 1.5 * 2^23: x + kRoundingBias, rounded down, is an f32 whose last 23
/// bits hold floor(x) (for |x| < 2^22), and - kRoundingBias is floor(x).
constexpr float kRoundingBias = 12582912.0f;
/// Below this the result is 0 (a masked score's -inf included): the
/// smallest normal f32 is 2^-126.
constexpr float kLowest = -126.0f;
/// The largest relative error of exp2Reference against std::exp2 over
/// [kLowest, 64] (the unit test's bound).
constexpr double kMaxRelativeError = 1.1e-4;

/// The GPU sequence on the host (the unit test's subject).
inline float exp2Reference(float x) {
  if (!(x >= kLowest))
    return std::isnan(x) ? x : 0.0f;
  int mode = std::fegetround();
  std::fesetround(FE_DOWNWARD);
  volatile float sum = x + kRoundingBias; // add.rm.f32
  std::fesetround(mode);
  float t = sum;
  float j = t - kRoundingBias;
  float f = x - j;
  float p = std::fma(std::fma(std::fma(kC3, f, kC2), f, kC1), f, 1.0f);
  uint32_t tBits, pBits;
  std::memcpy(&tBits, &t, 4);
  std::memcpy(&pBits, &p, 4);
  // (t's bits) << 23 is j << 23: 1.5 * 2^23's bits end in nine zero bits.
  uint32_t resultBits = pBits + (tBits << 23);
  float result;
  std::memcpy(&result, &resultBits, 4);
  return result;
}

} // namespace fa::exp2poly

#endif // FA_LIB_EXP2POLYNOMIAL_H
