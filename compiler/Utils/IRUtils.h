//===- IRUtils.h - Small IR builders every stage uses -----------*- C++ -*-===//
//
// Constants, index arithmetic, the shared-memory views of placed tiles and
// slice cloning: what the tiling, placement, schedule and conversion passes
// all build, kept where each of them may include it (a schedule pass must
// not depend on the next stage's lowering helpers).
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_UTILS_IRUTILS_H
#define FA_COMPILER_UTILS_IRUTILS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>

namespace mlir {
class IRMapping;
class Region;
} // namespace mlir

namespace mlir::fa {

Value indexConst(OpBuilder &b, Location loc, int64_t value);
/// v + c (v itself for c = 0) and v * c on indices.
Value addConst(OpBuilder &b, Location loc, Value v, int64_t c);
Value mulConst(OpBuilder &b, Location loc, Value v, int64_t c);
Value f32Const(OpBuilder &b, Location loc, double value);

/// 32-bit counters: index arithmetic is 64-bit, twice the registers (the
/// persistent schedule and the TMA coordinates count in i32). The casts
/// are unsigned: every value cast is a count or a coordinate.
Value toI32(OpBuilder &b, Location loc, Value index);
Value toIndex(OpBuilder &b, Location loc, Value i32);
Value i32Const(OpBuilder &b, Location loc, int32_t value);

/// Where a turn op (fa.wait_turn, fa.pass_turn) with `if %taken` lowers:
/// moves `b` into a new branch on `taken` (nothing without it). The
/// condition is the same in every thread, so barriers inside the branch are
/// met by all threads or none.
void enterTakenBranch(OpBuilder &b, Location loc, Value taken);

/// Whether thread x is the first of its group of `groupThreads` consecutive
/// threads (x % groupThreads == 0): where one thread issues for a warpgroup
/// or for every compute thread.
Value isFirstOfThreadGroup(OpBuilder &b, Location loc, int64_t groupThreads);

/// The workgroup (shared-memory) address space.
Attribute workgroupSpace(MLIRContext *ctx);

/// The buffer of a shared tile: [R, C + pad] (or [R]) for #fa.shared,
/// [C / 64, R, 64] (column block, row, element) for #fa.swizzled_shared.
MemRefType sharedBufferType(RankedTensorType type);

/// Bytes from the dynamic shared memory's start to its first `atomBytes`
/// boundary, where tiles in a swizzle start (the swizzle repeats every
/// atom; the placement reserves the slack).
Value sharedAtomPad(OpBuilder &b, Location loc, int64_t atomBytes);

/// The boundary swizzled tiles' offsets count from: the 128-byte swizzle's
/// atom, which the 64-byte swizzle's (512 bytes) divides.
constexpr int64_t kSwizzleBoundaryBytes = 1024;

/// Threads of a warpgroup (4 consecutive warps: one wgmma).
constexpr int64_t kWarpgroupThreads = 128;

/// Named barrier of a warp-specialized kernel's consumer warpgroups
/// (fa-warp-specialize): its producer never arrives at the block-wide
/// barrier 0. fa-pingpong's turns take barriers 1 .. consumer warpgroups,
/// warpgroup-local stagings kWarpgroupBarrier (9) + warpgroup.
constexpr int32_t kComputeBarrier = 8;

/// Named barriers kWarpgroupBarrier + g: warpgroup g's 128 threads only.
constexpr int32_t kWarpgroupBarrier = 9;

/// Named barriers between the consumers and fa-tma-reduce's writer warp,
/// one pair per consumer warpgroup (+ its index; at most two, each of its
/// 128 threads and the warp's 32) or one for all consumers: the staged tile
/// is written (consumers arrive, the writer waits) and the buffer may be
/// written again (the writer arrives, the consumers wait). After the
/// warpgroup barriers of up to three consumer warpgroups (9 .. 11).
constexpr int32_t kStagedFullBarrier = 12;
constexpr int32_t kStagedEmptyBarrier = 14;
constexpr int64_t kMaxStagedGroups = 2;

/// Arrives, without waiting, on named barrier `id` of `threads` threads
/// (bar.arrive) through LLVM's convergent intrinsic: LLVM then never
/// duplicates it into diverging branches (it did so with the inline-PTX
/// nvvm.barrier.arrive, which made lane 0 of a warp arrive at another
/// instruction than its other lanes; an aligned barrier needs the whole
/// warp at the same one).
void createBarrierArrive(OpBuilder &b, Location loc, Value id, int64_t threads);
void createBarrierArrive(OpBuilder &b, Location loc, int32_t id,
                         int64_t threads);

/// Named barrier `first` + the calling thread's warpgroup (i32).
Value warpgroupBarrierId(OpBuilder &b, Location loc, int32_t first);

/// A barrier of the calling thread's warpgroup (kWarpgroupBarrier + its
/// index), placed before the builder's insertion point: for tiles each
/// warpgroup writes and reads back alone.
void createWarpgroupBarrier(OpBuilder &b, Location loc);

/// fence.proxy.async.shared::cta: the calling thread's shared-memory writes
/// (generic proxy) become visible to the async proxy's later reads of them
/// (wgmma's operand descriptors, TMA stores and reductions); a barrier
/// after it publishes them to the thread that issues those.
void createAsyncSharedFence(OpBuilder &b, Location loc);

/// A barrier of the threads that run the program's tile ops, placed before
/// the builder's insertion point: the block (barrier 0), or in a kernel
/// whose fa.launch has producer warps (an ancestor of `at`) only its
/// consumers (kComputeBarrier over their threads).
void createComputeBarrier(OpBuilder &b, Location loc, Operation *at);

/// Zeroes rows [kept, rows) of `boxes` consecutive boxes of `rows` lines of
/// `lineBytes` (128, or 64 for the 64-byte swizzle; the figures below are
/// for 128-byte lines of 8 chunks) in shared memory from the 32-bit shared
/// address `start` (a
/// swizzled tile's [column blocks, rows, block columns] buffer, or a slice
/// of whole blocks of it: the swizzle permutes 16-byte chunks within a
/// line, so whole lines need no swizzle), using `threads` threads, `lane`
/// (index) being the calling thread's place among them. Lane l clears chunk
/// l % 8 of rows l / 8 + (threads / 8) j of every box: stores predicated on
/// their row (kept - l / 8 <= (threads / 8) j), each at an immediate offset
/// from one address register (nvvm.inline_ptx): as a loop, or in LLVM's
/// unrolled form (an address register per store, hoisted out of the
/// program's loops), ptxas spilled the wgmma dkdv program's accumulators
/// around them. The caller publishes the zeros (fences, barriers).
void clearSharedRowsPastEnd(OpBuilder &b, Location loc, Value start,
                            int64_t boxes, int64_t rows, Value kept, Value lane,
                            int64_t threads, int64_t lineBytes = 128);

/// When `tile`'s layout gives each warpgroup (4 consecutive warps) one
/// slice of its columns across all its rows (#fa.mma with rows_first and
/// warps / warps_n = 4, warps_n > 1: the wgmma backward's query-row tiles),
/// the width of a slice: warpgroup g holds columns [g w, (g + 1) w).
/// Otherwise nullopt.
std::optional<int64_t> warpgroupColumnSlice(RankedTensorType tile);

/// Columns of one box of the TMA engine's f32 reductions: 128 bytes, the
/// swizzle span, which is also #fa.swizzled_shared's column block for f32
/// (so a staged f32 tile is always whole boxes).
constexpr int64_t kReductionBoxColumns = 32;

/// When the TMA reduction of a tile staged from `tile` (fa-tma-reduce) is
/// issued by each warpgroup for its own column slice, the slice's width:
/// slices of two boxes or more. The staging's lowering then brackets the
/// writes with the warpgroup's own barriers. With one box per warpgroup (D
/// = 64) one issuer for the whole tile behind the consumers' barrier
/// measured ~4% faster on the H200, with two (D = 128) the warpgroups'
/// own issue 1-6% faster (docs/benchmarks.md, 2026-12-02).
std::optional<int64_t> warpgroupReductionSlice(RankedTensorType tile);

/// Whether `program` (an fa.grid, or the kernel outlined from one) is a
/// forward: it carries the online-softmax state. The backward's programs
/// (delta, dkdv, dq) do not.
bool isForwardProgram(Operation *program);

/// Whether `program` adds in the deterministic mode's turns (it waits for
/// one: fa.wait_turn).
bool takesTurns(Operation *program);

/// Whether `program` reads a block mask's tables (an fa.q_tile_range with
/// ranges: the backward of a block mask).
bool readsBlockMaskTables(Operation *program);

/// A view of `type` into the block's dynamic shared memory at byte
/// `offset`.
Value sharedBufferAt(OpBuilder &b, Location loc, Value offset, MemRefType type);

/// Where a K/V tile of a paged cache whose pages hold whole tiles lives:
/// the keys from `start` of batch entry `entry` are in pool entry (page)
/// table[entry, min(start / pageSize, lastColumn)] (i32, clamped to
/// `lastPage`), from row start % pageSize. The tiling's K/V loop and the
/// TMA producer (which looks its own tiles up) build it alike.
struct PagedTile {
  Value page, row;
};
PagedTile buildPagedTile(OpBuilder &b, Location loc, Value table, Value entry,
                         Value start, Value pageSize, Value lastColumn,
                         Value lastPage);

/// Clones into `b` the ops inside `region` that compute `value` (its
/// backward slice), through `mapping`: mapped values and values defined
/// outside `region` are used as they are, and every clone is recorded in
/// `mapping` (so a slice is cloned once per mapping). Fails, with a
/// diagnostic, on an op with regions that are not isolated from above.
FailureOr<Value> cloneSliceInto(OpBuilder &b, Region &region, Value value,
                                IRMapping &mapping);

} // namespace mlir::fa

#endif // FA_COMPILER_UTILS_IRUTILS_H
