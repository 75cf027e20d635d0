//===- TileArithmetic.cpp - Index arithmetic shared by lowerings ----*- C++ -*-===//
#include "compiler/TileArithmetic.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::fa;

Value mlir::fa::buildIsMasked(OpBuilder &b, Location loc, MaskKind mask,
                              Value row, Value col, Value qLen, Value kvLen) {
  // column past the end of the keys (padding of the last K tile)
  Value hidden =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, col, kvLen);
  if (mask == MaskKind::causal) {
    // col > row + Sk - Sq, kept unsigned as col + Sq > row + Sk
    Value lhs = arith::AddIOp::create(b, loc, col, qLen);
    Value rhs = arith::AddIOp::create(b, loc, row, kvLen);
    Value future =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, lhs, rhs);
    hidden = arith::OrIOp::create(b, loc, hidden, future);
  }
  return hidden;
}

std::pair<Value, Value> mlir::fa::buildKVTileRange(OpBuilder &b, Location loc,
                                                   KVTileRangeOp op,
                                                   Value qStart, Value qLen,
                                                   Value kvLen) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value blockN = arith::ConstantIndexOp::create(b, loc, op.getBlockN());
  Value numTiles = arith::CeilDivUIOp::create(b, loc, kvLen, blockN);
  if (op.getMask() != MaskKind::causal)
    return {zero, numTiles};
  // The last query row of this tile sees keys up to
  // min(q_start + block_m, Sq) - 1 + Sk - Sq (signed: may be negative).
  Value blockM = arith::ConstantIndexOp::create(b, loc, op.getBlockM());
  Value tileEnd = arith::AddIOp::create(b, loc, qStart, blockM);
  Value rowsEnd = arith::MinSIOp::create(b, loc, tileEnd, qLen);
  Value visibleKeys = arith::SubIOp::create(
      b, loc, arith::AddIOp::create(b, loc, rowsEnd, kvLen), qLen);
  Value visibleTiles = arith::CeilDivSIOp::create(b, loc, visibleKeys, blockN);
  Value end = arith::MaxSIOp::create(
      b, loc, zero, arith::MinSIOp::create(b, loc, visibleTiles, numTiles));
  return {zero, end};
}
