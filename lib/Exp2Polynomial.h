//===- Exp2Polynomial.h - 2^x on the FMA pipe: the constants -------*- C++
//-*-===//
//
// A share of the online softmax's exponentials can leave the MUFU unit
// (ex2.approx) for the FMA and integer pipes (FlashAttention-4's emulation;
// fa.online_softmax's fa.exp2_on_fma): x's floor j by adding 1.5 * 2^23
// rounded down (the sum's low bits then hold j), f = x - j in [0, 1), 2^f
// by a cubic, times 2^j made from j's bits. The GPU lowering
// (buildExp2OnFma) and the host reference below use these constants; the
// unit test bounds the reference's error against std::exp2.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_EXP2POLYNOMIAL_H
#define FA_LIB_EXP2POLYNOMIAL_H

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
/// Its bits end in nine zeros, so (its bits << 23) is floor(x) << 23, and
/// plus kOneBits (1.0's) the bits of 2^floor(x): normal for floor(x) in
/// [-126, 127], so the sequence holds for x < 128 (the online softmax's x
/// is at most log2 of probs_scale, 8).
constexpr float kRoundingBias = 12582912.0f;
constexpr int32_t kOneBits = 0x3F800000;
/// Below this the result is 0 (a masked score's -inf included): the
/// smallest normal f32 is 2^-126.
constexpr float kLowest = -126.0f;
/// The largest relative error of exp2Reference against std::exp2 over
/// [kLowest, 64] (the unit test's bound; measured 1.031e-4).
constexpr double kMaxRelativeError = 1.035e-4;

/// The GPU sequence on the host (the unit test's subject); the add rounded
/// down is kRoundingBias + floor(x), exact for |x| < 2^22.
inline float exp2Reference(float x) {
  if (x < kLowest)
    return 0.0f;
  float t = kRoundingBias + std::floor(x);
  float j = t - kRoundingBias;
  float f = x - j;
  float p = std::fma(std::fma(std::fma(kC3, f, kC2), f, kC1), f, 1.0f);
  uint32_t tBits;
  std::memcpy(&tBits, &t, 4);
  uint32_t scaleBits = (tBits << 23) + uint32_t(kOneBits);
  float scale;
  std::memcpy(&scale, &scaleBits, 4);
  return p * scale;
}

} // namespace fa::exp2poly

#endif // FA_LIB_EXP2POLYNOMIAL_H
