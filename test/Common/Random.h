//===- Random.h - Random test inputs --------------------------------*- C++ -*-===//
#ifndef FA_TEST_COMMON_RANDOM_H
#define FA_TEST_COMMON_RANDOM_H

#include <cstdint>
#include <random>
#include <vector>

namespace fa::test {

/// Standard normal values; the caller seeds `rng` and prints the seed when a
/// check fails.
inline std::vector<float> randomNormal(int64_t n, std::mt19937_64 &rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float &v : values)
    v = dist(rng);
  return values;
}

} // namespace fa::test

#endif // FA_TEST_COMMON_RANDOM_H
