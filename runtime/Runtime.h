//===- Runtime.h - JIT-compile, cache, load and launch attention ----*- C++ -*-===//
//
// The C++ API of the runtime. Ask for attention on your device buffers; the
// runtime finds the kernel for the head dim, dtype, mask and tiles (memory
// cache, disk cache, else the in-process compiler), loads it through the
// CUDA driver API and launches it. No MLIR or LLVM in this header.
//
//   std::unique_ptr<fa::Runtime> rt;
//   if (fa::Result r = fa::Runtime::create({}, rt); !r) die(r.message);
//   fa::AttentionArgs args{q, k, v, o, lse};   // device tensors [B, H, S, D]
//   fa::KernelSpec spec;                       // head dim, dtype, mask, tiles
//   spec.headDim = 128; spec.causal = true; spec.blockM = spec.blockN = 0;
//   if (fa::Result r = rt->forward(spec, args); !r) die(r.message);
//
//===----------------------------------------------------------------------===//
#ifndef FA_RUNTIME_RUNTIME_H
#define FA_RUNTIME_RUNTIME_H

#include "lib/KernelResources.h"
#include "lib/KernelSpec.h"
#include "lib/LaunchPlan.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fa {

enum class Status {
  ok = 0,
  invalidArgument, // a bad spec, shape, stride or pointer
  noDriver,        // no CUDA driver or device on this machine
  cudaError,       // a driver call or the launch failed
  compileError,    // the compiler or ptxas failed
  cacheError,      // the disk cache cannot be used
};

const char *toString(Status status);

/// Success, or a status with a message that names the value and the limit.
struct Result {
  Status status = Status::ok;
  std::string message;

  static Result error(Status status, std::string message) {
    return {status, std::move(message)};
  }
  explicit operator bool() const { return status == Status::ok; }
};

/// A device tensor: Q, K, V and O are [B, H, S, D], LSE is [B, H, S]
/// (sizes[3] and strides[3] unused). Strides are in elements; the last
/// dimension must be contiguous.
struct TensorArg {
  const void *data = nullptr;
  int64_t sizes[4] = {0, 0, 0, 0};
  int64_t strides[4] = {0, 0, 0, 0};
};

/// A tensor a variant's score_mod or mask_mod reads (a captured tensor):
/// `rank` sizes (1-4) of `type`, contiguous row-major. Its type and rank
/// are those of the variant text's memref argument.
struct CaptureArg {
  TensorArg tensor;
  ScalarType type = ScalarType::f32;
  int rank = 1;
};

struct AttentionArgs {
  TensorArg q, k, v, o, lse;
  void *stream = nullptr; // CUstream; nullptr = the default stream
  /// With spec.sinks: the Hq f32 sink logits, contiguous (sizes[0] = Hq,
  /// strides[0] = 1); unused otherwise.
  TensorArg sinks;
  /// With spec.blockMask: the keys each 16 query rows keep, i32 [B, 1 or
  /// Hq, ceil(Sq / 16), 4] [first, end, whole_first, whole_end) entries,
  /// contiguous (see fa.attention's key_ranges; computeBlockMask makes
  /// them).
  TensorArg keyRanges;
  /// The variant's captured tensors: the score_mod's, then the mask_mod's.
  std::vector<CaptureArg> captures;
  /// With spec.varlen (a packed batch of B sequences, flash-attn's varlen
  /// convention): q and o are [1, Hq, total_q, D], k and v [1, Hkv,
  /// total_k, D], lse [1, Hq, total_q], and cuSeqlensQ / cuSeqlensK (i32
  /// [B + 1], contiguous, on the device) hold where each sequence's rows
  /// start: non-decreasing from 0 to total_q / total_k. maxSeqlenQ and
  /// maxSeqlenK are the longest sequence's rows and keys (the grid's query
  /// tiles, the defaults' length), at most the totals. The kernel clamps
  /// the offsets into the tensors (it never touches memory outside them),
  /// but offsets that break the rules, or a maxSeqlenQ below a sequence's
  /// rows, leave rows of O and LSE unwritten: the runtime cannot read
  /// device memory to check them (the Python front end does).
  TensorArg cuSeqlensQ, cuSeqlensK;
  int64_t maxSeqlenQ = 0, maxSeqlenK = 0;
  /// With spec.kvLens: i32 [B] (B the sequences with spec.varlen),
  /// contiguous, on the device: the keys each batch entry uses (a KV
  /// cache's filled lengths; larger values are clamped to the keys).
  TensorArg kvLens;
  /// Split-KV (see KernelSpec::splitKv): the parts each query tile's keys
  /// are split into. 0: the runtime's choice (chooseKvParts, from the
  /// programs, the keys and the SMs; only where the requested strategy is
  /// automatic, mma or simt, and not with a block mask); 1: never split;
  /// 2..kMaxKvParts: that many (with a strategy that splits). The parts'
  /// outputs and LSEs are an f32 workspace the runtime allocates on the
  /// stream for the call.
  int64_t kvSplits = 0;
  /// With spec.pagedKv: i32 [B, max_pages], row-major, on the device: the
  /// pages (k's batch index) of each batch entry's keys, P = k.sizes[2]
  /// keys a page (k and v are the pool [num_pages, Hkv, P, D]); numbers
  /// outside the pool are clamped into it.
  TensorArg blockTable;
  /// With spec.cacheBatchIndex: i32 [B], contiguous, on the device: the
  /// K/V batch entry of each batch entry (k and v [B_cache, Hkv, S, D];
  /// numbers past B_cache are clamped to its last entry).
  TensorArg cacheBatchIdx;
  /// With spec.dtype e4m3 (FP8 q, k, v): f32 [B, Hkv] descale factors, any
  /// strides, on the device (flash-attn's q_descale, k_descale,
  /// v_descale): S = scale q_descale k_descale Q K^T, O = v_descale P V.
  TensorArg qDescale, kDescale, vDescale;
};

/// Decoding with grouped heads (one query row, Hq = G x Hkv, G > 1): the
/// G query heads of a K/V head become G query rows of one head, so that
/// one program reads each K/V tile once for all of them (the same bytes,
/// re-strided: Q, O [B, Hq, 1, D] as [B, Hkv, G, D], LSE [B, Hq, 1] as
/// [B, Hkv, G]). One row sees every key under the causal mask, so the
/// packed problem is not causal. Rewrites `spec` and `args` and returns
/// true where that is the same attention: no variant (its head and row
/// indices would change meaning), no block mask, not varlen, not the
/// backward; with sinks only where `withSinks` (each row then joins its
/// own query head's sink: KernelSpec::sinksPerRow); else leaves them alone.
bool packQueryGroups(KernelSpec &spec, AttentionArgs &args,
                     bool withSinks = false);

/// Whether forward() packs a decode with sinks (packQueryGroups'
/// withSinks): each row then joins its own query head's sink
/// (..._rowsinks kernels). Unpacked, every query head reads the cache on
/// its own (2.2-4.6x the time, docs/benchmarks.md (ag)).
inline constexpr bool kPackDecodeWithSinks = true;

/// The backward's tensors: the forward's inputs, its O and LSE, the output
/// gradient dO (like O), and the gradients it writes (dQ like Q, dK and dV
/// like K). The workspaces (D: [B, Hq, Sq] and the dQ accumulator [B, Hq,
/// Sq, D] in f32; with spec.deterministic the i32 turn counters [B, Hq,
/// query tiles]) are the runtime's, allocated on the stream for the call
/// (cuMemAllocAsync: the driver's pool reuses them from call to call).
struct AttentionBackwardArgs {
  TensorArg q, k, v, o, gradOutput, lse, gradQuery, gradKey, gradValue;
  void *stream = nullptr; // CUstream; nullptr = the default stream
  /// With spec.sinks: the forward's sink logits (as AttentionArgs::sinks)
  /// and their gradient, Hq contiguous f32 values the backward sets.
  TensorArg sinks, gradSinks;
  /// With spec.blockMask: the query rows that keep each 16 keys, i32 [B, 1
  /// or Hq, ceil(Sk / 16), 4] entries as AttentionArgs::keyRanges'.
  TensorArg queryRanges;
  /// With spec.blockMask and spec.deterministic: the same block mask's key
  /// ranges (AttentionArgs::keyRanges, the same heads as queryRanges): the
  /// turns at a query tile are taken by the K/V tiles they give it.
  TensorArg keyRanges;
  /// The forward's captured tensors (no gradient flows to them).
  std::vector<CaptureArg> captures;
  /// With spec.varlen: the forward's packed batch (AttentionArgs'); the
  /// gradients are packed like the tensors they belong to.
  TensorArg cuSeqlensQ, cuSeqlensK;
  int64_t maxSeqlenQ = 0, maxSeqlenK = 0;
};

/// The tensors of computeBlockMask: the problem's queries and keys (their
/// sizes: the program reads no element, so data may be null), the two
/// tables it fills (i32, contiguous: key ranges [B, Hb, ceil(Sq / 16), 4],
/// query ranges [B, Hb, ceil(Sk / 16), 4], Hb = 1 or Hq) and the mask_mod's
/// captured tensors.
struct BlockMaskArgs {
  TensorArg q, k;
  TensorArg keyRanges, queryRanges;
  void *stream = nullptr; // CUstream; nullptr = the default stream
  std::vector<CaptureArg> captures;
};

/// Where a kernel came from this time.
enum class KernelSource { compiled, diskCache, memoryCache };

/// What a compiled kernel is. The backward is several kernels launched in
/// order; where one figure stands for all of them it is the largest
/// (threads, shared memory, registers) or the sum (spills).
struct KernelInfo {
  KernelSpec spec; // resolved: defaults filled in
  std::string name;
  std::string key; // cache key (hex SHA-256)
  int64_t numThreads = 0;
  int64_t sharedMemoryBytes = 0; // dynamic, per block
  /// The compiler's launches (entry point, grid, block, parameters), in the
  /// order they run.
  std::vector<LaunchPlan> launches;
  KernelResources ptxas;         // the assembler's report at compile time
  std::string assembler; // what made the cubin: "ptxas 13.0.88", "driver 13000"
  int registers = -1;            // from the driver once loaded
  int localBytes = -1;           // local memory per thread (spills), loaded
  KernelSource source = KernelSource::compiled;
  bool replacedCorruptEntry = false; // a bad disk entry was rebuilt
  std::string cacheWarning; // why the kernel could not be written to disk
  double compileSeconds = 0.0;       // compile (or disk read) time
  CompileSeconds compileStages;      // its split (0 when read from disk)
  double loadSeconds = 0.0;          // cuModuleLoadData time
};

struct RuntimeOptions {
  /// Disk cache folder; "" = $FA_CACHE_DIR, else ~/.cache/fa.
  std::string cacheDir;
  bool diskCache = true;
  int device = 0;
  /// Time the first default candidates of a request whose tiles are left
  /// to the defaults, once per (spec, length bucket), on the caller's
  /// tensors, and keep the fastest (in memory and in the disk cache); also
  /// on with FA_AUTOTUNE=1 (runtime/Autotune.h).
  bool autotune = false;
};

/// What a runtime did for the requests it served (prepare, load, forward,
/// backward), for tests and diagnostics. A request is the spec as written
/// and, where its defaults depend on it, the length bucket; one seen
/// before is reused: one lookup, no validation, no SHA-256.
struct RuntimeCounters {
  /// Requests resolved: validated, defaults chosen, kernel found or
  /// compiled (first sight, or again after a failure or clearMemoryCache).
  int64_t requestsResolved = 0;
  /// Requests served by an earlier resolution.
  int64_t requestsReused = 0;
  /// SHA-256 cache keys computed: one per kernel compiled or read from
  /// disk, one per tuning choice looked up on disk.
  int64_t cacheKeysComputed = 0;
  /// Argument checks by forward() and backward(): one per call, two where
  /// the defaults settled on another candidate than the first on the
  /// call that resolved the request.
  int64_t argumentChecks = 0;
};

class Runtime {
public:
  /// Always succeeds on a machine without a driver (then hasDriver() is
  /// false and launches return Status::noDriver); fails for a bad device
  /// index or an unusable cache folder.
  static Result create(const RuntimeOptions &options,
                       std::unique_ptr<Runtime> &runtime);
  ~Runtime();

  bool hasDriver() const;
  /// Why there is no driver, or "".
  const std::string &driverError() const;
  /// The device's arch (e.g. sm_90a), or sm_90a without a device.
  const std::string &deviceArch() const;
  const std::string &cacheDir() const;
  /// Why there is no disk cache although one was asked for ("" if there is).
  const std::string &cacheWarning() const;

  /// Fills the defaults: tiles and warps left at 0 (the first default
  /// candidate), and an empty arch (the device's). prepare(), load() and
  /// forward() may settle on a later candidate when this one spills; the
  /// KernelInfo they return holds the spec actually used. `length`: the
  /// sequence length (the longer of query and key) the defaults are chosen
  /// for, as forward() chooses them for its tensors; 0 = not known.
  KernelSpec resolve(KernelSpec spec, int64_t length = 0) const;

  /// Finds or compiles the kernel (memory, disk, compiler). Needs no GPU.
  /// With defaulted tiles and the `length` a later forward() runs, this is
  /// the kernel that forward() launches.
  Result prepare(const KernelSpec &spec, KernelInfo *info = nullptr,
                 int64_t length = 0);
  /// prepare() and load the kernel on the device.
  Result load(const KernelSpec &spec, KernelInfo *info = nullptr,
              int64_t length = 0);

  /// O, LSE = attention(Q, K, V) with the kernel for `spec` (head dim,
  /// dtype, mask, scale; tiles 0 = default). All arguments are checked
  /// before anything is launched. A decode step (one query row) of grouped
  /// heads runs packed (packQueryGroups).
  Result forward(const KernelSpec &spec, const AttentionArgs &args);

  /// dQ, dK, dV = the gradients of attention for dO, from the forward's O
  /// and LSE, with the backward kernels for `spec` (its `backward` flag is
  /// set here). All arguments are checked before anything is launched.
  Result backward(const KernelSpec &spec, const AttentionBackwardArgs &args);

  /// The block mask of `spec`'s mask_mod and causal flag on the problem of
  /// args.q and args.k (fa.block_mask): fills the key and query range
  /// tables that forward() and backward() of the spec with `blockMask`
  /// take. Hb = 1 promises a mask that is the same for every head (it is
  /// evaluated at head 0). The tables hold for as long as the captured
  /// tensors' data does: the caller keeps them (as FlexAttention's
  /// create_block_mask leaves its BlockMask to the caller).
  Result computeBlockMask(const KernelSpec &spec, const BlockMaskArgs &args);

  /// Forgets the loaded and in-memory kernels (the disk cache stays).
  void clearMemoryCache();

  /// Whether autotuning is on (RuntimeOptions::autotune or FA_AUTOTUNE=1).
  bool autotunes() const;
  /// How many tunings this runtime timed (choices read back from memory or
  /// the disk cache do not count).
  int64_t tuningsTimed() const;
  /// What this runtime did so far (RuntimeCounters).
  RuntimeCounters counters() const;

  struct Impl;

private:
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// The checks forward() makes before a launch, without a device: shapes
/// against each other and the spec, strides, null and misaligned pointers,
/// grid limits. Exposed for tests and for bindings.
Result checkAttentionArgs(const KernelSpec &spec, const AttentionArgs &args);

/// The checks backward() makes: the forward's checks on (Q, K, V, O, LSE),
/// dO shaped like O, dQ like Q, dK and dV like K, the gradients neither
/// overlapping each other nor any input.
Result checkAttentionBackwardArgs(const KernelSpec &spec,
                                  const AttentionBackwardArgs &args);

/// The checks computeBlockMask makes: q and k sizes of one problem, the
/// tables' shapes for it (the same Hb, 1 or Hq), their layouts, no overlap
/// between them or with a captured tensor.
Result checkBlockMaskArgs(const BlockMaskArgs &args);

} // namespace fa

#endif // FA_RUNTIME_RUNTIME_H
