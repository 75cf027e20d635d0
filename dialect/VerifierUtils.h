//===- VerifierUtils.h - Checks the fa ops' verifiers share -----*- C++ -*-===//
//
// Internal to the dialect: FAOps.cpp (problem ops) and FATileOps.cpp (tile
// ops) both use them.
//
//===----------------------------------------------------------------------===//
#ifndef FA_DIALECT_VERIFIERUTILS_H
#define FA_DIALECT_VERIFIERUTILS_H

#include "dialect/FAOps.h"

#include <string>

namespace mlir::fa::detail {

/// Prints a dimension the way MLIR types spell it.
std::string dimToString(int64_t dim);

/// A softmax scale: positive and finite.
LogicalResult verifyScale(Operation *op, FloatAttr scale);

/// Checks a variant region: one block whose arguments are (score: f32,)
/// b, h, q_idx, kv_idx, q_len, kv_len: index, then one memref per captured
/// tensor (`captures`, the op's), holding arith and math ops and loads of
/// the captures only, ending in fa.yield of one f32 (score_mod) or one i1
/// (mask_mod).
LogicalResult verifyVariantRegion(Operation *op, Region &region,
                                  VariantRegion kind, TypeRange captures = {});

/// A block mask's range table: [?, ?, ?, 4] i32, row-major, in global
/// memory.
LogicalResult verifyRangeTable(Operation *op, StringRef name, Value table);

} // namespace mlir::fa::detail

#endif // FA_DIALECT_VERIFIERUTILS_H
