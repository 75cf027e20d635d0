//===- KernelResources.h - What a compiled kernel uses -------------*- C++ -*-===//
#ifndef FA_LIB_KERNELRESOURCES_H
#define FA_LIB_KERNELRESOURCES_H

#include <cstdint>
#include <string>

namespace fa {

/// Resources of one kernel as `ptxas -v` reports them.
struct KernelResources {
  std::string name;
  int64_t registers = 0;
  int64_t staticSharedBytes = 0;
  int64_t stackFrameBytes = 0;
  int64_t spillStoreBytes = 0;
  int64_t spillLoadBytes = 0;
  int64_t barriers = 0;

  bool spills() const { return spillStoreBytes > 0 || spillLoadBytes > 0; }
  /// Bytes spilled, stored plus loaded (what the defaults' rule ranks).
  int64_t spilledBytes() const { return spillStoreBytes + spillLoadBytes; }
};

/// Where a compile's wall time went, in seconds: building the problem and
/// the MLIR passes down to the LLVM dialect, LLVM's NVPTX back end (PTX),
/// and the assembler (PTX -> cubin). All zero for a kernel read from a
/// cache.
struct CompileSeconds {
  double lower = 0.0;
  double codegen = 0.0;
  double assemble = 0.0;
};

} // namespace fa

#endif // FA_LIB_KERNELRESOURCES_H
