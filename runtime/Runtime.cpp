//===- Runtime.cpp - Creating the runtime; prepare and load -----*- C++ -*-===//
//
// Runtime::create (driver, device, disk cache), the accessors, resolve(),
// prepare() and load(). The compile and load path is in KernelCompile.cpp,
// the argument checks in ArgumentChecks.cpp, forward() and backward() in
// Launch.cpp.
//
//===----------------------------------------------------------------------===//
#include "runtime/Runtime.h"
#include "lib/Strategy/SpecRules.h"
#include "runtime/Autotune.h"
#include "runtime/CudaDriver.h"
#include "runtime/DiskCache.h"
#include "runtime/RuntimeImpl.h"

#include "lib/GpuTarget.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace fa {

const char *toString(Status status) {
  switch (status) {
  case Status::ok:
    return "ok";
  case Status::invalidArgument:
    return "invalid argument";
  case Status::noDriver:
    return "no CUDA driver";
  case Status::cudaError:
    return "CUDA error";
  case Status::compileError:
    return "compile error";
  case Status::cacheError:
    return "cache error";
  }
  return "?";
}

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}

Runtime::~Runtime() {
  // Unloads the modules (KernelEntry) while the context is still retained.
  impl->requests.clear();
  impl->kernels.clear();
  if (impl->driver)
    impl->driver->cuDevicePrimaryCtxRelease_v2(impl->device);
}

Result Runtime::create(const RuntimeOptions &options,
                       std::unique_ptr<Runtime> &runtime) {
  // A device index is never negative, driver or not.
  if (options.device < 0)
    return Result::error(Status::invalidArgument,
                         "device " + std::to_string(options.device) +
                             " does not exist: device indices start at 0");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (const char *env = std::getenv("FA_AUTOTUNE"))
    impl->autotune = options.autotune || std::string(env) == "1";
  else
    impl->autotune = options.autotune;
  impl->disk = DiskCache(options.cacheDir.empty() ? defaultCacheDir()
                                                  : options.cacheDir);
  if (impl->options.diskCache && impl->disk.directory().empty()) {
    impl->options.diskCache = false;
    impl->cacheWarning = "no disk cache: neither FA_CACHE_DIR nor HOME is set";
  }
  if (impl->options.diskCache)
    if (std::string error = impl->disk.open(); !error.empty())
      return Result::error(Status::cacheError, error);

  const CudaDriver &driver = CudaDriver::get();
  if (!driver.available()) {
    impl->driverError = driver.loadError();
  } else {
    int count = 0;
    if (CUresult r = driver.cuDeviceGetCount(&count); r != CUDA_SUCCESS)
      impl->driverError = "no CUDA driver: cuDeviceGetCount failed: " +
                          driver.describe(r);
    else if (count == 0)
      impl->driverError = "no CUDA device";
    else if (options.device < 0 || options.device >= count)
      return Result::error(Status::invalidArgument,
                           "device " + std::to_string(options.device) +
                               " does not exist; this machine has " +
                               std::to_string(count));
  }
  if (impl->driverError.empty()) {
    impl->driver = &driver;
    if (Result r = impl->cudaCheck(
            driver.cuDeviceGet(&impl->device, options.device), "cuDeviceGet");
        !r)
      return r;
    if (Result r = impl->cudaCheck(
            driver.cuDevicePrimaryCtxRetain(&impl->context, impl->device),
            "cuDevicePrimaryCtxRetain");
        !r)
      return r;
    int major = 0, minor = 0, smem = 0, multiprocessors = 0;
    for (auto [value, attribute] :
         {std::pair<int *, CUdevice_attribute>{
              &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
          {&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
          {&smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
          {&multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT}})
      if (Result r = impl->cudaCheck(
              driver.cuDeviceGetAttribute(value, attribute, impl->device),
              "cuDeviceGetAttribute");
          !r)
        return r;
    impl->maxSharedMemory = smem;
    impl->multiprocessors = multiprocessors;
    // sm_90 parts run the sm_90a (architecture-specific) features.
    impl->arch = "sm_" + std::to_string(major * 10 + minor) +
                 (major == 9 ? "a" : "");
    if (!lookupGpuArch(impl->arch))
      return Result::error(Status::invalidArgument,
                           "the device is " + impl->arch +
                               "; kernels are generated for " +
                               supportedGpuArchs());
  }
  runtime.reset(new Runtime(std::move(impl)));
  return {};
}

bool Runtime::hasDriver() const { return impl->driver != nullptr; }
const std::string &Runtime::driverError() const { return impl->driverError; }
const std::string &Runtime::deviceArch() const { return impl->arch; }
const std::string &Runtime::cacheWarning() const {
  return impl->cacheWarning;
}
const std::string &Runtime::cacheDir() const {
  return impl->disk.directory();
}

/// The length bucket the defaults are chosen for (0 = not known).
static int64_t defaultsBucket(int64_t length) {
  return length > 0 ? lengthBucket(length, length) : 0;
}

KernelSpec Runtime::resolve(KernelSpec spec, int64_t length) const {
  if (spec.arch.empty())
    spec.arch = impl->arch;
  return withDefaults(spec, defaultsBucket(length));
}

bool Runtime::autotunes() const { return impl->autotune; }

int64_t Runtime::tuningsTimed() const {
  std::lock_guard<std::mutex> lock(impl->mutex);
  return impl->tuningsTimed;
}

void Runtime::clearMemoryCache() {
  // Entries still launching elsewhere stay alive until those launches end.
  std::lock_guard<std::mutex> lock(impl->mutex);
  impl->requests.clear();
  impl->kernels.clear();
}

RuntimeCounters Runtime::counters() const {
  RuntimeCounters counters;
  counters.requestsResolved = impl->requestsResolved;
  counters.requestsReused = impl->requestsReused;
  counters.cacheKeysComputed = impl->cacheKeysComputed;
  counters.argumentChecks = impl->argumentChecks;
  return counters;
}

/// The kernel of a prepare() or load() request: its earlier resolution, or
/// a new one (prepare() never times candidates: key.tuned is false).
static Result preparedKernel(Runtime::Impl &impl, const KernelSpec &spec,
                             int64_t length,
                             std::shared_ptr<KernelEntry> &kernel) {
  int64_t bucket = spec.needsDefaults() ? defaultsBucket(length) : 0;
  RequestKey key(spec, bucket, /*tuned=*/false);
  ResolvedRequest *resolved = impl.findRequestLocked(key);
  if (resolved) {
    // Where the kernel came from this time.
    resolved->kernel->info.source = KernelSource::memoryCache;
  } else if (Result r = impl.resolveRequestLocked(key, spec, nullptr, nullptr,
                                                  resolved);
             !r) {
    return r;
  }
  kernel = resolved->kernel;
  return {};
}

Result Runtime::prepare(const KernelSpec &spec, KernelInfo *info,
                        int64_t length) {
  std::lock_guard<std::mutex> lock(impl->mutex);
  std::shared_ptr<KernelEntry> entry;
  if (Result r = preparedKernel(*impl, spec, length, entry); !r)
    return r;
  if (info)
    *info = entry->info;
  return {};
}

Result Runtime::load(const KernelSpec &spec, KernelInfo *info,
                     int64_t length) {
  std::lock_guard<std::mutex> lock(impl->mutex);
  if (!impl->driver)
    return Result::error(Status::noDriver, impl->driverError);
  std::shared_ptr<KernelEntry> entry;
  if (Result r = preparedKernel(*impl, spec, length, entry); !r)
    return r;
  if (Result r = impl->loadLocked(*entry); !r)
    return r;
  if (info)
    *info = entry->info;
  return {};
}

} // namespace fa
