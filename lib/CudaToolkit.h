//===- CudaToolkit.h - Finding and running ptxas --------------------*- C++ -*-===//
#ifndef FA_LIB_CUDATOOLKIT_H
#define FA_LIB_CUDATOOLKIT_H

#include "lib/KernelResources.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fa {

/// ptxas from $PATH, then $CUDA_ROOT/bin, then /usr/local/cuda/bin; an error
/// that names the places looked at when it is nowhere.
llvm::Expected<std::string> findPtxas();

/// Runs `program` (args[0] is its name) with `redirects` (stdin, stdout,
/// stderr; nullopt = inherited) and waits for it, killing it after
/// `seconds`: its exit code, or -1 with `error` when it could not run or
/// was killed. Safe on several threads at once (no alarm()).
int runWithTimeout(llvm::StringRef program,
                   llvm::ArrayRef<llvm::StringRef> args,
                   llvm::ArrayRef<std::optional<llvm::StringRef>> redirects,
                   unsigned seconds, std::string *error = nullptr);

/// Parses the `ptxas -v` output: one entry per function, in order.
std::vector<KernelResources> parsePtxasReport(const std::string &text);

struct PtxasResult {
  std::vector<char> cubin;
  std::string log; // ptxas -v output
  std::vector<KernelResources> kernels;
};

/// The kernels (`.entry` functions) a PTX module defines.
size_t countEntryPoints(llvm::StringRef ptx);

/// Assembles `ptx` for `arch` (e.g. sm_90a) with ptxas -O3 -v; a module of
/// several kernels with --split-compile where this ptxas takes it.
llvm::Expected<PtxasResult> runPtxas(const std::string &ptx,
                                     const std::string &arch);

/// "ptxas: NVIDIA (R) Ptx optimizing assembler ... V13.0.88" -> "13.0.88".
llvm::Expected<std::string> ptxasVersion();

/// libnvJitLink (PTX -> cubin in-process; the pip package nvidia-nvjitlink
/// that PyTorch depends on ships it): loaded once from the library path
/// (libnvJitLink.so.13, so a copy a process already loaded is found), else
/// $CUDA_ROOT/lib64, else /usr/local/cuda/lib64. Its version ("13.0"), or
/// why it is not usable.
llvm::Expected<std::string> nvJitLinkVersion();

/// Assembles `ptx` for `arch` with libnvJitLink (-O3, verbose: the log has
/// the same per-kernel report as ptxas -v).
llvm::Expected<PtxasResult> runNvJitLink(const std::string &ptx,
                                         const std::string &arch);

} // namespace fa

#endif // FA_LIB_CUDATOOLKIT_H
