//===- FakeTensors.h - Tensor descriptors that are never dereferenced -----===//
//
// Contiguous [B, H, S, D] descriptors at fake, aligned, disjoint addresses
// (1 TiB apart), for the runtime's checks and launch path where no kernel
// touches the data (no GPU, or the fake driver).
//
//===----------------------------------------------------------------------===//
#ifndef FA_TEST_COMMON_FAKETENSORS_H
#define FA_TEST_COMMON_FAKETENSORS_H

#include "runtime/Runtime.h"

#include <algorithm>
#include <cstdint>

namespace fa::test {

/// The next fake tensor of a set (`next` counts the set's tensors).
inline TensorArg fakeTensor(int &next, int64_t b, int64_t h, int64_t s,
                            int64_t d) {
  TensorArg t;
  t.data = reinterpret_cast<const void *>((uintptr_t(1) << 40) * ++next);
  int64_t sizes[4] = {b, h, s, d};
  int64_t strides[4] = {h * s * d, s * d, d, 1};
  std::copy(sizes, sizes + 4, t.sizes);
  std::copy(strides, strides + 4, t.strides);
  return t;
}

} // namespace fa::test

#endif // FA_TEST_COMMON_FAKETENSORS_H
