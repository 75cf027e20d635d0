//===- PlaceMma.cpp - Placement for the tensor-core strategy ----*- C++ -*-===//
//
// Decides where every tile of an fa.grid program lives for the mma.sync
// strategy (accumulator and operand fragments, shared-memory rings) and
// checks the config against the strategy's resource model.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/Placement/Placement.h"
#include "lib/GpuTarget.h"
#include "lib/Strategy/MmaModel.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"

#define DEBUG_TYPE "fa-place-mma"

namespace mlir::fa {
#define GEN_PASS_DEF_FAPLACEMMA
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

struct FAPlaceMmaPass : public mlir::fa::impl::FAPlaceMmaBase<FAPlaceMmaPass> {
  using FAPlaceMmaBase::FAPlaceMmaBase;

  void runOnOperation() override {
    if (failed(placeEachProgram(getOperation(), arch,
                                [&](GridOp grid, const ::fa::GpuArch &target) {
                                  return placeProgram(grid, target);
                                })))
      signalPassFailure();
  }

  LogicalResult placeProgram(GridOp grid, const ::fa::GpuArch &target);
};

LogicalResult FAPlaceMmaPass::placeProgram(GridOp grid,
                                           const ::fa::GpuArch &target) {
  FailureOr<ProgramShape> shape = readProgramShape(grid);
  if (failed(shape))
    return failure();
  // The inputs' element type, from the tiles the program loads.
  Type elementType;
  grid.walk([&](LoadTileOp op) {
    elementType = cast<RankedTensorType>(op.getType()).getElementType();
  });
  if (!elementType || !(elementType.isF16() || elementType.isBF16()))
    return grid.emitOpError("the mma strategy needs f16 or bf16 tiles, got ")
           << elementType;

  ::fa::mma::Config config{shape->headDim, shape->blockM, shape->blockN,
                           numWarps,       stages,        2};
  if (std::string error = ::fa::mma::checkFits(config, target); !error.empty())
    return grid.emitOpError(error);
  ::fa::mma::SharedLayout layout = ::fa::mma::sharedLayout(config);

  MLIRContext *ctx = &getContext();
  auto accumulator = MmaEncodingAttr::get(ctx, numWarps);
  auto operand = MmaOperandEncodingAttr::get(ctx, numWarps);
  auto shared = SharedEncodingAttr::get(ctx, layout.rowPad);
  rematerializeHoistedConstants(grid);
  placeTiles(grid, accumulator, shared);

  // Left operands become A fragments: a shared tile (Q) once, right after
  // it is loaded, when the model keeps Q in registers, else before every
  // Q K^T; a register tile (P) just before its matmul. Right operands are
  // read from shared memory by the matmul itself.
  bool qInRegisters = ::fa::mma::keepQInRegisters(config);
  llvm::DenseMap<Value, Value> operandOf;
  WalkResult walk = grid.walk([&](TileMatmulOp op) {
    Value lhs = op.getLhs();
    if (!operandOf.count(lhs)) {
      OpBuilder builder(op);
      Operation *def = lhs.getDefiningOp();
      bool loadedOnce = def && isa<LoadTileOp>(def);
      if (loadedOnce && qInRegisters)
        builder.setInsertionPointAfter(def);
      Value converted = ConvertLayoutOp::create(
          builder, op.getLoc(), withEncoding(lhs.getType(), operand), lhs);
      if (!loadedOnce || qInRegisters)
        operandOf[lhs] = converted;
      op.getLhsMutable().assign(converted);
    } else {
      op.getLhsMutable().assign(operandOf[lhs]);
    }
    if (!op.getRhs().getDefiningOp<LoadTileOp>()) {
      op.emitOpError("the mma strategy reads the right operand from a loaded "
                     "shared tile");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();

  // Shared memory, as the model lays it out: the tile loaded once (Q), then
  // a ring of `stages` slots for each tile the K/V loop streams (K, V).
  if (failed(placeAttentionTiles(grid, "mma", layout.qOffset,
                                 layout.kOffset, layout.vOffset, stages)))
    return failure();

  int64_t numThreads = numWarps * 32;
  int64_t registers = ::fa::mma::estimateRegisters(config);
  int64_t registerLimit = ::fa::maxRegistersPerThread(numThreads);
  if (registers > registerLimit)
    grid.emitWarning() << "mma placement block-m=" << shape->blockM
                       << " block-n=" << shape->blockN
                       << " head-dim=" << shape->headDim
                       << " num-warps=" << int64_t(numWarps) << " needs about "
                       << registers << " registers per thread, over the "
                       << registerLimit << " available: the kernel will spill";

  grid->setAttr(FADialect::getLaunchAttrName(),
                LaunchAttr::get(ctx, StrategyKind::mma, numThreads,
                                layout.totalBytes, stages, registers));
  return success();
}

} // namespace
