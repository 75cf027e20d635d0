//===- CudaToolkit.h - Finding and running ptxas --------------------*- C++ -*-===//
#ifndef FA_LIB_CUDATOOLKIT_H
#define FA_LIB_CUDATOOLKIT_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fa {

/// ptxas from $PATH, then $CUDA_ROOT/bin, then /usr/local/cuda/bin; an error
/// that names the places looked at when it is nowhere.
llvm::Expected<std::string> findPtxas();

/// Resources of one kernel as `ptxas -v` reports them.
struct KernelResources {
  std::string name;
  int64_t registers = 0;
  int64_t staticSharedBytes = 0;
  int64_t stackFrameBytes = 0;
  int64_t spillStoreBytes = 0;
  int64_t spillLoadBytes = 0;
  int64_t barriers = 0;

  bool spills() const { return spillStoreBytes > 0 || spillLoadBytes > 0; }
};

/// Parses the `ptxas -v` output: one entry per function, in order.
std::vector<KernelResources> parsePtxasReport(const std::string &text);

struct PtxasResult {
  std::vector<char> cubin;
  std::string log; // ptxas -v output
  std::vector<KernelResources> kernels;
};

/// Assembles `ptx` for `arch` (e.g. sm_90a) with ptxas -O3 -v.
llvm::Expected<PtxasResult> runPtxas(const std::string &ptx,
                                     const std::string &arch);

/// "ptxas: NVIDIA (R) Ptx optimizing assembler ... V13.0.88" -> "13.0.88".
llvm::Expected<std::string> ptxasVersion();

} // namespace fa

#endif // FA_LIB_CUDATOOLKIT_H
