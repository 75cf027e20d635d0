//===- FragmentTarget.h - What fragment lowerings use of a target -*- C++ -*-=//
#ifndef FA_COMPILER_CONVERSION_COMMON_FRAGMENTTARGET_H
#define FA_COMPILER_CONVERSION_COMMON_FRAGMENTTARGET_H

namespace mlir::fa {

/// What the lowerings of #fa.mma fragments (mma, wgmma) may use of their
/// target.
struct FragmentTarget {
  /// red.global.add.v2.f32: fa.accumulate_tile adds a lane's two adjacent
  /// accumulator columns with one instruction (sm_90 and newer).
  bool vectorReductions = false;
};

} // namespace mlir::fa

#endif // FA_COMPILER_CONVERSION_COMMON_FRAGMENTTARGET_H
