//===- KernelMetadata.h - A kernel's cache metadata -------------*- C++ -*-===//
//
// What the disk cache stores beside a kernel's cubin (JSON: name, spec,
// threads, shared memory, the assembler's report, the launches), and the
// one report the runtime gives for a kernel made of several.
//
//===----------------------------------------------------------------------===//
#ifndef FA_RUNTIME_KERNELMETADATA_H
#define FA_RUNTIME_KERNELMETADATA_H

#include "runtime/Runtime.h"

#include <string>
#include <vector>

namespace fa {

/// One report for a kernel made of several: the largest registers, stack
/// and static shared memory, the summed spills.
KernelResources combineResources(const std::string &name,
                                 const std::vector<KernelResources> &all);

/// The metadata of a compiled kernel, as the disk cache stores it.
std::string toMetadata(const KernelInfo &info);

/// The largest metadata (and autotune record) text read from the cache,
/// and the deepest JSON nesting: what fa writes is a few KB, 4 levels deep.
constexpr size_t kMaxMetadataBytes = size_t(1) << 20;
constexpr int64_t kMaxMetadataNesting = 16;

/// The kernel described by `text`, if it is well formed, every field is in
/// range (threads, shared memory, registers, spills, the launches' sizes)
/// and it was compiled for `spec` (its spec text, its kernel and function
/// names; the key is a hash, the entry also names what it holds).
bool fromMetadata(const std::string &text, const KernelSpec &spec,
                  KernelInfo &info);

/// "" when `cubin` is a CUDA ELF image for `spec`'s arch (64-bit ELF,
/// machine EM_CUDA, the SM version in its flags), else what it is not:
/// the cache loads only what it could have written.
std::string checkCubinImage(const std::vector<char> &cubin,
                            const KernelSpec &spec);

/// The same for the driver's JIT, whose image is the PTX it compiles at
/// load: "" when `image` is text ending in its only NUL that targets
/// `spec`'s arch (a `.target` line naming it), else what it is not.
std::string checkPtxImage(const std::vector<char> &image,
                          const KernelSpec &spec);

} // namespace fa

#endif // FA_RUNTIME_KERNELMETADATA_H
