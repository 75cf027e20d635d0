//===- CudaDriver.h - The CUDA driver API, loaded at run time ------*- C++ -*-===//
//
// libcuda.so.1 is opened with dlopen, so that the runtime links and runs on
// machines without a GPU driver and reports "no CUDA driver" there.
//
//===----------------------------------------------------------------------===//
#ifndef FA_RUNTIME_CUDADRIVER_H
#define FA_RUNTIME_CUDADRIVER_H

#include <cuda.h>

#include <string>

namespace fa {

/// The driver entry points the runtime uses (versioned names where the
/// header maps a name to a _v2/_v3 symbol).
#define FA_CUDA_DRIVER_FUNCTIONS(X)                                            \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuDevicePrimaryCtxRelease_v2)                                              \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxGetCurrent)                                                           \
  X(cuCtxSynchronize)                                                          \
  X(cuModuleLoadData)                                                          \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuFuncGetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuLaunchKernelEx)                                                          \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuMemAlloc_v2)                                                             \
  X(cuMemFree_v2)                                                              \
  X(cuMemAllocAsync)                                                           \
  X(cuMemFreeAsync)                                                            \
  X(cuMemcpyHtoD_v2)                                                           \
  X(cuMemcpyDtoH_v2)                                                           \
  X(cuMemsetD16_v2)                                                            \
  X(cuMemsetD32_v2)                                                            \
  X(cuMemsetD32Async)                                                          \
  X(cuStreamSynchronize)                                                       \
  X(cuEventCreate)                                                             \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventElapsedTime_v2)                                                     \
  X(cuEventDestroy_v2)                                                         \
  X(cuTensorMapEncodeTiled)                                                    \
  X(cuModuleLoadDataEx)

class CudaDriver {
public:
  /// The process-wide driver, loaded and initialized (cuInit) on first use.
  static const CudaDriver &get();

  /// Whether libcuda.so.1 was found and cuInit succeeded.
  bool available() const { return error.empty(); }
  /// Why not, when not.
  const std::string &loadError() const { return error; }

  /// "CUDA_ERROR_X: description" for a result code.
  std::string describe(CUresult result) const;

#define FA_DECLARE_POINTER(name) decltype(&::name) name = nullptr;
  FA_CUDA_DRIVER_FUNCTIONS(FA_DECLARE_POINTER)
#undef FA_DECLARE_POINTER

private:
  CudaDriver();
  std::string error;
};

} // namespace fa

#endif // FA_RUNTIME_CUDADRIVER_H
