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
#include "compiler/TileArithmetic.h"
#include "dialect/FAOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

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

SmallVector<Value, 2>
mlir::fa::buildThreadIdTerms(OpBuilder &b, Location loc, Value threadId,
                             ArrayRef<ThreadIdTerm> terms) {
  SmallVector<Value, 2> values;
  buildTerms(b, loc, threadId, {terms}, {&values});
  return values;
}

Value mlir::fa::sumIndices(OpBuilder &b, Location loc, ArrayRef<Value> values) {
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
  ArrayRef<ThreadIdTerm> colBase;
  if (layout.is2d())
    colBase = layout.colBase;
  buildTerms(b, loc, tid, {layout.rowBase, colBase}, {&rowTerms, &colTerms});
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

/// A pattern for `Op` whose operand `Operand` (the tile that decides the
/// layout) has a register layout.
template <typename Op>
struct LayoutPattern : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  using OpAdaptor = typename Op::Adaptor;

  /// The register layout of `tile`, or a match failure.
  static FailureOr<RegisterLayout> layoutOf(Value tile,
                                            ConversionPatternRewriter &rewriter,
                                            Op op) {
    FailureOr<RegisterLayout> layout = registerLayoutOf(tile.getType());
    if (failed(layout))
      return rewriter.notifyMatchFailure(op, "not a register tile");
    return layout;
  }
};

/// Masked scores become -inf. Only tiles that cross the causal diagonal or
/// the end of the keys need it; the others skip the per-element test.
struct MaskLowering : LayoutPattern<MaskOp> {
  using LayoutPattern::LayoutPattern;
  LogicalResult
  matchAndRewrite(MaskOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (failed(layoutOf(op.getScores(), rewriter, op)))
      return failure();
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    int64_t cols = type.getDimSize(1);
    // The tile's last key column: past the keys, or (causal) past what the
    // tile's first query row may see (col + Sq > row + Sk)?
    Value lastCol = addConst(rewriter, loc, adaptor.getKvStart(), cols - 1);
    Value needsMask = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::uge, lastCol, adaptor.getKvLen());
    if (op.getMask() == MaskKind::causal)
      needsMask = arith::OrIOp::create(
          rewriter, loc, needsMask,
          arith::CmpIOp::create(
              rewriter, loc, arith::CmpIPredicate::ugt,
              arith::AddIOp::create(rewriter, loc, lastCol, adaptor.getQLen()),
              arith::AddIOp::create(rewriter, loc, adaptor.getQStart(),
                                    adaptor.getKvLen())));
    Value scores = adaptor.getScores();
    auto branch = scf::IfOp::create(rewriter, loc, scores.getType(), needsMask,
                                    /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(&branch.getThenRegion().front());
      ThreadElements thread(rewriter, loc, type);
      const RegisterLayout &layout = thread.layout;
      SmallVector<Value> values = unpack(rewriter, loc, scores);
      Value negInf = f32Const(rewriter, loc, -INFINITY);
      // buildIsMasked's predicate, rearranged per row so that each element
      // costs one 32-bit compare with a constant: key column kvStart +
      // colBase + c (c = the slot's column offset) is visible iff
      // c <= last_r - kvStart - colBase, where last_r = Sk - 1, and with
      // the causal mask min(Sk - 1, row + Sk - Sq) (signed: rows above the
      // first visible key have last_r < 0).
      Value kvLast = addConst(rewriter, loc, adaptor.getKvLen(), -1);
      Value threadFirstCol =
          arith::AddIOp::create(rewriter, loc, adaptor.getKvStart(),
                                thread.colBase(rewriter, loc));
      for (int64_t r = 0; r < layout.numRowSlots(); ++r) {
        Value last = kvLast;
        if (op.getMask() == MaskKind::causal) {
          Value row = arith::AddIOp::create(rewriter, loc, adaptor.getQStart(),
                                            thread.rowOfRowSlot(rewriter, loc, r));
          Value diagonal = arith::SubIOp::create(
              rewriter, loc,
              arith::AddIOp::create(rewriter, loc, row, adaptor.getKvLen()),
              adaptor.getQLen());
          last = arith::MinSIOp::create(rewriter, loc, kvLast, diagonal);
        }
        // Clamped to [-1, C] so that it fits 32 bits.
        Value visible =
            arith::SubIOp::create(rewriter, loc, last, threadFirstCol);
        visible = arith::MaxSIOp::create(rewriter, loc, visible,
                                         indexConst(rewriter, loc, -1));
        visible = arith::MinSIOp::create(rewriter, loc, visible,
                                         indexConst(rewriter, loc, cols));
        visible = arith::IndexCastOp::create(rewriter, loc,
                                             rewriter.getI32Type(), visible);
        for (int64_t slot : layout.slotsOfRow(r)) {
          Value c = arith::ConstantOp::create(
              rewriter, loc,
              rewriter.getI32IntegerAttr(int32_t(layout.colOffset[slot])));
          Value hidden = arith::CmpIOp::create(
              rewriter, loc, arith::CmpIPredicate::sgt, c, visible);
          Value &v = values[slot];
          v = arith::SelectOp::create(rewriter, loc, hidden, negInf, v);
        }
      }
      scf::YieldOp::create(rewriter, loc,
                           pack(rewriter, loc, scores.getType(), values));
      rewriter.setInsertionPointToStart(&branch.getElseRegion().front());
      scf::YieldOp::create(rewriter, loc, scores);
    }
    rewriter.replaceOp(op, branch.getResult(0));
    return success();
  }
};

/// The online-softmax step per row (buildOnlineSoftmaxRow: base 2, the
/// scale folded into one FMA): row max and row sum over the thread's
/// elements of the row, then over the lanes that share it.
struct OnlineSoftmaxLowering : LayoutPattern<OnlineSoftmaxOp> {
  using LayoutPattern::LayoutPattern;
  LogicalResult
  matchAndRewrite(OnlineSoftmaxOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<RegisterLayout> layout = layoutOf(op.getScores(), rewriter, op);
    if (failed(layout))
      return failure();
    if (!layout->rowsInOneWarp)
      return op.emitOpError("the row reductions of the online softmax stay "
                            "within a warp: the scores' layout ")
             << cast<RankedTensorType>(op.getScores().getType()).getEncoding()
             << " spreads a row over warps";
    Location loc = op.getLoc();
    SmallVector<Value> s = unpack(rewriter, loc, adaptor.getScores());
    SmallVector<Value> m = unpack(rewriter, loc, adaptor.getRunningMax());
    SmallVector<Value> l = unpack(rewriter, loc, adaptor.getRunningSum());
    SoftmaxConstants constants(rewriter, loc, op.getScale().convertToDouble());
    auto acrossRow = [&](Value value,
                         function_ref<Value(Value, Value)> combine) {
      return rowAllReduce(rewriter, loc, *layout, value, combine);
    };
    SmallVector<Value> newMax(m.size()), newSum(m.size()), alpha(m.size());
    SmallVector<Value> probs(s.size());
    for (int64_t r = 0; r < layout->numRowSlots(); ++r) {
      SmallVector<int64_t> slots = layout->slotsOfRow(r);
      SmallVector<Value> rowScores;
      for (int64_t slot : slots)
        rowScores.push_back(s[slot]);
      OnlineSoftmaxRow row = buildOnlineSoftmaxRow(
          rewriter, loc, constants, rowScores, m[r], l[r], acrossRow);
      for (auto [slot, p] : llvm::zip(slots, row.probs))
        probs[slot] = p;
      newMax[r] = row.newMax;
      newSum[r] = row.newSum;
      alpha[r] = row.alpha;
    }
    Type rowType = adaptor.getRunningMax().getType();
    rewriter.replaceOp(
        op, {pack(rewriter, loc, rowType, newMax),
             pack(rewriter, loc, adaptor.getScores().getType(), probs),
             pack(rewriter, loc, rowType, newSum),
             pack(rewriter, loc, rowType, alpha)});
    return success();
  }
};

/// Each accumulator element times the factor of its row.
struct RescaleLowering : LayoutPattern<RescaleOp> {
  using LayoutPattern::LayoutPattern;
  LogicalResult
  matchAndRewrite(RescaleOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<RegisterLayout> layout = layoutOf(op.getAcc(), rewriter, op);
    if (failed(layout))
      return failure();
    Location loc = op.getLoc();
    SmallVector<Value> acc = unpack(rewriter, loc, adaptor.getAcc());
    SmallVector<Value> factor = unpack(rewriter, loc, adaptor.getFactor());
    for (int64_t slot = 0; slot < layout->numSlots(); ++slot)
      acc[slot] = arith::MulFOp::create(rewriter, loc, acc[slot],
                                        factor[layout->rowSlotOf[slot]]);
    rewriter.replaceOp(op,
                       pack(rewriter, loc, adaptor.getAcc().getType(), acc));
    return success();
  }
};

/// O = acc * (1 / l), LSE = m + log2(l) ln 2; rows with l = 0 give 0, -inf.
struct FinalizeLowering : LayoutPattern<FinalizeOp> {
  using LayoutPattern::LayoutPattern;
  LogicalResult
  matchAndRewrite(FinalizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<RegisterLayout> layout = layoutOf(op.getAcc(), rewriter, op);
    if (failed(layout))
      return failure();
    Location loc = op.getLoc();
    SmallVector<Value> acc = unpack(rewriter, loc, adaptor.getAcc());
    SmallVector<Value> m = unpack(rewriter, loc, adaptor.getRunningMax());
    SmallVector<Value> l = unpack(rewriter, loc, adaptor.getRunningSum());
    Value zero = f32Const(rewriter, loc, 0.0);
    Value one = f32Const(rewriter, loc, 1.0);
    Value ln2 = f32Const(rewriter, loc, M_LN2);
    Value negInf = f32Const(rewriter, loc, -INFINITY);
    SmallVector<Value> lse(m.size());
    for (int64_t r = 0; r < layout->numRowSlots(); ++r) {
      Value empty = arith::CmpFOp::create(
          rewriter, loc, arith::CmpFPredicate::OEQ, l[r], zero);
      Value inv = arith::SelectOp::create(
          rewriter, loc, empty, zero,
          arith::DivFOp::create(rewriter, loc, one, l[r]));
      for (int64_t slot : layout->slotsOfRow(r))
        acc[slot] = arith::MulFOp::create(rewriter, loc, acc[slot], inv);
      Value logSum = arith::MulFOp::create(
          rewriter, loc, math::Log2Op::create(rewriter, loc, l[r]), ln2);
      Value value = arith::AddFOp::create(rewriter, loc, m[r], logSum);
      lse[r] = arith::SelectOp::create(rewriter, loc, empty, negInf, value);
    }
    rewriter.replaceOp(
        op, {pack(rewriter, loc, adaptor.getAcc().getType(), acc),
             pack(rewriter, loc, adaptor.getRunningMax().getType(), lse)});
    return success();
  }
};

/// P = exp(scale * s - lse) per element, with its row's LSE
/// (recomputedProb).
struct RecomputeProbsLowering : LayoutPattern<RecomputeProbsOp> {
  using LayoutPattern::LayoutPattern;
  LogicalResult
  matchAndRewrite(RecomputeProbsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<RegisterLayout> layout = layoutOf(op.getScores(), rewriter, op);
    if (failed(layout))
      return failure();
    Location loc = op.getLoc();
    SmallVector<Value> s = unpack(rewriter, loc, adaptor.getScores());
    SmallVector<Value> lse = unpack(rewriter, loc, adaptor.getLse());
    SoftmaxConstants c(rewriter, loc, op.getScale().convertToDouble());
    for (int64_t r = 0; r < layout->numRowSlots(); ++r) {
      Value baseLog2 = probsBaseLog2(rewriter, loc, c, lse[r]);
      for (int64_t slot : layout->slotsOfRow(r))
        s[slot] = recomputedProb(rewriter, loc, c, s[slot], baseLog2);
    }
    rewriter.replaceOp(op,
                       pack(rewriter, loc, adaptor.getScores().getType(), s));
    return success();
  }
};

/// dS = scale * P * (dP - D) per element, with its row's D.
struct SoftmaxGradLowering : LayoutPattern<SoftmaxGradOp> {
  using LayoutPattern::LayoutPattern;
  LogicalResult
  matchAndRewrite(SoftmaxGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<RegisterLayout> layout = layoutOf(op.getProbs(), rewriter, op);
    if (failed(layout))
      return failure();
    Location loc = op.getLoc();
    SmallVector<Value> p = unpack(rewriter, loc, adaptor.getProbs());
    SmallVector<Value> dp = unpack(rewriter, loc, adaptor.getGradProbs());
    SmallVector<Value> delta = unpack(rewriter, loc, adaptor.getDelta());
    Value scale = f32Const(rewriter, loc, op.getScale().convertToDouble());
    for (int64_t slot = 0; slot < layout->numSlots(); ++slot)
      p[slot] = scoreGradient(rewriter, loc, p[slot], dp[slot],
                              delta[layout->rowSlotOf[slot]], scale);
    rewriter.replaceOp(op,
                       pack(rewriter, loc, adaptor.getProbs().getType(), p));
    return success();
  }
};

/// global -> registers: each thread loads the elements it holds, zero past
/// the end of the rows (LSE and D of the backward; tiles that only feed
/// element-wise ops).
struct LoadTileToRegistersLowering : LayoutPattern<LoadTileOp> {
  using LayoutPattern::LayoutPattern;
  LogicalResult
  matchAndRewrite(LoadTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (failed(layoutOf(op.getResult(), rewriter, op)))
      return failure();
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    ThreadElements thread(rewriter, loc, type);
    const RegisterLayout &layout = thread.layout;
    Value source = adaptor.getSource();
    Value rowLimit = memref::DimOp::create(rewriter, loc, source, 2);
    SmallVector<Value> values(layout.numSlots());
    for (int64_t r = 0; r < layout.numRowSlots(); ++r) {
      Value row = arith::AddIOp::create(rewriter, loc, adaptor.getRow(),
                                        thread.rowOfRowSlot(rewriter, loc, r));
      for (int64_t slot : layout.slotsOfRow(r)) {
        SmallVector<Value> trailing;
        if (layout.is2d())
          trailing.push_back(thread.col(rewriter, loc, slot));
        values[slot] = buildZeroPaddedLoad(rewriter, loc, source,
                                           adaptor.getBatch(),
                                           adaptor.getHead(), row, rowLimit,
                                           trailing);
      }
    }
    rewriter.replaceOp(
        op, pack(rewriter, loc, getTypeConverter()->convertType(type), values));
    return success();
  }
};

} // namespace

void mlir::fa::populateTileOpPatterns(const TypeConverter &typeConverter,
                                      RewritePatternSet &patterns) {
  patterns.add<MaskLowering, OnlineSoftmaxLowering, RescaleLowering,
               FinalizeLowering, RecomputeProbsLowering, SoftmaxGradLowering,
               LoadTileToRegistersLowering>(typeConverter,
                                            patterns.getContext());
}
