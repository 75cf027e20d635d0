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

namespace fa {
struct StrategyModel;
} // namespace fa

namespace fa::mma {

/// Largest head dim of the strategy (registers: the O accumulator and the
/// resident Q fragments grow with it).
constexpr int64_t kMaxHeadDim = 256;
/// K/V tiles in flight at most.
constexpr int64_t kMaxStages = 4;

/// Elements of one global access: Q, K and V rows are copied in 16-byte
/// chunks (cp.async), 16-bit O (and dK, dV) rows stored in 16-byte chunks
/// (a quad transposes its fragments first). The runtime requires pointers
/// and strides to be multiples of these.
constexpr int64_t kInputAccessElements = 8;
constexpr int64_t kOutputAccessElements = 8;

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

//===----------------------------------------------------------------------===//
// The backward's dK/dV program (fa-tile-backward's "dkdv")
//===----------------------------------------------------------------------===//
//
// One program per K/V tile of block_n keys: K and V stay in shared memory,
// dK and dV in accumulator fragments; per query tile of block_m rows, Q
// and dO stream through rings of `stages` slots. The warps form a grid
// (backwardWarpsN): each owns a slice of rows and columns of dK, dV, S,
// dP and dQ. P and dS (rounded to 16 bits) go through shared memory,
// where the products with the transposed operand (dV += P^T dO, dK += dS^T
// Q) read them with ldmatrix.trans; P's rounding residual waits there too,
// for dS to add it back. The delta and dq programs are memory-bound
// element-wise work; the simt strategy places them.

/// Shared-memory layout of the dkdv program: K, V (once), the Q ring, the
/// dO ring, one staging tile that holds P and then dS (the product that
/// reads P, dV += P^T dO, is done before dS is written: a barrier precedes
/// each staging write), then the tile of P's rounding residual, P - hi(P)
/// rounded to 16 bits, which only its own lane reads back: dS = P (dP - D)
/// takes P as hi + residual (22 significant bits for f16, 16 for bf16:
/// far below dS's own rounding), without keeping P in registers
/// while dP accumulates. Q/K/V/dO rows are padded as in the forward; staged
/// and residual rows hold block_n + 8 elements (an odd number of 16-byte
/// chunks when block_n is a multiple of 16).
struct BackwardSharedLayout {
  int64_t rowPad = 0; // elements after the head dim in Q/K/V/dO rows
  int64_t kOffset = 0, vOffset = 0;          // bytes
  int64_t qOffset = 0, gradOutputOffset = 0; // bytes, slot 0 of a ring
  int64_t stagedOffset = 0;                  // bytes (P, then dS)
  int64_t residualOffset = 0;                // bytes (P - hi(P))
  int64_t stagedRowPad = 0; // elements after block_n in staged rows
  int64_t totalBytes = 0;
};
BackwardSharedLayout backwardSharedLayout(const Config &config);

/// The dkdv program's warp grid: num-warps / warps-n warps along the rows
/// of its accumulator tiles (query rows of S, dP, dQ; key rows of dK, dV)
/// and warps-n along their columns (keys; the head dim). Every product of
/// the program reads both operands from shared memory, a k16 step of A per
/// m16 block and of B per n8 block of the warp's slice: 2 columns of warps
/// (slices of 32 x 64 instead of 16 x 128 at 128 x 128 on 8 warps) read
/// 6 instead of 9 ldmatrix.x4 per 16 mma. 2 on 8 or more warps where the
/// key tile and the head dim split in 16-column halves, else 1: measured
/// on the H200 (docs/benchmarks.md), 128 x 128 on 8 warps at D = 128 gains
/// 7-8% with it; 64 x 128 on 4 warps at D = 64 (2 x 2) loses up to 4% (its
/// dK, dV and dQ products read no less, and dQ reads dS from shared memory
/// instead of registers).
int64_t backwardWarpsN(const Config &config);

/// 32-bit registers per thread of the dkdv program: the dK and dV
/// accumulators, S and dP (P and dS reuse their registers), the dQ
/// product, and the allowance for addresses and indices.
int64_t estimateBackwardRegisters(const Config &config);

/// "" when the dkdv program of `config` can be compiled for `arch`, else
/// why not, with the numbers.
std::string checkBackwardFits(const Config &config, const GpuArch &arch);

/// Whether `auto` runs the backward of this problem on mma: 16-bit inputs
/// and a head dim up to 128, or up to 256 where `arch`'s shared memory holds
/// the 64 x 64 tiles of the 8-warp grid (sm_80, sm_90: past 128 only its
/// warps' halves of dK and dV fit the registers).
bool takesBackwardProblem(ElementType dtype, int64_t headDim,
                          const std::string &arch);

/// The backward's default candidates (the request's strategy is mma).
std::vector<KernelSpec> backwardCandidates(const KernelSpec &request,
                                           size_t limit);

/// The strategy's entry of the registry (lib/Strategy/Registry.h).
const StrategyModel &model();

} // namespace fa::mma

#endif // FA_LIB_STRATEGY_MMAMODEL_H
