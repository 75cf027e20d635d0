//===- IOModel.h - HBM traffic and FLOPs of attention schedules ----*- C++ -*-===//
//
// The analytic IO model of the seeds' IO-complexity argument (elements of
// Q, K, V, O of `elementBytes` bytes; LSE and workspaces f32): how many bytes
// standard attention (S and P materialized in HBM) and the tiled kernels
// (Q once, K/V once per query tile) move between HBM and the chip, and how
// many FLOPs they execute, for a problem and a schedule. It counts what the
// algorithm reads and writes, not what the caches save: the GPU's L2 keeps
// K/V tiles shared by concurrent programs, so measured DRAM traffic of the
// tiled kernel is lower (docs/benchmarks.md compares the two).
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_IOMODEL_H
#define FA_LIB_IOMODEL_H

#include "lib/AttentionProblem.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fa {

/// Bytes read from and written to HBM, and FLOPs (a multiply-add counts 2).
struct IOEstimate {
  double bytesRead = 0;
  double bytesWritten = 0;
  double flops = 0;
  double bytes() const { return bytesRead + bytesWritten; }
};

/// Standard attention as three kernels per query head (PyTorch eager:
/// S = Q K^T; P = softmax(S); O = P V), S and P in the input precision
/// written to and read back from HBM; with the causal mask one more pass
/// over S applies it. K/V are read per query head (GQA expanded).
IOEstimate standardAttentionIO(const AttentionProblem &p,
                               int64_t elementBytes);

/// The K/V tiles each query tile visits, when a mask_mod narrows them (the
/// compiler's folded ranges: foldVisitedKVTiles); empty = the causal mask's
/// (visitedKVTiles).
using VisitedKVTiles = std::vector<int64_t>;

/// The tiled forward (fa-tile) with query tiles of `blockM` rows and K/V
/// tiles of `blockN` rows: Q read once, the K/V tiles each query tile
/// visits (causal block skipping, or `visited`) read once per query tile,
/// O and LSE written once. FLOPs of the visited tiles, masked parts
/// included.
IOEstimate tiledForwardIO(const AttentionProblem &p, int64_t elementBytes,
                          int64_t blockM, int64_t blockN,
                          const VisitedKVTiles &visited = {});

/// The tiled backward (fa-tile-backward): D = rowsum(dO * O) and the zeroed
/// dQ accumulator; per K/V tile K, V read once and, per query tile it
/// visits, Q, dO, LSE, D read and dQ's share added (an f32 read-modify-write
/// of the accumulator); dK, dV written once; dQ rounded from the
/// accumulator. FLOPs: five matmuls per visited tile pair. With `dqChains`
/// (the deterministic mode's, KernelSpec::dqChains) the accumulator has that
/// many copies, each zeroed and read to round dQ.
IOEstimate tiledBackwardIO(const AttentionProblem &p, int64_t elementBytes,
                           int64_t blockM, int64_t blockN,
                           const VisitedKVTiles &visited = {},
                           int64_t dqChains = 1);

/// What any forward must move, the traffic the tiled kernel reaches when
/// the cache keeps a head's K/V while its query tiles run: Q, K, V read
/// once (K/V per K/V head), O and LSE written once. FLOPs of the visible
/// (unmasked) scores only: `keptScores` per query head where a mask_mod's
/// are known (the compiler's countKeptScores, taken in program (0, 0) for
/// every head: a mask that reads the batch or head index counts as head
/// 0's), else the causal mask's.
IOEstimate compulsoryForwardIO(const AttentionProblem &p, int64_t elementBytes,
                               std::optional<double> keptScores = {});

/// The K/V tiles query tile `qTile` visits (fa.kv_tile_range's count).
int64_t visitedKVTiles(const AttentionProblem &p, int64_t blockM,
                       int64_t blockN, int64_t qTile);

/// "12.3 GB" / "456 MB" / "7.8 kB" / "12 B".
std::string formatBytes(double bytes);

} // namespace fa

#endif // FA_LIB_IOMODEL_H
