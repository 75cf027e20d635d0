//===- ArgumentChecks.cpp - Checks before a launch --------------*- C++ -*-===//
//
// Pure functions of a KernelSpec and the caller's tensors: shapes, layouts,
// pointers, aliasing, each strategy's access widths and the grid limits.
//
//===----------------------------------------------------------------------===//
#include "runtime/ArgumentChecks.h"
#include "lib/Strategy/SpecRules.h"
#include "runtime/Runtime.h"

#include "lib/Strategy/Registry.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fa {

namespace {

// Overflow-checked arithmetic on the compiler's builtins (llvm::MulOverflow):
// llvm::checkedMul goes through APInt, ~15% of a call's host time here.
std::optional<int64_t> multiplied(int64_t a, int64_t b) {
  int64_t product;
  if (llvm::MulOverflow(a, b, product))
    return std::nullopt;
  return product;
}

std::optional<int64_t> multipliedAdded(int64_t a, int64_t b, int64_t c) {
  int64_t product, sum;
  if (llvm::MulOverflow(a, b, product) || llvm::AddOverflow(product, c, sum))
    return std::nullopt;
  return sum;
}

} // namespace

int64_t numElements(const TensorArg &t, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) {
    if (t.sizes[d] == 0)
      return 0;
    std::optional<int64_t> product = multiplied(n, t.sizes[d]);
    n = product ? *product : std::numeric_limits<int64_t>::max();
  }
  return n;
}

namespace {

/// Grid limits of the launch: x = query tiles, y = heads, z = batch.
constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxGridYZ = 65535;

std::string shapeString(const TensorArg &t, int rank) {
  std::string s = "[";
  for (int d = 0; d < rank; ++d)
    s += (d ? ", " : "") + std::to_string(t.sizes[d]);
  return s + "]";
}

/// Strides are non-negative, the last dimension contiguous, and the
/// largest offset representable.
/// `contiguousLast` false: any stride in the last dimension too (FP8's
/// descales, often an expanded scalar).
std::string checkLayout(const char *name, const TensorArg &t, int rank,
                        size_t elementBytes, bool contiguousLast = true) {
  for (int d = 0; d < rank; ++d) {
    if (t.sizes[d] < 0)
      return std::string(name) + " has a negative size " +
             std::to_string(t.sizes[d]) + " in dimension " + std::to_string(d);
    if (t.strides[d] < 0)
      return std::string(name) + " has a negative stride " +
             std::to_string(t.strides[d]) + " in dimension " +
             std::to_string(d) + " (not supported)";
  }
  if (contiguousLast && t.sizes[rank - 1] > 1 && t.strides[rank - 1] != 1)
    return std::string(name) + " must be contiguous in its last dimension "
           "(stride 1), got stride " + std::to_string(t.strides[rank - 1]);
  int64_t maxOffset = 0;
  for (int d = 0; d < rank; ++d) {
    if (t.sizes[d] == 0)
      return "";
    std::optional<int64_t> offset =
        multipliedAdded(t.sizes[d] - 1, t.strides[d], maxOffset);
    if (!offset)
      return std::string(name) + " spans more elements than 64-bit indexing "
             "can address";
    maxOffset = *offset;
  }
  if (!t.data)
    return std::string(name) + " is a null pointer";
  if (reinterpret_cast<uintptr_t>(t.data) % elementBytes != 0)
    return std::string(name) + " is not aligned to its " +
           std::to_string(elementBytes) + "-byte elements";
  // The bytes from the pointer to the last element are addresses (the
  // overlap checks and the kernel's 64-bit address arithmetic rely on it).
  bool overflowed = false;
  uint64_t extent = llvm::SaturatingMultiply(
      uint64_t(maxOffset) + 1, uint64_t(elementBytes), &overflowed);
  if (overflowed || reinterpret_cast<uintptr_t>(t.data) > UINTPTR_MAX - extent)
    return std::string(name) + " spans past the end of the address space (" +
           std::to_string(uint64_t(maxOffset) + 1) + " elements of " +
           std::to_string(elementBytes) + " bytes from " +
           std::to_string(reinterpret_cast<uintptr_t>(t.data)) + ")";
  return "";
}

/// FP8 descale factors: f32 [batch, kvHeads] with the layout rules of
/// every tensor (sizes, span, pointer, alignment) but any non-negative
/// strides (an expanded scalar, stride 0, is common).
std::string checkDescale(const char *name, const TensorArg &t, int64_t batch,
                         int64_t kvHeads) {
  if (t.sizes[0] != batch || t.sizes[1] != kvHeads)
    return std::string(name) + " is [" + std::to_string(t.sizes[0]) + ", " +
           std::to_string(t.sizes[1]) +
           "]; it needs one f32 factor per batch entry and K/V head [" +
           std::to_string(batch) + ", " + std::to_string(kvHeads) + "]";
  return checkLayout(name, t, 2, 4, /*contiguousLast=*/false);
}

/// Pointer and strides (of dimensions with more than one element) are
/// multiples of the kernel's access width of `elements` elements.
std::string checkAccessWidth(const char *name, const TensorArg &t,
                             int64_t elements, size_t elementBytes,
                             const char *strategy, const char *why) {
  size_t bytes = size_t(elements) * elementBytes;
  if (t.data && reinterpret_cast<uintptr_t>(t.data) % bytes != 0)
    return std::string(name) + " must be " + std::to_string(bytes) +
           "-byte aligned for the " + strategy + " strategy (" + why + ")";
  for (int d = 0; d < 3; ++d)
    if (t.sizes[d] > 1 && t.strides[d] % elements != 0)
      return std::string(name) + " stride " + std::to_string(t.strides[d]) +
             " in dimension " + std::to_string(d) +
             " must be a multiple of " + std::to_string(elements) +
             " elements for the " + strategy + " strategy (" + why + ")";
  return "";
}

/// The TMA engine (the wgmma strategy's loads) addresses dims below 2^32
/// elements and byte strides below 2^40.
std::string checkTensorMapLimits(const char *name, const TensorArg &t,
                                 size_t elementBytes) {
  constexpr int64_t kMaxDim = int64_t(1) << 32, kMaxStride = int64_t(1) << 40;
  for (int d = 0; d < 4; ++d) {
    if (t.sizes[d] > kMaxDim)
      return std::string(name) + " size " + std::to_string(t.sizes[d]) +
             " in dimension " + std::to_string(d) +
             " exceeds the TMA limit of 2^32 elements (wgmma strategy)";
    std::optional<int64_t> bytes =
        multiplied(t.strides[d], int64_t(elementBytes));
    if (t.sizes[d] > 1 && (!bytes || *bytes >= kMaxStride))
      return std::string(name) + " stride " + std::to_string(t.strides[d]) +
             " in dimension " + std::to_string(d) +
             " exceeds the TMA limit of 2^40 bytes (wgmma strategy)";
  }
  return "";
}

/// The bytes [first, last] a tensor's elements span; nullopt when it has no
/// element (an empty tensor overlaps nothing). Called after checkLayout, so
/// the span is representable.
std::optional<std::pair<uintptr_t, uintptr_t>>
byteSpan(const TensorArg &t, int rank, size_t elementBytes) {
  int64_t last = 0;
  for (int d = 0; d < rank; ++d) {
    if (t.sizes[d] == 0)
      return std::nullopt;
    last += (t.sizes[d] - 1) * t.strides[d];
  }
  uintptr_t first = reinterpret_cast<uintptr_t>(t.data);
  return std::make_pair(first, first + uintptr_t(last + 1) * elementBytes - 1);
}

/// Two elements of an output never share an address (else programs race).
std::string checkNoOverlap(const char *name, const TensorArg &t, int rank) {
  // A tensor without elements overlaps nothing, whatever its strides (an
  // empty output is often described with zero strides).
  for (int d = 0; d < rank; ++d)
    if (t.sizes[d] == 0)
      return "";
  std::vector<std::pair<int64_t, int64_t>> dims; // (stride, size)
  for (int d = 0; d < rank; ++d)
    if (t.sizes[d] > 1)
      dims.push_back({t.strides[d], t.sizes[d]});
  std::sort(dims.begin(), dims.end());
  int64_t span = 1; // elements covered by the inner dimensions
  for (auto [stride, size] : dims) {
    if (stride < span)
      return std::string(name) + " has overlapping elements (stride " +
             std::to_string(stride) + " is smaller than the " +
             std::to_string(span) + " elements of the inner dimensions)";
    // Saturated: a product past 64 bits exceeds every stride that follows.
    std::optional<int64_t> covered = multiplied(stride, size);
    span = covered ? *covered : std::numeric_limits<int64_t>::max();
  }
  return "";
}

/// A sinks vector (or its gradient): Hq contiguous f32 values, with every
/// tensor's layout rules (checkLayout: sizes, span, pointer, alignment).
std::string checkSinks(const char *name, const TensorArg &t, int64_t heads) {
  if (t.sizes[0] != heads)
    return std::string(name) + " holds one f32 logit per query head: size " +
           std::to_string(t.sizes[0]) + " does not match the " +
           std::to_string(heads) + " query heads";
  return checkLayout(name, t, 1, 4);
}

using ByteSpan = std::optional<std::pair<uintptr_t, uintptr_t>>;

bool spansOverlap(const ByteSpan &x, const ByteSpan &y) {
  return x && y && x->first <= y->second && y->first <= x->second;
}

/// Captured tensor `i`: a rank in [1, 4], elements (a region may read any
/// of them), every tensor's layout rules, and row-major without gaps (the
/// kernels index it with its sizes).
/// "" when the first `rank` dimensions of `t` are contiguous row-major
/// (dimensions of size 1 take any stride), else the error naming `name`.
/// checkLayout has bounded the span first, so the products fit.
std::string checkRowMajor(const std::string &name, const TensorArg &t,
                          int rank) {
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (t.sizes[d] > 1 && t.strides[d] != stride)
      return name + " must be contiguous (row-major): stride " +
             std::to_string(t.strides[d]) + " in dimension " +
             std::to_string(d) + ", expected " + std::to_string(stride);
    stride *= t.sizes[d];
  }
  return "";
}

std::string checkCaptureLayout(size_t i, const CaptureArg &c) {
  std::string name = "captured tensor " + std::to_string(i);
  if (c.rank < 1 || c.rank > 4)
    return name + " has rank " + std::to_string(c.rank) +
           "; captures have rank 1 to 4";
  if (std::string error = checkLayout(name.c_str(), c.tensor, c.rank,
                                      size_t(scalarTypeBytes(c.type)));
      !error.empty())
    return error;
  if (numElements(c.tensor, c.rank) == 0)
    return name + " is empty (" + shapeString(c.tensor, c.rank) +
           "): a region reads its elements";
  return checkRowMajor(name, c.tensor, c.rank);
}

/// A block mask's range table (`name`, for a problem of `batch` and
/// `heads` whose `length` rows or keys it bounds): i32 [batch, 1 or heads,
/// ceil(length / 16), 4], contiguous row-major, with every tensor's layout
/// rules.
std::string checkRangeTable(const char *name, const char *lengthName,
                            const TensorArg &t, int64_t batch, int64_t heads,
                            int64_t length) {
  int64_t groups = (length + kBlockMaskGroup - 1) / kBlockMaskGroup;
  if (t.sizes[0] != batch || (t.sizes[1] != 1 && t.sizes[1] != heads) ||
      t.sizes[2] != groups || t.sizes[3] != kRangeTableColumns)
    return std::string(name) + " is " + shapeString(t, 4) +
           "; a block mask's table is [" + std::to_string(batch) +
           ", 1 or " + std::to_string(heads) + ", " + std::to_string(groups) +
           ", " + std::to_string(kRangeTableColumns) +
           "]: batch, heads (1 when every head has the same mask), " +
           lengthName + " / " + std::to_string(kBlockMaskGroup) +
           " rounded up, and [first, end, whole_first, whole_end)";
  if (std::string error = checkLayout(name, t, 4, 4); !error.empty())
    return error;
  return checkRowMajor(name, t, 4);
}

/// Both tables of one block mask for queries `q` and keys `k`: each a
/// range table of its length, with the same heads.
std::string checkBlockMaskTables(const TensorArg &keyRanges,
                                 const TensorArg &queryRanges,
                                 const TensorArg &q, const TensorArg &k) {
  if (std::string error =
          checkRangeTable("key_ranges", "the query length", keyRanges,
                          q.sizes[0], q.sizes[1], q.sizes[2]);
      !error.empty())
    return error;
  if (std::string error =
          checkRangeTable("query_ranges", "the key length", queryRanges,
                          q.sizes[0], q.sizes[1], k.sizes[2]);
      !error.empty())
    return error;
  if (keyRanges.sizes[1] != queryRanges.sizes[1])
    return "key_ranges has " + std::to_string(keyRanges.sizes[1]) +
           " heads and query_ranges " + std::to_string(queryRanges.sizes[1]) +
           ": one block mask has one head count (1 or Hq)";
  return "";
}

/// The captures' layouts, and no byte of them among `outputs`' (the
/// kernels read captures while other blocks write the outputs).
std::string checkCapturesApart(
    const std::vector<CaptureArg> &captures,
    llvm::ArrayRef<std::pair<const char *, ByteSpan>> outputs) {
  for (size_t i = 0; i < captures.size(); ++i) {
    const CaptureArg &c = captures[i];
    if (std::string error = checkCaptureLayout(i, c); !error.empty())
      return error;
    ByteSpan bytes =
        byteSpan(c.tensor, c.rank, size_t(scalarTypeBytes(c.type)));
    for (auto [name, out] : outputs)
      if (spansOverlap(bytes, out))
        return std::string(name) + " overlaps captured tensor " +
               std::to_string(i) +
               " in memory (outputs must not alias the inputs)";
  }
  return "";
}

} // namespace

/// A varlen batch (see AttentionArgs::cuSeqlensQ): one packed batch
/// entry, offset tables of B + 1 i32 each, maxima within the totals.
/// With a paged cache (`paged`), K and V are the pool of pages and a
/// sequence's keys are at most its table row's.
static std::string checkVarlen(const AttentionArgs &a, bool paged) {
  for (auto [name, t] : {std::pair<const char *, const TensorArg *>{"q", &a.q},
                         {"k", paged ? nullptr : &a.k}})
    if (t && t->sizes[0] != 1)
      return std::string("a varlen batch packs its sequences into one batch "
                         "entry: ") +
             name + " batch must be 1, got " + std::to_string(t->sizes[0]);
  for (auto [name, t] : {std::pair<const char *, const TensorArg *>{
                             "cu_seqlens_q", &a.cuSeqlensQ},
                         {"cu_seqlens_k", &a.cuSeqlensK}}) {
    if (t->sizes[0] < 1)
      return std::string(name) +
             " holds B + 1 offsets (at least 1), got " +
             std::to_string(t->sizes[0]);
    // Contiguous (the last dimension's rule), 4-byte aligned.
    if (std::string error = checkLayout(name, *t, 1, 4); !error.empty())
      return error;
  }
  if (a.cuSeqlensQ.sizes[0] != a.cuSeqlensK.sizes[0])
    return "cu_seqlens_q (" + std::to_string(a.cuSeqlensQ.sizes[0]) +
           " offsets) and cu_seqlens_k (" +
           std::to_string(a.cuSeqlensK.sizes[0]) +
           ") must both hold B + 1 offsets";
  if (a.cuSeqlensQ.sizes[0] - 1 > kMaxGridYZ)
    return "a varlen batch of " + std::to_string(a.cuSeqlensQ.sizes[0] - 1) +
           " sequences exceeds the grid limit " + std::to_string(kMaxGridYZ);
  auto outside = [](const char *name, int64_t value, int64_t total,
                    const char *what) -> std::string {
    if (value >= 0 && value <= total)
      return "";
    return std::string(name) + " must be in [0, " + std::to_string(total) +
           "] (" + what + "), got " + std::to_string(value);
  };
  if (std::string error = outside("max_seqlen_q", a.maxSeqlenQ, a.q.sizes[2],
                                  "the packed rows");
      !error.empty())
    return error;
  if (!paged)
    return outside("max_seqlen_k", a.maxSeqlenK, a.k.sizes[2],
                   "the packed rows");
  // A sequence's keys: at most a table row's pages' rows (a table or pages
  // without rows are named by the paged cache's checks).
  if (a.blockTable.sizes[1] < 1 || a.k.sizes[2] < 1)
    return "";
  int64_t keys = multiplied(a.blockTable.sizes[1], a.k.sizes[2])
                     .value_or(std::numeric_limits<int64_t>::max());
  return outside("max_seqlen_k", a.maxSeqlenK, keys,
                 "a table row's pages' rows");
}

std::string checkCaptures(const std::vector<CaptureType> &expected,
                          const std::vector<CaptureArg> &given) {
  if (given.size() != expected.size())
    return "the variant reads " + std::to_string(expected.size()) +
           " captured tensors (the score_mod's, then the mask_mod's); the "
           "call gives " +
           std::to_string(given.size());
  for (size_t i = 0; i < given.size(); ++i) {
    const CaptureArg &c = given[i];
    if (c.type != expected[i].type || c.rank != expected[i].rank)
      return "captured tensor " + std::to_string(i) + " is " +
             scalarTypeName(c.type) + " of rank " + std::to_string(c.rank) +
             "; the variant reads " + scalarTypeName(expected[i].type) +
             " of rank " + std::to_string(expected[i].rank);
    if (std::string error = checkCaptureLayout(i, c); !error.empty())
      return error;
  }
  return "";
}

Result checkAttentionArgs(const KernelSpec &spec, const AttentionArgs &a) {
  auto invalid = [](std::string message) {
    return Result::error(Status::invalidArgument, std::move(message));
  };
  size_t elementBytes = size_t(fa::elementBytes(spec.dtype));
  // FP8 inputs write a 16-bit O.
  size_t outputBytes = size_t(fa::elementBytes(spec.outputDtype()));
  const TensorArg &q = a.q, &k = a.k, &v = a.v, &o = a.o, &lse = a.lse;
  // Shapes.
  for (auto [name, t] : {std::pair<const char *, const TensorArg *>{"q", &q},
                         {"k", &k},
                         {"v", &v},
                         {"o", &o}})
    if (t->sizes[3] != spec.headDim)
      return invalid(std::string(name) + " head dim " +
                     std::to_string(t->sizes[3]) +
                     " does not match the kernel's head dim " +
                     std::to_string(spec.headDim));
  for (int d = 0; d < 4; ++d)
    if (v.sizes[d] != k.sizes[d])
      return invalid("v shape " + shapeString(v, 4) +
                     " does not match k shape " + shapeString(k, 4));
  for (int d = 0; d < 4; ++d)
    if (o.sizes[d] != q.sizes[d])
      return invalid("o shape " + shapeString(o, 4) +
                     " does not match q shape " + shapeString(q, 4));
  for (int d = 0; d < 3; ++d)
    if (lse.sizes[d] != q.sizes[d])
      return invalid("lse shape " + shapeString(lse, 3) +
                     " must be q's [B, H, S] = " + shapeString(q, 3));
  if (spec.varlen)
    if (std::string error = checkVarlen(a, spec.pagedKv); !error.empty())
      return invalid(error);
  if (spec.pagedKv) {
    // K, V: a pool of pages [num_pages, Hkv, P, D]; the table [B,
    // max_pages], row-major i32; the kernel reads a K/V tile from one page.
    // A varlen batch: a row per sequence.
    const TensorArg &table = a.blockTable;
    int64_t entries = spec.varlen ? a.cuSeqlensQ.sizes[0] - 1 : q.sizes[0];
    if (table.sizes[0] != entries)
      return invalid("block_table has " + std::to_string(table.sizes[0]) +
                     " rows; it needs one per " +
                     (spec.varlen ? "sequence (" : "batch entry (") +
                     std::to_string(entries) + ")");
    if (table.sizes[1] < 1 || k.sizes[0] < 1 || k.sizes[2] < 1)
      return invalid("a paged cache needs at least one page of at least "
                     "one row and a block_table of at least one column, got "
                     "k " + shapeString(k, 4) + " and block_table [" +
                     std::to_string(table.sizes[0]) + ", " +
                     std::to_string(table.sizes[1]) + "]");
    if (!spec.pageGather && k.sizes[2] % spec.blockN != 0)
      return invalid("page size " + std::to_string(k.sizes[2]) +
                     " (k's dimension 2) must be a multiple of the kernel's "
                     "block_n " +
                     std::to_string(spec.blockN) +
                     ": a K/V tile is read from one page (a page_gather "
                     "kernel reads any page size)");
    if (std::string error = checkLayout("block_table", table, 2, 4);
        !error.empty())
      return invalid(error);
  } else if (spec.cacheBatchIndex) {
    // K, V: caches of their own entries, read through the index.
    if (a.cacheBatchIdx.sizes[0] != q.sizes[0])
      return invalid("cache_batch_idx holds " +
                     std::to_string(a.cacheBatchIdx.sizes[0]) +
                     " entries; it needs one per batch entry (" +
                     std::to_string(q.sizes[0]) + ")");
    if (k.sizes[0] < 1 && q.sizes[0] > 0)
      return invalid("cache_batch_idx needs a K/V cache of at least one "
                     "entry, got k " + shapeString(k, 4));
    if (std::string error = checkLayout("cache_batch_idx", a.cacheBatchIdx,
                                        1, 4);
        !error.empty())
      return invalid(error);
  } else if (k.sizes[0] != q.sizes[0]) {
    return invalid("k batch " + std::to_string(k.sizes[0]) +
                   " does not match q batch " + std::to_string(q.sizes[0]));
  }
  if (spec.kvLens) {
    int64_t entries = spec.varlen ? a.cuSeqlensQ.sizes[0] - 1 : q.sizes[0];
    if (a.kvLens.sizes[0] != entries)
      return invalid("kv_lens holds " + std::to_string(a.kvLens.sizes[0]) +
                     " lengths; it needs one per " +
                     (spec.varlen ? "sequence (" : "batch entry (") +
                     std::to_string(entries) + ")");
    if (std::string error = checkLayout("kv_lens", a.kvLens, 1, 4);
        !error.empty())
      return invalid(error);
  }
  if (!spec.maskMod.empty() && k.sizes[2] > kMaxMaskModKeyLength)
    return invalid("key length " + std::to_string(k.sizes[2]) +
                   " exceeds " + std::to_string(kMaxMaskModKeyLength) +
                   ", the longest a kernel with a mask_mod takes (its "
                   "window bounds are 32-bit)");
  // Layouts, pointers (empty tensors may be null).
  for (auto [name, t, rank] :
       {std::tuple<const char *, const TensorArg *, int>{"q", &q, 4},
        {"k", &k, 4},
        {"v", &v, 4},
        {"o", &o, 4},
        {"lse", &lse, 3}}) {
    size_t bytes = std::string(name) == "lse" ? 4
                   : std::string(name) == "o" ? outputBytes
                                              : elementBytes;
    if (std::string error = checkLayout(name, *t, rank, bytes); !error.empty())
      return invalid(error);
  }
  for (auto [name, t, rank] :
       {std::tuple<const char *, const TensorArg *, int>{"o", &o, 4},
        {"lse", &lse, 3}})
    if (std::string error = checkNoOverlap(name, *t, rank); !error.empty())
      return invalid(error);
  // (Per row: the packed GQA decode's rows are query heads.)
  if (spec.sinks)
    if (std::string error =
            checkSinks("sinks", a.sinks,
                       spec.sinksPerRow ? q.sizes[1] * q.sizes[2] : q.sizes[1]);
        !error.empty())
      return invalid(error);
  bool float8 = spec.dtype == ElementType::e4m3;
  if (float8)
    for (auto [name, t] :
         {std::pair<const char *, const TensorArg *>{"q_descale", &a.qDescale},
          {"k_descale", &a.kDescale},
          {"v_descale", &a.vDescale}})
      if (std::string error = checkDescale(name, *t, q.sizes[0], k.sizes[1]);
          !error.empty())
        return invalid(error);
  if (spec.blockMask)
    if (std::string error =
            checkRangeTable("key_ranges", "the query length", a.keyRanges,
                            q.sizes[0], q.sizes[1], q.sizes[2]);
        !error.empty())
      return invalid(error);
  // Outputs share no byte with the inputs or with each other: the kernel
  // reads Q, K and V while other blocks already write O and LSE.
  struct Span {
    const char *name;
    std::optional<std::pair<uintptr_t, uintptr_t>> bytes;
  };
  // Every input the spec reads: Q, K, V and the optional tables.
  std::vector<Span> inputs = {{"q", byteSpan(q, 4, elementBytes)},
                              {"k", byteSpan(k, 4, elementBytes)},
                              {"v", byteSpan(v, 4, elementBytes)}};
  if (spec.sinks)
    inputs.push_back({"sinks", byteSpan(a.sinks, 1, 4)});
  if (spec.cacheBatchIndex)
    inputs.push_back({"cache_batch_idx", byteSpan(a.cacheBatchIdx, 1, 4)});
  if (spec.pagedKv)
    inputs.push_back({"block_table", byteSpan(a.blockTable, 2, 4)});
  if (spec.kvLens)
    inputs.push_back({"kv_lens", byteSpan(a.kvLens, 1, 4)});
  if (spec.varlen) {
    inputs.push_back({"cu_seqlens_q", byteSpan(a.cuSeqlensQ, 1, 4)});
    inputs.push_back({"cu_seqlens_k", byteSpan(a.cuSeqlensK, 1, 4)});
  }
  if (spec.blockMask)
    inputs.push_back({"key_ranges", byteSpan(a.keyRanges, 4, 4)});
  if (float8) {
    inputs.push_back({"q_descale", byteSpan(a.qDescale, 2, 4)});
    inputs.push_back({"k_descale", byteSpan(a.kDescale, 2, 4)});
    inputs.push_back({"v_descale", byteSpan(a.vDescale, 2, 4)});
  }
  Span outputs[] = {{"o", byteSpan(o, 4, outputBytes)},
                    {"lse", byteSpan(lse, 3, 4)}};
  auto overlap = [](const Span &a, const Span &b) {
    return a.bytes && b.bytes && a.bytes->first <= b.bytes->second &&
           b.bytes->first <= a.bytes->second;
  };
  for (const Span &out : outputs)
    for (const Span &in : inputs)
      if (overlap(out, in))
        return invalid(std::string(out.name) + " overlaps " + in.name +
                       " in memory (outputs must not alias the inputs)");
  if (overlap(outputs[0], outputs[1]))
    return invalid("o overlaps lse in memory");
  if (std::string error = checkCapturesApart(
          a.captures, {{"o", outputs[0].bytes}, {"lse", outputs[1].bytes}});
      !error.empty())
    return invalid(error);
  // Strategies that copy Q/K/V rows in 16-byte chunks (cp.async, TMA) store
  // O rows in 16-byte chunks; TMA has its own size and stride limits.
  const StrategyModel &model = strategyModel(resolveStrategy(spec));
  if (model.inputAccessElements) {
    // (The model counts 16-bit elements; an 8-bit chunk holds twice as
    // many.)
    int64_t inputChunk = model.inputAccessElements * 2 / int64_t(elementBytes);
    for (auto [name, t] : {std::pair<const char *, const TensorArg *>{"q", &q},
                           {"k", &k},
                           {"v", &v}}) {
      if (std::string error =
              checkAccessWidth(name, *t, inputChunk, elementBytes, model.name,
                               "rows are copied in 16-byte chunks");
          !error.empty())
        return invalid(error);
      if (model.tensorMapInputs)
        if (std::string error = checkTensorMapLimits(name, *t, elementBytes);
            !error.empty())
          return invalid(error);
    }
    if (std::string error =
            checkAccessWidth("o", o, model.outputAccessElements, outputBytes,
                             model.name, "O rows are stored in 16-byte chunks");
        !error.empty())
      return invalid(error);
  }
  int64_t batch = q.sizes[0], qHeads = q.sizes[1], kvHeads = k.sizes[1];
  if (numElements(q, 4) > 0) {
    if (kvHeads == 0 || qHeads % kvHeads != 0)
      return invalid("q heads (" + std::to_string(qHeads) +
                     ") must be a multiple of k/v heads (" +
                     std::to_string(kvHeads) + ")");
  }
  // Grid limits, by the tiles of the kernel that runs (the runtime passes
  // its spec; a caller's spec may leave them to the defaults).
  int64_t blockM =
      spec.needsDefaults() ? withDefaults(spec).blockM : spec.blockM;
  int64_t queryLength = spec.varlen ? a.maxSeqlenQ : q.sizes[2];
  int64_t qTiles = (queryLength + blockM - 1) / blockM;
  if (qTiles > kMaxGridX)
    return invalid("query length " + std::to_string(queryLength) +
                   " needs more than the grid's " + std::to_string(kMaxGridX) +
                   " query tiles");
  if (qHeads > kMaxGridYZ)
    return invalid("q heads " + std::to_string(qHeads) +
                   " exceed the grid limit " + std::to_string(kMaxGridYZ));
  if (batch > kMaxGridYZ)
    return invalid("batch " + std::to_string(batch) +
                   " exceeds the grid limit " + std::to_string(kMaxGridYZ));
  return {};
}

Result checkAttentionBackwardArgs(const KernelSpec &spec,
                                  const AttentionBackwardArgs &a) {
  auto invalid = [](std::string message) {
    return Result::error(Status::invalidArgument, std::move(message));
  };
  // The forward's operands obey the forward's rules.
  // (The backward's block mask is its query ranges, checked below.)
  AttentionArgs forward{a.q, a.k, a.v, a.o, a.lse, a.stream, a.sinks};
  forward.cuSeqlensQ = a.cuSeqlensQ;
  forward.cuSeqlensK = a.cuSeqlensK;
  forward.maxSeqlenQ = a.maxSeqlenQ;
  forward.maxSeqlenK = a.maxSeqlenK;
  KernelSpec forwardSpec = spec;
  forwardSpec.blockMask = false;
  if (Result r = checkAttentionArgs(forwardSpec, forward); !r)
    return r;
  size_t elementBytes = size_t(fa::elementBytes(spec.dtype));
  struct Like {
    const char *name;
    const TensorArg *tensor;
    const char *likeName;
    const TensorArg *like;
  };
  const Like shaped[] = {{"do", &a.gradOutput, "o", &a.o},
                         {"dq", &a.gradQuery, "q", &a.q},
                         {"dk", &a.gradKey, "k", &a.k},
                         {"dv", &a.gradValue, "k", &a.k}};
  for (const Like &t : shaped) {
    for (int d = 0; d < 4; ++d)
      if (t.tensor->sizes[d] != t.like->sizes[d])
        return invalid(std::string(t.name) + " shape " +
                       shapeString(*t.tensor, 4) + " does not match " +
                       t.likeName + " shape " + shapeString(*t.like, 4));
    if (std::string error = checkLayout(t.name, *t.tensor, 4, elementBytes);
        !error.empty())
      return invalid(error);
  }
  for (const Like &t : llvm::ArrayRef(shaped).drop_front())
    if (std::string error = checkNoOverlap(t.name, *t.tensor, 4);
        !error.empty())
      return invalid(error);
  // A backward that copies dO rows and stores dK, dV rows in 16-byte chunks
  // (the dkdv kernels of mma and wgmma) has the forward's rules for Q and O.
  const StrategyModel &model = strategyModel(resolveStrategy(spec));
  if (model.inputAccessElements) {
    if (std::string error = checkAccessWidth(
            "do", a.gradOutput, model.inputAccessElements, elementBytes,
            model.name, "rows are copied in 16-byte chunks");
        !error.empty())
      return invalid(error);
    // wgmma's dkdv kernel reads dO with TMA, like Q, K and V.
    if (model.tensorMapInputs)
      if (std::string error =
              checkTensorMapLimits("do", a.gradOutput, elementBytes);
          !error.empty())
        return invalid(error);
    for (auto [name, t] :
         {std::pair<const char *, const TensorArg *>{"dk", &a.gradKey},
          {"dv", &a.gradValue}})
      if (std::string error = checkAccessWidth(
              name, *t, model.outputAccessElements, elementBytes, model.name,
              "dK and dV rows are stored in 16-byte chunks");
          !error.empty())
        return invalid(error);
  }
  if (spec.sinks)
    if (std::string error = checkSinks("dsinks", a.gradSinks, a.q.sizes[1]);
        !error.empty())
      return invalid(error);
  // The deterministic mode orders its turns by the key ranges too.
  if (spec.blockMask && spec.deterministic) {
    if (std::string error =
            checkBlockMaskTables(a.keyRanges, a.queryRanges, a.q, a.k);
        !error.empty())
      return invalid(error);
  } else if (spec.blockMask) {
    if (std::string error = checkRangeTable(
            "query_ranges", "the key length", a.queryRanges, a.q.sizes[0],
            a.q.sizes[1], a.k.sizes[2]);
        !error.empty())
      return invalid(error);
  }
  // The gradients share no byte with the inputs or with each other: other
  // blocks still read every input while one writes.
  struct Span {
    const char *name;
    std::optional<std::pair<uintptr_t, uintptr_t>> bytes;
  };
  Span inputs[] = {{"q", byteSpan(a.q, 4, elementBytes)},
                   {"k", byteSpan(a.k, 4, elementBytes)},
                   {"v", byteSpan(a.v, 4, elementBytes)},
                   {"o", byteSpan(a.o, 4, elementBytes)},
                   {"do", byteSpan(a.gradOutput, 4, elementBytes)},
                   {"lse", byteSpan(a.lse, 3, 4)}};
  Span outputs[] = {{"dq", byteSpan(a.gradQuery, 4, elementBytes)},
                    {"dk", byteSpan(a.gradKey, 4, elementBytes)},
                    {"dv", byteSpan(a.gradValue, 4, elementBytes)}};
  auto overlap = [](const Span &x, const Span &y) {
    return x.bytes && y.bytes && x.bytes->first <= y.bytes->second &&
           y.bytes->first <= x.bytes->second;
  };
  for (size_t i = 0; i < std::size(outputs); ++i) {
    for (const Span &in : inputs)
      if (overlap(outputs[i], in))
        return invalid(std::string(outputs[i].name) + " overlaps " + in.name +
                       " in memory (gradients must not alias the inputs)");
    for (size_t j = 0; j < i; ++j)
      if (overlap(outputs[i], outputs[j]))
        return invalid(std::string(outputs[i].name) + " overlaps " +
                       outputs[j].name + " in memory");
  }
  // The sinks (checked with the forward's operands) and their gradient
  // (zeroed as one run of values), apart from every other tensor.
  if (spec.sinks) {
    Span sinks{"sinks", byteSpan(a.sinks, 1, 4)};
    for (const Span &out : outputs)
      if (overlap(out, sinks))
        return invalid(std::string(out.name) +
                       " overlaps sinks in memory (gradients must not alias "
                       "the inputs)");
    Span gradSinks{"dsinks", byteSpan(a.gradSinks, 1, 4)};
    for (const Span &in : inputs)
      if (overlap(gradSinks, in))
        return invalid(std::string("dsinks overlaps ") + in.name +
                       " in memory (gradients must not alias the inputs)");
    for (const Span &other : outputs)
      if (overlap(gradSinks, other))
        return invalid(std::string("dsinks overlaps ") + other.name +
                       " in memory");
    if (overlap(gradSinks, sinks))
      return invalid("dsinks overlaps sinks in memory (gradients must not "
                     "alias the inputs)");
  }
  std::vector<std::pair<const char *, ByteSpan>> written;
  for (const Span &out : outputs)
    written.push_back({out.name, out.bytes});
  if (spec.sinks)
    written.push_back({"dsinks", byteSpan(a.gradSinks, 1, 4)});
  if (spec.blockMask)
    for (auto [tableName, tableArg] :
         {std::pair<const char *, const TensorArg *>{"query_ranges",
                                                     &a.queryRanges},
          {"key_ranges", &a.keyRanges}}) {
      if (tableArg == &a.keyRanges && !spec.deterministic)
        continue;
      ByteSpan table = byteSpan(*tableArg, 4, 4);
      for (auto [name, out] : written)
        if (spansOverlap(out, table))
          return invalid(std::string(name) + " overlaps " + tableName +
                         " in memory (gradients must not alias the inputs)");
    }
  if (spec.varlen)
    for (auto [offsetsName, offsets] :
         {std::pair<const char *, const TensorArg *>{"cu_seqlens_q",
                                                     &a.cuSeqlensQ},
          {"cu_seqlens_k", &a.cuSeqlensK}}) {
      ByteSpan table = byteSpan(*offsets, 1, 4);
      for (auto [name, out] : written)
        if (spansOverlap(out, table))
          return invalid(std::string(name) + " overlaps " + offsetsName +
                         " in memory (gradients must not alias the inputs)");
    }
  if (std::string error = checkCapturesApart(a.captures, written);
      !error.empty())
    return invalid(error);
  // The main grid runs one block per K/V tile of a K/V head.
  int64_t blockN =
      spec.needsDefaults() ? withDefaults(spec).blockN : spec.blockN;
  int64_t keyLength = spec.varlen ? a.maxSeqlenK : a.k.sizes[2];
  int64_t kvTiles = (keyLength + blockN - 1) / blockN;
  if (kvTiles > kMaxGridX)
    return invalid("key length " + std::to_string(keyLength) +
                   " needs more than the grid's " + std::to_string(kMaxGridX) +
                   " key/value tiles");
  return {};
}

Result checkBlockMaskArgs(const BlockMaskArgs &a) {
  auto invalid = [](std::string message) {
    return Result::error(Status::invalidArgument, std::move(message));
  };
  const TensorArg &q = a.q, &k = a.k;
  for (auto [name, t] : {std::pair<const char *, const TensorArg *>{"q", &q},
                         {"k", &k}})
    for (int d = 0; d < 4; ++d)
      if (t->sizes[d] < 0)
        return invalid(std::string(name) + " shape " + shapeString(*t, 4) +
                       " has a negative size");
  if (k.sizes[0] != q.sizes[0])
    return invalid("k batch " + std::to_string(k.sizes[0]) +
                   " does not match q batch " + std::to_string(q.sizes[0]));
  // The tables hold row and key indices in 32 bits.
  for (auto [name, length] :
       {std::pair<const char *, int64_t>{"query", q.sizes[2]},
        {"key", k.sizes[2]}})
    if (length > kMaxMaskModKeyLength)
      return invalid(std::string(name) + " length " + std::to_string(length) +
                     " exceeds " + std::to_string(kMaxMaskModKeyLength) +
                     ", the longest a block mask takes (its ranges are "
                     "32-bit)");
  if (std::string error = checkBlockMaskTables(a.keyRanges, a.queryRanges, q, k);
      !error.empty())
    return invalid(error);
  ByteSpan keyTable = byteSpan(a.keyRanges, 4, 4);
  ByteSpan queryTable = byteSpan(a.queryRanges, 4, 4);
  if (spansOverlap(keyTable, queryTable))
    return invalid("key_ranges overlaps query_ranges in memory");
  if (std::string error = checkCapturesApart(
          a.captures, {{"key_ranges", keyTable}, {"query_ranges", queryTable}});
      !error.empty())
    return invalid(error);
  return {};
}

} // namespace fa
