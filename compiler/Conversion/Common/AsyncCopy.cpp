//===- AsyncCopy.cpp - cp.async tile copies and K/V rings -------*- C++ -*-===//
#include "compiler/Conversion/Common/AsyncCopy.h"
#include "compiler/Conversion/Common/GpuLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fa;

namespace {


/// The indices a tile copy reads at: the load's batch entry, first row and
/// sequence (null first and end: none), as one iteration of its loop
/// computes them (a paged cache's batch entry and rows change from tile to
/// tile).
struct TileCopyIndices {
  Value batch, row, first, end;

  /// The load's own operands.
  static TileCopyIndices of(LoadTileOp load) {
    return {load.getBatch(), load.getRow(), load.getSequenceFirst(),
            load.getSequenceEnd()};
  }
};

/// The (page entry, row in it) of rows first, first + step, ... (`count`
/// rows) of a paged load's sequence, appended to `addresses`: one division
/// by the page size for the first row, then each row from the previous one
/// by adding step's whole pages and remaining rows (a carry where the rows
/// pass the page's end), where a division a row would cost more than the
/// copies' own instructions.
void lookUpSteppedRows(OpBuilder &b, Location loc, LoadTileOp load,
                       Value batch, Value first, int64_t step, int64_t count,
                       SmallVectorImpl<std::pair<Value, Value>> &addresses) {
  Value source = load.getSource(), pages = load.getPages();
  Value pageRows = memref::DimOp::create(b, loc, source, 2);
  Value stepV = indexConst(b, loc, step);
  // (P is the same for every tile: these two divisions leave the loop.)
  Value stepPages = arith::DivUIOp::create(b, loc, stepV, pageRows);
  Value stepRows = arith::RemUIOp::create(b, loc, stepV, pageRows);
  Value page = arith::DivUIOp::create(b, loc, first, pageRows);
  Value rowInPage = arith::RemUIOp::create(b, loc, first, pageRows);
  for (int64_t i = 0; i < count; ++i) {
    if (i > 0) {
      Value next = arith::AddIOp::create(b, loc, rowInPage, stepRows);
      Value carry = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                          next, pageRows);
      rowInPage = arith::SelectOp::create(
          b, loc, carry, arith::SubIOp::create(b, loc, next, pageRows), next);
      page = arith::AddIOp::create(
          b, loc, arith::AddIOp::create(b, loc, page, stepPages),
          arith::SelectOp::create(b, loc, carry, indexConst(b, loc, 1),
                                  indexConst(b, loc, 0)));
    }
    addresses.push_back(
        {buildPageEntry(b, loc, source, pages, batch, page), rowInPage});
  }
}

/// Copies rows [row, row + R) of source[batch, head] into `buffer` ([R,
/// pitch]) in 16-byte chunks, thread t taking chunks t, t + T, ...: rows at
/// or past `rowLimit` and columns past the head dim (up to the contraction
/// width) are zero-filled (cp.async with 0 source bytes, address clamped).
///
/// A paged load's row addresses (page, row in it, per round) are taken from
/// `pagedRows` where it holds them (another load's of the same rows), else
/// looked up and stored there.
void emitTileCopy(OpBuilder &b, Location loc, LoadTileOp load,
                  const TileCopyIndices &at, Value buffer, int64_t numThreads,
                  const SharedTileCopyLayout &layout,
                  SmallVectorImpl<std::pair<Value, Value>> *pagedRows =
                      nullptr) {
  auto type = cast<RankedTensorType>(load.getType());
  int64_t rows = type.getDimSize(0), headDim = type.getDimSize(1);
  int64_t chunksPerRow = layout.copiedColumns(headDim) / 8;
  int64_t chunks = rows * chunksPerRow;
  Value source = load.getSource();
  Value rowLimit = buildRowLimit(b, loc, source, at.end);
  Value row = buildSourceRow(b, loc, at.first, at.row);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value zero = indexConst(b, loc, 0);
  Value full = indexConst(b, loc, 8);
  Value chunksPerRowV = indexConst(b, loc, chunksPerRow);
  // When the block covers whole rows per round (the usual case), a thread
  // keeps its column and steps down T / chunksPerRow rows per copy: the
  // column test and the row split are computed once.
  bool wholeRows = numThreads % chunksPerRow == 0;
  Value threadRow = arith::DivUIOp::create(b, loc, tid, chunksPerRowV);
  Value threadCol =
      mulConst(b, loc, arith::RemUIOp::create(b, loc, tid, chunksPerRowV), 8);
  // A paged load looks every round's row up first: the table reads are
  // independent, so the copies wait for one load latency, not one each.
  // (The addresses are clamped into the pool: a round past the tile's
  // chunks may look up too.)
  SmallVector<std::pair<Value, Value>> ownPagedRows;
  if (!pagedRows)
    pagedRows = &ownPagedRows;
  Value pages = load.getPages();
  if (pages && pagedRows->empty() && wholeRows)
    lookUpSteppedRows(b, loc, load, at.batch,
                      arith::AddIOp::create(b, loc, row, threadRow),
                      numThreads / chunksPerRow,
                      llvm::divideCeil(chunks, numThreads), *pagedRows);
  else if (pages && pagedRows->empty())
    for (int64_t first = 0; first < chunks; first += numThreads) {
      Value r = arith::DivUIOp::create(b, loc, addConst(b, loc, tid, first),
                                       chunksPerRowV);
      pagedRows->push_back(
          buildSourceRowAddress(b, loc, source, pages, at.batch,
                                arith::AddIOp::create(b, loc, row, r)));
    }
  for (int64_t first = 0; first < chunks; first += numThreads) {
    Value chunk = addConst(b, loc, tid, first);
    auto copyChunk = [&](OpBuilder &b, Location loc) {
      Value r, col;
      if (wholeRows) {
        r = addConst(b, loc, threadRow, first / chunksPerRow);
        col = threadCol;
      } else {
        r = arith::DivUIOp::create(b, loc, chunk, chunksPerRowV);
        col = mulConst(b, loc,
                       arith::RemUIOp::create(b, loc, chunk, chunksPerRowV), 8);
      }
      Value globalRow = arith::AddIOp::create(b, loc, row, r);
      Value rowValid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             globalRow, rowLimit);
      Value colValid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             col, indexConst(b, loc, headDim));
      Value valid = arith::AndIOp::create(b, loc, rowValid, colValid);
      Value srcBatch = at.batch, srcRow;
      if (pages)
        std::tie(srcBatch, srcRow) = (*pagedRows)[first / numThreads];
      else
        srcRow = arith::SelectOp::create(b, loc, rowValid, globalRow, zero);
      Value srcCol = arith::SelectOp::create(b, loc, colValid, col, zero);
      Value srcElements = arith::SelectOp::create(b, loc, valid, full, zero);
      nvgpu::DeviceAsyncCopyOp::create(
          b, loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), buffer,
          layout.chunkIndices(b, loc, r, col), source,
          ValueRange{srcBatch, load.getHead(), srcRow, srcCol},
          b.getIndexAttr(8), srcElements, b.getUnitAttr());
    };
    if (first + numThreads <= chunks) {
      copyChunk(b, loc);
      continue;
    }
    Value inTile = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         chunk, indexConst(b, loc, chunks));
    auto guard = scf::IfOp::create(b, loc, inTile);
    OpBuilder inner = OpBuilder::atBlockBegin(&guard.getThenRegion().front());
    copyChunk(inner, loc);
  }
}

/// `value` (computed in the loop body from the induction variable) at
/// another iteration: its slice inside the loop cloned with `mapping`,
/// which maps the induction variable to that iteration.
FailureOr<Value> valueAtIteration(OpBuilder &b, scf::ForOp loop, Value value,
                                  IRMapping &mapping) {
  return cloneSliceInto(b, loop.getRegion(), value, mapping);
}

/// Replaces the tile value of `load` by the shared buffer `buffer`; the
/// conversion sees it through a cast (folded away with the conversion's own).
void replaceLoad(OpBuilder &b, LoadTileOp load, Value buffer) {
  b.setInsertionPoint(load);
  auto cast = UnrealizedConversionCastOp::create(b, load.getLoc(),
                                                 load.getType(), buffer);
  load.getResult().replaceAllUsesWith(cast.getResult(0));
  load.erase();
}

Value commitGroup(OpBuilder &b, Location loc) {
  return nvgpu::DeviceAsyncCreateGroupOp::create(
      b, loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), ValueRange{});
}

void waitGroups(OpBuilder &b, Location loc, Value token, int64_t pending) {
  nvgpu::DeviceAsyncWaitOp::create(b, loc, token,
                                   b.getI32IntegerAttr(int32_t(pending)));
}

/// A tile loaded once (Q): copy, wait, and make it visible to the block.
void lowerSingleLoad(LoadTileOp load, int64_t numThreads,
                     const SharedTileCopyLayout &layout) {
  OpBuilder b(load);
  Location loc = load.getLoc();
  Value buffer = layout.slotBuffer(b, loc, load, indexConst(b, loc, 0));
  emitTileCopy(b, loc, load, TileCopyIndices::of(load), buffer, numThreads,
               layout);
  waitGroups(b, loc, commitGroup(b, loc), 0);
  if (layout.beforePublish)
    layout.beforePublish(b, loc);
  gpu::BarrierOp::create(b, loc);
  replaceLoad(b, load, buffer);
}

/// The loads of one K/V loop, all with the same ring of `stages` slots.
/// One commit group per iteration holds all of the iteration's copies.
LogicalResult pipelineLoopLoads(scf::ForOp loop, ArrayRef<LoadTileOp> loads,
                                int64_t stages, int64_t numThreads,
                                const SharedTileCopyLayout &layout) {
  Location loc = loop.getLoc();
  // (The batch entry and the rows may change from tile to tile: a paged
  // cache's page; they are computed for the iteration a copy is for.)
  for (LoadTileOp load : loads)
    for (Value v : {Value(load.getSource()), Value(load.getHead())})
      if (Operation *def = v.getDefiningOp(); def && loop->isAncestor(def))
        return load.emitOpError("a pipelined tile load needs its source and "
                                "head defined outside the loop");
  Value lb = loop.getLowerBound(), ub = loop.getUpperBound(),
        step = loop.getStep();
  // Copies the tiles of iteration `iteration` into `slot`, if it runs.
  auto copyIteration = [&](OpBuilder &b, Value iteration,
                           Value slot) -> LogicalResult {
    Value runs =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, iteration, ub);
    auto guard = scf::IfOp::create(b, loc, runs);
    OpBuilder inner = OpBuilder::atBlockBegin(&guard.getThenRegion().front());
    IRMapping mapping;
    mapping.map(loop.getInductionVar(), iteration);
    // K and V of a paged cache read the same rows of pools of one shape
    // (fa.attention's K and V have one shape): V's copy takes K's page
    // lookups.
    SmallVector<std::pair<LoadTileOp, SmallVector<std::pair<Value, Value>>>>
        lookups;
    auto lookupsFor = [&](LoadTileOp load) {
      for (auto &[other, rows] : lookups)
        if (other.getPages() == load.getPages() &&
            other.getBatch() == load.getBatch() &&
            other.getRow() == load.getRow() &&
            other.getSequence() == load.getSequence() &&
            other.getType().getDimSize(0) == load.getType().getDimSize(0))
          return &rows;
      lookups.push_back({load, {}});
      return &lookups.back().second;
    };
    for (LoadTileOp load : loads) {
      TileCopyIndices at = TileCopyIndices::of(load);
      for (Value *index : {&at.batch, &at.row, &at.first, &at.end}) {
        if (!*index)
          continue;
        FailureOr<Value> value =
            valueAtIteration(inner, loop, *index, mapping);
        if (failed(value))
          return failure();
        *index = *value;
      }
      emitTileCopy(inner, loc, load, at,
                   layout.slotBuffer(inner, loc, load, slot), numThreads,
                   layout, load.getPages() ? lookupsFor(load) : nullptr);
    }
    return success();
  };

  OpBuilder b(loop);
  if (stages == 1) {
    // No prefetch: each iteration copies its own tiles and waits for them.
    b.setInsertionPoint(loads.front());
    gpu::BarrierOp::create(b, loc); // nobody still reads the last tiles (WAR)
    Value slot = indexConst(b, loc, 0);
    if (failed(copyIteration(b, loop.getInductionVar(), slot)))
      return failure();
    waitGroups(b, loc, commitGroup(b, loc), 0);
    if (layout.beforePublish)
      layout.beforePublish(b, loc);
    gpu::BarrierOp::create(b, loc);
    for (LoadTileOp load : loads) {
      OpBuilder at(load);
      replaceLoad(at, load, layout.slotBuffer(at, loc, load, slot));
    }
    return success();
  }

  // Prologue: the tiles of iterations 0 .. stages - 2 into slots 0 ..
  // In a loop that runs again (the backward's loop over query heads), the
  // previous run's last iterations may still read those slots (WAR).
  if (loop->getParentOfType<scf::ForOp>())
    gpu::BarrierOp::create(b, loc);
  Value token;
  for (int64_t s = 0; s + 1 < stages; ++s) {
    Value iteration = arith::AddIOp::create(
        b, loc, lb, arith::MulIOp::create(b, loc, step, indexConst(b, loc, s)));
    if (failed(copyIteration(b, iteration, indexConst(b, loc, s))))
      return failure();
    token = commitGroup(b, loc);
  }
  // Iteration j: wait for tile j (stages - 2 newer groups may still be in
  // flight); after the barrier nobody reads slot (j - 1) % stages, where
  // tile j + stages - 1 goes.
  b.setInsertionPoint(loads.front());
  Value j = arith::DivUIOp::create(
      b, loc, arith::SubIOp::create(b, loc, loop.getInductionVar(), lb), step);
  waitGroups(b, loc, token, stages - 2);
  if (layout.beforePublish)
    layout.beforePublish(b, loc);
  gpu::BarrierOp::create(b, loc);
  Value ahead = arith::AddIOp::create(
      b, loc, loop.getInductionVar(),
      arith::MulIOp::create(b, loc, step, indexConst(b, loc, stages - 1)));
  Value stagesV = indexConst(b, loc, stages);
  Value aheadSlot =
      arith::RemUIOp::create(b, loc, addConst(b, loc, j, stages - 1), stagesV);
  if (failed(copyIteration(b, ahead, aheadSlot)))
    return failure();
  commitGroup(b, loc);
  Value slot = arith::RemUIOp::create(b, loc, j, stagesV);
  for (LoadTileOp load : loads) {
    OpBuilder at(load);
    replaceLoad(at, load, layout.slotBuffer(at, loc, load, slot));
  }
  return success();
}

} // namespace

SharedTileCopyLayout mlir::fa::paddedRowsLayout(
    std::function<int64_t(int64_t headDim)> copiedColumns,
    StringRef placePass) {
  SharedTileCopyLayout layout;
  layout.slotBuffer = [](OpBuilder &b, Location loc, LoadTileOp load,
                         Value slot) {
    auto type = sharedBufferType(cast<RankedTensorType>(load.getType()));
    int64_t slotBytes =
        type.getNumElements() * type.getElementTypeBitWidth() / 8;
    Value offset =
        arith::AddIOp::create(b, loc, mulConst(b, loc, slot, slotBytes),
                              indexConst(b, loc, sharedOffset(load)));
    return sharedBufferAt(b, loc, offset, type);
  };
  layout.chunkIndices = [](OpBuilder &, Location, Value row,
                           Value col) -> SmallVector<Value> {
    return {row, col};
  };
  layout.copiedColumns = std::move(copiedColumns);
  layout.placePass = placePass;
  return layout;
}

LogicalResult
mlir::fa::lowerChunkedTileLoads(gpu::GPUFuncOp kernel,
                                const SharedTileCopyLayout &layout) {
  int64_t numThreads = kernel.getKnownBlockSizeAttr()[0];
  SmallVector<SmallVector<LoadTileOp>> groups;
  WalkResult walk = kernel.walk([&](LoadTileOp load) {
    if (!load->hasAttr(FADialect::getCopyChunksAttrName()))
      return WalkResult::advance();
    if (!load->hasAttr(FADialect::getSharedOffsetAttrName()) ||
        load->getParentOfType<scf::ForOp>()) {
      load.emitOpError("a chunked copy needs an fa.shared_offset and a tile "
                       "outside loops (run ")
          << layout.placePass << ")";
      return WalkResult::interrupt();
    }
    // With the group's first load when it directly follows the group's
    // last one and reads nothing defined after the first.
    if (!groups.empty()) {
      LoadTileOp first = groups.back().front(), last = groups.back().back();
      bool follows = last->getNextNode() == load.getOperation();
      bool operandsReady = llvm::all_of(load->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return !def || def->isBeforeInBlock(first) ||
               def->getBlock() != first->getBlock();
      });
      if (follows && operandsReady) {
        groups.back().push_back(load);
        return WalkResult::advance();
      }
    }
    groups.push_back({load});
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  for (SmallVector<LoadTileOp> &group : groups) {
    OpBuilder b(group.front());
    Location loc = group.front().getLoc();
    SmallVector<Value> buffers;
    for (LoadTileOp load : group) {
      buffers.push_back(layout.slotBuffer(b, loc, load, indexConst(b, loc, 0)));
      emitTileCopy(b, loc, load, TileCopyIndices::of(load), buffers.back(),
                   numThreads, layout);
    }
    waitGroups(b, loc, commitGroup(b, loc), 0);
    if (layout.beforePublish)
      layout.beforePublish(b, loc);
    gpu::BarrierOp::create(b, loc);
    for (auto [load, buffer] : llvm::zip(group, buffers)) {
      OpBuilder at(load);
      replaceLoad(at, load, buffer);
    }
  }
  return success();
}

int64_t mlir::fa::sharedOffset(LoadTileOp load) {
  return load->getAttrOfType<IntegerAttr>(FADialect::getSharedOffsetAttrName())
      .getInt();
}

LogicalResult mlir::fa::lowerTileLoads(gpu::GPUFuncOp kernel,
                                       const SharedTileCopyLayout &layout) {
  int64_t numThreads = kernel.getKnownBlockSizeAttr()[0];
  SmallVector<LoadTileOp> single;
  llvm::MapVector<scf::ForOp, SmallVector<LoadTileOp>> pipelined;
  LoadTileOp rowVector;
  kernel.walk([&](LoadTileOp load) {
    // Register tiles (the backward's per-row vectors) are loaded by the
    // strategy's fragment lowering.
    auto type = cast<RankedTensorType>(load.getType());
    if (auto encoding =
            dyn_cast_or_null<TileEncodingInterface>(type.getEncoding());
        encoding && !encoding.isShared())
      return;
    // The copies below fill 2-d tiles; a row vector in shared memory (the
    // wgmma backward's staged LSE and D) is fa-warp-specialize's producer's.
    if (type.getRank() != 2) {
      rowVector = load;
      return;
    }
    auto loop = load->getParentOfType<scf::ForOp>();
    if (loop && load->hasAttr(FADialect::getPipelineStagesAttrName()))
      pipelined[loop].push_back(load);
    else
      single.push_back(load);
  });
  if (rowVector)
    return rowVector.emitOpError("a shared tile copy takes a 2-d tile, got ")
           << rowVector.getType()
           << " (a row vector in shared memory is copied by "
              "fa-warp-specialize's producer: run it first)";
  for (LoadTileOp load : single) {
    if (!load->hasAttr(FADialect::getSharedOffsetAttrName()))
      return load.emitOpError("has no fa.shared_offset (run ")
             << layout.placePass << ")";
    lowerSingleLoad(load, numThreads, layout);
  }
  for (auto &[loop, loads] : pipelined) {
    int64_t stages =
        loads.front()
            ->getAttrOfType<IntegerAttr>(FADialect::getPipelineStagesAttrName())
            .getInt();
    for (LoadTileOp load : loads)
      if (!load->hasAttr(FADialect::getSharedOffsetAttrName()) ||
          load->getAttrOfType<IntegerAttr>(
                  FADialect::getPipelineStagesAttrName())
                  .getInt() != stages ||
          stages < 1)
        return load.emitOpError("the loads of one loop need shared offsets and "
                                "one positive fa.pipeline_stages");
    if (loads.front()->getBlock() != loop.getBody())
      return loads.front().emitOpError("a pipelined load must be in the body "
                                       "of its loop");
    if (failed(pipelineLoopLoads(loop, loads, stages, numThreads, layout)))
      return failure();
  }
  return success();
}

