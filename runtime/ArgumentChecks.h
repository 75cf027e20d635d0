//===- ArgumentChecks.h - Tensor argument checks ----------------*- C++ -*-===//
//
// forward() and backward() check every tensor against the spec before
// anything is launched (checkAttentionArgs and checkAttentionBackwardArgs,
// declared in Runtime.h for tests and bindings, defined in
// ArgumentChecks.cpp). What the launch shares with those checks is here.
//
//===----------------------------------------------------------------------===//
#ifndef FA_RUNTIME_ARGUMENTCHECKS_H
#define FA_RUNTIME_ARGUMENTCHECKS_H

#include "runtime/Runtime.h"

#include <cstdint>

namespace fa {

/// The tensor's element count, saturated at INT64_MAX (sizes that multiply
/// past 64 bits are legal for broadcast inputs with zero strides).
int64_t numElements(const TensorArg &t, int rank);

/// "" when `given` are tensors a kernel reading `expected` can take (their
/// count, element types and ranks; each contiguous row-major with every
/// tensor's layout rules), else why not.
std::string checkCaptures(const std::vector<CaptureType> &expected,
                          const std::vector<CaptureArg> &given);

} // namespace fa

#endif // FA_RUNTIME_ARGUMENTCHECKS_H
