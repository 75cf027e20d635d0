//===- TextNesting.h - IR text checks before parsing ------------*- C++ -*-===//
//
// MLIR's parser descends once per nested type, attribute or region: tens of
// thousands of nested brackets (a few dozen KB of hostile input) overflow
// the stack before any diagnostic. MLIR 22's parser also crashes on a dense
// array of `index` elements (it takes index for a float type). Every tool
// and API that parses IR text runs `checkTextBeforeParsing` first, so that
// such input is an error that names what and where, never a crash.
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
/// of the line) are skipped; `->` and `>=` close nothing. (JSON is checked
/// with this too.)
std::string checkTextNesting(std::string_view text, const std::string &what,
                             int64_t limit = kMaxTextNesting);

/// "" when no dense array attribute of `text` has an element type that
/// MLIR 22's parser crashes on, else an error naming it and where: the
/// element type `index` (`array<index: 1>`), or a type alias (`array<!t>`,
/// refused because the alias may name index; dense arrays of dialect types
/// are refused by the parser anyway). Strings and comments are skipped.
std::string checkDenseArrayElements(std::string_view text,
                                    const std::string &what);

/// Both checks above, for IR text about to be parsed.
std::string checkTextBeforeParsing(std::string_view text,
                                   const std::string &what);

} // namespace fa

#endif // FA_LIB_TEXTNESTING_H
