//===- TmaReduce.cpp - Staged f32 tiles added by the TMA engine -*- C++ -*-===//
//
// fa-tma-reduce: an fa.accumulate_tile whose tile the placement staged in
// 128-byte-swizzled shared memory (the wgmma backward's dQ part) becomes a
// bulk reduction of the TMA engine, cp.reduce.async.bulk.tensor .add, one
// box per 32 f32 columns, issued by one thread (the issuer):
//
//   issuer: wait until its previous reduction read the buffer
//   fa.convert_layout (registers -> shared; its lowering fences the async
//     proxy and brackets the writes with barriers)
//   issuer: reduce its boxes into dest[b, h, row .., ..]; commit
//   ...
//   after the loops: the issuer waits for every reduction to finish.
//
// Where each warpgroup holds a slice of two or more boxes of the tile's
// columns (warpgroupReductionSlice: dQ at D = 128, whose columns the
// consumer warpgroups split), every warpgroup's first thread issues the
// boxes of its own slice, and the staging's barriers are the warpgroup's
// own (the lowering's readByWritingWarpgroups): the warpgroups never wait
// for each other here. Otherwise the program's first thread issues them
// all. (Bulk groups are per thread: each issuer waits for its own.)
//
// Between the turns of the deterministic mode (fa.wait_turn, the add,
// fa.pass_turn) each issuer first orders the async proxy after the turn
// taken through the generic one (fence.proxy.async.global), and after
// committing its reduction waits for it to finish (cp.async.bulk.wait_group
// 0: the adds are in global memory), so that the turn, handed on after the
// consumers' barrier, orders the tiles' adds: the same sum, bit for bit, run
// after run. The staging (placed before the wait for the turn) does not
// hold the turn.
//
// A warp-specialized program that fa-warp-specialize marked fa.writer_warp
// adds through a writer warp instead: warp 1 of the producer warpgroup
// walks the consumers' loop nest and takes the turns (if any), so that the
// consumers do not hold a turn themselves (FlashAttention-3's dQ writer):
// they wait only when the writer has not read the previous tile's buffer
// yet (one tile of slack, one buffer). Per tile, with a pair of named
// barriers per consumer warpgroup where each stages a column slice of its
// own (its 128 threads and the writer's 32; else one pair for all):
//
//   consumers: wait for staged_empty; stage the tile; fa.hand_off (arrive
//              on staged_full)
//   writer:    fa.wait_turn {by_warp}; per slice: wait for its
//              staged_full, lane 0 reduces its boxes and commits them as a
//              bulk group; per slice: lane 0 waits until its group read the
//              buffer, arrive on its staged_empty; lane 0 waits until the
//              adds finish; fa.pass_turn {by_warp} (without turns: lane 0
//              waits for the adds once, after the loops)
//
// The writer arrives on staged_empty once before its loops and the
// consumers wait once more at their end (after the dK and dV stores), so
// both meet there as often and the buffer's last read is done before the
// consumers leave. The staging
// is handed off (fa.hand_off: the arrival), and its lowering puts no
// barriers of its own around it.
//
// The kernel gains a tensor map parameter for the destination ("dq_accum"
// in fa.tensor_maps, after the maps already there); rows past the
// destination's end are not written by the engine. The consumers' lanes no
// longer add their fragments one by one (per-lane atomics), and the adds of
// a tile leave in one request.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/Utils/IRUtils.h"
#include "dialect/FAOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#define DEBUG_TYPE "fa-tma-reduce"

namespace mlir::fa {
#define GEN_PASS_DEF_FATMAREDUCE
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Builds `body(in, issuer)` under `if (thread x % group == 0)` at `b`'s
/// insertion point; `issuer` is the thread's group (thread x / group).
void onIssuers(OpBuilder &b, Location loc, int64_t group,
               function_ref<void(OpBuilder &, Value)> body) {
  auto branch = scf::IfOp::create(b, loc, isFirstOfThreadGroup(b, loc, group));
  OpBuilder in = OpBuilder::atBlockBegin(&branch.getThenRegion().front());
  in.setInsertionPoint(branch.getThenRegion().front().getTerminator());
  Value tid = gpu::ThreadIdOp::create(in, loc, gpu::Dimension::x);
  body(in, arith::DivUIOp::create(in, loc, tid, indexConst(in, loc, group)));
}

/// A named barrier of `threads` threads: wait for all of them (`sync`) or
/// only count this warp's arrival.
void namedBarrier(OpBuilder &b, Location loc, Value id, int64_t threads,
                  bool sync) {
  if (!sync)
    return createBarrierArrive(b, loc, id, threads);
  NVVM::BarrierOp::create(b, loc, TypeRange{}, id,
                          i32Const(b, loc, int32_t(threads)),
                          NVVM::BarrierReductionAttr(), Value());
}
void namedBarrier(OpBuilder &b, Location loc, int32_t id, int64_t threads,
                  bool sync) {
  namedBarrier(b, loc, i32Const(b, loc, id), threads, sync);
}

/// The reduction of `columns` columns of a staged `rows`-row f32 tile (its
/// [C / 32, rows, 32] buffer at shared address `address`, i64) from box
/// `firstBox` bytes in and column `firstColumn` (i32) into `map`'s box
/// `row`, `head`, `batch` (i32s): one cp.reduce.async.bulk.tensor per 32
/// columns (box k lies rows x 128 bytes after box k - 1), committed as one
/// group.
void reduceBoxes(OpBuilder &b, Location loc, Value map, Value address,
                 Value firstBox, Value firstColumn, int64_t columns,
                 int64_t rows, Value row, Value head, Value batch) {
  constexpr int64_t boxCols = kReductionBoxColumns;
  auto sharedPtr =
      LLVM::LLVMPointerType::get(b.getContext(), /*addressSpace=*/3);
  int64_t boxBytes = rows * boxCols * 4;
  for (int64_t box = 0; box * boxCols < columns; ++box) {
    Value start = arith::AddIOp::create(b, loc, address, firstBox);
    Value column = firstColumn;
    if (box > 0) {
      start = arith::AddIOp::create(
          b, loc, start,
          arith::ConstantOp::create(b, loc,
                                    b.getI64IntegerAttr(box * boxBytes)));
      column = arith::AddIOp::create(
          b, loc, column,
          arith::ConstantOp::create(
              b, loc, b.getI32IntegerAttr(int32_t(box * boxCols))));
    }
    Value source = LLVM::IntToPtrOp::create(b, loc, sharedPtr, start);
    NVVM::CpAsyncBulkTensorReduceOp::create(
        b, loc, map, source, NVVM::TMAReduxKind::ADD, NVVM::TMAStoreMode::TILE,
        ValueRange{column, row, head, batch}, Value());
  }
  NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
}

/// fa-tma-reduce's varlen rule: a varlen sequence's tile adds its rows
/// past the sequence's end into the next sequence's rows, and those rows of
/// the staged dQ = dS K are 0 x K, NaN where this sequence's K holds inf or
/// NaN. Each group of consumer threads that staged a column slice of the
/// tile (`groupThreads`: a warpgroup with `perWarpgroup`, else all
/// consumers; `groupColumns` columns) zeroes those rows of its slice, fenced
/// for the TMA engine that reads them: a uniform branch, taken by the
/// sequence's last query tile. The rows' values were written by other
/// threads of the group, and the clears are read by yet another thread: a
/// barrier of the group before them when the staging published nothing yet
/// (a writer warp's hand-off publishes them after), else after them (an
/// issuer of the group reads them next). The staging threads write the
/// zeros themselves, so no other thread writes the staged bytes.
/// `stagedBuffer` builds the staged tile's buffer (a shared memref) where
/// it is called.
static void clearStagedRowsPastSequence(
    OpBuilder &b, Location loc, AccumulateTileOp op, RankedTensorType type,
    function_ref<Value(OpBuilder &)> stagedBuffer, Value firstRow,
    int64_t groupThreads, int64_t groupColumns, bool perWarpgroup,
    bool stagingPublished) {
  int64_t rows = type.getDimSize(0);
  Value end = arith::MaxUIOp::create(b, loc, op.getSequenceEnd(), firstRow);
  Value kept = arith::SubIOp::create(b, loc, end, firstRow);
  Value pastEnd = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, kept,
                                        indexConst(b, loc, rows));
  auto clear = scf::IfOp::create(b, loc, pastEnd, /*withElseRegion=*/false);
  OpBuilder in = OpBuilder::atBlockBegin(clear.thenBlock());
  auto groupBarrier = [&] {
    if (perWarpgroup)
      createWarpgroupBarrier(in, loc);
    else
      createComputeBarrier(in, loc, op);
  };
  if (!stagingPublished)
    groupBarrier();
  Value tid = gpu::ThreadIdOp::create(in, loc, gpu::Dimension::x);
  Value lane =
      arith::RemUIOp::create(in, loc, tid, indexConst(in, loc, groupThreads));
  Value group =
      arith::DivUIOp::create(in, loc, tid, indexConst(in, loc, groupThreads));
  Value buffer = stagedBuffer(in);
  Value start =
      toI32(in, loc,
            arith::AddIOp::create(
                in, loc,
                memref::ExtractAlignedPointerAsIndexOp::create(in, loc, buffer),
                mulConst(in, loc, group, groupColumns * rows * 4)));
  clearSharedRowsPastEnd(in, loc, start, groupColumns / kReductionBoxColumns,
                         rows, kept, lane, groupThreads);
  createAsyncSharedFence(in, loc);
  if (stagingPublished)
    groupBarrier();
}

/// The header's writer warp: `op` (between `wait` and `pass`, its tile
/// staged by `staging`) is added by warp 1 of the producer warpgroup of the
/// warp-specialized `roles`, which walks the loops around it; the
/// consumers only stage the tile between the named barriers.
LogicalResult addThroughWriterWarp(LaunchAttr launch, scf::IfOp roles,
                                   ConvertLayoutOp staging, WaitTurnOp wait,
                                   AccumulateTileOp op, PassTurnOp pass,
                                   Value map) {
  Location loc = op.getLoc();
  SmallVector<scf::ForOp> loops;
  for (Operation *parent = op->getParentOp(); parent != roles;
       parent = parent->getParentOp()) {
    auto loop = dyn_cast<scf::ForOp>(parent);
    if (!loop)
      return op.emitOpError("a writer warp walks only scf.for loops around "
                            "the add, not ")
             << parent->getName();
    loops.insert(loops.begin(), loop);
  }
  auto type = cast<RankedTensorType>(op.getTile().getType());
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  auto offset =
      staging->getAttrOfType<IntegerAttr>(FADialect::getSharedOffsetAttrName());
  if (!offset)
    return staging.emitOpError("has no fa.shared_offset (run fa-place-wgmma)");
  constexpr int64_t warpThreads = 32;
  constexpr int64_t boxCols = kReductionBoxColumns;
  int64_t computeThreads = launch.getComputeThreads();
  // Consumer warpgroups that each stage a column slice of their own (whole
  // boxes; warpgroupColumnSlice) meet the writer on a barrier pair each
  // (their 128 threads and its 32), so they never wait for each other here
  // (FlashAttention-3's dQ barriers per warpgroup); else all consumers meet
  // it on one pair.
  std::optional<int64_t> slice = warpgroupColumnSlice(
      cast<RankedTensorType>(staging.getSource().getType()));
  bool perWarpgroup = slice && *slice % boxCols == 0;
  int64_t groups = perWarpgroup ? cols / *slice : 1;
  int64_t groupColumns = perWarpgroup ? *slice : cols;
  int64_t meeting =
      (perWarpgroup ? kWarpgroupThreads : computeThreads) + warpThreads;
  if (groups > kMaxStagedGroups)
    return op.emitOpError("a writer warp meets at most ")
           << kMaxStagedGroups << " consumer warpgroups, got " << groups;
  Region &consumers = roles.getElseRegion();

  // The writer: the producer warpgroup's warp 1, in the else branch of the
  // branch where warp 0's lane 0 issues the copies, so that nothing the
  // writer reads is kept live through the copies' code (the producer has
  // few registers).
  Block &producer = roles.getThenRegion().front();
  auto copies =
      llvm::find_if(producer, [](Operation &op) { return isa<scf::IfOp>(op); });
  auto copier =
      copies == producer.end() ? scf::IfOp() : cast<scf::IfOp>(*copies);
  if (!copier || copier.getNumResults() != 0 || !copier.getElseRegion().empty())
    return op.emitOpError("a writer warp needs the producer's copies under "
                          "one thread's branch (fa-warp-specialize)");
  copier.getElseRegion().push_back(new Block);
  OpBuilder w = OpBuilder::atBlockEnd(&copier.getElseRegion().front());
  scf::YieldOp::create(w, loc);
  w.setInsertionPointToStart(&copier.getElseRegion().front());
  Value tid = gpu::ThreadIdOp::create(w, loc, gpu::Dimension::x);
  Value warp =
      arith::DivUIOp::create(w, loc, tid, indexConst(w, loc, warpThreads));
  Value isWriter = arith::CmpIOp::create(
      w, loc, arith::CmpIPredicate::eq, warp,
      indexConst(w, loc, computeThreads / warpThreads + 1));
  auto writer = scf::IfOp::create(w, loc, isWriter);
  w.setInsertionPoint(writer.thenBlock()->getTerminator());
  // The staged tile's buffer, where the consumers' staging lowers it
  // (a swizzled tile's offset counts from the first 1024-byte boundary).
  auto stagedBuffer = [&](OpBuilder &at) {
    return sharedBufferAt(
        at, loc,
        arith::AddIOp::create(at, loc, indexConst(at, loc, offset.getInt()),
                              sharedAtomPad(at, loc, kSwizzleBoundaryBytes)),
        sharedBufferType(type));
  };
  Value buffer = stagedBuffer(w);
  Value lane0 = isFirstOfThreadGroup(w, loc, warpThreads);
  // The first tile may be written at once.
  for (int64_t g = 0; g < groups; ++g)
    namedBarrier(w, loc, int32_t(kStagedEmptyBarrier + g), meeting,
                 /*sync=*/false);
  IRMapping mapping;
  auto clone = [&](Value value) -> FailureOr<Value> {
    return cloneSliceInto(w, consumers, value, mapping);
  };
  // The loops count in 32 bits (tile and head indices): the producer's few
  // registers hold no 64-bit counters.
  for (scf::ForOp loop : loops) {
    FailureOr<Value> lower = clone(loop.getLowerBound()),
                     upper = clone(loop.getUpperBound()),
                     step = clone(loop.getStep());
    if (failed(lower) || failed(upper) || failed(step))
      return failure();
    auto walk = scf::ForOp::create(w, loc, toI32(w, loc, *lower),
                                   toI32(w, loc, *upper), toI32(w, loc, *step));
    w.setInsertionPoint(walk.getBody()->getTerminator());
    mapping.map(loop.getInductionVar(),
                toIndex(w, loc, walk.getInductionVar()));
  }
  // The turn, taken by the warp before the tile is staged (it does not
  // depend on the tile): the spin overlaps the consumers' products.
  if (wait) {
    for (Value operand : wait->getOperands())
      if (failed(clone(operand)))
        return failure();
    cast<WaitTurnOp>(w.clone(*wait, mapping)).setByWarp(true);
  }
  FailureOr<Value> row = clone(op.getRow()), head = clone(op.getHead()),
                   batch = clone(op.getBatch());
  if (failed(row) || failed(head) || failed(batch))
    return failure();
  // A varlen sequence's rows start at its first row (its rows past the
  // end: the consumers zero them, clearStagedRowsPastSequence).
  Value firstRow = *row;
  if (Value first = op.getSequenceFirst()) {
    FailureOr<Value> firstV = clone(first);
    if (failed(firstV))
      return failure();
    firstRow = arith::AddIOp::create(w, loc, *firstV, *row);
  }
  // The boxes from one 32-bit shared address plus constant offsets: the
  // producer's few registers hold no 64-bit address per box (LLVM hoists
  // those out of the loops, and ptxas spilled them).
  Value address = toI32(
      w, loc, memref::ExtractAlignedPointerAsIndexOp::create(w, loc, buffer));
  Value rowV = toI32(w, loc, firstRow), headV = toI32(w, loc, *head),
        batchV = toI32(w, loc, *batch);
  // Slice g: once its warpgroup has staged it, its boxes leave as one bulk
  // group.
  for (int64_t g = 0; g < groups; ++g) {
    namedBarrier(w, loc, int32_t(kStagedFullBarrier + g), meeting,
                 /*sync=*/true);
    int64_t sliceBytes = g * groupColumns * rows * 4;
    auto issue = scf::IfOp::create(w, loc, lane0);
    OpBuilder in(issue.thenBlock()->getTerminator());
    // The turn was taken through the generic proxy: order the async
    // proxy's adds after it.
    if (wait && g == 0)
      NVVM::FenceProxyOp::create(in, loc, NVVM::ProxyKind::async_global,
                                 NVVM::SharedSpaceAttr());
    for (int64_t box = 0; box * boxCols < groupColumns; ++box)
      NVVM::InlinePtxOp::create(
          in, loc, TypeRange{},
          ValueRange{
              map, i32Const(in, loc, int32_t(g * groupColumns + box * boxCols)),
              rowV, headV, batchV, address},
          ValueRange{},
          "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile."
          "bulk_group [$0, {$1, $2, $3, $4}], [$5+" +
              std::to_string(sliceBytes + box * rows * boxCols * 4) + "];",
          Value());
    NVVM::CpAsyncBulkCommitGroupOp::create(in, loc);
  }
  // Slice g's buffer is read once at most groups - 1 - g of the bulk groups
  // are still reading (they finish reading in order): its warpgroup may
  // stage the next tile.
  for (int64_t g = 0; g < groups; ++g) {
    auto read = scf::IfOp::create(w, loc, lane0);
    OpBuilder in(read.thenBlock()->getTerminator());
    NVVM::CpAsyncBulkWaitGroupOp::create(in, loc, int32_t(groups - 1 - g),
                                         in.getUnitAttr());
    namedBarrier(w, loc, int32_t(kStagedEmptyBarrier + g), meeting,
                 /*sync=*/false);
  }
  // The adds are in global memory before the turn is handed on; without
  // turns, before the writer leaves (after its loops).
  auto finishAdds = [&](OpBuilder &at) {
    auto finish = scf::IfOp::create(at, loc, lane0);
    OpBuilder in(finish.thenBlock()->getTerminator());
    NVVM::CpAsyncBulkWaitGroupOp::create(in, loc, 0, UnitAttr());
  };
  if (pass) {
    finishAdds(w);
    for (Value operand : pass->getOperands())
      if (failed(clone(operand)))
        return failure();
    cast<PassTurnOp>(w.clone(*pass, mapping)).setByWarp(true);
  } else {
    w.setInsertionPoint(writer.thenBlock()->getTerminator());
    finishAdds(w);
  }

  // The consumers: stage between the named barriers; the turns and the add
  // are the writer's.
  // (Each warpgroup on its own pair, or all on one.)
  auto emptyId = [&](OpBuilder &at) {
    return perWarpgroup ? warpgroupBarrierId(at, loc, kStagedEmptyBarrier)
                        : i32Const(at, loc, kStagedEmptyBarrier);
  };
  OpBuilder c(staging);
  namedBarrier(c, loc, emptyId(c), meeting, /*sync=*/true);
  c.setInsertionPointAfter(staging);
  if (Value first = op.getSequenceFirst())
    clearStagedRowsPastSequence(
        c, loc, op, type,
        // The writer's view of the buffer, not the staged value: the
        // staged tile's only reader stays the hand-off, so that its staging
        // has no barriers.
        stagedBuffer, arith::AddIOp::create(c, loc, first, op.getRow()),
        perWarpgroup ? kWarpgroupThreads : computeThreads, groupColumns,
        perWarpgroup, /*stagingPublished=*/false);
  HandOffOp::create(c, loc, staging.getResult(), kStagedFullBarrier, meeting,
                    perWarpgroup);
  if (pass)
    pass.erase();
  op.erase();
  if (wait)
    wait.erase();
  // The writer's last arrival (its last read of the buffer is done), met at
  // the consumers' end: their dK and dV stores do not wait for it.
  c.setInsertionPoint(consumers.front().getTerminator());
  namedBarrier(c, loc, emptyId(c), meeting, /*sync=*/true);
  return success();
}

struct FATmaReducePass
    : public mlir::fa::impl::FATmaReduceBase<FATmaReducePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<AccumulateTileOp> staged;
    func.walk([&](AccumulateTileOp op) {
      auto type = cast<RankedTensorType>(op.getTile().getType());
      if (isa_and_nonnull<SwizzledSharedEncodingAttr>(type.getEncoding()))
        staged.push_back(op);
    });
    for (AccumulateTileOp op : staged)
      if (failed(reduceWithTma(func, op)))
        return signalPassFailure();
  }

  LogicalResult reduceWithTma(func::FuncOp func, AccumulateTileOp op);
};

LogicalResult FATmaReducePass::reduceWithTma(func::FuncOp func,
                                             AccumulateTileOp op) {
  MLIRContext *ctx = &getContext();
  Location loc = op.getLoc();
  auto grid = op->getParentOfType<GridOp>();
  auto launch =
      grid ? grid->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName())
           : LaunchAttr();
  if (!launch || launch.getStrategy() != StrategyKind::wgmma)
    return op.emitOpError("a tile staged in swizzled shared memory is added "
                          "by the TMA engine: only in a placed wgmma program");
  auto staging = op.getTile().getDefiningOp<ConvertLayoutOp>();
  if (!staging || staging->getBlock() != op->getBlock())
    return op.emitOpError("expects its tile staged by an fa.convert_layout "
                          "in the same block");
  auto dest = dyn_cast<BlockArgument>(op.getDest());
  if (!dest || dest.getOwner() != &func.getBody().front())
    return op.emitOpError("a TMA-reduced destination must be a function "
                          "argument (its tensor map is built for it)");
  auto type = cast<RankedTensorType>(op.getTile().getType());
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  constexpr int64_t boxCols = kReductionBoxColumns;
  // #fa.swizzled_shared's verifier keeps f32 tiles whole boxes.
  assert(cols % boxCols == 0 && "a swizzled f32 tile is whole boxes");

  // The map parameter goes after every program's maps (the first
  // parameters of the function, as the runtime passes them).
  int64_t mapArg = 0;
  func.walk([&](GridOp program) {
    if (auto maps = program->getAttrOfType<ArrayAttr>(
            FADialect::getTensorMapsAttrName()))
      mapArg += int64_t(maps.size());
  });
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  if (failed(func.insertArgument(unsigned(mapArg), ptr,
                                 DictionaryAttr::get(ctx), loc)))
    return failure();
  Value map = func.getArgument(unsigned(mapArg));
  Builder attrs(ctx);
  SmallVector<Attribute> maps;
  if (auto existing =
          grid->getAttrOfType<ArrayAttr>(FADialect::getTensorMapsAttrName()))
    llvm::append_range(maps, existing);
  maps.push_back(attrs.getDictionaryAttr(
      {attrs.getNamedAttr("arg", attrs.getI64IntegerAttr(mapArg)),
       attrs.getNamedAttr("tensor", attrs.getStringAttr("dq_accum")),
       attrs.getNamedAttr("box_rows", attrs.getI64IntegerAttr(rows)),
       attrs.getNamedAttr("box_cols", attrs.getI64IntegerAttr(boxCols))}));
  grid->setAttr(FADialect::getTensorMapsAttrName(), attrs.getArrayAttr(maps));

  // One issuer per warpgroup for its column slice (the staging's lowering
  // asks the same warpgroupReductionSlice for its barriers), or one for the
  // tile.
  std::optional<int64_t> slice = warpgroupReductionSlice(
      cast<RankedTensorType>(staging.getSource().getType()));
  if (slice && *slice % boxCols != 0)
    return op.emitOpError("each warpgroup reduces its own columns: a slice of ")
           << *slice << " columns is not whole boxes of " << boxCols;
  bool perWarpgroup = slice.has_value();
  int64_t issuerThreads = perWarpgroup
                              ? kWarpgroupThreads
                              : int64_t(launch.getComputeThreads());
  int64_t issuerColumns = perWarpgroup ? *slice : cols;

  // The deterministic mode's turn is handed on after the add (later in its
  // block): the add must have finished by then. A turn handed on elsewhere
  // would not order this add.
  bool handsOnTurn = false;
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode())
    handsOnTurn |= isa<PassTurnOp>(next);
  if (!handsOnTurn) {
    WalkResult turns = func.walk([](PassTurnOp) { return WalkResult::interrupt(); });
    if (turns.wasInterrupted())
      return op.emitOpError("the program hands on a turn (fa.pass_turn), but "
                            "not after this add in its block: the TMA "
                            "reduction would not be ordered by the turn");
  }

  // A program with a writer warp (fa-warp-specialize's fa.writer_warp):
  // the warp adds, and takes the turns right around the add.
  if (grid->hasAttr(FADialect::getWriterWarpAttrName())) {
    Operation *role = op;
    while (role->getParentOp() != grid.getOperation())
      role = role->getParentOp();
    auto roles = dyn_cast<scf::IfOp>(role);
    auto wait = dyn_cast_or_null<WaitTurnOp>(op->getPrevNode());
    auto pass = dyn_cast_or_null<PassTurnOp>(op->getNextNode());
    if (!roles || roles.getElseRegion().empty() ||
        !roles.getElseRegion().isAncestor(op->getParentRegion()))
      return op.emitOpError("a writer warp's program adds in its consumers' "
                            "branch (fa-warp-specialize's roles)");
    if (handsOnTurn && (!wait || !pass || !staging->isBeforeInBlock(wait)))
      return op.emitOpError("a writer warp adds between an fa.wait_turn "
                            "right before the add and an fa.pass_turn right "
                            "after it, the tile staged before both");
    return addThroughWriterWarp(launch, roles, staging, wait, op, pass, map);
  }

  // Before the tile is written: the issuer's previous reduction has read
  // the buffer (the staging's leading barrier then tells its threads).
  OpBuilder b(staging);
  onIssuers(b, loc, issuerThreads, [&](OpBuilder &in, Value) {
    NVVM::CpAsyncBulkWaitGroupOp::create(in, loc, 0, in.getUnitAttr());
  });

  // A varlen sequence's tile: its rows start at the sequence's first row,
  // and its rows past the sequence's end are zeroed before they are added
  // (clearStagedRowsPastSequence, after the staging's barrier).
  b.setInsertionPointAfter(staging);
  Value firstRow = op.getRow();
  if (Value first = op.getSequenceFirst())
    firstRow = arith::AddIOp::create(b, loc, first, firstRow);
  if (op.getSequenceFirst())
    clearStagedRowsPastSequence(
        b, loc, op, type,
        [&](OpBuilder &in) {
          return UnrealizedConversionCastOp::create(
                     in, loc, sharedBufferType(type), op.getTile())
              .getResult(0);
        },
        firstRow, issuerThreads, issuerColumns, perWarpgroup,
        /*stagingPublished=*/true);

  // The reduction, box by box: (column, row, head, batch), innermost first.
  b.setInsertionPoint(op);
  MemRefType buffer = sharedBufferType(type);
  Value tile =
      UnrealizedConversionCastOp::create(b, loc, buffer, op.getTile())
          .getResult(0);
  onIssuers(b, loc, issuerThreads, [&](OpBuilder &in, Value issuer) {
    // The turn was taken through the generic proxy (fa.wait_turn's atomic
    // and fence); the adds go through the async proxy, which that fence
    // does not order: the issuer orders them after it.
    if (handsOnTurn)
      NVVM::FenceProxyOp::create(in, loc, NVVM::ProxyKind::async_global,
                                 NVVM::SharedSpaceAttr());
    // The issuer's first column (0 for a single issuer).
    Value firstColumn = toI32(in, loc, mulConst(in, loc, issuer, issuerColumns));
    Value address = arith::IndexCastUIOp::create(
        in, loc, in.getI64Type(),
        memref::ExtractAlignedPointerAsIndexOp::create(in, loc, tile));
    // A varlen sequence's box also adds its rows past the sequence's end
    // into the next sequence's: zeros (cleared above), which leave an
    // accumulator that started at +0 bit for bit as it was (x + 0 = x; a
    // sum from +0 is never -0).
    Value row = toI32(in, loc, firstRow), head = toI32(in, loc, op.getHead()),
          batch = toI32(in, loc, op.getBatch());
    Value firstBox = arith::IndexCastUIOp::create(
        in, loc, in.getI64Type(),
        mulConst(in, loc, issuer,
                 issuerColumns / boxCols * rows * boxCols * 4));
    reduceBoxes(in, loc, map, address, firstBox, firstColumn, issuerColumns,
                rows, row, head, batch);
    if (handsOnTurn)
      NVVM::CpAsyncBulkWaitGroupOp::create(in, loc, 0, UnitAttr());
  });
  op.erase();

  // After the loops around it: every reduction done before the block
  // leaves (its shared memory is read until then).
  Operation *outermost = staging;
  while (isa<scf::ForOp>(outermost->getParentOp()))
    outermost = outermost->getParentOp();
  b.setInsertionPointAfter(outermost);
  onIssuers(b, loc, issuerThreads, [&](OpBuilder &in, Value) {
    NVVM::CpAsyncBulkWaitGroupOp::create(in, loc, 0, UnitAttr());
  });
  return success();
}

} // namespace
