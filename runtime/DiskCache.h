//===- DiskCache.h - Compiled kernels on disk -----------------------*- C++ -*-===//
//
// One file per kernel, named by its cache key:
//
//   "FAKRNL01" | u64 metadata size | metadata (JSON) | u64 cubin size |
//   cubin | SHA-256 of everything before
//
// Entries are written to a unique temporary file and renamed into place, so
// readers never see a partial entry and two processes filling the same entry
// both succeed (the last rename wins; both wrote the same kernel). A file
// that is truncated, altered or holds another key is reported as corrupt.
//
//===----------------------------------------------------------------------===//
#ifndef FA_RUNTIME_DISKCACHE_H
#define FA_RUNTIME_DISKCACHE_H

#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"

namespace fa {

struct CachedKernel {
  std::string metadata; // JSON
  std::vector<char> cubin;
};

class DiskCache {
public:
  explicit DiskCache(std::string dir) : dir(std::move(dir)) {}

  /// Creates the folder; "" on success, else why not: it cannot be created,
  /// or it is not trusted (owned by another user, or writable by others).
  std::string open() const;

  std::string pathFor(const std::string &key) const;

  enum class Lookup { hit, miss, corrupt };
  /// A hit fills `entry`; `why` says what is wrong with a corrupt entry (a
  /// path that is not a regular file is one; it is never opened).
  Lookup read(const std::string &key, CachedKernel &entry,
              std::string &why) const;

  /// Atomically writes the entry; "" on success, else why not.
  std::string write(const std::string &key, const CachedKernel &entry) const;

  /// An entry's bytes as a file holds them (the framing above).
  static std::string encode(const CachedKernel &entry);
  /// The entry framed in `data`, checked as read() checks a file's bytes
  /// (header, sizes, checksum, its key): hit or corrupt, with `why`.
  static Lookup decode(llvm::StringRef data, const std::string &key,
                       CachedKernel &entry, std::string &why);

  const std::string &directory() const { return dir; }

  /// Removes temporary files of writers that died before their rename
  /// (untouched for 10 minutes). open() does it.
  void removeStaleTemporaries() const;

private:
  std::string dir;
};

/// $FA_CACHE_DIR, else $HOME/.cache/fa, else "" (no disk cache: there is
/// no shared fallback).
std::string defaultCacheDir();

} // namespace fa

#endif // FA_RUNTIME_DISKCACHE_H
