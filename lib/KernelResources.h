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
};

} // namespace fa

#endif // FA_LIB_KERNELRESOURCES_H
