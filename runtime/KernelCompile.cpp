//===- KernelCompile.cpp - Compile, assemble, load --------------*- C++ -*-===//
//
// The path from a spec to a loaded kernel: the memory cache, the disk cache
// (one process compiles an entry others are waiting for), the in-process
// compiler, the assembler (ptxas, libnvJitLink or the driver's JIT), the
// choice among default candidates, cuModuleLoadData, and the resolved
// requests that remember the result.
//
//===----------------------------------------------------------------------===//
#include "lib/Strategy/SpecRules.h"
#include "runtime/KernelMetadata.h"
#include "runtime/RuntimeImpl.h"

#include "compiler/KernelCompiler.h"
#include "lib/Assembler.h"
#include "lib/CudaToolkit.h"
#include "lib/GpuTarget.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/LockFileManager.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>

namespace fa {

/// Default candidates compiled together after the first one spilled, by
/// canonical text, until their trial takes them (prepareLocked).
struct CompiledAhead {
  struct Kernel {
    llvm::Expected<mlir::fa::CompiledKernel> compiled;
    double seconds = 0; // the compile's own wall time
  };
  std::map<std::string, Kernel> kernels;
  ~CompiledAhead() {
    for (auto &[text, kernel] : kernels)
      if (!kernel.compiled)
        llvm::consumeError(kernel.compiled.takeError());
  }
};

Result Runtime::Impl::prepareLocked(const KernelSpec &spec,
                                    std::shared_ptr<KernelEntry> &entry,
                                    CompiledAhead *ahead) {
  if (std::string error = validateSpec(spec); !error.empty())
    return Result::error(Status::invalidArgument, error);
  if (assemblerId.empty())
    if (Result r = chooseAssemblerLocked(); !r)
      return r;
  std::string text = canonicalText(spec);
  if (auto it = kernels.find(text); it != kernels.end()) {
    entry = it->second;
    entry->info.source = KernelSource::memoryCache;
    return {};
  }

  std::string key = cacheKey(spec, compilerVersion(), assemblerId);
  ++cacheKeysComputed;
  auto freshEntry = std::make_shared<KernelEntry>();
  KernelEntry &fresh = *freshEntry;
  fresh.info.spec = spec;
  fresh.info.key = key;
  auto start = std::chrono::steady_clock::now();
  // The entry on disk, if there is a good one for this spec.
  auto readDisk = [&] {
    CachedKernel cached;
    std::string why;
    switch (disk.read(key, cached, why)) {
    case DiskCache::Lookup::hit:
      if (fromMetadata(cached.metadata, spec, fresh.info) &&
          (assembler == Assembler::driver ? checkPtxImage(cached.cubin, spec)
                                          : checkCubinImage(cached.cubin, spec))
              .empty()) {
        fresh.cubin = std::move(cached.cubin);
        fresh.info.source = KernelSource::diskCache;
        return true;
      }
      fresh.info.replacedCorruptEntry = true;
      return false;
    case DiskCache::Lookup::corrupt:
      fresh.info.replacedCorruptEntry = true;
      return false;
    case DiskCache::Lookup::miss:
      return false;
    }
    return false;
  };
  bool found = options.diskCache && readDisk();
  // Processes that miss the same entry compile it once: the first takes a
  // lock file next to the entry, the others wait for it (bounded) and read
  // its entry. Without a lock (an error, a timeout) each compiles; the
  // atomic rename keeps the entry whole either way.
  // A kernel compiled ahead (prepareDefaultedLocked's waves) does not wait
  // for another process's lock: it is here already, and is written as is.
  auto aheadOf = [&]() -> CompiledAhead::Kernel * {
    if (!ahead)
      return nullptr;
    auto it = ahead->kernels.find(text);
    return it == ahead->kernels.end() ? nullptr : &it->second;
  };
  std::optional<llvm::LockFileManager> fillLock;
  if (!found && options.diskCache && !aheadOf()) {
    fillLock.emplace(disk.pathFor(key));
    llvm::Expected<bool> owned = fillLock->tryLock();
    if (!owned) {
      llvm::consumeError(owned.takeError());
    } else if (!*owned &&
               fillLock->waitForUnlockFor(std::chrono::seconds(120)) ==
                   llvm::WaitForUnlockResult::Success) {
      fresh.info.replacedCorruptEntry = false;
      found = readDisk();
    }
  }
  if (!found) {
    std::optional<llvm::Expected<mlir::fa::CompiledKernel>> made;
    if (CompiledAhead::Kernel *kernel = aheadOf()) {
      made.emplace(std::move(kernel->compiled));
      // Its compile ran before this call: count it.
      start -= std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(kernel->seconds));
      ahead->kernels.erase(text);
    }
    if (!made)
      made.emplace(mlir::fa::compileKernel(spec, /*assemble=*/assembler ==
                                                     Assembler::ptxas));
    llvm::Expected<mlir::fa::CompiledKernel> &compiled = *made;
    if (!compiled)
      return Result::error(Status::compileError,
                           kernelName(spec) + ": " +
                               llvm::toString(compiled.takeError()));
    auto assembleStart = std::chrono::steady_clock::now();
    if (assembler == Assembler::nvjitlink) {
      auto assembled = runNvJitLink(compiled->ptx, spec.arch);
      if (!assembled)
        return Result::error(Status::compileError,
                             kernelName(spec) + ": " +
                                 llvm::toString(assembled.takeError()));
      compiled->cubin = std::move(assembled->cubin);
      compiled->resources = std::move(assembled->kernels);
    }
    if (assembler == Assembler::driver) {
      std::string log;
      CUmodule module = nullptr;
      if (Result r = assembleWithDriver(compiled->ptx, module, log); !r)
        return Result::error(Status::compileError,
                             kernelName(spec) + ": " + r.message);
      // Loaded already: loadLocked configures this module.
      fresh.module = module;
      fresh.driver = driver;
      fresh.context = context;
      compiled->cubin.assign(compiled->ptx.begin(), compiled->ptx.end());
      compiled->cubin.push_back('\0');
      compiled->resources = parsePtxasReport(log);
    }
    fresh.info.compileStages = compiled->seconds;
    if (assembler != Assembler::ptxas)
      fresh.info.compileStages.assemble = secondsSince(assembleStart);
    fresh.info.assembler = assemblerId;
    fresh.info.name = compiled->name;
    fresh.info.launches = compiled->launches;
    for (const LaunchPlan &plan : compiled->launches) {
      fresh.info.numThreads = std::max(fresh.info.numThreads, plan.threads);
      fresh.info.sharedMemoryBytes =
          std::max(fresh.info.sharedMemoryBytes, plan.sharedBytes);
    }
    if (!compiled->resources.empty())
      fresh.info.ptxas =
          combineResources(compiled->name, compiled->resources);
    fresh.cubin = std::move(compiled->cubin);
    fresh.info.source = KernelSource::compiled;
    // A cache that cannot be written (read-only, full) costs the next
    // process a compile, nothing more: the kernel stays in memory.
    if (options.diskCache)
      fresh.info.cacheWarning =
          disk.write(key, {toMetadata(fresh.info), fresh.cubin});
  }
  fresh.info.compileSeconds = secondsSince(start);
  entry = kernels.emplace(std::move(text), std::move(freshEntry)).first->second;
  return {};
}

Result Runtime::Impl::chooseAssemblerLocked() {
  AssemblerAvailability have;
  llvm::Expected<std::string> ptxas = findPtxas();
  have.ptxas = bool(ptxas);
  if (!ptxas)
    have.ptxasWhyNot = llvm::toString(ptxas.takeError());
  llvm::Expected<std::string> nvjitlink = nvJitLinkVersion();
  have.nvjitlink = bool(nvjitlink);
  if (!nvjitlink)
    have.nvjitlinkWhyNot = llvm::toString(nvjitlink.takeError());
  have.driver = driver != nullptr;
  have.driverWhyNot = driverError;
  // (Not known, 0, if the driver cannot tell: then it is tried.)
  if (driver && driver->cuDriverGetVersion(&have.driverVersion) != CUDA_SUCCESS)
    have.driverVersion = 0;
  // The device's kernels' PTX ISA: the oldest driver whose JIT reads it.
  if (std::optional<GpuArch> target = lookupGpuArch(arch))
    have.driverVersionNeeded = target->minimumDriverVersion;
  llvm::Expected<Assembler> chosen =
      chooseAssembler(std::getenv("FA_ASSEMBLER"), have);
  if (!chosen)
    return Result::error(Status::compileError,
                         llvm::toString(chosen.takeError()));
  assembler = *chosen;
  if (assembler == Assembler::ptxas) {
    llvm::Expected<std::string> version = fa::ptxasVersion();
    if (!version)
      return Result::error(Status::compileError,
                           llvm::toString(version.takeError()));
    assemblerId = "ptxas " + *version;
  } else if (assembler == Assembler::nvjitlink) {
    assemblerId = "nvjitlink " + *nvjitlink;
  } else {
    assemblerId = "driver " + std::to_string(have.driverVersion);
  }
  return {};
}

/// PTX -> a module by the driver's JIT (the same optimizing assembler as
/// ptxas, built into libcuda), for the context's device, with the verbose
/// log that reports registers, spills and stack like `ptxas -v`. Not through
/// cuLink*: the linker compiles PTX as relocatable code, where the
/// warp-specialized kernels' per-warpgroup register budgets (setmaxnreg) go
/// unused and they spill (docs/benchmarks.md, 2026-12-04 (p)).
Result Runtime::Impl::assembleWithDriver(const std::string &ptx,
                                         CUmodule &module, std::string &log) {
  if (Result r = cudaCheck(driver->cuCtxSetCurrent(context), "cuCtxSetCurrent");
      !r)
    return r;
  std::vector<char> info(1 << 16, 0), errors(1 << 16, 0);
  CUjit_option options[] = {CU_JIT_INFO_LOG_BUFFER,
                            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_LOG_VERBOSE, CU_JIT_OPTIMIZATION_LEVEL};
  void *values[] = {info.data(),
                    reinterpret_cast<void *>(uintptr_t(info.size())),
                    errors.data(),
                    reinterpret_cast<void *>(uintptr_t(errors.size())),
                    reinterpret_cast<void *>(uintptr_t(1)),
                    reinterpret_cast<void *>(uintptr_t(4))};
  CUresult loaded =
      driver->cuModuleLoadDataEx(&module, ptx.c_str(), 6, options, values);
  if (loaded != CUDA_SUCCESS) {
    module = nullptr;
    Result r = cudaCheck(loaded, "cuModuleLoadDataEx (the driver's PTX JIT)");
    r.message += std::string(": ") + errors.data();
    return r;
  }
  log = info.data();
  return {};
}

/// The kernel for `requested` with its defaults filled in: the first default
/// candidate that compiles without spilling (ptxas's register allocation is
/// only known after compiling), or the first that compiles if all spill.
/// The choice is remembered (also past clearMemoryCache, which forgets the
/// resolved requests).
Result Runtime::Impl::prepareDefaultedLocked(
    KernelSpec requested, std::shared_ptr<KernelEntry> &entry, int64_t length) {
  if (requested.arch.empty())
    requested.arch = arch;
  if (!requested.needsDefaults())
    return prepareLocked(requested, entry);
  // Before the remembered choices: their keys (canonicalText) fold what
  // validate() refuses (a negative or NaN scale reads as the default, a
  // forward's deterministic flag as absent) into valid requests.
  if (std::string error = validateSpec(requested); !error.empty())
    return Result::error(Status::invalidArgument, error);
  std::string request = canonicalText(requested);
  if (length > 0)
    request += ";length=" + std::to_string(length);
  if (auto it = defaultChoice.find(request); it != defaultChoice.end())
    return prepareLocked(it->second, entry);
  VariantTraits traits = mlir::fa::variantTraits(requested);
  std::vector<KernelSpec> candidates =
      defaultCandidates(requested, length, traits);
  std::vector<std::shared_ptr<KernelEntry>> compiled(candidates.size());
  Result firstError;
  size_t next = 0;
  // After a spill (or a failure), the next candidates neither in memory nor
  // on disk are compiled at once (ptxas's, the assembler that reports registers
  // while compiling; the others stay one at a time).
  CompiledAhead ahead;
  auto compileAhead = [&](size_t first, size_t last) {
    if (assemblerId.empty() || assembler != Assembler::ptxas)
      return;
    std::vector<size_t> missing;
    for (size_t i = first; i < last; ++i) {
      const KernelSpec &candidate = candidates[i];
      if (!validateSpec(candidate).empty() ||
          kernels.count(canonicalText(candidate)) ||
          (options.diskCache &&
           llvm::sys::fs::exists(disk.pathFor(
               cacheKey(candidate, compilerVersion(), assemblerId)))))
        continue;
      missing.push_back(i);
    }
    std::vector<std::optional<llvm::Expected<mlir::fa::CompiledKernel>>>
        results(missing.size());
    std::vector<double> seconds(missing.size());
    runConcurrently(0, missing.size(), [&](size_t j) {
      auto jobStart = std::chrono::steady_clock::now();
      results[j].emplace(
          mlir::fa::compileKernel(candidates[missing[j]], /*assemble=*/true));
      seconds[j] = secondsSince(jobStart);
    });
    for (size_t j = 0; j < missing.size(); ++j)
      ahead.kernels.emplace(
          canonicalText(candidates[missing[j]]),
          CompiledAhead::Kernel{std::move(*results[j]), seconds[j]});
  };
  std::optional<size_t> chosen = chooseDefaultCandidate(
      candidates,
      [&](const KernelSpec &candidate) -> std::optional<int64_t> {
        std::shared_ptr<KernelEntry> &prepared = compiled[next++];
        if (Result r = prepareLocked(candidate, prepared, &ahead); !r) {
          if (firstError)
            firstError = r;
          return std::nullopt;
        }
        return prepared->info.ptxas.spilledBytes();
      },
      compileAhead, trialWave(),
      firstTrialWave(requested, traits, trialWave()));
  if (!chosen)
    return firstError;
  entry = compiled[*chosen];
  defaultChoice[request] = entry->info.spec;
  return {};
}

Result Runtime::Impl::loadLocked(KernelEntry &entry) {
  if (!driver)
    return Result::error(Status::noDriver, driverError);
  if (!entry.functions.empty())
    return {};
  if (Result r = cudaCheck(driver->cuCtxSetCurrent(context), "cuCtxSetCurrent");
      !r)
    return r;
  if (entry.info.sharedMemoryBytes > maxSharedMemory)
    return Result::error(Status::invalidArgument,
                         entry.info.name + " needs " +
                             std::to_string(entry.info.sharedMemoryBytes) +
                             " bytes of shared memory per block; the device "
                             "allows " +
                             std::to_string(maxSharedMemory));
  auto start = std::chrono::steady_clock::now();
  // A kernel the driver's JIT just compiled is loaded already.
  if (!entry.module)
    if (Result r = cudaCheck(
            driver->cuModuleLoadData(&entry.module, entry.cubin.data()),
            "cuModuleLoadData");
        !r)
      return r;
  entry.driver = driver;
  entry.context = context;
  // Once the module is loaded, any later failure unloads it again: the
  // entry is either fully loaded or not at all.
  // Registers and local memory: the largest of the launches' functions.
  auto configure = [&]() -> Result {
    for (const LaunchPlan &plan : entry.info.launches) {
      CUfunction function = nullptr;
      if (Result r = cudaCheck(driver->cuModuleGetFunction(
                                   &function, entry.module,
                                   plan.function.c_str()),
                               "cuModuleGetFunction");
          !r)
        return r;
      if (Result r = cudaCheck(
              driver->cuFuncSetAttribute(
                  function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                  int(plan.sharedBytes)),
              "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
          !r)
        return r;
      for (auto [value, attribute] :
           {std::pair<int *, CUfunction_attribute>{&entry.info.registers,
                                                   CU_FUNC_ATTRIBUTE_NUM_REGS},
            {&entry.info.localBytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES}}) {
        int used = 0;
        if (Result r = cudaCheck(
                driver->cuFuncGetAttribute(&used, attribute, function),
                "cuFuncGetAttribute");
            !r)
          return r;
        *value = std::max(*value, used);
      }
      entry.functions.push_back(function);
    }
    return {};
  };
  if (Result r = configure(); !r) {
    driver->cuModuleUnload(entry.module);
    entry.module = nullptr;
    entry.functions.clear();
    return r;
  }
  entry.info.loadSeconds = secondsSince(start);
  return {};
}

ResolvedRequest *Runtime::Impl::findRequestLocked(const RequestKey &key) {
  auto it = requests.find(key);
  if (it == requests.end())
    return nullptr;
  ++requestsReused;
  return &it->second;
}

Result Runtime::Impl::resolveRequestLocked(const RequestKey &key,
                                           KernelSpec requested,
                                           CUstream stream, Launch run,
                                           ResolvedRequest *&resolved) {
  ++requestsResolved;
  if (requested.arch.empty())
    requested.arch = arch;
  std::shared_ptr<KernelEntry> kernel;
  if (Result r =
          key.tuned ? autotuneLocked(requested, key.bucket, stream, run, kernel)
                    : prepareDefaultedLocked(requested, kernel, key.bucket);
      !r)
    return r;
  resolved = &requests
                  .insert_or_assign(key, ResolvedRequest{std::move(requested),
                                                         key.bucket,
                                                         std::move(kernel)})
                  .first->second;
  return {};
}

} // namespace fa
