//===- LowPrecision.h - f16/bf16/e4m3 values on the host -----------*- C++
//-*-===//
//
// 16-bit and 8-bit inputs are handed to the kernels as bit patterns, and the
// float64 reference gets the same rounded values (the tests, fa-sweep's check).
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_LOWPRECISION_H
#define FA_LIB_LOWPRECISION_H

#include "lib/KernelSpec.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace fa {

inline const llvm::fltSemantics &semanticsOf(ElementType type) {
  return type == ElementType::f16    ? llvm::APFloat::IEEEhalf()
         : type == ElementType::e4m3 ? llvm::APFloat::Float8E4M3FN()
                                     : llvm::APFloat::BFloat();
}

/// The 16-bit (e4m3: 8-bit) pattern of `value` rounded to nearest even.
inline uint16_t toBits(float value, ElementType type) {
  llvm::APFloat x(value);
  bool losesInfo;
  x.convert(semanticsOf(type), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return uint16_t(x.bitcastToAPInt().getZExtValue());
}

inline float fromBits(uint16_t bits, ElementType type) {
  llvm::APFloat x(semanticsOf(type),
                  llvm::APInt(type == ElementType::e4m3 ? 8 : 16, bits));
  bool losesInfo;
  x.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return x.convertToFloat();
}

/// A quiet NaN of the type, for poisoning outputs.
inline uint16_t nanBits(ElementType type) {
  return type == ElementType::f16    ? 0x7e00
         : type == ElementType::e4m3 ? 0x7f
                                     : 0x7fc0;
}

/// The unit roundoff u of the type: a rounding moves a value by at most u
/// relative (2^-11 for f16, 2^-8 for bf16, 2^-4 for e4m3's normal numbers).
inline double unitRoundoff(ElementType type) {
  return type == ElementType::f16    ? std::ldexp(1.0, -11)
         : type == ElementType::e4m3 ? std::ldexp(1.0, -4)
                                     : std::ldexp(1.0, -8);
}

/// e4m3 codes of `values`, each divided by its factor (a descale), and the
/// dequantized values (code x factor) a float64 reference reads. Element i
/// takes factors[i / elementsPerFactor]: one factor per head of rows x D
/// elements (Q's [B, Hkv] descales expanded to its query heads first, see
/// perQueryHead).
struct Float8Values {
  std::vector<uint8_t> codes;
  std::vector<float> values;
};
inline Float8Values quantizeFloat8(const std::vector<float> &values,
                                   const std::vector<float> &factors,
                                   int64_t elementsPerFactor) {
  Float8Values out;
  out.codes.resize(values.size());
  out.values.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    float factor = factors[i / size_t(elementsPerFactor)];
    out.codes[i] = uint8_t(toBits(values[i] / factor, ElementType::e4m3));
    out.values[i] = fromBits(out.codes[i], ElementType::e4m3) * factor;
  }
  return out;
}

/// [B, Hkv] factors -> one per (batch entry, query head): a GQA group's
/// query heads share their K/V head's (the kernels read factor (b, h /
/// group)).
inline std::vector<float> perQueryHead(const std::vector<float> &kvFactors,
                                       int64_t batch, int64_t qHeads,
                                       int64_t kvHeads) {
  std::vector<float> out(batch * qHeads);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < qHeads; ++h)
      out[b * qHeads + h] = kvFactors[b * kvHeads + h / (qHeads / kvHeads)];
  return out;
}

/// The FP8 forward's bound on |O - O_ref| in units of max|V| (dequantized;
/// the reference is float64 attention of the dequantized inputs). P is
/// quantized to e4m3 from 256 p: at most 2^-4 relative where 256 p >=
/// 2^-6 and 2^-18 absolute below, per key; O is rounded to `out` (u_out);
/// with `eightBitMma`, 8-bit wgmma accumulates Q K^T's k32 steps with
/// about 14 bits (2^-9 more). O is a convex combination of V rows, so
///   |O - O_ref| <= (2^-4 + u_out [+ 2^-9] + Sk 2^-18) max|V|.
inline double float8OutputBound(ElementType out, int64_t kvLen,
                                bool eightBitMma) {
  return std::ldexp(1.0, -4) + unitRoundoff(out) +
         (eightBitMma ? std::ldexp(1.0, -9) : 0.0) +
         double(kvLen) * std::ldexp(1.0, -18);
}

} // namespace fa

#endif // FA_LIB_LOWPRECISION_H
