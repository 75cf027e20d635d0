//===- ReferenceAttention.cpp - float64 reference attention --------*- C++ -*-===//
#include "lib/ReferenceAttention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

namespace fa {

ReferenceResult referenceAttention(const AttentionProblem &p, const float *q,
                                   const float *k, const float *v) {
  const int64_t d = p.headDim;
  const int64_t group = p.qHeads / p.kvHeads;
  const double negInf = -std::numeric_limits<double>::infinity();
  ReferenceResult result;
  result.output.assign(p.qElements(), 0.0);
  result.lse.assign(p.lseElements(), negInf);

  // Rows are independent: split them over the cores (large GPU test cases).
  const int64_t totalRows = p.batch * p.qHeads * p.qLen;
  int64_t numThreads = std::max<int64_t>(
      1, std::min<int64_t>(std::thread::hardware_concurrency(),
                           totalRows * p.kvLen * d / (1 << 20)));
  // Threads only pay off for large problems (~1M multiply-adds each).
  auto work = [&](int64_t firstRow, int64_t lastRow) {
    std::vector<double> scores(p.kvLen);
    for (int64_t row = firstRow; row < lastRow; ++row) {
      const int64_t i = row % p.qLen;
      const int64_t h = (row / p.qLen) % p.qHeads;
      const int64_t b = row / (p.qLen * p.qHeads);
      const int64_t kvHead = h / group;
      const float *kHead = k + (b * p.kvHeads + kvHead) * p.kvLen * d;
      const float *vHead = v + (b * p.kvHeads + kvHead) * p.kvLen * d;
      const float *qRow = q + row * d;
      // Keys [0, visible) are unmasked.
      int64_t visible = p.kvLen;
      if (p.causal)
        visible = std::clamp<int64_t>(i + p.kvLen - p.qLen + 1, 0, p.kvLen);
      if (visible == 0)
        continue; // O = 0, LSE = -inf
      double maxScore = negInf;
      for (int64_t j = 0; j < visible; ++j) {
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c)
          dot += double(qRow[c]) * double(kHead[j * d + c]);
        scores[j] = p.scale * dot;
        maxScore = std::max(maxScore, scores[j]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < visible; ++j)
        sum += std::exp(scores[j] - maxScore);
      double *out = result.output.data() + row * d;
      for (int64_t j = 0; j < visible; ++j) {
        double prob = std::exp(scores[j] - maxScore) / sum;
        for (int64_t c = 0; c < d; ++c)
          out[c] += prob * double(vHead[j * d + c]);
      }
      result.lse[row] = maxScore + std::log(sum);
    }
  };
  std::vector<std::thread> threads;
  int64_t chunk = (totalRows + numThreads - 1) / numThreads;
  for (int64_t t = 0; t < numThreads; ++t)
    threads.emplace_back(work, t * chunk,
                         std::min(totalRows, (t + 1) * chunk));
  for (std::thread &thread : threads)
    thread.join();
  return result;
}

} // namespace fa
