//===- Autotune.h - Timed choice among the default candidates ----*- C++ -*-===//
//
// Opt-in (RuntimeOptions::autotune or FA_AUTOTUNE=1): for a request whose
// tiles are left to the defaults, the runtime times the resource model's
// first candidates on the caller's own tensors once, keeps the fastest for
// (spec, length bucket) and stores the choice in the disk cache next to
// the kernels, under a key of its own (same atomic writes and trust rules).
// A later process reads the choice instead of timing again.
//
//===----------------------------------------------------------------------===//
#ifndef FA_RUNTIME_AUTOTUNE_H
#define FA_RUNTIME_AUTOTUNE_H

#include "lib/KernelSpec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fa {

/// Candidates timed at most, and the time budget of one tuning (compiles
/// included): once it is spent and two candidates are timed, the others
/// are not.
constexpr size_t kAutotuneCandidates = 4;
constexpr double kAutotuneBudgetSeconds = 10.0;
/// Timed runs per candidate (after one warm-up run); the median counts.
constexpr int kAutotuneRuns = 5;

/// The length bucket a choice is made for: the longer of the query and key
/// lengths rounded up to a power of two, at least 64.
int64_t lengthBucket(int64_t queryLength, int64_t keyLength);

/// The disk-cache key of the choice for `request` (tiles left to the
/// defaults, arch resolved) in `bucket`: the compiler and assembler
/// versions are part of it, as they are of the kernels' keys.
std::string autotuneKey(const KernelSpec &request, int64_t bucket,
                        const std::string &compilerVersion,
                        const std::string &assemblerId);

/// One timed candidate.
struct TimedCandidate {
  KernelSpec spec;
  double milliseconds = 0.0;
};

/// The stored form of a choice (JSON): its key (DiskCache checks it), the
/// request's canonical text, the bucket, the chosen tiles and every timing.
std::string tunedChoiceJson(const std::string &key, const KernelSpec &request,
                            int64_t bucket,
                            const KernelSpec &chosen,
                            const std::vector<TimedCandidate> &timings);

/// Reads a stored choice back: "" and `chosen` filled (the request with the
/// stored tiles) when it is the choice for `request` in `bucket` and a
/// valid spec; else why not.
std::string parseTunedChoice(const std::string &json,
                             const KernelSpec &request, int64_t bucket,
                             KernelSpec &chosen);

} // namespace fa

#endif // FA_RUNTIME_AUTOTUNE_H
