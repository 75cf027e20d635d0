//===- ReferenceAttention.h - float64 reference attention ----------*- C++ -*-===//
//
// The ground truth every kernel is checked against: attention computed with
// the full (not online) softmax in double precision.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_REFERENCEATTENTION_H
#define FA_LIB_REFERENCEATTENTION_H

#include <cstdint>
#include <vector>

namespace fa {

/// One attention problem. Buffers are contiguous: Q and O [B, Hq, Sq, D],
/// K and V [B, Hkv, Sk, D], LSE [B, Hq, Sq]. Query head h uses K/V head
/// h / (Hq / Hkv). The causal mask is aligned bottom-right: row i sees key
/// j iff j <= i + Sk - Sq.
struct AttentionProblem {
  int64_t batch = 1;
  int64_t qHeads = 1;
  int64_t kvHeads = 1;
  int64_t qLen = 1;
  int64_t kvLen = 1;
  int64_t headDim = 64;
  bool causal = false;
  double scale = 0.125;

  int64_t qElements() const { return batch * qHeads * qLen * headDim; }
  int64_t kvElements() const { return batch * kvHeads * kvLen * headDim; }
  int64_t lseElements() const { return batch * qHeads * qLen; }
};

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
