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
#include "runtime/ResolvedRequest.h"
#include "runtime/Runtime.h"

#include "lib/Assembler.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fa {

/// Seconds from `start` to now: compile, load and tuning times.
inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       start)
      .count();
}

/// Candidates compiled ahead of their trial (KernelCompile.cpp).
struct CompiledAhead;

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
constexpr size_t kNumOperands = size_t(LaunchPlan::Operand::lastCapture) + 1;

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

  std::mutex mutex; // guards requests, kernels and the compile path
  /// Requests resolved before (ResolvedRequest.h): a request seen again
  /// costs one lookup.
  std::unordered_map<RequestKey, ResolvedRequest, RequestKey::Hash> requests;
  /// The tiles of a split kernel that chooseForwardParts counts programs
  /// with, and the blocks of it an SM holds (0: not modelled).
  struct SplitTiles {
    int64_t blockM = 0, blockN = 0, residentBlocks = 0;
  };
  /// A split-KV request (and its length bucket) -> its first default
  /// candidate's SplitTiles: computed once, not per call.
  std::unordered_map<RequestKey, SplitTiles, RequestKey::Hash> splitTiles;
  /// Kernels by the canonical text of their spec: within a runtime the
  /// compiler and the assembler are fixed, so the text names the kernel
  /// and the SHA-256 cache key (which adds both) is computed once per
  /// kernel, for the disk cache.
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
  /// Runtime::counters(); atomic, as forward() checks arguments unlocked.
  std::atomic<int64_t> requestsResolved{0}, requestsReused{0},
      cacheKeysComputed{0}, argumentChecks{0};

  /// How forward() and backward() differ, for runRequest: the checks of
  /// the caller's tensors against a spec, and the launches of a loaded
  /// kernel on them.
  using CheckArguments = llvm::function_ref<Result(const KernelSpec &)>;
  using Launch = llvm::function_ref<Result(const KernelEntry &)>;

  /// forward() and backward(): the request's earlier resolution (one
  /// lookup), else resolves it (validates, checks the arguments against
  /// the first default candidate, then finds, compiles or times the
  /// kernel); checks the arguments against the kernel that runs, loads it
  /// and launches it. `queryLength` and `keyLength` pick the length bucket.
  Result runRequest(const KernelSpec &requested, int64_t queryLength,
                    int64_t keyLength, CUstream stream,
                    CheckArguments checkArguments, Launch launch);
  /// The resolution of `key` made before, or null (counts a reuse).
  ResolvedRequest *findRequestLocked(const RequestKey &key);
  /// Resolves a request and remembers it under `key`: the kernel for
  /// `requested` (defaults chosen for `key.bucket`; by timing candidates
  /// with `run` when key.tuned), compiled or found, not loaded.
  Result resolveRequestLocked(const RequestKey &key, KernelSpec requested,
                              CUstream stream, Launch run,
                              ResolvedRequest *&resolved);

  /// `ahead`: candidates compiled before their trial
  /// (prepareDefaultedLocked), by canonical text; one found there is taken
  /// instead of compiled.
  Result prepareLocked(const KernelSpec &spec,
                       std::shared_ptr<KernelEntry> &entry,
                       CompiledAhead *ahead = nullptr);
  Result chooseAssemblerLocked();
  /// PTX -> a module loaded by the driver's JIT, compiled as a whole
  /// program (cuModuleLoadDataEx), and its verbose log. The entry's image is
  /// then the PTX itself (NUL-terminated): cuModuleLoadData compiles it the
  /// same way in a later process (the driver keeps its own JIT cache).
  Result assembleWithDriver(const std::string &ptx, CUmodule &module,
                            std::string &log);
  /// `length`: the length bucket the defaults are chosen for (0 = none).
  Result prepareDefaultedLocked(KernelSpec requested,
                                std::shared_ptr<KernelEntry> &entry,
                                int64_t length = 0);
  Result loadLocked(KernelEntry &entry);
  /// For a request with default tiles and autotuning on: the choice for
  /// (request, bucket) from memory or the disk cache, else the fastest of
  /// the first candidates, each loaded and timed with `run` (which checks
  /// the arguments against the candidate and launches it on `stream`).
  Result autotuneLocked(const KernelSpec &request, int64_t bucket,
                        CUstream stream, Launch run,
                        std::shared_ptr<KernelEntry> &entry);
  /// Runs the launches of a loaded kernel in order on `stream`; `operands`
  /// holds the tensor of each LaunchPlan::Operand.
  Result launchAll(const KernelEntry &entry,
                   const std::array<const TensorArg *, kNumOperands> &operands,
                   const ProblemExtents &problem, ElementType dtype,
                   CUstream stream);
  /// The launches of forward() and backward() for a loaded kernel whose
  /// spec the arguments were checked against.
  /// The split-KV parts of a forward: the caller's (args.kvSplits), else
  /// chooseKvParts' for the problem where the request may split; 1 for no
  /// split. An error names a kvSplits out of range.
  Result chooseForwardParts(const KernelSpec &requested,
                            const AttentionArgs &args, int64_t queryLength,
                            int64_t keyLength, int64_t &parts);
  /// `parts`: a split-KV kernel's parts (1 for any other kernel).
  Result launchForward(const KernelEntry &entry, const AttentionArgs &a,
                       int64_t parts);
  Result launchBackward(const KernelEntry &entry,
                        const AttentionBackwardArgs &a);
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
