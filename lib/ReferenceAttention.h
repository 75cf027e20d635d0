//===- ReferenceAttention.h - float64 reference attention ----------*- C++ -*-===//
//
// The ground truth every kernel is checked against: attention computed with
// the full (not online) softmax in double precision.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_REFERENCEATTENTION_H
#define FA_LIB_REFERENCEATTENTION_H

#include "lib/AttentionProblem.h"

#include <cstdint>
#include <vector>

namespace fa {

/// O and LSE in float64. Rows that see no key get O = 0 and LSE = -inf.
struct ReferenceResult {
  std::vector<double> output;
  std::vector<double> lse;
};

/// Forward attention with the full softmax, in float64, from f32 inputs.
ReferenceResult referenceAttention(const AttentionProblem &problem,
                                   const float *q, const float *k,
                                   const float *v);

/// dQ, dK and dV in float64, shaped like Q, K and V.
struct ReferenceGradients {
  std::vector<double> gradQuery;
  std::vector<double> gradKey;
  std::vector<double> gradValue;
  /// With sinks: d loss / d sink[h], -sum over the head's rows of
  /// P_sink D (Hq values); empty without.
  std::vector<double> gradSinks;
};

/// The exact gradients of attention for the output gradient `gradOutput`
/// ([B, Hq, Sq, D]), from the full softmax in float64 (not from a forward's
/// O or LSE): with P the probabilities and s the scaled scores,
///   dV_j = sum_i P_ij dO_i,  dP_ij = dO_i . V_j,  D_i = sum_j P_ij dP_ij,
///   dS_ij = P_ij (dP_ij - D_i),  dQ_i = scale sum_j dS_ij K_j,
///   dK_j = scale sum_i dS_ij Q_i,
/// dK and dV summed over the query heads that share a K/V head.
ReferenceGradients referenceAttentionBackward(const AttentionProblem &problem,
                                              const float *q, const float *k,
                                              const float *v,
                                              const float *gradOutput);

} // namespace fa

#endif // FA_LIB_REFERENCEATTENTION_H
