//===- FADialect.cpp - The fa dialect -----------------------------*- C++ -*-===//
#include "dialect/FADialect.h"
#include "dialect/FAOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fa;

#include "dialect/FAAttrInterfaces.cpp.inc"
#include "dialect/FADialect.cpp.inc"
#include "dialect/FAEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/FAAttrs.cpp.inc"

void FADialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/FAOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/FAAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// BlockedEncodingAttr
//===----------------------------------------------------------------------===//

LogicalResult
BlockedEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                            int64_t threadRows, int64_t threadCols) {
  if (threadRows < 1 || threadCols < 1)
    return emitError() << "thread grid must be positive, got " << threadRows
                       << "x" << threadCols;
  // The threads of a row must be lanes of one warp for shuffle reductions.
  if (threadCols > 32 || 32 % threadCols != 0)
    return emitError() << "threads per row must divide the warp size 32, got "
                       << threadCols;
  return success();
}

bool BlockedEncodingAttr::isShared() const { return false; }

int64_t
BlockedEncodingAttr::getRegistersPerThread(ArrayRef<int64_t> shape) const {
  int64_t rows = llvm::divideCeil(shape[0], getThreadRows());
  if (shape.size() == 1)
    return rows;
  return rows * llvm::divideCeil(shape[1], getThreadCols());
}

int64_t BlockedEncodingAttr::getSharedElements(ArrayRef<int64_t>) const {
  return 0;
}

//===----------------------------------------------------------------------===//
// SharedEncodingAttr
//===----------------------------------------------------------------------===//

LogicalResult
SharedEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           int64_t pad) {
  if (pad < 0)
    return emitError() << "row padding must be non-negative, got " << pad;
  return success();
}

bool SharedEncodingAttr::isShared() const { return true; }

int64_t SharedEncodingAttr::getRegistersPerThread(ArrayRef<int64_t>) const {
  return 0;
}

int64_t
SharedEncodingAttr::getSharedElements(ArrayRef<int64_t> shape) const {
  if (shape.size() == 1)
    return shape[0];
  return shape[0] * (shape[1] + getPad());
}

//===----------------------------------------------------------------------===//
// MmaEncodingAttr, MmaOperandEncodingAttr
//===----------------------------------------------------------------------===//

static LogicalResult verifyWarps(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t warps) {
  if (warps < 1 || warps > 32)
    return emitError() << "warps must be in [1, 32], got " << warps;
  return success();
}

/// m16 row blocks of one warp, for a tile of `rows` rows over `warps`.
static int64_t rowBlocksPerWarp(int64_t rows, int64_t warps) {
  return llvm::divideCeil(llvm::divideCeil(rows, warps), 16);
}

LogicalResult
MmaEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        int64_t warps) {
  return verifyWarps(emitError, warps);
}

bool MmaEncodingAttr::isShared() const { return false; }

int64_t MmaEncodingAttr::getRegistersPerThread(ArrayRef<int64_t> shape) const {
  int64_t rowBlocks = rowBlocksPerWarp(shape[0], getWarps());
  if (shape.size() == 1)
    return rowBlocks * 2;
  return rowBlocks * llvm::divideCeil(shape[1], 8) * 4;
}

int64_t MmaEncodingAttr::getSharedElements(ArrayRef<int64_t>) const {
  return 0;
}

LogicalResult
MmaOperandEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t warps) {
  return verifyWarps(emitError, warps);
}

bool MmaOperandEncodingAttr::isShared() const { return false; }

int64_t
MmaOperandEncodingAttr::getRegistersPerThread(ArrayRef<int64_t> shape) const {
  int64_t rowBlocks = rowBlocksPerWarp(shape[0], getWarps());
  int64_t cols = shape.size() == 2 ? shape[1] : 1;
  return rowBlocks * llvm::divideCeil(cols, 16) * 8;
}

int64_t MmaOperandEncodingAttr::getSharedElements(ArrayRef<int64_t>) const {
  return 0;
}

//===----------------------------------------------------------------------===//
// LaunchAttr and the placement attributes on ops
//===----------------------------------------------------------------------===//

LogicalResult LaunchAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StrategyKind strategy, int64_t threads,
                                 int64_t sharedBytes, int64_t stages,
                                 int64_t registers) {
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    return emitError() << "threads must be a whole number of warps in [32, "
                          "1024], got "
                       << threads;
  if (sharedBytes < 0)
    return emitError() << "shared_bytes must be non-negative, got "
                       << sharedBytes;
  if (stages < 1)
    return emitError() << "stages must be at least 1, got " << stages;
  if (registers < 0)
    return emitError() << "registers must be non-negative, got " << registers;
  return success();
}

LogicalResult FADialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  if (name == getLaunchAttrName()) {
    if (!isa<LaunchAttr>(value))
      return op->emitOpError() << "'" << name << "' must be a #fa.launch, got "
                               << value;
    return success();
  }
  if (name == getSharedOffsetAttrName() || name == getPipelineStagesAttrName()) {
    if (!isa<LoadTileOp, ConvertLayoutOp>(op))
      return op->emitOpError() << "'" << name
                               << "' belongs on fa.load_tile or "
                                  "fa.convert_layout";
    auto integer = dyn_cast<IntegerAttr>(value);
    int64_t lowest = name == getSharedOffsetAttrName() ? 0 : 1;
    if (!integer || integer.getInt() < lowest)
      return op->emitOpError() << "'" << name << "' must be an integer >= "
                               << lowest << ", got " << value;
    return success();
  }
  return op->emitOpError() << "unknown fa attribute '" << name << "'";
}
