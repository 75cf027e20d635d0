//===- LaunchPlan.h - How the runtime launches a kernel ---------*- C++ -*-===//
//
// The compiler hands the runtime a launch plan with every kernel: the grid
// as a function of the problem's shapes, the block, the dynamic shared
// memory and the kernel's parameters. It is stored with the cubin in the
// kernel cache, and the runtime launches by it without knowing which
// strategy made the kernel.
//
//===----------------------------------------------------------------------===//
#ifndef FA_LIB_LAUNCHPLAN_H
#define FA_LIB_LAUNCHPLAN_H

#include "llvm/Support/JSON.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fa {

/// The sizes of one attention problem that launch grids are made of.
struct ProblemExtents {
  int64_t batch = 0;
  int64_t queryHeads = 0;
  int64_t queryLength = 0;
  int64_t keyHeads = 0;
  int64_t keyLength = 0;
  /// Split-KV: the parts each query tile's keys are split into.
  int64_t parts = 1;
};

/// Query rows per program of a split-KV forward's combine kernel (fewer
/// when the query tiles are smaller): a decode's packed rows (a K/V head's
/// query heads, 4 for 32/8 heads), so that a block's threads spend nothing
/// on rows past them. (With 16, three quarters of a decode's merge went to
/// empty rows: ncu, H100, B 1, 8k keys, 16 parts: 7.7 us for 8 blocks whose
/// warps issued every 5.3 cycles, against 20 us for the parts.)
constexpr int64_t kCombineRows = 4;
/// Parts the combine kernel reads before it merges them: the merge of one
/// part waits for the previous one, so a loop that loaded and merged one
/// part at a time would wait out a global load's latency per part. At
/// B = 1 a decode's combine is 8 blocks walking up to 128 parts: the
/// rounds of loads are its time (H200: 33 parts, 4 a round, 16 us). A
/// thread holds a row's 4 columns in 32 (8 past D 128): 64 values a round.
constexpr int64_t combinePartsInFlight(int64_t headDim) {
  return headDim <= 128 ? 16 : 8;
}
/// Warps of a combine kernel's block, whatever the split kernel's (fewer
/// where its tiles have too few rows for them: a warp a row of the
/// kCombineRows).
constexpr int64_t kCombineWarps = 8;

/// Element types of the tensors a variant captures.
enum class ScalarType { f32, f16, bf16, i32, i64, i8 };
/// "f32", "f16", "bf16", "i32", "i64", "i8" (as MLIR spells them).
const char *scalarTypeName(ScalarType type);
std::optional<ScalarType> scalarTypeNamed(llvm::StringRef name);
int64_t scalarTypeBytes(ScalarType type);

/// A tensor a score_mod / mask_mod reads (a captured tensor), as the
/// kernel takes it: a contiguous row-major memref of `rank` dynamic sizes.
struct CaptureType {
  ScalarType type = ScalarType::f32;
  int rank = 1;
  bool operator==(const CaptureType &other) const {
    return type == other.type && rank == other.rank;
  }
};
/// Captured tensors a kernel can take.
constexpr int kMaxCaptures = 8;
/// Rows (keys) per entry of a block mask's key (query) range table: entry
/// g of [B, Hb, groups, 4] bounds rows (keys) [16 g, 16 g + 16).
constexpr int64_t kBlockMaskGroup = 16;
/// An entry of a range table: [first, end) of what some index of the group
/// keeps, then [whole_first, whole_end) of what all of them keep.
constexpr int64_t kRangeTableColumns = 4;

/// The launch of one kernel (a cubin entry point). A forward is one launch;
/// the backward is several, run in order on one stream.
struct LaunchPlan {
  /// A problem extent that a grid dimension counts.
  enum class Extent {
    queryLength,
    queryHeads,
    batch,
    keyLength,
    keyHeads,
    partsBatch, // batch * parts (split-KV)
  };
  /// ceil(extent / tile) blocks along one grid dimension.
  struct GridDim {
    Extent extent = Extent::batch;
    int64_t tile = 1;
  };
  /// The tensors whose MLIR memref descriptors are the kernel's
  /// parameters, in order.
  enum class Operand {
    query,
    key,
    value,
    output,
    lse,
    gradOutput, // dO
    gradQuery,  // dQ
    gradKey,    // dK
    gradValue,  // dV
    delta,      // f32 workspace [B, Hq, Sq]: rowsum(dO * O)
    dqAccum,    // f32 workspace [B, Hq, Sq, D]: dQ before rounding
    dqOrder,    // i32 workspace [B, Hq, query tiles]: deterministic turns
    sinks,      // f32 [Hq]: the sink logits (with sinks)
    gradSinks,  // f32 [Hq]: their gradient, added to (backward with sinks)
    sinkShares, // f32 workspace [B, Hq, query tiles]: deterministic sinks'
                // gradient per query tile
    // A block mask (spec.blockMask): i32 [B, Hb, groups, 4] ranges.
    keyRanges,   // forward (and the deterministic backward): the keys
                 // each 16 query rows keep
    queryRanges, // backward: the query rows that keep each 16 keys
    // A varlen batch (spec.varlen): i32 [B + 1] sequence offsets.
    cuSeqlensQ,
    cuSeqlensK,
    // A KV cache's filled lengths (spec.kvLens): i32 [B].
    kvLens,
    // A paged KV cache (spec.pagedKv): i32 [B, max_pages] page numbers.
    blockTable,
    // K/V entries by index (spec.cacheBatchIndex): i32 [B].
    cacheBatchIdx,
    // Split-KV (spec.splitKv): f32 workspaces of every part's output
    // [parts * B, Hq, Sq, D] and log-sum-exp [parts * B, Hq, Sq].
    partialOutput,
    partialLse,
    // FP8 inputs (spec.dtype e4m3): f32 [B, Hkv] descale factors.
    queryDescale,
    keyDescale,
    valueDescale,
    // The variant's captured tensors (the score_mod's, then the
    // mask_mod's), `captures` in order.
    capture0,
    lastCapture = capture0 + kMaxCaptures - 1,
  };
  /// The rank of an operand's memref descriptor (not of a capture: see
  /// paramRank).
  static int rankOf(Operand operand);
  /// The operand of captured tensor `i` (< kMaxCaptures).
  static Operand captureOperand(int i) {
    return Operand(int(Operand::capture0) + i);
  }
  /// The rank of a parameter's memref descriptor, a capture's included.
  int paramRank(Operand operand) const;

  /// A TMA tensor map (CUtensorMap, 128 bytes by value) of a [B, H, S, D]
  /// tensor, copied in boxes of `boxRows` x `boxCols` elements with the
  /// swizzle of the box's row bytes (128; 64 for 8-bit rows of 64 bytes):
  /// an input read with zero fill past its end, or the dQ accumulator that
  /// the dkdv kernel adds to (elements past the end are left alone).
  struct TensorMap {
    Operand operand = Operand::query;
    int64_t boxRows = 0, boxCols = 0;
    /// Bytes of one element; 0: the operand's usual (tensorMapElementBytes).
    /// FP8 inputs are 1.
    int64_t elementBytes = 0;
    int64_t bytesPerElement() const {
      return elementBytes ? elementBytes : tensorMapElementBytes(operand);
    }
    /// The swizzle span: one box row, 128 or 64 bytes.
    int64_t swizzleBytes() const { return boxCols * bytesPerElement(); }
  };
  /// The operands a tensor map can name: the 16-bit [B, H, S, D] inputs
  /// (Q, K, V; dO in the backward) and the f32 dQ accumulator.
  static bool readByTensorMap(Operand operand);
  /// Bytes of one element of a tensor-map operand (4 for the dQ
  /// accumulator, else 2): a box row is at most 128 bytes of them.
  static int64_t tensorMapElementBytes(Operand operand);
  /// The operand of a name ("q", "k", "v", "o", "lse", "do", ...), as
  /// fa.tensor_maps and the stored plans spell them.
  static std::optional<Operand> operandNamed(llvm::StringRef name);

  /// The kernel's entry point in the cubin.
  std::string function;
  /// The tiles: one block per point of this grid, unless persistent.
  std::array<GridDim, 3> grid;
  /// The kernel walks the grid's tiles itself (a tile scheduler in each
  /// block): it is launched with min(tiles, SMs) blocks along x.
  bool persistent = false;
  /// The kernel may be launched while the one before it runs (programmatic
  /// dependent launch): it waits for that one itself
  /// (fa.wait_previous_program). A split-KV forward's combine on sm_90.
  bool dependentLaunch = false;
  int64_t threads = 0;     // block size (x)
  int64_t sharedBytes = 0; // dynamic shared memory of a block
  /// The kernel's first parameters, in order (none for most kernels).
  std::vector<TensorMap> tensorMaps;
  /// Then these operands' memref descriptors, in order.
  std::vector<Operand> params;
  /// The captured tensors capture0, capture1, ... are: the call must give
  /// tensors of these types and ranks.
  std::vector<CaptureType> captures;

  /// Appends the captures of `types` to the parameters.
  void addCaptures(const std::vector<CaptureType> &types);

  /// The plan of the forward kernels every strategy emits today: block
  /// (x, y, z) runs (query tile of `blockM` rows, query head, batch); the
  /// parameters are Q, K, V, O and LSE (and the sinks with sinks, the
  /// sequence offsets of a varlen batch, the KV cache's lengths, the
  /// split-KV partials, the key ranges with a block mask). A varlen batch's
  /// query length (for the grid) is its longest sequence's, its batch the
  /// sequences. A split-KV forward's first kernel (`split`) runs every
  /// part of the batch along z; its second (combine) takes the same
  /// parameters and runs tiles of min(blockM, kCombineRows) query rows.
  enum class ForwardKernel { whole, split, combine };
  static LaunchPlan forwardAttention(
      std::string function, int64_t blockM, int64_t threads,
      int64_t sharedBytes, bool sinks = false, bool blockMask = false,
      bool varlen = false, bool kvLens = false,
      ForwardKernel kernel = ForwardKernel::whole, bool pagedKv = false,
      bool cacheBatchIndex = false, bool descales = false);

  /// The parameters of every backward kernel: Q, K, V, O, dO, LSE, dQ, dK,
  /// dV, delta, dq_accum (and dq_order when deterministic; the sinks and
  /// their gradient with sinks, and with both the sink shares; the query
  /// ranges with a block mask, and deterministic its key ranges too; the
  /// sequence offsets of a varlen batch).
  static std::vector<Operand> backwardParams(bool deterministic = false,
                                             bool sinks = false,
                                             bool blockMask = false,
                                             bool varlen = false);

  /// Tiles along grid dimension `dim` (0 = x) for `problem`.
  int64_t blocks(int dim, const ProblemExtents &problem) const;
  /// All tiles of the grid for `problem`.
  int64_t tiles(const ProblemExtents &problem) const;

  /// "" when the kernel can run `problem`, else why not: a persistent
  /// kernel counts its tiles in 32 bits.
  std::string checkLaunch(const ProblemExtents &problem) const;

  /// The launch's blocks (x, y, z) for `problem` on a device with
  /// `multiprocessors` SMs: the grid, or for a persistent kernel
  /// min(tiles, SMs) along x (0 when there are no tiles).
  std::array<int64_t, 3> launchGrid(const ProblemExtents &problem,
                                    int64_t multiprocessors) const;

  llvm::json::Value toJson() const;
  /// The plan in `json`, or nullopt when it is not a valid plan.
  static std::optional<LaunchPlan> fromJson(const llvm::json::Value &json);
};

} // namespace fa

#endif // FA_LIB_LAUNCHPLAN_H
