//===- WarpSpecializeProducer.cpp - fa-warp-specialize's producer -*- C++
//-*-===//
//
// The producer warpgroup of a warp-specialized program: one thread issues
// every TMA copy into the rings, each after the consumers released its
// slot (WarpSpecialize.cpp describes the schedule and the barriers).
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/Schedule/PersistentSchedule.h"
#include "compiler/Schedule/WarpSpecialization.h"
#include "compiler/Utils/IRUtils.h"
#include "lib/GpuTarget.h"
#include "lib/Strategy/WgmmaModel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#include <array>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warp_specialization;
namespace model = ::fa::wgmma;

LogicalResult Specialization::buildProducer(Block &producer) {
  // Producer: the warpgroup gives registers back; one thread issues every
  // copy, the resident tensors first, then the streamed ones tile by tile.
  OpBuilder p = OpBuilder::atBlockBegin(&producer);
  NVVM::SetMaxRegisterOp::create(
      p, loc,
      p.getI32IntegerAttr(int32_t(
          model::producerRegisters(isPersistent, transposedValue != nullptr,
                                   writerWarp, !rowValues.empty()))),
      NVVM::SetMaxRegisterActionAttr::get(
          ctx, NVVM::SetMaxRegisterAction::decrease));
  Value elected = arith::CmpIOp::create(p, loc, arith::CmpIPredicate::eq, tid,
                                        computeThreadsV);
  // Only the elected thread has work, unless the warpgroup transposes V:
  // then all its threads walk the tiles and the copies are the elected
  // thread's (`asElected`). Staged row values: a warp for each walks the
  // tiles in a branch after it (copyRowValues).
  OpBuilder afterCopies = p;
  if (!transposedValue) {
    auto issue = scf::IfOp::create(p, loc, elected);
    afterCopies.setInsertionPointAfter(issue);
    p.setInsertionPointToStart(&issue.getThenRegion().front());
  }
  IRMapping mapping;
  auto asElected = [&](OpBuilder &at, Value condition,
                       function_ref<LogicalResult(OpBuilder &)> body) {
    if (!transposedValue)
      return body(at);
    if (condition)
      condition = arith::AndIOp::create(at, loc, condition, elected);
    auto onlyElected =
        scf::IfOp::create(at, loc, condition ? condition : elected);
    OpBuilder in = OpBuilder::atBlockBegin(onlyElected.thenBlock());
    // What the body clones stays inside the branch.
    IRMapping outside = mapping;
    LogicalResult built = body(in);
    mapping = outside;
    return built;
  };
  // Persistent: the same visits as the consumers; the visit's K/V ring
  // positions start at `ringBase`, and Q's slot is free again once the
  // consumers released the previous visit's Q.
  Value ringBase;
  WorkLoops producerWork;
  if (isPersistent) {
    producerWork = buildWorkLoops(p, loc, grid, work, sectionPairs, mirrored);
    p.setInsertionPointToEnd(producerWork.visits.getBody());
    ringBase = producerWork.ringBase();
    mapping.map(grid.getBatchIndex(), producerWork.item.batch);
    mapping.map(grid.getHeadIndex(), producerWork.item.head);
    mapping.map(grid.getTileIndex(), producerWork.tile);
  }
  // Copies the tile of `tensor` at `row` into `slot`, completing on barrier
  // `barrier`: one TMA box per column block (one swizzled row: 64 16-bit
  // columns, 128 or 64 8-bit ones).
  // (`page`: a paged cache's pool entry, in place of the load's batch.)
  auto copyTile = [&](OpBuilder &at, const LoadedTensor &tensor, Value row,
                      Value slot, Value barrier,
                      Value page = Value()) -> LogicalResult {
    LoadTileOp load = tensor.loads.front();
    FailureOr<Value> head =
        cloneSliceInto(at, programRegion, load.getHead(), mapping);
    FailureOr<Value> batch =
        page ? page
             : cloneSliceInto(at, programRegion, load.getBatch(), mapping);
    if (failed(head) || failed(batch))
      return failure();
    // A varlen sequence's rows start at its first row.
    if (Value first = load.getSequenceFirst()) {
      FailureOr<Value> firstRow =
          cloneSliceInto(at, programRegion, first, mapping);
      if (failed(firstRow))
        return failure();
      row = arith::AddIOp::create(at, loc, *firstRow, row);
    }
    int64_t rows = tensor.type.getDimSize(0), cols = tensor.type.getDimSize(1);
    // 8-bit floats travel as bytes; a box is one swizzled row wide (128
    // bytes, or 64 in the 64-byte swizzle), which the runtime's tensor map
    // swizzles alike.
    Type element = sharedBufferType(tensor.type).getElementType();
    auto swizzle = cast<SwizzledSharedEncodingAttr>(tensor.type.getEncoding());
    int64_t rowBytes = swizzle.getBytes();
    int64_t columnBlock = swizzle.getBlockColumns(tensor.type.getElementType());
    auto box =
        MemRefType::get({1, 1, rows, columnBlock}, element,
                        MemRefLayoutAttrInterface(), workgroupSpace(ctx));
    auto mapType = nvgpu::TensorMapDescriptorType::get(
        ctx, box,
        rowBytes == 64 ? nvgpu::TensorMapSwizzleKind::SWIZZLE_64B
                       : nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
        nvgpu::TensorMapL2PromoKind::L2PROMO_256B,
        nvgpu::TensorMapOOBKind::OOB_ZERO,
        nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
    Value map = UnrealizedConversionCastOp::create(at, loc, mapType, tensor.map)
                    .getResult(0);
    // The whole box counts, rows past the tensor's end too (zero-filled).
    nvgpu::MBarrierArriveExpectTxOp::create(
        at, loc, barriers,
        indexConst(at, loc, rows * cols * element.getIntOrFloatBitWidth() / 8),
        barrier, Value());
    Value first = slotBase(at, tensor, slot);
    for (int64_t block = 0; block * columnBlock < cols; ++block) {
      Value dst = sharedBufferAt(
          at, loc, addConst(at, loc, first, block * rows * rowBytes), box);
      // Coordinates innermost first: (column, row, head, batch).
      nvgpu::TmaAsyncLoadOp::create(
          at, loc, dst, barriers, map,
          ValueRange{indexConst(at, loc, block * columnBlock), row, *head,
                     *batch},
          barrier, Value(), Value());
    }
    return success();
  };
  auto copyResident = [&](OpBuilder &at) -> LogicalResult {
    if (isPersistent) {
      Value freed = arith::XOrIOp::create(
          at, loc, parityOf(at, loc, producerWork.visited()),
          arith::ConstantOp::create(at, loc, at.getBoolAttr(true)));
      nvgpu::MBarrierTryWaitParityOp::create(
          at, loc, barriers, freed, indexConst(at, loc, kWaitTicks),
          indexConst(at, loc, resident.front()->emptyBarrier));
    }
    for (const LoadedTensor *tensor : resident) {
      FailureOr<Value> row =
          cloneSliceInto(at, programRegion,
                         LoadTileOp(tensor->loads.front()).getRow(), mapping);
      if (failed(row) ||
          failed(copyTile(at, *tensor, *row, indexConst(at, loc, 0),
                          indexConst(at, loc, tensor->fullBarrier))))
        return failure();
    }
    return success();
  };
  if (failed(asElected(p, Value(), copyResident)))
    return failure();
  // Before each copy of a streamed tile, wait until the consumers released
  // the slot's previous tile (a fresh barrier passes parity 1).
  auto copyStreamed =
      [&](OpBuilder &at, Value n,
          function_ref<Value(OpBuilder &, const LoadedTensor &, Value &)> rowOf)
      -> LogicalResult {
    auto [slot, parity] = slotAndParity(at, n, stages);
    Value previous = arith::XOrIOp::create(
        at, loc, parity,
        arith::ConstantOp::create(at, loc, at.getBoolAttr(true)));
    for (const LoadedTensor *tensor : streamed) {
      nvgpu::MBarrierTryWaitParityOp::create(
          at, loc, barriers, previous, indexConst(at, loc, kWaitTicks),
          addConst(at, loc, slot, tensor->emptyBarrier));
      Value page;
      Value row = rowOf(at, *tensor, page);
      if (!row ||
          failed(copyTile(at, *tensor, row, slot,
                          addConst(at, loc, slot, tensor->fullBarrier), page)))
        return failure();
    }
    return success();
  };
  if (!range) {
    // dkdv: the consumers' loop nest (an inner loop's bounds may depend on
    // the outer ones: a mask_mod narrows each query head's range), each
    // load's row at its iteration; the loops carry the iteration count n.
    auto walkStreamLoops =
        [&](OpBuilder at, IRMapping &mapping,
            function_ref<LogicalResult(OpBuilder &, Value)> body)
        -> LogicalResult {
      SmallVector<scf::ForOp> loops;
      Value n = indexConst(at, loc, 0);
      for (scf::ForOp loop : streamLoops) {
        SmallVector<Value, 3> bounds;
        for (Value bound :
             {loop.getLowerBound(), loop.getUpperBound(), loop.getStep()}) {
          FailureOr<Value> cloned =
              cloneSliceInto(at, programRegion, bound, mapping);
          if (failed(cloned))
            return failure();
          bounds.push_back(*cloned);
        }
        auto copy =
            scf::ForOp::create(at, loc, bounds[0], bounds[1], bounds[2], n);
        mapping.map(loop.getInductionVar(), copy.getInductionVar());
        if (!loops.empty())
          scf::YieldOp::create(at, loc, copy.getResult(0));
        loops.push_back(copy);
        at = OpBuilder::atBlockBegin(copy.getBody());
        n = copy.getRegionIterArg(0);
      }
      if (failed(body(at, n)))
        return failure();
      scf::YieldOp::create(at, loc, addConst(at, loc, n, 1));
      return success();
    };
    if (failed(walkStreamLoops(p, mapping, [&](OpBuilder &at, Value n) {
          return copyStreamed(
              at, n,
              [&](OpBuilder &in, const LoadedTensor &tensor, Value &) -> Value {
                FailureOr<Value> row = cloneSliceInto(
                    in, programRegion,
                    LoadTileOp(tensor.loads.front()).getRow(), mapping);
                return succeeded(row) ? *row : Value();
              });
        })))
      return failure();
    // Staged row values: warp kRowValueWarp + i walks the same tiles and
    // copies row value i of each into Q's slot once the consumers released
    // it (branches of their own: the elected thread's loop keeps its
    // registers, and each warp's loop holds one tensor's addresses).
    for (auto [i, rowValue] : llvm::enumerate(rowValues)) {
      const LoadedTensor &ring = *rowValue;
      Value first = addConst(afterCopies, loc, computeThreadsV,
                             (kRowValueWarp + int64_t(i)) * kRowValueLanes);
      Value inWarp = arith::AndIOp::create(
          afterCopies, loc,
          arith::CmpIOp::create(afterCopies, loc, arith::CmpIPredicate::uge,
                                tid, first),
          arith::CmpIOp::create(
              afterCopies, loc, arith::CmpIPredicate::ult, tid,
              addConst(afterCopies, loc, first, kRowValueLanes)));
      auto rowWarp = scf::IfOp::create(afterCopies, loc, inWarp);
      afterCopies.setInsertionPointAfter(rowWarp);
      OpBuilder in = OpBuilder::atBlockBegin(rowWarp.thenBlock());
      Value lane = arith::SubIOp::create(in, loc, tid, first);
      IRMapping rowMapping;
      if (failed(walkStreamLoops(in, rowMapping, [&](OpBuilder &at, Value n) {
            auto [slot, parity] = slotAndParity(at, n, stages);
            Value previous = arith::XOrIOp::create(
                at, loc, parity,
                arith::ConstantOp::create(at, loc, at.getBoolAttr(true)));
            nvgpu::MBarrierTryWaitParityOp::create(
                at, loc, barriers, previous, indexConst(at, loc, kWaitTicks),
                addConst(at, loc, slot, streamed.front()->emptyBarrier));
            return copyRowValues(at, rowMapping, ring, lane, slot);
          })))
        return failure();
    }
    return success();
  }
  // A paged cache's K/V tile lies in one page, which the consumers' loads
  // take from the block table in their K/V loop (pipelined: the loads of
  // a tile may sit in an earlier iteration or before the loop). The
  // producer looks its own tile up, as the tiling did: its pool entry (the
  // box's batch coordinate) and its first row in the page.
  auto lookUpPage = [&](OpBuilder &at, const LoadedTensor &tensor,
                        memref::LoadOp table, Value start,
                        Value &page) -> Value {
    FailureOr<Value> entry =
        cloneSliceInto(at, programRegion, table.getIndices().front(), mapping);
    if (failed(entry))
      return Value();
    Value pool = LoadTileOp(tensor.loads.front()).getSource();
    auto lastOf = [&](Value memref, int64_t d) {
      return addConst(at, loc, memref::DimOp::create(at, loc, memref, d), -1);
    };
    PagedTile paged =
        buildPagedTile(at, loc, table.getMemRef(), *entry, start,
                       memref::DimOp::create(at, loc, pool, 2),
                       lastOf(table.getMemRef(), 1), lastOf(pool, 0));
    page = paged.page;
    return paged.row;
  };
  // Forward: K/V tiles kv_begin .. kv_end - 1.
  FailureOr<Value> kvBegin =
      cloneSliceInto(p, programRegion, range.getResult(0), mapping);
  FailureOr<Value> kvEnd =
      cloneSliceInto(p, programRegion, range.getResult(1), mapping);
  if (failed(kvBegin) || failed(kvEnd))
    return failure();
  // With a hole, the loop walks the visits and copies the tile of each.
  Value holeBegin, holeEnd;
  if (hole) {
    FailureOr<Value> first =
        cloneSliceInto(p, programRegion, hole.getHoleBegin(), mapping);
    FailureOr<Value> last =
        cloneSliceInto(p, programRegion, hole.getHoleEnd(), mapping);
    if (failed(first) || failed(last))
      return failure();
    holeBegin = *first;
    holeEnd = *last;
    kvEnd = visitsEnd(p, *kvEnd, holeBegin, holeEnd);
  }
  // Transposing, the loop runs one tile more: iteration `tile` copies K/V
  // tile `tile` (if any) and then transposes V tile `tile` - 1 (if any), so
  // the copy's latency passes while the previous tile is transposed.
  Value fillEnd = *kvEnd;
  if (transposedValue)
    fillEnd = addConst(p, loc, fillEnd, 1);
  auto fill =
      scf::ForOp::create(p, loc, *kvBegin, fillEnd, indexConst(p, loc, 1));
  {
    OpBuilder at = OpBuilder::atBlockBegin(fill.getBody());
    Value tile = fill.getInductionVar();
    Value n = arith::SubIOp::create(at, loc, tile, *kvBegin);
    Value kvTile =
        hole ? kvTileOfVisit(at, loc, tile, holeBegin, holeEnd) : tile;
    if (isPersistent)
      n = arith::AddIOp::create(at, loc, toIndex(at, loc, ringBase), n);
    Value inRange;
    if (transposedValue)
      inRange = arith::CmpIOp::create(at, loc, arith::CmpIPredicate::ult, tile,
                                      *kvEnd);
    if (failed(asElected(at, inRange, [&](OpBuilder &in) {
          return copyStreamed(
              in, n,
              [&](OpBuilder &row, const LoadedTensor &tensor,
                  Value &page) -> Value {
                Value start = arith::MulIOp::create(
                    row, loc, kvTile,
                    indexConst(row, loc, tensor.type.getDimSize(0)));
                memref::LoadOp table = warp_specialization::pageTableLoad(
                    LoadTileOp(tensor.loads.front()));
                if (!table)
                  return start;
                return lookUpPage(row, tensor, table, start, page);
              });
        })))
      return failure();
    if (transposedValue) {
      // The elected thread's warp waits for it: its other lanes would
      // otherwise spin on V's full barrier for copies their own warp has
      // not issued yet (a spinning warp need not let its other path run).
      NVVM::SyncWarpOp::create(
          at, loc,
          arith::ConstantOp::create(at, loc, at.getI32IntegerAttr(-1)));
      Value hasPrevious = arith::CmpIOp::create(
          at, loc, arith::CmpIPredicate::ugt, tile, *kvBegin);
      auto previous = scf::IfOp::create(at, loc, hasPrevious);
      OpBuilder in = OpBuilder::atBlockBegin(previous.thenBlock());
      transposeValueTile(in, addConst(in, loc, n, -1));
    }
  }
  if (isPersistent) {
    p.setInsertionPointAfter(fill);
    yieldVisit(p, loc, producerWork, *kvBegin, *kvEnd);
  }
  return success();
}

void Specialization::transposeValueTile(OpBuilder &at, Value n) {
  // V tile n has landed in its slot; the ring's slot of tile n is free once
  // every consumer thread released tile n - slots (a fresh barrier passes
  // parity 1).
  const LoadedTensor &value = *streamed[1], &transposed = *transposedValue;
  auto [slot, parity] = slotAndParity(at, n, stages);
  nvgpu::MBarrierTryWaitParityOp::create(
      at, loc, barriers, parity, indexConst(at, loc, kWaitTicks),
      addConst(at, loc, slot, value.fullBarrier));
  auto [copySlot, copyParity] = slotAndParity(at, n, transposed.slots);
  Value freed = arith::XOrIOp::create(
      at, loc, copyParity,
      arith::ConstantOp::create(at, loc, at.getBoolAttr(true)));
  nvgpu::MBarrierTryWaitParityOp::create(
      at, loc, barriers, freed, indexConst(at, loc, kWaitTicks),
      addConst(at, loc, copySlot, transposed.emptyBarrier));
  auto view = [&](const LoadedTensor &ring, Value slot) -> Value {
    Value buffer = sharedBufferAt(at, loc, slotBase(at, ring, slot),
                                  sharedBufferType(ring.type));
    return UnrealizedConversionCastOp::create(at, loc, ring.type, buffer)
        .getResult(0);
  };
  CopyTileOp::create(at, loc, view(value, slot), view(transposed, copySlot));
  // Each thread publishes its share to wgmma (the async proxy), then
  // announces it and gives V's slot back.
  createAsyncSharedFence(at, loc);
  auto token = nvgpu::MBarrierTokenType::get(ctx);
  nvgpu::MBarrierArriveOp::create(
      at, loc, token, barriers,
      addConst(at, loc, copySlot, transposed.fullBarrier));
  nvgpu::MBarrierArriveOp::create(at, loc, token, barriers,
                                  addConst(at, loc, slot, value.emptyBarrier));
}

LogicalResult Specialization::copyRowValues(OpBuilder &at, IRMapping &mapping,
                                            const LoadedTensor &ring,
                                            Value lane, Value slot) {
  // Lane l copies rows l, l + 32, ... of the tile; a row past the tile's
  // sequence (or the tensor) reads nothing and lands as zero, as
  // fa.load_tile pads (with Q's and dO's zero rows there, dS = 0: those
  // rows add nothing to dK, dV or dQ).
  auto clone = [&](Value value) -> Value {
    if (!value)
      return value;
    FailureOr<Value> cloned = cloneSliceInto(at, programRegion, value, mapping);
    return succeeded(cloned) ? *cloned : Value();
  };
  Value zero = indexConst(at, loc, 0), one = indexConst(at, loc, 1);
  LoadTileOp load = ring.loads.front();
  Value source = clone(load.getSource()), batch = clone(load.getBatch()),
        head = clone(load.getHead()), row = clone(load.getRow());
  Value first = clone(load.getSequenceFirst()),
        end = clone(load.getSequenceEnd());
  if (!source || !batch || !head || !row ||
      (load.getSequenceFirst() && (!first || !end)))
    return failure();
  Value firstRow = buildSourceRow(at, loc, first, row);
  Value limit = buildRowLimit(at, loc, source, end);
  Value buffer = sharedBufferAt(at, loc, slotBase(at, ring, slot),
                                sharedBufferType(ring.type));
  for (int64_t r = 0; r < ring.type.getDimSize(0); r += kRowValueLanes) {
    Value inTile = addConst(at, loc, lane, r);
    Value sourceRow = arith::AddIOp::create(at, loc, firstRow, inTile);
    Value valid = arith::CmpIOp::create(at, loc, arith::CmpIPredicate::ult,
                                        sourceRow, limit);
    nvgpu::DeviceAsyncCopyOp::create(
        at, loc, nvgpu::DeviceAsyncTokenType::get(ctx), buffer,
        ValueRange{inTile}, source,
        ValueRange{batch, head,
                   arith::SelectOp::create(at, loc, valid, sourceRow, zero)},
        at.getIndexAttr(1),
        arith::SelectOp::create(at, loc, valid, one, zero), UnitAttr());
  }
  // The arrival counts once the lane's copies (all it issued) have landed.
  Value barrier = nvgpu::MBarrierGetOp::create(
      at, loc, at.getI32Type(), barriers,
      addConst(at, loc, slot, streamed.front()->fullBarrier));
  NVVM::CpAsyncMBarrierArriveOp::create(
      at, loc,
      LLVM::IntToPtrOp::create(
          at, loc, LLVM::LLVMPointerType::get(ctx, /*addressSpace=*/3),
          barrier),
      /*noinc=*/true);
  return success();
}
