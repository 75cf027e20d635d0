//===- WgmmaPipeline.cpp - Softmax overlapped with the tensor cores -*- C++ -*-=//
//
// fa-wgmma-pipeline: within a warpgroup, the online softmax of K/V tile j
// runs while the tensor cores compute P_{j-1} V_{j-1} (FlashAttention-3's
// intra-warpgroup overlap). The K/V loop of a program placed by
// fa-place-wgmma is software-pipelined by one stage:
//
//   prologue (tile b = kv_begin):
//     S_b = Q K_b^T; softmax_b -> m, l, alpha_b, P_b; acc = alpha_b acc_0
//   for j in b+1 .. e-1 (carrying m, l, acc, P_{j-1}):
//     S_j  = Q K_j^T                      (started)
//     O    = acc + P_{j-1} V_{j-1}        (started)
//     wait for S_j (P V may still run)
//     softmax_j -> m, l, alpha_j, P_j     (overlaps P V)
//     wait for O
//     acc  = alpha_j O
//   epilogue (tile e - 1):
//     acc = acc + P_{e-1} V_{e-1}
//
// all under `kv_begin < kv_end` (else the state stays initial). ptxas
// hoists the wait for O to the start of its basic block, above the
// softmax; with wait-after-softmax (WgmmaModel::waitsAfterSoftmax) the wait
// names the softmax's row sums and P as `after` operands and its lowering
// ends the block after them. The result
// equals the unpipelined loop's: acc entering iteration j is alpha_{j-1}
// O_{j-2} scaled like the original's, so O_{j-1} = acc + P_{j-1} V_{j-1}.
// The matmuls of the loop are `async`; fa.async_wait{pending = 1} waits for
// S_j only (wgmma groups retire in order, S_j was started first). The
// resource model decides where the overlap pays (WgmmaModel::
// overlapsSoftmax: up to head dim 128, measured); other loops stay as they
// are.
//
// The backward's dkdv loop (one query tile per iteration) is reordered
// within the iteration instead, so that each warpgroup's element-wise work
// runs while its tensor cores compute:
//
//   S  = Q K^T, dP = dO V^T                  (both started)
//   wait for S (dP may still run)
//   mask, P = exp(S - LSE), P staged         (overlaps dP)
//   dV += P^T dO                             (started)
//   wait for dP (dV may still run)
//   dS = P (dP - D), dS staged               (overlaps dV)
//   dQ = dS K, dK += dS^T Q                  (both started)
//   wait for dQ (dK may still run)
//   dQ added to global                       (overlaps dK)
//   wait for dK
//
// Groups retire in order: waiting with one pending leaves only the latest
// product running. Every product of an iteration is done before the next
// one starts (dK's wait), so the staging buffers and the Q/dO ring keep
// their barriers' meaning.
//
//===----------------------------------------------------------------------===//

#include "compiler/Utils/IRUtils.h"
#include "compiler/Passes.h"
#include "lib/Strategy/WgmmaModel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#define DEBUG_TYPE "fa-wgmma-pipeline"

namespace mlir::fa {
#define GEN_PASS_DEF_FAWGMMAPIPELINE
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// The clone of `value`'s slice in the loop body (matchAttentionLoop made
/// sure the body has no regions but isolated ones, so this cannot fail).
Value cloneSlice(OpBuilder &b, Block &body, Value value, IRMapping &mapping) {
  return *cloneSliceInto(b, *body.getParent(), value, mapping);
}

/// The attention loop's ops that the pipelining moves around.
struct AttentionLoop {
  scf::ForOp loop;
  TileMatmulOp scores;  // S = Q K^T
  OnlineSoftmaxOp softmax;
  RescaleOp rescale;    // acc * alpha
  TileMatmulOp output;  // acc + P V
};

FailureOr<AttentionLoop> matchAttentionLoop(scf::ForOp loop) {
  AttentionLoop match{loop, {}, {}, {}, {}};
  Block *body = loop.getBody();
  for (Operation &op : *body) {
    // Ops with isolated regions (a variant's fa.mask, fa.score_mod) are
    // element-wise steps like any other; control flow is not pipelined.
    if (op.getNumRegions() != 0 &&
        !op.hasTrait<OpTrait::IsIsolatedFromAbove>())
      return loop.emitOpError("cannot pipeline a K/V loop with nested regions");
    if (auto matmul = dyn_cast<TileMatmulOp>(op))
      (matmul.getAcc() ? match.output : match.scores) = matmul;
    else if (auto softmax = dyn_cast<OnlineSoftmaxOp>(op))
      match.softmax = softmax;
    else if (auto rescale = dyn_cast<RescaleOp>(op))
      match.rescale = rescale;
  }
  if (!match.scores || !match.output || !match.softmax || !match.rescale ||
      loop.getNumRegionIterArgs() != 3)
    return loop.emitOpError("is not an attention K/V loop (S = Q K^T, "
                            "online softmax, rescale, acc + P V; state m, l, "
                            "acc)");
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  Value m = loop.getRegionIterArg(0), l = loop.getRegionIterArg(1),
        acc = loop.getRegionIterArg(2);
  if (match.softmax.getRunningMax() != m || match.softmax.getRunningSum() != l ||
      match.rescale.getAcc() != acc ||
      match.rescale.getFactor() != match.softmax.getCorrection() ||
      match.output.getAcc() != match.rescale.getResult() ||
      yield.getOperand(0) != match.softmax.getNewMax() ||
      yield.getOperand(1) != match.softmax.getNewSum() ||
      yield.getOperand(2) != match.output.getResult() ||
      !match.output.getLhs().getDefiningOp() ||
      match.output.getRhs().getParentBlock() != body)
    return loop.emitOpError("is not an attention K/V loop in the expected "
                            "form (m, l, acc carried; acc rescaled by the "
                            "softmax's alpha before acc + P V)");
  return match;
}

/// The backward's dkdv loop: its five products, found by what reads them.
struct BackwardLoop {
  scf::ForOp loop;
  TileMatmulOp scores, gradProbs;  // S = Q K^T, dP = dO V^T
  TileMatmulOp gradValue, gradKey; // dV += P^T dO, dK += dS^T Q
  TileMatmulOp gradQuery;          // dQ = dS K
};

/// The loop whose body computes fa.softmax_grad from two products started
/// in it (S feeds the probabilities), accumulates dK and dV (the products
/// with an accumulator) and one product more (dQ); failure for any other
/// loop.
FailureOr<BackwardLoop> matchBackwardLoop(scf::ForOp loop) {
  BackwardLoop match{loop, {}, {}, {}, {}, {}};
  Block *body = loop.getBody();
  SoftmaxGradOp grad;
  SmallVector<TileMatmulOp> accumulated;
  for (Operation &op : *body) {
    if (op.getNumRegions() != 0 &&
        !op.hasTrait<OpTrait::IsIsolatedFromAbove>())
      return failure();
    if (auto g = dyn_cast<SoftmaxGradOp>(op))
      grad = g;
    else if (auto matmul = dyn_cast<TileMatmulOp>(op)) {
      if (matmul.getAcc())
        accumulated.push_back(matmul);
      else if (matmul.getTransposeRhs())
        (match.scores ? match.gradProbs : match.scores) = matmul;
      else
        match.gradQuery = matmul;
    }
  }
  if (!grad || accumulated.size() != 2 || !match.scores || !match.gradProbs ||
      !match.gradQuery)
    return failure();
  // dP is the product softmax_grad reads as its gradient (with transposed
  // scores, through the fa.transpose that reads dP^T as dP); the other is
  // S.
  Value gradProbs = grad.getGradProbs();
  if (auto read = gradProbs.getDefiningOp<TransposeOp>())
    gradProbs = read.getSource();
  if (gradProbs == match.scores.getResult())
    std::swap(match.scores, match.gradProbs);
  // S may have readers besides the probabilities (a score_mod's derivative
  // reads the raw scores): its wait goes right after dP starts, before any
  // of them.
  if (gradProbs != match.gradProbs.getResult() || !match.gradProbs->hasOneUse())
    return failure();
  // dV comes first (it reads P), dK second (it reads dS).
  match.gradValue = accumulated[0];
  match.gradKey = accumulated[1];
  // The reordering moves dP up to S: its operands must be there already.
  for (Value operand : match.gradProbs->getOperands())
    if (Operation *def = operand.getDefiningOp();
        def && def->getBlock() == body && !def->isBeforeInBlock(match.scores))
      return failure();
  return match;
}

/// Starts a product and waits for it before its first reader, with
/// `pending` later products left running.
void startAndWait(TileMatmulOp product, Operation *before, int64_t pending) {
  product.setAsync(true);
  OpBuilder b(before);
  Value result = product.getResult();
  auto wait = AsyncWaitOp::create(b, product.getLoc(), result.getType(), result,
                                  ValueRange(), b.getI64IntegerAttr(pending));
  result.replaceAllUsesExcept(wait, wait);
}

/// dQ's first reader, where dQ can start before dK and be waited for with
/// dK still in flight: its operands are there before dK, and every reader
/// is in the iteration after dK (waiting with one product pending leaves
/// the latest started, which must be dK). Null otherwise.
Operation *firstReaderAfterGradKey(BackwardLoop a) {
  Block *body = a.loop.getBody();
  for (Value operand : a.gradQuery->getOperands())
    if (Operation *def = operand.getDefiningOp();
        def && def->getBlock() == body && !def->isBeforeInBlock(a.gradKey))
      return nullptr;
  Operation *first = nullptr;
  for (Operation *reader : a.gradQuery->getUsers()) {
    if (reader->getBlock() != body)
      return nullptr;
    if (!first || reader->isBeforeInBlock(first))
      first = reader;
  }
  if (!first || first->isBeforeInBlock(a.gradKey))
    return nullptr;
  return first;
}

void overlapBackwardLoop(BackwardLoop a) {
  a.gradProbs->moveAfter(a.scores);
  // S: waited for right after dP starts (dP stays in flight).
  startAndWait(a.scores, a.gradProbs->getNextNode(), /*pending=*/1);
  // dP: waited for where dS needs it, with dV started (in flight).
  Operation *gradReader = *a.gradProbs->getUsers().begin();
  startAndWait(a.gradProbs, gradReader, /*pending=*/1);
  // dQ before dK, both reading the staged dS: dQ is waited for (dV with
  // it) while dK still runs, so that adding dQ to global overlaps dK.
  // Otherwise dQ stays where it is, a synchronous product.
  if (Operation *gradQueryReader = firstReaderAfterGradKey(a)) {
    a.gradQuery->moveBefore(a.gradKey);
    startAndWait(a.gradQuery, gradQueryReader, /*pending=*/1);
  }
  // dV and dK: done at the end of the iteration; their waits pin the
  // accumulators before the loop carries them on.
  Operation *yield = a.loop.getBody()->getTerminator();
  startAndWait(a.gradValue, yield, /*pending=*/0);
  startAndWait(a.gradKey, yield, /*pending=*/0);
}

/// The warps of the program that computes (its launch's threads, less the
/// producer's).
int64_t consumerWarps(scf::ForOp loop) {
  auto grid = loop->getParentOfType<GridOp>();
  auto launch = grid->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
  return launch.getThreads() / 32 - launch.getProducerWarps();
}

struct FAWgmmaPipelinePass
    : public mlir::fa::impl::FAWgmmaPipelineBase<FAWgmmaPipelinePass> {
  using FAWgmmaPipelineBase::FAWgmmaPipelineBase;
  void runOnOperation() override {
    SmallVector<scf::ForOp> loops;
    SmallVector<BackwardLoop> backwardLoops;
    getOperation().walk([&](GridOp grid) {
      auto launch =
          grid->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
      if (!launch || launch.getStrategy() != StrategyKind::wgmma)
        return;
      // The backward's dkdv loop: reordered within the iteration.
      bool forward = isForwardProgram(grid);
      if (!forward) {
        grid.walk([&](scf::ForOp loop) {
          if (FailureOr<BackwardLoop> match = matchBackwardLoop(loop);
              succeeded(match))
            backwardLoops.push_back(*match);
        });
        return;
      }
      grid.walk([&](scf::ForOp loop) {
        bool streams = false;
        loop.walk([&](TileMatmulOp) { streams = true; });
        if (streams)
          loops.push_back(loop);
      });
    });
    if (waitAfterSoftmax < -1 || waitAfterSoftmax > 1) {
      getOperation().emitError()
          << "wait-after-softmax must be 1, 0 or -1 (the model's choice), got "
          << int64_t(waitAfterSoftmax);
      return signalPassFailure();
    }
    for (scf::ForOp loop : loops) {
      FailureOr<AttentionLoop> match = matchAttentionLoop(loop);
      if (failed(match))
        return signalPassFailure();
      // The resource model decides where the overlap pays (head dim).
      int64_t headDim = cast<RankedTensorType>(match->output.getType())
                            .getDimSize(1);
      if (::fa::wgmma::overlapsSoftmax(headDim))
        pipeline(*match, waitAfterSoftmax < 0 ? ::fa::wgmma::waitsAfterSoftmax(
                                                    consumerWarps(loop))
                                              : waitAfterSoftmax == 1);
    }
    for (BackwardLoop loop : backwardLoops)
      overlapBackwardLoop(loop);
  }

  void pipeline(AttentionLoop a, bool waitAfterSoftmax);
};

void FAWgmmaPipelinePass::pipeline(AttentionLoop a, bool waitAfterSoftmax) {
  scf::ForOp loop = a.loop;
  Location loc = loop.getLoc();
  Block &body = *loop.getBody();
  Value iv = loop.getInductionVar();
  Value lb = loop.getLowerBound(), ub = loop.getUpperBound(),
        step = loop.getStep();
  Value m0 = loop.getInitArgs()[0], l0 = loop.getInitArgs()[1],
        acc0 = loop.getInitArgs()[2];
  Value pOperand = a.output.getLhs(); // P of the iteration, as P V reads it
  auto setAsync = [](Value v) {
    cast<TileMatmulOp>(v.getDefiningOp()).setAsync(true);
  };

  OpBuilder b(loop);
  Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lb, ub);
  auto guarded = scf::IfOp::create(b, loc, loop.getResultTypes(), any,
                                   /*withElseRegion=*/true);
  {
    OpBuilder e = OpBuilder::atBlockBegin(&guarded.getElseRegion().front());
    scf::YieldOp::create(e, loc, ValueRange{m0, l0, acc0});
  }
  OpBuilder t = OpBuilder::atBlockBegin(&guarded.getThenRegion().front());

  // Prologue: the softmax of tile lb, acc_0 rescaled by its alpha.
  IRMapping first;
  first.map(iv, lb);
  first.map(loop.getRegionIterArg(0), m0);
  first.map(loop.getRegionIterArg(1), l0);
  first.map(loop.getRegionIterArg(2), acc0);
  Value m1 = cloneSlice(t, body, a.softmax.getNewMax(), first);
  Value l1 = cloneSlice(t, body, a.softmax.getNewSum(), first);
  Value acc1 = cloneSlice(t, body, a.rescale.getResult(), first);
  Value p1 = cloneSlice(t, body, pOperand, first);

  // The steady state, tiles lb + step .. ub - step.
  Value next = arith::AddIOp::create(t, loc, lb, step);
  auto steady = scf::ForOp::create(t, loc, next, ub, step,
                                   ValueRange{m1, l1, acc1, p1});
  {
    OpBuilder s = OpBuilder::atBlockBegin(steady.getBody());
    Value j = steady.getInductionVar();
    Value mIn = steady.getRegionIterArg(0), lIn = steady.getRegionIterArg(1),
          accIn = steady.getRegionIterArg(2), pIn = steady.getRegionIterArg(3);
    IRMapping current;
    current.map(iv, j);
    current.map(loop.getRegionIterArg(0), mIn);
    current.map(loop.getRegionIterArg(1), lIn);
    // S_j = Q K_j^T, started.
    Value scores = cloneSlice(s, body, a.scores.getResult(), current);
    setAsync(scores);
    // O = acc + P_{j-1} V_{j-1}, started.
    IRMapping previous;
    previous.map(iv, arith::SubIOp::create(s, loc, j, step));
    previous.map(pOperand, pIn);
    previous.map(a.rescale.getResult(), accIn);
    Value output = cloneSlice(s, body, a.output.getResult(), previous);
    setAsync(output);
    // S_j done (P V may still run), its softmax; then O done, rescaled.
    current.map(a.scores.getResult(),
                AsyncWaitOp::create(s, loc, scores.getType(), scores,
                                    ValueRange(), s.getI64IntegerAttr(1)));
    Value mOut = cloneSlice(s, body, a.softmax.getNewMax(), current);
    Value lOut = cloneSlice(s, body, a.softmax.getNewSum(), current);
    Value pOut = cloneSlice(s, body, pOperand, current);
    // The wait for O comes after the softmax's results (row sums, P), not
    // before them: what it should overlap.
    current.map(loop.getRegionIterArg(2),
                AsyncWaitOp::create(s, loc, output.getType(), output,
                                    waitAfterSoftmax ? ValueRange{lOut, pOut}
                                                     : ValueRange(),
                                    s.getI64IntegerAttr(0)));
    Value accOut = cloneSlice(s, body, a.rescale.getResult(), current);
    scf::YieldOp::create(s, loc, ValueRange{mOut, lOut, accOut, pOut});
  }

  // Epilogue: acc + P V of the last tile.
  IRMapping last;
  last.map(iv, arith::SubIOp::create(t, loc, ub, step));
  last.map(pOperand, steady.getResult(3));
  last.map(a.rescale.getResult(), steady.getResult(2));
  Value accLast = cloneSlice(t, body, a.output.getResult(), last);
  scf::YieldOp::create(
      t, loc, ValueRange{steady.getResult(0), steady.getResult(1), accLast});

  loop.replaceAllUsesWith(guarded.getResults());
  loop.erase();
}

} // namespace
