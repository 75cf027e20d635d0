//===- SpecRules.h - What the strategies make of a kernel spec --*- C++ -*-===//
//
// A KernelSpec is plain data; these rules read the strategy registry (each
// strategy's checks, defaults and naming), so they live beside it.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_STRATEGY_SPECRULES_H
#define FA_LIB_STRATEGY_SPECRULES_H

#include "lib/KernelSpec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fa {

/// The strategy that serves `spec`: the explicit one, else the first
/// registered strategy that takes the problem (wgmma on sm_90a, mma for
/// f16/bf16, simt for f32 and head dims neither takes).
Strategy resolveStrategy(const KernelSpec &spec);

/// "" when the spec is valid, else what is wrong, naming value and limit.
std::string validateSpec(const KernelSpec &spec);

/// A C identifier naming the kernel, e.g. fa_fwd_d128_f32_causal_8x32_w8
/// (simt) or fa_fwd_d128_f16_full_128x64_w8_s2_mma; fa_bwd_... for the
/// backward.
std::string kernelName(const KernelSpec &spec);

/// One line that determines the generated code; equal specs (after
/// withDefaults) have equal text.
std::string canonicalText(const KernelSpec &spec);

/// `spec` with the strategy resolved and zero tile sizes / warps / stages
/// replaced by the defaults: the first of defaultCandidates().
KernelSpec withDefaults(const KernelSpec &spec, int64_t length = 0,
                        const VariantTraits &traits = {});

/// The configs the defaults choose from, best first: the measured ranking
/// filtered by the fields already set, the arch's shared memory and a
/// register estimate. The estimate cannot see ptxas's allocation, so the
/// runtime takes the first candidate that compiles without spills
/// (chooseDefaultCandidate). `length`: the longer of the query and key
/// lengths the kernel is for (the runtime passes it rounded up to a power
/// of two), where a strategy ranks by length; 0 = not known, the ranking
/// measured at S = 4k. `traits`: what the compiler read in the spec's
/// variant texts (mlir::fa::variantTraits; none by default), which moves
/// tiles known to spill with it down the ranking.
std::vector<KernelSpec> defaultCandidates(const KernelSpec &spec,
                                          int64_t length = 0,
                                          const VariantTraits &traits = {});

/// The candidates chooseDefaultCandidate compiles at once before judging
/// the first of `request`'s defaults: `wave` where its strategy expects
/// trial compiles for a variant of `traits` (StrategyModel::expectsTrials),
/// else 1 (the first alone: it usually wins).
size_t firstTrialWave(const KernelSpec &request, const VariantTraits &traits,
                      size_t wave);

/// The spilled bytes (stored plus loaded) a default candidate of `spec`'s
/// strategy was measured faster with (its StrategyModel's
/// toleratedSpillBytes); 0 for most, and where the strategy is not resolved.
int64_t toleratedSpillBytes(const KernelSpec &candidate);

/// Blocks of `resolved`'s kernel (tiles set) an SM holds at once, by its
/// strategy's resource model (StrategyModel::residentBlocks); 0 where the
/// strategy models none or is not resolved.
int64_t residentBlocks(const KernelSpec &resolved);

/// Hex SHA-256 of everything that determines a compiled kernel: the compiler
/// version, the canonical spec, the target arch and the ptxas version.
std::string cacheKey(const KernelSpec &spec, const std::string &compilerVersion,
                     const std::string &ptxasVersion);

/// A strategy's name ("auto" for automatic).
const char *toString(Strategy strategy);
/// Parses "auto" or a registered strategy's name; false if unknown.
bool parseStrategy(const std::string &text, Strategy &strategy);

} // namespace fa

#endif // FA_LIB_STRATEGY_SPECRULES_H
