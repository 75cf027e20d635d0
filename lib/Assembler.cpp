//===- Assembler.cpp - Which tool turns PTX into a cubin --------*- C++ -*-===//
#include "lib/Assembler.h"

namespace fa {

const char *toString(Assembler assembler) {
  switch (assembler) {
  case Assembler::ptxas:
    return "ptxas";
  case Assembler::nvjitlink:
    return "nvjitlink";
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
  if (request == "nvjitlink") {
    if (have.nvjitlink)
      return Assembler::nvjitlink;
    return llvm::createStringError("FA_ASSEMBLER=nvjitlink, but " +
                                   have.nvjitlinkWhyNot);
  }
  if (request == "driver") {
    if (have.driver)
      return Assembler::driver;
    return llvm::createStringError(
        "FA_ASSEMBLER=driver, but the CUDA driver is not usable: " +
        have.driverWhyNot);
  }
  if (!request.empty())
    return llvm::createStringError("FA_ASSEMBLER must be ptxas, nvjitlink or "
                                   "driver, got '" +
                                   request + "'");
  if (have.ptxas)
    return Assembler::ptxas;
  if (have.nvjitlink)
    return Assembler::nvjitlink;
  if (have.driver)
    return Assembler::driver;
  return llvm::createStringError(
      "no PTX assembler: " + have.ptxasWhyNot + "; " + have.nvjitlinkWhyNot +
      "; and the CUDA driver's JIT is not usable: " + have.driverWhyNot);
}

} // namespace fa
