//===- WarpSpecializeConsumers.cpp - fa-warp-specialize's consumers -*- C++
//-*-===//
//
// The consumer warpgroups of a warp-specialized program: they run the
// placed program with each copied tile replaced by a wait on its ring's
// full barrier and a view of its slot, and release each streamed slot
// right after its last use (WarpSpecialize.cpp describes the schedule and
// the barriers).
//
//===----------------------------------------------------------------------===//

#include "compiler/Schedule/WarpSpecialization.h"
#include "compiler/Utils/IRUtils.h"
#include "lib/Strategy/WgmmaModel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warp_specialization;
namespace model = ::fa::wgmma;

LogicalResult Specialization::countIterations() {
  // Outermost first: each loop gets an iter_arg starting at its parent's
  // count (0 outside); the innermost yields its count + 1, a parent the
  // count its child loop ends with.
  IRRewriter rewriter(ctx);
  rewriter.setInsertionPoint(streamLoops.front());
  Value count = indexConst(rewriter, loc, 0);
  for (size_t i = 0; i < streamLoops.size(); ++i) {
    bool innermost = i + 1 == streamLoops.size();
    rewriter.setInsertionPoint(streamLoops[i]);
    FailureOr<LoopLikeOpInterface> counted =
        streamLoops[i].replaceWithAdditionalYields(
            rewriter, count, /*replaceInitOperandUsesInLoop=*/false,
            [&](OpBuilder &b, Location at,
                ArrayRef<BlockArgument> args) -> SmallVector<Value> {
              // (A parent's yield is set once its child is counted.)
              if (innermost)
                return {addConst(b, at, args[0], 1)};
              return {args[0]};
            });
    if (failed(counted))
      return streamLoops[i].emitOpError("cannot carry the ring position");
    streamLoops[i] = cast<scf::ForOp>(counted->getOperation());
    count = streamLoops[i].getRegionIterArgs().back();
    if (i > 0) {
      auto parentYield =
          cast<scf::YieldOp>(streamLoops[i - 1].getBody()->getTerminator());
      parentYield->setOperand(parentYield->getNumOperands() - 1,
                              streamLoops[i].getResults().back());
    }
  }
  streamPosition = count;
  return success();
}

/// Zeroes the rows of a consumer's view of a TMA-loaded tile past the end of
/// its load's sequence (a varlen sequence's rows, or a KV cache's filled
/// keys). TMA fills with zeros only the rows past the tensor: rows between
/// the sequence's end and the tensor's end arrive as they are (the next
/// sequence's, the cache's unfilled part), and although their scores are
/// masked (P = 0), a V row that holds inf or NaN makes the product NaN. Only
/// a tile that reaches past the end clears rows (a uniform branch). Each
/// consumer warpgroup clears them all itself (the same zeros into the same
/// bytes; clearSharedRowsPastEnd) and publishes them to its own products
/// (fence to the async proxy, then its own barrier), so no warpgroup waits
/// for another (fa-pingpong staggers them).
static void clearRowsPastSequence(OpBuilder &b, Location loc, LoadTileOp load,
                                  Value view) {
  auto buffer = cast<MemRefType>(view.getType());
  int64_t rows = buffer.getDimSize(1);
  int64_t lineBytes =
      buffer.getDimSize(2) * buffer.getElementTypeBitWidth() / 8;
  assert((lineBytes == 128 || lineBytes == 64) &&
         "a swizzled tile's buffer is 128- or 64-byte lines");
  // Rows [kept, rows) of the tile are past the sequence's end.
  Value firstRow =
      arith::AddIOp::create(b, loc, load.getSequenceFirst(), load.getRow());
  Value end = arith::MaxUIOp::create(b, loc, load.getSequenceEnd(), firstRow);
  Value kept = arith::SubIOp::create(b, loc, end, firstRow);
  Value pastEnd = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, kept,
                                        indexConst(b, loc, rows));
  auto clear = scf::IfOp::create(b, loc, pastEnd, /*withElseRegion=*/false);
  OpBuilder in = OpBuilder::atBlockBegin(clear.thenBlock());
  Value lane = arith::RemUIOp::create(
      in, loc, gpu::ThreadIdOp::create(in, loc, gpu::Dimension::x),
      indexConst(in, loc, kWarpgroupThreads));
  Value start = toI32(
      in, loc, memref::ExtractAlignedPointerAsIndexOp::create(in, loc, view));
  clearSharedRowsPastEnd(in, loc, start, buffer.getDimSize(0), rows, kept, lane,
                         kWarpgroupThreads, lineBytes);
  createAsyncSharedFence(in, loc);
  createWarpgroupBarrier(in, loc);
}

/// The ops that read `tile`: its users and, for an async matmul, the waits
/// that retire it (it reads the tile until then; the verifier of
/// fa.tile_matmul lets only fa.async_wait read an async result).
static SmallVector<Operation *> readersOf(Value tile) {
  SmallVector<Operation *> uses;
  for (Operation *user : tile.getUsers()) {
    uses.push_back(user);
    if (auto matmul = dyn_cast<TileMatmulOp>(user); matmul && matmul.getAsync())
      llvm::append_range(uses, matmul.getResult().getUsers());
  }
  return uses;
}

/// The ops of `block` that hold the first and the last of `uses` (null if
/// none does).
static std::pair<Operation *, Operation *> spanInBlock(ArrayRef<Operation *> uses,
                                                       Block &block) {
  Operation *first = nullptr, *last = nullptr;
  for (Operation *use : uses)
    if (Operation *op = block.findAncestorOpInBlock(*use)) {
      if (!first || op->isBeforeInBlock(first))
        first = op;
      if (!last || last->isBeforeInBlock(op))
        last = op;
    }
  return {first, last};
}

LogicalResult Specialization::rewriteConsumers(Block &consumer,
                                               WorkLoops &consumerWork) {
  // Consumers: the warpgroups take the registers; the program as it was,
  // each load replaced by a wait on its full barrier and a view of its slot
  // just before the tile's first use, and (K, V) a release of the slot
  // right after its last use (for an async matmul: after its fa.async_wait).
  OpBuilder c = OpBuilder::atBlockBegin(&consumer);
  NVVM::SetMaxRegisterOp::create(
      c, loc,
      c.getI32IntegerAttr(int32_t(model::consumerRegisters(
          computeThreads / 32, isPersistent, transposedValue != nullptr,
          writerWarp, !rowValues.empty()))),
      NVVM::SetMaxRegisterActionAttr::get(
          ctx, NVVM::SetMaxRegisterAction::increase));
  Value consumerRingBase, consumerCount;
  if (isPersistent) {
    Block *workBody = consumerWork.visits.getBody();
    if (range->getBlock() != workBody)
      return range.emitOpError(
          "a persistent program needs its K/V range at the top level");
    grid.getBatchIndex().replaceAllUsesWith(consumerWork.item.batch);
    grid.getHeadIndex().replaceAllUsesWith(consumerWork.item.head);
    grid.getTileIndex().replaceAllUsesWith(consumerWork.tile);
    consumerRingBase = consumerWork.ringBase();
    consumerCount = consumerWork.visited();
    OpBuilder at = OpBuilder::atBlockEnd(workBody);
    yieldVisit(at, loc, consumerWork, range.getResult(0),
               visitsEnd(at, range.getResult(1),
                         hole ? hole.getHoleBegin() : Value(),
                         hole ? hole.getHoleEnd() : Value()));
  }
  if (!range && failed(countIterations()))
    return failure();
  // Staged row values (dkdv): their reads wait for Q's slot of the
  // iteration (once for both), and must come before Q's release (after
  // Q's last use), which frees their slot too.
  Operation *rowValuesWait = nullptr;
  for (const LoadedTensor *ring : rowValues)
    for (LoadTileOp load : ring->loads) {
      Block *block = load->getBlock();
      LoadTileOp query = streamed.front()->loads.front();
      auto [readFirst, readLast] =
          spanInBlock(readersOf(load.getResult()), *block);
      Operation *queryLast =
          spanInBlock(readersOf(query.getResult()), *block).second;
      if (!readLast || query->getBlock() != block || !queryLast ||
          !readLast->isBeforeInBlock(queryLast))
        return load.emitOpError(
            "staged row values must be read in Q's loop body before Q's "
            "last use (Q's release frees their slot)");
      Operation *first = readFirst;
      OpBuilder at(first);
      auto [slot, parity] = slotAndParity(
          at, ringPosition(at, load, ring->type.getDimSize(0), Value()),
          ring->slots);
      if (!rowValuesWait || rowValuesWait->getBlock() != block ||
          !rowValuesWait->isBeforeInBlock(first))
        rowValuesWait = nvgpu::MBarrierTryWaitParityOp::create(
            at, loc, barriers, parity, indexConst(at, loc, kWaitTicks),
            addConst(at, loc, slot, ring->fullBarrier));
      Value view = sharedBufferAt(at, loc, slotBase(at, *ring, slot),
                                  sharedBufferType(ring->type));
      load.getResult().replaceAllUsesWith(
          UnrealizedConversionCastOp::create(at, loc, ring->type, view)
              .getResult(0));
      load.erase();
    }
  for (const LoadedTensor *tensor : tensors)
    for (LoadTileOp load : tensor->loads) {
      // What the consumers read: the loaded tile from its ring or, for 8-bit
      // V, its transposed copy (the fa.convert_layout that is V's only user)
      // from the producer's ring.
      Value tile = load.getResult();
      const LoadedTensor *ring = tensor;
      Operation *convert = nullptr;
      if (transposedValue && tensor == streamed[1]) {
        convert = *load->user_begin();
        tile = convert->getResult(0);
        ring = transposedValue;
      }
      SmallVector<Operation *> uses = readersOf(tile);
      Block *block = load->getBlock();
      if (llvm::any_of(uses, [&](Operation *use) {
            return !block->findAncestorOpInBlock(*use);
          }))
        return load.emitOpError("is used outside its block");
      auto [first, last] = spanInBlock(uses, *block);
      OpBuilder at(first ? first : load.getOperation());
      // A resident tensor: fill `count` of the block (0 unless persistent).
      Value slot = indexConst(at, loc, 0);
      Value parity =
          isPersistent
              ? parityOf(at, loc, consumerCount)
              : arith::ConstantOp::create(at, loc, at.getBoolAttr(false))
                    .getResult();
      if (llvm::is_contained(streamed, tensor))
        std::tie(slot, parity) =
            slotAndParity(at,
                          ringPosition(at, load, tensor->type.getDimSize(0),
                                       consumerRingBase),
                          ring->slots);
      nvgpu::MBarrierTryWaitParityOp::create(
          at, loc, barriers, parity, indexConst(at, loc, kWaitTicks),
          addConst(at, loc, slot, ring->fullBarrier));
      Value view = sharedBufferAt(at, loc, slotBase(at, *ring, slot),
                                  sharedBufferType(ring->type));
      // Rows past the sequence (see clearRowsPastSequence): the forward's
      // V, whose zero probabilities there would still meet inf or NaN in
      // P V; every tile of a dkdv program: with K and V cleared the keys
      // past the end give dS = 0 and nothing to dQ = dS K, and with Q and
      // dO cleared (LSE and D load as 0 there) so do the query rows past
      // the end (P = 1, dP = 0, dS = 0): their dV, dK and dQ parts are 0.
      if (load.getSequenceEnd() &&
          (!isForwardProgram(grid) || StringRef(tensor->name) == "v"))
        clearRowsPastSequence(at, loc, load, view);
      auto cast = UnrealizedConversionCastOp::create(at, loc, ring->type, view);
      tile.replaceAllUsesWith(cast.getResult(0));
      if (convert)
        convert->erase();
      load.erase();
      if (ring->emptyBarrier < 0 || !last)
        continue;
      auto release = [&](OpBuilder &at) {
        nvgpu::MBarrierArriveOp::create(
            at, loc, nvgpu::MBarrierTokenType::get(ctx), barriers,
            addConst(at, loc, slot, ring->emptyBarrier));
      };
      // A tile last used inside both branches of an scf.if (Q in the
      // pipelined program: its K/V loop, under kv_begin < kv_end) is
      // released in each branch right after its last use there, not after
      // the whole if: the producer can load the next Q during the last P V.
      auto branches = dyn_cast<scf::IfOp>(last);
      if (!branches || branches.getElseRegion().empty()) {
        OpBuilder after(block, std::next(Block::iterator(last)));
        release(after);
        continue;
      }
      for (Region *region :
           {&branches.getThenRegion(), &branches.getElseRegion()}) {
        Block &branch = region->front();
        Operation *lastHere = spanInBlock(uses, branch).second;
        OpBuilder at =
            lastHere ? OpBuilder(&branch, std::next(Block::iterator(lastHere)))
                     : OpBuilder::atBlockBegin(&branch);
        release(at);
      }
    }
  return success();
}
