//===- RegisterLayout.h - Where a register tile's elements live -*- C++ -*-===//
//
// The answer a register encoding gives to TileEncodingInterface::
// getRegisterLayout: which tile element each register slot of each thread
// holds, which slots hold the same row, and which lanes share a row. The
// lowerings of the element-wise tile ops (mask, online softmax, rescale,
// finalize, the backward's probabilities and score gradients) are written
// once against it, for every register encoding.
//
//===----------------------------------------------------------------------===//
#ifndef FA_DIALECT_REGISTERLAYOUT_H
#define FA_DIALECT_REGISTERLAYOUT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <utility>

namespace mlir::fa {

/// One term of a thread's first row or column, a function of its thread id
/// in the block: ((threadId % modulus) / divisor) * multiplier, with
/// modulus 0 meaning no modulus.
struct ThreadIdTerm {
  int64_t modulus = 0;
  int64_t divisor = 1;
  int64_t multiplier = 1;

  int64_t evaluate(int64_t threadId) const {
    int64_t v = modulus ? threadId % modulus : threadId;
    return v / divisor * multiplier;
  }
  bool operator==(const ThreadIdTerm &other) const {
    return modulus == other.modulus && divisor == other.divisor &&
           multiplier == other.multiplier;
  }
};

/// The elements of a register tile that one thread holds, as data. Thread
/// `t` holds `numSlots()` elements; register slot `s` holds the element at
///
///   row    = sum(rowBase terms at t) + rowOffset[s]
///   column = sum(colBase terms at t) + colOffset[s]     (2-d tiles)
///
/// The per-row values of the same rows (a 1-d tile of the same encoding:
/// running max and sum, LSE, D) sit in `rowSlotOffset.size()` row slots;
/// slot `s` of a 2-d tile belongs to row slot `rowSlotOf[s]`, whose row is
/// sum(rowBase terms) + rowSlotOffset[rowSlotOf[s]]. For a 1-d tile the
/// slots are the row slots, and the column terms place the thread among
/// the threads that hold copies of the same rows (its column in the 2-d
/// tile of the same encoding): the thread whose column terms sum to 0
/// holds the first copy.
struct RegisterLayout {
  llvm::SmallVector<ThreadIdTerm, 2> rowBase, colBase;
  llvm::SmallVector<int64_t> rowOffset, colOffset;
  llvm::SmallVector<int64_t> rowSlotOf;
  llvm::SmallVector<int64_t> rowSlotOffset;
  /// The lanes that hold parts of one row, as the XOR lane masks of a
  /// butterfly all-reduce in the order the reduction applies them (empty:
  /// each thread holds whole rows). Meaningful only if `rowsInOneWarp`.
  llvm::SmallVector<int64_t> rowReduceMasks;
  /// Whether all threads of a row are lanes of one warp (a row reduction is
  /// a sequence of shuffles); false when a row spans warps.
  bool rowsInOneWarp = true;
  /// Consecutive slots that hold adjacent columns of one row, starting at
  /// every multiple of it (the widest vector access of a thread).
  int64_t vectorWidth = 1;

  int64_t numSlots() const { return int64_t(rowOffset.size()); }
  int64_t numRowSlots() const { return int64_t(rowSlotOffset.size()); }
  bool is2d() const { return !colOffset.empty(); }

  /// The slots of row slot `rowSlot`, in register order.
  llvm::SmallVector<int64_t> slotsOfRow(int64_t rowSlot) const {
    llvm::SmallVector<int64_t> slots;
    for (int64_t s = 0; s < numSlots(); ++s)
      if (rowSlotOf[s] == rowSlot)
        slots.push_back(s);
    return slots;
  }

  static int64_t evaluate(llvm::ArrayRef<ThreadIdTerm> terms,
                          int64_t threadId) {
    int64_t sum = 0;
    for (const ThreadIdTerm &term : terms)
      sum += term.evaluate(threadId);
    return sum;
  }
  /// The tile element (row, column) of slot `slot` of thread `threadId`
  /// (column 0 for 1-d tiles).
  std::pair<int64_t, int64_t> elementOf(int64_t threadId, int64_t slot) const {
    int64_t row = evaluate(rowBase, threadId) + rowOffset[slot];
    int64_t col = is2d() ? evaluate(colBase, threadId) + colOffset[slot] : 0;
    return {row, col};
  }
};

} // namespace mlir::fa

#endif // FA_DIALECT_REGISTERLAYOUT_H
