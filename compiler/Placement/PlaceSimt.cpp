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
#include "lib/LaunchPlan.h"
#include "lib/Strategy/SimtModel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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

/// The largest row padding fa-place-simt's option takes (elements).
constexpr int64_t kMaxRowPad = 64;

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
  /// The `pad` option in range, or an error on `grid` naming it.
  LogicalResult checkPadOption(GridOp grid) {
    if (pad >= 0 && pad <= kMaxRowPad)
      return success();
    return grid.emitOpError() << "pad must be in [0, " << kMaxRowPad
                              << "] (0: the default), got " << int64_t(pad);
  }
  /// With chunked-copies, the elements of a 16-byte chunk of the program's
  /// tiles where its loads may copy in chunks: a program without matmuls
  /// (the others keep the strategy's copies) whose 2-d loads all take rows
  /// of whole chunks of 16-bit elements (the copies' unit), none in a loop;
  /// else 0.
  int64_t chunkedCopyElements(GridOp grid) {
    if (!chunkedCopies)
      return 0;
    constexpr int64_t kChunkElements = 8;
    bool loads = false;
    WalkResult walk = grid.walk([&](Operation *op) {
      if (isa<TileMatmulOp>(op))
        return WalkResult::interrupt();
      auto load = dyn_cast<LoadTileOp>(op);
      if (!load || load.getType().getRank() != 2)
        return WalkResult::advance();
      loads = true;
      bool wholeChunks = load.getType().getElementTypeBitWidth() == 16 &&
                         load.getType().getDimSize(1) % kChunkElements == 0;
      return wholeChunks && !op->getParentOfType<scf::ForOp>()
                 ? WalkResult::advance()
                 : WalkResult::interrupt();
    });
    return loads && !walk.wasInterrupted() ? kChunkElements : 0;
  }
  LogicalResult placeForwardProgram(GridOp grid, const ::fa::GpuArch &target);
  LogicalResult placeBackwardProgram(GridOp grid,
                                     const ::fa::GpuArch &target);
};

/// Gives each shared tile (fa.load_tile and fa.convert_layout results) its
/// own buffer, in program order; returns the bytes they take.
static int64_t layOutSharedTiles(GridOp grid) {
  MLIRContext *ctx = grid.getContext();
  int64_t sharedBytes = 0;
  grid.walk([&](Operation *op) {
    if (!isa<LoadTileOp, ConvertLayoutOp>(op))
      return;
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    auto encoding = dyn_cast<SharedEncodingAttr>(type.getEncoding());
    if (!encoding)
      return;
    op->setAttr(FADialect::getSharedOffsetAttrName(),
                IntegerAttr::get(IntegerType::get(ctx, 64), sharedBytes));
    int64_t bytes = encoding.getSharedElements(type.getShape()) *
                    type.getElementTypeBitWidth() / 8;
    sharedBytes += llvm::alignTo(bytes, kSharedAlignment);
  });
  return sharedBytes;
}

/// Moves the register operands of every matmul to shared memory, where each
/// thread can read whole rows and columns: just before the first matmul
/// that reads the value (its other readers, the backward's dS, follow in
/// the same block), once per value.
static void stageMatmulOperands(GridOp grid, Attribute shared) {
  llvm::DenseMap<Value, Value> staged;
  grid.walk([&](TileMatmulOp op) {
    for (OpOperand *operand : {&op.getLhsMutable(), &op.getRhsMutable()}) {
      Value value = operand->get();
      auto type = cast<RankedTensorType>(value.getType());
      if (isa<SharedEncodingAttr>(type.getEncoding()))
        continue;
      Value &moved = staged[value];
      if (!moved) {
        OpBuilder builder(op);
        moved = ConvertLayoutOp::create(builder, op.getLoc(),
                                        withEncoding(type, shared), value);
      }
      operand->set(moved);
    }
  });
}

LogicalResult FAPlaceSimtPass::placeProgram(GridOp grid,
                                            const ::fa::GpuArch &target) {
  bool forward = isForwardProgram(grid);
  return forward ? placeForwardProgram(grid, target)
                 : placeBackwardProgram(grid, target);
}

/// The backward's programs (fa-tile-backward): one thread grid for every
/// register tile ([rows, D] gradients and query rows, [B_r, B_c] scores,
/// per-row vectors), the matmul operands and the row_dot inputs in shared
/// memory, everything else in registers.
LogicalResult
FAPlaceSimtPass::placeBackwardProgram(GridOp grid,
                                      const ::fa::GpuArch &target) {
  // The tile extents the thread grid must divide.
  SmallVector<int64_t> rowExtents, colExtents;
  grid.walk([&](Operation *op) {
    for (Value result : op->getResults())
      if (auto type = dyn_cast<RankedTensorType>(result.getType())) {
        rowExtents.push_back(type.getDimSize(0));
        if (type.getRank() == 2)
          colExtents.push_back(type.getDimSize(1));
      }
  });
  if (rowExtents.empty())
    return grid.emitOpError("has no tiles to place");
  // The thread grid of `warps` warps: as many thread columns (up to a
  // warp) as divide every tile's columns; 0 rows where the rows do not
  // divide every tile's rows.
  auto threadGrid = [&](int64_t warps) -> std::pair<int64_t, int64_t> {
    int64_t cols = 32;
    while (cols > 1 &&
           llvm::any_of(colExtents, [&](int64_t c) { return c % cols != 0; }))
      cols /= 2;
    int64_t rows = warps * 32 / cols;
    bool divides =
        llvm::all_of(rowExtents, [&](int64_t r) { return r % rows == 0; });
    return {divides ? rows : 0, cols};
  };
  // A split-KV forward's merge of the parts takes its own warps, not the
  // strategy's (kCombineWarps; fewer where the rows are too few for them).
  bool mergesParts = false;
  grid.walk([&](MergePartialOp) { mergesParts = true; });
  int64_t warps = numWarps;
  if (mergesParts) {
    warps = ::fa::kCombineWarps;
    while (warps > 1 && threadGrid(warps).first == 0)
      warps /= 2;
  }
  int64_t numThreads = warps * 32;
  auto [threadRows, threadCols] = threadGrid(warps);
  if (threadRows == 0) {
    int64_t rowsNeeded = numThreads / threadCols;
    for (int64_t rows : rowExtents)
      if (rows % rowsNeeded != 0)
        return grid.emitOpError()
               << "thread grid " << rowsNeeded << "x" << threadCols
               << " (num-warps=" << warps << ") does not divide a tile of "
               << rows << " rows: use tiles that are multiples of "
               << rowsNeeded << " rows or fewer warps";
  }
  auto blocked = BlockedEncodingAttr::get(&getContext(), threadRows, threadCols);
  if (failed(checkPadOption(grid)))
    return failure();
  int64_t rowPad = pad;
  if (rowPad == 0)
    rowPad = llvm::all_of(colExtents, [](int64_t c) { return c % 4 == 0; })
                 ? 4
                 : 1;
  // Chunked copies: the program's tiles come from memory in 16-byte chunks
  // (issued together, one wait) instead of element by element, into rows
  // padded by one chunk.
  int64_t chunkElements = chunkedCopyElements(grid);
  if (chunkElements && pad == 0)
    rowPad = chunkElements;
  auto shared = SharedEncodingAttr::get(&getContext(), rowPad);

  rematerializeHoistedConstants(grid);
  placeTiles(grid, blocked, shared);
  // Loads that only feed element-wise ops (per-row vectors, the dQ
  // accumulator) go straight to registers.
  grid.walk([&](LoadTileOp op) {
    bool readWhole = llvm::any_of(op->getUsers(), [](Operation *user) {
      return isa<TileMatmulOp, RowDotOp>(user);
    });
    if (!readWhole)
      op.getResult().setType(withEncoding(op.getType(), blocked));
  });
  stageMatmulOperands(grid, shared);
  if (chunkElements && rowPad % chunkElements == 0)
    grid.walk([&](LoadTileOp op) {
      if (isa<SharedEncodingAttr>(op.getType().getEncoding()))
        op->setAttr(FADialect::getCopyChunksAttrName(),
                    UnitAttr::get(&getContext()));
    });

  int64_t sharedBytes = layOutSharedTiles(grid);
  int64_t available =
      target.maxSharedMemoryPerBlock - ::fa::kStaticSharedMemoryReserve;
  if (sharedBytes > available)
    return grid.emitOpError()
           << "needs " << sharedBytes
           << " bytes of shared memory per block (num-warps=" << warps
           << "), over the " << available << " bytes available on "
           << target.name;

  // Registers, roughly: a thread's elements of the loop-carried tiles (the
  // dK, dV accumulators), four of the largest other register tile (scores,
  // probabilities and their gradients live together), and 32 for the rest.
  int64_t carried = 0, largest = 0;
  auto perThread = [&](Value value) -> int64_t {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type || !isa<BlockedEncodingAttr>(type.getEncoding()))
      return 0;
    return type.getNumElements() / numThreads;
  };
  grid.walk([&](Operation *op) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      if (!loop->getParentOfType<scf::ForOp>())
        for (Value arg : loop.getRegionIterArgs())
          carried += perThread(arg);
      return;
    }
    for (Value result : op->getResults())
      largest = std::max(largest, perThread(result));
  });
  // (A program without matmuls, the delta and dq programs, holds one.)
  bool hasMatmul = false;
  grid.walk([&](TileMatmulOp) { hasMatmul = true; });
  int64_t registers = carried + (hasMatmul ? 4 : 1) * largest + 32;
  int64_t registerLimit = ::fa::maxRegistersPerThread(numThreads);
  if (registers > registerLimit)
    grid.emitWarning() << "placement (num-warps=" << warps << ") needs about "
                       << registers << " registers per thread, over the "
                       << registerLimit << " available: the kernel will spill";
  grid->setAttr(FADialect::getLaunchAttrName(),
                LaunchAttr::get(&getContext(), StrategyKind::simt, numThreads,
                                sharedBytes, /*stages=*/1, registers));
  return success();
}

LogicalResult FAPlaceSimtPass::placeForwardProgram(GridOp grid,
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
  if (failed(checkPadOption(grid)))
    return failure();
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
  stageMatmulOperands(grid, shared);

  // Shared memory: one buffer per shared tile, laid out in program order.
  int64_t sharedBytes = layOutSharedTiles(grid);
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
