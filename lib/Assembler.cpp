//===- Assembler.cpp - Which tool turns PTX into a cubin --------*- C++ -*-===//
#include "lib/Assembler.h"

namespace fa {

const char *toString(Assembler assembler) {
  switch (assembler) {
  case Assembler::ptxas:
    return "ptxas";
  case Assembler::driver:
    return "driver";
  }
  return "?";
}

llvm::Expected<Assembler> chooseAssembler(const char *forced,
                                          const AssemblerAvailability &have) {
  std::string request = forced ? forced : "";
  if (request == "ptxas") {
    if (have.ptxas)
      return Assembler::ptxas;
    return llvm::createStringError("FA_ASSEMBLER=ptxas, but " +
                                   have.ptxasWhyNot);
  }
  if (request == "driver") {
    if (have.driver)
      return Assembler::driver;
    return llvm::createStringError(
        "FA_ASSEMBLER=driver, but the CUDA driver is not usable: " +
        have.driverWhyNot);
  }
  if (!request.empty())
    return llvm::createStringError("FA_ASSEMBLER must be ptxas or driver, "
                                   "got '" +
                                   request + "'");
  if (have.ptxas)
    return Assembler::ptxas;
  if (have.driver)
    return Assembler::driver;
  return llvm::createStringError(
      "no PTX assembler: " + have.ptxasWhyNot +
      "; and the CUDA driver's JIT is not usable: " + have.driverWhyNot);
}

} // namespace fa
