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

namespace mlir::fa {

/// i1: the score of query row `row` and key column `col` is masked out
/// (padding past `kvLen`, or, for the causal mask, col > row + kvLen - qLen).
Value buildIsMasked(OpBuilder &b, Location loc, MaskKind mask, Value row,
                    Value col, Value qLen, Value kvLen);

/// The [begin, end) K/V tile range of fa.kv_tile_range.
std::pair<Value, Value> buildKVTileRange(OpBuilder &b, Location loc,
                                         KVTileRangeOp op, Value qStart,
                                         Value qLen, Value kvLen);

} // namespace mlir::fa

#endif // FA_COMPILER_TILEARITHMETIC_H
