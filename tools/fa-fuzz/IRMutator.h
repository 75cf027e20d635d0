//===- IRMutator.h - Structural mutations of MLIR text for fa-fuzz -*- C++ -*-===//
//
// libFuzzer's byte edits rarely keep MLIR parseable, so most of its inputs
// stop in the parser. These mutations edit the text as IR: a dimension
// changed everywhere it appears (so shapes stay consistent and the verifiers
// and passes see the new size), one element type swapped for another, one
// encoding or keyword swapped for a sibling, one number set to a boundary
// value, whole lines deleted, duplicated or swapped. What they produce is
// still arbitrary text; the target must reject what is invalid.
//
//===----------------------------------------------------------------------===//
#ifndef FA_TOOLS_FA_FUZZ_IRMUTATOR_H
#define FA_TOOLS_FA_FUZZ_IRMUTATOR_H

#include <cstdint>
#include <random>
#include <string>

namespace fa::fuzz {

enum class IRMutation {
  /// Every occurrence of one integer token replaced by another value.
  renameDimension,
  /// One occurrence of an integer token replaced.
  changeNumber,
  /// Every occurrence of one element type replaced by another.
  swapElementType,
  /// One encoding name or keyword replaced by a sibling (blocked <-> mma,
  /// true <-> false, ...).
  swapKeyword,
  /// One line deleted, duplicated, or swapped with another.
  editLines,
};
constexpr int numIRMutations = 5;

/// Applies `mutation` to `text` with randomness from `rng`; returns false
/// (text unchanged) when the text has nothing the mutation applies to.
bool mutateIR(std::string &text, IRMutation mutation, std::mt19937 &rng);

} // namespace fa::fuzz

#endif // FA_TOOLS_FA_FUZZ_IRMUTATOR_H
