//===- fa-opt.cpp - The fa optimizer driver ------------------------*- C++ -*-===//
//
// mlir-opt with the fa dialect, every fa pass and the named fa pipelines, for
// lit tests and for stepping through a lowering by hand.
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::fa::registerCompilerPasses();
  mlir::DialectRegistry registry;
  mlir::fa::registerCompilerDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "fa optimizer driver\n", registry));
}
