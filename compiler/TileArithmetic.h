//===- TileArithmetic.h - Index arithmetic shared by lowerings ------*- C++ -*-===//
//
// The mask predicate and the K/V tile range are the same integer arithmetic
// whether a tile is lowered for the CPU or for the GPU: one definition here.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_TILEARITHMETIC_H
#define FA_COMPILER_TILEARITHMETIC_H

#include "dialect/FAOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::fa {

/// i1: the score of query row `row` and key column `col` is masked out
/// (padding past `kvLen`, or, for the causal mask, col > row + kvLen - qLen).
Value buildIsMasked(OpBuilder &b, Location loc, MaskKind mask, Value row,
                    Value col, Value qLen, Value kvLen);

/// Loads source[batch, head, row, trailing...] as zero when `row` is at or
/// past `rowLimit` (the padding of a tail tile). The index is clamped, so
/// the load never leaves the buffer.
Value buildZeroPaddedLoad(OpBuilder &b, Location loc, Value source,
                          Value batch, Value head, Value row, Value rowLimit,
                          ValueRange trailing);

/// Adds the lowering of fa.kv_tile_range to index arithmetic (see the op's
/// description); the same for every target.
void populateKVTileRangeLowering(RewritePatternSet &patterns);

} // namespace mlir::fa

#endif // FA_COMPILER_TILEARITHMETIC_H
