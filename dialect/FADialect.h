//===- FADialect.h - The fa dialect -------------------------------*- C++ -*-===//
#ifndef FA_DIALECT_FADIALECT_H
#define FA_DIALECT_FADIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/TensorEncoding.h"

#include "dialect/FADialect.h.inc"
#include "dialect/FAEnums.h.inc"

#include "dialect/FAAttrInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/FAAttrs.h.inc"

#endif // FA_DIALECT_FADIALECT_H
