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
