//===- GpuTarget.cpp - Facts about the NVIDIA targets ---------------*- C++ -*-===//
#include "lib/GpuTarget.h"

namespace fa {

// Shared memory per block with cudaFuncAttributeMaxDynamicSharedMemorySize
// (CUDA C Programming Guide, compute capability table). PTX 8.0 is the first
// ISA with sm_90a; it also covers the older targets.
static constexpr GpuArch kArchs[] = {
    {"sm_80", 166912, "+ptx80"}, // 163 KB
    {"sm_86", 101376, "+ptx80"}, // 99 KB
    {"sm_89", 101376, "+ptx80"}, // 99 KB
    {"sm_90", 232448, "+ptx80"}, // 227 KB
    {"sm_90a", 232448, "+ptx80"},
};

std::optional<GpuArch> lookupGpuArch(std::string_view name) {
  for (const GpuArch &arch : kArchs)
    if (arch.name == name)
      return arch;
  return std::nullopt;
}

std::string supportedGpuArchs() {
  std::string names;
  for (const GpuArch &arch : kArchs) {
    if (!names.empty())
      names += ", ";
    names += arch.name;
  }
  return names;
}

} // namespace fa
