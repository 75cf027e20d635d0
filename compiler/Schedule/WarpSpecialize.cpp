//===- WarpSpecialize.cpp - Producer/consumer split of a program -*- C++ -*-===//
//
// fa-warp-specialize: the schedule of the Hopper strategy, made explicit on
// a program placed by fa-place-wgmma. One extra warpgroup (the producer)
// moves Q, K and V into shared memory with the TMA engine; the warpgroups
// that were placed (the consumers) only compute. They meet at mbarriers in
// shared memory, one per ring slot and direction:
//
//   q_full                 Q has landed            (producer -> consumers)
//   k_full[s], v_full[s]   K / V of slot s landed  (producer -> consumers)
//   k_empty[s], v_empty[s] every consumer thread is done with K / V of
//                          slot s                  (consumers -> producer)
//
// The n-th tile of the K/V loop goes to slot s = n % stages. The producer
// waits for k_empty[s] (v_empty[s]) to finish its phase n / stages - 1 (a
// fresh barrier passes the wait for parity 1 at once), announces the bytes
// the copies will bring (expect_tx) and issues one TMA box per 64-column
// block; the copies complete the transaction on k_full[s] (v_full[s]),
// which the consumers wait for with parity (n / stages) % 2 just before the
// tile's first use; they arrive on the empty barrier right after its last
// use. No block-wide barrier remains in the loop, so the consumer
// warpgroups run on their own clocks.
//
// The producer gives registers back (setmaxnreg.dec) and the consumers take
// them (setmaxnreg.inc); the kernel's parameters gain one TMA tensor map per
// loaded tensor (recorded in fa.tensor_maps for the runtime).
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/Common/GpuLowering.h"
#include "compiler/Passes.h"
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

#define DEBUG_TYPE "fa-warp-specialize"

namespace mlir::fa {
#define GEN_PASS_DEF_FAWARPSPECIALIZE
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;
namespace model = ::fa::wgmma;

namespace {

/// Polls of one mbarrier try_wait before it suspends the thread again.
constexpr int64_t kWaitTicks = 10000000;

Value indexAdd(OpBuilder &b, Location loc, Value x, int64_t c) {
  return c ? arith::AddIOp::create(b, loc, x, indexConst(b, loc, c)).getResult()
           : x;
}

/// Clones into `b` the ops that compute `value` inside `region` (the
/// program), reusing what `mapping` already holds and anything defined
/// outside the region.
FailureOr<Value> cloneSlice(OpBuilder &b, Region &region, Value value,
                            IRMapping &mapping) {
  if (Value mapped = mapping.lookupOrNull(value))
    return mapped;
  Operation *def = value.getDefiningOp();
  if (!def || !region.isAncestor(def->getParentRegion()))
    return value; // an argument or a value from outside the program
  if (def->getNumRegions() != 0)
    return def->emitOpError("cannot be recomputed by the producer");
  for (Value operand : def->getOperands())
    if (failed(cloneSlice(b, region, operand, mapping)))
      return failure();
  Operation *clone = b.clone(*def, mapping);
  return clone->getResult(cast<OpResult>(value).getResultNumber());
}

/// Registers a producer thread keeps (setmaxnreg.dec): it only computes
/// coordinates and issues copies.
constexpr int64_t kProducerRegisters = 24;

/// Registers each consumer thread takes (setmaxnreg.inc): what the
/// producer warpgroup gave back, shared by `computeThreads`, in the
/// instruction's steps of 8, at most 240.
int64_t consumerRegisters(int64_t computeThreads) {
  int64_t perThread =
      (::fa::kRegistersPerBlock - 128 * kProducerRegisters) / computeThreads;
  return std::min<int64_t>(240, perThread / 8 * 8);
}

struct LoadedTile {
  mutable LoadTileOp load;
  const char *tensor;   // "q", "k", "v"
  int64_t fullBarrier;  // the full barrier of its slot 0
  int64_t emptyBarrier; // the empty barrier of its slot 0 (K, V)
  Value map;            // its tensor map argument
  RankedTensorType type;
  int64_t offset = 0, slotBytes = 0;
};

struct FAWarpSpecializePass
    : public mlir::fa::impl::FAWarpSpecializeBase<FAWarpSpecializePass> {
  void runOnOperation() override {
    SmallVector<GridOp> grids;
    getOperation().walk([&](GridOp grid) {
      auto launch =
          grid->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
      if (launch && launch.getStrategy() == StrategyKind::wgmma &&
          launch.getProducerWarps() == 0)
        grids.push_back(grid);
    });
    for (GridOp grid : grids)
      if (failed(specialize(grid)))
        return signalPassFailure();
  }

  LogicalResult specialize(GridOp grid);
};

LogicalResult FAWarpSpecializePass::specialize(GridOp grid) {
  MLIRContext *ctx = &getContext();
  Location loc = grid.getLoc();
  auto func = dyn_cast<func::FuncOp>(grid->getParentOp());
  if (!func)
    return grid.emitOpError("must be at the top level of a function");
  auto launch = grid->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
  int64_t computeThreads = launch.getThreads();
  int64_t stages = launch.getStages();
  if (computeThreads % 128 != 0)
    return grid.emitOpError("warp specialization needs whole warpgroups, got ")
           << computeThreads << " threads";

  // The tiles: Q loaded once, K and V in the body of the K/V loop.
  SmallVector<LoadTileOp> once, streamed;
  grid.walk([&](LoadTileOp op) {
    (op->getParentOfType<scf::ForOp>() ? streamed : once).push_back(op);
  });
  if (once.size() != 1 || streamed.size() != 2 ||
      once[0]->getBlock() != &grid.getBodyBlock() ||
      streamed[0]->getBlock() != streamed[1]->getBlock())
    return grid.emitOpError("warp specialization expects Q loaded once in the "
                            "program and K, V loaded in one K/V loop");
  auto loop = dyn_cast<scf::ForOp>(streamed[0]->getParentOp());
  if (!loop || loop->getBlock() != &grid.getBodyBlock())
    return grid.emitOpError("the K/V loop must be in the program's body");
  for (LoadTileOp load : {once[0], streamed[0], streamed[1]}) {
    auto arg = dyn_cast<BlockArgument>(load.getSource());
    if (!arg || arg.getOwner() != &func.getBody().front())
      return load.emitOpError("a TMA-loaded tile must come from a function "
                              "argument (its tensor map is built for it)");
    if (!load->hasAttr(FADialect::getSharedOffsetAttrName()))
      return load.emitOpError("has no fa.shared_offset (run fa-place-wgmma)");
  }

  // One tensor map parameter per tensor, in front of the others.
  // Barriers: q_full, k_full[stages], v_full[stages], k_empty[stages],
  // v_empty[stages]. K and V have their own empty barriers: a K slot is
  // free as soon as Q K^T has read it, a V slot only after P V.
  SmallVector<LoadedTile> tiles = {
      {once[0], "q", 0, -1, {}, {}},
      {streamed[0], "k", 1, 1 + 2 * stages, {}, {}},
      {streamed[1], "v", 1 + stages, 1 + 3 * stages, {}, {}}};
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  for (unsigned i = 0; i < tiles.size(); ++i)
    if (failed(func.insertArgument(i, ptr, DictionaryAttr::get(ctx), loc)))
      return failure();
  Builder attrs(ctx);
  SmallVector<Attribute> maps;
  for (auto [i, tile] : llvm::enumerate(tiles)) {
    tile.map = func.getArgument(i);
    tile.type = cast<RankedTensorType>(tile.load.getType());
    tile.offset = tile.load
                      ->getAttrOfType<IntegerAttr>(
                          FADialect::getSharedOffsetAttrName())
                      .getInt();
    MemRefType buffer = sharedBufferType(tile.type);
    tile.slotBytes =
        buffer.getNumElements() * buffer.getElementTypeBitWidth() / 8;
    maps.push_back(attrs.getDictionaryAttr(
        {attrs.getNamedAttr("arg", attrs.getI64IntegerAttr(i)),
         attrs.getNamedAttr("tensor", attrs.getStringAttr(tile.tensor)),
         attrs.getNamedAttr("box_rows",
                            attrs.getI64IntegerAttr(tile.type.getDimSize(0))),
         attrs.getNamedAttr("box_cols",
                            attrs.getI64IntegerAttr(model::kColumnBlock))}));
  }
  int64_t firstEmptyBarrier = 1 + 2 * stages;
  int64_t numBarriers = 1 + 4 * stages;

  // Prologue, all threads: the aligned shared base and the barriers.
  Block &body = grid.getBodyBlock();
  SmallVector<Operation *> program;
  for (Operation &op : body)
    program.push_back(&op);
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value computeThreadsV = indexConst(b, loc, computeThreads);
  auto bytes = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                               MemRefLayoutAttrInterface(), workgroupSpace(ctx));
  Value base = gpu::DynamicSharedMemoryOp::create(b, loc, bytes);
  Value address = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, base);
  Value atom = indexConst(b, loc, model::kSwizzleAtomBytes);
  // pad = (1024 - address % 1024) % 1024: tiles start on swizzle atoms.
  Value pad = arith::RemUIOp::create(
      b, loc,
      arith::SubIOp::create(b, loc, atom,
                            arith::RemUIOp::create(b, loc, address, atom)),
      atom);
  auto groupType = nvgpu::MBarrierGroupType::get(ctx, workgroupSpace(ctx),
                                                 unsigned(numBarriers));
  Value barriers = nvgpu::MBarrierCreateOp::create(b, loc, groupType);
  {
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                        indexConst(b, loc, 0));
    auto init = scf::IfOp::create(b, loc, first);
    OpBuilder in = OpBuilder::atBlockBegin(&init.getThenRegion().front());
    // Full barriers complete on one arrival (the producer's expect_tx) and
    // the copies' bytes; empty barriers on every consumer thread.
    for (int64_t i = 0; i < numBarriers; ++i)
      nvgpu::MBarrierInitOp::create(
          in, loc, barriers,
          indexConst(in, loc, i >= firstEmptyBarrier ? computeThreads : 1),
          indexConst(in, loc, i), Value());
  }
  NVVM::FenceMbarrierInitOp::create(b, loc);
  gpu::BarrierOp::create(b, loc);
  Value isProducer = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                           tid, computeThreadsV);
  auto roles = scf::IfOp::create(b, loc, isProducer, /*withElseRegion=*/true);
  Block &producer = roles.getThenRegion().front();
  Block &consumer = roles.getElseRegion().front();
  for (Operation *op : program)
    op->moveBefore(consumer.getTerminator());
  Region &programRegion = roles.getElseRegion();

  auto slotBase = [&](OpBuilder &at, const LoadedTile &tile, Value slot) {
    return arith::AddIOp::create(
        at, loc, pad,
        arith::AddIOp::create(
            at, loc, indexConst(at, loc, tile.offset),
            arith::MulIOp::create(at, loc, slot,
                                  indexConst(at, loc, tile.slotBytes))))
        .getResult();
  };

  // Producer: the warpgroup gives registers back; one thread issues every
  // copy, Q first, then the K/V tiles of the loop's iterations.
  OpBuilder p = OpBuilder::atBlockBegin(&producer);
  NVVM::SetMaxRegisterOp::create(
      p, loc, p.getI32IntegerAttr(int32_t(kProducerRegisters)),
      NVVM::SetMaxRegisterActionAttr::get(
          ctx, NVVM::SetMaxRegisterAction::decrease));
  Value elected = arith::CmpIOp::create(p, loc, arith::CmpIPredicate::eq, tid,
                                        computeThreadsV);
  auto issue = scf::IfOp::create(p, loc, elected);
  p.setInsertionPointToStart(&issue.getThenRegion().front());
  IRMapping mapping;
  // Copies `tile` (rows from `row` of `load`'s source) into `slot`,
  // completing on barrier `barrier`: one TMA box per 64-column block.
  auto copyTile = [&](OpBuilder &at, const LoadedTile &tile, Value row,
                      Value slot, Value barrier) -> LogicalResult {
    FailureOr<Value> head =
        cloneSlice(at, programRegion, tile.load.getHead(), mapping);
    FailureOr<Value> batch =
        cloneSlice(at, programRegion, tile.load.getBatch(), mapping);
    if (failed(head) || failed(batch))
      return failure();
    int64_t rows = tile.type.getDimSize(0), cols = tile.type.getDimSize(1);
    Type element = tile.type.getElementType();
    auto box = MemRefType::get({1, 1, rows, model::kColumnBlock}, element,
                               MemRefLayoutAttrInterface(),
                               workgroupSpace(ctx));
    auto mapType = nvgpu::TensorMapDescriptorType::get(
        ctx, box, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
        nvgpu::TensorMapL2PromoKind::L2PROMO_256B,
        nvgpu::TensorMapOOBKind::OOB_ZERO,
        nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
    Value map = UnrealizedConversionCastOp::create(at, loc, mapType, tile.map)
                    .getResult(0);
    // The whole box counts, rows past the tensor's end too (zero-filled).
    nvgpu::MBarrierArriveExpectTxOp::create(
        at, loc, barriers,
        indexConst(at, loc,
                   rows * cols * element.getIntOrFloatBitWidth() / 8),
        barrier, Value());
    Value first = slotBase(at, tile, slot);
    for (int64_t block = 0; block * model::kColumnBlock < cols; ++block) {
      Value dst = sharedBufferAt(
          at, loc,
          indexAdd(at, loc, first, block * rows * model::kSwizzleBytes), box);
      // Coordinates innermost first: (column, row, head, batch).
      nvgpu::TmaAsyncLoadOp::create(
          at, loc, dst, barriers, map,
          ValueRange{indexConst(at, loc, block * model::kColumnBlock), row,
                     *head, *batch},
          barrier, Value(), Value());
    }
    return success();
  };
  {
    FailureOr<Value> row =
        cloneSlice(p, programRegion, tiles[0].load.getRow(), mapping);
    if (failed(row) || failed(copyTile(p, tiles[0], *row, indexConst(p, loc, 0),
                                       indexConst(p, loc, 0))))
      return failure();
  }
  // The K/V loop over the same tiles as the consumers' loop.
  FailureOr<Value> lb =
      cloneSlice(p, programRegion, loop.getLowerBound(), mapping);
  FailureOr<Value> ub =
      cloneSlice(p, programRegion, loop.getUpperBound(), mapping);
  FailureOr<Value> step = cloneSlice(p, programRegion, loop.getStep(), mapping);
  if (failed(lb) || failed(ub) || failed(step))
    return failure();
  // The slot of iteration `iv` and the parity of its fill (n / stages).
  auto slotAndRound = [&](OpBuilder &at, Value iv, Value lower,
                          Value stride) -> std::pair<Value, Value> {
    Value n = arith::DivUIOp::create(
        at, loc, arith::SubIOp::create(at, loc, iv, lower), stride);
    Value stagesV = indexConst(at, loc, stages);
    Value round = arith::DivUIOp::create(at, loc, n, stagesV);
    Value parity = arith::TruncIOp::create(
        at, loc, at.getI1Type(),
        arith::IndexCastUIOp::create(at, loc, at.getI64Type(), round));
    return {arith::RemUIOp::create(at, loc, n, stagesV), parity};
  };
  auto fill = scf::ForOp::create(p, loc, *lb, *ub, *step);
  {
    OpBuilder at = OpBuilder::atBlockBegin(fill.getBody());
    mapping.map(loop.getInductionVar(), fill.getInductionVar());
    auto [slot, parity] =
        slotAndRound(at, fill.getInductionVar(), *lb, *step);
    // Before each copy, wait until the consumers released the slot's
    // previous tile (a fresh barrier passes parity 1).
    Value previous = arith::XOrIOp::create(
        at, loc, parity,
        arith::ConstantOp::create(at, loc, at.getBoolAttr(true)));
    for (const LoadedTile &tile : {tiles[1], tiles[2]}) {
      nvgpu::MBarrierTryWaitParityOp::create(
          at, loc, barriers, previous, indexConst(at, loc, kWaitTicks),
          indexAdd(at, loc, slot, tile.emptyBarrier));
      FailureOr<Value> row =
          cloneSlice(at, programRegion, tile.load.getRow(), mapping);
      if (failed(row) ||
          failed(copyTile(at, tile, *row, slot,
                          indexAdd(at, loc, slot, tile.fullBarrier))))
        return failure();
    }
  }

  // Consumers: the warpgroups take the registers; the program as it was,
  // each load replaced by a wait on its full barrier and a view of its slot
  // just before the tile's first use, and (K, V) a release of the slot
  // right after its last use.
  OpBuilder c = OpBuilder::atBlockBegin(&consumer);
  NVVM::SetMaxRegisterOp::create(
      c, loc, c.getI32IntegerAttr(int32_t(consumerRegisters(computeThreads))),
      NVVM::SetMaxRegisterActionAttr::get(
          ctx, NVVM::SetMaxRegisterAction::increase));
  auto replaceByWait = [&](const LoadedTile &tile, Value slot, Value parity) {
    // The first and last ops of the load's block that use the tile.
    Block *block = tile.load->getBlock();
    Operation *first = nullptr, *last = nullptr;
    for (Operation *user : tile.load.getResult().getUsers()) {
      Operation *op = block->findAncestorOpInBlock(*user);
      if (!first || op->isBeforeInBlock(first))
        first = op;
      if (!last || last->isBeforeInBlock(op))
        last = op;
    }
    OpBuilder at(first ? first : tile.load.getOperation());
    nvgpu::MBarrierTryWaitParityOp::create(
        at, loc, barriers, parity, indexConst(at, loc, kWaitTicks),
        indexAdd(at, loc, slot, tile.fullBarrier));
    Value view = sharedBufferAt(at, loc, slotBase(at, tile, slot),
                                sharedBufferType(tile.type));
    auto cast = UnrealizedConversionCastOp::create(at, loc, tile.type, view);
    tile.load.getResult().replaceAllUsesWith(cast.getResult(0));
    tile.load.erase();
    if (tile.emptyBarrier < 0 || !last)
      return;
    OpBuilder after(block, std::next(Block::iterator(last)));
    nvgpu::MBarrierArriveOp::create(
        after, loc, nvgpu::MBarrierTokenType::get(ctx), barriers,
        indexAdd(after, loc, slot, tile.emptyBarrier));
  };
  {
    OpBuilder at(tiles[0].load);
    replaceByWait(tiles[0], indexConst(at, loc, 0),
                  arith::ConstantOp::create(at, loc, at.getBoolAttr(false)));
  }
  OpBuilder top = OpBuilder::atBlockBegin(loop.getBody());
  auto [slot, parity] = slotAndRound(top, loop.getInductionVar(),
                                     loop.getLowerBound(), loop.getStep());
  replaceByWait(tiles[1], slot, parity);
  replaceByWait(tiles[2], slot, parity);

  grid->setAttr(FADialect::getLaunchAttrName(),
                LaunchAttr::get(ctx, launch.getStrategy(), computeThreads + 128,
                                launch.getSharedBytes(), stages,
                                launch.getRegisters(), /*producerWarps=*/4));
  grid->setAttr(FADialect::getTensorMapsAttrName(), attrs.getArrayAttr(maps));
  return success();
}

} // namespace
