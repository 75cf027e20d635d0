//===- IRMutatorTest.cpp - fa-fuzz's structural IR mutations ----------------===//

#include "tools/fa-fuzz/IRMutator.h"

#include "gtest/gtest.h"

#include <random>
#include <string>

using fa::fuzz::IRMutation;
using fa::fuzz::mutateIR;

namespace {

const char *const kProblem =
    "func.func @a(%q: tensor<2x4x64x128xf16>, %k: tensor<2x4x64x128xf16>) "
    "-> tensor<2x4x64x128xf16> {\n"
    "  %0 = fa.something %q, %k {causal = true, pad = 8 : i64} : "
    "tensor<2x4x64x128xf16>\n"
    "  return %0 : tensor<2x4x64x128xf16>\n"
    "}\n";

size_t count(const std::string &text, const std::string &needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1))
    ++n;
  return n;
}

TEST(IRMutator, RenameDimensionChangesEveryOccurrenceAndNoName) {
  // Over many seeds: each mutant changes one number everywhere it stands
  // alone, never a digit inside a name (%arg0-like SSA names, f16, i64).
  for (unsigned seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    std::string text = kProblem;
    if (!mutateIR(text, IRMutation::renameDimension, rng))
      continue;
    EXPECT_NE(text, kProblem);
    EXPECT_EQ(count(text, "%0 = "), 1u) << text;
    EXPECT_EQ(count(text, "xf16>"), 5u) << text;
    EXPECT_EQ(count(text, ": i64"), 1u) << text;
    // The five shapes stay equal to one another.
    size_t first = text.find("tensor<");
    std::string shape = text.substr(first, text.find('>', first) - first);
    EXPECT_EQ(count(text, shape), 5u) << text;
  }
}

TEST(IRMutator, NeighboursOfTheLargestNumbersDoNotOverflow) {
  // Run under UndefinedBehaviorSanitizer in CI's sanitizer build: the +1
  // neighbour of INT64_MAX once overflowed.
  for (unsigned seed = 0; seed < 400; ++seed) {
    std::mt19937 rng(seed);
    std::string text = "%0 = x 9223372036854775807 : i64";
    mutateIR(text, seed % 2 ? IRMutation::changeNumber
                            : IRMutation::renameDimension,
             rng);
    EXPECT_NE(text.find("%0 = x "), std::string::npos) << text;
  }
}

TEST(IRMutator, ChangeNumberEditsOneToken) {
  int changed = 0;
  for (unsigned seed = 0; seed < 100; ++seed) {
    std::mt19937 rng(seed);
    std::string text = kProblem;
    if (mutateIR(text, IRMutation::changeNumber, rng)) {
      ++changed;
      EXPECT_NE(text, kProblem);
      EXPECT_EQ(count(text, "%0"), 2u) << text;
    }
  }
  EXPECT_GT(changed, 50);
}

TEST(IRMutator, SwapElementTypeEverywhere) {
  for (unsigned seed = 0; seed < 50; ++seed) {
    std::mt19937 rng(seed);
    std::string text = kProblem;
    if (!mutateIR(text, IRMutation::swapElementType, rng))
      continue;
    // f16 (5 shapes) or i64 (the pad's type) replaced wholesale.
    bool f16Swapped = count(text, "xf16>") == 0;
    bool i64Swapped = count(text, ": i64") == 0;
    EXPECT_TRUE(f16Swapped != i64Swapped) << text;
    EXPECT_EQ(count(text, "x64x128x"), 5u) << text;
  }
}

TEST(IRMutator, SwapKeywordAndEditLines) {
  bool flipped = false;
  for (unsigned seed = 0; seed < 100 && !flipped; ++seed) {
    std::mt19937 rng(seed);
    std::string text = kProblem;
    if (mutateIR(text, IRMutation::swapKeyword, rng))
      flipped = count(text, "causal = false") == 1;
  }
  EXPECT_TRUE(flipped);
  std::mt19937 rng(7);
  std::string text = kProblem;
  int edits = 0;
  for (int i = 0; i < 20; ++i)
    edits += mutateIR(text, IRMutation::editLines, rng);
  EXPECT_GT(edits, 10);
  // A text without numbers or lines offers nothing to those mutations.
  std::string word = "x";
  EXPECT_FALSE(mutateIR(word, IRMutation::renameDimension, rng));
  EXPECT_FALSE(mutateIR(word, IRMutation::editLines, rng));
  EXPECT_EQ(word, "x");
}

} // namespace
