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

namespace fa::simt {

/// Threads per tile row in the SIMT thread layout: the largest power of two
/// <= 32 that divides both B_c and the head dim (so a row's threads are
/// lanes of one warp).
int64_t threadColumns(int64_t blockN, int64_t headDim);

/// The first `limit` default candidates of a request whose strategy is simt
/// (see KernelSpec::defaultCandidates).
std::vector<KernelSpec> defaultCandidates(const KernelSpec &request,
                                          size_t limit);

} // namespace fa::simt

#endif // FA_LIB_STRATEGY_SIMTMODEL_H
