//===- AsyncCopy.h - cp.async tile copies and K/V rings ---------*- C++ -*-===//
//
// The copy half of the tensor-core lowerings (mma, wgmma): every
// fa.load_tile becomes 16-byte cp.async copies into its shared buffer, and
// the K/V loop's loads use a ring of `stages` slots: the tiles of the first
// stages - 1 iterations are copied before the loop, and iteration j waits
// for tile j, then starts copying tile j + stages - 1 into the slot that
// iteration j - 1 used, so the copies overlap stages - 1 iterations of
// tensor-core work. A strategy says where a chunk lands (padded rows,
// swizzled blocks) and what a published tile needs besides the barrier.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_CONVERSION_COMMON_ASYNCCOPY_H
#define FA_COMPILER_CONVERSION_COMMON_ASYNCCOPY_H

#include "dialect/FAOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <functional>

namespace mlir::fa {

/// How a strategy lays out the shared tiles that its copies fill.
struct SharedTileCopyLayout {
  /// The buffer of slot `slot` of the ring (or single buffer) of `load`.
  std::function<Value(OpBuilder &, Location, LoadTileOp, Value slot)>
      slotBuffer;
  /// Indices into that buffer of the 16-byte chunk at tile (row, col).
  std::function<SmallVector<Value>(OpBuilder &, Location, Value row,
                                   Value col)>
      chunkIndices;
  /// Columns copied per row for a head dim: columns past the head dim up to
  /// this width are zero-filled.
  std::function<int64_t(int64_t headDim)> copiedColumns;
  /// Runs in each thread after it waited for its copies and before the
  /// barrier that publishes them (wgmma: the async-proxy fence).
  std::function<void(OpBuilder &, Location)> beforePublish;
  /// The placement pass that should have run, for diagnostics.
  StringRef placePass;
};

/// Replaces every fa.load_tile of `kernel` (placed with fa.shared_offset
/// and, inside the K/V loop, fa.pipeline_stages) by cp.async copies into
/// `layout`'s buffers; the tile values become the buffers (through casts).
LogicalResult lowerTileLoads(gpu::GPUFuncOp kernel,
                             const SharedTileCopyLayout &layout);

/// Rows padded by the placement (#fa.shared): a chunk lands at its own
/// (row, col) of its buffer at the load's fa.shared_offset (a ring's slots
/// one after another).
SharedTileCopyLayout
paddedRowsLayout(std::function<int64_t(int64_t headDim)> copiedColumns,
                 StringRef placePass);

/// Replaces the loads of `kernel` marked fa.copy_chunks (2-d tiles outside
/// loops, into rows of whole 16-byte chunks) by cp.async copies into
/// `layout`'s buffers. Consecutive loads whose operands are all defined
/// before the first of them copy together: one wait, one barrier.
LogicalResult lowerChunkedTileLoads(gpu::GPUFuncOp kernel,
                                    const SharedTileCopyLayout &layout);

/// The fa.shared_offset of a placed load.
int64_t sharedOffset(LoadTileOp load);

} // namespace mlir::fa

#endif // FA_COMPILER_CONVERSION_COMMON_ASYNCCOPY_H
