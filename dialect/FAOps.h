//===- FAOps.h - Operations of the fa dialect ----------------------*- C++ -*-===//
#ifndef FA_DIALECT_FAOPS_H
#define FA_DIALECT_FAOPS_H

#include "dialect/FADialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialect/FAOps.h.inc"

namespace mlir::fa {

/// The two kinds of variant region (see fa.attention): a score_mod
/// (score, b, h, q_idx, kv_idx, q_len, kv_len) -> f32 and a mask_mod
/// (b, h, q_idx, kv_idx, q_len, kv_len) -> i1.
enum class VariantRegion { scoreMod, maskMod };

/// The block arguments' positions of a variant region, past the score of a
/// score_mod.
enum VariantIndexArg : unsigned {
  kBatchArg = 0,
  kHeadArg,
  kQueryIndexArg,
  kKeyIndexArg,
  kQueryLenArg,
  kKeyLenArg,
  kNumVariantIndexArgs
};

/// The row at which the sequence of a tile load or store ends: its
/// sequence's end (a packed varlen batch), else the rows of `memref`
/// (dimension 2).
Value buildRowLimit(OpBuilder &b, Location loc, Value memref, Value end);

/// A tile load's or store's `row` as a row of its memref: `first + row`
/// with a sequence (a packed varlen batch), else `row`.
Value buildSourceRow(OpBuilder &b, Location loc, Value first, Value row);

/// The (batch entry, row) of `source` that holds row `index` (a source row,
/// as buildSourceRow gives) of a tile load: (batch, index), or, for a
/// paged load (its `pages` table non-null), row index % P of page
/// pages[batch, index / P] (P = the source's dimension 2), the page index
/// clamped into the table's row and the page number into the pool: any
/// index addresses the buffers.
std::pair<Value, Value> buildSourceRowAddress(OpBuilder &b, Location loc,
                                              Value source, Value pages,
                                              Value batch, Value index);

/// The batch entry of `source` that holds page `page` of a paged load's
/// sequence: pages[batch, page], the page index clamped into the table's
/// row and the number into the source's batch (buildSourceRowAddress's
/// lookup, for a lowering that splits rows into pages itself).
Value buildPageEntry(OpBuilder &b, Location loc, Value source, Value pages,
                     Value batch, Value page);

} // namespace mlir::fa

#endif // FA_DIALECT_FAOPS_H
