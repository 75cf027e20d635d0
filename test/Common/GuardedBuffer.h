//===- GuardedBuffer.h - Host memory that ends at an unmapped page -*- C++ -*-===//
//
// A buffer whose last byte is the last byte before a PROT_NONE page: a
// kernel that reads one element past its end (a capture indexed with a
// padding row, say) faults instead of reading a neighbour's bytes.
//
//===----------------------------------------------------------------------===//
#ifndef FA_TEST_COMMON_GUARDEDBUFFER_H
#define FA_TEST_COMMON_GUARDEDBUFFER_H

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>

namespace fa::test {

class GuardedBuffer {
public:
  GuardedBuffer() = default;
  explicit GuardedBuffer(size_t bytes) { resize(bytes); }
  GuardedBuffer(const GuardedBuffer &) = delete;
  GuardedBuffer &operator=(const GuardedBuffer &) = delete;
  ~GuardedBuffer() { release(); }

  /// `bytes` bytes (contents unspecified) ending at the guard page.
  void resize(size_t bytes) {
    release();
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t dataPages = (bytes + page - 1) / page;
    mappedBytes = (dataPages + 1) * page;
    void *mapped = mmap(nullptr, mappedBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED)
      throw std::runtime_error("mmap of a guarded buffer failed");
    base = static_cast<char *>(mapped);
    char *guard = base + dataPages * page;
    if (mprotect(guard, page, PROT_NONE) != 0)
      throw std::runtime_error("mprotect of the guard page failed");
    begin = guard - bytes;
  }

  void *data() const { return begin; }

private:
  void release() {
    if (base)
      munmap(base, mappedBytes);
    base = begin = nullptr;
  }

  char *base = nullptr;
  char *begin = nullptr;
  size_t mappedBytes = 0;
};

} // namespace fa::test

#endif // FA_TEST_COMMON_GUARDEDBUFFER_H
