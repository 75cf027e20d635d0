//===- GpuTarget.cpp - Facts about the NVIDIA targets ---------------*- C++ -*-===//
#include "lib/GpuTarget.h"

#include <algorithm>

namespace fa {

// Shared memory per block with cudaFuncAttributeMaxDynamicSharedMemorySize
// (CUDA C Programming Guide, compute capability table). PTX 8.0 is the first
// ISA with sm_90a; it also covers the older targets. Hopper takes PTX 8.1
// for red.global.add.v2.f32 (vector reductions need sm_90 and PTX 8.1).
// Per SM: shared memory, resident threads and blocks (the same table).
// PTX ISA 8.0 came with CUDA 12.0, 8.1 with 12.1 (the PTX ISA's release
// notes): the oldest drivers whose JIT reads them.
// Shared memory: 163 KB a block, 164 KB an SM (sm_80); 99 KB, 100 KB
// (sm_86, sm_89); 227 KB, 228 KB (sm_90, sm_90a). Programmatic dependent
// launch came with sm_90.
static constexpr GpuArch kArchs[] = {
    {"sm_80", 166912, "+ptx80", 167936, 2048, 32, false, 12000, false},
    {"sm_86", 101376, "+ptx80", 102400, 1536, 16, false, 12000, false},
    {"sm_89", 101376, "+ptx80", 102400, 1536, 24, false, 12000, false},
    {"sm_90", 232448, "+ptx81", 233472, 2048, 32, true, 12010, true},
    {"sm_90a", 232448, "+ptx81", 233472, 2048, 32, true, 12010, true},
};

Occupancy occupancy(const GpuArch &arch, int64_t threads, int64_t registers,
                    int64_t sharedBytes) {
  Occupancy result{arch.maxBlocksPerSM, "blocks"};
  auto limit = [&](int64_t blocks, const char *what) {
    if (blocks < result.blocksPerSM)
      result = {blocks, what};
  };
  if (threads <= 0)
    return {0, "threads"};
  int64_t warps = (threads + 31) / 32;
  int64_t registersPerWarp = (std::max<int64_t>(registers, 1) * 32 + 255) /
                             256 * 256;
  limit(kRegistersPerBlock / (registersPerWarp * warps), "registers");
  limit(arch.maxThreadsPerSM / threads, "threads");
  if (sharedBytes > 0)
    limit(arch.maxSharedMemoryPerSM / (sharedBytes + 1024), "shared memory");
  return result;
}

std::optional<GpuArch> lookupGpuArch(std::string_view name) {
  for (const GpuArch &arch : kArchs)
    if (arch.name == name)
      return arch;
  return std::nullopt;
}

std::string unsupportedArchMessage(std::string_view arch,
                                   std::string_view what) {
  constexpr size_t kShown = 32;
  std::string shown(arch.substr(0, kShown));
  if (arch.size() > kShown)
    shown += "'... (" + std::to_string(arch.size()) + " bytes";
  return "unsupported " + std::string(what) + " '" + shown +
         (arch.size() > kShown ? ")" : "'") + "; expected one of " +
         supportedGpuArchs();
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
