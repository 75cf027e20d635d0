//===- Assembler.h - Which tool turns PTX into a cubin ----------*- C++ -*-===//
//
// The runtime assembles the compiler's PTX with ptxas where a CUDA toolkit
// is installed, else with libnvJitLink where it can be loaded (PyTorch's
// wheels depend on the pip package that ships it), else with the CUDA
// driver's own JIT (a whole-program compile at module load), which every
// machine that runs kernels has.
// FA_ASSEMBLER=ptxas|nvjitlink|driver forces one.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_ASSEMBLER_H
#define FA_LIB_ASSEMBLER_H

#include "llvm/Support/Error.h"

#include <string>

namespace fa {

enum class Assembler { ptxas, nvjitlink, driver };

const char *toString(Assembler assembler);

/// What the machine offers: whether ptxas was found (else why not) and
/// whether the CUDA driver is usable (else why not).
struct AssemblerAvailability {
  bool ptxas = false;
  std::string ptxasWhyNot;
  bool nvjitlink = false;
  std::string nvjitlinkWhyNot;
  bool driver = false;
  std::string driverWhyNot;
};

/// The assembler to use: `forced` ("ptxas", "nvjitlink", "driver", or
/// null/empty for the default: ptxas when found, else nvJitLink, else the
/// driver's JIT). An error names what was asked for or looked for and why
/// it is missing.
llvm::Expected<Assembler> chooseAssembler(const char *forced,
                                          const AssemblerAvailability &have);

} // namespace fa

#endif // FA_LIB_ASSEMBLER_H
