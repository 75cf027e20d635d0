//===- fa-opt.cpp - The fa optimizer driver ------------------------*- C++ -*-===//
//
// mlir-opt with the fa dialect, every fa pass and the named fa pipelines, for
// lit tests and for stepping through a lowering by hand.
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"
#include "lib/TextNesting.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::fa::registerCompilerPasses();
  mlir::DialectRegistry registry;
  mlir::fa::registerCompilerDialects(registry);
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "fa optimizer driver\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFile, outputFile, registry));
  // The input is read here, not by MlirOptMain, so that it is checked
  // before MLIR's parser sees it (deep nesting would overflow the stack; a
  // dense array of index elements crashes the parser).
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << "fa-opt: error: " << error << "\n";
    return 1;
  }
  error = ::fa::checkTextBeforeParsing(input->getBuffer(), inputFile);
  if (!error.empty()) {
    llvm::errs() << "fa-opt: error: " << error << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << "fa-opt: error: " << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry,
                                     config)))
    return 1;
  output->keep();
  return 0;
}
