//===- PlaceWgmma.cpp - Placement for the Hopper wgmma strategy -*- C++ -*-===//
//
// Decides where every tile of an fa.grid program lives for warpgroup MMA:
// Q, K, V in swizzled shared memory (128-byte rows; 64-byte rows for FP8
// head dims that are not whole 128-byte rows), read by wgmma descriptors,
// S, P and O in accumulator fragments, P moved to A-operand fragments for
// the register-A form of P V; and checks the config against the strategy's
// resource model.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/Placement/Placement.h"
#include "lib/GpuTarget.h"
#include "lib/Strategy/WgmmaModel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#define DEBUG_TYPE "fa-place-wgmma"

namespace mlir::fa {
#define GEN_PASS_DEF_FAPLACEWGMMA
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

/// Whether a score_mod of the program runs an op the GPU computes on the
/// MUFU unit (an approximate transcendental or reciprocal) once per score,
/// beside the online softmax's exponential: one that reads the score or the
/// key index (an op of the head or the query row alone is computed once a
/// row or a program).
static bool scoreModRunsOnMufu(Operation *grid) {
  bool found = false;
  grid->walk([&](ScoreModOp op) {
    Block &body = op.getScoreMod().front();
    // The block arguments: score, b, h, q_idx, kv_idx, q_len, kv_len.
    llvm::SmallPtrSet<Value, 16> perScore = {body.getArgument(0),
                                             body.getArgument(4)};
    body.walk([&](Operation *inner) {
      if (llvm::none_of(inner->getOperands(),
                        [&](Value v) { return perScore.contains(v); }))
        return;
      perScore.insert(inner->result_begin(), inner->result_end());
      if (isa<math::TanhOp, math::ExpOp, math::Exp2Op, math::ExpM1Op,
              math::LogOp, math::Log2Op, math::Log1pOp, math::SinOp,
              math::CosOp, math::SqrtOp, math::RsqrtOp, math::PowFOp,
              arith::DivFOp>(inner))
        found = true;
    });
  });
  return found;
}

namespace {

struct FAPlaceWgmmaPass
    : public mlir::fa::impl::FAPlaceWgmmaBase<FAPlaceWgmmaPass> {
  using FAPlaceWgmmaBase::FAPlaceWgmmaBase;

  void runOnOperation() override {
    if (failed(placeEachProgram(getOperation(), arch,
                                [&](GridOp grid, const ::fa::GpuArch &target) {
                                  return placeProgram(grid, target);
                                })))
      signalPassFailure();
  }

  LogicalResult placeProgram(GridOp grid, const ::fa::GpuArch &target);
  LogicalResult placeBackwardProgram(GridOp grid,
                                     const ::fa::GpuArch &target);
};

LogicalResult FAPlaceWgmmaPass::placeProgram(GridOp grid,
                                             const ::fa::GpuArch &target) {
  // The options, whichever program reads them: a bad value is an error in
  // any program, not only where it would take effect.
  if (producerTransposesValue < -1 || producerTransposesValue > 1)
    return grid.emitOpError("producer-transposes-value must be -1 (the "
                            "model), 0 or 1, got ")
           << int64_t(producerTransposesValue);
  if (rotatedStaging != "model" &&
      !::fa::wgmma::backwardStagingBuffers({}, rotatedStaging, 0))
    return grid.emitOpError("rotated-staging must be none, grad-scores, both "
                            "or model, got '")
           << rotatedStaging << "'";
  if (stagedRowValues < -1 || stagedRowValues > 1)
    return grid.emitOpError("staged-row-values must be -1 (the model), 0 or "
                            "1, got ")
           << int64_t(stagedRowValues);
  bool forward = isForwardProgram(grid);
  if (!forward)
    return placeBackwardProgram(grid, target);
  FailureOr<ProgramShape> shape = readProgramShape(grid);
  if (failed(shape))
    return failure();
  // wgmma reads B through a shared-memory descriptor.
  Type elementType = loadedElementType(grid);
  bool float8 = isa_and_nonnull<Float8E4M3FNType>(elementType);
  if ((!float8 && failed(checkSixteenBitTiles(grid, elementType, "wgmma"))) ||
      failed(checkRightOperandsLoaded(grid, "wgmma")))
    return failure();

  ::fa::wgmma::Config config{shape->headDim, shape->blockM, shape->blockN,
                             numWarps,       stages,        float8 ? 1 : 2};
  if (std::string error = ::fa::wgmma::checkFits(config, target);
      !error.empty())
    return grid.emitOpError(error);
  ::fa::wgmma::SharedLayout layout = ::fa::wgmma::sharedLayout(config);

  MLIRContext *ctx = &getContext();
  auto accumulator = MmaEncodingAttr::get(ctx, numWarps);
  auto operand = MmaOperandEncodingAttr::get(ctx, numWarps);
  auto shared = SwizzledSharedEncodingAttr::get(
      ctx, ::fa::wgmma::swizzleBytes(config.headDim, config.elementBytes));
  rematerializeHoistedConstants(grid);
  placeTiles(grid, accumulator, shared);

  // Both operands of a matmul come from loaded shared tiles (Q K^T), or the
  // left one is a register tile (P) that moves to A fragments just before
  // its matmul (P V).
  grid.walk([&](TileMatmulOp op) {
    Value lhs = op.getLhs();
    if (lhs.getDefiningOp<LoadTileOp>())
      return;
    OpBuilder builder(op);
    Value converted = ConvertLayoutOp::create(
        builder, op.getLoc(), withEncoding(lhs.getType(), operand), lhs);
    op.getLhsMutable().assign(converted);
  });

  // Shared memory, as the model lays it out: Q, then the K and V rings.
  if (failed(placeAttentionTiles(grid, "wgmma", layout.qOffset,
                                 layout.kOffset, layout.vOffset, stages)))
    return failure();

  // 8-bit wgmma reads B K-major only: P V reads V transposed, each
  // warpgroup's copy at the model's offset (the lowering adds the
  // warpgroup's share), or one copy per tile that the producer warpgroup
  // writes for all of them (fa.producer_writes; fa-warp-specialize).
  bool producerTransposes =
      float8 && (producerTransposesValue < 0
                     ? ::fa::wgmma::producerTransposesValue(config)
                     : producerTransposesValue == 1);
  if (float8) {
    auto transposed = SwizzledSharedEncodingAttr::get(
        ctx, ::fa::wgmma::kSwizzleBytes, /*transposed=*/true);
    grid.walk([&](TileMatmulOp op) {
      Value rhs = op.getRhs();
      if (op.getTransposeRhs() || !rhs.getDefiningOp<LoadTileOp>())
        return;
      OpBuilder builder(op);
      auto converted = ConvertLayoutOp::create(
          builder, op.getLoc(), withEncoding(rhs.getType(), transposed), rhs);
      converted->setAttr(
          FADialect::getSharedOffsetAttrName(),
          builder.getI64IntegerAttr(layout.transposedValueOffset));
      if (producerTransposes)
        converted->setAttr(FADialect::getProducerWritesAttrName(),
                           builder.getUnitAttr());
      op.getRhsMutable().assign(converted);
    });
  }

  // A share of the exponentials leaves the MUFU unit where its work per
  // tile reaches the products' cycles: 8-bit products (docs/benchmarks.md
  // (z)), or a score_mod that adds MUFU work of its own (softcap's tanh).
  for (auto [name, every] :
       {std::pair<StringRef, int64_t>{"exp2-on-fma-every", exp2OnFmaEvery},
        {"score-mod-exp2-on-fma-every", scoreModExp2OnFmaEvery}})
    if (every < 0)
      return grid.emitOpError()
             << name << " must be 0 (none) or positive, got " << every;
  // (The score_mod is walked only where the option asks for a share.)
  int64_t onFmaEvery =
      float8 ? int64_t(exp2OnFmaEvery)
      : scoreModExp2OnFmaEvery > 0 && scoreModRunsOnMufu(grid)
          ? int64_t(scoreModExp2OnFmaEvery)
          : 0;
  if (onFmaEvery > 0)
    grid.walk([&](OnlineSoftmaxOp op) {
      op->setAttr(FADialect::getExp2OnFmaAttrName(),
                  IntegerAttr::get(IntegerType::get(ctx, 64), onFmaEvery));
    });

  // The softmax's correction exactly 1 where no max moved, and the
  // accumulator's rescale by that correction skipped where a warp's are
  // all 1 (not the sinks' rescale: fa.join_sink's correction is not).
  if (skipUnitRescale)
    grid.walk([&](RescaleOp rescale) {
      auto softmax = rescale.getFactor().getDefiningOp<OnlineSoftmaxOp>();
      if (!softmax)
        return;
      for (Operation *op : {rescale.getOperation(), softmax.getOperation()})
        op->setAttr(FADialect::getSkipUnitFactorsAttrName(),
                    UnitAttr::get(ctx));
    });

  int64_t registers = ::fa::wgmma::estimateRegisters(config);
  int64_t registerLimit = ::fa::wgmma::consumerRegisters(
      numWarps, ::fa::wgmma::runsPersistent(shape->headDim, numWarps),
      /*transposesValue=*/producerTransposes);
  setPlacedLaunch(grid, "wgmma placement", StrategyKind::wgmma,
                  {shape->blockM, shape->blockN, shape->headDim, numWarps},
                  numWarps * 32, layout.totalBytes, stages, registers,
                  registerLimit);
  return success();
}

/// Whether a backward program masks scores only past the lengths (no
/// causal mask, no mask_mod or score_mod, no sinks) and takes no
/// deterministic turns: the program whose registers leave room for LSE one
/// query tile ahead at head dim 128.
static bool isPlainBackwardProgram(GridOp grid) {
  WalkResult found = grid.walk([](Operation *op) {
    auto mask = dyn_cast<MaskOp>(op);
    if ((mask &&
         (mask.getMask() != MaskKind::none || !mask.getMaskMod().empty())) ||
        isa<ScoreModOp, ScoreModGradOp, SinkGradOp, WaitTurnOp>(op))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !found.wasInterrupted();
}

/// Whether a row-vector load is the LSE that fa.recompute_probs reads (the
/// other one is D, which fa.softmax_grad reads).
static bool readsAsLogSumExp(LoadTileOp load) {
  return llvm::any_of(load->getUsers(), [&](Operation *user) {
    auto probs = dyn_cast<RecomputeProbsOp>(user);
    return probs && probs.getLse() == load.getResult();
  });
}

/// Whether the row-vector loads of a dkdv program can come through shared
/// memory beside Q (stageRowValuesBesideQuery): LSE and D, one each, in the
/// loop body that loads Q.
static bool stagesAsLoadedRows(const BackwardLoads &loads) {
  return loads.rowVectors.size() == 2 &&
         readsAsLogSumExp(loads.rowVectors[0]) !=
             readsAsLogSumExp(loads.rowVectors[1]) &&
         llvm::all_of(loads.rowVectors, [&](LoadTileOp op) {
           return op->getBlock() == loads.streamed[0]->getBlock();
         });
}

/// LSE and D of each query tile into rings of `stages` slots in shared
/// memory (#fa.shared, fa.pipeline_stages, at the layout's offsets), which
/// fa-warp-specialize's producer fills with Q's slot; each consumer thread
/// reads its rows from there (fa.convert_layout) right after the load,
/// at the top of the iteration: the reads' latency then passes behind the
/// products before their first use (read just before it, the exponentials
/// waited for them: ~2% of the D 64 kernel's stall samples).
static void
stageRowValuesBesideQuery(const BackwardLoads &loads,
                          const ::fa::wgmma::BackwardSharedLayout &layout,
                          int64_t stages) {
  for (LoadTileOp op : loads.rowVectors) {
    MLIRContext *ctx = op.getContext();
    auto registers = cast<RankedTensorType>(op.getType());
    op.getResult().setType(
        withEncoding(registers, SharedEncodingAttr::get(ctx, /*pad=*/0)));
    Builder attrs(ctx);
    op->setAttr(FADialect::getSharedOffsetAttrName(),
                attrs.getI64IntegerAttr(readsAsLogSumExp(op)
                                            ? layout.logSumExpOffset
                                            : layout.deltaOffset));
    op->setAttr(FADialect::getPipelineStagesAttrName(),
                attrs.getI64IntegerAttr(stages));
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    auto read = ConvertLayoutOp::create(b, op.getLoc(), registers, op);
    op.getResult().replaceAllUsesExcept(read, read);
  }
}

/// Transposed scores (WgmmaModel's transposesScores): S = Q K^T and
/// dP = dO V^T become S^T = K Q^T and dP^T = V dO^T, whose accumulators
/// (`keyRows`: each warpgroup its 64 keys) the tile ops read as S and dP
/// through fa.transpose, in #fa.mma `transposed` tiles; every tile computed
/// from them element-wise (mask, P, dS, the variants' ops) and the row
/// values they read (LSE, D) take the transposed encodings too. Their
/// products read them back the other way: dV += P^T dO and dK += dS^T Q
/// from A fragments of P^T and dS^T (registers), dQ = dS K from dS^T
/// staged in swizzled shared memory at `stagingOffset` and read transposed.
static LogicalResult placeTransposedScores(GridOp grid, int64_t blockM,
                                           int64_t blockN,
                                           MmaEncodingAttr keyRows,
                                           SwizzledSharedEncodingAttr shared,
                                           int64_t stagingOffset) {
  MLIRContext *ctx = grid.getContext();
  MmaEncodingAttr transposed = keyRows.getTwin();
  auto operand = MmaOperandEncodingAttr::get(ctx, keyRows.getWarps());
  auto isScoreTile = [&](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && tensor.getRank() == 2 && tensor.getDimSize(0) == blockM &&
           tensor.getDimSize(1) == blockN;
  };
  SmallVector<TileMatmulOp> products;
  grid.walk([&](TileMatmulOp op) {
    if (!op.getAcc() && op.getTransposeRhs() && !op.getTransposeLhs() &&
        isScoreTile(op.getType()))
      products.push_back(op);
  });
  if (products.size() != 2)
    return grid.emitOpError("transposed scores: expected two products of "
                            "scores (S = Q K^T, dP = dO V^T), found ")
           << products.size();

  // S^T = K Q^T (dP^T likewise), read as S.
  SetVector<Value> chain;
  for (TileMatmulOp op : products) {
    auto type = cast<RankedTensorType>(op.getType());
    Value rows = op.getLhs(), keys = op.getRhs();
    op.getLhsMutable().assign(keys);
    op.getRhsMutable().assign(rows);
    op.getResult().setType(RankedTensorType::get(
        {blockN, blockM}, type.getElementType(), keyRows));
    OpBuilder b(ctx);
    b.setInsertionPointAfter(op);
    auto read =
        TransposeOp::create(b, op.getLoc(), withEncoding(type, transposed), op);
    op.getResult().replaceAllUsesExcept(read, read);
    chain.insert(read);
  }
  // The element-wise ops downstream, and the row values they read.
  SmallVector<TileMatmulOp> consumers;
  for (size_t next = 0; next < chain.size(); ++next) {
    for (Operation *user : chain[next].getUsers()) {
      if (auto matmul = dyn_cast<TileMatmulOp>(user)) {
        if (matmul.getLhs() != chain[next] || matmul.getRhs() == chain[next] ||
            matmul.getAcc() == chain[next])
          return matmul.emitOpError("transposed scores: a product reads "
                                    "scores only as its left operand");
        if (!llvm::is_contained(consumers, matmul))
          consumers.push_back(matmul);
        continue;
      }
      if (isa<ConvertLayoutOp, TransposeOp, scf::YieldOp>(user))
        return user->emitOpError("transposed scores: scores leave the "
                                 "iteration's element-wise ops here");
      for (Value result : user->getResults()) {
        if (!isScoreTile(result.getType()))
          return user->emitOpError("transposed scores: an element-wise op "
                                   "of scores gives another shape");
        result.setType(withEncoding(result.getType(), transposed));
        chain.insert(result);
      }
      for (Value rowValues : user->getOperands()) {
        auto type = dyn_cast<RankedTensorType>(rowValues.getType());
        if (!type || type.getRank() != 1)
          continue;
        if (!llvm::all_of(rowValues.getUsers(), [&](Operation *reader) {
              return llvm::any_of(reader->getResults(), [&](Value v) {
                return isScoreTile(v.getType());
              });
            }))
          return user->emitOpError("transposed scores: row values that "
                                   "other ops read too");
        rowValues.setType(withEncoding(type, transposed));
      }
    }
  }
  if (consumers.empty())
    return grid.emitOpError("transposed scores: no product reads P or dS");

  // The products of P and dS read them back as their twins: A fragments
  // of P^T, dS^T (registers), or dS^T staged (one tile) for dQ.
  llvm::DenseMap<Value, Value> twinOf, fragmentsOf;
  bool staged = false;
  for (TileMatmulOp op : consumers) {
    Value lhs = op.getLhs();
    auto type = cast<RankedTensorType>(lhs.getType());
    OpBuilder b(ctx);
    b.setInsertionPointAfterValue(lhs);
    Value &twin = twinOf[lhs];
    if (!twin)
      twin = TransposeOp::create(b, op.getLoc(),
                                 RankedTensorType::get({blockN, blockM},
                                                       type.getElementType(),
                                                       keyRows),
                                 lhs);
    b.setInsertionPointAfterValue(twin);
    if (op.getTransposeLhs()) {
      Value &fragments = fragmentsOf[lhs];
      if (!fragments)
        fragments = ConvertLayoutOp::create(
            b, op.getLoc(), withEncoding(twin.getType(), operand), twin);
      op.getLhsMutable().assign(fragments);
      op.setTransposeLhs(false);
      continue;
    }
    if (staged)
      return op.emitOpError("transposed scores: the wgmma backward stages "
                            "one tile of scores (dS^T for dQ), this is a "
                            "second");
    staged = true;
    auto stage = ConvertLayoutOp::create(
        b, op.getLoc(), withEncoding(twin.getType(), shared), twin);
    stage->setAttr(FADialect::getSharedOffsetAttrName(),
                   b.getI64IntegerAttr(stagingOffset));
    op.getLhsMutable().assign(stage);
    op.setTransposeLhs(true);
  }
  return success();
}

/// The iteration number of `loop` ((iv - lower) / step), computed at the
/// start of its body.
static Value loopIteration(scf::ForOp loop) {
  OpBuilder b = OpBuilder::atBlockBegin(loop.getBody());
  Location loc = loop.getLoc();
  Value distance = arith::SubIOp::create(b, loc, loop.getInductionVar(),
                                         loop.getLowerBound());
  return arith::DivUIOp::create(b, loc, distance, loop.getStep());
}

/// The backward's dkdv program (lib/Strategy/WgmmaModel.h describes the
/// split): K, V once and Q, dO in rings in 128-byte-swizzled shared memory;
/// LSE and D in rings beside Q's where the model stages them
/// (stageRowValuesBesideQuery), else straight into the row slots of S's
/// layout (both, or LSE alone, marked fa.prefetch where the model says
/// so); P and dS staged in swizzled shared memory, where every product
/// that reads them finds them (dV += P^T dO and dK += dS^T Q read them
/// transposed, dQ = dS K across all keys); dQ's f32 part staged too, for
/// the TMA engine to add (fa-tma-reduce, between the deterministic mode's
/// turns). The delta and dq programs (no matmul) are left to
/// fa-place-simt.
LogicalResult
FAPlaceWgmmaPass::placeBackwardProgram(GridOp grid,
                                       const ::fa::GpuArch &target) {
  bool hasMatmul = false;
  grid.walk([&](TileMatmulOp) { hasMatmul = true; });
  if (!hasMatmul)
    return success();
  FailureOr<BackwardLoads> loads = readBackwardLoads(grid, "wgmma");
  if (failed(loads) || failed(checkRightOperandsLoaded(grid, "wgmma")))
    return failure();
  auto keyTile = cast<RankedTensorType>(loads->resident[0].getType());
  auto queryTile = cast<RankedTensorType>(loads->streamed[0].getType());
  if (failed(checkSixteenBitTiles(grid, keyTile.getElementType(), "wgmma")))
    return failure();
  ::fa::wgmma::Config config{keyTile.getDimSize(1), queryTile.getDimSize(0),
                             keyTile.getDimSize(0), numWarps, stages, 2};
  if (std::string error = ::fa::wgmma::checkBackwardFits(config, target);
      !error.empty())
    return grid.emitOpError(error);
  std::string rotationMode = rotatedStaging == "model"
                                 ? ::fa::wgmma::rotatedStaging(config)
                                 : std::string(rotatedStaging);
  // S^T = K Q^T and dP^T = V dO^T where the model (or the option) says so.
  bool transposeScores = transposedScores < 0
                             ? ::fa::wgmma::transposesScores(config)
                             : transposedScores == 1;
  bool readsTables = readsBlockMaskTables(grid);
  bool stageRowValues =
      stagedRowValues < 0
          ? ::fa::wgmma::stagesRowValues(config, transposeScores, readsTables)
          : stagedRowValues == 1;
  std::optional<::fa::wgmma::StagingBuffers> buffers =
      ::fa::wgmma::backwardStagingBuffers(
          config, rotationMode,
          target.maxSharedMemoryPerBlock - ::fa::kStaticSharedMemoryReserve,
          stageRowValues && stagesAsLoadedRows(*loads));
  assert(buffers && "placeProgram checked rotated-staging");
  ::fa::wgmma::BackwardSharedLayout layout =
      ::fa::wgmma::backwardSharedLayout(config, *buffers);

  // Tiles of K/V rows (dK, dV): the warpgroups along the rows. Tiles of
  // query rows (S, dP, P, dS, dQ; LSE and D): one m64 whose columns the
  // warpgroups split, numbered down the rows first so that a warpgroup's 4
  // warps hold one wgmma accumulator. (With one warpgroup both are the
  // same layout.)
  MLIRContext *ctx = &getContext();
  int64_t warpgroups = ::fa::wgmma::backwardWarpgroups(config);
  auto keyRows = MmaEncodingAttr::get(ctx, numWarps);
  auto queryRows =
      warpgroups > 1
          ? MmaEncodingAttr::get(ctx, numWarps, warpgroups, /*rowsFirst=*/1)
          : keyRows;
  auto shared =
      SwizzledSharedEncodingAttr::get(ctx, ::fa::wgmma::kSwizzleBytes);
  rematerializeHoistedConstants(grid);
  placeTiles(
      grid,
      [&](RankedTensorType type) -> Attribute {
        return type.getRank() == 2 && type.getDimSize(0) == config.blockN
                   ? keyRows
                   : queryRows;
      },
      shared);
  placeBackwardLoads(*loads, queryRows, layout.kOffset, layout.vOffset,
                     layout.qOffset, layout.gradOutputOffset, stages);
  // LSE and D through shared memory beside Q, or (LSE alone) one query
  // tile ahead in registers where those allow.
  if (buffers->rowValues)
    stageRowValuesBesideQuery(*loads, layout, stages);
  ::fa::wgmma::RowValuePrefetch prefetch = ::fa::wgmma::prefetchedRowValues(
      config, isPlainBackwardProgram(grid), transposeScores);
  for (LoadTileOp op : loads->rowVectors)
    if (!buffers->rowValues &&
        (prefetch == ::fa::wgmma::RowValuePrefetch::both ||
         (prefetch == ::fa::wgmma::RowValuePrefetch::logSumExp &&
          readsAsLogSumExp(op))))
      op->setAttr(FADialect::getPrefetchAttrName(), UnitAttr::get(ctx));

  if (transposeScores &&
      failed(placeTransposedScores(grid, config.blockM, config.blockN, keyRows,
                                   shared, layout.gradScoresOffset)))
    return failure();

  // Left operands that are register tiles (the rounded P and dS) are
  // staged once each, right after they are computed: P in one buffer, dS
  // in another, so that dS's write waits only for dS's previous readers.
  // A staging with two buffers rotates between them by the parity of its
  // loop's iteration (fa.pipeline_stages, the iteration operand).
  llvm::DenseMap<Value, Value> stagedOf;
  int64_t nextStaging = 0;
  const int64_t stagingOffsets[] = {layout.probsOffset,
                                    layout.gradScoresOffset};
  const int64_t stagingBuffers[] = {buffers->probs, buffers->gradScores};
  WalkResult walk = grid.walk([&](TileMatmulOp op) {
    Value lhs = op.getLhs();
    if (transposeScores || lhs.getDefiningOp<LoadTileOp>())
      return WalkResult::advance();
    Value &staged = stagedOf[lhs];
    if (!staged) {
      if (nextStaging == 2) {
        op.emitOpError("the wgmma backward stages two register tiles (P "
                       "and dS), this is a third");
        return WalkResult::interrupt();
      }
      OpBuilder builder(ctx);
      builder.setInsertionPointAfterValue(lhs);
      Value iteration;
      int64_t rotation = stagingBuffers[nextStaging];
      auto loop = dyn_cast<scf::ForOp>(op->getParentOp());
      if (rotation > 1 && loop && lhs.getParentBlock() == loop.getBody())
        iteration = loopIteration(loop);
      auto convert = ConvertLayoutOp::create(
          builder, op.getLoc(), withEncoding(lhs.getType(), shared), lhs,
          iteration);
      convert->setAttr(FADialect::getSharedOffsetAttrName(),
                       builder.getI64IntegerAttr(stagingOffsets[nextStaging++]));
      if (iteration)
        convert->setAttr(FADialect::getPipelineStagesAttrName(),
                         builder.getI64IntegerAttr(rotation));
      staged = convert;
    }
    op.getLhsMutable().assign(staged);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  // dQ's part (f32) is staged for the TMA engine's reduction into the
  // accumulator (fa-tma-reduce), in 128-byte-swizzled boxes of 32 columns.
  // In the deterministic mode the staging goes before the wait for the
  // turn (fa.wait_turn): only the reduction itself holds the turn.
  SmallVector<AccumulateTileOp> gradQueryParts;
  grid.walk([&](AccumulateTileOp op) { gradQueryParts.push_back(op); });
  if (gradQueryParts.size() > 1)
    return gradQueryParts[1].emitOpError(
        "the wgmma backward stages one dQ part, this is a second");
  for (AccumulateTileOp op : gradQueryParts) {
    Operation *before = op;
    if (auto turn = dyn_cast_or_null<WaitTurnOp>(op->getPrevNode()))
      before = turn;
    OpBuilder builder(before);
    auto convert = ConvertLayoutOp::create(
        builder, op.getLoc(), withEncoding(op.getTile().getType(), shared),
        op.getTile());
    convert->setAttr(FADialect::getSharedOffsetAttrName(),
                     builder.getI64IntegerAttr(layout.gradQueryOffset));
    op.getTileMutable().assign(convert);
  }

  int64_t registers = ::fa::wgmma::estimateBackwardRegisters(config);
  // fa-warp-specialize adds the producer warpgroup (not persistent), with
  // a writer warp where the pipeline's kWriterWarp gives the program one
  // and the warps that copy staged row values, which leave the consumers
  // fewer registers: the estimate is checked against that smaller budget.
  bool writerWarp =
      ::fa::wgmma::takesWriterWarp(::fa::wgmma::kWriterWarp, takesTurns(grid),
                                   grid.getRagged(), readsTables)
          .value_or(false);
  int64_t registerLimit = ::fa::wgmma::consumerRegisters(
      numWarps, /*persistent=*/false,
      /*transposesValue=*/false, writerWarp, buffers->rowValues);
  setPlacedLaunch(grid, "wgmma backward placement", StrategyKind::wgmma,
                  {config.blockM, config.blockN, config.headDim, numWarps},
                  numWarps * 32, layout.totalBytes, stages, registers,
                  registerLimit);
  return success();
}

} // namespace
