//===- GpuTarget.h - Facts about the NVIDIA targets we generate for -*- C++ -*-===//
#ifndef FA_LIB_GPUTARGET_H
#define FA_LIB_GPUTARGET_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fa {

/// Limits of one GPU architecture that code generation must respect.
struct GpuArch {
  std::string_view name;            // sm_80, sm_90a, ...
  int64_t maxSharedMemoryPerBlock;  // bytes, with the dynamic opt-in
  std::string_view ptxFeatures;     // LLVM NVPTX feature string (PTX ISA)
  int64_t maxSharedMemoryPerSM;     // bytes of one SM's shared memory
  int64_t maxThreadsPerSM;          // resident threads of one SM
  int64_t maxBlocksPerSM;           // resident blocks of one SM
  bool vectorReductions;            // red.global.add.v2.f32 (sm_90, PTX 8.1)
  /// The oldest CUDA driver whose JIT takes that PTX ISA, as
  /// cuDriverGetVersion reports it (1000 * major + 10 * minor).
  int minimumDriverVersion;
  /// Programmatic dependent launch (griddepcontrol, PTX 7.8, sm_90): a
  /// kernel may be launched while the one before it in its stream runs.
  bool dependentLaunch;
};

/// The architecture called `name`, or nullopt if we do not generate for it.
std::optional<GpuArch> lookupGpuArch(std::string_view name);

/// "sm_80, sm_86, sm_89, sm_90, sm_90a", for error messages.
std::string supportedGpuArchs();

/// "unsupported arch 'X'; expected one of ..." with X quoted in full up to
/// 32 characters, else its first 32 and its length (an arch string can be
/// anything a caller passes, a megabyte included).
std::string unsupportedArchMessage(std::string_view arch,
                                   std::string_view what = "arch");

/// Static shared memory every kernel carries: the NVPTX back end declares
/// the dynamic shared-memory symbol as one 16-byte-aligned static byte.
constexpr int64_t kStaticSharedMemoryReserve = 16;

/// Registers a thread may use (the PTX limit).
constexpr int64_t kMaxRegistersPerThread = 255;

/// 32-bit registers of one SM, shared by the threads of a resident block
/// (64K on sm_80 .. sm_90a).
constexpr int64_t kRegistersPerBlock = 65536;

/// Registers each of `numThreads` threads can have before ptxas must spill:
/// the PTX limit, or the block's share of the register file when smaller.
constexpr int64_t maxRegistersPerThread(int64_t numThreads) {
  return numThreads * kMaxRegistersPerThread > kRegistersPerBlock
             ? kRegistersPerBlock / numThreads
             : kMaxRegistersPerThread;
}

/// Blocks of a kernel one SM holds at once (occupancy), and what limits it.
struct Occupancy {
  int64_t blocksPerSM = 0;
  /// "registers", "shared memory", "threads" or "blocks".
  const char *limitedBy = "";
};

/// The occupancy of a kernel of `threads` threads, `registers` registers
/// per thread and `sharedBytes` of shared memory per block on `arch`:
/// registers allocated per warp in units of 256, 1 KB of shared memory
/// reserved per block by the system (CUDA's occupancy rules for sm_80+).
Occupancy occupancy(const GpuArch &arch, int64_t threads, int64_t registers,
                    int64_t sharedBytes);

} // namespace fa

#endif // FA_LIB_GPUTARGET_H
