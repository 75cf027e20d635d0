//===- IRUtils.h - Small IR builders every stage uses -----------*- C++ -*-===//
//
// Constants, index arithmetic, the shared-memory views of placed tiles and
// slice cloning: what the tiling, placement, schedule and conversion passes
// all build, kept where each of them may include it (a schedule pass must
// not depend on the next stage's lowering helpers).
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_UTILS_IRUTILS_H
#define FA_COMPILER_UTILS_IRUTILS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir {
class IRMapping;
class Region;
} // namespace mlir

namespace mlir::fa {

Value indexConst(OpBuilder &b, Location loc, int64_t value);
/// v + c (v itself for c = 0) and v * c on indices.
Value addConst(OpBuilder &b, Location loc, Value v, int64_t c);
Value mulConst(OpBuilder &b, Location loc, Value v, int64_t c);
Value f32Const(OpBuilder &b, Location loc, double value);

/// The workgroup (shared-memory) address space.
Attribute workgroupSpace(MLIRContext *ctx);

/// The buffer of a shared tile: [R, C + pad] (or [R]) for #fa.shared,
/// [C / 64, R, 64] (column block, row, element) for #fa.swizzled_shared.
MemRefType sharedBufferType(RankedTensorType type);

/// Whether `program` (an fa.grid, or the kernel outlined from one) is a
/// forward: it carries the online-softmax state. The backward's programs
/// (delta, dkdv, dq) do not.
bool isForwardProgram(Operation *program);

/// A view of `type` into the block's dynamic shared memory at byte
/// `offset`.
Value sharedBufferAt(OpBuilder &b, Location loc, Value offset, MemRefType type);

/// Clones into `b` the ops inside `region` that compute `value` (its
/// backward slice), through `mapping`: mapped values and values defined
/// outside `region` are used as they are, and every clone is recorded in
/// `mapping` (so a slice is cloned once per mapping). Fails, with a
/// diagnostic, on an op with regions that are not isolated from above.
FailureOr<Value> cloneSliceInto(OpBuilder &b, Region &region, Value value,
                                IRMapping &mapping);

} // namespace mlir::fa

#endif // FA_COMPILER_UTILS_IRUTILS_H
