//===- TileArithmetic.cpp - Index arithmetic shared by lowerings ----*- C++ -*-===//
#include "compiler/Tiling/TileArithmetic.h"
#include "compiler/Tiling/Variants.h"
#include "lib/LaunchPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMAttrs.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

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

Value mlir::fa::buildZeroPaddedLoad(OpBuilder &b, Location loc, Value source,
                                    Value pages, Value batch, Value head,
                                    Value row, Value rowLimit,
                                    ValueRange trailing, bool limitMayBeZero) {
  Value inBounds =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, row, rowLimit);
  SmallVector<Value> indices;
  if (pages) {
    // A paged row's address is clamped into the pool whatever the row.
    auto [entry, pageRow] =
        buildSourceRowAddress(b, loc, source, pages, batch, row);
    indices = {entry, head, pageRow};
  } else {
    // (An empty sequence at the start ends at row 0: its "last row" would
    // be row -1, so such a limit counts as 1.)
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value limit =
        limitMayBeZero
            ? arith::MaxUIOp::create(b, loc, rowLimit, one).getResult()
            : rowLimit;
    Value lastRow = arith::SubIOp::create(b, loc, limit, one);
    Value clamped = arith::MinUIOp::create(b, loc, row, lastRow);
    indices = {batch, head, clamped};
  }
  llvm::append_range(indices, trailing);
  Value loaded = memref::LoadOp::create(b, loc, source, indices);
  Type elementType = loaded.getType();
  Value zero =
      arith::ConstantOp::create(b, loc, b.getFloatAttr(elementType, 0.0));
  return arith::SelectOp::create(b, loc, inBounds, loaded, zero);
}

/// The attribute scf-to-cf moves from a loop to its latch branch, and
/// the LLVM dialect's branch takes as its loop metadata.
constexpr llvm::StringLiteral kLoopAnnotationAttrName = "loop_annotation";

/// Two columns of a block mask's range table [B, Hb, groups, 4] folded
/// over the groups that hold the indices [start, end) (row `group` of
/// batch `batch`, head min(head, Hb - 1)): from (lo, hi) = `init`, each
/// group's column `loColumn` combined into lo with `combineLo`, column
/// `hiColumn` into hi with `combineHi`.
template <typename CombineLo, typename CombineHi>
static scf::ForOp foldRangeTable(OpBuilder &b, Location loc, Value table,
                                 Value batch, Value head, Value start,
                                 Value end, std::array<Value, 2> init,
                                 int64_t loColumn, int64_t hiColumn) {
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value group = arith::ConstantIndexOp::create(b, loc, ::fa::kBlockMaskGroup);
  Value lastHead = arith::SubIOp::create(
      b, loc, memref::DimOp::create(b, loc, table, 1), one);
  Value tableHead = arith::MinUIOp::create(b, loc, head, lastHead);
  Value firstGroup = arith::DivUIOp::create(b, loc, start, group);
  Value endGroup = arith::CeilDivUIOp::create(b, loc, end, group);
  auto fold = scf::ForOp::create(
      b, loc, firstGroup, endGroup, one, ValueRange{init[0], init[1]},
      [&](OpBuilder &nested, Location loc, Value g, ValueRange bounds) {
        auto read = [&](int64_t which) -> Value {
          Value column = arith::ConstantIndexOp::create(nested, loc, which);
          Value value = memref::LoadOp::create(
              nested, loc, table, ValueRange{batch, tableHead, g, column});
          return arith::IndexCastOp::create(nested, loc,
                                            nested.getIndexType(), value);
        };
        Value lo = CombineLo::create(nested, loc, bounds[0], read(loColumn));
        Value hi = CombineHi::create(nested, loc, bounds[1], read(hiColumn));
        scf::YieldOp::create(nested, loc, ValueRange{lo, hi});
      });
  // Kept rolled: LLVM would unroll it by 8 (a runtime trip count), holding
  // every group's entries and their 64-bit addresses at once, registers a
  // backward's consumers do not have (wgmma dkdv programs spilled 84-136
  // bytes more unrolled).
  MLIRContext *ctx = b.getContext();
  auto unroll = LLVM::LoopUnrollAttr::get(ctx, /*disable=*/b.getBoolAttr(true),
                                          {}, {}, {}, {}, {}, {});
  fold->setAttr(kLoopAnnotationAttrName,
                LLVM::LoopAnnotationAttr::get(ctx, {}, {}, {}, unroll, {}, {},
                                              {}, {}, {}, {}, {}, {}, {}, {},
                                              {}));
  return fold;
}

/// The largest index a range table's fold starts from or ends below.
static Value maxTableIndex(OpBuilder &b, Location loc) {
  return arith::ConstantIndexOp::create(b, loc,
                                        std::numeric_limits<int32_t>::max());
}

/// The union of a block mask's ranges over the groups that hold the
/// indices [start, end) (columns first and end of the range table), as the
/// tiles of `tileSize` it meets intersected with [begin, end). Groups whose
/// range is empty widen nothing but may lower the union's start or raise
/// its end: the table's producer writes them as [Sk, 0) (or [Sq, 0)) so
/// that they do not.
static std::pair<Value, Value>
intersectWithRangeTable(OpBuilder &b, Location loc, Value table, Value batch,
                        Value head, Value start, Value end, int64_t tileSize,
                        Value begin, Value tilesEnd) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value tile = arith::ConstantIndexOp::create(b, loc, tileSize);
  // [lo, hi): the smallest first and the largest end of the groups.
  scf::ForOp hull = foldRangeTable<arith::MinSIOp, arith::MaxSIOp>(
      b, loc, table, batch, head, start, end, {maxTableIndex(b, loc), zero},
      /*loColumn=*/0, /*hiColumn=*/1);
  Value lo = hull.getResult(0), hi = hull.getResult(1);
  // Tiles floor(lo / tile) .. ceil(hi / tile) - 1; lo >= hi: none.
  begin = arith::MaxSIOp::create(
      b, loc, begin, arith::FloorDivSIOp::create(b, loc, lo, tile));
  tilesEnd = arith::MinSIOp::create(
      b, loc, tilesEnd, arith::CeilDivSIOp::create(b, loc, hi, tile));
  Value empty =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, lo, hi);
  tilesEnd = arith::SelectOp::create(b, loc, empty, begin, tilesEnd);
  tilesEnd = arith::MaxSIOp::create(b, loc, tilesEnd, begin);
  return {begin, tilesEnd};
}

/// [lo, hi) of fa.whole_range: the largest whole_first and the smallest
/// whole_end of the groups that hold [start, end) (none: empty).
static std::pair<Value, Value> buildWholeRange(OpBuilder &b, Location loc,
                                               WholeRangeOp op) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  scf::ForOp meet = foldRangeTable<arith::MaxSIOp, arith::MinSIOp>(
      b, loc, op.getRanges(), op.getBatch(), op.getHead(), op.getStart(),
      op.getEnd(), {zero, maxTableIndex(b, loc)}, /*loColumn=*/2,
      /*hiColumn=*/3);
  Value noGroup = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::uge, meet.getLowerBound(),
      meet.getUpperBound());
  Value hi = arith::SelectOp::create(b, loc, noGroup, zero, meet.getResult(1));
  return {meet.getResult(0), hi};
}

/// One past the last query row of the tile at `qStart`: min(qStart +
/// blockM, qLen).
static Value queryRowsEnd(OpBuilder &b, Location loc, Value qStart,
                          int64_t blockM, Value qLen) {
  Value tileEnd = arith::AddIOp::create(
      b, loc, qStart, arith::ConstantIndexOp::create(b, loc, blockM));
  return arith::MinSIOp::create(b, loc, tileEnd, qLen);
}

/// The index box of a query tile's rows [qStart, rowsEnd) against every
/// key [0, kvLen) (`zero` and `one`: the caller's constants).
static IndexBox queryTileBox(OpBuilder &b, Location loc, Value batch,
                             Value head, Value qStart, Value rowsEnd,
                             Value qLen, Value kvLen, Value zero, Value one) {
  IndexBox box;
  box.lo[kBatchArg] = box.hi[kBatchArg] = batch;
  box.lo[kHeadArg] = box.hi[kHeadArg] = head;
  box.lo[kQueryIndexArg] = qStart;
  box.hi[kQueryIndexArg] = arith::SubIOp::create(b, loc, rowsEnd, one);
  box.lo[kKeyIndexArg] = zero;
  box.hi[kKeyIndexArg] = arith::SubIOp::create(b, loc, kvLen, one);
  box.lo[kQueryLenArg] = box.hi[kQueryLenArg] = qLen;
  box.lo[kKeyLenArg] = box.hi[kKeyLenArg] = kvLen;
  return box;
}

/// [hole_begin, hole_end) of fa.kv_tile_hole: the tiles wholly inside the
/// mask_mod's key gap over the query tile's rows (buildKeyGap), within
/// [begin, end); empty at begin where the mask leaves no gap.
static std::pair<Value, Value> buildKVTileHole(OpBuilder &b, Location loc,
                                               KVTileHoleOp op) {
  Value begin = op.getBegin(), end = op.getEnd();
  std::optional<MaskFormula> formula = analyzeAffineMask(op.getMaskMod());
  if (!formula || !mayLeaveKeyGap(*formula))
    return {begin, begin};
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value rowsEnd =
      queryRowsEnd(b, loc, op.getQStart(), op.getBlockM(), op.getQLen());
  IndexBox box =
      queryTileBox(b, loc, op.getBatch(), op.getHead(), op.getQStart(), rowsEnd,
                   op.getQLen(), op.getKvLen(), zero, one);
  auto [gapStart, gapEnd] = buildKeyGap(b, loc, *formula, box);
  // Tiles t with gapStart <= t * block_n and (t + 1) * block_n <= gapEnd.
  Value blockN = arith::ConstantIndexOp::create(b, loc, op.getBlockN());
  Value first = arith::CeilDivSIOp::create(b, loc, gapStart, blockN);
  Value last = arith::FloorDivSIOp::create(b, loc, gapEnd, blockN);
  Value holeBegin = arith::MinSIOp::create(
      b, loc, arith::MaxSIOp::create(b, loc, first, begin), end);
  Value holeEnd = arith::MaxSIOp::create(
      b, loc, arith::MinSIOp::create(b, loc, last, end), holeBegin);
  return {holeBegin, holeEnd};
}

/// [begin, end) of fa.kv_tile_range without its part.
static std::pair<Value, Value> buildWholeKVTileRange(OpBuilder &b, Location loc,
                                                     KVTileRangeOp op,
                                                     Value qStart, Value qLen,
                                                     Value kvLen);

/// [begin, end) of fa.kv_tile_range: with `part(%p of %n)` the p-th of n
/// parts of c = ceil(tiles / n) tiles, cut at the range's end.
static std::pair<Value, Value> buildKVTileRange(OpBuilder &b, Location loc,
                                                KVTileRangeOp op, Value qStart,
                                                Value qLen, Value kvLen) {
  auto [begin, end] = buildWholeKVTileRange(b, loc, op, qStart, qLen, kvLen);
  if (!op.getPart())
    return {begin, end};
  Value chunk = arith::CeilDivUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, end, begin), op.getNumParts());
  Value first = arith::AddIOp::create(
      b, loc, begin, arith::MulIOp::create(b, loc, op.getPart(), chunk));
  Value partBegin = arith::MinUIOp::create(b, loc, first, end);
  Value partEnd = arith::MinUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, partBegin, chunk), end);
  return {partBegin, partEnd};
}

static std::pair<Value, Value> buildWholeKVTileRange(OpBuilder &b, Location loc,
                                                     KVTileRangeOp op,
                                                     Value qStart, Value qLen,
                                                     Value kvLen) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value blockN = arith::ConstantIndexOp::create(b, loc, op.getBlockN());
  Value numTiles = arith::CeilDivUIOp::create(b, loc, kvLen, blockN);
  // One past the tile's last query row: min(q_start + block_m, Sq).
  auto buildRowsEnd = [&]() -> Value {
    return queryRowsEnd(b, loc, qStart, op.getBlockM(), qLen);
  };
  Value begin = zero, end = numTiles;
  if (Value table = op.getRanges()) {
    std::tie(begin, end) = intersectWithRangeTable(
        b, loc, table, op.getBatch(), op.getHead(), qStart, buildRowsEnd(),
        op.getBlockN(), begin, end);
  }
  if (op.getMask() == MaskKind::causal) {
    Value rowsEnd = buildRowsEnd();
    // The last query row of this tile sees keys up to
    // min(q_start + block_m, Sq) - 1 + Sk - Sq (signed: may be negative).
    Value visibleKeys = arith::SubIOp::create(
        b, loc, arith::AddIOp::create(b, loc, rowsEnd, kvLen), qLen);
    Value visibleTiles =
        arith::CeilDivSIOp::create(b, loc, visibleKeys, blockN);
    end = arith::MaxSIOp::create(
        b, loc, begin, arith::MinSIOp::create(b, loc, visibleTiles, end));
  }
  if (op.getMaskMod().empty())
    return {begin, end};
  std::optional<MaskFormula> formula = analyzeAffineMask(op.getMaskMod());
  if (!formula)
    return {begin, end}; // not affine: every tile is visited
  // The keys the mask_mod keeps for some row of this tile, [lo, hi]: the
  // tiles from floor(lo / block_n) to floor(hi / block_n).
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  IndexBox box = queryTileBox(b, loc, op.getBatch(), op.getHead(), qStart,
                              buildRowsEnd(), qLen, kvLen, zero, one);
  IndexBounds keys = buildIndexBounds(b, loc, *formula, box, kKeyIndexArg);
  if (keys.lo)
    begin = arith::MaxSIOp::create(
        b, loc, begin, arith::FloorDivSIOp::create(b, loc, keys.lo, blockN));
  if (keys.hi)
    end = arith::MinSIOp::create(
        b, loc, end,
        arith::AddIOp::create(
            b, loc, arith::FloorDivSIOp::create(b, loc, keys.hi, blockN),
            one));
  // An empty range is [begin, begin): no tile, and no negative count.
  end = arith::MaxSIOp::create(b, loc, end, begin);
  // (Bounds that say "no key" put begin far past the tiles: back to their
  // end.)
  if (hasConstraintWithout(*formula, kKeyIndexArg)) {
    begin = arith::MinSIOp::create(b, loc, begin, numTiles);
    end = arith::MinSIOp::create(b, loc, end, numTiles);
  }
  return {begin, end};
}

namespace {
/// The operands and attributes of an fa.q_tile_range (fa.previous_visitor
/// asks the same of other K/V tiles).
struct QueryTileRangeQuery {
  Value kvStart, qLen, kvLen, batch, head, table;
  int64_t blockM, blockN;
  MaskKind mask;
  Region &maskMod;
};
} // namespace

/// [begin, end) of fa.q_tile_range.
static std::pair<Value, Value> buildQTileRange(OpBuilder &b, Location loc,
                                               const QueryTileRangeQuery &op) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value blockM = arith::ConstantIndexOp::create(b, loc, op.blockM);
  Value numTiles = arith::CeilDivUIOp::create(b, loc, op.qLen, blockM);
  Value begin = zero, end = numTiles;
  if (Value table = op.table) {
    Value blockN = arith::ConstantIndexOp::create(b, loc, op.blockN);
    Value keysEnd = arith::MinSIOp::create(
        b, loc, arith::AddIOp::create(b, loc, op.kvStart, blockN), op.kvLen);
    std::tie(begin, end) =
        intersectWithRangeTable(b, loc, table, op.batch, op.head, op.kvStart,
                                keysEnd, op.blockM, begin, end);
  }
  if (op.mask == MaskKind::causal) {
    // The first row that sees key kv_start is kv_start - (Sk - Sq) (signed:
    // negative when every row sees it).
    Value firstRow = arith::SubIOp::create(
        b, loc, arith::AddIOp::create(b, loc, op.kvStart, op.qLen), op.kvLen);
    Value firstTile = arith::FloorDivSIOp::create(b, loc, firstRow, blockM);
    begin = arith::MinSIOp::create(
        b, loc, arith::MaxSIOp::create(b, loc, begin, firstTile), end);
  }
  if (op.maskMod.empty())
    return {begin, end};
  std::optional<MaskFormula> formula = analyzeAffineMask(op.maskMod);
  if (!formula)
    return {begin, end}; // not affine: every query tile
  // The query rows the mask_mod keeps a key of this tile for, [lo, hi]:
  // the tiles from floor(lo / block_m) to floor(hi / block_m).
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value blockN = arith::ConstantIndexOp::create(b, loc, op.blockN);
  Value tileEnd = arith::MinSIOp::create(
      b, loc, arith::AddIOp::create(b, loc, op.kvStart, blockN), op.kvLen);
  IndexBox box;
  box.lo[kBatchArg] = box.hi[kBatchArg] = op.batch;
  box.lo[kHeadArg] = box.hi[kHeadArg] = op.head;
  box.lo[kQueryIndexArg] = zero;
  box.hi[kQueryIndexArg] = arith::SubIOp::create(b, loc, op.qLen, one);
  box.lo[kKeyIndexArg] = op.kvStart;
  box.hi[kKeyIndexArg] = arith::SubIOp::create(b, loc, tileEnd, one);
  box.lo[kQueryLenArg] = box.hi[kQueryLenArg] = op.qLen;
  box.lo[kKeyLenArg] = box.hi[kKeyLenArg] = op.kvLen;
  IndexBounds rows =
      buildIndexBounds(b, loc, *formula, box, kQueryIndexArg);
  if (rows.lo)
    begin = arith::MaxSIOp::create(
        b, loc, begin, arith::FloorDivSIOp::create(b, loc, rows.lo, blockM));
  if (rows.hi)
    end = arith::MinSIOp::create(
        b, loc, end,
        arith::AddIOp::create(
            b, loc, arith::FloorDivSIOp::create(b, loc, rows.hi, blockM), one));
  end = arith::MaxSIOp::create(b, loc, end, begin);
  // (Bounds that say "no row" put begin far past the tiles: back to their
  // end.)
  if (hasConstraintWithout(*formula, kQueryIndexArg)) {
    begin = arith::MinSIOp::create(b, loc, begin, numTiles);
    end = arith::MinSIOp::create(b, loc, end, numTiles);
  }
  return {begin, end};
}

std::pair<Value, Value> mlir::fa::buildSequenceRows(OpBuilder &b, Location loc,
                                                    Value offsets, Value index,
                                                    Value rows) {
  // Unsigned: a negative offset becomes large and is clamped to `rows`.
  auto rowAt = [&](Value i) {
    Value offset = memref::LoadOp::create(b, loc, offsets, i);
    Value row =
        arith::IndexCastUIOp::create(b, loc, b.getIndexType(), offset);
    return arith::MinUIOp::create(b, loc, row, rows);
  };
  Value start = rowAt(index);
  Value next = arith::AddIOp::create(
      b, loc, index, arith::ConstantIndexOp::create(b, loc, 1));
  Value end = arith::MaxUIOp::create(b, loc, rowAt(next), start);
  return {start, end};
}

Value mlir::fa::buildSequenceLength(OpBuilder &b, Location loc, Value offsets,
                                    Value index, Value limit) {
  // Unsigned: a negative offset becomes large; the length is then at most
  // the limit.
  auto offsetAt = [&](Value i) -> Value {
    Value offset = memref::LoadOp::create(b, loc, offsets, i);
    return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), offset);
  };
  Value start = offsetAt(index);
  Value next = arith::AddIOp::create(b, loc, index,
                                     arith::ConstantIndexOp::create(b, loc, 1));
  Value end = arith::MaxUIOp::create(b, loc, offsetAt(next), start);
  return arith::MinUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, end, start), limit);
}

Value mlir::fa::castTile(OpBuilder &b, Location loc, Value tile,
                         Type elementType) {
  auto type = cast<RankedTensorType>(tile.getType());
  if (type.getElementType() == elementType)
    return tile;
  return arith::TruncFOp::create(b, loc, type.clone(elementType), tile);
}

LogicalResult mlir::fa::checkBlockSizes(Operation *op, int64_t blockM,
                                        int64_t blockN) {
  for (auto [name, value] : {std::pair<StringRef, int64_t>{"block-m", blockM},
                             {"block-n", blockN}})
    if (value < 1 || value > kMaxBlockSize)
      return op->emitError() << name << " must be in [1, " << kMaxBlockSize
                             << "], got " << value;
  return success();
}

namespace {
struct KVTileRangeLowering : OpRewritePattern<KVTileRangeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(KVTileRangeOp op,
                                PatternRewriter &rewriter) const override {
    auto [begin, end] = buildKVTileRange(rewriter, op.getLoc(), op,
                                         op.getQStart(), op.getQLen(),
                                         op.getKvLen());
    rewriter.replaceOp(op, {begin, end});
    return success();
  }
};

struct KVTileHoleLowering : OpRewritePattern<KVTileHoleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(KVTileHoleOp op,
                                PatternRewriter &rewriter) const override {
    auto [begin, end] = buildKVTileHole(rewriter, op.getLoc(), op);
    rewriter.replaceOp(op, {begin, end});
    return success();
  }
};

struct WholeRangeLowering : OpRewritePattern<WholeRangeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(WholeRangeOp op,
                                PatternRewriter &rewriter) const override {
    auto [lo, hi] = buildWholeRange(rewriter, op.getLoc(), op);
    rewriter.replaceOp(op, {lo, hi});
    return success();
  }
};

struct QTileRangeLowering : OpRewritePattern<QTileRangeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(QTileRangeOp op,
                                PatternRewriter &rewriter) const override {
    auto [begin, end] = buildQTileRange(
        rewriter, op.getLoc(),
        {op.getKvStart(), op.getQLen(), op.getKvLen(), op.getBatch(),
         op.getHead(), op.getRanges(), int64_t(op.getBlockM()),
         int64_t(op.getBlockN()), op.getMask(), op.getMaskMod()});
    rewriter.replaceOp(op, {begin, end});
    return success();
  }
};

/// fa.previous_visitor: a walk over [lo, hi) from the K/V tile next to
/// `kv_tile` towards lo (descending: towards hi) that stops at the first
/// tile whose query range holds `q_tile`. A tile outside [lo, hi) is never
/// asked (the walk starts inside it or ends at once).
struct PreviousVisitorLowering : OpRewritePattern<PreviousVisitorOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PreviousVisitorOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    bool descending = op.getDescending();
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value lo = op.getLo(), hi = op.getHi();
    // Signed: the walk ends one past an end (lo - 1 may be -1).
    auto inside = [&](OpBuilder &b, Value t) -> Value {
      return arith::CmpIOp::create(b, loc,
                                   descending ? arith::CmpIPredicate::slt
                                              : arith::CmpIPredicate::sge,
                                   t, descending ? hi : lo);
    };
    Value start =
        descending
            ? (Value)arith::AddIOp::create(
                  rewriter, loc,
                  arith::MaxSIOp::create(
                      rewriter, loc, op.getKvTile(),
                      arith::SubIOp::create(rewriter, loc, lo, one)),
                  one)
            : arith::SubIOp::create(
                  rewriter, loc,
                  arith::MinSIOp::create(rewriter, loc, op.getKvTile(), hi),
                  one);
    Value blockN =
        arith::ConstantIndexOp::create(rewriter, loc, op.getBlockN());
    auto walk = scf::WhileOp::create(
        rewriter, loc, TypeRange{rewriter.getIndexType()}, ValueRange{start},
        [&](OpBuilder &b, Location loc, ValueRange args) {
          Value t = args[0];
          Value within = inside(b, t);
          // Asked only inside [lo, hi) (clamped: the table is read at a
          // tile of the range even when the walk has left it).
          Value asked = arith::MaxSIOp::create(
              b, loc,
              arith::MinSIOp::create(b, loc, t,
                                     arith::SubIOp::create(b, loc, hi, one)),
              lo);
          auto [qBegin, qEnd] = buildQTileRange(
              b, loc,
              {arith::MulIOp::create(b, loc, asked, blockN), op.getQLen(),
               op.getKvLen(), op.getBatch(), op.getHead(), op.getRanges(),
               int64_t(op.getBlockM()), int64_t(op.getBlockN()), op.getMask(),
               op.getMaskMod()});
          Value visits = arith::AndIOp::create(
              b, loc,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, qBegin,
                                    op.getQTile()),
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                    op.getQTile(), qEnd));
          Value notYet = arith::AndIOp::create(
              b, loc, within,
              arith::XOrIOp::create(
                  b, loc, visits, arith::ConstantIntOp::create(b, loc, 1, 1)));
          scf::ConditionOp::create(b, loc, notYet, ValueRange{t});
        },
        [&](OpBuilder &b, Location loc, ValueRange args) {
          Value next = descending
                           ? (Value)arith::AddIOp::create(b, loc, args[0], one)
                           : (Value)arith::SubIOp::create(b, loc, args[0], one);
          scf::YieldOp::create(b, loc, ValueRange{next});
        });
    Value previous = walk.getResult(0);
    rewriter.replaceOp(op, {inside(rewriter, previous), previous});
    return success();
  }
};
} // namespace

void mlir::fa::populateKVTileRangeLowering(RewritePatternSet &patterns) {
  patterns.add<KVTileRangeLowering, KVTileHoleLowering>(patterns.getContext());
}

void mlir::fa::populateTileRangeLowering(RewritePatternSet &patterns) {
  patterns.add<KVTileRangeLowering, KVTileHoleLowering, QTileRangeLowering,
               WholeRangeLowering, PreviousVisitorLowering>(
      patterns.getContext());
}

std::optional<std::vector<int64_t>>
mlir::fa::foldVisitedKVTiles(MLIRContext *ctx, MaskKind mask, Region &maskMod,
                             int64_t qLen, int64_t kvLen, int64_t blockM,
                             int64_t blockN, int64_t batch, int64_t head,
                             bool skipsHole) {
  OpBuilder b(ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  // The ranges' sizes are returned by a function (the folding rewrites
  // the return's operands in place).
  int64_t qTiles = (qLen + blockM - 1) / blockM;
  auto func = func::FuncOp::create(
      b, loc, "visited",
      b.getFunctionType({}, SmallVector<Type>(qTiles, b.getIndexType())));
  b.setInsertionPointToStart(func.addEntryBlock());
  auto constant = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  bool rangeMask = !maskMod.empty() && !readsCapturedTensors(maskMod);
  skipsHole = skipsHole && rangeMask && skipsKeyHole(maskMod);
  SmallVector<Value> counts;
  for (int64_t qStart = 0; qStart < qLen; qStart += blockM) {
    auto range = KVTileRangeOp::create(
        b, loc, b.getIndexType(), b.getIndexType(), constant(qStart),
        constant(qLen), constant(kvLen), rangeMask ? constant(batch) : Value(),
        rangeMask ? constant(head) : Value(), /*ranges=*/Value(),
        /*part=*/Value(), /*num_parts=*/Value(), blockM, blockN, mask);
    if (rangeMask)
      cloneMaskWithoutCaptures(maskMod, range.getMaskMod());
    Value count =
        arith::SubIOp::create(b, loc, range.getEnd(), range.getBegin());
    // The tiles of a hole the K/V loop skips (sink tokens and a window).
    if (skipsHole) {
      auto hole = KVTileHoleOp::create(
          b, loc, b.getIndexType(), b.getIndexType(), range.getBegin(),
          range.getEnd(), constant(qStart), constant(qLen), constant(kvLen),
          constant(batch), constant(head), blockM, blockN);
      cloneMaskWithoutCaptures(maskMod, hole.getMaskMod());
      count =
          kvVisitsEnd(b, loc, count, hole.getHoleBegin(), hole.getHoleEnd());
    }
    counts.push_back(count);
  }
  auto holder = func::ReturnOp::create(b, loc, counts);
  RewritePatternSet patterns(ctx);
  populateKVTileRangeLowering(patterns);
  if (failed(applyPatternsGreedily(module->getOperation(), std::move(patterns))))
    return std::nullopt;
  std::vector<int64_t> visited;
  for (Value count : holder.getOperands()) {
    APInt value;
    if (!matchPattern(count, m_ConstantInt(&value)))
      return std::nullopt;
    visited.push_back(std::max<int64_t>(0, value.getSExtValue()));
  }
  return visited;
}

Value mlir::fa::scoreGradient(OpBuilder &b, Location loc, Value prob,
                              Value gradProb, Value delta, Value scale) {
  Value centered = arith::SubFOp::create(b, loc, gradProb, delta);
  Value grad = arith::MulFOp::create(b, loc, prob, centered);
  return arith::MulFOp::create(b, loc, grad, scale);
}
