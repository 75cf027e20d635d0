//===- SimtModel.h - Resource model of the SIMT strategy --------*- C++ -*-===//
//
// What a SIMT config needs (threads, shared memory, registers), whether it
// fits an arch, and the ranked default configs. No MLIR: fa-place-simt, the
// runtime's defaults and fa-compile ask the same rules.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_STRATEGY_SIMTMODEL_H
#define FA_LIB_STRATEGY_SIMTMODEL_H

#include "lib/KernelSpec.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fa {
struct StrategyModel;
} // namespace fa

namespace fa::simt {

/// Threads per tile row in the SIMT thread layout: the largest power of two
/// <= 32 that divides both B_c and the head dim (so a row's threads are
/// lanes of one warp).
int64_t threadColumns(int64_t blockN, int64_t headDim);

/// Row padding of the shared tiles (elements): 4 when every shared row holds
/// a multiple of 4 elements (16-byte rows for vector loads), else 1.
int64_t rowPad(int64_t blockN, int64_t headDim);

/// Shared memory of a config: Q, K, V and P tiles in the input precision,
/// rows padded by `pad`, each buffer 16-byte aligned (fa-place-simt's
/// layout; the pass checks that its allocation matches).
int64_t sharedBytes(int64_t blockM, int64_t blockN, int64_t headDim,
                    int64_t elementBytes, int64_t pad);

/// 32-bit registers per thread: the per-thread accumulator, scores and row
/// state, and 32 for the rest.
int64_t estimateRegisters(int64_t blockM, int64_t blockN, int64_t headDim,
                          int64_t numWarps);

/// The first `limit` default candidates of a request whose strategy is simt
/// (see KernelSpec::defaultCandidates).
std::vector<KernelSpec> defaultCandidates(const KernelSpec &request,
                                          size_t limit);

/// Shared memory of the backward's main kernel (fa-place-simt's layout):
/// K, V (block-n rows), Q, dO (block-m rows) and the staged P and dS
/// ([block-m, block-n]) in the input precision, rows padded by `pad`.
int64_t backwardSharedBytes(int64_t blockM, int64_t blockN, int64_t headDim,
                            int64_t elementBytes, int64_t pad);

/// The backward's default candidates (tiles the thread grid divides and
/// whose shared memory fits the arch), best first.
std::vector<KernelSpec> backwardCandidates(const KernelSpec &request,
                                           size_t limit);

/// The strategy's entry of the registry (lib/Strategy/Registry.h).
const StrategyModel &model();

} // namespace fa::simt

#endif // FA_LIB_STRATEGY_SIMTMODEL_H
