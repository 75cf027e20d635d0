//===- LowerTilesToLinalg.cpp - tile level -> linalg for the CPU --*- C++ -*-===//
//
// The CPU lowering of the tile level. Every tile op becomes tensor code whose
// body states its arithmetic, so that after bufferization the CPU runs
// exactly the tiled online-softmax algorithm the GPU kernels run.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/TileArithmetic.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

#define DEBUG_TYPE "fa-lower-tiles-to-linalg"

namespace mlir::fa {
#define GEN_PASS_DEF_FALOWERTILESTOLINALG
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

using utils::IteratorType;

static Value f32Const(OpBuilder &b, Location loc, float value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

static Value negInf(OpBuilder &b, Location loc) {
  return f32Const(b, loc, -std::numeric_limits<float>::infinity());
}

static Value indexConst(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

static Value emptyLike(OpBuilder &b, Location loc, Type tensorType) {
  auto type = cast<RankedTensorType>(tensorType);
  return tensor::EmptyOp::create(b, loc, type.getShape(),
                                 type.getElementType());
}

static Value extendToF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}

/// The running max used as the exponent's base: 0 for a row that has seen
/// only -inf, so that exp(-inf - base) is 0 instead of NaN.
static Value safeMax(OpBuilder &b, Location loc, Value max) {
  Value isEmpty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                        max, negInf(b, loc));
  return arith::SelectOp::create(b, loc, isEmpty, f32Const(b, loc, 0.0f),
                                 max);
}

namespace {

/// Index maps of a 2-d (i, j) iteration space.
struct RowMaps {
  explicit RowMaps(MLIRContext *ctx)
      : tile(AffineMap::getMultiDimIdentityMap(2, ctx)),
        row(AffineMap::get(2, 0, getAffineDimExpr(0, ctx), ctx)),
        vec(AffineMap::getMultiDimIdentityMap(1, ctx)) {}
  AffineMap tile; // (i, j) -> (i, j)
  AffineMap row;  // (i, j) -> (i)
  AffineMap vec;  // (i) -> (i)
};

constexpr IteratorType kParallel = IteratorType::parallel;
constexpr IteratorType kReduction = IteratorType::reduction;

/// exp(scale * s[i, j] - base[i]) over a [R, C] score tile, with a base of
/// -inf read as 0 (a row that saw no key): the online softmax's P (base =
/// the running max) and the backward's recomputed P (base = the LSE).
static Value buildShiftedExp(OpBuilder &rewriter, Location loc, Value scores,
                             Value base, float scale, Type tileType) {
  RowMaps maps(rewriter.getContext());
  return linalg::GenericOp::create(
             rewriter, loc, tileType, ValueRange{scores, base},
             ValueRange{emptyLike(rewriter, loc, tileType)},
             ArrayRef<AffineMap>{maps.tile, maps.row, maps.tile},
             ArrayRef<IteratorType>{kParallel, kParallel},
             [&](OpBuilder &b, Location loc, ValueRange args) {
               Value x = arith::MulFOp::create(b, loc, args[0],
                                               f32Const(b, loc, scale));
               Value shifted =
                   arith::SubFOp::create(b, loc, x, safeMax(b, loc, args[1]));
               linalg::YieldOp::create(
                   b, loc, math::ExpOp::create(b, loc, shifted).getResult());
             })
      .getResult(0);
}

/// fa.grid -> a sequential loop nest over (batch, head, query tile).
struct GridLowering : OpConversionPattern<GridOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GridOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value zero = indexConst(rewriter, loc, 0), one = indexConst(rewriter, loc, 1);
    scf::LoopNest nest = scf::buildLoopNest(
        rewriter, loc, {zero, zero, zero}, adaptor.getOperands(),
        {one, one, one});
    SmallVector<Value> ivs = llvm::map_to_vector(
        nest.loops, [](scf::ForOp loop) { return loop.getInductionVar(); });
    Block *innermost = nest.loops.back().getBody();
    rewriter.inlineBlockBefore(&op.getBodyBlock(), innermost->getTerminator(),
                               ivs);
    rewriter.eraseOp(op);
    return success();
  }
};

/// fa.load_tile -> tensor.generate reading the source; rows past the end read
/// as zero (the load index is clamped so it never leaves the buffer).
struct LoadTileLowering : OpConversionPattern<LoadTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LoadTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto tileType = cast<RankedTensorType>(op.getType());
    Value source = adaptor.getSource();
    Value rowLimit = memref::DimOp::create(rewriter, loc, source, 2);
    auto generate = tensor::GenerateOp::create(
        rewriter, loc, tileType, ValueRange{},
        [&](OpBuilder &b, Location loc, ValueRange idx) {
          Value row = arith::AddIOp::create(b, loc, adaptor.getRow(), idx[0]);
          tensor::YieldOp::create(
              b, loc,
              buildZeroPaddedLoad(b, loc, source, adaptor.getBatch(),
                                  adaptor.getHead(), row, rowLimit,
                                  idx.drop_front()));
        });
    rewriter.replaceOp(op, generate.getResult());
    return success();
  }
};

/// A loop nest over the elements of `tile` whose rows lie before the end of
/// `dest`'s sequence (rows `row`, `row` + 1, ... of dest[batch, head]);
/// `body` gets each element and its indices in `dest`.
static void forEachValidElement(
    OpBuilder &rewriter, Location loc, Value tile, RankedTensorType tileType,
    Value dest, Value batch, Value head, Value row,
    function_ref<void(OpBuilder &, Location, Value, ValueRange)> body) {
  Value buffer = bufferization::ToBufferOp::create(
      rewriter, loc,
      MemRefType::get(tileType.getShape(), tileType.getElementType()), tile,
      /*read_only=*/true);
  // valid rows = min(R, rows left in the sequence)
  Value rowLimit = memref::DimOp::create(rewriter, loc, dest, 2);
  Value rowsLeft = arith::SubIOp::create(rewriter, loc, rowLimit, row);
  Value validRows = arith::MinSIOp::create(
      rewriter, loc, rowsLeft,
      indexConst(rewriter, loc, tileType.getDimSize(0)));
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t d = 0; d < tileType.getRank(); ++d) {
    lbs.push_back(indexConst(rewriter, loc, 0));
    ubs.push_back(d == 0 ? validRows
                         : indexConst(rewriter, loc, tileType.getDimSize(d)));
    steps.push_back(indexConst(rewriter, loc, 1));
  }
  scf::buildLoopNest(rewriter, loc, lbs, ubs, steps,
                     [&](OpBuilder &b, Location loc, ValueRange ivs) {
                       Value v = memref::LoadOp::create(b, loc, buffer, ivs);
                       Value destRow = arith::AddIOp::create(b, loc, row, ivs[0]);
                       SmallVector<Value> indices = {batch, head, destRow};
                       llvm::append_range(indices, ivs.drop_front());
                       body(b, loc, v, indices);
                     });
}

/// fa.store_tile -> a loop nest over the valid rows of the tile.
struct StoreTileLowering : OpConversionPattern<StoreTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(StoreTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value dest = adaptor.getDest();
    forEachValidElement(
        rewriter, op.getLoc(), adaptor.getTile(),
        cast<RankedTensorType>(op.getTile().getType()), dest,
        adaptor.getBatch(), adaptor.getHead(), adaptor.getRow(),
        [&](OpBuilder &b, Location loc, Value v, ValueRange indices) {
          memref::StoreOp::create(b, loc, v, dest, indices);
        });
    rewriter.eraseOp(op);
    return success();
  }
};

/// fa.tile_matmul -> linalg.generic (i, j, k) accumulating in f32.
struct TileMatmulLowering : OpConversionPattern<TileMatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TileMatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    AffineExpr i = getAffineDimExpr(0, ctx), j = getAffineDimExpr(1, ctx),
               k = getAffineDimExpr(2, ctx);
    auto lhsMap = op.getTransposeLhs() ? AffineMap::get(3, 0, {k, i}, ctx)
                                       : AffineMap::get(3, 0, {i, k}, ctx);
    auto rhsMap = op.getTransposeRhs() ? AffineMap::get(3, 0, {j, k}, ctx)
                                       : AffineMap::get(3, 0, {k, j}, ctx);
    auto outMap = AffineMap::get(3, 0, {i, j}, ctx);
    Value init = adaptor.getAcc();
    if (!init) {
      Value empty = emptyLike(rewriter, loc, op.getType());
      init = linalg::FillOp::create(rewriter, loc,
                                    ValueRange{f32Const(rewriter, loc, 0.0f)},
                                    ValueRange{empty})
                 .getResult(0);
    }
    auto generic = linalg::GenericOp::create(
        rewriter, loc, op.getType(), ValueRange{adaptor.getLhs(), adaptor.getRhs()},
        ValueRange{init}, ArrayRef<AffineMap>{lhsMap, rhsMap, outMap},
        ArrayRef<IteratorType>{kParallel, kParallel, kReduction},
        [](OpBuilder &b, Location loc, ValueRange args) {
          Value product = arith::MulFOp::create(b, loc, extendToF32(b, loc, args[0]),
                                                extendToF32(b, loc, args[1]));
          Value sum = arith::AddFOp::create(b, loc, args[2], product);
          linalg::YieldOp::create(b, loc, sum);
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// fa.mask -> linalg.generic that compares each score's row and column.
struct MaskLowering : OpConversionPattern<MaskOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MaskOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RowMaps maps(op.getContext());
    auto generic = linalg::GenericOp::create(
        rewriter, loc, op.getType(), ValueRange{adaptor.getScores()},
        ValueRange{emptyLike(rewriter, loc, op.getType())},
        ArrayRef<AffineMap>{maps.tile, maps.tile},
        ArrayRef<IteratorType>{kParallel, kParallel},
        [&](OpBuilder &b, Location loc, ValueRange args) {
          Value i = linalg::IndexOp::create(b, loc, 0);
          Value j = linalg::IndexOp::create(b, loc, 1);
          Value row = arith::AddIOp::create(b, loc, adaptor.getQStart(), i);
          Value col = arith::AddIOp::create(b, loc, adaptor.getKvStart(), j);
          Value hidden = buildIsMasked(b, loc, op.getMask(), row, col,
                                       adaptor.getQLen(), adaptor.getKvLen());
          Value v = arith::SelectOp::create(b, loc, hidden, negInf(b, loc),
                                            args[0]);
          linalg::YieldOp::create(b, loc, v);
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// fa.online_softmax -> four linalg.generic steps (see the op's description).
struct OnlineSoftmaxLowering : OpConversionPattern<OnlineSoftmaxOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OnlineSoftmaxOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RowMaps maps(op.getContext());
    float scale = op.getScale().convertToFloat();
    Type rowType = op.getRunningMax().getType();
    Type tileType = op.getScores().getType();
    Value scores = adaptor.getScores();

    // m_new = max(m, rowmax(scale * s))
    Value newMax =
        linalg::GenericOp::create(
            rewriter, loc, rowType, ValueRange{scores},
            ValueRange{adaptor.getRunningMax()},
            ArrayRef<AffineMap>{maps.tile, maps.row},
            ArrayRef<IteratorType>{kParallel, kReduction},
            [&](OpBuilder &b, Location loc, ValueRange args) {
              Value x = arith::MulFOp::create(b, loc, args[0],
                                              f32Const(b, loc, scale));
              linalg::YieldOp::create(
                  b, loc, arith::MaximumFOp::create(b, loc, args[1], x).getResult());
            })
            .getResult(0);

    // p = exp(scale * s - m_new)
    Value probs =
        buildShiftedExp(rewriter, loc, scores, newMax, scale, tileType);

    // alpha = exp(m - m_new); l_scaled = alpha * l
    auto correction = linalg::GenericOp::create(
        rewriter, loc, TypeRange{rowType, rowType},
        ValueRange{adaptor.getRunningMax(), newMax, adaptor.getRunningSum()},
        ValueRange{emptyLike(rewriter, loc, rowType),
                   emptyLike(rewriter, loc, rowType)},
        ArrayRef<AffineMap>{maps.vec, maps.vec, maps.vec, maps.vec, maps.vec},
        ArrayRef<IteratorType>{kParallel},
        [&](OpBuilder &b, Location loc, ValueRange args) {
          Value shifted =
              arith::SubFOp::create(b, loc, args[0], safeMax(b, loc, args[1]));
          Value alpha = math::ExpOp::create(b, loc, shifted);
          Value scaledSum = arith::MulFOp::create(b, loc, alpha, args[2]);
          linalg::YieldOp::create(b, loc, ValueRange{alpha, scaledSum});
        });
    Value alpha = correction.getResult(0);

    // l_new = l_scaled + rowsum(p)
    Value newSum =
        linalg::GenericOp::create(
            rewriter, loc, rowType, ValueRange{probs},
            ValueRange{correction.getResult(1)},
            ArrayRef<AffineMap>{maps.tile, maps.row},
            ArrayRef<IteratorType>{kParallel, kReduction},
            [&](OpBuilder &b, Location loc, ValueRange args) {
              linalg::YieldOp::create(
                  b, loc, arith::AddFOp::create(b, loc, args[1], args[0]).getResult());
            })
            .getResult(0);

    rewriter.replaceOp(op, {newMax, probs, newSum, alpha});
    return success();
  }
};

/// fa.rescale -> acc[i, j] * factor[i].
struct RescaleLowering : OpConversionPattern<RescaleOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RescaleOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RowMaps maps(op.getContext());
    auto generic = linalg::GenericOp::create(
        rewriter, loc, op.getType(),
        ValueRange{adaptor.getAcc(), adaptor.getFactor()},
        ValueRange{emptyLike(rewriter, loc, op.getType())},
        ArrayRef<AffineMap>{maps.tile, maps.row, maps.tile},
        ArrayRef<IteratorType>{kParallel, kParallel},
        [](OpBuilder &b, Location loc, ValueRange args) {
          linalg::YieldOp::create(
              b, loc, arith::MulFOp::create(b, loc, args[0], args[1]).getResult());
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// fa.finalize -> O = acc / l and LSE = m + log(l), guarded for l == 0.
struct FinalizeLowering : OpConversionPattern<FinalizeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FinalizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RowMaps maps(op.getContext());
    Type accType = op.getAcc().getType(), rowType = op.getRunningMax().getType();
    auto isEmptyRow = [](OpBuilder &b, Location loc, Value sum) {
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, sum,
                                   f32Const(b, loc, 0.0f));
    };
    Value output =
        linalg::GenericOp::create(
            rewriter, loc, accType,
            ValueRange{adaptor.getAcc(), adaptor.getRunningSum()},
            ValueRange{emptyLike(rewriter, loc, accType)},
            ArrayRef<AffineMap>{maps.tile, maps.row, maps.tile},
            ArrayRef<IteratorType>{kParallel, kParallel},
            [&](OpBuilder &b, Location loc, ValueRange args) {
              Value normalized = arith::DivFOp::create(b, loc, args[0], args[1]);
              Value v = arith::SelectOp::create(b, loc, isEmptyRow(b, loc, args[1]),
                                                f32Const(b, loc, 0.0f), normalized);
              linalg::YieldOp::create(b, loc, v);
            })
            .getResult(0);
    Value lse =
        linalg::GenericOp::create(
            rewriter, loc, rowType,
            ValueRange{adaptor.getRunningMax(), adaptor.getRunningSum()},
            ValueRange{emptyLike(rewriter, loc, rowType)},
            ArrayRef<AffineMap>{maps.vec, maps.vec, maps.vec},
            ArrayRef<IteratorType>{kParallel},
            [&](OpBuilder &b, Location loc, ValueRange args) {
              Value logSum = math::LogOp::create(b, loc, args[1]);
              Value sum = arith::AddFOp::create(b, loc, args[0], logSum);
              Value v = arith::SelectOp::create(b, loc, isEmptyRow(b, loc, args[1]),
                                                negInf(b, loc), sum);
              linalg::YieldOp::create(b, loc, v);
            })
            .getResult(0);
    rewriter.replaceOp(op, {output, lse});
    return success();
  }
};

/// fa.row_dot -> a linalg.generic reduction over the columns, in f32.
struct RowDotLowering : OpConversionPattern<RowDotOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RowDotOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RowMaps maps(op.getContext());
    Value empty = emptyLike(rewriter, loc, op.getType());
    Value init = linalg::FillOp::create(rewriter, loc,
                                        ValueRange{f32Const(rewriter, loc, 0.0f)},
                                        ValueRange{empty})
                     .getResult(0);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, op.getType(), ValueRange{adaptor.getLhs(), adaptor.getRhs()},
        ValueRange{init}, ArrayRef<AffineMap>{maps.tile, maps.tile, maps.row},
        ArrayRef<IteratorType>{kParallel, kReduction},
        [](OpBuilder &b, Location loc, ValueRange args) {
          Value product = arith::MulFOp::create(b, loc, extendToF32(b, loc, args[0]),
                                                extendToF32(b, loc, args[1]));
          linalg::YieldOp::create(
              b, loc, arith::AddFOp::create(b, loc, args[2], product).getResult());
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// fa.recompute_probs -> exp(scale * s - lse), lse = -inf read as 0.
struct RecomputeProbsLowering : OpConversionPattern<RecomputeProbsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RecomputeProbsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    rewriter.replaceOp(op, buildShiftedExp(rewriter, loc, adaptor.getScores(),
                                           adaptor.getLse(),
                                           op.getScale().convertToFloat(),
                                           op.getType()));
    return success();
  }
};

/// fa.softmax_grad -> scale * P * (dP - D).
struct SoftmaxGradLowering : OpConversionPattern<SoftmaxGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SoftmaxGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RowMaps maps(op.getContext());
    float scale = op.getScale().convertToFloat();
    auto generic = linalg::GenericOp::create(
        rewriter, loc, op.getType(),
        ValueRange{adaptor.getProbs(), adaptor.getGradProbs(), adaptor.getDelta()},
        ValueRange{emptyLike(rewriter, loc, op.getType())},
        ArrayRef<AffineMap>{maps.tile, maps.tile, maps.row, maps.tile},
        ArrayRef<IteratorType>{kParallel, kParallel},
        [&](OpBuilder &b, Location loc, ValueRange args) {
          Value centered = arith::SubFOp::create(b, loc, args[1], args[2]);
          Value grad = arith::MulFOp::create(b, loc, args[0], centered);
          linalg::YieldOp::create(
              b, loc,
              arith::MulFOp::create(b, loc, grad, f32Const(b, loc, scale))
                  .getResult());
        });
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// fa.accumulate_tile -> a loop nest over the valid rows that adds each
/// element (programs run one after another on the CPU: no atomics).
struct AccumulateTileLowering : OpConversionPattern<AccumulateTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AccumulateTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value dest = adaptor.getDest();
    forEachValidElement(
        rewriter, op.getLoc(), adaptor.getTile(),
        cast<RankedTensorType>(op.getTile().getType()), dest,
        adaptor.getBatch(), adaptor.getHead(), adaptor.getRow(),
        [&](OpBuilder &b, Location loc, Value v, ValueRange indices) {
          Value old = memref::LoadOp::create(b, loc, dest, indices);
          memref::StoreOp::create(b, loc, arith::AddFOp::create(b, loc, old, v),
                                  dest, indices);
        });
    rewriter.eraseOp(op);
    return success();
  }
};

/// fa.wait_turn: programs run one after another in grid order on the CPU,
/// so the turn must have come when it is waited for: the counter holds it
/// exactly (asserted: a grid order and turns that disagree would hang the
/// GPU kernel, so the CPU run fails instead).
struct WaitTurnLowering : OpConversionPattern<WaitTurnOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(WaitTurnOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value current = memref::LoadOp::create(
        rewriter, loc, adaptor.getOrder(),
        ValueRange{adaptor.getBatch(), adaptor.getHead(), adaptor.getTile()});
    Value turn = arith::IndexCastOp::create(
        rewriter, loc, rewriter.getI32Type(), adaptor.getTurn());
    Value onTurn = arith::CmpIOp::create(rewriter, loc,
                                         arith::CmpIPredicate::eq, current,
                                         turn);
    cf::AssertOp::create(rewriter, loc, onTurn,
                         "fa.wait_turn: a program came out of its turn (the "
                         "grid order and the turns disagree)");
    rewriter.eraseOp(op);
    return success();
  }
};

/// fa.pass_turn -> order[batch, head, tile] = turn + 1.
struct PassTurnLowering : OpConversionPattern<PassTurnOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(PassTurnOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value next = arith::AddIOp::create(rewriter, loc, adaptor.getTurn(),
                                       indexConst(rewriter, loc, 1));
    Value value = arith::IndexCastOp::create(rewriter, loc,
                                             rewriter.getI32Type(), next);
    memref::StoreOp::create(
        rewriter, loc, value, adaptor.getOrder(),
        ValueRange{adaptor.getBatch(), adaptor.getHead(), adaptor.getTile()});
    rewriter.eraseOp(op);
    return success();
  }
};

struct FALowerTilesToLinalgPass
    : public mlir::fa::impl::FALowerTilesToLinalgBase<FALowerTilesToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    WalkResult untiled = getOperation().walk([](Operation *op) {
      if (isa<AttentionOp>(op))
        op->emitOpError("must be tiled before the CPU lowering (run fa-tile)");
      else if (isa<AttentionBackwardOp>(op))
        op->emitOpError(
            "must be tiled before the CPU lowering (run fa-tile-backward)");
      else
        return WalkResult::advance();
      return WalkResult::interrupt();
    });
    if (untiled.wasInterrupted())
      return signalPassFailure();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<FADialect>();
    target.addLegalDialect<arith::ArithDialect, bufferization::BufferizationDialect,
                           cf::ControlFlowDialect,
                           linalg::LinalgDialect, math::MathDialect,
                           memref::MemRefDialect, scf::SCFDialect,
                           tensor::TensorDialect>();
    RewritePatternSet patterns(ctx);
    patterns.add<GridLowering, LoadTileLowering, StoreTileLowering,
                 TileMatmulLowering, MaskLowering, OnlineSoftmaxLowering,
                 RescaleLowering, FinalizeLowering, RowDotLowering,
                 RecomputeProbsLowering, SoftmaxGradLowering,
                 AccumulateTileLowering, WaitTurnLowering,
                 PassTurnLowering>(ctx);
    populateKVTileRangeLowering(patterns);
    populateQTileRangeLowering(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
