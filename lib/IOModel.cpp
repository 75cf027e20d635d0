//===- IOModel.cpp - HBM traffic and FLOPs of attention schedules --*- C++ -*-===//
#include "lib/IOModel.h"

#include <algorithm>
#include <cstdio>

namespace fa {

static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

IOEstimate standardAttentionIO(const AttentionProblem &p,
                               int64_t elementBytes) {
  double e = double(elementBytes), heads = double(p.batch * p.qHeads);
  double q = double(p.qLen) * p.headDim, kv = double(p.kvLen) * p.headDim;
  double scores = double(p.qLen) * p.kvLen;
  IOEstimate io;
  // S = Q K^T: read Q, K; write S.
  io.bytesRead += e * (q + kv);
  io.bytesWritten += e * scores;
  // Causal: S = masked_fill(S): read S, write S.
  if (p.causal) {
    io.bytesRead += e * scores;
    io.bytesWritten += e * scores;
  }
  // P = softmax(S): read S, write P.
  io.bytesRead += e * scores;
  io.bytesWritten += e * scores;
  // O = P V: read P, V; write O.
  io.bytesRead += e * (scores + kv);
  io.bytesWritten += e * q;
  io.bytesRead *= heads;
  io.bytesWritten *= heads;
  io.flops = heads * 4.0 * scores * p.headDim;
  return io;
}

int64_t visitedKVTiles(const AttentionProblem &p, int64_t blockM,
                       int64_t blockN, int64_t qTile) {
  int64_t tiles = ceilDiv(p.kvLen, blockN);
  if (!p.causal)
    return tiles;
  // fa.kv_tile_range: the tile's last valid row sees keys up to
  // row + Sk - Sq.
  int64_t rowsEnd = std::min((qTile + 1) * blockM, p.qLen);
  int64_t visibleKeys = rowsEnd + p.kvLen - p.qLen;
  if (visibleKeys <= 0)
    return 0;
  return std::min(ceilDiv(visibleKeys, blockN), tiles);
}

/// The K/V tiles query tile `t` visits: `visited`'s count where given.
static int64_t visitedAt(const AttentionProblem &p, int64_t blockM,
                         int64_t blockN, int64_t t,
                         const VisitedKVTiles &visited) {
  if (size_t(t) < visited.size())
    return visited[size_t(t)];
  return visitedKVTiles(p, blockM, blockN, t);
}

/// Rows of the K/V tiles a query tile visits (the last tile clipped to Sk)
/// summed over the query tiles.
static double visitedKVRows(const AttentionProblem &p, int64_t blockM,
                            int64_t blockN, const VisitedKVTiles &visited) {
  double rows = 0;
  for (int64_t t = 0; t < ceilDiv(p.qLen, blockM); ++t)
    rows += double(std::min(visitedAt(p, blockM, blockN, t, visited) * blockN,
                            p.kvLen));
  return rows;
}

IOEstimate tiledForwardIO(const AttentionProblem &p, int64_t elementBytes,
                          int64_t blockM, int64_t blockN,
                          const VisitedKVTiles &visited) {
  double e = double(elementBytes), heads = double(p.batch * p.qHeads);
  double d = double(p.headDim);
  double kvRows = visitedKVRows(p, blockM, blockN, visited);
  IOEstimate io;
  io.bytesRead = heads * e * (double(p.qLen) * d + 2.0 * kvRows * d);
  io.bytesWritten = heads * (e * double(p.qLen) * d + 4.0 * p.qLen);
  // The visited tiles: S = Q K^T and P V over blockM query rows (padding
  // rows of the last query tile included).
  double pairs = 0;
  for (int64_t t = 0; t < ceilDiv(p.qLen, blockM); ++t)
    pairs += double(std::min(blockM, p.qLen - t * blockM)) *
             double(std::min(visitedAt(p, blockM, blockN, t, visited) * blockN,
                             p.kvLen));
  io.flops = heads * 4.0 * pairs * d;
  return io;
}

IOEstimate tiledBackwardIO(const AttentionProblem &p, int64_t elementBytes,
                           int64_t blockM, int64_t blockN,
                           const VisitedKVTiles &visited, int64_t dqChains) {
  double e = double(elementBytes), d = double(p.headDim);
  double qHeads = double(p.batch * p.qHeads);
  double chains = double(std::max<int64_t>(dqChains, 1));
  double kvHeads = double(p.batch * p.kvHeads);
  double rows = double(p.qLen);
  IOEstimate io;
  // delta: read O, dO; write D and the zeroed accumulator (every chain's).
  io.bytesRead += qHeads * 2.0 * e * rows * d;
  io.bytesWritten += qHeads * (4.0 * rows + chains * 4.0 * rows * d);
  // dkdv: K, V once per K/V tile; per visited (query tile, K/V tile) pair
  // the query tile's Q, dO, LSE, D read and its dQ share added.
  io.bytesRead += kvHeads * 2.0 * e * double(p.kvLen) * d;
  double pairRows = 0, pairs = 0;
  for (int64_t t = 0; t < ceilDiv(p.qLen, blockM); ++t) {
    double tileRows = double(std::min(blockM, p.qLen - t * blockM));
    int64_t tiles = visitedAt(p, blockM, blockN, t, visited);
    pairRows += tileRows * double(tiles);
    pairs += tileRows * double(std::min(tiles * blockN, p.kvLen));
  }
  io.bytesRead += qHeads * pairRows * (2.0 * e * d + 8.0 + 4.0 * d);
  io.bytesWritten += qHeads * pairRows * 4.0 * d;
  io.bytesWritten += kvHeads * 2.0 * e * double(p.kvLen) * d;
  // dq: read the accumulator (every chain's), write dQ.
  io.bytesRead += qHeads * chains * 4.0 * rows * d;
  io.bytesWritten += qHeads * e * rows * d;
  io.flops = qHeads * 10.0 * pairs * d;
  return io;
}

IOEstimate compulsoryForwardIO(const AttentionProblem &p, int64_t elementBytes,
                               std::optional<double> keptScores) {
  double e = double(elementBytes), d = double(p.headDim);
  IOEstimate io;
  io.bytesRead = e * double(p.qElements() + 2 * p.kvElements());
  io.bytesWritten = e * double(p.qElements()) + 4.0 * double(p.lseElements());
  // Row i sees keys j <= i + Sk - Sq under the causal mask.
  double visible = 0;
  for (int64_t row = 0; !keptScores && row < p.qLen; ++row)
    visible += double(p.causal ? std::clamp<int64_t>(row + p.kvLen - p.qLen + 1,
                                                     0, p.kvLen)
                               : p.kvLen);
  if (keptScores)
    visible = *keptScores;
  io.flops = double(p.batch * p.qHeads) * 4.0 * visible * d;
  return io;
}

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000.0 && unit < 4) {
    bytes /= 1000.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit ? "%.1f %s" : "%.0f %s", bytes,
                units[unit]);
  return text;
}

} // namespace fa
