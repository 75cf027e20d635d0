//===- TextNesting.cpp - IR text checks before parsing --------------------===//
#include "lib/TextNesting.h"

#include <cctype>

namespace fa {

/// Calls `visit(i, line, column)` for every character of `text` outside
/// string literals and `//` comments; `visit` returns false to stop.
template <typename Visit>
static void forEachCodeChar(std::string_view text, Visit visit) {
  int64_t line = 1, column = 0;
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
    if (!visit(i, line, column))
      return;
  }
}

static std::string where(int64_t line, int64_t column) {
  return "at line " + std::to_string(line) + ", column " +
         std::to_string(column);
}

std::string checkTextNesting(std::string_view text, const std::string &what,
                             int64_t limit) {
  int64_t depth = 0;
  std::string error;
  forEachCodeChar(text, [&](size_t i, int64_t line, int64_t column) {
    char c = text[i];
    bool arrowOrCompare = c == '>' && ((i > 0 && text[i - 1] == '-') ||
                                       (i + 1 < text.size() && text[i + 1] == '='));
    if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > limit) {
        error = what + " nests brackets more than " + std::to_string(limit) +
                " deep (" + where(line, column) + "); the limit is " +
                std::to_string(limit);
        return false;
      }
    } else if ((c == ')' || c == ']' || c == '}' || c == '>') &&
               !arrowOrCompare && depth > 0) {
      --depth;
    }
    return true;
  });
  return error;
}

static bool isIdentifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
         c == '.';
}

std::string checkDenseArrayElements(std::string_view text,
                                    const std::string &what) {
  std::string error;
  forEachCodeChar(text, [&](size_t i, int64_t line, int64_t column) {
    constexpr std::string_view keyword = "array";
    if (text.compare(i, keyword.size(), keyword) != 0 ||
        (i > 0 && (isIdentifierChar(text[i - 1]) || text[i - 1] == '#' ||
                   text[i - 1] == '!')))
      return true;
    size_t j = i + keyword.size();
    auto skipSpace = [&] {
      while (j < text.size() &&
             std::isspace(static_cast<unsigned char>(text[j])))
        ++j;
    };
    skipSpace();
    if (j >= text.size() || text[j] != '<')
      return true;
    ++j;
    skipSpace();
    constexpr std::string_view index = "index";
    if (text.compare(j, index.size(), index) == 0 &&
        (j + index.size() >= text.size() ||
         !isIdentifierChar(text[j + index.size()]))) {
      error = what +
              " has a dense array of index elements (array<index ...>, " +
              where(line, column) +
              "), which MLIR's parser cannot read; use i64 elements";
      return false;
    }
    if (j < text.size() && text[j] == '!') {
      error = what +
              " has a dense array whose element type is a type alias "
              "(array<!...>, " +
              where(line, column) +
              "); write the element type out (an alias may name index, "
              "which MLIR's parser cannot read in a dense array)";
      return false;
    }
    return true;
  });
  return error;
}

std::string checkTextBeforeParsing(std::string_view text,
                                   const std::string &what) {
  std::string error = checkTextNesting(text, what);
  if (error.empty())
    error = checkDenseArrayElements(text, what);
  return error;
}

} // namespace fa
