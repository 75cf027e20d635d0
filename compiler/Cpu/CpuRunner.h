//===- CpuRunner.h - Run fa.attention on the CPU --------------------*- C++ -*-===//
//
// Compiles one fa.attention or fa.attention_backward (static head dim,
// dynamic batch/heads/lengths) through the tiling passes and the CPU lowering to machine code with the MLIR
// ExecutionEngine, and runs it on host buffers. This is how CI executes the
// tiled online-softmax algorithm without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_CPU_CPURUNNER_H
#define FA_COMPILER_CPU_CPURUNNER_H

#include "compiler/Pipelines.h"
#include "lib/KernelSpec.h"
#include "lib/LaunchPlan.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace mlir::fa {

/// What changes the generated code.
struct CpuKernelConfig {
  int64_t headDim = 64;
  /// Element type of Q, K, V and O (LSE is always f32); O's where it
  /// differs (FP8 inputs: KernelSpec::outDtype).
  ::fa::ElementType dtype = ::fa::ElementType::f32;
  std::optional<::fa::ElementType> outDtype;
  TileOptions tiles;
  bool causal = false;
  float scale = 0.125f;
  /// The backward kernel (fa.attention_backward) instead of the forward.
  bool backward = false;
  /// The backward adds dQ in K/V tile order (fa.wait_turn / fa.pass_turn).
  bool deterministic = false;
  /// Its dQ chains (KernelSpec::dqChains; 0 or 1: one).
  int64_t dqChains = 0;
  /// A variant's score_mod and mask_mod (KernelSpec::scoreMod, maskMod).
  std::string scoreMod;
  std::string maskMod;
  /// Attention sinks (KernelSpec::sinks): one f32 logit per query head.
  bool sinks = false;
  /// With sinks: one per head and query row, [Hq * Sq] head-major
  /// (KernelSpec::sinksPerRow).
  bool sinksPerRow = false;
  /// A block mask (KernelSpec::blockMask): the forward takes key ranges,
  /// the backward query ranges (CpuRangeTable).
  bool blockMask = false;
  /// Not attention but the block mask program of maskMod and causal
  /// (KernelSpec::blockMaskProgram): run it with runBlockMask.
  bool blockMaskProgram = false;
  /// A packed varlen batch (KernelSpec::varlen): run takes the sequence
  /// offsets (CpuSequenceOffsets).
  bool varlen = false;
  /// A KV cache's filled lengths (KernelSpec::kvLens): run takes them.
  bool kvLens = false;
  /// Split-KV (KernelSpec::splitKv): run takes the parts.
  bool splitKv = false;
  /// A paged KV cache (KernelSpec::pagedKv): run takes the page table, K
  /// and V are the pool [num_pages, Hkv, P, D] (AttentionShape::kvLen = P,
  /// CpuPages::count pages).
  /// (tiles.pageGather: its K/V rows read one by one through the table,
  /// any page size, KernelSpec::pageGather.)
  bool pagedKv = false;
  /// K/V entries by index (KernelSpec::cacheBatchIndex): run takes
  /// CpuCacheIndex.
  bool cacheBatchIndex = false;
};

/// FP8's descale factors (e4m3 kernels take them): f32 [B, Hkv] each,
/// row-major.
struct CpuDescales {
  const float *query = nullptr;
  const float *key = nullptr;
  const float *value = nullptr;
};

/// The K/V entry of each batch entry (with CpuKernelConfig::
/// cacheBatchIndex): i32 [B]; K and V hold `entries` entries.
struct CpuCacheIndex {
  const int32_t *index = nullptr;
  int64_t entries = 0;
};

/// The sequence offsets of a packed varlen batch (CpuKernelConfig::varlen):
/// i32 [B + 1] each, where B is AttentionShape::batch; the shape's lengths
/// are then the packed rows (total_q, total_k) and the buffers hold one
/// batch entry: Q and O [1, Hq, total_q, D], K and V [1, Hkv, total_k, D],
/// LSE [1, Hq, total_q].
struct CpuSequenceOffsets {
  const int32_t *query = nullptr;
  const int32_t *key = nullptr;
};

/// A paged KV cache's pages (with CpuKernelConfig::pagedKv): i32 [B,
/// maxPages] page numbers, row-major; the pool holds `count` pages.
struct CpuPages {
  const int32_t *table = nullptr;
  int64_t maxPages = 0;
  int64_t count = 0;
};

/// A block mask's range table (with CpuKernelConfig::blockMask): i32
/// [B, heads, ceil(length / 16), 4] [first, end, whole_first, whole_end)
/// entries, contiguous; heads
/// is 1 or Hq; the length is Sq for the forward's key ranges, Sk for the
/// backward's query ranges.
struct CpuRangeTable {
  const int32_t *data = nullptr;
  int64_t heads = 1;
};

/// Sizes of one call. Buffers are contiguous: Q and O [B, Hq, Sq, D],
/// K and V [B, Hkv, Sk, D], LSE [B, Hq, Sq].
struct AttentionShape {
  int64_t batch = 1;
  int64_t qHeads = 1;
  int64_t kvHeads = 1;
  int64_t qLen = 1;
  int64_t kvLen = 1;
};

/// A captured tensor of a variant (contiguous, row-major host memory of
/// the element type the variant's text gives it).
struct CpuCapture {
  const void *data = nullptr;
  std::vector<int64_t> sizes;
};

class Descriptors;

class CpuAttentionKernel {
public:
  /// Lowers and JIT-compiles the kernel; fails with the diagnostics of the
  /// failing stage.
  static llvm::Expected<std::unique_ptr<CpuAttentionKernel>>
  compile(const CpuKernelConfig &config);

  ~CpuAttentionKernel();

  /// Runs the forward on host buffers of the config's element type
  /// (f16/bf16 as their 16-bit patterns); rejects inconsistent shapes.
  /// With sinks, `sinks` holds the Hq sink logits; `captures` are the
  /// variant's captured tensors (the score_mod's, then the mask_mod's).
  llvm::Error
  run(const AttentionShape &shape, const void *q, const void *k, const void *v,
      void *o, float *lse, const float *sinks = nullptr,
      llvm::ArrayRef<CpuCapture> captures = {}, CpuRangeTable keyRanges = {},
      CpuSequenceOffsets sequences = {}, const int32_t *kvLens = nullptr,
      int64_t kvParts = 1, CpuPages pages = {}, CpuCacheIndex cacheIndex = {},
      CpuDescales descales = {}) const;

  /// Runs the backward: dQ, dK, dV (shaped like Q, K, V) from the forward's
  /// inputs, its O and LSE and the output gradient dO. The f32 workspaces
  /// (D and the dQ accumulator) are allocated per call. With sinks, the
  /// Hq logits `sinks` and their gradient `gradSinks` (set here). A
  /// varlen batch: every buffer packed as run's. A block mask: its query
  /// ranges, and deterministic its key ranges too.
  llvm::Error
  runBackward(const AttentionShape &shape, const void *q, const void *k,
              const void *v, const void *o, const void *gradOutput,
              const float *lse, void *gradQuery, void *gradKey, void *gradValue,
              const float *sinks = nullptr, float *gradSinks = nullptr,
              llvm::ArrayRef<CpuCapture> captures = {},
              CpuRangeTable queryRanges = {}, CpuSequenceOffsets sequences = {},
              CpuRangeTable keyRanges = {}) const;

  /// Runs the block mask program (config.blockMaskProgram): fills the
  /// key ranges [B, heads, ceil(Sq / 16), 4] and the query ranges [B,
  /// heads, ceil(Sk / 16), 4] (heads: 1 or Hq) of the mask on `shape`,
  /// whose mask_mod reads `captures`.
  llvm::Error runBlockMask(const AttentionShape &shape, int64_t heads,
                           int32_t *keyRanges, int32_t *queryRanges,
                           llvm::ArrayRef<CpuCapture> captures = {}) const;

  const CpuKernelConfig &getConfig() const { return config; }

private:
  CpuAttentionKernel(CpuKernelConfig config, std::string entryName,
                     std::unique_ptr<ExecutionEngine> engine,
                     std::vector<::fa::CaptureType> captureTypes);

  /// Appends the captures' descriptors after checking them against the
  /// variant's.
  llvm::Error addCaptures(Descriptors &descriptors,
                          llvm::ArrayRef<CpuCapture> captures) const;

  /// The shape checks both directions share.
  static llvm::Error checkShape(const AttentionShape &shape);

  CpuKernelConfig config;
  std::string entryName;
  std::unique_ptr<ExecutionEngine> engine;
  std::vector<::fa::CaptureType> captureTypes;
};

} // namespace mlir::fa

#endif // FA_COMPILER_CPU_CPURUNNER_H
