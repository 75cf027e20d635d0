//===- WarpSpecialize.cpp - Producer/consumer split of a program -*- C++
//-*-===//
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
// 8-bit V (FP8) whose transposed copy fa-place-wgmma marked
// fa.producer_writes: P V reads V transposed, and the producer's 128
// threads write that copy (fa.copy_tile), one tile behind the elected
// thread's copies, into a ring of its own:
//
//   v_t_full[t]            V tile n transposed into slot t = n % 2
//                          (the producer's 128 threads -> consumers)
//   v_t_empty[t]           every consumer thread is done with slot t
//                          (consumers -> producer)
//
// V's own empty barriers then count the producer's threads (they read V).
//
// The producer gives registers back (setmaxnreg.dec) and the consumers take
// them (setmaxnreg.inc); the kernel's parameters gain one TMA tensor map per
// loaded tensor (recorded in fa.tensor_maps for the runtime).
//
// Persistent (the default where WgmmaModel::runsPersistent allows it):
// the runtime launches one block per SM, and each role walks the block's
// work items in the same order. Item w is a (batch, head) pair and a rank
// k: the pairs in sections whose K and V fit in L2 together, in a section
// the ranks in order and the pairs innermost. An item visits query tile
// T - 1 - k, and with the causal mask also its mirror k (the middle tile
// of an odd T alone), so that causal items hold about T + 1 tiles of keys
// each: a fixed assignment needs items of equal length. Round r gives the
// blocks items r x blocks .. (r + 1) x blocks - 1, in block order in even
// rounds and in reverse in odd ones. The rings' positions run on from
// visit to visit (n counts the block's K/V tiles so far), Q's phase is the
// count of visits, and Q gets an empty barrier too:
//
//   q_empty                every consumer thread is done with Q
//                          (consumers -> producer)
//
// released right after the last Q K^T (pipelined: after the K/V loop,
// before the last P V), so the producer loads the next visit's Q and first
// K/V tiles while the consumers finish this one.
//
// The backward's dkdv program has the roles the other way round: K and V
// are resident (loaded once), Q and dO stream through the rings over the
// loops around their loads (the GQA group's query heads, then the query
// tiles), the n-th iteration of the loop nest in slot n % stages:
//
//   k_full, v_full         K / V landed            (producer -> consumers)
//   q_full[s], do_full[s]  Q / dO of slot s landed (producer -> consumers)
//   q_empty[s], do_empty[s]                        (consumers -> producer)
//
// The producer walks the same loop nest. LSE and D (a row of 64 floats per
// query tile) are the consumers' own loads, unless fa-place-wgmma staged
// them (1-d #fa.shared loads with fa.pipeline_stages): then they ride Q's
// ring. A warp of the producer for each (warps 2 and 3) walks the loop nest
// too and copies each tile's rows into the ring's slot s with cp.async, as
// zeros past the rows' end, once q_empty[s] let Q's copy go; each lane
// arrives on q_full[s] once its copies have landed
// (cp.async.mbarrier.arrive.noinc: q_full counts those 64 arrivals besides
// the elected thread's expect_tx). The consumers read them after the wait
// for q_full[s], and Q's release frees their slot too. The consumers'
// block-wide barriers (staging P and dS, the deterministic turns) become a
// named barrier of their threads (createComputeBarrier).
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/Schedule/PersistentSchedule.h"
#include "compiler/Schedule/WarpSpecialization.h"
#include "compiler/Tiling/Variants.h"
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
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

#include <array>

#define DEBUG_TYPE "fa-warp-specialize"

namespace mlir::fa {
#define GEN_PASS_DEF_FAWARPSPECIALIZE
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warp_specialization;
namespace model = ::fa::wgmma;

memref::LoadOp warp_specialization::pageTableLoad(LoadTileOp load) {
  auto clamp = load.getBatch().getDefiningOp<arith::MinUIOp>();
  if (!clamp)
    return {};
  auto page = clamp.getLhs().getDefiningOp<arith::IndexCastUIOp>();
  if (!page)
    return {};
  auto table = page.getIn().getDefiningOp<memref::LoadOp>();
  if (!table || table.getIndices().size() != 2)
    return {};
  return table;
}

Value warp_specialization::tileStartOf(LoadTileOp load) {
  if (!pageTableLoad(load))
    return load.getRow();
  auto inPage = load.getRow().getDefiningOp<arith::RemUIOp>();
  return inPage ? inPage.getLhs() : Value();
}

namespace {

struct FAWarpSpecializePass
    : public mlir::fa::impl::FAWarpSpecializeBase<FAWarpSpecializePass> {
  using FAWarpSpecializeBase::FAWarpSpecializeBase;

  void runOnOperation() override {
    SmallVector<GridOp> grids;
    getOperation().walk([&](GridOp grid) {
      auto launch =
          grid->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
      // The forward's programs and the backward's dkdv (its delta and dq
      // programs run on simt).
      bool loadsTiles =
          isForwardProgram(grid) || grid.getProgram() == StringRef("dkdv");
      if (launch && launch.getStrategy() == StrategyKind::wgmma &&
          launch.getProducerWarps() == 0 && loadsTiles)
        grids.push_back(grid);
    });
    for (GridOp grid : grids)
      if (failed(specialize(grid)))
        return signalPassFailure();
  }

  LogicalResult specialize(GridOp grid);
};

} // namespace

namespace {

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

  // Forward: Q (loaded once), K (the right operand of Q K^T) and V
  // (streamed through the ring: the loads placed with fa.pipeline_stages).
  // K/V tile n of the program (n = row / block-n - kv_begin) uses slot
  // n % stages. dkdv: K and V loaded once, Q and dO streamed over the loop
  // nest around them; LSE and D are register tiles the consumers load.
  bool forward = isForwardProgram(grid);
  SmallVector<LoadTileOp> once, streamedLoads, rowValueLoads;
  LoadTileOp pagedLoad;
  grid.walk([&](LoadTileOp op) {
    if (op.getPages())
      pagedLoad = op;
    Attribute encoding = op.getType().getEncoding();
    if (!forward && !isa<SwizzledSharedEncodingAttr>(encoding)) {
      // LSE and D staged beside Q (fa-place-wgmma's staged-row-values).
      if (isa_and_nonnull<SharedEncodingAttr>(encoding) &&
          op->hasAttr(FADialect::getPipelineStagesAttrName()))
        rowValueLoads.push_back(op);
      return;
    }
    (op->hasAttr(FADialect::getPipelineStagesAttrName()) ? streamedLoads
                                                         : once)
        .push_back(op);
  });
  // A TMA copy reads one box of rows: it cannot look each row's page up.
  if (pagedLoad)
    return pagedLoad.emitOpError(
        "a warp-specialized (TMA) program cannot read a paged tile row by row "
        "(pages)");
  // A tile a page holds: its ring position counts from its first key, its
  // row being the one in its page (buildPagedTile's form).
  for (LoadTileOp load : streamedLoads)
    if (!tileStartOf(load))
      return load.emitOpError(
          "reads a paged K/V tile whose row is not its first key modulo the "
          "page size (the form the tiling builds)");
  SmallVector<KVTileRangeOp> ranges;
  grid.walk([&](KVTileRangeOp op) { ranges.push_back(op); });
  std::array<LoadedTensor, 6> storage;
  SmallVector<LoadedTensor *> resident, streamed, rowValues;
  SmallVector<ConvertLayoutOp> transposeLoads;
  LoadedTensor *transposedValue = nullptr;
  Value keySource;
  SmallVector<scf::ForOp> streamLoops;
  if (forward) {
    grid.walk([&](TileMatmulOp op) {
      if (auto load = op.getRhs().getDefiningOp<LoadTileOp>();
          load && op.getTransposeRhs())
        keySource = load.getSource();
    });
    if (once.size() != 1 || once[0]->getBlock() != &grid.getBodyBlock() ||
        streamedLoads.empty() || !keySource || ranges.size() != 1)
      return grid.emitOpError(
          "warp specialization expects Q loaded once in the program, K and V "
          "tiles streamed over one fa.kv_tile_range");
    LoadedTensor &q = storage[0], &k = storage[1], &v = storage[2];
    q.name = "q", k.name = "k", v.name = "v";
    q.loads.push_back(once[0]);
    for (LoadTileOp load : streamedLoads)
      (load.getSource() == keySource ? k : v).loads.push_back(load);
    if (k.loads.empty() || v.loads.empty())
      return grid.emitOpError("warp specialization expects K and V tiles");
    resident = {&q};
    streamed = {&k, &v};
    // 8-bit V: P V reads it transposed (fa-place-wgmma's fa.convert_layout
    // to #fa.swizzled_shared<transposed>); where the placement marked that
    // copy fa.producer_writes the producer writes it (else each consumer
    // warpgroup does).
    for (LoadTileOp load : v.loads)
      for (Operation *user : load->getUsers())
        if (user->hasAttr(FADialect::getProducerWritesAttrName()))
          transposeLoads.push_back(cast<ConvertLayoutOp>(user));
    if (!transposeLoads.empty()) {
      for (LoadTileOp load : v.loads)
        if (!load->hasOneUse() ||
            !llvm::is_contained(transposeLoads, *load->user_begin()))
          return load.emitOpError(
              "a V tile read transposed must have that copy as its only use, "
              "marked fa.producer_writes like every other V load's copy "
              "(the producer writes all of them or none)");
      if (v.loads.front().getSequenceEnd())
        return v.loads.front().emitOpError(
            "the producer's transposed V does not take a varlen sequence "
            "(its rows past the sequence are not cleared)");
      // The verifier requires an fa.shared_offset on a convert into shared
      // memory in a placed program.
      auto offset = transposeLoads.front()->getAttrOfType<IntegerAttr>(
          FADialect::getSharedOffsetAttrName());
      assert(offset && "a placed shared convert has an fa.shared_offset");
      for (ConvertLayoutOp convert : transposeLoads)
        if (convert.getType() != transposeLoads.front().getType() ||
            convert->getAttr(FADialect::getSharedOffsetAttrName()) != offset)
          return convert.emitOpError("transposed V copies must share their "
                                     "tile type and shared ring");
      LoadedTensor &transposed = storage[3];
      transposed.name = "v_t";
      transposed.type = transposeLoads.front().getType();
      transposed.offset = offset.getInt();
      MemRefType buffer = sharedBufferType(transposed.type);
      transposed.slotBytes =
          buffer.getNumElements() * buffer.getElementTypeBitWidth() / 8;
      transposed.slots = model::kTransposedValueRingSlots;
      transposedValue = &transposed;
      // The producer issues tile n's copies before it transposes tile
      // n - 1 (the copies' latency hides behind the transpose). V tile n's
      // copy waits for its slot to be empty; with one slot that is tile
      // n - 1's, which only the transpose after the copy empties: the
      // producer would wait on itself (it hung on the GPU at head dim 256,
      // one stage; two or more ran).
      if (stages < 2)
        return transposeLoads.front().emitOpError(
                   "the producer's V transpose needs 2 or more K/V stages, "
                   "got ")
               << stages
               << " (with one, V tile n's copy waits for the slot that the "
                  "transpose of tile n - 1, after it, empties)";
    }
    // TMA fills only rows past the tensor with zeros: rows between a
    // varlen sequence's end and the tensor's end arrive as the next
    // sequence's. The forward masks those keys' scores (P = 0), clears
    // those V rows (clearRowsPastSequence: 0 * inf is NaN) and stores no
    // query row past the sequence.
  } else {
    // A varlen dkdv program: TMA brings the next sequence's rows past a
    // tile's end too; the consumers clear them in all four tiles (see
    // rewriteConsumers), so that they add nothing to dK, dV or dQ.
    // The backward's operands (fa-tile-backward): Q, K, V, O, dO, ...
    auto argumentOf = [&](LoadTileOp load) -> int64_t {
      auto arg = dyn_cast<BlockArgument>(load.getSource());
      return arg && arg.getOwner() == &func.getBody().front()
                 ? int64_t(arg.getArgNumber())
                 : -1;
    };
    auto argumentsAre = [&](ArrayRef<LoadTileOp> loads,
                            ArrayRef<int64_t> expected) {
      return loads.size() == expected.size() &&
             llvm::all_of(llvm::zip(loads, expected), [&](auto pair) {
               return argumentOf(std::get<0>(pair)) == std::get<1>(pair);
             });
    };
    if (!argumentsAre(once, {1, 2}) || !argumentsAre(streamedLoads, {0, 4}) ||
        once[0]->getBlock() != &grid.getBodyBlock() ||
        once[1]->getBlock() != &grid.getBodyBlock() ||
        streamedLoads[0]->getBlock() != streamedLoads[1]->getBlock())
      return grid.emitOpError(
          "warp specialization of a dkdv program expects K and V (arguments "
          "1, 2) loaded once in the program, Q and dO (arguments 0, 4) "
          "streamed in one loop body");
    // The loops around the streamed loads, outermost first: both roles
    // walk them and count their iterations alike.
    for (Operation *op = streamedLoads[0]->getParentOp(); op != grid;
         op = op->getParentOp()) {
      auto loop = dyn_cast<scf::ForOp>(op);
      if (!loop)
        return op->emitOpError("warp specialization of a dkdv program "
                               "expects only scf.for loops around the "
                               "streamed Q and dO loads");
      streamLoops.insert(streamLoops.begin(), loop);
    }
    if (streamLoops.empty())
      return grid.emitOpError("warp specialization of a dkdv program "
                              "expects Q and dO loaded in a loop");
    LoadedTensor &k = storage[0], &v = storage[1], &q = storage[2],
                 &gradOutput = storage[3];
    k.name = "k", v.name = "v", q.name = "q", gradOutput.name = "do";
    k.loads.push_back(once[0]);
    v.loads.push_back(once[1]);
    q.loads.push_back(streamedLoads[0]);
    gradOutput.loads.push_back(streamedLoads[1]);
    resident = {&k, &v};
    streamed = {&q, &gradOutput};
    // Staged row values: one ring each, Q's slots.
    if (rowValueLoads.size() > 2)
      return rowValueLoads[2].emitOpError(
          "a dkdv program stages two row values (LSE and D), this is a third");
    int64_t queryRows =
        cast<RankedTensorType>(streamedLoads[0].getType()).getDimSize(0);
    for (auto [i, load] : llvm::enumerate(rowValueLoads)) {
      auto type = cast<RankedTensorType>(load.getType());
      auto slots = load->getAttrOfType<IntegerAttr>(
          FADialect::getPipelineStagesAttrName());
      if (load->getBlock() != streamedLoads[0]->getBlock() ||
          type.getRank() != 1 || !type.getElementType().isF32() ||
          type.getDimSize(0) != queryRows ||
          type.getDimSize(0) % kRowValueLanes != 0 ||
          slots.getInt() != stages ||
          !load->hasAttr(FADialect::getSharedOffsetAttrName()))
        return load.emitOpError("staged row values must be f32 rows, one "
                                "per row of Q's tile (a multiple of ")
               << kRowValueLanes
               << "), loaded in Q's loop body into a ring of the program's "
                  "stages (fa.pipeline_stages = "
               << stages << ", an fa.shared_offset)";
      LoadedTensor &ring = storage[4 + i];
      ring.name = "row values";
      ring.loads.push_back(load);
      ring.type = type;
      ring.offset =
          load->getAttrOfType<IntegerAttr>(FADialect::getSharedOffsetAttrName())
              .getInt();
      ring.slotBytes = type.getDimSize(0) * 4;
      ring.slots = stages;
      rowValues.push_back(&ring);
    }
  }
  // Persistent (forward) where the model leaves the registers for it; then
  // Q has an empty barrier too, after the K/V ones. Not for a ragged
  // (varlen) grid: its tile count bounds the packed rows, and items made
  // from it would mostly be empty.
  bool isPersistent =
      persistent && forward && !grid.getRagged() &&
      model::runsPersistent(
          cast<RankedTensorType>(once[0].getType()).getDimSize(1),
          computeThreads / 32);
  BarrierLayout barrierLayout{int64_t(resident.size()), stages, isPersistent,
                              transposedValue ? transposedValue->slots : 0,
                              int64_t(rowValues.size()) * kRowValueLanes};
  if (transposedValue) {
    transposedValue->fullBarrier = barrierLayout.transposedFull(0);
    transposedValue->emptyBarrier = barrierLayout.transposedEmpty(0);
  }
  for (auto [i, tensor] : llvm::enumerate(resident)) {
    tensor->fullBarrier = barrierLayout.residentFull(i);
    if (i == 0)
      tensor->emptyBarrier = barrierLayout.residentEmpty();
  }
  for (auto [j, tensor] : llvm::enumerate(streamed)) {
    tensor->fullBarrier = barrierLayout.streamedFull(j);
    tensor->emptyBarrier = barrierLayout.streamedEmpty(j);
    tensor->slots = stages;
  }
  for (LoadedTensor *ring : rowValues)
    ring->fullBarrier = streamed.front()->fullBarrier;
  SmallVector<LoadedTensor *> tensors = resident;
  llvm::append_range(tensors, streamed);
  for (LoadedTensor *tensor : tensors)
    for (LoadTileOp load : tensor->loads) {
      auto arg = dyn_cast<BlockArgument>(load.getSource());
      if (!arg || arg.getOwner() != &func.getBody().front())
        return load.emitOpError("a TMA-loaded tile must come from a function "
                                "argument (its tensor map is built for it)");
      if (!load->hasAttr(FADialect::getSharedOffsetAttrName()))
        return load.emitOpError(
            "has no fa.shared_offset (run fa-place-wgmma)");
      if (load.getSource() != tensor->loads.front().getSource() ||
          load.getType() != tensor->loads.front().getType() ||
          load->getAttr(FADialect::getSharedOffsetAttrName()) !=
              tensor->loads.front()->getAttr(
                  FADialect::getSharedOffsetAttrName()))
        return load.emitOpError("loads of one tensor must share its source, "
                                "tile type and shared ring");
    }

  // One tensor map parameter per tensor, in front of the others.
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  for (unsigned i = 0; i < tensors.size(); ++i)
    if (failed(func.insertArgument(i, ptr, DictionaryAttr::get(ctx), loc)))
      return failure();
  Builder attrs(ctx);
  SmallVector<Attribute> maps;
  for (auto [i, tensor] : llvm::enumerate(tensors)) {
    tensor->map = func.getArgument(i);
    tensor->type = cast<RankedTensorType>(tensor->loads.front().getType());
    tensor->offset = tensor->loads.front()
                         ->getAttrOfType<IntegerAttr>(
                             FADialect::getSharedOffsetAttrName())
                         .getInt();
    MemRefType buffer = sharedBufferType(tensor->type);
    tensor->slotBytes =
        buffer.getNumElements() * buffer.getElementTypeBitWidth() / 8;
    int64_t elementBytes = buffer.getElementTypeBitWidth() / 8;
    SmallVector<NamedAttribute> map = {
        attrs.getNamedAttr("arg", attrs.getI64IntegerAttr(i)),
        attrs.getNamedAttr("tensor", attrs.getStringAttr(tensor->name)),
        attrs.getNamedAttr("box_rows",
                           attrs.getI64IntegerAttr(tensor->type.getDimSize(0))),
        attrs.getNamedAttr(
            "box_cols",
            attrs.getI64IntegerAttr(
                cast<SwizzledSharedEncodingAttr>(tensor->type.getEncoding())
                    .getBlockColumns(tensor->type.getElementType())))};
    // FP8 inputs: bytes (the 16-bit inputs' 2 is the default).
    if (elementBytes == 1)
      map.push_back(
          attrs.getNamedAttr("element_bytes", attrs.getI64IntegerAttr(1)));
    maps.push_back(attrs.getDictionaryAttr(map));
  }
  int64_t numBarriers = barrierLayout.count();

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
    for (int64_t i = 0; i < numBarriers; ++i)
      nvgpu::MBarrierInitOp::create(
          in, loc, barriers,
          indexConst(in, loc, barrierLayout.arrivals(i, computeThreads)),
          indexConst(in, loc, i), Value());
  }
  NVVM::FenceMbarrierInitOp::create(b, loc);
  gpu::BarrierOp::create(b, loc);
  // Persistent: the block's rounds of the work items (with the causal mask
  // an item is a tile and its mirror), and the (batch, head) pairs whose K
  // and V fill the L2 budget: budget / (Sk x 2 rows x row bytes), at least
  // one (all i32; the runtime checks that the tiles fit).
  bool mirrored =
      forward && (ranges[0].getMask() == MaskKind::causal ||
                  (!ranges[0].getMaskMod().empty() &&
                   visitedKeysGrowWithQuery(ranges[0].getMaskMod())));
  WorkRounds work;
  Value sectionPairs;
  if (isPersistent) {
    Value pairs = toI32(b, loc,
                        arith::MulIOp::create(b, loc, grid.getNumHeads(),
                                              grid.getBatchSize()));
    work = planRounds(
        b, loc,
        arith::MulIOp::create(
            b, loc, pairs,
            itemsPerPair(b, loc, toI32(b, loc, grid.getNumQTiles()),
                         mirrored)));
    auto keyType = cast<MemRefType>(keySource.getType());
    int64_t kvRowBytes = 2 * keyType.getDimSize(3) *
                         keyType.getElementTypeBitWidth() / 8;
    Value keyLength = arith::MaxUIOp::create(
        b, loc, memref::DimOp::create(b, loc, keySource, 2),
        indexConst(b, loc, 1));
    // At most all pairs: a section's items then stay within the items'
    // count (32 bits) even for a few keys.
    sectionPairs = arith::MinUIOp::create(
        b, loc,
        toI32(b, loc,
              arith::MaxUIOp::create(
                  b, loc,
                  arith::DivUIOp::create(
                      b, loc,
                      indexConst(b, loc, model::kL2SectionBytes / kvRowBytes),
                      keyLength),
                  indexConst(b, loc, 1))),
        pairs);
  }
  Value isProducer = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                           tid, computeThreadsV);
  auto roles = scf::IfOp::create(b, loc, isProducer, /*withElseRegion=*/true);
  Block &producer = roles.getThenRegion().front();
  Block &consumer = roles.getElseRegion().front();
  // The consumers run the program; persistent, once per visit.
  WorkLoops consumerWork;
  if (isPersistent) {
    OpBuilder at(consumer.getTerminator());
    consumerWork =
        buildWorkLoops(at, loc, grid, work, sectionPairs, mirrored);
    Block *workBody = consumerWork.visits.getBody();
    for (Operation *op : program)
      op->moveBefore(workBody, workBody->end());
  } else {
    for (Operation *op : program)
      op->moveBefore(consumer.getTerminator());
  }
  Region &programRegion = roles.getElseRegion();
  // A dkdv program's writer warp (writer-warp: the deterministic programs,
  // whose turns it takes, or every one), which issues fa-tma-reduce's dQ
  // reductions; the producer keeps registers for it.
  bool writerWarp = false;
  if (!forward) {
    bool readsTables = readsBlockMaskTables(grid);
    std::optional<bool> takes = model::takesWriterWarp(
        writerWarpMode, takesTurns(grid), grid.getRagged(), readsTables);
    if (!takes)
      return grid.emitOpError("writer-warp must be none, deterministic, "
                              "every or all, got '")
             << writerWarpMode << "'";
    writerWarp = *takes;
  }

  Specialization specialization{ctx,
                                loc,
                                grid,
                                forward ? ranges[0] : nullptr,
                                streamLoops,
                                /*streamPosition=*/Value(),
                                stages,
                                computeThreads,
                                isPersistent,
                                mirrored,
                                writerWarp,
                                resident,
                                streamed,
                                tensors,
                                transposedValue,
                                tid,
                                computeThreadsV,
                                pad,
                                barriers,
                                work,
                                sectionPairs,
                                programRegion};
  specialization.rowValues = rowValues;
  if (forward) {
    SmallVector<KVTileHoleOp> holes;
    grid.walk([&](KVTileHoleOp op) { holes.push_back(op); });
    if (holes.size() > 1)
      return grid.emitOpError("warp specialization expects at most one "
                              "fa.kv_tile_hole, in its K/V range");
    if (!holes.empty())
      specialization.hole = holes.front();
  }
  if (failed(specialization.buildProducer(producer)) ||
      failed(specialization.rewriteConsumers(consumer, consumerWork)))
    return failure();

  grid->setAttr(FADialect::getLaunchAttrName(),
                LaunchAttr::get(ctx, launch.getStrategy(), computeThreads + 128,
                                launch.getSharedBytes(), stages,
                                launch.getRegisters(), /*producerWarps=*/4));
  grid->setAttr(FADialect::getTensorMapsAttrName(), attrs.getArrayAttr(maps));
  if (isPersistent)
    grid->setAttr(FADialect::getPersistentAttrName(), UnitAttr::get(ctx));
  if (writerWarp)
    grid->setAttr(FADialect::getWriterWarpAttrName(), UnitAttr::get(ctx));
  return success();
}

} // namespace
