//===- ReferenceAttention.cpp - float64 reference attention --------*- C++ -*-===//
#include "lib/ReferenceAttention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fa {

ReferenceResult referenceAttention(const AttentionProblem &p, const float *q,
                                   const float *k, const float *v) {
  const int64_t d = p.headDim;
  const int64_t group = p.qHeads / p.kvHeads;
  const double negInf = -std::numeric_limits<double>::infinity();
  ReferenceResult result;
  result.output.assign(p.qElements(), 0.0);
  result.lse.assign(p.lseElements(), negInf);
  std::vector<double> scores(p.kvLen);

  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.qHeads; ++h) {
      const int64_t kvHead = h / group;
      const float *kHead = k + (b * p.kvHeads + kvHead) * p.kvLen * d;
      const float *vHead = v + (b * p.kvHeads + kvHead) * p.kvLen * d;
      for (int64_t i = 0; i < p.qLen; ++i) {
        const int64_t row = (b * p.qHeads + h) * p.qLen + i;
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
    }
  return result;
}

} // namespace fa
