//===- MmaModel.h - Resource model of the mma strategy ----------*- C++ -*-===//
//
// The tensor-core strategy (mma.sync m16n8k16, ldmatrix, cp.async): what a
// config needs (threads, shared memory, registers), whether it fits an arch
// and why not, where its shared buffers lie, and the ranked default configs.
// No MLIR: fa-place-mma, the runtime's defaults and fa-compile ask these
// rules, so their numbers cannot drift.
//
// Each warp owns block_m / num_warps consecutive rows of the Q tile (a
// multiple of 16: whole m16 fragments) and computes all block_n scores and
// all head-dim columns of O for them.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_STRATEGY_MMAMODEL_H
#define FA_LIB_STRATEGY_MMAMODEL_H

#include "lib/GpuTarget.h"
#include "lib/KernelSpec.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fa::mma {

/// Largest head dim of the strategy (registers: the O accumulator and the
/// resident Q fragments grow with it).
constexpr int64_t kMaxHeadDim = 256;
/// K/V tiles in flight at most.
constexpr int64_t kMaxStages = 4;

/// Elements of one global access: Q, K and V rows are copied in 16-byte
/// chunks (cp.async), O is stored in pairs. The runtime requires pointers
/// and strides to be multiples of these.
constexpr int64_t kInputAccessElements = 8;
constexpr int64_t kOutputAccessElements = 2;

/// The head dim padded to whole k16 steps of Q K^T (columns past the head
/// dim are zero in shared memory).
int64_t contractionWidth(int64_t headDim);

/// Shared-memory layout of one program: the Q tile, then `stages` K slots,
/// then `stages` V slots. Every row holds the contraction width plus 8
/// elements (16 bytes) of padding: the row pitch is an odd number of
/// 16-byte chunks, so the 8 rows an ldmatrix phase reads (and the 16-byte
/// cp.async writes) fall into 8 different bank groups.
struct SharedLayout {
  int64_t rowPad = 0;   // elements after the head dim in each row
  int64_t rowPitch = 0; // elements per row (head dim + rowPad)
  int64_t qOffset = 0;  // bytes
  int64_t kOffset = 0;  // bytes, slot 0 of the K ring
  int64_t vOffset = 0;  // bytes, slot 0 of the V ring
  int64_t kvSlotBytes = 0;
  int64_t totalBytes = 0; // dynamic shared memory of the block
};

struct Config {
  int64_t headDim = 0, blockM = 0, blockN = 0, numWarps = 0, stages = 0;
  int64_t elementBytes = 2;
};

SharedLayout sharedLayout(const Config &config);

/// 32-bit registers per thread: O accumulator, Q fragments (all of them when
/// resident, one k16 step's when reloaded), S fragments (P reuses them),
/// row state, and an allowance for addresses and indices.
int64_t estimateRegisters(const Config &config, bool qInRegisters);

/// Whether the Q tile's A fragments stay in registers for the whole K/V
/// loop (loaded once) or are read again from shared memory by every Q K^T.
/// Resident Q saves shared-memory bandwidth; it is chosen whenever the
/// estimate with it fits the thread's registers. (At D = 128 with two m16
/// row blocks per warp it does not, and reloading Q with twice the row
/// blocks per warp reads less shared memory than resident Q with one: each
/// K/V fragment feeds two mma instead of one.)
bool keepQInRegisters(const Config &config);

/// The register estimate of the config as placed (keepQInRegisters).
int64_t estimateRegisters(const Config &config);

/// "" when `config` can be compiled for `arch`, else why not, with the
/// numbers (divisibility of the tiles by the fragments, shared memory,
/// registers).
std::string checkFits(const Config &config, const GpuArch &arch);

/// Whether the strategy computes this problem at all (16-bit inputs, a head
/// dim that is a multiple of 8 up to kMaxHeadDim): what `auto` asks.
bool takesProblem(ElementType dtype, int64_t headDim);

/// "" when the strategy can serve the spec's problem (dtype, head dim,
/// stages), else what is wrong, naming the value and the limit. Tile fields
/// may still be 0 (defaults).
std::string checkSpec(const KernelSpec &spec);

/// The first `limit` default candidates of a request whose strategy is
/// mma: the measured ranking filtered by the fields already set and by
/// checkFits, best first.
std::vector<KernelSpec> defaultCandidates(const KernelSpec &request,
                                          size_t limit);

} // namespace fa::mma

#endif // FA_LIB_STRATEGY_MMAMODEL_H
