//===- Placement.cpp - What every placement pass needs ----------*- C++ -*-===//
#include "compiler/Placement/Placement.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::fa;

LogicalResult mlir::fa::placeEachProgram(
    Operation *root, StringRef arch,
    llvm::function_ref<LogicalResult(GridOp, const ::fa::GpuArch &)> place) {
  std::optional<::fa::GpuArch> target = ::fa::lookupGpuArch(arch);
  if (!target)
    return root->emitError() << ::fa::unsupportedArchMessage(arch.str());
  WalkResult result = root->walk([&](GridOp grid) {
    // Placed already by an earlier placement pass (the mma strategy places
    // the backward's dkdv program and leaves the others to fa-place-simt).
    if (grid->hasAttr(FADialect::getLaunchAttrName()))
      return WalkResult::advance();
    return succeeded(place(grid, *target)) ? WalkResult::advance()
                                           : WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

/// Whether `grid` is one of fa-tile-backward's programs with backward ops.
static bool isBackwardProgram(GridOp grid) {
  bool backward = false;
  grid.walk([&](Operation *op) {
    backward |= isa<RowDotOp, RecomputeProbsOp, SoftmaxGradOp,
                    AccumulateTileOp>(op);
  });
  return backward;
}

FailureOr<ProgramShape> mlir::fa::readProgramShape(GridOp grid) {
  if (isBackwardProgram(grid))
    return grid.emitOpError("is a program of the backward, which this "
                            "placement does not place");
  ProgramShape shape;
  grid.walk([&](OnlineSoftmaxOp op) {
    shape.blockN =
        cast<RankedTensorType>(op.getScores().getType()).getDimSize(1);
  });
  grid.walk([&](FinalizeOp op) {
    auto acc = cast<RankedTensorType>(op.getAcc().getType());
    shape.blockM = acc.getDimSize(0);
    shape.headDim = acc.getDimSize(1);
  });
  if (!shape.blockM || !shape.blockN)
    return grid.emitOpError("is not a tiled attention program (expected "
                            "fa.online_softmax and fa.finalize)");
  return shape;
}

LogicalResult mlir::fa::placeAttentionTiles(GridOp grid, StringRef strategy,
                                           int64_t qOffset, int64_t kOffset,
                                           int64_t vOffset, int64_t stages) {
  SmallVector<LoadTileOp> once, streamed;
  grid.walk([&](LoadTileOp op) {
    (op->getParentOfType<scf::ForOp>() ? streamed : once).push_back(op);
  });
  if (once.size() != 1 || streamed.size() != 2)
    return grid.emitOpError("the ")
           << strategy
           << " strategy expects one tile loaded once (Q) and two streamed "
              "by the K/V loop (K, V), got "
           << once.size() << " and " << streamed.size();
  Builder b(grid.getContext());
  once[0]->setAttr(FADialect::getSharedOffsetAttrName(),
                   b.getI64IntegerAttr(qOffset));
  streamed[0]->setAttr(FADialect::getSharedOffsetAttrName(),
                       b.getI64IntegerAttr(kOffset));
  streamed[1]->setAttr(FADialect::getSharedOffsetAttrName(),
                       b.getI64IntegerAttr(vOffset));
  for (LoadTileOp op : streamed)
    op->setAttr(FADialect::getPipelineStagesAttrName(),
                b.getI64IntegerAttr(stages));
  return success();
}

FailureOr<BackwardLoads> mlir::fa::readBackwardLoads(GridOp grid,
                                                    StringRef strategy) {
  BackwardLoads loads;
  grid.walk([&](LoadTileOp op) {
    if (cast<RankedTensorType>(op.getType()).getRank() == 1)
      loads.rowVectors.push_back(op);
    else
      (op->getParentOfType<scf::ForOp>() ? loads.streamed : loads.resident)
          .push_back(op);
  });
  if (loads.resident.size() != 2 || loads.streamed.size() != 2)
    return grid.emitOpError("the ")
           << strategy
           << " strategy places a backward program that loads K and V once "
              "and streams Q and dO, got "
           << loads.resident.size() << " resident and "
           << loads.streamed.size() << " streamed tiles";
  return loads;
}

void mlir::fa::placeBackwardLoads(const BackwardLoads &loads,
                                  Attribute rowEncoding, int64_t kOffset,
                                  int64_t vOffset, int64_t qOffset,
                                  int64_t gradOutputOffset, int64_t stages) {
  LoadTileOp firstStreamed = loads.streamed[0];
  for (LoadTileOp op : loads.rowVectors) {
    op.getResult().setType(withEncoding(op.getType(), rowEncoding));
    if (op->getBlock() == firstStreamed->getBlock() &&
        firstStreamed->isBeforeInBlock(op))
      op->moveBefore(firstStreamed);
  }
  Builder b(firstStreamed.getContext());
  auto setOffset = [&](Operation *op, int64_t offset) {
    op->setAttr(FADialect::getSharedOffsetAttrName(),
                b.getI64IntegerAttr(offset));
  };
  setOffset(loads.resident[0], kOffset);
  setOffset(loads.resident[1], vOffset);
  setOffset(loads.streamed[0], qOffset);
  setOffset(loads.streamed[1], gradOutputOffset);
  for (LoadTileOp op : loads.streamed)
    op->setAttr(FADialect::getPipelineStagesAttrName(),
                b.getI64IntegerAttr(stages));
}

RankedTensorType mlir::fa::withEncoding(Type type, Attribute encoding) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(), tensor.getElementType(),
                               encoding);
}

bool mlir::fa::isUnplacedTile(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && !tensor.getEncoding();
}

void mlir::fa::rematerializeHoistedConstants(GridOp grid) {
  OpBuilder entry = OpBuilder::atBlockBegin(&grid.getBodyBlock());
  grid.walk([&](Operation *op) {
    for (OpOperand &operand : op->getOpOperands()) {
      auto constant = operand.get().getDefiningOp<arith::ConstantOp>();
      if (constant && isUnplacedTile(constant.getType()) &&
          !grid->isAncestor(constant))
        operand.set(entry.clone(*constant)->getResult(0));
    }
  });
}

void mlir::fa::placeTiles(GridOp grid, Attribute registers, Attribute shared) {
  placeTiles(
      grid, [&](RankedTensorType) { return registers; }, shared);
}

void mlir::fa::placeTiles(
    GridOp grid, llvm::function_ref<Attribute(RankedTensorType)> registers,
    Attribute shared) {
  auto placeValue = [&](Value value, bool inRegisters) {
    if (isUnplacedTile(value.getType())) {
      auto type = cast<RankedTensorType>(value.getType());
      value.setType(withEncoding(type, inRegisters ? registers(type) : shared));
    }
  };
  grid.walk([&](Operation *op) {
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      if (dense && isUnplacedTile(dense.getType())) {
        auto type = withEncoding(dense.getType(),
                                 registers(cast<RankedTensorType>(dense.getType())));
        constant.setValueAttr(dense.reshape(type));
        constant.getResult().setType(type);
      }
      return;
    }
    bool inRegisters = !isa<LoadTileOp>(op);
    for (Value result : op->getResults())
      placeValue(result, inRegisters);
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          placeValue(arg, /*inRegisters=*/true);
  });
}

LogicalResult mlir::fa::checkSixteenBitTiles(GridOp grid, Type elementType,
                                             StringRef strategy) {
  if (elementType && (elementType.isF16() || elementType.isBF16()))
    return success();
  return grid.emitOpError("the ")
         << strategy << " strategy needs f16 or bf16 tiles, got "
         << elementType;
}

LogicalResult mlir::fa::checkRightOperandsLoaded(GridOp grid,
                                                 StringRef strategy) {
  WalkResult walk = grid.walk([&](TileMatmulOp op) {
    if (op.getRhs().getDefiningOp<LoadTileOp>())
      return WalkResult::advance();
    op.emitOpError("the ") << strategy
                           << " strategy reads the right operand from a "
                              "loaded shared tile";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

void mlir::fa::setPlacedLaunch(GridOp grid, StringRef what,
                               StrategyKind strategy, const PlacedTiles &tiles,
                               int64_t numThreads, int64_t sharedBytes,
                               int64_t stages, int64_t registers,
                               int64_t registerLimit) {
  if (registers > registerLimit)
    grid.emitWarning() << what << " block-m=" << tiles.blockM
                       << " block-n=" << tiles.blockN
                       << " head-dim=" << tiles.headDim
                       << " num-warps=" << tiles.numWarps << " needs about "
                       << registers << " registers per thread, over the "
                       << registerLimit << " available: the kernel will spill";
  grid->setAttr(FADialect::getLaunchAttrName(),
                LaunchAttr::get(grid.getContext(), strategy, numThreads,
                                sharedBytes, stages, registers));
}

Type mlir::fa::loadedElementType(GridOp grid) {
  Type elementType;
  grid.walk([&](LoadTileOp op) {
    auto type = cast<RankedTensorType>(op.getType());
    if (type.getRank() == 2)
      elementType = type.getElementType();
  });
  return elementType;
}
