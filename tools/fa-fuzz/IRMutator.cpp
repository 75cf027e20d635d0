//===- IRMutator.cpp - Structural mutations of MLIR text for fa-fuzz ------===//

#include "tools/fa-fuzz/IRMutator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringExtras.h"

#include <limits>
#include <string>

namespace fa::fuzz {
namespace {

/// A token of the text: [begin, end) byte offsets.
struct Span {
  size_t begin, end;
};

/// Characters that make a digit part of a name (`%arg0`, `f16`, `^bb1`,
/// `@fa_fwd_d128`).
bool continuesName(char c) {
  return llvm::isAlpha(c) || c == '_' || c == '%' ||
         c == '#' || c == '^' || c == '$' || c == '@';
}

/// Decimal integer tokens that are not part of a name: the dimensions
/// (`4x8xf32` has two), counts and attribute values.
llvm::SmallVector<Span> integerTokens(llvm::StringRef text) {
  llvm::SmallVector<Span> spans;
  for (size_t i = 0; i < text.size();) {
    if (!llvm::isDigit(text[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && llvm::isDigit(text[end]))
      ++end;
    // A shape's `x` separates dimensions; any other letter makes a name.
    bool shapeBefore = i >= 2 && text[i - 1] == 'x' &&
                       (llvm::isDigit(text[i - 2]) || text[i - 2] == '?');
    bool freeBefore = i == 0 || !continuesName(text[i - 1]) || shapeBefore;
    bool freeAfter = end == text.size() || !continuesName(text[end]) ||
                     text[end] == 'x';
    if (freeBefore && freeAfter)
      spans.push_back({i, end});
    i = end;
  }
  return spans;
}

/// Values that sit on the limits the verifiers and the passes check.
std::string boundaryValue(llvm::StringRef old, std::mt19937 &rng) {
  static const char *const values[] = {
      "0",          "1",          "2",          "3",
      "7",          "8",          "15",         "16",
      "17",         "24",         "31",         "32",
      "33",         "48",         "63",         "64",
      "65",         "96",         "127",        "128",
      "129",        "192",        "255",        "256",
      "257",        "512",        "1024",       "4096",
      "65535",      "65536",      "2147483647", "2147483648",
      "4294967295", "4294967296", "9223372036854775807"};
  int64_t value = 0;
  switch (rng() % 4) {
  case 0:
  case 1:
    return values[rng() % std::size(values)];
  default:
    // A neighbour of the old value: +-1, double, half.
    if (old.getAsInteger(10, value))
      return values[rng() % std::size(values)];
    switch (rng() % 4) {
    case 0: // (saturated: the token may be INT64_MAX already)
      return std::to_string(
          value < std::numeric_limits<int64_t>::max() ? value + 1 : value);
    case 1:
      return std::to_string(value > 0 ? value - 1 : 0);
    case 2:
      return std::to_string(value < (int64_t(1) << 40) ? value * 2 : value);
    default:
      return std::to_string(value / 2);
    }
  }
}

/// Offsets of `token` in `text` where it stands as a whole token (no letter
/// or digit right before or after it).
llvm::SmallVector<size_t> wholeTokenPositions(llvm::StringRef text,
                                              llvm::StringRef token) {
  llvm::SmallVector<size_t> positions;
  for (size_t at = text.find(token); at != llvm::StringRef::npos;
       at = text.find(token, at + 1)) {
    size_t end = at + token.size();
    if ((at == 0 || !llvm::isAlnum(text[at - 1])) &&
        (end == text.size() || !llvm::isAlnum(text[end])))
      positions.push_back(at);
  }
  return positions;
}

/// Sibling groups: a token of a group may become any other of it.
const llvm::ArrayRef<const char *> elementTypes() {
  static const char *const types[] = {"f32", "f16", "bf16", "f64", "i32",
                                      "i8",  "i1",  "index"};
  return types;
}
const llvm::SmallVector<llvm::ArrayRef<const char *>> &keywordGroups() {
  static const char *const encodings[] = {"blocked", "shared", "mma",
                                          "mma_operand", "swizzled_shared"};
  static const char *const booleans[] = {"true", "false"};
  static const char *const programs[] = {"\"delta\"", "\"dkdv\"", "\"dq\""};
  static const char *const strategies[] = {"simt", "mma", "wgmma"};
  static const char *const operands[] = {"lhs", "rhs", "acc"};
  static const llvm::SmallVector<llvm::ArrayRef<const char *>> groups = {
      encodings, booleans, programs, strategies, operands};
  return groups;
}

/// Text of the span.
llvm::StringRef spelling(llvm::StringRef text, Span span) {
  return text.slice(span.begin, span.end);
}

bool renameDimension(std::string &text, std::mt19937 &rng) {
  llvm::SmallVector<Span> tokens = integerTokens(text);
  if (tokens.empty())
    return false;
  std::string old = spelling(text, tokens[rng() % tokens.size()]).str();
  std::string replacement = boundaryValue(old, rng);
  if (replacement == old)
    return false;
  // Every standalone occurrence, back to front so offsets stay valid.
  for (const Span &span : llvm::reverse(tokens))
    if (spelling(text, span) == old)
      text.replace(span.begin, span.end - span.begin, replacement);
  return true;
}

bool changeNumber(std::string &text, std::mt19937 &rng) {
  llvm::SmallVector<Span> tokens = integerTokens(text);
  if (tokens.empty())
    return false;
  Span pick = tokens[rng() % tokens.size()];
  std::string old = spelling(text, pick).str();
  std::string replacement = boundaryValue(old, rng);
  if (rng() % 8 == 0)
    replacement = "-" + replacement;
  text.replace(pick.begin, pick.end - pick.begin, replacement);
  return replacement != old;
}

bool swapFromGroup(std::string &text, llvm::ArrayRef<const char *> group,
                   bool everywhere, std::mt19937 &rng) {
  llvm::SmallVector<const char *> present;
  for (const char *token : group)
    if (llvm::StringRef(text).contains(token))
      present.push_back(token);
  if (present.empty())
    return false;
  llvm::StringRef from = present[rng() % present.size()];
  llvm::StringRef to = group[rng() % group.size()];
  if (from == to)
    return false;
  llvm::SmallVector<size_t> positions = wholeTokenPositions(text, from);
  if (positions.empty())
    return false;
  if (!everywhere) {
    text.replace(positions[rng() % positions.size()], from.size(), to.str());
    return true;
  }
  // Back to front, so that the offsets before stay valid.
  for (size_t at : llvm::reverse(positions))
    text.replace(at, from.size(), to.str());
  return true;
}

bool editLines(std::string &text, std::mt19937 &rng) {
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(text).split(lines, '\n');
  if (lines.size() < 2)
    return false;
  llvm::SmallVector<std::string> edited(lines.begin(), lines.end());
  size_t a = rng() % edited.size(), b = rng() % edited.size();
  switch (rng() % 3) {
  case 0:
    edited.erase(edited.begin() + a);
    break;
  case 1:
    edited.insert(edited.begin() + a, edited[b]);
    break;
  default:
    if (a == b)
      return false;
    std::swap(edited[a], edited[b]);
    break;
  }
  text = llvm::join(edited, "\n");
  return true;
}

} // namespace

bool mutateIR(std::string &text, IRMutation mutation, std::mt19937 &rng) {
  switch (mutation) {
  case IRMutation::renameDimension:
    return renameDimension(text, rng);
  case IRMutation::changeNumber:
    return changeNumber(text, rng);
  case IRMutation::swapElementType:
    return swapFromGroup(text, elementTypes(), /*everywhere=*/true, rng);
  case IRMutation::swapKeyword: {
    const auto &groups = keywordGroups();
    return swapFromGroup(text, groups[rng() % groups.size()],
                         /*everywhere=*/false, rng);
  }
  case IRMutation::editLines:
    return editLines(text, rng);
  }
  return false;
}

} // namespace fa::fuzz
