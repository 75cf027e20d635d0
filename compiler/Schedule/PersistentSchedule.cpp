//===- PersistentSchedule.cpp - Work items of a persistent block ----------===//
#include "compiler/Schedule/PersistentSchedule.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace mlir::fa;

/// The phase parity of a barrier's `round`-th completion (index or i32):
/// round % 2.
Value mlir::fa::parityOf(OpBuilder &b, Location loc, Value round) {
  if (round.getType().isIndex())
    round = toI32(b, loc, round);
  return arith::TruncIOp::create(b, loc, b.getI1Type(), round);
}

/// i32 `base` plus the K/V tiles of [begin, end) (none when end <= begin).
Value mlir::fa::addTiles(OpBuilder &b, Location loc, Value base, Value begin,
               Value end) {
  Value tiles = arith::SubIOp::create(
      b, loc, arith::MaxSIOp::create(b, loc, begin, end), begin);
  return arith::AddIOp::create(b, loc, base, toI32(b, loc, tiles));
}


Value mlir::fa::roundItem(OpBuilder &b, Location loc, const WorkRounds &work,
                Value round) {
  Value odd = arith::TruncIOp::create(b, loc, b.getI1Type(), round);
  Value position =
      arith::SelectOp::create(b, loc, odd, work.mirror, work.block);
  return arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, round, work.blocks), position);
}

WorkRounds mlir::fa::planRounds(OpBuilder &b, Location loc, Value items) {
  WorkRounds work;
  work.items = items;
  work.block = toI32(b, loc, gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  work.blocks =
      toI32(b, loc, gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
  work.mirror = arith::SubIOp::create(
      b, loc, arith::SubIOp::create(b, loc, work.blocks, work.block),
      i32Const(b, loc, 1));
  // Whole rounds, plus the last one where the block's item exists.
  Value full = arith::DivUIOp::create(b, loc, items, work.blocks);
  Value inLast = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                       roundItem(b, loc, work, full), items);
  work.rounds = arith::AddIOp::create(
      b, loc, full, arith::ExtUIOp::create(b, loc, b.getI32Type(), inLast));
  return work;
}


/// The items of one (batch, head) pair (i32): one per query tile, or with
/// the causal mask one per tile and its mirror (tiles T - 1 - k and k, and
/// the middle tile alone when T is odd), so that every item holds about the
/// same work: T + 1 tiles' rows of keys.
Value mlir::fa::itemsPerPair(OpBuilder &b, Location loc, Value tiles, bool mirrored) {
  if (!mirrored)
    return tiles;
  return arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, tiles, i32Const(b, loc, 1)),
      i32Const(b, loc, 2));
}

/// Work item `w` of `grid`'s tiles (see the file comment): sections of
/// `sectionPairs` (batch, head) pairs; in a section the items in rank
/// order, the pairs innermost. `w` and `sectionPairs` are i32.
ScheduledItem mlir::fa::scheduleItem(OpBuilder &b, Location loc, GridOp grid, Value w,
                           Value sectionPairs, bool mirrored) {
  auto div = [&](Value x, Value y) -> Value {
    return arith::DivUIOp::create(b, loc, x, y);
  };
  auto rem = [&](Value x, Value y) -> Value {
    return arith::RemUIOp::create(b, loc, x, y);
  };
  auto mul = [&](Value x, Value y) -> Value {
    return arith::MulIOp::create(b, loc, x, y);
  };
  auto sub = [&](Value x, Value y) -> Value {
    return arith::SubIOp::create(b, loc, x, y);
  };
  Value tiles = toI32(b, loc, grid.getNumQTiles());
  Value heads = toI32(b, loc, grid.getNumHeads());
  Value pairs = mul(toI32(b, loc, grid.getBatchSize()), heads);
  Value sectionItems = mul(sectionPairs, itemsPerPair(b, loc, tiles, mirrored));
  Value firstPair = mul(div(w, sectionItems), sectionPairs);
  Value inSection = rem(w, sectionItems);
  // The last section may hold fewer pairs.
  Value size = arith::MinUIOp::create(b, loc, sectionPairs,
                                      sub(pairs, firstPair));
  Value pair = arith::AddIOp::create(b, loc, firstPair, rem(inSection, size));
  ScheduledItem item{toIndex(b, loc, div(pair, heads)),
                     toIndex(b, loc, rem(pair, heads)), div(inSection, size),
                     i32Const(b, loc, 1)};
  if (mirrored) {
    // Tile k has no mirror when it is the middle one: 2k + 1 = T.
    Value middle = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        arith::AddIOp::create(b, loc, mul(item.rank, i32Const(b, loc, 2)),
                              i32Const(b, loc, 1)),
        tiles);
    item.visits = arith::SelectOp::create(b, loc, middle, i32Const(b, loc, 1),
                                          i32Const(b, loc, 2));
  }
  return item;
}

/// The query tile of visit `visit` of item rank k: T - 1 - k (the longest
/// first), then k (its mirror).
Value mlir::fa::visitTile(OpBuilder &b, Location loc, GridOp grid, Value rank,
                Value visit) {
  Value tiles = toI32(b, loc, grid.getNumQTiles());
  Value longer = arith::SubIOp::create(
      b, loc, arith::SubIOp::create(b, loc, tiles, i32Const(b, loc, 1)), rank);
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, visit,
                                      i32Const(b, loc, 0));
  return toIndex(b, loc, arith::SelectOp::create(b, loc, first, longer, rank));
}


WorkLoops mlir::fa::buildWorkLoops(OpBuilder &b, Location loc, GridOp grid,
                         const WorkRounds &work, Value sectionPairs,
                         bool mirrored) {
  WorkLoops loops;
  Value zero = i32Const(b, loc, 0), one = i32Const(b, loc, 1);
  loops.rounds = scf::ForOp::create(b, loc, zero, work.rounds, one,
                                    ValueRange{zero, zero});
  OpBuilder at = OpBuilder::atBlockBegin(loops.rounds.getBody());
  loops.item =
      scheduleItem(at, loc, grid,
                   roundItem(at, loc, work, loops.rounds.getInductionVar()),
                   sectionPairs, mirrored);
  loops.visits = scf::ForOp::create(at, loc, zero, loops.item.visits, one,
                                    loops.rounds.getRegionIterArgs());
  scf::YieldOp::create(at, loc, loops.visits.getResults());
  at.setInsertionPointToStart(loops.visits.getBody());
  loops.tile = visitTile(at, loc, grid, loops.item.rank,
                         loops.visits.getInductionVar());
  return loops;
}

/// The inner yield of a persistent role: the ring position after the
/// visit's K/V range, one more tile visited.
void mlir::fa::yieldVisit(OpBuilder &b, Location loc, WorkLoops &loops, Value kvBegin,
                Value kvEnd) {
  scf::YieldOp::create(
      b, loc,
      ValueRange{addTiles(b, loc, loops.ringBase(), kvBegin, kvEnd),
                 arith::AddIOp::create(b, loc, loops.visited(),
                                       i32Const(b, loc, 1))});
}

