//===- DeviceTiming.h - fa-sweep's timed mode -----------------------*- C++ -*-===//
//
// With --time, fa-sweep runs each schedule that compiled on the GPU through
// the runtime: once on a small problem against the float64 reference (the
// correctness check), then on the stated problem, timed with CUDA events
// (the median of the timed runs after warm-up runs).
//
//===----------------------------------------------------------------------===//
#ifndef FA_TOOLS_FA_SWEEP_DEVICETIMING_H
#define FA_TOOLS_FA_SWEEP_DEVICETIMING_H

#include "lib/AttentionProblem.h"
#include "lib/KernelSpec.h"

#include <memory>
#include <string>

namespace fa {

/// What one schedule measured.
struct TimedSchedule {
  std::string check;       // "ok", or what was wrong with the output
  double maxError = 0.0;   // max |O - reference| of the check
  double bound = 0.0;      // its bound
  double milliseconds = 0.0;
  double tflops = 0.0;     // FlashAttention's count (causal: half)
};

class DeviceTiming {
public:
  /// "" and `timing` set when a driver and a device are there, else why
  /// not. `problem` is the timed shape (its causal flag and head dim are
  /// the sweep's).
  static std::string create(const AttentionProblem &problem, int runs,
                            std::unique_ptr<DeviceTiming> &timing);
  ~DeviceTiming();

  /// Checks and times the forward kernel of `spec` (tiles set), its keys
  /// split into `kvSplits` parts (AttentionArgs::kvSplits: 0 = the
  /// runtime's choice, 1 = no split).
  TimedSchedule measure(const KernelSpec &spec, int64_t kvSplits = 0);

  struct Impl;

private:
  explicit DeviceTiming(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace fa

#endif // FA_TOOLS_FA_SWEEP_DEVICETIMING_H
