//===- KernelSpec.h - Everything that changes a generated kernel ----*- C++ -*-===//
#ifndef FA_LIB_KERNELSPEC_H
#define FA_LIB_KERNELSPEC_H

#include <cstdint>
#include <string>

namespace fa {

enum class ElementType { f32, f16, bf16 };

/// The parameters that select one generated attention kernel.
struct KernelSpec {
  int64_t headDim = 128;
  ElementType dtype = ElementType::f32;
  bool causal = false;
  int64_t blockM = 8;   // query rows per tile (B_r)
  int64_t blockN = 32;  // key/value rows per tile (B_c)
  int64_t numWarps = 8; // warps per thread block
  std::string arch = "sm_90a";
  /// Softmax scale; 0 means the default 1/sqrt(headDim).
  double scale = 0.0;

  double effectiveScale() const;

  /// "" when the spec is valid, else what is wrong, naming value and limit.
  std::string validate() const;

  /// A C identifier naming the kernel, e.g. fa_fwd_d128_f32_causal_8x32_w8.
  std::string kernelName() const;
};

const char *toString(ElementType type);
/// Parses "f32", "f16", "bf16"; false if unknown.
bool parseElementType(const std::string &text, ElementType &type);

} // namespace fa

#endif // FA_LIB_KERNELSPEC_H
