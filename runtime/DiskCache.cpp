//===- DiskCache.cpp - Compiled kernels on disk ---------------------*- C++ -*-===//
#include "runtime/DiskCache.h"
#include "runtime/KernelMetadata.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>
#include <unistd.h>
#include <cstring>

namespace fa {

static constexpr char kMagic[8] = {'F', 'A', 'K', 'R', 'N', 'L', '0', '1'};
static constexpr size_t kDigestSize = 32;

std::string defaultCacheDir() {
  if (const char *dir = std::getenv("FA_CACHE_DIR"); dir && *dir)
    return dir;
  llvm::SmallString<256> path;
  if (const char *home = std::getenv("HOME"); home && *home) {
    path = home;
    llvm::sys::path::append(path, ".cache", "fa");
    return std::string(path);
  }
  // No shared fallback such as /tmp: another user could plant kernels there.
  return "";
}

std::string DiskCache::open() const {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return "cannot create the kernel cache folder " + dir + ": " +
           ec.message();
  // Kernels from this folder are loaded and run: only a folder that this
  // user owns and that others may not write to is trusted (group write is
  // the norm with per-user groups).
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(dir, status))
    return "cannot read the kernel cache folder " + dir + ": " + ec.message();
  if (status.type() != llvm::sys::fs::file_type::directory_file)
    return "the kernel cache folder " + dir + " is not a directory";
  if (status.getUser() != ::geteuid())
    return "the kernel cache folder " + dir + " belongs to user " +
           std::to_string(status.getUser()) +
           ", not to this process's user: not trusted";
  if (status.permissions() & llvm::sys::fs::others_write)
    return "the kernel cache folder " + dir +
           " is writable by other users: not trusted (chmod o-w it or set "
           "FA_CACHE_DIR)";
  removeStaleTemporaries();
  return "";
}

/// Whether `name` is a temporary file write() makes: a key (64 lower-case
/// hex digits, optionally after "autotune-"), ".tmp-" and the 8 hex digits
/// createUniqueFile puts in place of "%%%%%%%%". Nothing else in the folder
/// is fa's to delete: FA_CACHE_DIR may be a folder with other files.
static bool isOwnTemporaryName(llvm::StringRef name) {
  auto isHex = [](llvm::StringRef s, size_t length) {
    return s.size() == length && llvm::all_of(s, [](char c) {
             return llvm::isDigit(c) || (c >= 'a' && c <= 'f');
           });
  };
  name.consume_front("autotune-");
  auto [key, suffix] = name.split(".tmp-");
  return isHex(key, 64) && isHex(suffix, 8);
}

void DiskCache::removeStaleTemporaries() const {
  // A writer killed between creating its temporary file and renaming it
  // leaves the file behind; one untouched for this long has no writer.
  constexpr auto kStaleAfter = std::chrono::minutes(10);
  auto now = std::chrono::system_clock::now();
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!isOwnTemporaryName(name))
      continue;
    llvm::sys::fs::file_status status;
    if (llvm::sys::fs::status(it->path(), status, /*Follow=*/false) ||
        status.type() != llvm::sys::fs::file_type::regular_file)
      continue;
    if (now - status.getLastModificationTime() > kStaleAfter)
      llvm::sys::fs::remove(it->path());
  }
}

std::string DiskCache::pathFor(const std::string &key) const {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, key + ".fakernel");
  return std::string(path);
}

DiskCache::Lookup DiskCache::read(const std::string &key, CachedKernel &entry,
                                  std::string &why) const {
  std::string path = pathFor(key);
  auto corrupt = [&](const std::string &what) {
    why = path + ": " + what;
    return Lookup::corrupt;
  };
  // Only regular files are read: a FIFO or device node in an entry's place
  // would block the reader or stream forever.
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(path, status, /*Follow=*/false))
    return Lookup::miss;
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return corrupt("not a regular file");
  // An entry is loaded and run: only what this user wrote (and others may
  // not change) is trusted, as for the folder.
  if (status.getUser() != ::geteuid())
    return corrupt("owned by user " + std::to_string(status.getUser()) +
                   ", not by this process's user: not trusted");
  if (status.permissions() & llvm::sys::fs::others_write)
    return corrupt("writable by other users: not trusted");
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return Lookup::miss;
  Lookup lookup = decode((*buffer)->getBuffer(), key, entry, why);
  if (lookup == Lookup::corrupt)
    why = path + ": " + why;
  return lookup;
}

DiskCache::Lookup DiskCache::decode(llvm::StringRef data,
                                    const std::string &key,
                                    CachedKernel &entry, std::string &why) {
  auto corrupt = [&](const std::string &what) {
    why = what;
    return Lookup::corrupt;
  };
  size_t pos = 0;
  auto readSize = [&](uint64_t &size) {
    if (data.size() - pos < 8)
      return false;
    size = llvm::support::endian::read64le(data.data() + pos);
    pos += 8;
    return true;
  };
  if (data.size() < sizeof(kMagic) + 16 + kDigestSize ||
      std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0)
    return corrupt("not a kernel cache entry (bad header or truncated)");
  pos = sizeof(kMagic);
  uint64_t metadataSize = 0, cubinSize = 0;
  if (!readSize(metadataSize) || metadataSize > data.size() - pos)
    return corrupt("truncated metadata");
  if (metadataSize > kMaxMetadataBytes)
    return corrupt("metadata of " + std::to_string(metadataSize) +
                   " bytes, over the " + std::to_string(kMaxMetadataBytes) +
                   " fa writes at most");
  llvm::StringRef metadata = data.substr(pos, metadataSize);
  pos += metadataSize;
  if (!readSize(cubinSize) || cubinSize > data.size() - pos ||
      data.size() - pos - cubinSize != kDigestSize)
    return corrupt("truncated or oversized cubin");
  llvm::StringRef cubin = data.substr(pos, cubinSize);
  pos += cubinSize;
  std::array<uint8_t, 32> digest = llvm::SHA256::hash(
      llvm::arrayRefFromStringRef(data.substr(0, pos)));
  if (std::memcmp(digest.data(), data.data() + pos, kDigestSize) != 0)
    return corrupt("checksum mismatch");
  // The metadata names its key: a file renamed to another key is not used.
  if (metadata.find("\"key\":\"" + key + "\"") == llvm::StringRef::npos)
    return corrupt("entry belongs to another key");
  entry.metadata = metadata.str();
  entry.cubin.assign(cubin.begin(), cubin.end());
  return Lookup::hit;
}

std::string DiskCache::encode(const CachedKernel &entry) {
  std::string contents(kMagic, sizeof(kMagic));
  auto appendSize = [&](uint64_t size) {
    char bytes[8];
    llvm::support::endian::write64le(bytes, size);
    contents.append(bytes, 8);
  };
  appendSize(entry.metadata.size());
  contents += entry.metadata;
  appendSize(entry.cubin.size());
  contents.append(entry.cubin.data(), entry.cubin.size());
  std::array<uint8_t, 32> digest =
      llvm::SHA256::hash(llvm::arrayRefFromStringRef(contents));
  contents.append(reinterpret_cast<const char *>(digest.data()),
                  digest.size());
  return contents;
}

std::string DiskCache::write(const std::string &key,
                             const CachedKernel &entry) const {
  std::string contents = encode(entry);

  // Unique temporary file in the same folder, then an atomic rename.
  llvm::SmallString<256> tempPath;
  int fd = -1;
  llvm::SmallString<256> model(dir);
  llvm::sys::path::append(model, key + ".tmp-%%%%%%%%");
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, tempPath))
    return "cannot create a file in " + dir + ": " + ec.message();
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << contents;
    os.flush();
    if (os.has_error()) {
      llvm::sys::fs::remove(tempPath);
      return "cannot write " + std::string(tempPath) + ": " +
             os.error().message();
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tempPath, pathFor(key))) {
    llvm::sys::fs::remove(tempPath);
    return "cannot rename into " + pathFor(key) + ": " + ec.message();
  }
  return "";
}

} // namespace fa
