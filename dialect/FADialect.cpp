//===- FADialect.cpp - The fa dialect -----------------------------*- C++ -*-===//
#include "dialect/FADialect.h"
#include "dialect/FAOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fa;

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
