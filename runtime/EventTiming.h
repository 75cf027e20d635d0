//===- EventTiming.h - Timing launches with CUDA events ------------*- C++ -*-===//
//
// The median time of a launch sequence on a stream, measured with CUDA
// events after warm-up runs: the runtime's autotuning and fa-sweep --time
// measure the same way.
//
//===----------------------------------------------------------------------===//
#ifndef FA_RUNTIME_EVENTTIMING_H
#define FA_RUNTIME_EVENTTIMING_H

#include "runtime/CudaDriver.h"
#include "runtime/Runtime.h"

#include <functional>

namespace fa {

/// Runs `run` `warmups` times, then `runs` times between two events each,
/// and sets `milliseconds` to the median; the first failure (of `run` or of
/// the driver) is returned.
Result medianMilliseconds(const CudaDriver &driver, CUstream stream,
                          int warmups, int runs,
                          const std::function<Result()> &run,
                          double &milliseconds);

} // namespace fa

#endif // FA_RUNTIME_EVENTTIMING_H
