//===- TileArithmetic.h - Index arithmetic shared by lowerings ------*- C++ -*-===//
//
// The mask predicate and the K/V and query tile ranges are the same integer
// arithmetic whether a tile is lowered for the CPU or for the GPU: one
// definition here, with the small helpers the tiling passes share.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_TILING_TILEARITHMETIC_H
#define FA_COMPILER_TILING_TILEARITHMETIC_H

#include "dialect/FAOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>
#include <vector>

namespace mlir::fa {

/// i1: the score of query row `row` and key column `col` is masked out
/// (padding past `kvLen`, or, for the causal mask, col > row + kvLen - qLen).
Value buildIsMasked(OpBuilder &b, Location loc, MaskKind mask, Value row,
                    Value col, Value qLen, Value kvLen);

/// Loads source[batch, head, row, trailing...] as zero when `row` is at or
/// past `rowLimit` (the padding of a tail tile). The index is clamped to
/// the limit's last row, so the load never leaves the buffer; where the
/// limit may be 0 (`limitMayBeZero`: a varlen sequence's or a KV cache
/// entry's end, which an empty sequence puts at row 0) to row 0 then,
/// which the tensor of any launched program has. With a page table `pages` (a
/// paged fa.load_tile) the row is looked up in batch entry `batch`'s pages
/// (buildSourceRowAddress).
Value buildZeroPaddedLoad(OpBuilder &b, Location loc, Value source, Value pages,
                          Value batch, Value head, Value row, Value rowLimit,
                          ValueRange trailing, bool limitMayBeZero);

/// The rows [start, end) of sequence `index` of a packed varlen batch:
/// offsets[index] and offsets[index + 1] (i32) clamped into [0, rows], end
/// at least start, so that no offsets make a program read or write outside
/// the tensors or another sequence's rows.
std::pair<Value, Value> buildSequenceRows(OpBuilder &b, Location loc,
                                          Value offsets, Value index,
                                          Value rows);

/// The length of sequence `index` whose keys live in a paged cache:
/// offsets[index + 1] - offsets[index] (i32, at least 0), at most `limit`
/// (its table's rows). The offsets count the sequences' keys but address
/// no packed rows.
Value buildSequenceLength(OpBuilder &b, Location loc, Value offsets,
                          Value index, Value limit);

/// Rounds an f32 tile to `elementType` (f16/bf16 inputs), or returns it as
/// is: P before P V, as tensor-core kernels do, and outputs before a store.
Value castTile(OpBuilder &b, Location loc, Value tile, Type elementType);

/// Largest tile edge the tiling passes accept. Tiles are meant to live on
/// chip; a larger edge is almost certainly a typo and would only make the
/// IR huge.
constexpr int64_t kMaxBlockSize = 1024;

/// Fails, with an error on `op` naming the option, value and limit, unless
/// both block sizes are in [1, kMaxBlockSize].
LogicalResult checkBlockSizes(Operation *op, int64_t blockM, int64_t blockN);

/// Adds the lowering of fa.kv_tile_range to index arithmetic (see the op's
/// description); the same for every target.
void populateKVTileRangeLowering(RewritePatternSet &patterns);

/// Adds the lowerings of the tile range ops (fa.kv_tile_range, its
/// backward mirror fa.q_tile_range, and fa.whole_range) to index
/// arithmetic; the same for every target.
void populateTileRangeLowering(RewritePatternSet &patterns);

/// The K/V tiles each query tile visits (end - begin of fa.kv_tile_range
/// with `mask` and mask_mod `maskMod`, which may be empty) for a problem
/// of `qLen` x `kvLen` on `blockM` x `blockN` tiles, in program (`batch`,
/// `head`): the kernels' own range ops, built with constants and folded.
/// A mask_mod that reads a captured tensor narrows nothing, as in the
/// kernels; `skipsHole`: less the tiles of fa.kv_tile_hole, as the K/V loops
/// that skip it (not split-KV's parts or a block mask's). nullopt when the
/// arithmetic does not fold to constants.
std::optional<std::vector<int64_t>>
foldVisitedKVTiles(MLIRContext *ctx, MaskKind mask, Region &maskMod,
                   int64_t qLen, int64_t kvLen, int64_t blockM, int64_t blockN,
                   int64_t batch = 0, int64_t head = 0, bool skipsHole = true);

/// One element of the backward's dS = scale * P * (dP - D).
Value scoreGradient(OpBuilder &b, Location loc, Value prob, Value gradProb,
                    Value delta, Value scale);

} // namespace mlir::fa

#endif // FA_COMPILER_TILING_TILEARITHMETIC_H
