//===- CudaDriver.cpp - The CUDA driver API, loaded at run time ----*- C++ -*-===//
#include "runtime/CudaDriver.h"

#include <dlfcn.h>

namespace fa {

CudaDriver::CudaDriver() {
  // Never closed: kernels and contexts live until the process ends.
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *why = dlerror();
    error = std::string("no CUDA driver: cannot load libcuda.so.1 (") +
            (why ? why : "unknown reason") + ")";
    return;
  }
#define FA_LOAD_POINTER(fn)                                                    \
  fn = reinterpret_cast<decltype(fn)>(dlsym(library, #fn));                    \
  if (!fn) {                                                                   \
    error = "no CUDA driver: libcuda.so.1 lacks " #fn " (driver too old)";     \
    return;                                                                    \
  }
  FA_CUDA_DRIVER_FUNCTIONS(FA_LOAD_POINTER)
#undef FA_LOAD_POINTER
  if (CUresult result = cuInit(0); result != CUDA_SUCCESS)
    error = "no CUDA driver: cuInit failed: " + describe(result);
}

const CudaDriver &CudaDriver::get() {
  static const CudaDriver driver;
  return driver;
}

std::string CudaDriver::describe(CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  if (cuGetErrorName)
    cuGetErrorName(result, &name);
  if (cuGetErrorString)
    cuGetErrorString(result, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(result)) +
         (text ? std::string(": ") + text : std::string());
}

} // namespace fa
