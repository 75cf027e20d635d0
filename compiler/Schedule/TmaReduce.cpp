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

  // Before the tile is written: the issuer's previous reduction has read
  // the buffer (the staging's leading barrier then tells its threads).
  OpBuilder b(staging);
  onIssuers(b, loc, issuerThreads, [&](OpBuilder &in, Value) {
    NVVM::CpAsyncBulkWaitGroupOp::create(in, loc, 0, in.getUnitAttr());
  });

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

  // A varlen sequence's tile: the box adds its rows past the sequence's end
  // into the next sequence's rows. Those rows of the staged dQ = dS K are
  // 0 x K, NaN where this sequence's K holds inf or NaN: each issuing group
  // zeroes them in its columns of the staged tile, after the staging's
  // barrier and before its issuer reads them (a uniform branch, taken by
  // the sequence's last query tile).
  // The tile's first row in the destination: a varlen sequence's rows
  // start at its first row.
  b.setInsertionPointAfter(staging);
  Value firstRow = op.getRow();
  if (Value first = op.getSequenceFirst())
    firstRow = arith::AddIOp::create(b, loc, first, firstRow);
  if (op.getSequenceFirst()) {
    Value end = arith::MaxUIOp::create(b, loc, op.getSequenceEnd(), firstRow);
    Value kept = arith::SubIOp::create(b, loc, end, firstRow);
    Value pastEnd = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          kept, indexConst(b, loc, rows));
    auto clear = scf::IfOp::create(b, loc, pastEnd, /*withElseRegion=*/false);
    OpBuilder in = OpBuilder::atBlockBegin(clear.thenBlock());
    Value tid = gpu::ThreadIdOp::create(in, loc, gpu::Dimension::x);
    Value lane = arith::RemUIOp::create(in, loc, tid,
                                        indexConst(in, loc, issuerThreads));
    Value issuer = arith::DivUIOp::create(in, loc, tid,
                                          indexConst(in, loc, issuerThreads));
    Value staged = UnrealizedConversionCastOp::create(
                       in, loc, sharedBufferType(type), op.getTile())
                       .getResult(0);
    Value start = toI32(
        in, loc,
        arith::AddIOp::create(
            in, loc,
            memref::ExtractAlignedPointerAsIndexOp::create(in, loc, staged),
            mulConst(in, loc, issuer, issuerColumns * rows * 4)));
    clearSharedRowsPastEnd(in, loc, start, issuerColumns / boxCols, rows, kept,
                           lane, issuerThreads);
    NVVM::FenceProxyOp::create(
        in, loc, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
        NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
    if (perWarpgroup)
      createWarpgroupBarrier(in, loc);
    else
      createComputeBarrier(in, loc, op);
  }

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
    auto sharedPtr = LLVM::LLVMPointerType::get(ctx, /*addressSpace=*/3);
    // A varlen sequence's box also adds its rows past the sequence's end
    // into the next sequence's: zeros (cleared above), which leave an
    // accumulator that started at +0 bit for bit as it was (x + 0 = x; a
    // sum from +0 is never -0).
    Value row = toI32(in, loc, firstRow), head = toI32(in, loc, op.getHead()),
          batch = toI32(in, loc, op.getBatch());
    // Box k of the tile (columns 32 k ..) lies rows x 128 bytes after box
    // k - 1.
    int64_t boxBytes = rows * boxCols * 4;
    Value firstBox = arith::IndexCastUIOp::create(
        in, loc, in.getI64Type(),
        mulConst(in, loc, issuer, issuerColumns / boxCols * boxBytes));
    for (int64_t box = 0; box * boxCols < issuerColumns; ++box) {
      Value start = arith::AddIOp::create(in, loc, address, firstBox);
      Value column = firstColumn;
      if (box > 0) {
        start = arith::AddIOp::create(
            in, loc, start,
            arith::ConstantOp::create(in, loc,
                                      in.getI64IntegerAttr(box * boxBytes)));
        column = arith::AddIOp::create(
            in, loc, column,
            arith::ConstantOp::create(
                in, loc, in.getI32IntegerAttr(int32_t(box * boxCols))));
      }
      Value source = LLVM::IntToPtrOp::create(in, loc, sharedPtr, start);
      NVVM::CpAsyncBulkTensorReduceOp::create(
          in, loc, map, source, NVVM::TMAReduxKind::ADD,
          NVVM::TMAStoreMode::TILE, ValueRange{column, row, head, batch},
          Value());
    }
    NVVM::CpAsyncBulkCommitGroupOp::create(in, loc);
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
