//===- TileOpLowering.cpp - Tile ops lowered once for every layout -*- C++ -*-=//
//
// Each pattern here works on the vector of a thread's elements of a
// register tile and asks the tile's RegisterLayout which row (and row
// slot) each element belongs to, where it lies, and which lanes share its
// row. None of them knows a strategy.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/Common/TileOpLowering.h"
#include "compiler/Conversion/Common/GpuLowering.h"
#include "compiler/Tiling/TileArithmetic.h"
#include "compiler/Tiling/Variants.h"
#include "compiler/Utils/IRUtils.h"
#include "dialect/FAOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>
#include <tuple>

using namespace mlir;
using namespace mlir::fa;

FailureOr<RegisterLayout> mlir::fa::registerLayoutOf(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return failure();
  auto encoding =
      dyn_cast_or_null<TileEncodingInterface>(tensor.getEncoding());
  if (!encoding)
    return failure();
  return encoding.getRegisterLayout(tensor.getShape());
}

/// The thread id divided down by a term (its modulus and divisor).
static Value termIndex(OpBuilder &b, Location loc, Value threadId,
                       const ThreadIdTerm &term) {
  Value v = threadId;
  if (term.modulus)
    v = arith::RemUIOp::create(b, loc, v, indexConst(b, loc, term.modulus));
  if (term.divisor != 1)
    v = arith::DivUIOp::create(b, loc, v, indexConst(b, loc, term.divisor));
  return v;
}

/// Each term's index, then each term's multiple: the order the
/// strategies' hand-written lowerings used (lane and warp indices first,
/// then the slices' first rows and columns), which keeps their PTX.
static void buildTerms(OpBuilder &b, Location loc, Value threadId,
                       ArrayRef<ArrayRef<ThreadIdTerm>> termLists,
                       ArrayRef<SmallVector<Value, 2> *> results) {
  for (auto [terms, values] : llvm::zip(termLists, results))
    for (const ThreadIdTerm &term : terms)
      values->push_back(termIndex(b, loc, threadId, term));
  for (auto [terms, values] : llvm::zip(termLists, results))
    for (auto [term, value] : llvm::zip(terms, *values))
      if (term.multiplier != 1)
        value = mulConst(b, loc, value, term.multiplier);
}

/// The sum of index values (0 for none).
static Value sumIndices(OpBuilder &b, Location loc, ArrayRef<Value> values) {
  if (values.empty())
    return indexConst(b, loc, 0);
  Value sum = values.front();
  for (Value v : values.drop_front())
    sum = arith::AddIOp::create(b, loc, sum, v);
  return sum;
}

ThreadElements::ThreadElements(OpBuilder &b, Location loc,
                               RankedTensorType type)
    : layout(*registerLayoutOf(type)) {
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  buildTerms(b, loc, tid, {layout.rowBase, layout.colBase},
             {&rowTerms, &colTerms});
}

Value ThreadElements::rowBase(OpBuilder &b, Location loc) const {
  return sumIndices(b, loc, rowTerms);
}

Value ThreadElements::colBase(OpBuilder &b, Location loc) const {
  return sumIndices(b, loc, colTerms);
}

Value ThreadElements::rowOfRowSlot(OpBuilder &b, Location loc,
                                   int64_t rowSlot) const {
  return addConst(b, loc, rowBase(b, loc), layout.rowSlotOffset[rowSlot]);
}

Value ThreadElements::col(OpBuilder &b, Location loc, int64_t slot) const {
  return addConst(b, loc, colBase(b, loc), layout.colOffset[slot]);
}

Value mlir::fa::rowAllReduce(OpBuilder &b, Location loc,
                             const RegisterLayout &layout, Value value,
                             function_ref<Value(Value, Value)> combine) {
  for (int64_t mask : layout.rowReduceMasks) {
    auto shuffle = gpu::ShuffleOp::create(b, loc, value, mask, /*width=*/32,
                                          gpu::ShuffleMode::XOR);
    value = combine(value, shuffle.getShuffleResult());
  }
  return value;
}

namespace {

/// What a lowering below works with: the rewriter, the op's location and
/// the register layout of the tile that decides it.
struct TileRewrite {
  ConversionPatternRewriter &b;
  Location loc;
  const RegisterLayout &layout;
  const TypeConverter &converter;

  SmallVector<Value> unpack(Value tile) const { return mlir::fa::unpack(b, loc, tile); }
  Value pack(Type type, ArrayRef<Value> elements) const {
    return mlir::fa::pack(b, loc, type, elements);
  }
};

template <typename Op>
using TileLowering = LogicalResult (*)(Op, typename Op::Adaptor,
                                       const TileRewrite &);

/// The pattern of one tile op on register tiles: `layoutTile` names the
/// operand (or result) whose layout decides the lowering; an op on tiles
/// without a register layout (shared tiles) is left to the strategy's
/// patterns.
template <typename Op>
struct LayoutPattern : OpConversionPattern<Op> {
  LayoutPattern(const TypeConverter &converter, MLIRContext *ctx,
                Value (*layoutTile)(Op), TileLowering<Op> lower)
      : OpConversionPattern<Op>(converter, ctx), layoutTile(layoutTile),
        lower(lower) {}

  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<RegisterLayout> layout =
        registerLayoutOf(layoutTile(op).getType());
    if (failed(layout))
      return rewriter.notifyMatchFailure(op, "not a register tile");
    return lower(op, adaptor,
                 TileRewrite{rewriter, op.getLoc(), *layout,
                             *this->getTypeConverter()});
  }

  Value (*layoutTile)(Op);
  TileLowering<Op> lower;
};

/// The most key intervals per row a mask is tested by interval (more: by
/// its region): each costs two compares per score.
constexpr unsigned kMaxKeyIntervalsPerRow = 4;

/// Masked scores become -inf. Only tiles that cross the causal diagonal or
/// the end of the keys need it; the others skip the per-element test.
LogicalResult lowerMask(MaskOp op, MaskOp::Adaptor adaptor,
                        const TileRewrite &r) {
  ConversionPatternRewriter &b = r.b;
  Location loc = r.loc;
  auto type = cast<RankedTensorType>(op.getType());
  int64_t cols = type.getDimSize(1);
  // The tile's last key column: past the keys, or (causal) past what the
  // tile's first query row may see (col + Sq > row + Sk)?
  Value lastCol = addConst(b, loc, adaptor.getKvStart(), cols - 1);
  Value needsMask = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                          lastCol, adaptor.getKvLen());
  if (op.getMask() == MaskKind::causal)
    needsMask = arith::OrIOp::create(
        b, loc, needsMask,
        arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::ugt,
            arith::AddIOp::create(b, loc, lastCol, adaptor.getQLen()),
            arith::AddIOp::create(b, loc, adaptor.getQStart(),
                                  adaptor.getKvLen())));
  // A mask_mod: tiles it keeps whole (when the analysis can tell) skip the
  // per-element test too.
  bool maskMod = !op.getMaskMod().empty();
  std::optional<MaskFormula> formula;
  if (maskMod)
    formula = analyzeAffineMask(op.getMaskMod());
  // What the causal mask already tests (a window's right edge at the
  // diagonal) costs nothing twice.
  if (formula && op.getMask() == MaskKind::causal)
    formula = dropImpliedByCausal(*formula);
  // An interval of keys per row (a window): each score is then compared
  // with its row's first and last kept key, as the causal mask is, instead
  // of evaluating the region.
  bool rowIntervals = formula && keepsAKeyIntervalPerRow(*formula);
  // A union of such intervals (sink tokens and a window): each score is
  // compared with the first and last key of each.
  std::optional<SmallVector<MaskFormula>> keyUnion;
  if (formula)
    keyUnion = keyIntervalsPerRow(*formula, kMaxKeyIntervalsPerRow);
  if (maskMod) {
    Value partial = arith::ConstantIntOp::create(b, loc, 1, 1);
    if (formula) {
      IndexBox box = variantTileBox(b, loc, adaptor.getBatch(),
                                    adaptor.getHead(), adaptor.getQStart(),
                                    adaptor.getKvStart(), type,
                                    adaptor.getQLen(), adaptor.getKvLen());
      Value whole = buildKeepsWholeBox(b, loc, *formula, box);
      partial = arith::XOrIOp::create(
          b, loc, whole, arith::ConstantIntOp::create(b, loc, 1, 1));
    }
    // So do the tiles a block mask says it keeps whole.
    if (Value keptWhole = adaptor.getKeptWhole())
      partial = arith::AndIOp::create(
          b, loc, partial,
          arith::XOrIOp::create(b, loc, keptWhole,
                                arith::ConstantIntOp::create(b, loc, 1, 1)));
    needsMask = arith::OrIOp::create(b, loc, needsMask, partial);
  }
  Value scores = adaptor.getScores();
  auto branch = scf::IfOp::create(b, loc, scores.getType(), needsMask,
                                  /*withElseRegion=*/true);
  // Where every tile takes the branch (no tile is known whole: neither
  // the interval analysis nor a block mask's table can tell), the
  // mask_mod's loads of captured tensors may run before it
  // (fa-hoist-capture-loads), so that they do not wait for the scores.
  // Where whole tiles skip it, they stay in it: hoisted, they would load
  // ids for every tile and hold them through the products (measured: the
  // documents' block-mask forward 5-6% slower, docs/benchmarks.md (aw)).
  bool everyTilePartial = !formula && !adaptor.getKeptWhole();
  if (maskMod && everyTilePartial && readsCapturedTensors(op.getMaskMod()))
    branch->setAttr(FADialect::getHoistCaptureLoadsAttrName(),
                    b.getUnitAttr());
  // Loads indexed by the key itself without their clamps where the
  // thread's last key lies inside (fa.unchecked_key_loads): the thread's
  // key columns then share one base address. Not where the loads are
  // hoisted out of the branch (both versions' loads would run).
  SmallVector<std::pair<unsigned, unsigned>> keyDims;
  if (maskMod && !everyTilePartial &&
      op->hasAttr(FADialect::getUncheckedKeyLoadsAttrName()))
    keyDims = keyIndexedCaptureDims(op.getMaskMod());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&branch.getThenRegion().front());
  ThreadElements thread(b, loc, type);
  SmallVector<Value> values = r.unpack(scores);
  Value negInf = f32Const(b, loc, -INFINITY);
  // The masked scores, or the scores as they were where no mask is needed.
  auto yieldMasked = [&] {
    scf::YieldOp::create(b, loc, r.pack(scores.getType(), values));
    b.setInsertionPointToStart(&branch.getElseRegion().front());
    scf::YieldOp::create(b, loc, scores);
    b.replaceOp(op, branch.getResult(0));
    return success();
  };
  // A thread with fewer key columns than rows, each row held by several
  // warps (a transposed tile: 2 keys, 16 queries) tests per column: key
  // column k is visible from query row k + Sq - Sk on (causal), and not
  // at all past the keys; each element then costs one compare of its row
  // offset with its column's first visible row. (Blocked tiles with more
  // rows than columns a thread keep the per-row form: their kernels have
  // not been measured with it.)
  SmallVector<int64_t> columns;
  for (int64_t col : r.layout.colOffset)
    if (!llvm::is_contained(columns, col))
      columns.push_back(col);
  if (!maskMod && !r.layout.rowsInOneWarp &&
      int64_t(columns.size()) < r.layout.numRowSlots()) {
    Value threadFirstRow = arith::AddIOp::create(b, loc, adaptor.getQStart(),
                                                 thread.rowBase(b, loc));
    Value threadFirstCol = arith::AddIOp::create(b, loc, adaptor.getKvStart(),
                                                 thread.colBase(b, loc));
    int64_t rows = type.getDimSize(0);
    // Per column: the first visible row offset from the thread's first
    // row, clamped to [0, rows + 1] in 32 bits (rows + 1: none visible).
    SmallVector<Value> firstVisible;
    for (int64_t col : columns) {
      Value key = addConst(b, loc, threadFirstCol, col);
      Value first = indexConst(b, loc, 0);
      if (op.getMask() == MaskKind::causal) {
        // Rows below key + Sq - Sk see it (signed: may be negative).
        Value diagonal = arith::SubIOp::create(
            b, loc, arith::AddIOp::create(b, loc, key, adaptor.getQLen()),
            adaptor.getKvLen());
        first = arith::SubIOp::create(b, loc, diagonal, threadFirstRow);
        first = arith::MaxSIOp::create(b, loc, first, indexConst(b, loc, 0));
      }
      Value pastKeys = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                             key, adaptor.getKvLen());
      first = arith::SelectOp::create(b, loc, pastKeys,
                                      indexConst(b, loc, rows + 1), first);
      first =
          arith::MinSIOp::create(b, loc, first, indexConst(b, loc, rows + 1));
      firstVisible.push_back(
          arith::IndexCastOp::create(b, loc, b.getI32Type(), first));
    }
    for (int64_t slot = 0; slot < r.layout.numSlots(); ++slot) {
      int64_t column =
          llvm::find(columns, r.layout.colOffset[slot]) - columns.begin();
      Value rowOffset = arith::ConstantOp::create(
          b, loc, b.getI32IntegerAttr(int32_t(r.layout.rowOffset[slot])));
      Value hidden = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                           rowOffset, firstVisible[column]);
      values[slot] =
          arith::SelectOp::create(b, loc, hidden, negInf, values[slot]);
    }
    return yieldMasked();
  }
  // buildIsMasked's predicate, rearranged per row so that each element
  // costs one 32-bit compare with a constant: key column kvStart + colBase
  // + c (c = the slot's column offset) is visible iff
  // c <= last_r - kvStart - colBase, where last_r = Sk - 1, and with the
  // causal mask min(Sk - 1, row + Sk - Sq) (signed: rows above the first
  // visible key have last_r < 0).
  Value kvLast = addConst(b, loc, adaptor.getKvLen(), -1);
  Value threadFirstCol =
      arith::AddIOp::create(b, loc, adaptor.getKvStart(), thread.colBase(b, loc));
  // The elements whose mask_mod is evaluated in two versions (keyDims).
  struct VersionedElement {
    int64_t slot;
    Value query, key;
  };
  SmallVector<VersionedElement> versioned;
  // `value` where the mask_mod keeps its score, else -inf.
  auto maskedByRegion = [&](Value query, Value key, Value value,
                            std::optional<unsigned> uncheckedArg) -> Value {
    Value keep = inlineVariantRegion(
        b, op.getMaskMod(),
        variantRegionArgs({adaptor.getBatch(), adaptor.getHead(), query, key,
                           adaptor.getQLen(), adaptor.getKvLen()},
                          adaptor.getCaptures()),
        uncheckedArg);
    return arith::SelectOp::create(b, loc, keep, value, negInf);
  };
  for (int64_t row = 0; row < r.layout.numRowSlots(); ++row) {
    Value last = kvLast;
    Value query;
    if (op.getMask() == MaskKind::causal || maskMod)
      query = arith::AddIOp::create(b, loc, adaptor.getQStart(),
                                    thread.rowOfRowSlot(b, loc, row));
    if (op.getMask() == MaskKind::causal) {
      Value diagonal = arith::SubIOp::create(
          b, loc, arith::AddIOp::create(b, loc, query, adaptor.getKvLen()),
          adaptor.getQLen());
      last = arith::MinSIOp::create(b, loc, kvLast, diagonal);
    }
    // The row's kept keys [lo, hi] of an interval mask_mod.
    Value first;
    if (rowIntervals) {
      IndexBox rowBox = variantTileBox(
          b, loc, adaptor.getBatch(), adaptor.getHead(), query,
          adaptor.getKvStart(), type, adaptor.getQLen(), adaptor.getKvLen());
      rowBox.hi[kQueryIndexArg] = query;
      IndexBounds keys =
          buildIndexBounds(b, loc, *formula, rowBox, kKeyIndexArg);
      if (keys.hi)
        last = arith::MinSIOp::create(b, loc, last, keys.hi);
      first = keys.lo;
    }
    // An interval mask's first key, relative to the thread's first column
    // of the tile, in 32 bits from a loop-invariant part: the row's first
    // key minus the thread's column base, saturated to +-2^30 (which keeps
    // the clamp exact while Sk <= kMaxMaskModKeyLength, the runtime's limit
    // for mask_mods), minus the tile's first key. The 64-bit form stayed
    // live across the K/V loop once hoisted (two registers per row: the
    // causal window's 8-byte spill at 128 x 128 on wgmma). (The same form
    // for the last key measured worse there: 192 x 64 again.)
    auto windowColumnOffset = [&](Value key) -> Value {
      Value fromThread =
          arith::SubIOp::create(b, loc, key, thread.colBase(b, loc));
      fromThread = arith::MaxSIOp::create(b, loc, fromThread,
                                          indexConst(b, loc, -(int64_t(1) << 30)));
      fromThread = arith::MinSIOp::create(b, loc, fromThread,
                                          indexConst(b, loc, int64_t(1) << 30));
      Value narrow = arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                                fromThread);
      Value tileStart = arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                                   adaptor.getKvStart());
      Value offset = arith::SubIOp::create(b, loc, narrow, tileStart);
      offset = arith::MaxSIOp::create(
          b, loc, offset,
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(-1)));
      return arith::MinSIOp::create(
          b, loc, offset,
          arith::ConstantOp::create(b, loc,
                                    b.getI32IntegerAttr(int32_t(cols))));
    };
    // Offsets from the thread's first column, clamped to [-1, C] so that
    // they fit 32 bits.
    auto columnOffset = [&](Value key) {
      Value offset = arith::SubIOp::create(b, loc, key, threadFirstCol);
      offset = arith::MaxSIOp::create(b, loc, offset, indexConst(b, loc, -1));
      offset = arith::MinSIOp::create(b, loc, offset, indexConst(b, loc, cols));
      return arith::IndexCastOp::create(b, loc, b.getI32Type(), offset);
    };
    Value visible = columnOffset(last);
    Value firstVisible = first ? windowColumnOffset(first) : Value();
    // The row's [first, last] of each interval of a union, as offsets from
    // the thread's first column (null: unbounded on that side).
    SmallVector<std::pair<Value, Value>> intervals;
    if (keyUnion) {
      IndexBox rowBox = variantTileBox(
          b, loc, adaptor.getBatch(), adaptor.getHead(), query,
          adaptor.getKvStart(), type, adaptor.getQLen(), adaptor.getKvLen());
      rowBox.hi[kQueryIndexArg] = query;
      for (const MaskFormula &interval : *keyUnion) {
        IndexBounds keys =
            buildIndexBounds(b, loc, interval, rowBox, kKeyIndexArg);
        intervals.push_back({keys.lo ? windowColumnOffset(keys.lo) : Value(),
                             keys.hi ? columnOffset(keys.hi) : Value()});
      }
    }
    for (int64_t slot : r.layout.slotsOfRow(row)) {
      Value c = arith::ConstantOp::create(
          b, loc, b.getI32IntegerAttr(int32_t(r.layout.colOffset[slot])));
      Value hidden = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                           c, visible);
      if (firstVisible)
        hidden = arith::OrIOp::create(
            b, loc, hidden,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, c,
                                  firstVisible));
      if (keyUnion) {
        Value inOne;
        for (auto [lo, hi] : intervals) {
          Value in;
          if (lo)
            in =
                arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, c, lo);
          if (hi) {
            Value below =
                arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, c, hi);
            in = in ? arith::AndIOp::create(b, loc, in, below) : below;
          }
          if (!in) // unbounded both ways: every key
            in = arith::ConstantIntOp::create(b, loc, 1, 1);
          inOne = inOne ? arith::OrIOp::create(b, loc, inOne, in) : in;
        }
        hidden = arith::OrIOp::create(
            b, loc, hidden,
            arith::XOrIOp::create(b, loc, inOne,
                                  arith::ConstantIntOp::create(b, loc, 1, 1)));
      }
      values[slot] = arith::SelectOp::create(b, loc, hidden, negInf,
                                             values[slot]);
      if (maskMod && !rowIntervals && !keyUnion) {
        Value key = addConst(b, loc, threadFirstCol, r.layout.colOffset[slot]);
        if (!keyDims.empty()) {
          versioned.push_back({slot, query, key});
          continue;
        }
        values[slot] =
            maskedByRegion(query, key, values[slot], /*uncheckedArg=*/{});
      }
    }
  }
  if (!versioned.empty()) {
    // The thread's last key inside every dimension indexed by it: the
    // unclamped version (else the clamped one, the tail tile's).
    int64_t lastColumn = *llvm::max_element(r.layout.colOffset);
    Value lastKey = addConst(b, loc, threadFirstCol, lastColumn);
    Value inside;
    for (auto [capture, dim] : keyDims) {
      Value size = memref::DimOp::create(b, loc, adaptor.getCaptures()[capture],
                                         int64_t(dim));
      Value within = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           lastKey, size);
      inside = inside ? arith::AndIOp::create(b, loc, inside, within) : within;
    }
    SmallVector<Type> types;
    for (const VersionedElement &e : versioned)
      types.push_back(values[e.slot].getType());
    auto version = scf::IfOp::create(b, loc, types, inside,
                                     /*withElseRegion=*/true);
    for (bool unchecked : {true, false}) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(unchecked ? version.thenBlock()
                                           : version.elseBlock());
      SmallVector<Value> masked;
      for (const VersionedElement &e : versioned)
        masked.push_back(maskedByRegion(
            e.query, e.key, values[e.slot],
            unchecked ? std::optional<unsigned>(kKeyIndexArg) : std::nullopt));
      scf::YieldOp::create(b, loc, masked);
    }
    for (auto [i, e] : llvm::enumerate(versioned))
      values[e.slot] = version.getResult(i);
  }
  return yieldMasked();
}

/// A score function (a score_mod, or its derivative: (score, b, h, q_idx,
/// kv_idx, q_len, kv_len) -> f32) at each of the thread's elements of a
/// score tile: the element's raw score times `scale`, its query row and
/// key column.
template <typename Adaptor>
SmallVector<Value> evaluateAtScores(const TileRewrite &r, Type tileType,
                                    Region &function, ArrayRef<Value> raw,
                                    FloatAttr scale, Adaptor adaptor) {
  ConversionPatternRewriter &b = r.b;
  Location loc = r.loc;
  ThreadElements thread(b, loc, cast<RankedTensorType>(tileType));
  Value scaleValue = f32Const(b, loc, scale.getValueAsDouble());
  Value threadFirstCol = arith::AddIOp::create(b, loc, adaptor.getKvStart(),
                                               thread.colBase(b, loc));
  SmallVector<Value> results(raw.size());
  for (int64_t row = 0; row < r.layout.numRowSlots(); ++row) {
    Value query = arith::AddIOp::create(b, loc, adaptor.getQStart(),
                                        thread.rowOfRowSlot(b, loc, row));
    for (int64_t slot : r.layout.slotsOfRow(row)) {
      Value key = addConst(b, loc, threadFirstCol, r.layout.colOffset[slot]);
      Value score = arith::MulFOp::create(b, loc, raw[slot], scaleValue);
      results[slot] = inlineVariantRegion(
          b, function,
          variantRegionArgs({score, adaptor.getBatch(), adaptor.getHead(),
                             query, key, adaptor.getQLen(),
                             adaptor.getKvLen()},
                            adaptor.getCaptures()));
    }
  }
  return results;
}

/// Each score through the score_mod region, with its row and column.
LogicalResult lowerScoreMod(ScoreModOp op, ScoreModOp::Adaptor adaptor,
                            const TileRewrite &r) {
  SmallVector<Value> values =
      evaluateAtScores(r, op.getType(), op.getScoreMod(),
                       r.unpack(adaptor.getScores()), op.getScaleAttr(),
                       adaptor);
  r.b.replaceOp(op, r.pack(adaptor.getScores().getType(), values));
  return success();
}

/// dS times the score_mod's derivative at each element's scaled raw score
/// (with its row and column); a zero dS (masked, padded) stays zero.
LogicalResult lowerScoreModGrad(ScoreModGradOp op,
                                ScoreModGradOp::Adaptor adaptor,
                                const TileRewrite &r) {
  SmallVector<Value> derivatives =
      evaluateAtScores(r, op.getType(), op.getDerivative(),
                       r.unpack(adaptor.getScores()), op.getScaleAttr(),
                       adaptor);
  SmallVector<Value> grads = r.unpack(adaptor.getGrad());
  Value zero = f32Const(r.b, r.loc, 0.0);
  for (auto [grad, derivative] : llvm::zip(grads, derivatives)) {
    Value chained = arith::MulFOp::create(r.b, r.loc, grad, derivative);
    Value isZero = arith::CmpFOp::create(r.b, r.loc, arith::CmpFPredicate::OEQ,
                                         grad, zero);
    grad = arith::SelectOp::create(r.b, r.loc, isZero, zero, chained);
  }
  r.b.replaceOp(op, r.pack(adaptor.getGrad().getType(), grads));
  return success();
}

/// The online-softmax step per row (buildOnlineSoftmaxRow: base 2, the
/// scale folded into one FMA): row max and row sum over the thread's
/// elements of the row, then over the lanes that share it.
LogicalResult lowerOnlineSoftmax(OnlineSoftmaxOp op,
                                 OnlineSoftmaxOp::Adaptor adaptor,
                                 const TileRewrite &r) {
  if (!r.layout.rowsInOneWarp)
    return op.emitOpError("the row reductions of the online softmax stay "
                          "within a warp: the scores' layout ")
           << cast<RankedTensorType>(op.getScores().getType()).getEncoding()
           << " spreads a row over warps";
  SmallVector<Value> s = r.unpack(adaptor.getScores());
  SmallVector<Value> m = r.unpack(adaptor.getRunningMax());
  SmallVector<Value> l = r.unpack(adaptor.getRunningSum());
  SoftmaxConstants constants(r.b, r.loc, op.getScale().convertToDouble(),
                             adaptor.getScaleFactor());
  double probsScale =
      op.getProbsScaleAttr() ? op.getProbsScaleAttr().getValueAsDouble() : 1.0;
  int64_t exp2OnFmaEvery = 0;
  if (auto every =
          op->getAttrOfType<IntegerAttr>(FADialect::getExp2OnFmaAttrName()))
    exp2OnFmaEvery = every.getInt();
  auto acrossRow = [&](Value value, function_ref<Value(Value, Value)> combine) {
    return rowAllReduce(r.b, r.loc, r.layout, value, combine);
  };
  SmallVector<Value> newMax(m.size()), newSum(m.size()), alpha(m.size());
  SmallVector<Value> probs(s.size());
  for (int64_t row = 0; row < r.layout.numRowSlots(); ++row) {
    SmallVector<int64_t> slots = r.layout.slotsOfRow(row);
    SmallVector<Value> rowScores;
    for (int64_t slot : slots)
      rowScores.push_back(s[slot]);
    OnlineSoftmaxRow step = buildOnlineSoftmaxRow(
        r.b, r.loc, constants, rowScores, m[row], l[row], acrossRow, probsScale,
        exp2OnFmaEvery, op->hasAttr(FADialect::getSkipUnitFactorsAttrName()));
    for (auto [slot, p] : llvm::zip(slots, step.probs))
      probs[slot] = p;
    newMax[row] = step.newMax;
    newSum[row] = step.newSum;
    alpha[row] = step.alpha;
  }
  Type rowType = adaptor.getRunningMax().getType();
  r.b.replaceOp(op, {r.pack(rowType, newMax),
                     r.pack(adaptor.getScores().getType(), probs),
                     r.pack(rowType, newSum), r.pack(rowType, alpha)});
  return success();
}

/// Each accumulator element times the factor of its row. Marked
/// fa.skip_unit_factors, a warp multiplies only where one of its threads
/// has a factor other than 1: once the running maxima settle, most K/V
/// tiles move none of a warp's rows, and the products are 1 x acc.
LogicalResult lowerRescale(RescaleOp op, RescaleOp::Adaptor adaptor,
                           const TileRewrite &r) {
  ConversionPatternRewriter &b = r.b;
  Location loc = r.loc;
  Value accTile = adaptor.getAcc();
  SmallVector<Value> factor = r.unpack(adaptor.getFactor());
  auto multiplied = [&]() {
    SmallVector<Value> acc = r.unpack(accTile);
    for (int64_t slot = 0; slot < r.layout.numSlots(); ++slot)
      acc[slot] = arith::MulFOp::create(b, loc, acc[slot],
                                        factor[r.layout.rowSlotOf[slot]]);
    return r.pack(accTile.getType(), acc);
  };
  if (!op->hasAttr(FADialect::getSkipUnitFactorsAttrName())) {
    b.replaceOp(op, multiplied());
    return success();
  }
  // Not 1 (NaN included): the thread's rows need the product.
  Value one = f32Const(b, loc, 1.0);
  Value moved = arith::ConstantIntOp::create(b, loc, 0, 1);
  for (Value rowFactor : factor)
    moved = arith::OrIOp::create(
        b, loc, moved,
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, rowFactor,
                              one));
  Value anyMoved =
      NVVM::VoteSyncOp::create(b, loc, b.getI1Type(), i32Const(b, loc, -1),
                               moved, NVVM::VoteSyncKind::any);
  auto branch = scf::IfOp::create(b, loc, accTile.getType(), anyMoved,
                                  /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&branch.getThenRegion().front());
  scf::YieldOp::create(b, loc, multiplied());
  b.setInsertionPointToStart(&branch.getElseRegion().front());
  scf::YieldOp::create(b, loc, accTile);
  b.replaceOp(op, branch.getResult(0));
  return success();
}

/// O = acc * (1 / l), LSE = m + log2(l) ln 2; rows with l = 0 give 0, -inf.
LogicalResult lowerFinalize(FinalizeOp op, FinalizeOp::Adaptor adaptor,
                            const TileRewrite &r) {
  ConversionPatternRewriter &b = r.b;
  Location loc = r.loc;
  SmallVector<Value> acc = r.unpack(adaptor.getAcc());
  SmallVector<Value> m = r.unpack(adaptor.getRunningMax());
  SmallVector<Value> l = r.unpack(adaptor.getRunningSum());
  Value zero = f32Const(b, loc, 0.0);
  Value one = f32Const(b, loc, 1.0);
  Value ln2 = f32Const(b, loc, M_LN2);
  Value negInf = f32Const(b, loc, -INFINITY);
  // O's factor (FP8's V descale over the probabilities' scale) joins the
  // per-row 1 / l.
  Value numerator = one;
  if (Value outputScale = adaptor.getOutputScale())
    numerator = outputScale;
  SmallVector<Value> lse(m.size());
  for (int64_t row = 0; row < r.layout.numRowSlots(); ++row) {
    Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                        l[row], zero);
    Value inv = arith::SelectOp::create(
        b, loc, empty, zero, arith::DivFOp::create(b, loc, numerator, l[row]));
    for (int64_t slot : r.layout.slotsOfRow(row))
      acc[slot] = arith::MulFOp::create(b, loc, acc[slot], inv);
    Value logSum = arith::MulFOp::create(
        b, loc, math::Log2Op::create(b, loc, l[row]), ln2);
    Value value = arith::AddFOp::create(b, loc, m[row], logSum);
    lse[row] = arith::SelectOp::create(b, loc, empty, negInf, value);
  }
  b.replaceOp(op, {r.pack(adaptor.getAcc().getType(), acc),
                   r.pack(adaptor.getRunningMax().getType(), lse)});
  return success();
}

/// exp(x - base), a -inf base read as 0 (the online softmax's rule:
/// exp(-inf - -inf) is 0, never NaN): the backward's P with scale 1.
static Value expAbove(OpBuilder &b, Location loc, const SoftmaxConstants &c,
                      Value x, Value base) {
  return recomputedProb(b, loc, c, x, probsBaseLog2(b, loc, c, base));
}

/// One row's join of `sink`: m_new = max(m, sink), alpha = exp(m - m_new),
/// l_new = alpha l + exp(sink - m_new) (results in that order).
static std::tuple<Value, Value, Value> joinSinkRow(OpBuilder &b, Location loc,
                                                   const SoftmaxConstants &c,
                                                   Value m, Value l,
                                                   Value sink) {
  Value newMax = arith::MaximumFOp::create(b, loc, m, sink);
  Value alpha = expAbove(b, loc, c, m, newMax);
  Value newSum =
      math::FmaOp::create(b, loc, alpha, l, expAbove(b, loc, c, sink, newMax));
  return {newMax, newSum, alpha};
}

/// Per row: joinSinkRow of the head's sink.
LogicalResult lowerJoinSink(JoinSinkOp op, JoinSinkOp::Adaptor adaptor,
                            const TileRewrite &r) {
  SmallVector<Value> m = r.unpack(adaptor.getRunningMax());
  SmallVector<Value> l = r.unpack(adaptor.getRunningSum());
  SoftmaxConstants c(r.b, r.loc, 1.0);
  Value sink = adaptor.getSink();
  SmallVector<Value> newMax(m.size()), newSum(m.size()), alpha(m.size());
  for (size_t row = 0; row < m.size(); ++row)
    std::tie(newMax[row], newSum[row], alpha[row]) =
        joinSinkRow(r.b, r.loc, c, m[row], l[row], sink);
  Type rowType = adaptor.getRunningMax().getType();
  r.b.replaceOp(op, {r.pack(rowType, newMax), r.pack(rowType, newSum),
                     r.pack(rowType, alpha)});
  return success();
}

/// fa.join_sink with row r's sink sinks[head * rows + row_start + r]: each
/// thread reads the sinks of the rows it holds (-inf past `rows`; the read
/// then stays at the head's first).
LogicalResult lowerJoinRowSinks(JoinRowSinksOp op,
                                JoinRowSinksOp::Adaptor adaptor,
                                const TileRewrite &r) {
  ConversionPatternRewriter &b = r.b;
  Location loc = r.loc;
  SmallVector<Value> m = r.unpack(adaptor.getRunningMax());
  SmallVector<Value> l = r.unpack(adaptor.getRunningSum());
  SoftmaxConstants c(b, loc, 1.0);
  ThreadElements thread(b, loc,
                        cast<RankedTensorType>(op.getRunningMax().getType()));
  Value headFirst =
      arith::MulIOp::create(b, loc, adaptor.getHead(), adaptor.getRows());
  SmallVector<Value> newMax(m.size()), newSum(m.size()), alpha(m.size());
  for (int64_t rowSlot = 0; rowSlot < r.layout.numRowSlots(); ++rowSlot) {
    Value row = arith::AddIOp::create(b, loc, adaptor.getRowStart(),
                                      thread.rowOfRowSlot(b, loc, rowSlot));
    Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, row,
                                         adaptor.getRows());
    Value index = arith::SelectOp::create(
        b, loc, inside, arith::AddIOp::create(b, loc, headFirst, row),
        headFirst);
    Value loaded =
        memref::LoadOp::create(b, loc, adaptor.getSinks(), ValueRange{index});
    Value sink = arith::SelectOp::create(b, loc, inside, loaded, c.negInf);
    for (int64_t slot : r.layout.slotsOfRow(rowSlot))
      std::tie(newMax[slot], newSum[slot], alpha[slot]) =
          joinSinkRow(b, loc, c, m[slot], l[slot], sink);
  }
  Type rowType = adaptor.getRunningMax().getType();
  b.replaceOp(op, {r.pack(rowType, newMax), r.pack(rowType, newSum),
                   r.pack(rowType, alpha)});
  return success();
}

/// Per row: from the larger log-sum-exp, the two results' weights
/// exp(lse - top) / s and exp(partial_lse - top) / s, s their sum; lse_new =
/// top + log(s) (-inf and weights 0 where neither saw a key).
LogicalResult lowerMergePartial(MergePartialOp op,
                                MergePartialOp::Adaptor adaptor,
                                const TileRewrite &r) {
  ConversionPatternRewriter &b = r.b;
  Location loc = r.loc;
  SmallVector<Value> out = r.unpack(adaptor.getOutput());
  SmallVector<Value> partOut = r.unpack(adaptor.getPartialOutput());
  SmallVector<Value> lse = r.unpack(adaptor.getLse());
  SmallVector<Value> partLse = r.unpack(adaptor.getPartialLse());
  SoftmaxConstants c(b, loc, 1.0);
  Value one = f32Const(b, loc, 1.0);
  Value ln2 = f32Const(b, loc, M_LN2);
  SmallVector<Value> newLse(lse.size());
  for (int64_t row = 0; row < r.layout.numRowSlots(); ++row) {
    Value top = arith::MaximumFOp::create(b, loc, lse[row], partLse[row]);
    Value own = expAbove(b, loc, c, lse[row], top);
    Value other = expAbove(b, loc, c, partLse[row], top);
    Value sum = arith::AddFOp::create(b, loc, own, other);
    Value empty =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, sum, c.zero);
    Value inv = arith::SelectOp::create(
        b, loc, empty, c.zero, arith::DivFOp::create(b, loc, one, sum));
    Value ownWeight = arith::MulFOp::create(b, loc, own, inv);
    Value otherWeight = arith::MulFOp::create(b, loc, other, inv);
    for (int64_t slot : r.layout.slotsOfRow(row))
      out[slot] = math::FmaOp::create(
          b, loc, out[slot], ownWeight,
          arith::MulFOp::create(b, loc, partOut[slot], otherWeight));
    Value logSum =
        arith::MulFOp::create(b, loc, math::Log2Op::create(b, loc, sum), ln2);
    newLse[row] = arith::SelectOp::create(
        b, loc, empty, c.negInf, arith::AddFOp::create(b, loc, top, logSum));
  }
  b.replaceOp(op, {r.pack(adaptor.getOutput().getType(), out),
                   r.pack(adaptor.getLse().getType(), newLse)});
  return success();
}

/// Per row: -exp(sink - lse) D, 0 where D is 0 (padding, zero dO) or the
/// row has neither keys nor a sink (lse = -inf).
LogicalResult lowerSinkGrad(SinkGradOp op, SinkGradOp::Adaptor adaptor,
                            const TileRewrite &r) {
  SmallVector<Value> lse = r.unpack(adaptor.getLse());
  SmallVector<Value> delta = r.unpack(adaptor.getDelta());
  SoftmaxConstants c(r.b, r.loc, 1.0);
  SmallVector<Value> shares(lse.size());
  for (size_t row = 0; row < lse.size(); ++row) {
    Value prob = expAbove(r.b, r.loc, c, adaptor.getSink(), lse[row]);
    Value share = arith::NegFOp::create(
        r.b, r.loc, arith::MulFOp::create(r.b, r.loc, prob, delta[row]));
    Value none = arith::OrIOp::create(
        r.b, r.loc,
        arith::CmpFOp::create(r.b, r.loc, arith::CmpFPredicate::OEQ,
                              delta[row], c.zero),
        arith::CmpFOp::create(r.b, r.loc, arith::CmpFPredicate::OEQ, lse[row],
                              c.negInf));
    shares[row] = arith::SelectOp::create(r.b, r.loc, none, c.zero, share);
  }
  r.b.replaceOp(op, r.pack(adaptor.getLse().getType(), shares));
  return success();
}

/// The sum of a row tile's elements in the calling thread's warp, in every
/// lane: each thread sums the rows it holds the first copy of, then the
/// lanes (butterfly). The same order in every run.
static Value warpSumOfRows(const TileRewrite &r, Value tile, Value lowered) {
  ConversionPatternRewriter &b = r.b;
  Location loc = r.loc;
  ThreadElements thread(b, loc, cast<RankedTensorType>(tile.getType()));
  SmallVector<Value> values = r.unpack(lowered);
  Value sum = values.front();
  for (Value v : ArrayRef<Value>(values).drop_front())
    sum = arith::AddFOp::create(b, loc, sum, v);
  Value firstCopy = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          thread.colBase(b, loc),
                                          indexConst(b, loc, 0));
  sum = arith::SelectOp::create(b, loc, firstCopy, sum, f32Const(b, loc, 0.0));
  for (int64_t mask = 16; mask >= 1; mask /= 2) {
    auto shuffle = gpu::ShuffleOp::create(b, loc, sum, mask, /*width=*/32,
                                          gpu::ShuffleMode::XOR);
    sum = arith::AddFOp::create(b, loc, sum, shuffle.getShuffleResult());
  }
  return sum;
}

/// The tile's sum added to dest[index]: lane 0 of each warp adds the
/// warp's sum atomically: one add per warp, whatever the layout.
LogicalResult lowerAccumulateTotal(AccumulateTotalOp op,
                                   AccumulateTotalOp::Adaptor adaptor,
                                   const TileRewrite &r) {
  ConversionPatternRewriter &b = r.b;
  Location loc = r.loc;
  Value sum = warpSumOfRows(r, op.getTile(), adaptor.getTile());
  auto laneZero = scf::IfOp::create(b, loc, isFirstOfThreadGroup(b, loc, 32));
  OpBuilder in = OpBuilder::atBlockBegin(&laneZero.getThenRegion().front());
  in.setInsertionPoint(laneZero.getThenRegion().front().getTerminator());
  memref::AtomicRMWOp::create(in, loc, arith::AtomicRMWKind::addf, sum,
                              adaptor.getDest(), ValueRange{adaptor.getIndex()});
  b.eraseOp(op);
  return success();
}

/// The kernel's static shared array of one f32 per warp (a kernel has at
/// most 32), declared once per module.
static Value warpSumsBuffer(ConversionPatternRewriter &b, Location loc,
                            Operation *user) {
  static constexpr StringLiteral kName = "fa_warp_sums";
  auto type = MemRefType::get({32}, b.getF32Type(), MemRefLayoutAttrInterface(),
                              workgroupSpace(b.getContext()));
  auto module = user->getParentOfType<gpu::GPUModuleOp>();
  if (!SymbolTable::lookupSymbolIn(module, kName)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    memref::GlobalOp::create(b, loc, kName, b.getStringAttr("private"), type,
                             /*initial_value=*/b.getUnitAttr(),
                             /*constant=*/false,
                             /*alignment=*/b.getI64IntegerAttr(16));
  }
  return memref::GetGlobalOp::create(b, loc, type, kName);
}

/// The tile's total in every thread: each warp's sum (warpSumOfRows) goes
/// to shared memory, then every thread adds the warps' sums in warp order.
/// Two barriers of the whole block: after the stores, and before a later
/// total may store again.
LogicalResult lowerTileTotal(TileTotalOp op, TileTotalOp::Adaptor adaptor,
                             const TileRewrite &r) {
  ConversionPatternRewriter &b = r.b;
  Location loc = r.loc;
  auto kernel = op->getParentOfType<gpu::GPUFuncOp>();
  std::optional<ArrayRef<int32_t>> blockSize =
      kernel ? kernel.getKnownBlockSize() : std::nullopt;
  if (!blockSize || (*blockSize)[0] % 32 != 0 || (*blockSize)[0] > 1024)
    return op.emitOpError("needs a kernel of whole warps with a known block "
                          "size (at most 1024 threads)");
  // A warp-specialized kernel's producer warps never reach the barriers.
  auto launch =
      kernel->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
  if (launch && launch.getProducerWarps() > 0)
    return op.emitOpError("cannot synchronize a warp-specialized kernel's "
                          "threads (its producer warps do not reach it)");
  int64_t warps = (*blockSize)[0] / 32;
  Value sum = warpSumOfRows(r, op.getTile(), adaptor.getTile());
  Value sums = warpSumsBuffer(b, loc, op);
  Value warp = arith::DivUIOp::create(
      b, loc, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x),
      indexConst(b, loc, 32));
  auto laneZero = scf::IfOp::create(b, loc, isFirstOfThreadGroup(b, loc, 32));
  OpBuilder in = OpBuilder::atBlockBegin(&laneZero.getThenRegion().front());
  in.setInsertionPoint(laneZero.getThenRegion().front().getTerminator());
  memref::StoreOp::create(in, loc, sum, sums, ValueRange{warp});
  gpu::BarrierOp::create(b, loc);
  Value total =
      memref::LoadOp::create(b, loc, sums, ValueRange{indexConst(b, loc, 0)});
  for (int64_t w = 1; w < warps; ++w)
    total = arith::AddFOp::create(
        b, loc, total,
        memref::LoadOp::create(b, loc, sums,
                               ValueRange{indexConst(b, loc, w)}));
  gpu::BarrierOp::create(b, loc);
  b.replaceOp(op, total);
  return success();
}

/// P = exp(scale * s - lse) per element, with its row's LSE
/// (recomputedProb).
LogicalResult lowerRecomputeProbs(RecomputeProbsOp op,
                                  RecomputeProbsOp::Adaptor adaptor,
                                  const TileRewrite &r) {
  SmallVector<Value> s = r.unpack(adaptor.getScores());
  SmallVector<Value> lse = r.unpack(adaptor.getLse());
  SoftmaxConstants c(r.b, r.loc, op.getScale().convertToDouble());
  for (int64_t row = 0; row < r.layout.numRowSlots(); ++row) {
    Value baseLog2 = probsBaseLog2(r.b, r.loc, c, lse[row]);
    for (int64_t slot : r.layout.slotsOfRow(row))
      s[slot] = recomputedProb(r.b, r.loc, c, s[slot], baseLog2);
  }
  r.b.replaceOp(op, r.pack(adaptor.getScores().getType(), s));
  return success();
}

/// dS = scale * P * (dP - D) per element, with its row's D.
LogicalResult lowerSoftmaxGrad(SoftmaxGradOp op,
                               SoftmaxGradOp::Adaptor adaptor,
                               const TileRewrite &r) {
  SmallVector<Value> p = r.unpack(adaptor.getProbs());
  SmallVector<Value> dp = r.unpack(adaptor.getGradProbs());
  SmallVector<Value> delta = r.unpack(adaptor.getDelta());
  Value scale = f32Const(r.b, r.loc, op.getScale().convertToDouble());
  for (int64_t slot = 0; slot < r.layout.numSlots(); ++slot)
    p[slot] = scoreGradient(r.b, r.loc, p[slot], dp[slot],
                            delta[r.layout.rowSlotOf[slot]], scale);
  r.b.replaceOp(op, r.pack(adaptor.getProbs().getType(), p));
  return success();
}

/// Row slots a thread from which a 1-d register load tests the tile once
/// (is it wholly before the limit?) rather than each row.
constexpr int64_t kUncheckedRowLoadsFrom = 16;

/// global -> registers: each thread loads the elements it holds, zero past
/// the end of the rows (LSE and D of the backward; tiles that only feed
/// element-wise ops).
LogicalResult lowerLoadToRegisters(LoadTileOp op, LoadTileOp::Adaptor adaptor,
                                   const TileRewrite &r) {
  ConversionPatternRewriter &b = r.b;
  Location loc = r.loc;
  auto type = cast<RankedTensorType>(op.getType());
  ThreadElements thread(b, loc, type);
  Value source = adaptor.getSource();
  Value rowLimit = buildRowLimit(b, loc, source, op.getSequenceEnd());
  Value firstRow =
      buildSourceRow(b, loc, op.getSequenceFirst(), adaptor.getRow());
  Type vectorType = r.converter.convertType(type);
  // The thread's elements, loaded at `at`: zero past the limit
  // (`checked`), or as they are (a tile wholly before it).
  auto loadAll = [&](OpBuilder &at, bool checked) {
    SmallVector<Value> values(r.layout.numSlots());
    for (int64_t row = 0; row < r.layout.numRowSlots(); ++row) {
      Value index = arith::AddIOp::create(at, loc, firstRow,
                                          thread.rowOfRowSlot(at, loc, row));
      for (int64_t slot : r.layout.slotsOfRow(row)) {
        SmallVector<Value> trailing;
        if (r.layout.is2d())
          trailing.push_back(thread.col(at, loc, slot));
        if (checked) {
          values[slot] = buildZeroPaddedLoad(
              at, loc, source, adaptor.getPages(), adaptor.getBatch(),
              adaptor.getHead(), index, rowLimit, trailing,
              bool(op.getSequenceEnd()));
          continue;
        }
        SmallVector<Value> indices = {adaptor.getBatch(), adaptor.getHead(),
                                      index};
        llvm::append_range(indices, trailing);
        values[slot] = memref::LoadOp::create(at, loc, source, indices);
      }
    }
    return mlir::fa::pack(at, loc, vectorType, values);
  };
  // Many rows a thread, each held by several warps (a transposed tile's
  // row values: 16 at block-m 64): a tile wholly before the limit loads
  // them without the per-row test and clamp (7 instructions a row, 1 once
  // the addresses fold); the tail tile keeps them. (Blocked row vectors of
  // as many rows, one warp's each, keep the per-row form: their kernels
  // have not been measured with it.)
  if (!adaptor.getPages() && !r.layout.is2d() && !r.layout.rowsInOneWarp &&
      r.layout.numRowSlots() >= kUncheckedRowLoadsFrom) {
    Value tileEnd = addConst(b, loc, firstRow, type.getDimSize(0));
    Value whole = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule,
                                        tileEnd, rowLimit);
    auto branch = scf::IfOp::create(b, loc, vectorType, whole,
                                    /*withElseRegion=*/true);
    OpBuilder inside = OpBuilder::atBlockBegin(&branch.getThenRegion().front());
    scf::YieldOp::create(inside, loc, loadAll(inside, /*checked=*/false));
    inside.setInsertionPointToStart(&branch.getElseRegion().front());
    scf::YieldOp::create(inside, loc, loadAll(inside, /*checked=*/true));
    b.replaceOp(op, branch.getResult(0));
    return success();
  }
  b.replaceOp(op, loadAll(b, /*checked=*/true));
  return success();
}

/// A row vector in shared memory -> registers (the wgmma backward's staged
/// LSE and D): each thread reads the rows it holds, once a row slot.
LogicalResult lowerSharedRowsToRegisters(ConvertLayoutOp op,
                                         ConvertLayoutOp::Adaptor adaptor,
                                         const TileRewrite &r) {
  auto source = cast<RankedTensorType>(op.getSource().getType());
  if (source.getRank() != 1 || !isa<SharedEncodingAttr>(source.getEncoding()))
    return r.b.notifyMatchFailure(op, "not a shared row vector");
  ThreadElements thread(r.b, r.loc, cast<RankedTensorType>(op.getType()));
  SmallVector<Value> values(r.layout.numSlots());
  for (int64_t row = 0; row < r.layout.numRowSlots(); ++row) {
    Value value = memref::LoadOp::create(
        r.b, r.loc, adaptor.getSource(),
        ValueRange{thread.rowOfRowSlot(r.b, r.loc, row)});
    for (int64_t slot : r.layout.slotsOfRow(row))
      values[slot] = value;
  }
  r.b.replaceOp(op, r.pack(r.converter.convertType(op.getType()), values));
  return success();
}

/// A transpose is the same registers read the other way (the verifier
/// checked the layouts): the thread's elements stay where they are.
struct TransposeLowering : OpConversionPattern<TransposeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TransposeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (failed(registerLayoutOf(op.getSource().getType())))
      return rewriter.notifyMatchFailure(op, "not a register tile");
    rewriter.replaceOp(op, adaptor.getSource());
    return success();
  }
};

} // namespace

void mlir::fa::populateTileOpPatterns(const TypeConverter &typeConverter,
                                      RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<TransposeLowering>(typeConverter, ctx);
  patterns.add<LayoutPattern<MaskOp>>(
      typeConverter, ctx, [](MaskOp op) -> Value { return op.getScores(); }, lowerMask);
  patterns.add<LayoutPattern<ScoreModOp>>(
      typeConverter, ctx, [](ScoreModOp op) -> Value { return op.getScores(); },
      lowerScoreMod);
  patterns.add<LayoutPattern<ScoreModGradOp>>(
      typeConverter, ctx, [](ScoreModGradOp op) -> Value { return op.getGrad(); },
      lowerScoreModGrad);
  patterns.add<LayoutPattern<OnlineSoftmaxOp>>(
      typeConverter, ctx, [](OnlineSoftmaxOp op) -> Value { return op.getScores(); },
      lowerOnlineSoftmax);
  patterns.add<LayoutPattern<RescaleOp>>(
      typeConverter, ctx, [](RescaleOp op) -> Value { return op.getAcc(); },
      lowerRescale);
  patterns.add<LayoutPattern<FinalizeOp>>(
      typeConverter, ctx, [](FinalizeOp op) -> Value { return op.getAcc(); },
      lowerFinalize);
  patterns.add<LayoutPattern<JoinSinkOp>>(
      typeConverter, ctx, [](JoinSinkOp op) -> Value { return op.getRunningMax(); },
      lowerJoinSink);
  patterns.add<LayoutPattern<JoinRowSinksOp>>(
      typeConverter, ctx,
      [](JoinRowSinksOp op) -> Value { return op.getRunningMax(); },
      lowerJoinRowSinks);
  patterns.add<LayoutPattern<MergePartialOp>>(
      typeConverter, ctx, [](MergePartialOp op) -> Value { return op.getOutput(); },
      lowerMergePartial);
  patterns.add<LayoutPattern<SinkGradOp>>(
      typeConverter, ctx, [](SinkGradOp op) -> Value { return op.getLse(); },
      lowerSinkGrad);
  patterns.add<LayoutPattern<AccumulateTotalOp>>(
      typeConverter, ctx, [](AccumulateTotalOp op) -> Value { return op.getTile(); },
      lowerAccumulateTotal);
  patterns.add<LayoutPattern<TileTotalOp>>(
      typeConverter, ctx, [](TileTotalOp op) -> Value { return op.getTile(); },
      lowerTileTotal);
  patterns.add<LayoutPattern<RecomputeProbsOp>>(
      typeConverter, ctx, [](RecomputeProbsOp op) -> Value { return op.getScores(); },
      lowerRecomputeProbs);
  patterns.add<LayoutPattern<SoftmaxGradOp>>(
      typeConverter, ctx, [](SoftmaxGradOp op) -> Value { return op.getProbs(); },
      lowerSoftmaxGrad);
  patterns.add<LayoutPattern<LoadTileOp>>(
      typeConverter, ctx, [](LoadTileOp op) -> Value { return op.getResult(); },
      lowerLoadToRegisters);
  patterns.add<LayoutPattern<ConvertLayoutOp>>(
      typeConverter, ctx,
      [](ConvertLayoutOp op) -> Value { return op.getResult(); },
      lowerSharedRowsToRegisters);
}
