//===- PlaceWgmma.cpp - Placement for the Hopper wgmma strategy -*- C++ -*-===//
//
// Decides where every tile of an fa.grid program lives for warpgroup MMA:
// Q, K, V in 128-byte-swizzled shared memory (read by wgmma descriptors),
// S, P and O in accumulator fragments, P moved to A-operand fragments for
// the register-A form of P V; and checks the config against the strategy's
// resource model.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/Placement/Placement.h"
#include "lib/GpuTarget.h"
#include "lib/Strategy/WgmmaModel.h"

#include "mlir/IR/BuiltinAttributes.h"

#define DEBUG_TYPE "fa-place-wgmma"

namespace mlir::fa {
#define GEN_PASS_DEF_FAPLACEWGMMA
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

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
};

LogicalResult FAPlaceWgmmaPass::placeProgram(GridOp grid,
                                             const ::fa::GpuArch &target) {
  FailureOr<ProgramShape> shape = readProgramShape(grid);
  if (failed(shape))
    return failure();
  Type elementType;
  grid.walk([&](LoadTileOp op) {
    elementType = cast<RankedTensorType>(op.getType()).getElementType();
  });
  if (!elementType || !(elementType.isF16() || elementType.isBF16()))
    return grid.emitOpError("the wgmma strategy needs f16 or bf16 tiles, got ")
           << elementType;

  ::fa::wgmma::Config config{shape->headDim, shape->blockM, shape->blockN,
                             numWarps,       stages,        2};
  if (std::string error = ::fa::wgmma::checkFits(config, target);
      !error.empty())
    return grid.emitOpError(error);
  ::fa::wgmma::SharedLayout layout = ::fa::wgmma::sharedLayout(config);

  MLIRContext *ctx = &getContext();
  auto accumulator = MmaEncodingAttr::get(ctx, numWarps);
  auto operand = MmaOperandEncodingAttr::get(ctx, numWarps);
  auto shared =
      SwizzledSharedEncodingAttr::get(ctx, ::fa::wgmma::kSwizzleBytes);
  rematerializeHoistedConstants(grid);
  placeTiles(grid, accumulator, shared);

  // Both operands of a matmul come from loaded shared tiles (Q K^T), or the
  // left one is a register tile (P) that moves to A fragments just before
  // its matmul (P V).
  WalkResult walk = grid.walk([&](TileMatmulOp op) {
    if (!op.getRhs().getDefiningOp<LoadTileOp>()) {
      op.emitOpError("the wgmma strategy reads the right operand from a "
                     "loaded shared tile");
      return WalkResult::interrupt();
    }
    Value lhs = op.getLhs();
    if (lhs.getDefiningOp<LoadTileOp>())
      return WalkResult::advance();
    OpBuilder builder(op);
    Value converted = ConvertLayoutOp::create(
        builder, op.getLoc(), withEncoding(lhs.getType(), operand), lhs);
    op.getLhsMutable().assign(converted);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();

  // Shared memory, as the model lays it out: Q, then the K and V rings.
  if (failed(placeAttentionTiles(grid, "wgmma", layout.qOffset,
                                 layout.kOffset, layout.vOffset, stages)))
    return failure();

  int64_t numThreads = numWarps * 32;
  int64_t registers = ::fa::wgmma::estimateRegisters(config);
  int64_t registerLimit = ::fa::wgmma::consumerRegisters(
      numWarps, ::fa::wgmma::runsPersistent(shape->headDim, numWarps));
  if (registers > registerLimit)
    grid.emitWarning() << "wgmma placement block-m=" << shape->blockM
                       << " block-n=" << shape->blockN
                       << " head-dim=" << shape->headDim
                       << " num-warps=" << int64_t(numWarps) << " needs about "
                       << registers << " registers per thread, over the "
                       << registerLimit << " available: the kernel will spill";

  grid->setAttr(FADialect::getLaunchAttrName(),
                LaunchAttr::get(ctx, StrategyKind::wgmma, numThreads,
                                layout.totalBytes, stages, registers));
  return success();
}

} // namespace
