//===- TileBackward.cpp - fa.attention_backward -> tiled backward --*- C++ -*-===//
//
// The problem-to-tile step of the backward (FlashAttention-2, Algorithm 2):
// three grids. A preprocessing grid forms D = rowsum(dO * O) and zeroes the
// dQ accumulator; the main grid keeps one K/V tile and its dK, dV on chip
// and streams the query tiles that see it; a postprocessing grid rounds dQ.
// A varlen batch runs the same grids per sequence (the forward's rules:
// fa-tile).
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/Tiling/TileArithmetic.h"
#include "compiler/Tiling/Variants.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"

#define DEBUG_TYPE "fa-tile-backward"

namespace mlir::fa {
#define GEN_PASS_DEF_FATILEBACKWARD
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Query head h's copy `chain` of dq_accum and dq_order, which hold
/// dq_chains copies of the `qHeads` heads one after another: chain * qHeads
/// + h.
Value chainCopyHead(OpBuilder &b, Location loc, Value chain, Value qHeads,
                    Value h) {
  return arith::AddIOp::create(b, loc,
                               arith::MulIOp::create(b, loc, chain, qHeads), h);
}

/// Builds the three grids of one fa.attention_backward in front of it.
class BackwardTiler {
public:
  BackwardTiler(AttentionBackwardOp op, int64_t blockM, int64_t blockN)
      : op(op), blockM(blockM), blockN(blockN), builder(op), loc(op.getLoc()) {
    elementType =
        cast<MemRefType>(op.getQuery().getType()).getElementType();
    headDim = op.getHeadDim();
    varlen = bool(op.getCuSeqlensQ());
  }

  LogicalResult build() {
    buildPreprocess();
    if (failed(buildMain()))
      return failure();
    buildPostprocess();
    return success();
  }

private:
  Value indexConst(int64_t v) {
    return arith::ConstantIndexOp::create(builder, loc, v);
  }
  Value dim(Value memref, int64_t d) {
    return memref::DimOp::create(builder, loc, memref, d);
  }
  Value zeros(ArrayRef<int64_t> shape) {
    auto type = RankedTensorType::get(shape, builder.getF32Type());
    return arith::ConstantOp::create(
        builder, loc, DenseElementsAttr::get(type, builder.getF32FloatAttr(0)));
  }
  RankedTensorType tileType(int64_t rows, Type element) {
    return RankedTensorType::get({rows, headDim}, element);
  }

  /// Where a program's rows are: the batch entry its tiles index, the
  /// lengths of its problem, and (a varlen batch) the sequence's rows as
  /// the loads and stores take them, [first, end) of the packed tensors.
  struct ProgramRows {
    Value batch, qLen, kvLen;
    SmallVector<Value, 2> qRows, kvRows;
  };
  /// The rows of batch entry (or varlen sequence) `b` of tensors with
  /// `qLen` query and `kvLen` key rows.
  ProgramRows programRows(Value b, Value qLen, Value kvLen) {
    ProgramRows rows{b, qLen, kvLen, {}, {}};
    if (!varlen)
      return rows;
    // Sequence b's rows of the one packed batch entry; every index below
    // counts from the sequence's start.
    auto [qFirst, qLimit] =
        buildSequenceRows(builder, loc, op.getCuSeqlensQ(), b, rows.qLen);
    auto [kvFirst, kvLimit] =
        buildSequenceRows(builder, loc, op.getCuSeqlensK(), b, rows.kvLen);
    rows.batch = indexConst(0);
    rows.qLen = arith::SubIOp::create(builder, loc, qLimit, qFirst);
    rows.kvLen = arith::SubIOp::create(builder, loc, kvLimit, kvFirst);
    rows.qRows = {qFirst, qLimit};
    rows.kvRows = {kvFirst, kvLimit};
    return rows;
  }
  /// The query rows alone, for the query-tile grids (no lengths).
  ProgramRows queryRows(Value b) {
    if (!varlen)
      return {b, Value(), Value(), {}, {}};
    auto [qFirst, qLimit] = buildSequenceRows(builder, loc, op.getCuSeqlensQ(),
                                              b, dim(op.getQuery(), 2));
    return {indexConst(0), Value(), Value(), {qFirst, qLimit}, {}};
  }
  /// The grid's batch: the sequences of a varlen batch, else the tensors'.
  Value gridBatch() {
    if (!varlen)
      return dim(op.getQuery(), 0);
    return arith::SubIOp::create(builder, loc, dim(op.getCuSeqlensQ(), 0),
                                 indexConst(1));
  }
  /// chainCopyHead for a constant chain (chain 0: `h` itself).
  Value chainHead(int64_t chain, Value h) {
    if (chain == 0)
      return h;
    return chainCopyHead(builder, loc, indexConst(chain), dim(op.getQuery(), 1),
                         h);
  }
  /// Opens a grid of one program per (batch, query head, query tile) and
  /// moves the builder into it; returns the first query row of the tile.
  /// (A varlen batch: the tiles of the packed rows bound any sequence's.)
  Value openQueryTileGrid(GridOp &grid, StringRef program) {
    Value numQTiles = arith::CeilDivUIOp::create(
        builder, loc, dim(op.getQuery(), 2), indexConst(blockM));
    grid = GridOp::create(builder, loc, gridBatch(), dim(op.getQuery(), 1),
                          numQTiles);
    grid.setProgram(program);
    grid.setRagged(varlen);
    builder.setInsertionPointToStart(&grid.getBodyBlock());
    return arith::MulIOp::create(builder, loc, grid.getTileIndex(),
                                 indexConst(blockM));
  }

  void buildPreprocess();
  LogicalResult buildMain();
  void buildPostprocess();
  void sumSinkShares(GridOp grid);

  AttentionBackwardOp op;
  int64_t blockM, blockN;
  OpBuilder builder;
  Location loc;
  Type elementType;
  int64_t headDim;
  bool varlen;
};

/// D = rowsum(dO * O) into `delta` (and with sinks their gradient's
/// shares); the program's rows of dq_accum = 0.
void BackwardTiler::buildPreprocess() {
  OpBuilder::InsertionGuard guard(builder);
  GridOp grid;
  Value qStart = openQueryTileGrid(grid, "delta");
  Value h = grid.getHeadIndex();
  ProgramRows rows = queryRows(grid.getBatchIndex());
  Value b = rows.batch;
  auto rowsType = tileType(blockM, elementType);
  Value gradOutput =
      LoadTileOp::create(builder, loc, rowsType, op.getGradOutput(), b, h,
                         qStart, rows.qRows);
  Value output = LoadTileOp::create(builder, loc, rowsType, op.getOutput(), b,
                                    h, qStart, rows.qRows);
  Value delta = RowDotOp::create(
      builder, loc, RankedTensorType::get({blockM}, builder.getF32Type()),
      gradOutput, output);
  StoreTileOp::create(builder, loc, delta, op.getDelta(), b, h, qStart,
                      rows.qRows);
  // Sinks: the rows' shares of the head's sink gradient, -exp(sink - LSE) D,
  // added to grad_sinks[h] (which the caller zeroed).
  if (Value sinks = op.getSinks()) {
    auto rowType = RankedTensorType::get({blockM}, builder.getF32Type());
    Value sink = memref::LoadOp::create(builder, loc, sinks, ValueRange{h});
    Value lse = LoadTileOp::create(builder, loc, rowType, op.getLse(), b, h,
                                   qStart, rows.qRows);
    Value share = SinkGradOp::create(builder, loc, rowType, sink, lse, delta);
    // Deterministic: the tile's total in its own element (the dq grid sums
    // a head's in a fixed order).
    if (Value shares = op.getSinkShares()) {
      Value total = TileTotalOp::create(builder, loc, share);
      memref::StoreOp::create(
          builder, loc, total, shares,
          ValueRange{grid.getBatchIndex(), h, grid.getTileIndex()});
    } else {
      AccumulateTotalOp::create(builder, loc, share, op.getGradSinks(), h);
    }
  }
  // Every chain's copy of the accumulator and of the counter.
  for (int64_t chain = 0; chain < op.getDqChains(); ++chain) {
    Value copy = chainHead(chain, h);
    StoreTileOp::create(builder, loc, zeros({blockM, headDim}), op.getDqAccum(),
                        b, copy, qStart, rows.qRows);
    // Deterministic: the query tile's turn counter starts at turn 0 (K/V
    // tile 0, or with the causal mask the tile's last K/V tile).
    if (Value order = op.getDqOrder())
      memref::StoreOp::create(
          builder, loc,
          arith::ConstantOp::create(builder, loc, builder.getI32IntegerAttr(0)),
          order, ValueRange{grid.getBatchIndex(), copy, grid.getTileIndex()});
  }
}

LogicalResult BackwardTiler::buildMain() {
  OpBuilder::InsertionGuard guard(builder);
  // A score_mod: P from the modified scores, and dS through its derivative,
  // built (and checked) first.
  bool scoreMod = !op.getScoreMod().empty();
  bool maskMod = !op.getMaskMod().empty();
  Region derivative;
  if (scoreMod && allowsApproximateMath(elementType))
    allowApproximateMath(op.getScoreMod());
  if (scoreMod &&
      failed(buildScoreModDerivative(op.getScoreMod(), derivative, op)))
    return failure();
  Type f32 = builder.getF32Type();
  auto kvTileType = tileType(blockN, elementType);
  auto kvAccType = tileType(blockN, f32);
  auto qTileType = tileType(blockM, elementType);
  auto qAccType = tileType(blockM, f32);
  auto rowType = RankedTensorType::get({blockM}, f32);
  auto scoreType = RankedTensorType::get({blockM, blockN}, f32);
  MaskKind mask = op.getMask();
  float scale = op.getScale().convertToFloat();

  Value qHeads = dim(op.getQuery(), 1), qRowsAll = dim(op.getQuery(), 2);
  Value kvHeads = dim(op.getKey(), 1), kvRowsAll = dim(op.getKey(), 2);
  Value numKvTiles =
      arith::CeilDivUIOp::create(builder, loc, kvRowsAll, indexConst(blockN));
  auto grid = GridOp::create(builder, loc, gridBatch(), kvHeads, numKvTiles);
  grid.setProgram("dkdv");
  grid.setRagged(varlen);
  builder.setInsertionPointToStart(&grid.getBodyBlock());
  Value kvHead = grid.getHeadIndex();
  // `b` indexes the tensors; the variants, tables and counters see the
  // problem's batch entry `seq` (a varlen batch's sequence).
  Value seq = grid.getBatchIndex();
  ProgramRows rows = programRows(seq, qRowsAll, kvRowsAll);
  Value b = rows.batch, qLen = rows.qLen, kvLen = rows.kvLen;
  ValueRange qRows = rows.qRows, kvRows = rows.kvRows;
  // Deterministic and causal: dQ tile i takes its K/V tiles' parts last to
  // first. K/V tile j visits query tiles j, j + 1, ... (from the diagonal
  // on), so in that order it adds to each right after tile j + 1 did, one
  // step ahead: the programs move in lockstep. In first-to-last order
  // tile j would wait j steps for tiles 0 .. j - 1 to reach its diagonal
  // while holding its SM. Tiles wait only for tiles launched before them,
  // so the grid runs the K/V tiles last to first too.
  // The same holds wherever the visited (query tile, K/V tile) pairs form
  // a band (a window, documents): (i, j) waits for a later K/V tile at i or
  // for its own program at an earlier query tile, i - j falls at every
  // step, and the longest chain of waits is the band's width. First to
  // last, a chain runs down the whole diagonal ((i, j) waits for (i, j - 1)
  // and (i - 1, j)): 2 x tiles steps, the programs in a narrow wavefront.
  Value order = op.getDqOrder();
  // A mask_mod narrows the ranges where it can (affine, no captures); the
  // deterministic mode counts its turns by them only where both sides of
  // the ranges agree (tileRangesAgree), else it visits every tile.
  bool rangeMask = maskMod && !readsCapturedTensors(op.getMaskMod()) &&
                   (!order || tileRangesAgree(op.getMaskMod()));
  bool lastToFirst = order && (mask == MaskKind::causal || rangeMask ||
                               op.getQueryRanges());
  // Otherwise, with two key intervals apart (sink tokens and a window) the
  // sinks' K/V tile visits every query tile and the others a band: those
  // programs start first, on every head at once, rather than one head after
  // another (the last head's started near the end of the grid and set its
  // end: 1.4-1.5x the backward's time at 16k). Not for the causal mask
  // alone: there each head's programs share their Q and dO rows in L2, and
  // all heads at once measured up to 1.8x slower (B 8, H 32, 2k).
  grid.setTilesOutermost(!order && rangeMask && skipsKeyHole(op.getMaskMod()));
  Value kvTileIndex = grid.getTileIndex();
  if (lastToFirst && !varlen) {
    kvTileIndex = arith::SubIOp::create(
        builder, loc,
        arith::SubIOp::create(builder, loc, numKvTiles, indexConst(1)),
        kvTileIndex);
  } else if (lastToFirst) {
    // A sequence's own K/V tiles last to first; the grid's slots past them
    // (it counts the packed keys' tiles) stay past them, seeing no key.
    Value tiles =
        arith::CeilDivUIOp::create(builder, loc, kvLen, indexConst(blockN));
    Value slot = kvTileIndex;
    Value own = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ult,
                                      slot, tiles);
    Value reversed = arith::SubIOp::create(
        builder, loc, arith::SubIOp::create(builder, loc, tiles, indexConst(1)),
        slot);
    kvTileIndex = arith::SelectOp::create(builder, loc, own, reversed, slot);
  }
  Value kvStart =
      arith::MulIOp::create(builder, loc, kvTileIndex, indexConst(blockN));

  // K, V and their gradients stay on chip for the whole program.
  Value kTile = LoadTileOp::create(builder, loc, kvTileType, op.getKey(), b,
                                   kvHead, kvStart, kvRows);
  Value vTile = LoadTileOp::create(builder, loc, kvTileType, op.getValue(), b,
                                   kvHead, kvStart, kvRows);
  // Tail columns need the mask unless Sk is a known multiple of block-n (a
  // varlen batch's sequences have lengths of their own).
  int64_t staticKvLen =
      cast<MemRefType>(op.getKey().getType()).getShape()[2];
  bool maskScores = mask != MaskKind::none || maskMod || varlen ||
                    ShapedType::isDynamic(staticKvLen) ||
                    staticKvLen % blockN != 0;
  // A varlen K/V tile past its sequence's keys (the grid counts the
  // packed keys' tiles) is seen by no query: the range of no queries.
  Value rangeQLen = qLen;
  if (varlen) {
    Value hasKeys = arith::CmpIOp::create(
        builder, loc, arith::CmpIPredicate::ult, kvStart, kvLen);
    rangeQLen =
        arith::SelectOp::create(builder, loc, hasKeys, qLen, indexConst(0));
  }

  // GQA/MQA: K/V head j serves query heads [j * G, (j + 1) * G).
  Value group = arith::DivUIOp::create(builder, loc, qHeads, kvHeads);
  Value firstHead = arith::MulIOp::create(builder, loc, kvHead, group);
  // With a mask_mod the query tiles depend on the query head: the range is
  // taken per head, inside the head loop (rangeMask, above).
  // A block mask's query ranges are per head too.
  Value queryRanges = op.getQueryRanges();
  Value keyRanges = op.getKeyRanges();
  bool perHeadRange = rangeMask || queryRanges;
  auto queryTileRange = [&](OpBuilder &at, Value h) {
    auto range = QTileRangeOp::create(
        at, loc, at.getIndexType(), at.getIndexType(), kvStart, rangeQLen,
        kvLen,
        perHeadRange ? seq : Value(), perHeadRange ? h : Value(), queryRanges,
        blockM, blockN, mask);
    if (rangeMask)
      cloneMaskWithoutCaptures(op.getMaskMod(), range.getMaskMod());
    return range;
  };
  QTileRangeOp sharedRange;
  if (!perHeadRange)
    sharedRange = queryTileRange(builder, Value());
  Value zero = indexConst(0), one = indexConst(1);
  Value blockMValue = indexConst(blockM);

  auto headLoop = scf::ForOp::create(
      builder, loc, zero, group, one,
      ValueRange{zeros({blockN, headDim}), zeros({blockN, headDim})},
      [&](OpBuilder &nested, Location loc, Value g, ValueRange headAcc) {
        Value h = arith::AddIOp::create(nested, loc, firstHead, g);
        QTileRangeOp qRange =
            perHeadRange ? queryTileRange(nested, h) : sharedRange;
        // The rows that keep every key of the tile, by the block mask:
        // query tiles inside them skip the mask_mod.
        std::optional<WholeBounds> wholeRows;
        if (queryRanges) {
          Value keysEnd = arith::MinSIOp::create(
              nested, loc,
              arith::AddIOp::create(
                  nested, loc, kvStart,
                  arith::ConstantIndexOp::create(nested, loc, blockN)),
              kvLen);
          wholeRows = buildWholeBounds(nested, loc, kvStart, keysEnd, seq, h,
                                       queryRanges);
        }
        auto qLoop = scf::ForOp::create(
            nested, loc, qRange.getBegin(), qRange.getEnd(), one, headAcc,
            [&](OpBuilder &inner, Location loc, Value qTileIndex,
                ValueRange acc) {
              Value gradKey = acc[0], gradValue = acc[1];
              Value qStart =
                  arith::MulIOp::create(inner, loc, qTileIndex, blockMValue);
              Value qTile =
                  LoadTileOp::create(inner, loc, qTileType, op.getQuery(), b,
                                     h, qStart, qRows);
              Value gradOutput =
                  LoadTileOp::create(inner, loc, qTileType,
                                     op.getGradOutput(), b, h, qStart, qRows);
              Value lse = LoadTileOp::create(inner, loc, rowType, op.getLse(),
                                             b, h, qStart, qRows);
              Value delta = LoadTileOp::create(inner, loc, rowType,
                                               op.getDelta(), b, h, qStart,
                                               qRows);
              // P = exp(scale * Q K^T - LSE), masked scores 0
              Value rawScores = TileMatmulOp::create(inner, loc, scoreType,
                                                     qTile, kTile, Value(),
                                                     /*transpose_rhs=*/true);
              Value keptWhole;
              if (wholeRows)
                keptWhole = buildInsideWholeRange(inner, loc, qStart, blockM,
                                                  *wholeRows);
              Value scores = buildVariantScores(
                  inner, loc, rawScores, op.getScoreMod(), op.getMaskMod(),
                  mask, maskScores, scale, qStart, kvStart, qLen, kvLen, seq,
                  h, op.getCaptures(), keptWhole);
              Value probs = RecomputeProbsOp::create(
                  inner, loc, scores, lse,
                  builder.getF32FloatAttr(scoreMod ? 1.0f : scale));
              // dV += P^T dO
              Value gradValueNext = TileMatmulOp::create(
                  inner, loc, kvAccType,
                  castTile(inner, loc, probs, elementType), gradOutput,
                  gradValue, /*transpose_rhs=*/false, /*async=*/false,
                  /*transpose_lhs=*/true);
              // dS = scale * P * (dO V^T - D)
              Value gradProbs = TileMatmulOp::create(
                  inner, loc, scoreType, gradOutput, vTile, Value(),
                  /*transpose_rhs=*/true);
              Value gradScoresF32 =
                  SoftmaxGradOp::create(inner, loc, probs, gradProbs, delta,
                                        builder.getF32FloatAttr(scale));
              // Through the score_mod: times its derivative at the scaled
              // raw score.
              if (scoreMod) {
                auto chained = ScoreModGradOp::create(
                    inner, loc, gradScoresF32.getType(), gradScoresF32,
                    rawScores, qStart, kvStart, qLen, kvLen, seq, h,
                    op.getCaptures(), builder.getF32FloatAttr(scale));
                cloneVariantRegion(derivative, chained.getDerivative());
                gradScoresF32 = chained;
              }
              Value gradScores = castTile(inner, loc, gradScoresF32,
                                          elementType);
              // dK += dS^T Q
              Value gradKeyNext = TileMatmulOp::create(
                  inner, loc, kvAccType, gradScores, qTile, gradKey,
                  /*transpose_rhs=*/false, /*async=*/false,
                  /*transpose_lhs=*/true);
              // dQ += dS K, shared with the other K/V tiles' programs
              // (deterministic: in K/V tile order, or last to first where
              // the visits form a band: turn = the query tile's last K/V
              // tile - this one).
              Value gradQueryPart = TileMatmulOp::create(
                  inner, loc, qAccType, gradScores, kTile, Value(),
                  /*transpose_rhs=*/false);
              Value turn = kvTileIndex;
              // Deterministic with a block mask: the turns go to the K/V
              // tiles that the query tile's key ranges give it, among those
              // whose query ranges visit it (this loop's); the others add
              // nothing (their scores are all masked) and take no turn.
              Value passedTurn, taken;
              if (order && keyRanges) {
                auto kvRange = KVTileRangeOp::create(
                    inner, loc, inner.getIndexType(), inner.getIndexType(),
                    qStart, qLen, kvLen, seq, h, keyRanges,
                    /*part=*/Value(), /*num_parts=*/Value(), blockM, blockN,
                    mask);
                if (rangeMask)
                  cloneMaskWithoutCaptures(op.getMaskMod(),
                                           kvRange.getMaskMod());
                Value begin = kvRange.getBegin(), end = kvRange.getEnd();
                taken = arith::AndIOp::create(
                    inner, loc,
                    arith::CmpIOp::create(inner, loc, arith::CmpIPredicate::ule,
                                          begin, kvTileIndex),
                    arith::CmpIOp::create(inner, loc, arith::CmpIPredicate::ult,
                                          kvTileIndex, end));
                // The one before this tile in turn order (last to first,
                // as the grid runs).
                auto previous = PreviousVisitorOp::create(
                    inner, loc, inner.getI1Type(), inner.getIndexType(),
                    qTileIndex, kvTileIndex, begin, end, rangeQLen, kvLen, seq,
                    h, queryRanges, blockM, blockN, mask, lastToFirst);
                if (rangeMask)
                  cloneMaskWithoutCaptures(op.getMaskMod(),
                                           previous.getMaskMod());
                // Tile t's turn is its rank r(t) = tiles - 1 - t (last to
                // first); it waits for r(previous) + 1, or 0 when first.
                auto rank = [&](Value tile) -> Value {
                  return arith::SubIOp::create(
                      inner, loc,
                      arith::SubIOp::create(inner, loc, numKvTiles, one), tile);
                };
                passedTurn = rank(kvTileIndex);
                turn = arith::SelectOp::create(
                    inner, loc, previous.getFound(),
                    arith::AddIOp::create(inner, loc,
                                          rank(previous.getPrevious()), one),
                    zero);
              } else if (lastToFirst) {
                // The K/V tiles that visit this query tile are [begin,
                // end) of its range (with a mask_mod: tileRangesAgree,
                // per head): this one's turn counts back from end - 1.
                auto kvRange =
                    rangeMask
                        ? KVTileRangeOp::create(
                              inner, loc, inner.getIndexType(),
                              inner.getIndexType(), qStart, qLen, kvLen, seq, h,
                              /*ranges=*/Value(), /*part=*/Value(),
                              /*num_parts=*/Value(), blockM, blockN, mask)
                        : KVTileRangeOp::create(inner, loc, qStart, qLen, kvLen,
                                                blockM, blockN, mask);
                if (rangeMask)
                  cloneMaskWithoutCaptures(op.getMaskMod(),
                                           kvRange.getMaskMod());
                Value lastKvTile =
                    arith::SubIOp::create(inner, loc, kvRange.getEnd(), one);
                turn = arith::SubIOp::create(inner, loc, lastKvTile,
                                             kvTileIndex);
              }
              // dq_chains: rank `turn` adds to chain turn mod K on its
              // turn turn / K.
              Value copy = h;
              if (int64_t chains = op.getDqChains(); chains > 1) {
                Value k = arith::ConstantIndexOp::create(inner, loc, chains);
                Value chain = arith::RemUIOp::create(inner, loc, turn, k);
                turn = arith::DivUIOp::create(inner, loc, turn, k);
                copy = chainCopyHead(inner, loc, chain, qHeads, h);
              }
              if (!passedTurn)
                passedTurn = turn;
              if (order)
                WaitTurnOp::create(inner, loc, order, seq, copy, qTileIndex,
                                   turn, taken);
              AccumulateTileOp::create(inner, loc, gradQueryPart,
                                       op.getDqAccum(), b, copy, qStart, qRows);
              if (order)
                PassTurnOp::create(inner, loc, order, seq, copy, qTileIndex,
                                   passedTurn, taken);
              scf::YieldOp::create(inner, loc,
                                   ValueRange{gradKeyNext, gradValueNext});
            });
        scf::YieldOp::create(nested, loc, qLoop.getResults());
      });

  Type gradType =
      cast<MemRefType>(op.getGradKey().getType()).getElementType();
  StoreTileOp::create(builder, loc,
                      castTile(builder, loc, headLoop.getResult(0), gradType),
                      op.getGradKey(), b, kvHead, kvStart, kvRows);
  StoreTileOp::create(builder, loc,
                      castTile(builder, loc, headLoop.getResult(1), gradType),
                      op.getGradValue(), b, kvHead, kvStart, kvRows);
  return success();
}

/// dQ = dq_accum (its chains' copies summed) rounded to dQ's element type.
void BackwardTiler::buildPostprocess() {
  OpBuilder::InsertionGuard guard(builder);
  GridOp grid;
  Value qStart = openQueryTileGrid(grid, "dq");
  Value h = grid.getHeadIndex();
  ProgramRows rows = queryRows(grid.getBatchIndex());
  // The chains' copies summed in chain order (dq_chains).
  Value accumulated;
  for (int64_t chain = 0; chain < op.getDqChains(); ++chain) {
    Value copy = LoadTileOp::create(
        builder, loc, tileType(blockM, builder.getF32Type()), op.getDqAccum(),
        rows.batch, chainHead(chain, h), qStart, rows.qRows);
    accumulated = accumulated
                      ? arith::AddFOp::create(builder, loc, accumulated, copy)
                      : copy;
  }
  Type gradType =
      cast<MemRefType>(op.getGradQuery().getType()).getElementType();
  StoreTileOp::create(builder, loc,
                      castTile(builder, loc, accumulated, gradType),
                      op.getGradQuery(), rows.batch, h, qStart, rows.qRows);
  if (op.getSinkShares())
    sumSinkShares(grid);
}

/// The deterministic sinks' gradient: program (0, h, 0) adds head h's
/// query tiles' shares into a block-m vector, entry after entry, block-m
/// tiles at a time (tile t into element t mod block-m), and stores the
/// vector's fa.tile_total: the same operations in the same order in every
/// run. The other programs run the loops zero times but reach
/// fa.tile_total too (it synchronizes the program's threads). The entries
/// are walked one after another: a varlen batch of thousands of sequences
/// makes it a long tail of the dq kernel.
void BackwardTiler::sumSinkShares(GridOp grid) {
  Value shares = op.getSinkShares();
  Value h = grid.getHeadIndex();
  Value zero = indexConst(0), one = indexConst(1);
  Value blockMValue = indexConst(blockM);
  auto isZero = [&](Value v) {
    return arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, v,
                                 zero);
  };
  Value summing = arith::AndIOp::create(
      builder, loc, isZero(grid.getBatchIndex()), isZero(grid.getTileIndex()));
  Value entries =
      arith::SelectOp::create(builder, loc, summing, dim(shares, 0), zero);
  Value allTiles = dim(shares, 2), packedRows = dim(op.getQuery(), 2);
  auto rowType = RankedTensorType::get({blockM}, builder.getF32Type());
  auto perEntry = scf::ForOp::create(
      builder, loc, zero, entries, one, ValueRange{zeros({blockM})},
      [&](OpBuilder &nested, Location loc, Value entry, ValueRange sum) {
        // The entry's query tiles: a varlen sequence's own, else all.
        Value tiles = allTiles;
        if (varlen) {
          auto [first, limit] = buildSequenceRows(
              nested, loc, op.getCuSeqlensQ(), entry, packedRows);
          // (At most the workspace's: a max_seqlen_q below a sequence's
          // length must not read another head's shares.)
          tiles = arith::MinUIOp::create(
              nested, loc,
              arith::CeilDivUIOp::create(
                  nested, loc, arith::SubIOp::create(nested, loc, limit, first),
                  blockMValue),
              allTiles);
        }
        auto perChunk = scf::ForOp::create(
            nested, loc, zero, tiles, blockMValue, sum,
            [&](OpBuilder &inner, Location loc, Value chunk,
                ValueRange partial) {
              // Shares past the entry's tiles read as zero.
              Value part =
                  LoadTileOp::create(inner, loc, rowType, shares, entry, h,
                                     chunk, ValueRange{zero, tiles});
              scf::YieldOp::create(inner, loc,
                                   ValueRange{arith::AddFOp::create(
                                       inner, loc, partial[0], part)});
            });
        scf::YieldOp::create(nested, loc, perChunk.getResults());
      });
  Value total = TileTotalOp::create(builder, loc, perEntry.getResult(0));
  auto store = scf::IfOp::create(builder, loc, summing);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(store.thenBlock()->getTerminator());
  memref::StoreOp::create(builder, loc, total, op.getGradSinks(),
                          ValueRange{h});
}

struct FATileBackwardPass
    : public mlir::fa::impl::FATileBackwardBase<FATileBackwardPass> {
  using FATileBackwardBase::FATileBackwardBase;

  void runOnOperation() override {
    if (failed(checkBlockSizes(getOperation(), blockM, blockN)))
      return signalPassFailure();
    SmallVector<AttentionBackwardOp> ops;
    getOperation().walk([&](AttentionBackwardOp op) { ops.push_back(op); });
    for (AttentionBackwardOp op : ops) {
      if (failed(BackwardTiler(op, blockM, blockN).build()))
        return signalPassFailure();
      op.erase();
    }
  }
};

} // namespace
