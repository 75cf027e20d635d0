//===- fa-host-overhead.cpp - Host time of a C ABI call -----------------===//
//
// How long the host spends in one fa_attention_* call of the C ABI (what
// the Python binding calls) once its kernel is compiled and loaded: the
// request lookup, the argument checks, the launch parameters, workspaces
// and launches. With test/FakeCuda's libcuda.so.1 first on the library
// path (no GPU) that is fa's own work alone; with a real driver it adds the
// driver's (the kernels run on buffers of zeros). Links libfa_runtime.so
// only, so it travels to the GPU machine beside it.
//
//   LD_LIBRARY_PATH=build/test/Unit/fake-cuda build/bin/fa-host-overhead
//   fa-host-overhead [calls]        (default 20000)
//
//===----------------------------------------------------------------------===//
#include "runtime/fa_runtime.h"

#include <cuda.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace {

/// The driver entry points the tool needs for its buffers.
struct Driver {
  decltype(&cuInit) init = nullptr;
  decltype(&cuDeviceGet) deviceGet = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) retain = nullptr;
  decltype(&cuCtxSetCurrent) setCurrent = nullptr;
  decltype(&cuCtxSynchronize) synchronize = nullptr;
  decltype(&cuMemAlloc_v2) alloc = nullptr;
  decltype(&cuMemsetD32_v2) memset32 = nullptr;

  bool load() {
    void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library)
      return false;
    init = reinterpret_cast<decltype(init)>(dlsym(library, "cuInit"));
    deviceGet =
        reinterpret_cast<decltype(deviceGet)>(dlsym(library, "cuDeviceGet"));
    retain = reinterpret_cast<decltype(retain)>(
        dlsym(library, "cuDevicePrimaryCtxRetain"));
    setCurrent = reinterpret_cast<decltype(setCurrent)>(
        dlsym(library, "cuCtxSetCurrent"));
    synchronize = reinterpret_cast<decltype(synchronize)>(
        dlsym(library, "cuCtxSynchronize"));
    alloc = reinterpret_cast<decltype(alloc)>(dlsym(library, "cuMemAlloc_v2"));
    memset32 =
        reinterpret_cast<decltype(memset32)>(dlsym(library, "cuMemsetD32_v2"));
    CUdevice device;
    CUcontext context;
    return init && deviceGet && retain && setCurrent && synchronize && alloc &&
           memset32 && init(0) == CUDA_SUCCESS &&
           deviceGet(&device, 0) == CUDA_SUCCESS &&
           retain(&context, device) == CUDA_SUCCESS &&
           setCurrent(context) == CUDA_SUCCESS;
  }
};

Driver driver;

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "fa-host-overhead: %s\n", what.c_str());
  std::exit(1);
}

/// A zeroed device tensor [b, h, s, d] of `elementBytes` elements (d = 0: a
/// row of values per (b, h, s), LSE's [B, H, S]).
fa_tensor tensor(int64_t b, int64_t h, int64_t s, int64_t d,
                 int64_t elementBytes) {
  int64_t row = d ? d : 1, bytes = b * h * s * row * elementBytes;
  CUdeviceptr p = 0;
  if (driver.alloc(&p, size_t(bytes)) != CUDA_SUCCESS ||
      driver.memset32(p, 0, size_t(bytes / 4)) != CUDA_SUCCESS)
    fail("cannot allocate " + std::to_string(bytes) + " bytes");
  fa_tensor t{};
  t.data = reinterpret_cast<const void *>(p);
  int64_t sizes[4] = {b, h, s, d},
          strides[4] = {h * s * row, s * row, row, d ? 1 : 0};
  for (int i = 0; i < 4; ++i)
    t.sizes[i] = sizes[i], t.strides[i] = strides[i];
  return t;
}

/// Microseconds per call of `call` (after one untimed call that compiles
/// and loads), the device drained at the end.
double timePerCall(int calls, const std::function<fa_status()> &call) {
  if (call() != FA_OK)
    fail(fa_last_error());
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    if (call() != FA_OK)
      fail(fa_last_error());
  driver.synchronize();
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return took.count() / calls * 1e6;
}

} // namespace

int main(int argc, char **argv) {
  int calls = 20000;
  if (argc > 2 || (argc == 2 && (calls = std::atoi(argv[1])) < 1))
    fail("usage: fa-host-overhead [calls >= 1]");
  if (!driver.load())
    fail("no usable CUDA driver (libcuda.so.1)");
  fa_runtime *runtime = nullptr;
  if (fa_runtime_create(nullptr, 0, &runtime) != FA_OK)
    fail(fa_last_error());
  if (!fa_runtime_has_driver(runtime))
    fail("the runtime found no driver");
  std::printf("%d calls per case\n", calls);
  fa_kernel_config config{};
  config.struct_size = sizeof(config);

  // Prefill: B 2, 16/4 heads, 1k causal, bf16, D 128.
  fa_tensor q = tensor(2, 16, 1024, 128, 2), k = tensor(2, 4, 1024, 128, 2),
            v = tensor(2, 4, 1024, 128, 2), o = tensor(2, 16, 1024, 128, 2),
            lse = tensor(2, 16, 1024, 0, 4);
  std::printf("forward, B 2, 16/4 heads, S 1k, causal: %.2f us\n",
              timePerCall(calls, [&] {
                return fa_attention_forward(runtime, &q, &k, &v, &o, &lse,
                                            FA_BF16, 1, 0.0, &config, nullptr);
              }));

  // Decode: one token, 32/8 heads, 1k keys (split-KV: parts, a combine).
  fa_tensor dq = tensor(1, 32, 1, 128, 2), dk = tensor(1, 8, 1024, 128, 2),
            dv = tensor(1, 8, 1024, 128, 2), doo = tensor(1, 32, 1, 128, 2),
            dlse = tensor(1, 32, 1, 0, 4);
  std::printf("forward, decode B 1, 32/8 heads, 1k keys: %.2f us\n",
              timePerCall(calls, [&] {
                return fa_attention_forward(runtime, &dq, &dk, &dv, &doo, &dlse,
                                            FA_BF16, 0, 0.0, &config, nullptr);
              }));

  // The prefill's backward.
  fa_tensor gradOutput = tensor(2, 16, 1024, 128, 2),
            gradQuery = tensor(2, 16, 1024, 128, 2),
            gradKey = tensor(2, 4, 1024, 128, 2),
            gradValue = tensor(2, 4, 1024, 128, 2);
  std::printf("backward, B 2, 16/4 heads, S 1k, causal: %.2f us\n",
              timePerCall(calls, [&] {
                return fa_attention_backward(
                    runtime, &q, &k, &v, &o, &gradOutput, &lse, &gradQuery,
                    &gradKey, &gradValue, FA_BF16, 1, 0.0, &config, nullptr);
              }));
  fa_runtime_destroy(runtime);
  return 0;
}
