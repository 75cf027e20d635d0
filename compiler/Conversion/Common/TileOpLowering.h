//===- TileOpLowering.h - Tile ops lowered once for every layout -*- C++ -*-===//
//
// The lowerings of the tile ops that do the same arithmetic on every
// element whatever thread holds it: fa.mask, fa.score_mod,
// fa.score_mod_grad, fa.online_softmax, fa.rescale, fa.finalize,
// fa.join_sink, fa.recompute_probs, fa.softmax_grad, fa.sink_grad,
// fa.accumulate_total, and the loads of register tiles from global memory. They are written against
// the register layout the tile's encoding describes
// (TileEncodingInterface::getRegisterLayout), so every strategy whose
// register tiles become vectors of a thread's elements (in slot order)
// shares them; what a strategy still lowers itself is its matmul, its
// layout conversions and its copies through shared memory.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_CONVERSION_COMMON_TILEOPLOWERING_H
#define FA_COMPILER_CONVERSION_COMMON_TILEOPLOWERING_H

#include "dialect/FADialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
class TypeConverter;
} // namespace mlir

namespace mlir::fa {

/// The register layout of `type` (a tile with a register encoding), or
/// failure for a tile without one.
FailureOr<RegisterLayout> registerLayoutOf(Type type);

/// The calling thread's place in a register tile: the layout, and the
/// terms of its first row and column (index values computed from the thread
/// id once; their sums are built where they are used).
struct ThreadElements {
  /// Emits the thread id terms of `type` at `b`'s insertion point; `type`
  /// must have a register layout.
  ThreadElements(OpBuilder &b, Location loc, RankedTensorType type);

  /// The thread's first row, and its first column (a 1-d tile: which copy
  /// of its rows it holds, 0 for the first).
  Value rowBase(OpBuilder &b, Location loc) const;
  Value colBase(OpBuilder &b, Location loc) const;
  /// The tile row of row slot `rowSlot`.
  Value rowOfRowSlot(OpBuilder &b, Location loc, int64_t rowSlot) const;
  /// The tile column of slot `slot` (2-d tiles).
  Value col(OpBuilder &b, Location loc, int64_t slot) const;

  RegisterLayout layout;
  SmallVector<Value, 2> rowTerms, colTerms;
};

/// A butterfly all-reduce of `value` over the lanes that share a row
/// (`layout.rowReduceMasks`).
Value rowAllReduce(OpBuilder &b, Location loc, const RegisterLayout &layout,
                   Value value, function_ref<Value(Value, Value)> combine);

/// Adds the layout-generic lowerings named above.
void populateTileOpPatterns(const TypeConverter &typeConverter,
                            RewritePatternSet &patterns);

} // namespace mlir::fa

#endif // FA_COMPILER_CONVERSION_COMMON_TILEOPLOWERING_H
