//===- Assembler.h - Which tool turns PTX into a cubin ----------*- C++ -*-===//
//
// The runtime assembles the compiler's PTX with ptxas where a CUDA toolkit
// is installed, else with the CUDA driver's own JIT (a whole-program compile
// at module load, the same kernels as ptxas) where the driver reads the
// PTX's ISA, else with libnvJitLink where it can be loaded (PyTorch's wheels
// depend on the pip package that ships it; it compiles relocatable code, in
// which the warp-specialized kernels spill).
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
  /// The driver's version (cuDriverGetVersion) and the oldest that JITs the
  /// kernels' PTX ISA (GpuArch::minimumDriverVersion); 0: not known.
  int driverVersion = 0;
  int driverVersionNeeded = 0;
};

/// The assembler to use: `forced` ("ptxas", "nvjitlink", "driver", or
/// null/empty for the default: ptxas when found, else the driver's JIT when
/// it reads the PTX, else nvJitLink). An error names what was asked for or
/// looked for and why it is missing.
llvm::Expected<Assembler> chooseAssembler(const char *forced,
                                          const AssemblerAvailability &have);

} // namespace fa

#endif // FA_LIB_ASSEMBLER_H
