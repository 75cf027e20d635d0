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
      // A variant's mask drops keys (-inf), its score_mod rewrites scores.
      double maxScore = negInf;
      for (int64_t j = 0; j < visible; ++j) {
        if (p.maskMod && !p.maskMod(b, h, i, j)) {
          scores[j] = negInf;
          continue;
        }
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c)
          dot += double(qRow[c]) * double(kHead[j * d + c]);
        scores[j] = p.scale * dot;
        if (p.scoreMod)
          scores[j] = p.scoreMod(scores[j], b, h, i, j);
        maxScore = std::max(maxScore, scores[j]);
      }
      // A sink is one more score, without a value row.
      const bool sink = !p.sinks.empty();
      if (sink)
        maxScore = std::max(maxScore, p.sinks[h]);
      if (maxScore == negInf)
        continue; // no key (and no sink): O = 0, LSE = -inf
      double sum = sink ? std::exp(p.sinks[h] - maxScore) : 0.0;
      for (int64_t j = 0; j < visible; ++j)
        sum += std::exp(scores[j] - maxScore);
      double *out = result.output.data() + row * d;
      for (int64_t j = 0; j < visible; ++j) {
        if (scores[j] == negInf)
          continue;
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

ReferenceGradients referenceAttentionBackward(const AttentionProblem &p,
                                              const float *q, const float *k,
                                              const float *v,
                                              const float *gradOutput) {
  const int64_t d = p.headDim;
  const int64_t group = p.qHeads / p.kvHeads;
  ReferenceGradients result;
  result.gradQuery.assign(p.qElements(), 0.0);
  result.gradKey.assign(p.kvElements(), 0.0);
  result.gradValue.assign(p.kvElements(), 0.0);
  const bool sinks = !p.sinks.empty();
  // The sinks' gradient per (batch, query head), summed over the batch at
  // the end (tasks own batches).
  std::vector<double> sinkShares(sinks ? p.batch * p.qHeads : 0, 0.0);

  // One (batch, K/V head) per task: its dK and dV rows belong to it alone.
  auto work = [&](int64_t firstPair, int64_t lastPair) {
    std::vector<double> probs(p.kvLen), gradProbs(p.kvLen), slopes(p.kvLen);
    for (int64_t pair = firstPair; pair < lastPair; ++pair) {
      const int64_t b = pair / p.kvHeads, kvHead = pair % p.kvHeads;
      const int64_t kvOffset = (b * p.kvHeads + kvHead) * p.kvLen * d;
      const float *kHead = k + kvOffset, *vHead = v + kvOffset;
      double *dk = result.gradKey.data() + kvOffset;
      double *dv = result.gradValue.data() + kvOffset;
      for (int64_t h = kvHead * group; h < (kvHead + 1) * group; ++h) {
        for (int64_t i = 0; i < p.qLen; ++i) {
          const int64_t row = (b * p.qHeads + h) * p.qLen + i;
          const float *qRow = q + row * d, *doRow = gradOutput + row * d;
          double *dq = result.gradQuery.data() + row * d;
          int64_t visible = p.kvLen;
          if (p.causal)
            visible = std::clamp<int64_t>(i + p.kvLen - p.qLen + 1, 0, p.kvLen);
          // A variant: dropped keys get P = 0; a score_mod's slope (a
          // central difference of the C++ function, independent of the
          // compiler's symbolic derivative) multiplies dS.
          const double negInf = -std::numeric_limits<double>::infinity();
          double maxScore = negInf;
          for (int64_t j = 0; j < visible; ++j) {
            slopes[j] = 1.0;
            if (p.maskMod && !p.maskMod(b, h, i, j)) {
              probs[j] = negInf;
              continue;
            }
            double dot = 0.0;
            for (int64_t c = 0; c < d; ++c)
              dot += double(qRow[c]) * double(kHead[j * d + c]);
            probs[j] = p.scale * dot;
            if (p.scoreMod) {
              double s = probs[j], step = 1e-5 * std::max(1.0, std::fabs(s));
              slopes[j] = (p.scoreMod(s + step, b, h, i, j) -
                           p.scoreMod(s - step, b, h, i, j)) /
                          (2 * step);
              probs[j] = p.scoreMod(s, b, h, i, j);
            }
            maxScore = std::max(maxScore, probs[j]);
          }
          if (sinks)
            maxScore = std::max(maxScore, p.sinks[h]);
          if (maxScore == negInf)
            continue; // no key: no gradient flows
          double sinkWeight = sinks ? std::exp(p.sinks[h] - maxScore) : 0.0;
          double sum = sinkWeight;
          for (int64_t j = 0; j < visible; ++j)
            sum += (probs[j] = std::exp(probs[j] - maxScore));
          double delta = 0.0;
          for (int64_t j = 0; j < visible; ++j) {
            probs[j] /= sum;
            double dot = 0.0;
            for (int64_t c = 0; c < d; ++c)
              dot += double(doRow[c]) * double(vHead[j * d + c]);
            gradProbs[j] = dot;
            delta += probs[j] * dot;
          }
          // The sink's score: dP = 0 (no value row), so dS = P_sink (0 - D).
          if (sinks)
            sinkShares[b * p.qHeads + h] -= sinkWeight / sum * delta;
          for (int64_t j = 0; j < visible; ++j) {
            double gradScore =
                p.scale * probs[j] * (gradProbs[j] - delta) * slopes[j];
            for (int64_t c = 0; c < d; ++c) {
              dv[j * d + c] += probs[j] * double(doRow[c]);
              dq[c] += gradScore * double(kHead[j * d + c]);
              dk[j * d + c] += gradScore * double(qRow[c]);
            }
          }
        }
      }
    }
  };
  const int64_t pairs = p.batch * p.kvHeads;
  int64_t numThreads = std::max<int64_t>(
      1, std::min<int64_t>({int64_t(std::thread::hardware_concurrency()), pairs,
                            p.qHeads * p.batch * p.qLen * p.kvLen * d /
                                (1 << 20)}));
  std::vector<std::thread> threads;
  int64_t chunk = (pairs + numThreads - 1) / numThreads;
  for (int64_t t = 0; t < numThreads; ++t)
    threads.emplace_back(work, t * chunk, std::min(pairs, (t + 1) * chunk));
  for (std::thread &thread : threads)
    thread.join();
  if (sinks) {
    result.gradSinks.assign(p.qHeads, 0.0);
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.qHeads; ++h)
        result.gradSinks[h] += sinkShares[b * p.qHeads + h];
  }
  return result;
}

} // namespace fa
