//===- ResolvedRequest.h - A request, resolved once -------------*- C++ -*-===//
//
// prepare(), load(), forward() and backward() turn a request (the spec as
// the caller wrote it, and the length bucket its defaults are chosen for)
// into a ResolvedRequest once: the spec validated, the defaults chosen (by
// the resource model's rule or by timing), the kernel found or compiled.
// The runtime keeps it under the request's RequestKey, so a request it has
// seen before costs one hash lookup: no validation, no canonical text, no
// SHA-256, no look at the default choices.
//
//===----------------------------------------------------------------------===//
#ifndef FA_RUNTIME_RESOLVEDREQUEST_H
#define FA_RUNTIME_RESOLVEDREQUEST_H

#include "lib/KernelSpec.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace fa {

struct KernelEntry;

/// What identifies a request: the requested spec's fields as written (tiles
/// 0 = the default, arch "" = the device's), the length bucket its defaults
/// are chosen for (0 where they do not depend on the length), and whether
/// the defaults are timed (autotuning) rather than taken from the resource
/// model. Compared field by field, hashed without building any text.
struct RequestKey {
  RequestKey(const KernelSpec &spec, int64_t bucket, bool tuned);

  int64_t headDim;
  ElementType dtype;
  ElementType outDtype; // O's (KernelSpec::outputDtype)
  bool causal, backward, deterministic;
  int64_t dqChains, blockM, blockN, numWarps, stages;
  Strategy strategy;
  std::string arch;
  uint64_t scaleBits; // the scale's bits: no rounding in the key
  std::string scoreMod, maskMod; // a variant's texts
  bool sinks, sinksPerRow, blockMask, blockMaskProgram, varlen, kvLens, splitKv,
      pagedKv, pageGather, cacheBatchIndex;
  int64_t bucket;
  bool tuned;

  bool operator==(const RequestKey &other) const;
  struct Hash {
    size_t operator()(const RequestKey &key) const;
  };
};

/// A request and the kernel that serves it.
struct ResolvedRequest {
  /// The spec as requested (arch filled in) and the bucket its defaults
  /// were chosen for.
  KernelSpec requested;
  int64_t bucket = 0;
  /// The kernel: compiled or read from a cache; loaded once a launch needed
  /// it. Its info.spec is the resolved spec, validated, with the defaults
  /// chosen (the candidate that did not spill, or the fastest).
  std::shared_ptr<KernelEntry> kernel;
};

} // namespace fa

#endif // FA_RUNTIME_RESOLVEDREQUEST_H
