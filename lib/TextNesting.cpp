//===- TextNesting.cpp - Bracket nesting of IR text before parsing --------===//
#include "lib/TextNesting.h"

namespace fa {

std::string checkTextNesting(std::string_view text, const std::string &what,
                             int64_t limit) {
  int64_t depth = 0, line = 1, column = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
      continue;
    }
    if (c == '"') { // a string literal, with \-escapes
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\')
          ++i;
        else if (text[i] == '\n')
          ++line, column = 0;
      }
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
      continue;
    }
    bool arrowOrCompare = c == '>' && ((i > 0 && text[i - 1] == '-') ||
                                       (i + 1 < text.size() && text[i + 1] == '='));
    if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > limit)
        return what + " nests brackets more than " + std::to_string(limit) +
               " deep (at line " + std::to_string(line) + ", column " +
               std::to_string(column) + "); the limit is " +
               std::to_string(limit);
    } else if ((c == ')' || c == ']' || c == '}' || c == '>') &&
               !arrowOrCompare && depth > 0) {
      --depth;
    }
  }
  return "";
}

} // namespace fa
