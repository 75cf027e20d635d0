//===- AttentionProblem.h - The sizes of one attention problem -----*- C++ -*-===//
#ifndef FA_LIB_ATTENTIONPROBLEM_H
#define FA_LIB_ATTENTIONPROBLEM_H

#include <cstdint>
#include <functional>
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
  /// A variant, written as plain C++ (independently of the compiler's
  /// regions): the score that replaces the scaled score s of query row i
  /// and key j of (batch b, query head h), and whether that score is kept
  /// (both with the causal mask). Empty: none.
  std::function<double(double s, int64_t b, int64_t h, int64_t i, int64_t j)>
      scoreMod;
  std::function<bool(int64_t b, int64_t h, int64_t i, int64_t j)> maskMod;
  /// Attention sinks: one logit per query head (Hq of them) that joins
  /// each row's softmax as a score without a value row. Empty: none.
  std::vector<double> sinks;

  int64_t qElements() const { return batch * qHeads * qLen * headDim; }
  int64_t kvElements() const { return batch * kvHeads * kvLen * headDim; }
  int64_t lseElements() const { return batch * qHeads * qLen; }
};

} // namespace fa

#endif // FA_LIB_ATTENTIONPROBLEM_H
