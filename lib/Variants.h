//===- Variants.h - The built-in attention variants as spec text ---*- C++ -*-===//
//
// The score_mod and mask_mod functions of the common variants, as the MLIR
// text KernelSpec::scoreMod / maskMod take (one func.func each; see
// fa.attention in the dialect). Masks are aligned to the bottom right as
// the causal mask is: query row i sits at key position i + Sk - Sq.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_VARIANTS_H
#define FA_LIB_VARIANTS_H

#include <cstdint>
#include <string>

namespace fa::variants {

/// score_mod: cap * tanh(score / cap) (Gemma 2's logit softcapping).
std::string softcap(double cap);

/// score_mod: score - slope_h * |i + Sk - Sq - j| with ALiBi's geometric
/// slopes slope_h = 2^(-8 (h + 1) / numHeads).
std::string alibi(int64_t numHeads);

/// mask_mod: keys j with i + Sk - Sq - left <= j <= i + Sk - Sq + right
/// (FlashAttention's window_size = (left, right); a negative side is
/// unbounded).
std::string slidingWindow(int64_t left, int64_t right);

/// mask_mod: the first `prefix` keys, and the causal keys after them.
std::string prefixLm(int64_t prefix);

/// mask_mod: keys in the same chunk of `chunk` positions as the query
/// (chunked local attention). Not affine (a division): every tile is
/// visited and tested per element.
std::string sameChunk(int64_t chunk);

/// Variants that read tensors (captured tensors, passed with each call:
/// AttentionArgs::captures):

/// mask_mod: keys in the query's document; captures the document ids
/// (i32 [B, Sk], one per key position; query row i is at position
/// i + Sk - Sq, and a row before position 0 is in no document). Not
/// affine: every tile is visited.
std::string document();

/// score_mod: score + bias[h, i, j]; captures the bias (f16 [Hq, Sq, Sk]).
std::string scoreBias();

/// score_mod: ALiBi with slopes read per head, score - slopes[h] *
/// |i + Sk - Sq - j|; captures the slopes (f32 [Hq]): one kernel for any
/// slope values.
std::string alibiSlopes();

} // namespace fa::variants

#endif // FA_LIB_VARIANTS_H
