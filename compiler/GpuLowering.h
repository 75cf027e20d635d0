//===- GpuLowering.h - Helpers every GPU strategy lowering uses ----*- C++ -*-===//
//
// Strategy-neutral pieces of lowering a placed program to a gpu.func: the
// register-tile <-> element list conversion, shared-tile views of the
// dynamic shared memory, and constants.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_GPULOWERING_H
#define FA_COMPILER_GPULOWERING_H

#include "dialect/FAOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
class TypeConverter;
} // namespace mlir

namespace mlir::fa {

/// The workgroup (shared-memory) address space.
Attribute workgroupSpace(MLIRContext *ctx);

/// The padded buffer of a shared tile: [R, C + pad] (or [R]).
MemRefType sharedBufferType(RankedTensorType type);

/// A view of `type` into the block's dynamic shared memory at byte
/// `offset`.
Value sharedBufferAt(OpBuilder &b, Location loc, Value offset, MemRefType type);

/// The elements of a register tile (a vector), in register order.
SmallVector<Value> unpack(OpBuilder &b, Location loc, Value vector);
/// A register tile of `type` (a vector) from its elements.
Value pack(OpBuilder &b, Location loc, Type type, ValueRange elements);

/// Lowerings of register tiles that hold for any strategy whose register
/// tiles become vectors of the thread's elements: splat tile constants (the
/// initial softmax state) and precision casts (P and O rounded to the input
/// type), element by element.
void populateRegisterTilePatterns(const TypeConverter &typeConverter,
                                  RewritePatternSet &patterns);

Value f32Const(OpBuilder &b, Location loc, double value);
Value indexConst(OpBuilder &b, Location loc, int64_t value);

} // namespace mlir::fa

#endif // FA_COMPILER_GPULOWERING_H
