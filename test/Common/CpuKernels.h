//===- CpuKernels.h - JIT-compiled CPU kernels shared by tests ------*- C++ -*-===//
//
// The CPU execution tests compile each kernel config once and draw fresh
// random inputs per case.
//
//===----------------------------------------------------------------------===//
#ifndef FA_TEST_COMMON_CPUKERNELS_H
#define FA_TEST_COMMON_CPUKERNELS_H

#include "compiler/Cpu/CpuRunner.h"
#include "lib/ReferenceAttention.h"
#include "test/Common/Random.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

namespace fa::test {

/// The reference's description of one run of a kernel.
inline fa::AttentionProblem problemFor(const mlir::fa::CpuKernelConfig &config,
                                       const mlir::fa::AttentionShape &shape) {
  fa::AttentionProblem p;
  p.batch = shape.batch;
  p.qHeads = shape.qHeads;
  p.kvHeads = shape.kvHeads;
  p.qLen = shape.qLen;
  p.kvLen = shape.kvLen;
  p.headDim = config.headDim;
  p.causal = config.causal;
  p.scale = config.scale;
  return p;
}

/// The kernel of `config`, compiled on first use. The cache is never
/// destroyed: JIT engines must not outlive LLVM's own statics, whose
/// destruction order at exit is unspecified.
inline mlir::fa::CpuAttentionKernel &
getCpuKernel(const mlir::fa::CpuKernelConfig &config) {
  using Key = std::tuple<int64_t, int, int64_t, int64_t, bool, float, bool,
                         bool, int64_t, std::string, std::string, bool, bool,
                         bool, bool, bool, bool, bool, bool, bool, bool>;
  static auto &cache =
      *new std::map<Key, std::unique_ptr<mlir::fa::CpuAttentionKernel>>();
  // The input type and O's, where it differs.
  int types =
      int(config.dtype) * 8 + (config.outDtype ? 1 + int(*config.outDtype) : 0);
  Key key{config.headDim,          types,
          config.tiles.blockM,     config.tiles.blockN,
          config.causal,           config.scale,
          config.backward,         config.deterministic,
          config.dqChains,         config.scoreMod,
          config.maskMod,          config.sinks,
          config.blockMask,        config.blockMaskProgram,
          config.varlen,           config.kvLens,
          config.splitKv,          config.pagedKv,
          config.tiles.pageGather, config.cacheBatchIndex,
          config.sinksPerRow};
  auto it = cache.find(key);
  if (it == cache.end()) {
    auto kernel = mlir::fa::CpuAttentionKernel::compile(config);
    if (!kernel) {
      ADD_FAILURE() << "compile failed: " << llvm::toString(kernel.takeError());
      std::abort();
    }
    it = cache.emplace(key, std::move(*kernel)).first;
  }
  return *it->second;
}

} // namespace fa::test

#endif // FA_TEST_COMMON_CPUKERNELS_H
