//===- LowerTilesToLinalg.cpp - tile level -> linalg for the CPU --*- C++
//-*-===//
//
// The CPU lowering of the tile level. Every tile op becomes tensor code whose
// body states its arithmetic, so that after bufferization the CPU runs
// exactly the tiled online-softmax algorithm the GPU kernels run.
//
// The tile ops' arithmetic is of three kinds, each built by one helper
// below: element-wise steps over a tile (mapTile), row reductions into a
// per-row vector (reduceRows) and element-wise steps over per-row vectors
// (mapRows). Each op's lowering states only its scalar formula.
//
//===----------------------------------------------------------------------===//

#include "compiler/Utils/IRUtils.h"
#include "compiler/Passes.h"
#include "compiler/Tiling/TileArithmetic.h"
#include "compiler/Tiling/Variants.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>
#include <limits>

#define DEBUG_TYPE "fa-lower-tiles-to-linalg"

namespace mlir::fa {
#define GEN_PASS_DEF_FALOWERTILESTOLINALG
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

using utils::IteratorType;

constexpr IteratorType kParallel = IteratorType::parallel;
constexpr IteratorType kReduction = IteratorType::reduction;

//===----------------------------------------------------------------------===//
// Scalar formulas
//===----------------------------------------------------------------------===//

static Value negInf(OpBuilder &b, Location loc) {
  return f32Const(b, loc, -INFINITY);
}

static Value extendToF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}

/// acc + x * y, the product formed in f32 (f16/bf16 inputs).
static Value multiplyAdd(OpBuilder &b, Location loc, Value acc, Value x,
                         Value y) {
  Value product = arith::MulFOp::create(b, loc, extendToF32(b, loc, x),
                                        extendToF32(b, loc, y));
  return arith::AddFOp::create(b, loc, acc, product);
}

/// exp(x - base), with a base of -inf read as 0: a row that has seen only
/// -inf gets exp(-inf) = 0 instead of NaN. The online softmax's P and alpha
/// (base = the new running max) and the backward's P (base = the LSE).
static Value shiftedExp(OpBuilder &b, Location loc, Value x, Value base) {
  Value isEmpty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, base,
                                        negInf(b, loc));
  Value safeBase =
      arith::SelectOp::create(b, loc, isEmpty, f32Const(b, loc, 0.0), base);
  return math::ExpOp::create(b, loc,
                             arith::SubFOp::create(b, loc, x, safeBase));
}

static Value scaled(OpBuilder &b, Location loc, Value x, float scale) {
  return arith::MulFOp::create(b, loc, x, f32Const(b, loc, scale));
}

/// l == 0: a row that saw no key (finalize gives O = 0, LSE = -inf).
static Value isEmptyRow(OpBuilder &b, Location loc, Value sum) {
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, sum,
                               f32Const(b, loc, 0.0));
}

//===----------------------------------------------------------------------===//
// Tile and row steps as linalg.generic
//===----------------------------------------------------------------------===//

using ScalarFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

static Value emptyLike(OpBuilder &b, Location loc, Type tensorType) {
  auto type = cast<RankedTensorType>(tensorType);
  return tensor::EmptyOp::create(b, loc, type.getShape(),
                                 type.getElementType());
}

static Value zerosLike(OpBuilder &b, Location loc, Type tensorType) {
  Value empty = emptyLike(b, loc, tensorType);
  return linalg::FillOp::create(b, loc, ValueRange{f32Const(b, loc, 0.0)},
                                ValueRange{empty})
      .getResult(0);
}

/// A linalg.generic with results of the types of `outputs`, whose body
/// yields what `body` returns for its arguments (inputs, then outputs).
static SmallVector<Value> buildGeneric(
    OpBuilder &b, Location loc, ValueRange inputs, ValueRange outputs,
    ArrayRef<AffineMap> maps, ArrayRef<IteratorType> iterators,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body) {
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange(outputs), inputs, outputs, maps, iterators,
      [&](OpBuilder &b, Location loc, ValueRange args) {
        linalg::YieldOp::create(b, loc, body(b, loc, args));
      });
  return SmallVector<Value>(generic.getResults());
}

/// How an (i, j) step over a tile reads `operand`: a tile at (i, j), a
/// per-row vector at (i).
static AffineMap tileStepMap(Value operand) {
  MLIRContext *ctx = operand.getContext();
  if (cast<RankedTensorType>(operand.getType()).getRank() == 2)
    return AffineMap::getMultiDimIdentityMap(2, ctx);
  return AffineMap::get(2, 0, getAffineDimExpr(0, ctx), ctx);
}

/// out[i, j] = body(each input at (i, j), or at (i) for a per-row vector):
/// an element-wise step producing a tile of `tileType`.
static Value mapTile(OpBuilder &b, Location loc, Type tileType,
                     ValueRange inputs, ScalarFn body) {
  Value init = emptyLike(b, loc, tileType);
  SmallVector<AffineMap> maps = llvm::map_to_vector(inputs, tileStepMap);
  maps.push_back(tileStepMap(init));
  return buildGeneric(b, loc, inputs, init, maps, {kParallel, kParallel},
                      [&](OpBuilder &b, Location loc, ValueRange args) {
                        return SmallVector<Value>{
                            body(b, loc, args.drop_back())};
                      })
      .front();
}

/// acc[i] = combine(tiles[i, j]..., acc[i]) for each column j: a row
/// reduction seeded with the per-row vector `init`.
static Value reduceRows(
    OpBuilder &b, Location loc, ValueRange tiles, Value init,
    function_ref<Value(OpBuilder &, Location, ValueRange, Value)> combine) {
  SmallVector<AffineMap> maps = llvm::map_to_vector(tiles, tileStepMap);
  maps.push_back(tileStepMap(init));
  return buildGeneric(b, loc, tiles, init, maps, {kParallel, kReduction},
                      [&](OpBuilder &b, Location loc, ValueRange args) {
                        return SmallVector<Value>{
                            combine(b, loc, args.drop_back(), args.back())};
                      })
      .front();
}

/// out_k[i] = body(rows[i]...)[k] for k < numResults: an element-wise step
/// over per-row vectors of one type.
static SmallVector<Value> mapRows(
    OpBuilder &b, Location loc, ValueRange rows, unsigned numResults,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<Value> inits;
  for (unsigned k = 0; k < numResults; ++k)
    inits.push_back(emptyLike(b, loc, rows.front().getType()));
  SmallVector<AffineMap> maps(
      rows.size() + numResults,
      AffineMap::getMultiDimIdentityMap(1, b.getContext()));
  return buildGeneric(b, loc, rows, inits, maps, {kParallel},
                      [&](OpBuilder &b, Location loc, ValueRange args) {
                        return body(b, loc, args.take_front(rows.size()));
                      });
}

/// P = exp(scale * s - base[i]) over a score tile, the base read as in
/// shiftedExp: the online softmax's P (base = the new running max) and the
/// backward's recomputed P (base = the LSE).
static Value buildProbs(OpBuilder &b, Location loc, Value scores, Value base,
                        float scale) {
  return mapTile(b, loc, scores.getType(), {scores, base},
                 [&](OpBuilder &b, Location loc, ValueRange args) {
                   return shiftedExp(b, loc, scaled(b, loc, args[0], scale),
                                     args[1]);
                 });
}

//===----------------------------------------------------------------------===//
// Lowerings
//===----------------------------------------------------------------------===//

namespace {

/// How one op is lowered: a function of the op, its converted operands and
/// the rewriter.
template <typename Op>
using Lowering = LogicalResult (*)(Op, typename Op::Adaptor,
                                   ConversionPatternRewriter &);

/// The pattern that applies a Lowering (one class for every op, so that
/// each op's lowering is only its function).
template <typename Op> struct LoweringPattern : OpConversionPattern<Op> {
  LoweringPattern(MLIRContext *ctx, Lowering<Op> lower)
      : OpConversionPattern<Op>(ctx), lower(lower) {}

  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lower(op, adaptor, rewriter);
  }

  Lowering<Op> lower;
};

} // namespace

template <typename... Ops>
static void addLowerings(RewritePatternSet &patterns,
                         Lowering<Ops>... lowerings) {
  (patterns.add<LoweringPattern<Ops>>(patterns.getContext(), lowerings), ...);
}

/// fa.grid -> a sequential loop nest over (batch, head, query tile).
static LogicalResult lowerGrid(GridOp op, GridOp::Adaptor adaptor,
                               ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  Value zero = indexConst(rewriter, loc, 0), one = indexConst(rewriter, loc, 1);
  scf::LoopNest nest =
      scf::buildLoopNest(rewriter, loc, {zero, zero, zero},
                         adaptor.getOperands(), {one, one, one});
  SmallVector<Value> ivs = llvm::map_to_vector(
      nest.loops, [](scf::ForOp loop) { return loop.getInductionVar(); });
  Block *innermost = nest.loops.back().getBody();
  rewriter.inlineBlockBefore(&op.getBodyBlock(), innermost->getTerminator(),
                             ivs);
  rewriter.eraseOp(op);
  return success();
}

/// fa.load_tile -> tensor.generate reading the source; rows past the end read
/// as zero (the load index is clamped so it never leaves the buffer).
static LogicalResult lowerLoadTile(LoadTileOp op, LoadTileOp::Adaptor adaptor,
                                   ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  Value source = adaptor.getSource();
  Value rowLimit =
      buildRowLimit(rewriter, loc, source, op.getSequenceEnd());
  Value firstRow = buildSourceRow(rewriter, loc, op.getSequenceFirst(),
                                  adaptor.getRow());
  auto generate = tensor::GenerateOp::create(
      rewriter, loc, op.getType(), ValueRange{},
      [&](OpBuilder &b, Location loc, ValueRange idx) {
        Value row = arith::AddIOp::create(b, loc, firstRow, idx[0]);
        tensor::YieldOp::create(
            b, loc,
            buildZeroPaddedLoad(b, loc, source, adaptor.getPages(),
                                adaptor.getBatch(), adaptor.getHead(), row,
                                rowLimit, idx.drop_front(),
                                bool(op.getSequenceEnd())));
      });
  rewriter.replaceOp(op, generate.getResult());
  return success();
}

/// fa.store_tile, fa.accumulate_tile -> a loop nest over the elements of the
/// tile whose rows lie before the end of the destination's sequence (rows
/// `row`, `row` + 1, ... of dest[batch, head]); `write` gets each element
/// and its indices in dest.
template <typename Op>
static LogicalResult writeValidRows(
    Op op, typename Op::Adaptor adaptor, ConversionPatternRewriter &rewriter,
    function_ref<void(OpBuilder &, Location, Value, ValueRange)> write) {
  Location loc = op.getLoc();
  auto tileType = cast<RankedTensorType>(op.getTile().getType());
  Value dest = adaptor.getDest();
  Value first, end;
  if constexpr (std::is_same_v<Op, StoreTileOp> ||
                std::is_same_v<Op, AccumulateTileOp>) {
    first = op.getSequenceFirst();
    end = op.getSequenceEnd();
  }
  Value row = buildSourceRow(rewriter, loc, first, adaptor.getRow());
  Value buffer = bufferization::ToBufferOp::create(
      rewriter, loc,
      MemRefType::get(tileType.getShape(), tileType.getElementType()),
      adaptor.getTile(), /*read_only=*/true);
  // valid rows = min(R, rows left in the sequence)
  Value rowLimit = buildRowLimit(rewriter, loc, dest, end);
  Value rowsLeft = arith::SubIOp::create(rewriter, loc, rowLimit, row);
  Value validRows =
      arith::MinSIOp::create(rewriter, loc, rowsLeft,
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
                       Value destRow =
                           arith::AddIOp::create(b, loc, row, ivs[0]);
                       SmallVector<Value> indices = {
                           adaptor.getBatch(), adaptor.getHead(), destRow};
                       llvm::append_range(indices, ivs.drop_front());
                       write(b, loc, v, indices);
                     });
  rewriter.eraseOp(op);
  return success();
}

/// fa.store_tile -> dest[...] = each element of the valid rows.
static LogicalResult lowerStoreTile(StoreTileOp op,
                                    StoreTileOp::Adaptor adaptor,
                                    ConversionPatternRewriter &rewriter) {
  return writeValidRows(
      op, adaptor, rewriter,
      [&](OpBuilder &b, Location loc, Value v, ValueRange indices) {
        memref::StoreOp::create(b, loc, v, adaptor.getDest(), indices);
      });
}

/// fa.accumulate_tile -> dest[...] += each element of the valid rows
/// (programs run one after another on the CPU: no atomics).
static LogicalResult lowerAccumulateTile(AccumulateTileOp op,
                                         AccumulateTileOp::Adaptor adaptor,
                                         ConversionPatternRewriter &rewriter) {
  Value dest = adaptor.getDest();
  return writeValidRows(
      op, adaptor, rewriter,
      [&](OpBuilder &b, Location loc, Value v, ValueRange indices) {
        Value old = memref::LoadOp::create(b, loc, dest, indices);
        memref::StoreOp::create(b, loc, arith::AddFOp::create(b, loc, old, v),
                                dest, indices);
      });
}

/// fa.tile_matmul -> linalg.generic (i, j, k) accumulating in f32.
static LogicalResult lowerTileMatmul(TileMatmulOp op,
                                     TileMatmulOp::Adaptor adaptor,
                                     ConversionPatternRewriter &rewriter) {
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
  if (!init)
    init = zerosLike(rewriter, loc, op.getType());
  rewriter.replaceOp(
      op,
      buildGeneric(rewriter, loc, {adaptor.getLhs(), adaptor.getRhs()}, init,
                   {lhsMap, rhsMap, outMap}, {kParallel, kParallel, kReduction},
                   [](OpBuilder &b, Location loc, ValueRange args) {
                     return SmallVector<Value>{
                         multiplyAdd(b, loc, args[2], args[0], args[1])};
                   }));
  return success();
}

/// The query row and key column of the score a linalg.generic body over
/// the tile starting at (qStart, kvStart) computes.
static std::pair<Value, Value> scoreIndices(OpBuilder &b, Location loc,
                                            Value qStart, Value kvStart) {
  Value i = linalg::IndexOp::create(b, loc, 0);
  Value j = linalg::IndexOp::create(b, loc, 1);
  return {arith::AddIOp::create(b, loc, qStart, i),
          arith::AddIOp::create(b, loc, kvStart, j)};
}

/// A score function (a score_mod or its derivative) at the element of a
/// linalg.generic body whose raw score is `raw`.
template <typename Adaptor>
static Value scoreFunctionAt(OpBuilder &b, Location loc, Region &function,
                             Value raw, float scale, Adaptor adaptor) {
  auto [row, col] =
      scoreIndices(b, loc, adaptor.getQStart(), adaptor.getKvStart());
  return inlineVariantRegion(
      b, function,
      variantRegionArgs({scaled(b, loc, raw, scale), adaptor.getBatch(),
                         adaptor.getHead(), row, col, adaptor.getQLen(),
                         adaptor.getKvLen()},
                        adaptor.getCaptures()));
}

/// fa.mask -> -inf where the score's row and column are masked.
static LogicalResult lowerMask(MaskOp op, MaskOp::Adaptor adaptor,
                               ConversionPatternRewriter &rewriter) {
  rewriter.replaceOp(
      op, mapTile(rewriter, op.getLoc(), op.getType(), adaptor.getScores(),
                  [&](OpBuilder &b, Location loc, ValueRange s) -> Value {
                    auto [row, col] = scoreIndices(
                        b, loc, adaptor.getQStart(), adaptor.getKvStart());
                    Value hidden =
                        buildIsMasked(b, loc, op.getMask(), row, col,
                                      adaptor.getQLen(), adaptor.getKvLen());
                    if (!op.getMaskMod().empty()) {
                      Value keep = inlineVariantRegion(
                          b, op.getMaskMod(),
                          variantRegionArgs({adaptor.getBatch(), adaptor.getHead(), row,
                               col, adaptor.getQLen(), adaptor.getKvLen()},
                              adaptor.getCaptures()));
                      // A tile the block mask keeps whole keeps what
                      // the region would drop (a wrong table shows).
                      if (Value keptWhole = adaptor.getKeptWhole())
                        keep = arith::OrIOp::create(b, loc, keep, keptWhole);
                      Value dropped = arith::XOrIOp::create(
                          b, loc, keep,
                          arith::ConstantIntOp::create(b, loc, 1, 1));
                      hidden = arith::OrIOp::create(b, loc, hidden, dropped);
                    }
                    return arith::SelectOp::create(b, loc, hidden,
                                                   negInf(b, loc), s[0]);
                  }));
  return success();
}

/// fa.score_mod -> the region at (scale * s, b, h, row, column, Sq, Sk).
static LogicalResult lowerScoreMod(ScoreModOp op, ScoreModOp::Adaptor adaptor,
                                   ConversionPatternRewriter &rewriter) {
  float scale = op.getScale().convertToFloat();
  rewriter.replaceOp(
      op, mapTile(rewriter, op.getLoc(), op.getType(), adaptor.getScores(),
                  [&](OpBuilder &b, Location loc, ValueRange s) -> Value {
                    return scoreFunctionAt(b, loc, op.getScoreMod(), s[0],
                                           scale, adaptor);
                  }));
  return success();
}

/// fa.score_mod_grad -> dS * derivative(scale * s, b, h, row, column, Sq,
/// Sk), 0 where dS is 0.
static LogicalResult lowerScoreModGrad(ScoreModGradOp op,
                                       ScoreModGradOp::Adaptor adaptor,
                                       ConversionPatternRewriter &rewriter) {
  float scale = op.getScale().convertToFloat();
  rewriter.replaceOp(
      op, mapTile(rewriter, op.getLoc(), op.getType(),
                  {adaptor.getGrad(), adaptor.getScores()},
                  [&](OpBuilder &b, Location loc, ValueRange in) -> Value {
                    Value derivative = scoreFunctionAt(
                        b, loc, op.getDerivative(), in[1], scale, adaptor);
                    Value zero = f32Const(b, loc, 0.0);
                    Value isZero = arith::CmpFOp::create(
                        b, loc, arith::CmpFPredicate::OEQ, in[0], zero);
                    return arith::SelectOp::create(
                        b, loc, isZero, zero,
                        arith::MulFOp::create(b, loc, in[0], derivative));
                  }));
  return success();
}

/// fa.online_softmax -> four steps (see the op's description).
static LogicalResult lowerOnlineSoftmax(OnlineSoftmaxOp op,
                                        OnlineSoftmaxOp::Adaptor adaptor,
                                        ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  Value scores = adaptor.getScores(), runningMax = adaptor.getRunningMax();
  // scale * factor (FP8's descales), a scalar the bodies read.
  Value scale = f32Const(rewriter, loc, op.getScale().convertToDouble());
  if (Value factor = adaptor.getScaleFactor())
    scale = arith::MulFOp::create(rewriter, loc, scale, factor);

  // m_new = max(m, rowmax(scale * s))
  Value newMax = reduceRows(
      rewriter, loc, scores, runningMax,
      [&](OpBuilder &b, Location loc, ValueRange s, Value max) -> Value {
        return arith::MaximumFOp::create(
            b, loc, max, arith::MulFOp::create(b, loc, s[0], scale));
      });

  // p = exp(scale * s - m_new)
  Value probs = mapTile(
      rewriter, loc, scores.getType(), {scores, newMax},
      [&](OpBuilder &b, Location loc, ValueRange args) {
        return shiftedExp(b, loc, arith::MulFOp::create(b, loc, args[0], scale),
                          args[1]);
      });

  // alpha = exp(m - m_new); l_scaled = alpha * l
  SmallVector<Value> correction =
      mapRows(rewriter, loc, {runningMax, newMax, adaptor.getRunningSum()}, 2,
              [](OpBuilder &b, Location loc, ValueRange args) {
                Value alpha = shiftedExp(b, loc, args[0], args[1]);
                Value scaledSum = arith::MulFOp::create(b, loc, alpha, args[2]);
                return SmallVector<Value>{alpha, scaledSum};
              });

  // l_new = l_scaled + rowsum(p)
  Value newSum = reduceRows(
      rewriter, loc, probs, correction[1],
      [](OpBuilder &b, Location loc, ValueRange p, Value sum) -> Value {
        return arith::AddFOp::create(b, loc, sum, p[0]);
      });

  // The yielded p scaled by probs_scale; l sums the unscaled ones.
  if (auto probsScale = op.getProbsScaleAttr())
    probs = mapTile(rewriter, loc, probs.getType(), probs,
                    [&](OpBuilder &b, Location loc, ValueRange p) -> Value {
                      return scaled(b, loc, p[0],
                                    probsScale.getValue().convertToFloat());
                    });

  rewriter.replaceOp(op, {newMax, probs, newSum, correction[0]});
  return success();
}

/// fa.rescale -> acc[i, j] * factor[i].
static LogicalResult lowerRescale(RescaleOp op, RescaleOp::Adaptor adaptor,
                                  ConversionPatternRewriter &rewriter) {
  rewriter.replaceOp(
      op, mapTile(rewriter, op.getLoc(), op.getType(),
                  {adaptor.getAcc(), adaptor.getFactor()},
                  [](OpBuilder &b, Location loc, ValueRange args) -> Value {
                    return arith::MulFOp::create(b, loc, args[0], args[1]);
                  }));
  return success();
}

/// fa.finalize -> O = acc / l and LSE = m + log(l), guarded for l == 0.
static LogicalResult lowerFinalize(FinalizeOp op, FinalizeOp::Adaptor adaptor,
                                   ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  Value sum = adaptor.getRunningSum();
  Value outputScale = adaptor.getOutputScale();
  Value output = mapTile(
      rewriter, loc, op.getAcc().getType(), {adaptor.getAcc(), sum},
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        Value normalized = arith::DivFOp::create(b, loc, args[0], args[1]);
        if (outputScale)
          normalized = arith::MulFOp::create(b, loc, normalized, outputScale);
        Value empty = isEmptyRow(b, loc, args[1]);
        return arith::SelectOp::create(b, loc, empty, f32Const(b, loc, 0.0),
                                       normalized);
      });
  SmallVector<Value> lse =
      mapRows(rewriter, loc, {adaptor.getRunningMax(), sum}, 1,
              [](OpBuilder &b, Location loc, ValueRange args) {
                Value logSum = math::LogOp::create(b, loc, args[1]);
                Value lse = arith::AddFOp::create(b, loc, args[0], logSum);
                Value empty = isEmptyRow(b, loc, args[1]);
                return SmallVector<Value>{arith::SelectOp::create(
                    b, loc, empty, negInf(b, loc), lse)};
              });
  rewriter.replaceOp(op, {output, lse[0]});
  return success();
}

/// One row's join of `sink`: m_new = max(m, sink), alpha = exp(m - m_new),
/// l_new = alpha l + exp(sink - m_new), in that order.
static SmallVector<Value> joinSinkRow(OpBuilder &b, Location loc, Value m,
                                      Value l, Value sink) {
  Value newMax = arith::MaximumFOp::create(b, loc, m, sink);
  Value alpha = shiftedExp(b, loc, m, newMax);
  Value newSum =
      arith::AddFOp::create(b, loc, arith::MulFOp::create(b, loc, alpha, l),
                            shiftedExp(b, loc, sink, newMax));
  return {newMax, newSum, alpha};
}

/// fa.join_sink -> joinSinkRow of the head's sink, per row.
static LogicalResult lowerJoinSink(JoinSinkOp op, JoinSinkOp::Adaptor adaptor,
                                   ConversionPatternRewriter &rewriter) {
  Value sink = adaptor.getSink();
  SmallVector<Value> joined = mapRows(
      rewriter, op.getLoc(), {adaptor.getRunningMax(), adaptor.getRunningSum()},
      3, [&](OpBuilder &b, Location loc, ValueRange args) {
        return joinSinkRow(b, loc, args[0], args[1], sink);
      });
  rewriter.replaceOp(op, joined);
  return success();
}

/// fa.join_row_sinks -> fa.join_sink's rows, row i's sink
/// sinks[head * rows + row_start + i] (-inf past `rows`).
static LogicalResult lowerJoinRowSinks(JoinRowSinksOp op,
                                       JoinRowSinksOp::Adaptor adaptor,
                                       ConversionPatternRewriter &rewriter) {
  SmallVector<Value> joined = mapRows(
      rewriter, op.getLoc(), {adaptor.getRunningMax(), adaptor.getRunningSum()},
      3, [&](OpBuilder &b, Location loc, ValueRange args) {
        Value row = arith::AddIOp::create(b, loc, adaptor.getRowStart(),
                                          linalg::IndexOp::create(b, loc, 0));
        Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             row, adaptor.getRows());
        Value headFirst =
            arith::MulIOp::create(b, loc, adaptor.getHead(), adaptor.getRows());
        Value index = arith::SelectOp::create(
            b, loc, inside, arith::AddIOp::create(b, loc, headFirst, row),
            headFirst);
        Value loaded =
            memref::LoadOp::create(b, loc, adaptor.getSinks(), index);
        Value sink = arith::SelectOp::create(
            b, loc, inside, loaded,
            arith::ConstantOp::create(
                b, loc,
                b.getF32FloatAttr(-std::numeric_limits<float>::infinity())));
        return joinSinkRow(b, loc, args[0], args[1], sink);
      });
  rewriter.replaceOp(op, joined);
  return success();
}

/// fa.merge_partial -> per row mx = max(lse, lse_p), s = exp(lse - mx) +
/// exp(lse_p - mx), lse_new = mx + log(s) (-inf when s = 0); O_new = (O
/// exp(lse - mx) + O_p exp(lse_p - mx)) / s (0 when s = 0).
static LogicalResult lowerMergePartial(MergePartialOp op,
                                       MergePartialOp::Adaptor adaptor,
                                       ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  SmallVector<Value> rows = mapRows(
      rewriter, loc, {adaptor.getLse(), adaptor.getPartialLse()}, 3,
      [](OpBuilder &b, Location loc, ValueRange args) {
        Value top = arith::MaximumFOp::create(b, loc, args[0], args[1]);
        Value own = shiftedExp(b, loc, args[0], top);
        Value other = shiftedExp(b, loc, args[1], top);
        Value sum = arith::AddFOp::create(b, loc, own, other);
        Value empty = isEmptyRow(b, loc, sum);
        Value zero = f32Const(b, loc, 0.0);
        Value inv = arith::SelectOp::create(
            b, loc, empty, zero,
            arith::DivFOp::create(b, loc, f32Const(b, loc, 1.0), sum));
        Value lse = arith::SelectOp::create(
            b, loc, empty, negInf(b, loc),
            arith::AddFOp::create(b, loc, top,
                                  math::LogOp::create(b, loc, sum)));
        return SmallVector<Value>{lse, arith::MulFOp::create(b, loc, own, inv),
                                  arith::MulFOp::create(b, loc, other, inv)};
      });
  Value output = mapTile(
      rewriter, loc, op.getOutput().getType(),
      {adaptor.getOutput(), adaptor.getPartialOutput(), rows[1], rows[2]},
      [](OpBuilder &b, Location loc, ValueRange args) -> Value {
        return math::FmaOp::create(
            b, loc, args[0], args[2],
            arith::MulFOp::create(b, loc, args[1], args[3]));
      });
  rewriter.replaceOp(op, {output, rows[0]});
  return success();
}

/// fa.sink_grad -> per row -exp(sink - lse) D, 0 where D = 0 or lse = -inf.
static LogicalResult lowerSinkGrad(SinkGradOp op, SinkGradOp::Adaptor adaptor,
                                   ConversionPatternRewriter &rewriter) {
  Value sink = adaptor.getSink();
  SmallVector<Value> shares = mapRows(
      rewriter, op.getLoc(), {adaptor.getLse(), adaptor.getDelta()}, 1,
      [&](OpBuilder &b, Location loc, ValueRange args) {
        Value zero = f32Const(b, loc, 0.0);
        Value share = arith::NegFOp::create(
            b, loc,
            arith::MulFOp::create(b, loc, shiftedExp(b, loc, sink, args[0]),
                                  args[1]));
        Value none = arith::OrIOp::create(
            b, loc,
            arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, args[1],
                                  zero),
            arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, args[0],
                                  negInf(b, loc)));
        return SmallVector<Value>{
            arith::SelectOp::create(b, loc, none, zero, share)};
      });
  rewriter.replaceOp(op, shares);
  return success();
}

/// The sum of a row tile, rows in order.
static Value sumOfRows(OpBuilder &b, Location loc, Value tile) {
  int64_t rows = cast<RankedTensorType>(tile.getType()).getDimSize(0);
  auto loop = scf::ForOp::create(
      b, loc, arith::ConstantIndexOp::create(b, loc, 0),
      arith::ConstantIndexOp::create(b, loc, rows),
      arith::ConstantIndexOp::create(b, loc, 1),
      ValueRange{f32Const(b, loc, 0.0)},
      [&](OpBuilder &b, Location loc, Value i, ValueRange sum) {
        Value element = tensor::ExtractOp::create(b, loc, tile, i);
        scf::YieldOp::create(b, loc,
                             arith::AddFOp::create(b, loc, sum[0], element)
                                 .getResult());
      });
  return loop.getResult(0);
}

/// fa.accumulate_total -> dest[index] += the tile's sum (the CPU runs the
/// programs one after another).
static LogicalResult lowerAccumulateTotal(AccumulateTotalOp op,
                                          AccumulateTotalOp::Adaptor adaptor,
                                          ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  Value sum = sumOfRows(rewriter, loc, adaptor.getTile());
  Value dest = adaptor.getDest();
  Value old = memref::LoadOp::create(rewriter, loc, dest, adaptor.getIndex());
  memref::StoreOp::create(rewriter, loc,
                          arith::AddFOp::create(rewriter, loc, old, sum), dest,
                          adaptor.getIndex());
  rewriter.eraseOp(op);
  return success();
}

/// fa.tile_total -> the tile's sum (one thread: always in row order).
static LogicalResult lowerTileTotal(TileTotalOp op,
                                    TileTotalOp::Adaptor adaptor,
                                    ConversionPatternRewriter &rewriter) {
  rewriter.replaceOp(op, sumOfRows(rewriter, op.getLoc(), adaptor.getTile()));
  return success();
}

/// fa.row_dot -> rowsum(lhs * rhs), in f32.
static LogicalResult lowerRowDot(RowDotOp op, RowDotOp::Adaptor adaptor,
                                 ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  rewriter.replaceOp(
      op, reduceRows(rewriter, loc, {adaptor.getLhs(), adaptor.getRhs()},
                     zerosLike(rewriter, loc, op.getType()),
                     [](OpBuilder &b, Location loc, ValueRange xy,
                        Value sum) -> Value {
                       return multiplyAdd(b, loc, sum, xy[0], xy[1]);
                     }));
  return success();
}

/// fa.recompute_probs -> exp(scale * s - lse), lse = -inf read as 0.
static LogicalResult lowerRecomputeProbs(RecomputeProbsOp op,
                                         RecomputeProbsOp::Adaptor adaptor,
                                         ConversionPatternRewriter &rewriter) {
  rewriter.replaceOp(op, buildProbs(rewriter, op.getLoc(), adaptor.getScores(),
                                    adaptor.getLse(),
                                    op.getScale().convertToFloat()));
  return success();
}

/// fa.softmax_grad -> scale * P * (dP - D), the GPU lowerings' formula.
static LogicalResult lowerSoftmaxGrad(SoftmaxGradOp op,
                                      SoftmaxGradOp::Adaptor adaptor,
                                      ConversionPatternRewriter &rewriter) {
  float scale = op.getScale().convertToFloat();
  rewriter.replaceOp(
      op,
      mapTile(rewriter, op.getLoc(), op.getType(),
              {adaptor.getProbs(), adaptor.getGradProbs(), adaptor.getDelta()},
              [&](OpBuilder &b, Location loc, ValueRange args) {
                return scoreGradient(b, loc, args[0], args[1], args[2],
                                     f32Const(b, loc, scale));
              }));
  return success();
}

/// fa.wait_turn: programs run one after another in grid order on the CPU,
/// so the turn must have come when it is waited for: the counter holds it
/// exactly (asserted: a grid order and turns that disagree would hang the
/// GPU kernel, so the CPU run fails instead).
static LogicalResult lowerWaitTurn(WaitTurnOp op, WaitTurnOp::Adaptor adaptor,
                                   ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  OpBuilder::InsertionGuard taken(rewriter);
  enterTakenBranch(rewriter, loc, adaptor.getTaken());
  Value current = memref::LoadOp::create(
      rewriter, loc, adaptor.getOrder(),
      ValueRange{adaptor.getBatch(), adaptor.getHead(), adaptor.getTile()});
  Value turn = arith::IndexCastOp::create(rewriter, loc, rewriter.getI32Type(),
                                          adaptor.getTurn());
  Value onTurn = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                       current, turn);
  cf::AssertOp::create(rewriter, loc, onTurn,
                       "fa.wait_turn: a program came out of its turn (the "
                       "grid order and the turns disagree)");
  rewriter.eraseOp(op);
  return success();
}

/// fa.pass_turn -> order[batch, head, tile] = turn + 1.
static LogicalResult lowerPassTurn(PassTurnOp op, PassTurnOp::Adaptor adaptor,
                                   ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  OpBuilder::InsertionGuard taken(rewriter);
  enterTakenBranch(rewriter, loc, adaptor.getTaken());
  Value next = arith::AddIOp::create(rewriter, loc, adaptor.getTurn(),
                                     indexConst(rewriter, loc, 1));
  Value value =
      arith::IndexCastOp::create(rewriter, loc, rewriter.getI32Type(), next);
  memref::StoreOp::create(
      rewriter, loc, value, adaptor.getOrder(),
      ValueRange{adaptor.getBatch(), adaptor.getHead(), adaptor.getTile()});
  rewriter.eraseOp(op);
  return success();
}

/// fa.wait_previous_program and fa.launch_next_program: the CPU runs the
/// grids one after another, so there is nothing to wait for or release.
static LogicalResult
lowerWaitPreviousProgram(WaitPreviousProgramOp op,
                         WaitPreviousProgramOp::Adaptor,
                         ConversionPatternRewriter &rewriter) {
  rewriter.eraseOp(op);
  return success();
}
static LogicalResult
lowerLaunchNextProgram(LaunchNextProgramOp op, LaunchNextProgramOp::Adaptor,
                       ConversionPatternRewriter &rewriter) {
  rewriter.eraseOp(op);
  return success();
}

namespace {

struct FALowerTilesToLinalgPass
    : public mlir::fa::impl::FALowerTilesToLinalgBase<
          FALowerTilesToLinalgPass> {
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
    target.addLegalDialect<
        arith::ArithDialect, bufferization::BufferizationDialect,
        cf::ControlFlowDialect, linalg::LinalgDialect, math::MathDialect,
        memref::MemRefDialect, scf::SCFDialect, tensor::TensorDialect>();
    RewritePatternSet patterns(ctx);
    addLowerings(patterns, lowerGrid, lowerLoadTile, lowerStoreTile,
                 lowerTileMatmul, lowerMask, lowerScoreMod, lowerScoreModGrad,
                 lowerOnlineSoftmax, lowerRescale, lowerJoinSink,
                 lowerJoinRowSinks, lowerSinkGrad, lowerMergePartial,
                 lowerAccumulateTotal, lowerTileTotal, lowerFinalize,
                 lowerRowDot, lowerRecomputeProbs, lowerSoftmaxGrad,
                 lowerAccumulateTile, lowerWaitTurn, lowerPassTurn,
                 lowerWaitPreviousProgram, lowerLaunchNextProgram);
    populateTileRangeLowering(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
