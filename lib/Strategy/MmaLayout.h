//===- MmaLayout.h - Lane <-> element maps of mma.sync ----------*- C++ -*-===//
//
// The register fragments of the tensor-core instruction mma.sync.m16n8k16
// (f16/bf16 operands, f32 accumulator), as data. Placement, the lowering
// and the resource model read these tables; nothing else spells them out.
//
// A lane is split as g = lane / 4 (its "group", a row) and t = lane % 4 (its
// column pair). Element e of a fragment held by lane (g, t) sits at
//   row = g + 8 * rowHalf[e],  col = 2 * t + colPair[e] + 8 * colHalf[e]
// of the fragment's tile.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_STRATEGY_MMALAYOUT_H
#define FA_LIB_STRATEGY_MMALAYOUT_H

#include <cstdint>

namespace fa::mma {

/// The instruction's shape: m16 n8 k16.
constexpr int64_t kM = 16, kN = 8, kK = 16;

/// A 16 x 8 accumulator fragment (C/D): 4 f32 per lane.
///   lane (g, t): c0 (g, 2t) c1 (g, 2t+1) c2 (g+8, 2t) c3 (g+8, 2t+1)
struct AccumulatorFragment {
  static constexpr int64_t kElements = 4;
  static constexpr int64_t rowHalf[kElements] = {0, 0, 1, 1};
  static constexpr int64_t colPair[kElements] = {0, 1, 0, 1};
  static constexpr int64_t colHalf[kElements] = {0, 0, 0, 0};
};

/// A 16 x 16 A-operand fragment (row-major): 8 f16/bf16 per lane, in the
/// four 32-bit registers a0a1 a2a3 a4a5 a6a7.
///   a0a1 (g, 2t..) a2a3 (g+8, 2t..) a4a5 (g, 2t+8..) a6a7 (g+8, 2t+8..)
struct OperandAFragment {
  static constexpr int64_t kElements = 8;
  static constexpr int64_t rowHalf[kElements] = {0, 0, 1, 1, 0, 0, 1, 1};
  static constexpr int64_t colPair[kElements] = {0, 1, 0, 1, 0, 1, 0, 1};
  static constexpr int64_t colHalf[kElements] = {0, 0, 0, 0, 1, 1, 1, 1};
};

/// The accumulator element that holds A-operand element `e` of k-block `kb`
/// when two neighbouring 16 x 8 accumulator fragments (n-blocks 2kb and
/// 2kb+1) are reused as one 16 x 16 A operand (P of P V stays in registers):
/// same row, same column, so the conversion is a renaming of registers.
struct AccumulatorSlot {
  int64_t nBlock;  // which 16 x 8 accumulator fragment
  int64_t element; // which of its 4 elements
};
constexpr AccumulatorSlot accumulatorSlotOfOperandA(int64_t kb, int64_t e) {
  return {2 * kb + OperandAFragment::colHalf[e],
          2 * OperandAFragment::rowHalf[e] + OperandAFragment::colPair[e]};
}

/// ldmatrix .x4 reads four 8 x 8 matrices; lane l gives the address of row
/// l % 8 of matrix l / 8. The matrix order that yields an A fragment
/// (a0a1, a2a3, a4a5, a6a7): matrix i starts at
///   (rows 8 * aMatrixRowHalf[i], cols 8 * aMatrixColHalf[i]).
constexpr int64_t aMatrixRowHalf[4] = {0, 1, 0, 1};
constexpr int64_t aMatrixColHalf[4] = {0, 0, 1, 1};

} // namespace fa::mma

#endif // FA_LIB_STRATEGY_MMALAYOUT_H
