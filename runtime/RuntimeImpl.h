//===- RuntimeImpl.h - State shared by the runtime's files ------*- C++ -*-===//
//
// Private to runtime/: Runtime::Impl and the kernels it holds, shared by
// the files that implement the runtime (creation, the compile and load
// path, the argument checks and launches).
//
//===----------------------------------------------------------------------===//
#ifndef FA_RUNTIME_RUNTIMEIMPL_H
#define FA_RUNTIME_RUNTIMEIMPL_H

#include "runtime/CudaDriver.h"
#include "runtime/DiskCache.h"
#include "runtime/Runtime.h"

#include "lib/Assembler.h"

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fa {

/// Seconds from `start` to now: compile, load and tuning times.
inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       start)
      .count();
}

/// A kernel known to this runtime: compiled (or read from disk), and loaded
/// once a launch needs it.
struct KernelEntry {
  KernelInfo info;
  std::vector<char> cubin;
  CUmodule module = nullptr;
  /// One per launch of info.launches, once loaded.
  std::vector<CUfunction> functions;
  /// Who loaded the module, for unloading it.
  const CudaDriver *driver = nullptr;
  CUcontext context = nullptr;

  KernelEntry() = default;
  KernelEntry(const KernelEntry &) = delete;
  KernelEntry &operator=(const KernelEntry &) = delete;
  /// Entries are shared (std::shared_ptr) by the cache and the launches in
  /// flight: the last owner unloads the module, once the work queued on
  /// the context, which may still run its kernels, is done.
  ~KernelEntry() {
    if (!module)
      return;
    driver->cuCtxSetCurrent(context);
    driver->cuCtxSynchronize();
    driver->cuModuleUnload(module);
  }
};

/// Operands a launch plan can name (LaunchPlan::Operand).
constexpr size_t kNumOperands = size_t(LaunchPlan::Operand::dqOrder) + 1;

/// A Runtime's state: the device, the caches, the assembler and the tuning
/// choices.
struct Runtime::Impl {
  RuntimeOptions options;
  DiskCache disk{""};
  /// The PTX assembler and its version ("ptxas 13.0.88", "driver 13000"),
  /// part of every cache key; "" until first needed.
  Assembler assembler = Assembler::ptxas;
  std::string assemblerId;
  std::string arch = "sm_90a";
  const CudaDriver *driver = nullptr; // null without a usable driver/device
  std::string driverError;
  std::string cacheWarning; // why there is no disk cache, or ""
  CUdevice device = 0;
  CUcontext context = nullptr;
  int64_t maxSharedMemory = 0;
  /// SMs of the device: the blocks of a persistent kernel.
  int64_t multiprocessors = 0;

  std::mutex mutex; // guards kernels and the compile path
  std::map<std::string, std::shared_ptr<KernelEntry>> kernels;
  /// Requested spec with tiles left to the defaults (canonical text, and
  /// the length bucket where the forward's defaults depend on it) -> the
  /// candidate chosen for it.
  std::map<std::string, KernelSpec> defaultChoice;
  /// Autotuning: on or off, the choices made or read back (by canonical
  /// request text and length bucket), and how many were timed.
  bool autotune = false;
  std::map<std::string, KernelSpec> tunedChoice;
  int64_t tuningsTimed = 0;

  Result prepareLocked(const KernelSpec &spec, KernelEntry *&entry);
  Result chooseAssemblerLocked();
  Result assembleWithDriver(const std::string &ptx, std::vector<char> &cubin,
                            std::string &log);
  /// `length`: the length bucket the defaults are chosen for (0 = none).
  Result prepareDefaultedLocked(KernelSpec requested, KernelEntry *&entry,
                                int64_t length = 0);
  Result loadLocked(KernelEntry &entry);
  /// Finds, compiles and loads the kernel of `requested` (defaults filled),
  /// under the lock; the caller shares the entry for as long as it
  /// launches from it (clearMemoryCache may drop the cache's share).
  Result prepareAndLoad(const KernelSpec &requested,
                        std::shared_ptr<KernelEntry> &entry,
                        int64_t length = 0);
  Result prepareAndLoadLocked(const KernelSpec &requested,
                              std::shared_ptr<KernelEntry> &entry,
                              int64_t length = 0);
  /// Runs the launches of a loaded kernel in order on `stream`; `operands`
  /// holds the tensor of each LaunchPlan::Operand.
  Result launchAll(const KernelEntry &entry,
                   const std::array<const TensorArg *, kNumOperands> &operands,
                   const ProblemExtents &problem, ElementType dtype,
                   CUstream stream);
  /// Like prepareAndLoad, for a request with default tiles and autotuning
  /// on: the choice for (request, bucket) from memory or the disk cache,
  /// else the fastest of the first candidates, each timed with `run`
  /// (which launches a loaded candidate on `stream`).
  Result autotuneAndLoad(const KernelSpec &requested, int64_t bucket,
                         CUstream stream,
                         const std::function<Result(const KernelEntry &)> &run,
                         std::shared_ptr<KernelEntry> &entry);
  /// The launches of forward() and backward() for a loaded kernel, with
  /// the arguments checked against the kernel's own tiles.
  Result runForward(const KernelEntry &entry, const AttentionArgs &a);
  Result runBackward(const KernelEntry &entry, const AttentionBackwardArgs &a);
  Result cudaCheck(CUresult result, const char *what) const {
    if (result == CUDA_SUCCESS)
      return {};
    return Result::error(Status::cudaError,
                         std::string(what) + " failed: " +
                             driver->describe(result));
  }
};

} // namespace fa

#endif // FA_RUNTIME_RUNTIMEIMPL_H
