//===- TextNesting.h - Bracket nesting of IR text before parsing -*- C++ -*-===//
//
// MLIR's parser descends once per nested type, attribute or region: tens of
// thousands of nested brackets (a few dozen KB of hostile input) overflow
// the stack before any diagnostic. Every tool and API that parses IR text
// checks its nesting against one limit first, so that such input is an
// error that names the depth and the limit, never a crash.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_TEXTNESTING_H
#define FA_LIB_TEXTNESTING_H

#include <cstdint>
#include <string>
#include <string_view>

namespace fa {

/// The deepest bracket nesting accepted in IR text. The project's own IR
/// nests about 10 deep (a module, a function, a grid, two loops, a variant
/// region, a tensor type with its encoding); the parser needs well under
/// 1 KB of stack per level, so this stays far from an 8 MB stack.
constexpr int64_t kMaxTextNesting = 256;

/// "" when no bracket ((, [, {, <) of `text` nests deeper than `limit`,
/// else "<what> nests brackets more than <limit> deep (at line L, column
/// C); the limit is <limit>". Strings ("...") and comments (// to the end
/// of the line) are skipped; `->` and `>=` close nothing.
std::string checkTextNesting(std::string_view text, const std::string &what,
                             int64_t limit = kMaxTextNesting);

} // namespace fa

#endif // FA_LIB_TEXTNESTING_H
