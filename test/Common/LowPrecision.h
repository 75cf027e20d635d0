//===- LowPrecision.h - f16/bf16 values for the tests --------------*- C++ -*-===//
//
// The tests' names for lib/LowPrecision.h.
//
//===----------------------------------------------------------------------===//
#ifndef FA_TEST_COMMON_LOWPRECISION_H
#define FA_TEST_COMMON_LOWPRECISION_H

#include "lib/LowPrecision.h"

namespace fa::test {
using fa::fromBits;
using fa::nanBits;
using fa::semanticsOf;
using fa::toBits;
using fa::unitRoundoff;
} // namespace fa::test

#endif // FA_TEST_COMMON_LOWPRECISION_H
