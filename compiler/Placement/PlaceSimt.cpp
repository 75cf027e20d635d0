//===- PlaceSimt.cpp - Placement for the SIMT strategy -------------*- C++ -*-===//
//
// Decides where every tile of an fa.grid program lives (registers with a
// thread layout, or shared memory) and checks that the choice fits the target.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/Placement/Placement.h"
#include "lib/GpuTarget.h"
#include "lib/KernelSpec.h"
#include "lib/Strategy/SimtModel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <numeric>

#define DEBUG_TYPE "fa-place-simt"

namespace mlir::fa {
#define GEN_PASS_DEF_FAPLACESIMT
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

/// Shared-memory buffers are 16-byte aligned (vector accesses).
static constexpr int64_t kSharedAlignment = 16;

namespace {

struct FAPlaceSimtPass : public mlir::fa::impl::FAPlaceSimtBase<FAPlaceSimtPass> {
  using FAPlaceSimtBase::FAPlaceSimtBase;

  void runOnOperation() override {
    if (numWarps < 1 || numWarps > 32) {
      getOperation().emitError()
          << "num-warps must be in [1, 32], got " << int64_t(numWarps);
      return signalPassFailure();
    }
    if (failed(placeEachProgram(getOperation(), arch,
                                [&](GridOp grid, const ::fa::GpuArch &target) {
                                  return placeProgram(grid, target);
                                })))
      signalPassFailure();
  }

  LogicalResult placeProgram(GridOp grid, const ::fa::GpuArch &target);
};

LogicalResult FAPlaceSimtPass::placeProgram(GridOp grid,
                                            const ::fa::GpuArch &target) {
  // Read the config from the program.
  FailureOr<ProgramShape> programShape = readProgramShape(grid);
  if (failed(programShape))
    return failure();
  ProgramShape shape = *programShape;
  std::string config = "block-m=" + std::to_string(shape.blockM) +
                       " block-n=" + std::to_string(shape.blockN) +
                       " head-dim=" + std::to_string(shape.headDim) +
                       " num-warps=" + std::to_string(numWarps);

  // Thread grid: the threads of a row span columns, at most one warp wide.
  int64_t numThreads = numWarps * 32;
  int64_t threadCols = ::fa::simt::threadColumns(shape.blockN, shape.headDim);
  int64_t threadRows = numThreads / threadCols;
  if (shape.blockM % threadRows)
    return grid.emitOpError()
           << "thread grid " << threadRows << "x" << threadCols << " ("
           << config << ") does not divide the tiles: block-m "
           << shape.blockM << " is not a multiple of " << threadRows
           << " thread rows";
  auto blocked = BlockedEncodingAttr::get(&getContext(), threadRows, threadCols);
  // A padding of 4 keeps 16-byte rows for vector loads along the rows and
  // still spreads a column over the banks for 16-byte accesses; a padding
  // of 1 suits scalar column reads.
  int64_t rowPad = pad;
  if (rowPad == 0)
    rowPad = ::fa::simt::rowPad(shape.blockN, shape.headDim);
  auto shared = SharedEncodingAttr::get(&getContext(), rowPad);

  // Tile constants hoisted out of the program (the initial online-softmax
  // state) are rematerialized inside it, where they get placed.
  rematerializeHoistedConstants(grid);
  // Registers by default: every tile value in the program...
  placeTiles(grid, blocked, shared);
  // ... except what a matmul reads whole, which goes to shared memory.
  grid.walk([&](TileMatmulOp op) {
    for (OpOperand *operand : {&op.getLhsMutable(), &op.getRhsMutable()}) {
      Value value = operand->get();
      auto type = cast<RankedTensorType>(value.getType());
      if (isa<SharedEncodingAttr>(type.getEncoding()))
        continue;
      OpBuilder builder(op);
      auto moved = ConvertLayoutOp::create(builder, op.getLoc(),
                                           withEncoding(type, shared), value);
      operand->set(moved);
    }
  });

  // Shared memory: one buffer per shared tile, laid out in program order.
  int64_t sharedBytes = 0;
  grid.walk([&](Operation *op) {
    if (!isa<LoadTileOp, ConvertLayoutOp>(op))
      return;
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    auto encoding = cast<TileEncodingInterface>(type.getEncoding());
    op->setAttr(FADialect::getSharedOffsetAttrName(),
                IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                 sharedBytes));
    int64_t bytes = encoding.getSharedElements(type.getShape()) *
                    type.getElementTypeBitWidth() / 8;
    sharedBytes += llvm::alignTo(bytes, kSharedAlignment);
  });
  // The block's limit also covers static shared memory: the NVPTX back end
  // declares the dynamic shared memory symbol as one aligned static byte.
  int64_t available =
      target.maxSharedMemoryPerBlock - ::fa::kStaticSharedMemoryReserve;
  if (sharedBytes > available)
    return grid.emitOpError()
           << "placement " << config << " needs " << sharedBytes
           << " bytes of shared memory per block, over the " << available
           << " bytes available on " << target.name;

  // The register estimate is the resource model's, as for the defaults.
  // (The shared allocation is the IR's: the model's figure assumes distinct
  // Q, K, V and P tiles, and a program that loads K and V from one buffer
  // shares the tile.)
  int64_t registers = ::fa::simt::estimateRegisters(
      shape.blockM, shape.blockN, shape.headDim, numWarps);
  int64_t registerLimit = ::fa::maxRegistersPerThread(numThreads);
  if (registers > registerLimit)
    grid.emitWarning() << "placement " << config << " needs about "
                       << registers << " registers per thread, over the "
                       << registerLimit << " available: the kernel will spill";

  Builder b(&getContext());
  grid->setAttr(FADialect::getLaunchAttrName(),
                LaunchAttr::get(&getContext(), StrategyKind::simt, numThreads,
                                sharedBytes, /*stages=*/1, registers));
  return success();
}

} // namespace
