//===- HoistCaptureLoads.cpp - Capture loads early --------------*- C++ -*-===//
//
// fa-hoist-capture-loads: a variant region's loads of captured tensors
// (marked fa.capture_load) move out of the per-element mask branch (where
// the lowering marked it: every tile takes it) and up their block, with the
// pure ops that compute their indices, so that their latency overlaps the
// tensor-core products instead of following them:
//
//   before:                          after:
//   for kv tiles:                    for kv tiles:
//     s = wait(Q K^T)                  id = load doc[b, kv + col]
//     if partial:                      s = wait(Q K^T)
//       id = load doc[b, kv + col]     if partial:
//       s = select(id == row_id, ..)     s = select(id == row_id, ..)
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "dialect/FAOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "fa-hoist-capture-loads"

namespace mlir::fa {
#define GEN_PASS_DEF_FAHOISTCAPTURELOADS
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

bool isCaptureLoad(Operation *op) {
  return isa<memref::LoadOp>(op) &&
         op->hasAttr(FADialect::getCaptureLoadAttrName());
}

/// Ops that may move (earlier, or out of a marked branch) with a capture
/// load: pure ops without regions, and capture loads themselves (a load
/// whose index is another capture's value).
bool mayMove(Operation *op) {
  return op->getNumRegions() == 0 && (isPure(op) || isCaptureLoad(op));
}

/// The ops of `block` that `op` depends on and that may move with it,
/// into `slice` (dependencies before dependents); `anchor`: the latest op
/// of `block` it depends on that may not (null: none).
void collectSlice(Operation *op, Block *block,
                  llvm::SetVector<Operation *> &slice, Operation *&anchor) {
  for (Value operand : op->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (!def || def->getBlock() != block || slice.contains(def))
      continue;
    if (mayMove(def)) {
      collectSlice(def, block, slice, anchor);
      slice.insert(def);
    } else if (!anchor || anchor->isBeforeInBlock(def)) {
      anchor = def;
    }
  }
}

/// Moves `load` and its slice out of `branch`'s then-block, before the
/// branch, unless it depends on an op of that block that may not move.
void hoistOutOfBranch(memref::LoadOp load, scf::IfOp branch) {
  Block *block = load->getBlock();
  llvm::SetVector<Operation *> slice;
  Operation *anchor = nullptr;
  collectSlice(load, block, slice, anchor);
  if (anchor)
    return;
  for (Operation *op : slice)
    op->moveBefore(branch);
  load->moveBefore(branch);
}

/// Moves `load` and the part of its slice after its anchor to just after
/// the anchor (or to the start of its block).
void moveUp(memref::LoadOp load) {
  Block *block = load->getBlock();
  llvm::SetVector<Operation *> slice;
  Operation *anchor = nullptr;
  collectSlice(load, block, slice, anchor);
  Block::iterator insertion =
      anchor ? std::next(anchor->getIterator()) : block->begin();
  SmallVector<Operation *> moving;
  for (Operation *op : slice)
    if (!anchor || anchor->isBeforeInBlock(op))
      moving.push_back(op);
  moving.push_back(load);
  for (Operation *op : moving) {
    if (insertion != block->end() && &*insertion == op) {
      ++insertion;
      continue;
    }
    op->moveBefore(block, insertion);
  }
}

struct FAHoistCaptureLoadsPass
    : public mlir::fa::impl::FAHoistCaptureLoadsBase<FAHoistCaptureLoadsPass> {
  void runOnOperation() override {
    // Out of the marked branches, innermost first (post-order walk).
    getOperation().walk([](scf::IfOp branch) {
      if (!branch->hasAttr(FADialect::getHoistCaptureLoadsAttrName()))
        return;
      SmallVector<memref::LoadOp> loads;
      for (Operation &op : *branch.thenBlock())
        if (isCaptureLoad(&op))
          loads.push_back(cast<memref::LoadOp>(op));
      for (memref::LoadOp load : loads)
        hoistOutOfBranch(load, branch);
    });
    SmallVector<memref::LoadOp> loads;
    getOperation().walk([&](memref::LoadOp load) {
      if (isCaptureLoad(load))
        loads.push_back(load);
    });
    for (memref::LoadOp load : loads)
      moveUp(load);
  }
};

} // namespace
