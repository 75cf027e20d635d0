//===- ElideRedundantBarriers.cpp - Drop back-to-back barriers -----*- C++ -*-===//
#include "compiler/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define DEBUG_TYPE "fa-elide-redundant-barriers"

namespace mlir::fa {
#define GEN_PASS_DEF_FAELIDEREDUNDANTBARRIERS
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;

/// Whether `op` may read or write memory (conservatively: unknown effects
/// and ops with regions do).
static bool mayTouchMemory(Operation *op) {
  if (op->getNumRegions() > 0)
    return true;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return !op->hasTrait<OpTrait::ConstantLike>();
  return !effects.hasNoEffect();
}

namespace {
struct FAElideRedundantBarriersPass
    : public mlir::fa::impl::FAElideRedundantBarriersBase<
          FAElideRedundantBarriersPass> {
  void runOnOperation() override {
    SmallVector<gpu::BarrierOp> redundant;
    getOperation().walk([&](Block *block) {
      bool afterBarrier = false; // no memory touched since a barrier
      for (Operation &op : *block) {
        if (auto barrier = dyn_cast<gpu::BarrierOp>(op)) {
          if (afterBarrier)
            redundant.push_back(barrier);
          afterBarrier = true;
          continue;
        }
        if (mayTouchMemory(&op))
          afterBarrier = false;
      }
    });
    for (gpu::BarrierOp barrier : redundant)
      barrier.erase();
  }
};
} // namespace
