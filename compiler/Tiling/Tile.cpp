//===- Tile.cpp - fa.attention -> tiled FlashAttention-2 ----------*- C++ -*-===//
//
// The problem-to-tile step. Each fa.attention becomes a grid of programs; a
// program owns block-m query rows of one (batch, head) and streams the K/V
// rows in block-n tiles through the online softmax. With partials
// (split-KV) a "split" grid runs each query tile once per part of its keys
// and a "combine" grid merges the parts by their log-sum-exps.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/Tiling/TileArithmetic.h"
#include "compiler/Tiling/Variants.h"
#include "compiler/Utils/IRUtils.h"
#include "lib/LaunchPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

#define DEBUG_TYPE "fa-tile"

namespace mlir::fa {
#define GEN_PASS_DEF_FATILE
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// FP8's probabilities are quantized from kFloat8ProbsScale * p: p <= 1
/// becomes at most 256 (e4m3's largest is 448), and probabilities down to
/// 2^-14 stay normal e4m3 numbers (2^-6 and up) instead of flushing to
/// subnormals (2^-9 the smallest).
constexpr float kFloat8ProbsScale = 256.0f;

struct TileConfig {
  int64_t blockM;
  int64_t blockN;
  /// A paged cache's K/V tiles read row by row (fa.load_tile's pages):
  /// pages that need not hold whole tiles.
  bool pageGather = false;
};

/// Builds the tiled form of one fa.attention in front of it.
class AttentionTiler {
public:
  AttentionTiler(AttentionOp op, TileConfig config)
      : op(op), config(config), builder(op) {}

  void build();

private:
  /// The "combine" grid of a split-KV forward: each query tile's parts
  /// merged by their log-sum-exps (fa.merge_partial), the sinks joined
  /// once, O and LSE stored.
  void buildCombine(Value batch, Value qHeads, Value qLen);

  Value indexConst(int64_t v) {
    return arith::ConstantIndexOp::create(builder, op.getLoc(), v);
  }
  Value dim(Value memref, int64_t d) {
    return memref::DimOp::create(builder, op.getLoc(), memref, d);
  }
  Value splat(RankedTensorType type, float value) {
    return arith::ConstantOp::create(
        builder, op.getLoc(),
        DenseElementsAttr::get(type, builder.getF32FloatAttr(value)));
  }
  /// Tail columns of the last K/V tile need masking unless Sk is a known
  /// multiple of block-n (a varlen batch's sequences have lengths of their
  /// own).
  bool needsMask(int64_t staticKvLen) {
    return op.getMask() != MaskKind::none || !op.getMaskMod().empty() ||
           op.getCuSeqlensK() || op.getKvLens() ||
           ShapedType::isDynamic(staticKvLen) ||
           staticKvLen % config.blockN != 0;
  }

  /// The sinks joining rows [qStart, ...) of head h (each row's state m,
  /// l): the head's sink (fa.join_sink), or with sinks_per_row each row's
  /// own of the query's qLen rows (fa.join_row_sinks).
  std::tuple<Value, Value, Value> joinSinks(RankedTensorType rowVecType,
                                            Value h, Value qStart, Value qLen,
                                            Value m, Value l) {
    Location loc = op.getLoc();
    Value sinks = op.getSinks();
    if (op.getSinksPerRow()) {
      auto join =
          JoinRowSinksOp::create(builder, loc, rowVecType, rowVecType,
                                 rowVecType, sinks, h, qStart, qLen, m, l);
      return {join.getNewMax(), join.getNewSum(), join.getCorrection()};
    }
    Value sink = memref::LoadOp::create(builder, loc, sinks, ValueRange{h});
    auto join = JoinSinkOp::create(builder, loc, rowVecType, rowVecType,
                                   rowVecType, sink, m, l);
    return {join.getNewMax(), join.getNewSum(), join.getCorrection()};
  }

  AttentionOp op;
  TileConfig config;
  OpBuilder builder;
};

void AttentionTiler::build() {
  Location loc = op.getLoc();
  auto queryType = cast<MemRefType>(op.getQuery().getType());
  auto keyType = cast<MemRefType>(op.getKey().getType());
  auto outputType = cast<MemRefType>(op.getOutput().getType());
  Type elementType = queryType.getElementType();
  if (allowsApproximateMath(elementType))
    allowApproximateMath(op.getScoreMod());
  int64_t headDim = op.getHeadDim();
  Type f32 = builder.getF32Type();
  auto rowVecType = RankedTensorType::get({config.blockM}, f32);
  auto accType = RankedTensorType::get({config.blockM, headDim}, f32);
  auto qTileType =
      RankedTensorType::get({config.blockM, headDim}, elementType);
  auto kvTileType =
      RankedTensorType::get({config.blockN, headDim}, elementType);
  auto scoreType = RankedTensorType::get({config.blockM, config.blockN}, f32);

  // A varlen batch packs its sequences' rows into one batch entry: a
  // program of sequence b reads the rows cu_seqlens[b] .. cu_seqlens[b + 1]
  // of batch 0, and the grid's tile count is the packed rows' (a bound).
  Value cuSeqlensQ = op.getCuSeqlensQ(), cuSeqlensK = op.getCuSeqlensK();
  bool varlen = bool(cuSeqlensQ);
  Value one = indexConst(1);
  Value batch =
      varlen ? arith::SubIOp::create(builder, loc, dim(cuSeqlensQ, 0), one)
             : dim(op.getQuery(), 0);
  Value qHeads = dim(op.getQuery(), 1);
  Value qLen = dim(op.getQuery(), 2);
  Value kvHeads = dim(op.getKey(), 1);
  Value kvLen = dim(op.getKey(), 2);
  // A paged cache: K and V are pages of P = dim(K, 2) rows; an entry's
  // keys are its table's pages one after another.
  Value blockTable = op.getBlockTable();
  Value pageSize = kvLen;
  if (blockTable)
    kvLen = arith::MulIOp::create(builder, loc, dim(blockTable, 1), pageSize);
  Value blockM = indexConst(config.blockM);
  Value numQTiles = arith::CeilDivUIOp::create(builder, loc, qLen, blockM);

  // Split-KV: part s of batch entry (sequence) b runs as grid batch index
  // s * batch + b; the parts are dim(partial output, 0) / (O's batch
  // entries), O's entries being the batch's (1 for a varlen batch).
  Value partialOutput = op.getPartialOutput();
  bool split = bool(partialOutput);
  Value entries = dim(op.getOutput(), 0);
  Value gridBatch =
      !split   ? batch
      : varlen ? arith::MulIOp::create(builder, loc, batch,
                                       dim(partialOutput, 0))
               : dim(partialOutput, 0);
  auto grid = GridOp::create(builder, loc, gridBatch, qHeads, numQTiles);
  grid.setRagged(varlen);
  if (split)
    grid.setProgram("split");
  builder.setInsertionPointToStart(&grid.getBodyBlock());
  // The merge's programs may launch now and wait for the parts (their
  // launch overlaps this grid).
  if (split)
    LaunchNextProgramOp::create(builder, loc);
  Value b = grid.getBatchIndex(), h = grid.getHeadIndex();
  Value part, numParts;
  if (split) {
    part = arith::DivUIOp::create(builder, loc, b, batch);
    b = arith::RemUIOp::create(builder, loc, b, batch);
    numParts =
        arith::DivUIOp::create(builder, loc, dim(partialOutput, 0), entries);
  }
  // The rows of the program's sequence: [qFirst, qLimit) of the packed
  // queries, [kvFirst, kvLimit) of the packed keys, as the loads and stores
  // take them (qRows, kvRows); qLen and kvLen become the sequence's
  // lengths, and every index below counts from its start.
  Value rowsBatch = b;
  SmallVector<Value, 2> qRows, kvRows;
  if (varlen) {
    rowsBatch = indexConst(0);
    auto [qFirst, qLimit] =
        buildSequenceRows(builder, loc, cuSeqlensQ, b, qLen);
    // Keys in a paged cache: sequence b's are the first cu_seqlens_k[b + 1]
    // - cu_seqlens_k[b] rows of its table's pages, not packed rows.
    Value pagedKeys =
        blockTable ? buildSequenceLength(builder, loc, cuSeqlensK, b, kvLen)
                   : Value();
    auto [kvFirst, kvLimit] =
        blockTable ? std::make_pair(indexConst(0), pagedKeys)
                   : buildSequenceRows(builder, loc, cuSeqlensK, b, kvLen);
    qLen = arith::SubIOp::create(builder, loc, qLimit, qFirst);
    kvLen = blockTable ? pagedKeys
                       : arith::SubIOp::create(builder, loc, kvLimit, kvFirst);
    qRows = {qFirst, qLimit};
    kvRows = {kvFirst, kvLimit};
  }
  // A KV cache's filled part: the first kv_lens[b] keys (clamped to the
  // keys there are) are the program's keys; loads read none past them.
  if (Value kvLens = op.getKvLens()) {
    Value used = arith::IndexCastUIOp::create(
        builder, loc, builder.getIndexType(),
        memref::LoadOp::create(builder, loc, kvLens, ValueRange{b}));
    kvLen = arith::MinUIOp::create(builder, loc, used, kvLen);
    Value kvFirst = varlen ? kvRows[0] : indexConst(0);
    kvRows = {kvFirst, arith::AddIOp::create(builder, loc, kvFirst, kvLen)};
  }

  // K/V entries by index (cache_batch_idx): entry b reads K/V entry
  // index[b], clamped into K's batch.
  Value kvEntry = rowsBatch;
  if (Value index = op.getCacheBatchIdx()) {
    Value entry = arith::IndexCastUIOp::create(
        builder, loc, builder.getIndexType(),
        memref::LoadOp::create(builder, loc, index, ValueRange{b}));
    kvEntry = arith::MinUIOp::create(
        builder, loc, entry,
        arith::SubIOp::create(builder, loc, dim(op.getKey(), 0), one));
  }

  // GQA/MQA: query head h reads K/V head h / (Hq / Hkv).
  Value group = arith::DivUIOp::create(builder, loc, qHeads, kvHeads);
  Value kvHead = arith::DivUIOp::create(builder, loc, h, group);
  Value qStart =
      arith::MulIOp::create(builder, loc, grid.getQTileIndex(), blockM);

  // The Q tile stays resident for the whole K/V loop.
  Value qTile = LoadTileOp::create(builder, loc, qTileType, op.getQuery(),
                                   rowsBatch, h, qStart, qRows);
  // Online-softmax state: m = -inf, l = 0, acc = 0.
  Value maxInit =
      splat(rowVecType, -std::numeric_limits<float>::infinity());
  Value sumInit = splat(rowVecType, 0.0f);
  Value accInit = splat(accType, 0.0f);

  // A mask_mod travels with the ops that use it: the K/V range (which
  // tiles to visit; not for a mask that reads a captured tensor) and the
  // mask (which scores of a tile to keep).
  // A block mask's key ranges narrow the range too (the caller's bounds
  // for the masks the compiler cannot read).
  bool rangeMask = !op.getMaskMod().empty() &&
                   !readsCapturedTensors(op.getMaskMod());
  Value keyRanges = op.getKeyRanges();
  bool atProgram = rangeMask || keyRanges;
  Value modBatch = atProgram ? b : Value(), modHead = atProgram ? h : Value();
  // A varlen query tile past its sequence's rows (the grid counts the
  // longest sequence's tiles) sees no key: its range is that of no keys,
  // so that every consumer of the range (the K/V loop, a producer's
  // copies) visits nothing, and it stores nothing.
  Value rangeKvLen = kvLen;
  if (varlen) {
    Value hasRows = arith::CmpIOp::create(
        builder, loc, arith::CmpIPredicate::ult, qStart, qLen);
    rangeKvLen = arith::SelectOp::create(builder, loc, hasRows, kvLen,
                                         indexConst(0));
  }
  auto range = KVTileRangeOp::create(
      builder, loc, builder.getIndexType(), builder.getIndexType(), qStart,
      qLen, rangeKvLen, modBatch, modHead, keyRanges,
      // Split-KV: part s visits its share of the range's tiles.
      split ? part : Value(), split ? numParts : Value(), config.blockM,
      config.blockN, op.getMask());
  if (rangeMask)
    cloneMaskWithoutCaptures(op.getMaskMod(), range.getMaskMod());
  Value kvBegin = range.getBegin(), kvEnd = range.getEnd();
  // Two key intervals apart (sink tokens and a window): the loop runs over
  // the visits, the range's tiles less those of the gap between them.
  KVTileHoleOp hole;
  if (rangeMask && !split && !keyRanges && skipsKeyHole(op.getMaskMod())) {
    hole = KVTileHoleOp::create(
        builder, loc, builder.getIndexType(), builder.getIndexType(), kvBegin,
        kvEnd, qStart, qLen, rangeKvLen, b, h, config.blockM, config.blockN);
    cloneMaskWithoutCaptures(op.getMaskMod(), hole.getMaskMod());
    kvEnd = kvVisitsEnd(builder, loc, kvEnd, hole.getHoleBegin(),
                        hole.getHoleEnd());
  }
  // The keys every row of the tile keeps, by the block mask: K/V tiles
  // inside them skip the mask_mod.
  std::optional<WholeBounds> wholeKeys;
  if (keyRanges) {
    Value rowsEnd = arith::MinSIOp::create(
        builder, loc,
        arith::AddIOp::create(builder, loc, qStart, indexConst(config.blockM)),
        qLen);
    wholeKeys =
        buildWholeBounds(builder, loc, qStart, rowsEnd, b, h, keyRanges);
  }
  Value blockN = indexConst(config.blockN);
  bool maskScores = needsMask(keyType.getShape()[2]);
  float scale = op.getScale().convertToFloat();
  bool scoreMod = !op.getScoreMod().empty();
  MaskKind mask = op.getMask();
  Value key = op.getKey(), value = op.getValue();
  // The last column of the page table and the last page of the pool.
  Value lastColumn, lastPage, firstRow;
  if (blockTable) {
    lastColumn = arith::SubIOp::create(builder, loc, dim(blockTable, 1), one);
    lastPage = arith::SubIOp::create(builder, loc, dim(key, 0), one);
    firstRow = indexConst(0);
  }

  // FP8 inputs: S is scaled by Q's and K's descales (a factor of the
  // softmax scale); P is quantized from 256 p, so that small probabilities
  // stay normal numbers, and O = V's descale / 256 * acc / l.
  bool float8 = isa<Float8E4M3FNType>(elementType);
  Value scoreFactor, outputScale;
  if (float8) {
    outputScale = arith::ConstantOp::create(
        builder, loc, builder.getF32FloatAttr(1.0f / kFloat8ProbsScale));
    if (op.getQDescale()) {
      auto descale = [&](Value factors) -> Value {
        return memref::LoadOp::create(builder, loc, factors,
                                      ValueRange{kvEntry, kvHead});
      };
      scoreFactor = arith::MulFOp::create(
          builder, loc, descale(op.getQDescale()), descale(op.getKDescale()));
      outputScale = arith::MulFOp::create(builder, loc, outputScale,
                                          descale(op.getVDescale()));
    }
  }

  auto loop = scf::ForOp::create(
      builder, loc, kvBegin, kvEnd, one, ValueRange{maxInit, sumInit, accInit},
      [&](OpBuilder &nested, Location loc, Value visit, ValueRange state) {
        Value runningMax = state[0], runningSum = state[1], acc = state[2];
        Value kvTile =
            hole ? kvTileOfVisit(nested, loc, visit, hole.getHoleBegin(),
                                 hole.getHoleEnd())
                 : visit;
        Value kvStart = arith::MulIOp::create(nested, loc, kvTile, blockN);
        Value kvBatch = kvEntry, kvRow = kvStart;
        SmallVector<Value, 2> kvLoadRows = kvRows;
        if (blockTable && config.pageGather) {
          // Pages that need not hold whole tiles: the load looks each
          // row's page up in the table (row k of entry b's keys).
          kvBatch = b;
          kvLoadRows = {firstRow, kvLen};
        } else if (blockTable) {
          // The tile lies in one page (block-n divides P): page
          // table[b, start / P] (clamped into the pool), rows from
          // start % P, those before kv_len.
          PagedTile paged = buildPagedTile(nested, loc, blockTable, b, kvStart,
                                           pageSize, lastColumn, lastPage);
          kvBatch = paged.page;
          kvRow = paged.row;
          Value keysLeft = arith::SubIOp::create(nested, loc, kvLen, kvStart);
          kvLoadRows = {firstRow,
                        arith::AddIOp::create(nested, loc, kvRow, keysLeft)};
        }
        Value pages = config.pageGather ? blockTable : Value();
        Value kTile = LoadTileOp::create(nested, loc, kvTileType, key, kvBatch,
                                         kvHead, kvRow, kvLoadRows, pages);
        Value vTile =
            LoadTileOp::create(nested, loc, kvTileType, value, kvBatch, kvHead,
                               kvRow, kvLoadRows, pages);
        // S = Q K^T
        Value scores = TileMatmulOp::create(nested, loc, scoreType, qTile,
                                            kTile, /*acc=*/Value(),
                                            /*transpose_rhs=*/true);
        // A score_mod takes the scaled score, so the softmax's scale is
        // then 1.
        Value keptWhole;
        if (wholeKeys)
          keptWhole = buildInsideWholeRange(nested, loc, kvStart,
                                            config.blockN, *wholeKeys);
        scores = buildVariantScores(nested, loc, scores, op.getScoreMod(),
                                    op.getMaskMod(), mask, maskScores, scale,
                                    qStart, kvStart, qLen, kvLen, b, h,
                                    op.getCaptures(), keptWhole);
        auto softmax =
            OnlineSoftmaxOp::create(nested, loc, scores, runningMax, runningSum,
                                    scoreMod ? 1.0f : scale, scoreFactor,
                                    float8 ? kFloat8ProbsScale : 1.0f);
        // acc = alpha * acc + P V
        Value rescaled = RescaleOp::create(nested, loc, acc,
                                           softmax.getCorrection());
        Value probs = castTile(nested, loc, softmax.getProbs(), elementType);
        Value accNext = TileMatmulOp::create(nested, loc, accType, probs,
                                             vTile, rescaled,
                                             /*transpose_rhs=*/false);
        scf::YieldOp::create(
            nested, loc,
            ValueRange{softmax.getNewMax(), softmax.getNewSum(), accNext});
      });

  Value finalMax = loop.getResult(0), finalSum = loop.getResult(1),
        finalAcc = loop.getResult(2);
  if (split) {
    // The part's own result, normalized, in f32; the sinks join the
    // merged result.
    auto finalize =
        FinalizeOp::create(builder, loc, finalAcc, finalMax, finalSum);
    Value partEntry = arith::AddIOp::create(
        builder, loc, arith::MulIOp::create(builder, loc, part, entries),
        rowsBatch);
    StoreTileOp::create(builder, loc, finalize.getOutput(), partialOutput,
                        partEntry, h, qStart, qRows);
    StoreTileOp::create(builder, loc, finalize.getLse(), op.getPartialLse(),
                        partEntry, h, qStart, qRows);
    builder.setInsertionPointAfter(grid);
    buildCombine(batch, qHeads, dim(op.getQuery(), 2));
    return;
  }
  if (op.getSinks()) {
    // The head's sink logit joins each row's denominator (no value row).
    auto [newMax, newSum, correction] =
        joinSinks(rowVecType, h, qStart, qLen, finalMax, finalSum);
    finalMax = newMax;
    finalSum = newSum;
    finalAcc = RescaleOp::create(builder, loc, finalAcc, correction);
  }
  auto finalize = FinalizeOp::create(builder, loc, finalAcc, finalMax, finalSum,
                                     outputScale);
  Value output =
      castTile(builder, loc, finalize.getOutput(), outputType.getElementType());
  StoreTileOp::create(builder, loc, output, op.getOutput(), rowsBatch, h,
                      qStart, qRows);
  StoreTileOp::create(builder, loc, finalize.getLse(), op.getLse(), rowsBatch,
                      h, qStart, qRows);
}

void AttentionTiler::buildCombine(Value batch, Value qHeads, Value qLen) {
  Location loc = op.getLoc();
  auto outputType = cast<MemRefType>(op.getOutput().getType());
  int64_t headDim = op.getHeadDim();
  Type f32 = builder.getF32Type();
  // Few rows: the merge reads each part's rows once, and a tile of rows
  // per program keeps two f32 tiles in registers.
  int64_t rows = std::min<int64_t>(config.blockM, ::fa::kCombineRows);
  auto rowVecType = RankedTensorType::get({rows}, f32);
  auto outType = RankedTensorType::get({rows, headDim}, f32);
  Value cuSeqlensQ = op.getCuSeqlensQ();
  bool varlen = bool(cuSeqlensQ);
  Value numTiles =
      arith::CeilDivUIOp::create(builder, loc, qLen, indexConst(rows));
  auto grid = GridOp::create(builder, loc, batch, qHeads, numTiles);
  grid.setRagged(varlen);
  grid.setProgram("combine");
  builder.setInsertionPointToStart(&grid.getBodyBlock());
  // Launched while the parts run: nothing of theirs is read before this.
  WaitPreviousProgramOp::create(builder, loc);
  Value b = grid.getBatchIndex(), h = grid.getHeadIndex();
  Value rowsBatch = b;
  SmallVector<Value, 2> qRows;
  if (varlen) {
    rowsBatch = indexConst(0);
    auto [qFirst, qLimit] = buildSequenceRows(builder, loc, cuSeqlensQ, b, qLen);
    qRows = {qFirst, qLimit};
  }
  Value qStart =
      arith::MulIOp::create(builder, loc, grid.getTileIndex(), indexConst(rows));
  Value entries = dim(op.getOutput(), 0);
  Value partialOutput = op.getPartialOutput(), partialLse = op.getPartialLse();
  Value numParts =
      arith::DivUIOp::create(builder, loc, dim(partialOutput, 0), entries);
  Value outInit = splat(outType, 0.0f);
  Value lseInit = splat(rowVecType, -std::numeric_limits<float>::infinity());
  // Part `part`'s output and LSE tiles.
  auto loadPart = [&](OpBuilder &b, Location loc,
                      Value part) -> std::pair<Value, Value> {
    Value entry = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, part, entries), rowsBatch);
    Value partOut = LoadTileOp::create(b, loc, outType, partialOutput, entry, h,
                                       qStart, qRows);
    Value partLse = LoadTileOp::create(b, loc, rowVecType, partialLse, entry, h,
                                       qStart, qRows);
    return {partOut, partLse};
  };
  // Parts in chunks of combinePartsInFlight: a chunk's loads come before
  // its merges (each merge waits for the one before), so the loads of a
  // chunk are in flight together. The parts past the last whole chunk are
  // merged one at a time.
  int64_t inFlight = ::fa::combinePartsInFlight(headDim);
  SmallVector<Value> offsets;
  for (int64_t i = 1; i < inFlight; ++i)
    offsets.push_back(indexConst(i));
  Value wholeChunks = arith::MulIOp::create(
      builder, loc,
      arith::DivUIOp::create(builder, loc, numParts, indexConst(inFlight)),
      indexConst(inFlight));
  auto chunks = scf::ForOp::create(
      builder, loc, indexConst(0), wholeChunks, indexConst(inFlight),
      ValueRange{outInit, lseInit},
      [&](OpBuilder &nested, Location loc, Value first, ValueRange state) {
        SmallVector<std::pair<Value, Value>> parts = {
            loadPart(nested, loc, first)};
        for (Value offset : offsets)
          parts.push_back(loadPart(
              nested, loc, arith::AddIOp::create(nested, loc, first, offset)));
        Value out = state[0], lse = state[1];
        for (auto [partOut, partLse] : parts) {
          auto merge =
              MergePartialOp::create(nested, loc, out, lse, partOut, partLse);
          out = merge.getNewOutput();
          lse = merge.getNewLse();
        }
        scf::YieldOp::create(nested, loc, ValueRange{out, lse});
      });
  auto loop = scf::ForOp::create(
      builder, loc, wholeChunks, numParts, indexConst(1), chunks.getResults(),
      [&](OpBuilder &nested, Location loc, Value part, ValueRange state) {
        auto [partOut, partLse] = loadPart(nested, loc, part);
        auto merge = MergePartialOp::create(nested, loc, state[0], state[1],
                                            partOut, partLse);
        scf::YieldOp::create(
            nested, loc, ValueRange{merge.getNewOutput(), merge.getNewLse()});
      });
  Value output = loop.getResult(0), lse = loop.getResult(1);
  if (op.getSinks()) {
    // The merged (O, LSE) is the state (acc = O, m = LSE, l = 1) of the
    // online softmax: the sink joins it as in the unsplit forward (a row
    // without keys has m = -inf, so its l = 1 is scaled away).
    auto [newMax, newSum, correction] =
        joinSinks(rowVecType, h, qStart, qLen, lse, splat(rowVecType, 1.0f));
    Value rescaled = RescaleOp::create(builder, loc, output, correction);
    auto finalize = FinalizeOp::create(builder, loc, rescaled, newMax, newSum);
    output = finalize.getOutput();
    lse = finalize.getLse();
  }
  StoreTileOp::create(builder, loc,
                      castTile(builder, loc, output,
                               outputType.getElementType()),
                      op.getOutput(), rowsBatch, h, qStart, qRows);
  StoreTileOp::create(builder, loc, lse, op.getLse(), rowsBatch, h, qStart,
                      qRows);
}

struct FATilePass : public mlir::fa::impl::FATileBase<FATilePass> {
  using FATileBase::FATileBase;

  void runOnOperation() override {
    if (failed(checkBlockSizes(getOperation(), blockM, blockN)))
      return signalPassFailure();
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
    for (AttentionOp op : ops) {
      AttentionTiler(op, {blockM, blockN, pageGather}).build();
      op.erase();
    }
  }
};

} // namespace
