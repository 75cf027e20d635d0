//===- PersistentSchedule.h - Work items of a persistent block --*- C++ -*-===//
//
// The persistent schedule of fa-warp-specialize (see its file comment):
// which work items a block runs in which order, and the loops both roles
// (producer and consumers) build over them, in 32-bit arithmetic (the
// producer has few registers). Also the ring arithmetic both roles share
// (barrier parities, K/V tile counts).
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_SCHEDULE_PERSISTENTSCHEDULE_H
#define FA_COMPILER_SCHEDULE_PERSISTENTSCHEDULE_H

#include "compiler/Utils/IRUtils.h"
#include "dialect/FAOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace mlir::fa {

/// The phase parity of a barrier's `round`-th completion (index or i32):
/// round % 2.
Value parityOf(OpBuilder &b, Location loc, Value round);

/// i32 `base` plus the K/V tiles of [begin, end) (none when end <= begin).
Value addTiles(OpBuilder &b, Location loc, Value base, Value begin,
               Value end);

/// A persistent block's share of the work items (all i32): `rounds` rounds
/// of `blocks` items each (the last one partial); in round r the block runs
/// item r x blocks + (r even ? block : mirror), mirror = blocks - 1 - block.
/// Items are about equally long (causal ones pair a tile with its mirror);
/// the snake order evens out the rest (a middle tile alone, ranks that
/// differ across a section's end): a block that had one of a round's later
/// items gets one of the next round's earlier ones.
struct WorkRounds {
  Value block, mirror, blocks, items, rounds;
};

/// The item the block runs in round `round` (i32).
Value roundItem(OpBuilder &b, Location loc, const WorkRounds &work,
                Value round);

/// The block's rounds over `items` work items (i32), from its block id and
/// the grid size.
WorkRounds planRounds(OpBuilder &b, Location loc, Value items);

/// A persistent block's work item: a (batch, head) pair and the item's
/// index in the pair, `rank`; the item covers `visits` query tiles (i32).
struct ScheduledItem {
  Value batch, head, rank, visits;
};

/// The items of one (batch, head) pair (i32): one per query tile, or with
/// the causal mask one per tile and its mirror (tiles T - 1 - k and k, and
/// the middle tile alone when T is odd), so that every item holds about the
/// same work: T + 1 tiles' rows of keys.
Value itemsPerPair(OpBuilder &b, Location loc, Value tiles, bool mirrored);

/// Work item `w` of `grid`'s tiles (see the file comment): sections of
/// `sectionPairs` (batch, head) pairs; in a section the items in rank
/// order, the pairs innermost. `w` and `sectionPairs` are i32.
ScheduledItem scheduleItem(OpBuilder &b, Location loc, GridOp grid, Value w,
                           Value sectionPairs, bool mirrored);

/// The query tile of visit `visit` of item rank k: T - 1 - k (the longest
/// first), then k (its mirror).
Value visitTile(OpBuilder &b, Location loc, GridOp grid, Value rank,
                Value visit);

/// A persistent role's loops: the block's rounds, and in each the visits of
/// its item, both carrying (the ring position of the next K/V tile, the
/// tiles visited so far). The caller fills the inner body and yields.
struct WorkLoops {
  scf::ForOp rounds, visits;
  ScheduledItem item;
  Value tile; // the visit's query tile (index)
  Value ringBase() { return visits.getRegionIterArg(0); }
  Value visited() { return visits.getRegionIterArg(1); }
};

/// Builds the loops at `b`, the insertion point left in the visit's body.
WorkLoops buildWorkLoops(OpBuilder &b, Location loc, GridOp grid,
                         const WorkRounds &work, Value sectionPairs,
                         bool mirrored);

/// The inner yield of a persistent role: the ring position after the
/// visit's K/V range, one more tile visited.
void yieldVisit(OpBuilder &b, Location loc, WorkLoops &loops, Value kvBegin,
                Value kvEnd);

} // namespace mlir::fa

#endif // FA_COMPILER_SCHEDULE_PERSISTENTSCHEDULE_H
