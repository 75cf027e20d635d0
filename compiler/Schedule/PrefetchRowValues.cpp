//===- PrefetchRowValues.cpp - Row values loaded an iteration ahead -*- C++ -*-===//
//
// fa-prefetch-row-values: the per-row values a loop iteration loads from
// global memory into registers (the backward's LSE and D = rowsum(dO * O),
// one value per query row of the visited tile), where the placement marked
// the load fa.prefetch, are loaded one iteration ahead, so that their
// latency hides behind a whole iteration of tensor-core work instead of one
// product:
//
//   before:                        after:
//                                    lse = load(rows of tile lb)
//   for t = lb .. ub:                for t = lb .. ub (carrying lse):
//     lse = load(rows of tile t)       next = load(rows of tile t + step)
//     ... uses lse ...                 ... uses lse ...
//                                      yield next
//
// The last iteration loads the rows past the loop's end; the loads are
// zero-padded past the tensor's rows (fa.load_tile's lowering), and a tile
// inside the tensor but outside the loop's range is read and dropped. A
// marked load must sit in the loop's body inside an fa.grid program, its
// indices must depend only on the induction variable and values from
// outside the loop (through pure ops), and nothing in the program may write
// its source or any view of it (the forward's LSE, and D, written by the
// delta program before the dkdv program runs); otherwise the pass fails
// with an error on the load. The mark is dropped once done. Costs one
// register per row a thread holds, per load: the
// placement marks loads where its resource model leaves room.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/Utils/IRUtils.h"
#include "dialect/FAOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/MapVector.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#define DEBUG_TYPE "fa-prefetch-row-values"

namespace mlir::fa {
#define GEN_PASS_DEF_FAPREFETCHROWVALUES
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Whether `value`, in `loop`'s body, is computed by pure, region-free ops
/// from the induction variable and values defined outside the loop only
/// (not from the values the loop carries).
bool dependsOnlyOnInductionVar(Value value, scf::ForOp loop) {
  if (value == loop.getInductionVar())
    return true;
  if (!loop.getRegion().isAncestor(value.getParentRegion()))
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != loop.getBody() || def->getNumRegions() != 0 ||
      !isPure(def))
    return false;
  return llvm::all_of(def->getOperands(), [&](Value operand) {
    return dependsOnlyOnInductionVar(operand, loop);
  });
}

/// The memref `source` is a view of (through view-like ops: casts,
/// subviews, reinterpretations), or `source` itself.
Value viewRoot(Value source) {
  while (auto view = source.getDefiningOp<ViewLikeOpInterface>())
    source = view.getViewSource();
  return source;
}

/// Whether every user in `program` of `source` and of the views made from
/// it only reads it (fa.load_tile) or makes another view.
bool onlyLoadedIn(Value source, Operation *program) {
  return llvm::all_of(source.getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto view = dyn_cast<ViewLikeOpInterface>(user);
        view && view.getViewSource() == source)
      return llvm::all_of(user->getResults(), [&](Value result) {
        return onlyLoadedIn(result, program);
      });
    return !program->isAncestor(user) || isa<LoadTileOp>(user);
  });
}

/// The loop whose iterations `load` can run one ahead, or an error.
FailureOr<scf::ForOp> prefetchLoop(LoadTileOp load) {
  auto loop = dyn_cast<scf::ForOp>(load->getParentOp());
  if (!loop)
    return load.emitOpError("is marked fa.prefetch but is not in the body "
                            "of an scf.for");
  auto program = loop->getParentOfType<GridOp>();
  if (!program)
    return load.emitOpError("is marked fa.prefetch but is not in an fa.grid "
                            "program (nothing says what else reads or "
                            "writes its source)");
  if (!onlyLoadedIn(viewRoot(load.getSource()), program))
    return load.emitOpError("is marked fa.prefetch but its program also "
                            "writes its source: the next iteration's values "
                            "may not be there yet");
  if (!llvm::all_of(load->getOperands(), [&](Value operand) {
        return dependsOnlyOnInductionVar(operand, loop);
      }))
    return load.emitOpError("is marked fa.prefetch but its indices depend on "
                            "more than the induction variable and values "
                            "from outside the loop");
  return loop;
}

/// Loads `loads` of `loop` one iteration ahead (see the file comment).
LogicalResult prefetch(scf::ForOp loop, ArrayRef<LoadTileOp> loads) {
  Location loc = loop.getLoc();
  Region &body = loop.getRegion();
  Value step = loop.getStep();
  // Tile lb's values, before the loop.
  OpBuilder before(loop);
  IRMapping first;
  first.map(loop.getInductionVar(), loop.getLowerBound());
  SmallVector<Value> initial;
  for (LoadTileOp load : loads) {
    FailureOr<Value> value =
        cloneSliceInto(before, body, load.getResult(), first);
    if (failed(value))
      return failure();
    value->getDefiningOp()->removeAttr(FADialect::getPrefetchAttrName());
    initial.push_back(*value);
  }
  // The loop carries them; each iteration loads the next tile's at its top.
  IRRewriter rewriter(loop.getContext());
  FailureOr<LoopLikeOpInterface> extended =
      loop.replaceWithAdditionalYields(
          rewriter, initial, /*replaceInitOperandUsesInLoop=*/false,
          [&](OpBuilder &b, Location, ArrayRef<BlockArgument> carried) {
            OpBuilder top = OpBuilder::atBlockBegin(b.getBlock());
            Value iv = top.getBlock()->getArgument(0);
            IRMapping next;
            next.map(iv, arith::AddIOp::create(top, loc, iv, step));
            SmallVector<Value> yields;
            for (auto [i, load] : llvm::enumerate(loads)) {
              Value loaded = LoadTileOp(load).getResult();
              Value ahead = *cloneSliceInto(
                  top, *top.getBlock()->getParent(), loaded, next);
              ahead.getDefiningOp()->removeAttr(
                  FADialect::getPrefetchAttrName());
              yields.push_back(ahead);
              rewriter.replaceAllUsesWith(loaded, carried[i]);
            }
            return yields;
          });
  if (failed(extended))
    return failure();
  for (LoadTileOp load : loads)
    rewriter.eraseOp(load);
  return success();
}

struct FAPrefetchRowValuesPass
    : public mlir::fa::impl::FAPrefetchRowValuesBase<FAPrefetchRowValuesPass> {
  void runOnOperation() override {
    // The marked loads, grouped by their loop (in walk order).
    llvm::MapVector<Operation *, SmallVector<LoadTileOp>> loadsOf;
    WalkResult walk = getOperation().walk([&](LoadTileOp load) {
      if (!load->hasAttr(FADialect::getPrefetchAttrName()))
        return WalkResult::advance();
      FailureOr<scf::ForOp> loop = prefetchLoop(load);
      if (failed(loop))
        return WalkResult::interrupt();
      loadsOf[*loop].push_back(load);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    for (auto &[loop, loads] : loadsOf)
      if (failed(prefetch(cast<scf::ForOp>(loop), loads)))
        return signalPassFailure();
  }
};

} // namespace
