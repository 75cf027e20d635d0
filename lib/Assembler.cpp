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

/// "12.1" for the driver version 12010.
static std::string cudaVersionText(int version) {
  return std::to_string(version / 1000) + "." +
         std::to_string(version % 1000 / 10);
}

/// Why the driver cannot JIT the kernels' PTX (its version is older than
/// their ISA's), or empty.
static std::string driverTooOldForPtx(const AssemblerAvailability &have) {
  if (!have.driverVersion || !have.driverVersionNeeded ||
      have.driverVersion >= have.driverVersionNeeded)
    return "";
  return "the CUDA driver's version " + cudaVersionText(have.driverVersion) +
         " is older than the " + cudaVersionText(have.driverVersionNeeded) +
         " whose JIT reads the kernels' PTX ISA";
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
  std::string driverTooOld = driverTooOldForPtx(have);
  if (request == "driver") {
    if (!have.driver)
      return llvm::createStringError(
          "FA_ASSEMBLER=driver, but the CUDA driver is not usable: " +
          have.driverWhyNot);
    if (!driverTooOld.empty())
      return llvm::createStringError("FA_ASSEMBLER=driver, but " +
                                     driverTooOld);
    return Assembler::driver;
  }
  if (!request.empty())
    return llvm::createStringError("FA_ASSEMBLER must be ptxas, nvjitlink or "
                                   "driver, got '" +
                                   request + "'");
  if (have.ptxas)
    return Assembler::ptxas;
  // The driver's JIT before libnvJitLink: both compile the same PTX, but
  // libnvJitLink compiles it as relocatable code, where the warp-specialized
  // kernels' per-warpgroup register budgets go unused and they spill.
  if (have.driver && driverTooOld.empty())
    return Assembler::driver;
  if (have.nvjitlink)
    return Assembler::nvjitlink;
  return llvm::createStringError(
      "no PTX assembler: " + have.ptxasWhyNot + "; " + have.nvjitlinkWhyNot +
      "; and the CUDA driver's JIT " +
      (have.driver ? "cannot read the kernels' PTX: " + driverTooOld
                   : "is not usable: " + have.driverWhyNot));
}

} // namespace fa
