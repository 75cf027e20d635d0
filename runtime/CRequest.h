//===- CRequest.h - A C ABI call's arguments as a kernel spec ---*- C++ -*-===//
//
// The C ABI's request path up to the runtime: the codes, flags and config
// of a call become a KernelSpec, its descriptors TensorArgs. CApi.cpp calls
// these; the fa-fuzz-request target drives them (and the checks behind
// them) with arbitrary values.
//
//===----------------------------------------------------------------------===//
#ifndef FA_RUNTIME_CREQUEST_H
#define FA_RUNTIME_CREQUEST_H

#include "lib/KernelSpec.h"
#include "runtime/Runtime.h"
#include "runtime/fa_runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fa {

/// Fills `spec` from a C call's arguments; returns "" or why they are not
/// a spec. C callers can pass any integer, so codes and flags are checked
/// by value (a flag is 0 or 1, never "nonzero"); the rest is
/// KernelSpec::validate's, shared with Python and fa-compile.
std::string specFromC(int64_t headDim, int dtype, int causal, double scale,
                      const fa_kernel_config *config, KernelSpec &spec);

/// Sets spec.sinks from a call's extras (sinks given, or config->sinks
/// already set); returns "" or why they do not fit: config->sinks without
/// extras->sinks, a backward with sinks but no grad_sinks, or grad_sinks
/// without sinks.
std::string sinksFromC(const fa_attention_extras *extras, bool backward,
                       KernelSpec &spec);

/// Sets spec.blockMask from a call's extras (the forward's key_ranges, the
/// backward's query_ranges, or config->block_mask already set); returns ""
/// or why they do not fit (config->block_mask without the table, the
/// other direction's table).
std::string blockMaskFromC(const fa_attention_extras *extras, bool backward,
                           KernelSpec &spec);

/// The captured tensors of a call's extras; returns "" or why they are
/// not captures (a count past kMaxCaptures or below 0, NULL with a count,
/// an unknown dtype, a rank outside 1-4). The kernel's own checks compare
/// them with what its variant reads.
std::string capturesFromC(const fa_attention_extras *extras,
                          std::vector<CaptureArg> &captures);

/// The oldest struct_size each versioned struct may have (its size when
/// struct_size came in); fields appended since read as 0 from an older
/// caller.
constexpr int64_t kFirstConfigSize = 104, kFirstExtrasSize = 112,
                  kFirstInfoSize = 392;

/// A caller's fa_kernel_config (NULL: all defaults) as this library's
/// struct: its first struct_size bytes, the rest 0. "" or what is wrong
/// with struct_size (below the first versioned layout, past this library's
/// struct).
std::string configFromC(const fa_kernel_config *config, fa_kernel_config &out);
/// The same for fa_attention_extras (NULL: none).
std::string extrasFromC(const fa_attention_extras *extras,
                        fa_attention_extras &out);
/// "" when `info` (or NULL) may be written: its struct_size is a layout
/// this library writes (the first struct_size bytes of its own).
std::string checkInfoSize(const fa_kernel_info *info);

/// A C tensor descriptor as the runtime takes it (its values unchecked:
/// the argument checks judge them).
TensorArg tensorFromC(const fa_tensor &t);

} // namespace fa

#endif // FA_RUNTIME_CREQUEST_H
