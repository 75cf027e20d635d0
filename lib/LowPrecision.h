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

} // namespace fa

#endif // FA_LIB_LOWPRECISION_H
