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

/// The kernel described by `text`, if it is well formed and was compiled
/// for `spec` (the key is a hash; the entry also names what it holds).
bool fromMetadata(const std::string &text, const KernelSpec &spec,
                  KernelInfo &info);

} // namespace fa

#endif // FA_RUNTIME_KERNELMETADATA_H
