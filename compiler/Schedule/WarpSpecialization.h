//===- WarpSpecialization.h - fa-warp-specialize's shared state -*- C++ -*-===//
//
// Internal to fa-warp-specialize (WarpSpecialize.cpp: the pass, which
// finds the copied tensors and lays out the barriers;
// WarpSpecializeProducer.cpp: the producer builder;
// WarpSpecializeConsumers.cpp: the consumers' rewrite): the barrier ring,
// the tensors the producer copies and the state both roles' builders
// share. WarpSpecialize.cpp's header describes the schedule.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_SCHEDULE_WARPSPECIALIZATION_H
#define FA_COMPILER_SCHEDULE_WARPSPECIALIZATION_H

#include "compiler/Schedule/PersistentSchedule.h"
#include "compiler/Tiling/Variants.h"
#include "compiler/Utils/IRUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::fa::warp_specialization {

/// The block table read that gives a paged K/V tile load its batch entry
/// (the page: `minui(index_castui(table[b, column]), last page)`, see
/// buildPagedTile), or null for a load of a batch entry's own rows (or of
/// the entry cache_batch_idx[b] names, a rank-1 table).
memref::LoadOp pageTableLoad(LoadTileOp load);

/// The first key of a K/V tile load: its row, or for a paged tile (whose
/// row is `start % P`, its row in the page) `start`; null for a paged load
/// of another form.
Value tileStartOf(LoadTileOp load);

/// Polls of one mbarrier try_wait before it suspends the thread again.
constexpr int64_t kWaitTicks = 10000000;

/// The producer's first warp that copies a dkdv program's staged row values
/// (LSE, D: fa-place-wgmma's staged-row-values), warp kRowValueWarp + i
/// row value i: warps the elected thread (warp 0) and the writer (warp 1)
/// leave idle. Each lane copies rows lane, lane + 32, ... with cp.async and
/// arrives on Q's full barrier once they land
/// (cp.async.mbarrier.arrive.noinc).
constexpr int64_t kRowValueWarp = 2;
constexpr int64_t kRowValueLanes = 32;

/// The block's mbarriers, in this order in shared memory: the full barrier
/// of each resident tensor (forward: q_full; dkdv: k_full, v_full), the
/// full barriers of the two streamed tensors' rings (forward: k_full[stages],
/// v_full[stages]; dkdv: q_full[stages], do_full[stages]), their empty
/// barriers (k_empty, v_empty; q_empty, do_empty) and, persistent, the
/// resident Q's q_empty. A ring's barrier of slot s is its slot-0 index + s.
/// Each streamed tensor has its own empty barriers: a K slot is free as
/// soon as Q K^T has read it, a V slot only after P V. With 8-bit V the
/// producer transposes each V tile into a ring of `transposedSlots`, whose
/// full and empty barriers come last (v_t_full[slots], v_t_empty[slots]).
/// With staged row values, the first streamed tensor's (Q's) full barriers
/// also take the arrivals of the `rowValueLanes` that copy them (a warp's
/// for each).
struct BarrierLayout {
  int64_t resident;
  int64_t stages;
  bool persistent;
  int64_t transposedSlots = 0;
  int64_t rowValueLanes = 0;

  int64_t residentFull(int64_t i) const { return i; }
  int64_t streamedFull(int64_t j) const { return resident + j * stages; }
  int64_t streamedEmpty(int64_t j) const { return resident + (2 + j) * stages; }
  /// -1 without one (Q is loaded once per block).
  int64_t residentEmpty() const {
    return persistent ? resident + 4 * stages : -1;
  }
  int64_t transposedFull(int64_t slot) const {
    return resident + 4 * stages + (persistent ? 1 : 0) + slot;
  }
  int64_t transposedEmpty(int64_t slot) const {
    return transposedFull(transposedSlots) + slot;
  }
  int64_t count() const { return transposedFull(2 * transposedSlots); }
  /// The arrivals that complete a phase of `barrier`: a copy's full barrier,
  /// the producer's one arrival (expect_tx) and the copies' bytes; an empty
  /// barrier, every consumer thread. With the transposed ring, V's empty
  /// barriers and the ring's full ones take the producer warpgroup's
  /// threads (each releases V and publishes its share of the copy).
  int64_t arrivals(int64_t barrier, int64_t computeThreads) const {
    bool producerThreads =
        transposedSlots > 0 &&
        ((barrier >= streamedEmpty(1) && barrier < streamedEmpty(2)) ||
         (barrier >= transposedFull(0) && barrier < transposedEmpty(0)));
    if (producerThreads)
      return kWarpgroupThreads;
    if (barrier >= streamedFull(0) && barrier < streamedFull(1))
      return 1 + rowValueLanes;
    return barrier >= streamedEmpty(0) ? computeThreads : 1;
  }
};

/// One tensor the producer copies: its loads in the program (a resident
/// tensor: one; forward K, V: one per tile the program reads, inside the
/// K/V loop or, after fa-wgmma-pipeline, also before or after it; dkdv Q,
/// dO: one in the loop nest), its barriers and its placement in shared
/// memory.
struct LoadedTensor {
  SmallVector<LoadTileOp> loads;
  const char *name;         // "q", "k", "v", "do" (the runtime's operand names)
  int64_t fullBarrier = -1; // the full barrier of slot 0
  int64_t emptyBarrier = -1; // the empty barrier of slot 0 (-1: none)
  Value map;                 // its tensor map parameter
  RankedTensorType type;
  int64_t offset = 0, slotBytes = 0;
  int64_t slots = 1; // the ring's (a resident tensor: 1)
};

/// What the producer's and the consumers' builders of one program share:
/// the tensors and their rings, the barriers, the aligned shared base and
/// the persistent schedule.
struct Specialization {
  MLIRContext *ctx;
  Location loc;
  GridOp grid;
  /// The forward's K/V loop range; null in a dkdv program, whose streamed
  /// tiles follow `streamLoops` (outermost first).
  KVTileRangeOp range;
  SmallVector<scf::ForOp> streamLoops;
  /// dkdv consumers: the count of the loop nest's iterations before the
  /// current one, carried by the loops (countIterations).
  Value streamPosition;
  int64_t stages, computeThreads;
  bool isPersistent, mirrored;
  /// The program takes deterministic turns (fa.wait_turn), which
  /// fa-tma-reduce gives to a writer warp of the producer warpgroup: the
  /// producer keeps more registers (WgmmaModel's producerRegisters).
  bool writerWarp;
  /// Loaded once (forward: Q; dkdv: K, V), streamed through the rings
  /// (forward: K, V; dkdv: Q, dO), and all of them, resident first.
  SmallVector<LoadedTensor *> resident, streamed, tensors;
  /// 8-bit V (forward): the ring of V tiles transposed by the producer's
  /// threads (fa.copy_tile), which the consumers read instead of V's ring
  /// (no loads, no tensor map); null otherwise.
  LoadedTensor *transposedValue;
  Value tid, computeThreadsV, pad, barriers;
  WorkRounds work;
  Value sectionPairs;
  Region &programRegion;
  /// dkdv with staged row values: the LSE and D rings, filled with Q's slot
  /// and completing on Q's full barrier (no tensor map, no barriers of
  /// their own: Q's release frees them too); empty otherwise.
  SmallVector<LoadedTensor *> rowValues = {};
  /// The forward's hole in its K/V range (fa.kv_tile_hole: sink tokens and
  /// a window), whose tiles the K/V loop skips; null if none. The rings
  /// then count visits, not tiles.
  KVTileHoleOp hole = nullptr;

  /// One past the last visit of the forward's K/V loop: `end` less the
  /// hole's tiles (`holeBegin`, `holeEnd`: the hole's results where the
  /// caller builds; `end` itself without a hole).
  Value visitsEnd(OpBuilder &at, Value end, Value holeBegin,
                  Value holeEnd) const {
    return hole ? kvVisitsEnd(at, loc, end, holeBegin, holeEnd) : end;
  }

  /// The first byte of `slot` of `tensor`'s ring.
  Value slotBase(OpBuilder &at, const LoadedTensor &tensor, Value slot) const {
    return arith::AddIOp::create(
               at, loc, pad,
               arith::AddIOp::create(
                   at, loc, indexConst(at, loc, tensor.offset),
                   arith::MulIOp::create(
                       at, loc, slot, indexConst(at, loc, tensor.slotBytes))))
        .getResult();
  }
  /// The position n of a streamed `load` in its ring's fills: forward, its
  /// K/V tile (first key / block-n; tileStartOf) - kv_begin, plus the
  /// visit's `ringBase` (persistent); dkdv, the iterations of `streamLoops`
  /// before this one (`streamPosition`, counted in the loops).
  Value ringPosition(OpBuilder &at, LoadTileOp load, int64_t blockRows,
                     Value ringBase) {
    if (!range)
      return streamPosition;
    Value tile = arith::DivUIOp::create(at, loc, tileStartOf(load),
                                        indexConst(at, loc, blockRows));
    // Past a hole, the tiles it skipped are not in the ring (the loads of
    // the pipelined loop's peeled first and last tiles are outside the
    // loop: the visit comes from the tile).
    if (hole)
      tile =
          kvVisitOfTile(at, loc, tile, hole.getHoleBegin(), hole.getHoleEnd());
    Value n = arith::SubIOp::create(at, loc, tile, range.getResult(0));
    if (ringBase)
      n = arith::AddIOp::create(at, loc, toIndex(at, loc, ringBase), n);
    return n;
  }
  /// The slot of the n-th tile of a ring of `slots` and the parity of its
  /// fill (n / slots).
  std::pair<Value, Value> slotAndParity(OpBuilder &at, Value n,
                                        int64_t slots) const {
    Value slotsV = indexConst(at, loc, slots);
    Value parity =
        parityOf(at, loc, arith::DivUIOp::create(at, loc, n, slotsV));
    return {arith::RemUIOp::create(at, loc, n, slotsV), parity};
  }

  /// The producer warpgroup (`producer`): gives registers back; one thread
  /// issues every copy, the resident tensors first, then the streamed ones
  /// of each tile in order (forward: K and V of the K/V range; dkdv: Q and
  /// dO of the loop nest), each after the consumers released its slot.
  /// With `transposedValue`, all its threads then transpose each V tile
  /// into that ring, one tile behind the copies; with `rowValues`, a warp
  /// for each walks the tiles too and copies it (copyRowValues).
  LogicalResult buildProducer(Block &producer);
  /// The rows of `lane` (of kRowValueLanes) of row value `ring` at the tile
  /// a producer's loop nest is at (`mapping`) into `slot` (cp.async, zeros
  /// past the rows' end), then its arrival on Q's full barrier of `slot`
  /// once they have landed.
  LogicalResult copyRowValues(OpBuilder &at, IRMapping &mapping,
                              const LoadedTensor &ring, Value lane, Value slot);
  /// The producer's threads: wait for V tile `n` and a free slot of
  /// `transposedValue`'s ring, transpose it there (fa.copy_tile), publish
  /// the copy and release V's slot.
  void transposeValueTile(OpBuilder &at, Value n);
  /// dkdv consumers: threads an iteration counter through `streamLoops`
  /// (each directly in the body of the one before) and sets
  /// `streamPosition` to its value in the innermost body.
  LogicalResult countIterations();
  /// The consumers (`consumer`, holding the program): take the registers;
  /// each load becomes a wait on its full barrier and a view of its slot,
  /// and (K, V; Q persistent) a release right after its last use.
  LogicalResult rewriteConsumers(Block &consumer, WorkLoops &consumerWork);
};

} // namespace mlir::fa::warp_specialization

#endif // FA_COMPILER_SCHEDULE_WARPSPECIALIZATION_H
