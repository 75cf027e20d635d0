//===- FAOps.h - Operations of the fa dialect ----------------------*- C++ -*-===//
#ifndef FA_DIALECT_FAOPS_H
#define FA_DIALECT_FAOPS_H

#include "dialect/FADialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialect/FAOps.h.inc"

#endif // FA_DIALECT_FAOPS_H
