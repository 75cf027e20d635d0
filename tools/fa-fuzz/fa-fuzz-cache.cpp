//===- fa-fuzz-cache.cpp - libFuzzer target: the kernel cache's reader ----===//
//
// What the runtime reads from a cache folder it does not fully control:
// entry framing (DiskCache::decode), the kernel metadata (fromMetadata),
// the cubin check (checkCubinImage) and autotune records
// (parseTunedChoice). The first byte of an input picks the target:
//   0: the bytes are an entry file, decoded as they are;
//   1: the rest is metadata, framed into a valid entry with an ELF-looking
//      cubin (so that mutations get past the checksum);
//   2: the rest is an autotune record.
// Any input must end in a clean accept or reject: no crash, no sanitizer
// report, no unbounded recursion. Seeds: scripts/fuzz.sh.
//
//===----------------------------------------------------------------------===//

#include "lib/KernelSpec.h"
#include "lib/Strategy/SpecRules.h"
#include "runtime/Autotune.h"
#include "runtime/DiskCache.h"
#include "runtime/KernelMetadata.h"
#include "runtime/Runtime.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  std::string rest(reinterpret_cast<const char *>(data) + 1, size - 1);
  fa::KernelSpec spec; // the lecture kernel, sm_90a
  spec.arch = "sm_90a";
  spec = withDefaults(spec);
  const std::string key(64, 'a');
  fa::CachedKernel entry;
  std::string why;
  switch (data[0] % 3) {
  case 0:
    if (fa::DiskCache::decode(rest, key, entry, why) !=
        fa::DiskCache::Lookup::hit)
      return 0;
    break;
  case 1: {
    fa::CachedKernel framed;
    framed.metadata = rest;
    framed.cubin.assign(64, 0);
    const char header[] = {0x7f, 'E', 'L', 'F', 2};
    std::copy(header, header + sizeof(header), framed.cubin.begin());
    if (fa::DiskCache::decode(fa::DiskCache::encode(framed), key, entry,
                              why) != fa::DiskCache::Lookup::hit)
      return 0;
    break;
  }
  default: {
    fa::KernelSpec chosen;
    (void)fa::parseTunedChoice(rest, spec, /*bucket=*/4096, chosen);
    return 0;
  }
  }
  fa::KernelInfo info;
  (void)fa::fromMetadata(entry.metadata, spec, info);
  (void)fa::checkCubinImage(entry.cubin, spec);
  return 0;
}
