//===- EventTiming.cpp - Timing launches with CUDA events ----------*- C++ -*-===//
#include "runtime/EventTiming.h"

#include <algorithm>
#include <vector>

namespace fa {

Result medianMilliseconds(const CudaDriver &driver, CUstream stream,
                          int warmups, int runs,
                          const std::function<Result()> &run,
                          double &milliseconds) {
  auto check = [&](CUresult result, const char *what) {
    if (result == CUDA_SUCCESS)
      return Result();
    return Result::error(Status::cudaError, std::string(what) + " failed: " +
                                                driver.describe(result));
  };
  for (int i = 0; i < warmups; ++i)
    if (Result r = run(); !r)
      return r;
  CUevent start = nullptr, stop = nullptr;
  if (Result r = check(driver.cuEventCreate(&start, 0), "cuEventCreate"); !r)
    return r;
  if (Result r = check(driver.cuEventCreate(&stop, 0), "cuEventCreate"); !r) {
    driver.cuEventDestroy_v2(start);
    return r;
  }
  std::vector<float> times;
  Result result;
  for (int i = 0; i < runs && result; ++i) {
    float elapsed = 0.0f;
    if (!(result = check(driver.cuEventRecord(start, stream),
                         "cuEventRecord")) ||
        !(result = run()) ||
        !(result = check(driver.cuEventRecord(stop, stream),
                         "cuEventRecord")) ||
        !(result = check(driver.cuEventSynchronize(stop),
                         "cuEventSynchronize")) ||
        !(result = check(driver.cuEventElapsedTime_v2(&elapsed, start, stop),
                         "cuEventElapsedTime")))
      break;
    times.push_back(elapsed);
  }
  driver.cuEventDestroy_v2(start);
  driver.cuEventDestroy_v2(stop);
  if (!result)
    return result;
  if (times.empty())
    return Result::error(Status::invalidArgument, "no timed runs");
  std::sort(times.begin(), times.end());
  milliseconds = times[times.size() / 2];
  return {};
}

} // namespace fa
