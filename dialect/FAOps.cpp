//===- FAOps.cpp - Problem-level operations of the fa dialect ------*- C++
//-*-===//
//
// Verifiers check what the IR promises: consistent shapes, element types and
// head counts, with messages that name the offending values. The problem
// ops (fa.attention, fa.attention_backward, fa.block_mask) and their
// variant regions are here; the tiled program's ops in FATileOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialect/FAOps.h"
#include "dialect/VerifierUtils.h"
#include "lib/KernelSpec.h"
#include "lib/LaunchPlan.h"
#include "lib/Strategy/Registry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::detail;

/// Prints a dimension the way MLIR types spell it.
std::string mlir::fa::detail::dimToString(int64_t dim) {
  return ShapedType::isDynamic(dim) ? "?" : std::to_string(dim);
}

/// Two dimensions are consistent unless both are static and differ.
static bool dimsConflict(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
}

LogicalResult mlir::fa::detail::verifyScale(Operation *op, FloatAttr scale) {
  double value = scale.getValueAsDouble();
  if (!(value > 0.0) || !std::isfinite(value))
    return op->emitOpError("softmax scale must be positive and finite, got ")
           << value;
  return success();
}

//===----------------------------------------------------------------------===//
// score_mod and mask_mod regions
//===----------------------------------------------------------------------===//

/// Checks a variant region: one block whose arguments are (score: f32,)
/// b, h, q_idx, kv_idx, q_len, kv_len: index, then one memref per captured
/// tensor (`captures`, the op's), holding arith and math ops and loads of
/// the captures only, ending in fa.yield of one f32 (score_mod) or one i1
/// (mask_mod).
LogicalResult mlir::fa::detail::verifyVariantRegion(Operation *op,
                                                    Region &region,
                                                    VariantRegion kind,
                                                    TypeRange captures) {
  if (region.empty())
    return success();
  bool scoreMod = kind == VariantRegion::scoreMod;
  StringRef name = scoreMod ? "score_mod" : "mask_mod";
  Builder b(op->getContext());
  SmallVector<Type> expected;
  if (scoreMod)
    expected.push_back(b.getF32Type());
  expected.append(kNumVariantIndexArgs, b.getIndexType());
  unsigned firstCapture = expected.size();
  llvm::append_range(expected, captures);
  Block &block = region.front();
  if (block.getArgumentTypes() != TypeRange(expected)) {
    std::string types;
    llvm::raw_string_ostream os(types);
    llvm::interleaveComma(expected, os);
    return op->emitOpError() << name << " region must take (" << types
                             << ") (" << (scoreMod ? "score, " : "")
                             << "b, h, q_idx, kv_idx, q_len, kv_len"
                             << (captures.empty() ? "" : ", the captures")
                             << "), got " << block.getNumArguments()
                             << " arguments";
  }
  auto isCapture = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &block &&
           arg.getArgNumber() >= firstCapture;
  };
  for (Operation &inner : block) {
    StringRef dialect = inner.getDialect()
                            ? inner.getDialect()->getNamespace()
                            : StringRef();
    if (isa<YieldOp>(inner))
      continue;
    // A captured tensor is read where it is: loads and sizes of the
    // region's capture arguments.
    if (auto load = dyn_cast<memref::LoadOp>(inner)) {
      if (!isCapture(load.getMemRef()))
        return op->emitOpError()
               << name << " region may load from its captured tensors only";
      continue;
    }
    if (auto dim = dyn_cast<memref::DimOp>(inner)) {
      if (!isCapture(dim.getSource()))
        return op->emitOpError()
               << name << " region may take sizes of its captured tensors only";
      // (memref.dim of a dimension past the rank is undefined.)
      std::optional<int64_t> index = getConstantIntValue(dim.getIndex());
      int64_t rank = cast<MemRefType>(dim.getSource().getType()).getRank();
      if (!index || *index < 0 || *index >= rank)
        return op->emitOpError()
               << name << " region takes a captured tensor's size with a "
                          "constant dimension below its rank ("
               << rank << ")";
      continue;
    }
    if ((dialect != "arith" && dialect != "math") ||
        inner.getNumRegions() != 0)
      return op->emitOpError()
             << name << " region may hold arith and math ops and loads of "
                        "its captured tensors only, got '"
             << inner.getName() << "'";
  }
  // (A block without ops has no terminator to ask for.)
  auto yield = block.empty() ? YieldOp() : dyn_cast<YieldOp>(block.back());
  Type result = scoreMod ? b.getF32Type() : Type(b.getI1Type());
  if (!yield || yield.getValues().size() != 1 ||
      yield.getValues()[0].getType() != result)
    return op->emitOpError()
           << name << " region must end in fa.yield of one " << result;
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// The shape rules fa.attention and fa.attention_backward share: Q and O
/// [B, Hq, Sq, D], K and V [B, Hkv, Sk, D], LSE [B, Hq, Sq], one element type,
/// a static positive head dim, query heads grouped over K/V heads.
/// `pagedKeys`: K and V are a paged cache's pool of pages, or caches read
/// through cache_batch_idx, whose batch dimension is not the queries'.
static LogicalResult
verifyAttentionOperands(Operation *op, Value query, Value key, Value value,
                        Value output, Value lse, FloatAttr scale,
                        bool pagedKeys = false, bool allowFloat8 = false) {
  auto qType = cast<MemRefType>(query.getType());
  auto kType = cast<MemRefType>(key.getType());
  auto vType = cast<MemRefType>(value.getType());
  auto oType = cast<MemRefType>(output.getType());
  auto lseType = cast<MemRefType>(lse.getType());
  ArrayRef<int64_t> q = qType.getShape(), k = kType.getShape(),
                    v = vType.getShape(), o = oType.getShape(),
                    l = lseType.getShape();

  if (ShapedType::isDynamic(q[3]))
    return op->emitOpError("head dimension of the query must be static");
  if (q[3] < 1 || q[3] > ::fa::kMaxHeadDim)
    return op->emitOpError() << "head dimension must be in [1, "
                             << ::fa::kMaxHeadDim << "], got " << q[3];
  // Device tensors in global memory with contiguous rows: the kernels index
  // the head dim with unit stride.
  for (auto [name, type] : {std::pair<StringRef, MemRefType>{"query", qType},
                            {"key", kType},
                            {"value", vType},
                            {"output", oType},
                            {"lse", lseType}}) {
    if (type.getMemorySpace())
      return op->emitOpError() << name << " must be in the default (global) "
                                          "memory space, got "
                               << type.getMemorySpace();
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        strides.back() != 1)
      return op->emitOpError()
             << name << " must be contiguous in its last dimension (stride 1), "
                        "got "
             << type;
  }
  // FP8 inputs (the forward only) write a 16-bit output.
  bool float8 = isa<Float8E4M3FNType>(qType.getElementType());
  if (float8 && !allowFloat8)
    return op->emitOpError("takes f16, bf16 or f32 tensors: f8E4M3FN is a "
                           "forward input type");
  if (float8 && !oType.getElementType().isF16() &&
      !oType.getElementType().isBF16())
    return op->emitOpError()
           << "with f8E4M3FN inputs writes an f16 or bf16 output, got "
           << oType.getElementType();
  for (auto [name, type] : {std::pair<StringRef, MemRefType>{"key", kType},
                            {"value", vType},
                            {"output", oType}}) {
    if (float8 && name == "output") {
      if (type.getShape()[3] != q[3])
        return op->emitOpError()
               << name << " head dimension " << dimToString(type.getShape()[3])
               << " does not match query head dimension " << q[3];
      continue;
    }
    if (type.getElementType() != qType.getElementType())
      return op->emitOpError()
             << name << " element type " << type.getElementType()
             << " does not match query element type "
             << qType.getElementType();
    if (type.getShape()[3] != q[3])
      return op->emitOpError()
             << name << " head dimension " << dimToString(type.getShape()[3])
             << " does not match query head dimension " << q[3];
  }

  // (name of the checked dim, its size, name of the reference, its size)
  struct DimCheck {
    const char *what;
    int64_t size;
    const char *reference;
    int64_t referenceSize;
  };
  DimCheck checks[] = {
      {"key batch size", k[0], "query batch size", q[0]},
      {"value batch size", v[0], "key batch size", k[0]},
      {"value head count", v[1], "key head count", k[1]},
      {"value sequence length", v[2], "key sequence length", k[2]},
      {"output batch size", o[0], "query batch size", q[0]},
      {"output head count", o[1], "query head count", q[1]},
      {"output sequence length", o[2], "query sequence length", q[2]},
      {"lse batch size", l[0], "query batch size", q[0]},
      {"lse head count", l[1], "query head count", q[1]},
      {"lse sequence length", l[2], "query sequence length", q[2]},
  };
  for (const DimCheck &check : checks)
    if (dimsConflict(check.size, check.referenceSize) &&
        !(pagedKeys && &check == &checks[0]))
      return op->emitOpError() << check.what << " " << check.size
                               << " does not match " << check.reference << " "
                               << check.referenceSize;

  // Static head counts: K/V heads positive (Q heads are grouped over them).
  if (!ShapedType::isDynamic(k[1]) && k[1] < 1)
    return op->emitOpError() << "key/value head count must be positive, got "
                             << k[1];
  if (!ShapedType::isDynamic(q[1]) && !ShapedType::isDynamic(k[1]) &&
      q[1] % k[1] != 0)
    return op->emitOpError() << "query head count " << q[1]
                             << " must be a multiple of key/value head count "
                             << k[1];
  return verifyScale(op, scale);
}

/// `type` has the element type and shape of `like` (a gradient and its
/// tensor, or a workspace and the tensor whose rows it holds).
static LogicalResult verifySameAs(Operation *op, StringRef name,
                                  MemRefType type, StringRef likeName,
                                  MemRefType like, Type elementType) {
  if (type.getElementType() != elementType)
    return op->emitOpError() << name << " element type "
                             << type.getElementType() << " must be "
                             << elementType;
  if (type.getRank() != like.getRank())
    return op->emitOpError() << name << " must have the rank of " << likeName
                             << " (" << like.getRank() << "), got "
                             << type.getRank();
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (dimsConflict(type.getDimSize(d), like.getDimSize(d)) ||
        (d == 3 && type.getDimSize(d) != like.getDimSize(d)))
      return op->emitOpError()
             << name << " dimension " << d << " ("
             << dimToString(type.getDimSize(d)) << ") does not match "
             << likeName << " (" << dimToString(like.getDimSize(d)) << ")";
  return success();
}

/// A sinks memref (f32 [Hq]) against the queries' heads.
static LogicalResult verifySinks(Operation *op, StringRef name, Value sinks,
                                 Value query, bool perRow = false) {
  if (!sinks) {
    if (perRow)
      return op->emitOpError("sinks_per_row without sinks");
    return success();
  }
  int64_t heads = cast<MemRefType>(sinks.getType()).getShape()[0];
  ArrayRef<int64_t> queryShape = cast<MemRefType>(query.getType()).getShape();
  int64_t queryHeads = queryShape[1];
  if (perRow) {
    // Hq x Sq logits, head-major.
    int64_t logits = ShapedType::isDynamic(queryHeads) ||
                             ShapedType::isDynamic(queryShape[2])
                         ? ShapedType::kDynamic
                         : queryHeads * queryShape[2];
    if (dimsConflict(heads, logits))
      return op->emitOpError()
             << name << " with sinks_per_row holds one logit per query head "
             << "and row: " << dimToString(heads) << " does not match the "
             << dimToString(logits) << " of the query";
    return success();
  }
  if (dimsConflict(heads, queryHeads))
    return op->emitOpError() << name << " holds one logit per query head: "
                             << dimToString(heads) << " does not match the "
                             << dimToString(queryHeads) << " query heads";
  return success();
}

/// The captured tensors: in global memory, row-major (the runtime passes
/// them so, and the kernels index them by their sizes).
static LogicalResult verifyCaptures(Operation *op, ValueRange captures) {
  for (auto [i, capture] : llvm::enumerate(captures)) {
    auto type = cast<MemRefType>(capture.getType());
    if (type.getMemorySpace() || !type.getLayout().isIdentity())
      return op->emitOpError()
             << "captured tensor " << i
             << " must be a row-major memref in global memory, got " << type;
  }
  return success();
}

/// A block mask's range table: [?, ?, ?, 4] i32, row-major, in global
/// memory.
LogicalResult mlir::fa::detail::verifyRangeTable(Operation *op, StringRef name,
                                                 Value table) {
  if (!table)
    return success();
  auto type = cast<MemRefType>(table.getType());
  if (type.getMemorySpace() || !type.getLayout().isIdentity() ||
      type.getDimSize(3) != ::fa::kRangeTableColumns)
    return op->emitOpError()
           << name
           << " must be a row-major memref<?x?x?x4xi32> in global memory "
              "([first, end, whole_first, whole_end) per group), got "
           << type;
  return success();
}

/// A problem's block mask bounds the tiles of its mask_mod.
static LogicalResult verifyBlockMask(Operation *op, StringRef name,
                                     Value table, Region &maskMod) {
  if (failed(verifyRangeTable(op, name, table)))
    return failure();
  if (table && maskMod.empty())
    return op->emitOpError()
           << "takes " << name
           << " (a block mask) only with a mask_mod region: the table "
              "bounds the tiles of the mask_mod's kept scores";
  return success();
}

LogicalResult BlockMaskOp::verify() {
  if (failed(verifyRangeTable(*this, "key_ranges", getKeyRanges())) ||
      failed(verifyRangeTable(*this, "query_ranges", getQueryRanges())) ||
      failed(verifyCaptures(*this, getCaptures())))
    return failure();
  return verifyVariantRegion(*this, getMaskMod(), VariantRegion::maskMod,
                             getCaptures().getTypes());
}

/// A packed varlen batch: both offset tables, one entry per sequence and
/// one more each, and the tensors' batch dimension holding the one packed
/// batch.
static LogicalResult verifyVarlen(Operation *op, Value cuSeqlensQ,
                                  Value cuSeqlensK, ValueRange packed,
                                  Value blockMask) {
  if (!cuSeqlensQ && !cuSeqlensK)
    return success();
  if (!cuSeqlensQ || !cuSeqlensK)
    return op->emitOpError("takes cu_seqlens_q and cu_seqlens_k together "
                           "(a varlen batch packs both queries and keys)");
  int64_t q = cast<MemRefType>(cuSeqlensQ.getType()).getShape()[0];
  int64_t k = cast<MemRefType>(cuSeqlensK.getType()).getShape()[0];
  if (dimsConflict(q, k))
    return op->emitOpError()
           << "cu_seqlens_q (" << dimToString(q) << " entries) and "
           << "cu_seqlens_k (" << dimToString(k)
           << ") must have one entry per sequence and one more each";
  if (q == 0)
    return op->emitOpError("cu_seqlens_q must hold at least one entry "
                           "(the first sequence's start)");
  for (Value tensor : packed) {
    int64_t batch = cast<MemRefType>(tensor.getType()).getShape()[0];
    if (!ShapedType::isDynamic(batch) && batch != 1)
      return op->emitOpError()
             << "with cu_seqlens the tensors hold one packed batch: batch "
                "dimension "
             << batch << " of " << tensor.getType() << " must be 1";
  }
  if (blockMask)
    return op->emitOpError("does not take a block mask (key_ranges) with "
                           "cu_seqlens yet");
  return success();
}

/// Split-KV partials: f32 [N * B, Hq, Sq, D] and [N * B, Hq, Sq] against
/// the output and LSE, both or neither, not with a block mask yet.
static LogicalResult verifyPartials(Operation *op, Value partialOutput,
                                    Value partialLse, Value output, Value lse,
                                    Value keyRanges) {
  if (bool(partialOutput) != bool(partialLse))
    return op->emitOpError("takes partial_output and partial_lse together");
  if (!partialOutput)
    return success();
  auto check = [&](StringRef name, Value partial, StringRef likeName,
                   Value like) -> LogicalResult {
    auto type = cast<MemRefType>(partial.getType());
    auto likeType = cast<MemRefType>(like.getType());
    if (!type.getElementType().isF32())
      return op->emitOpError() << name << " element type "
                               << type.getElementType() << " must be f32";
    for (int64_t d = 1; d < type.getRank(); ++d)
      if (dimsConflict(type.getDimSize(d), likeType.getDimSize(d)) ||
          (d == 3 && type.getDimSize(d) != likeType.getDimSize(d)))
        return op->emitOpError()
               << name << " dimension " << d << " ("
               << dimToString(type.getDimSize(d)) << ") does not match "
               << likeName << " (" << dimToString(likeType.getDimSize(d))
               << ")";
    int64_t parts = type.getDimSize(0), batch = likeType.getDimSize(0);
    if (!ShapedType::isDynamic(parts) && !ShapedType::isDynamic(batch) &&
        (batch == 0 ? parts != 0 : parts % batch != 0))
      return op->emitOpError()
             << name << " holds " << parts << " batch entries: it needs "
             << "one per part and batch entry, a multiple of " << likeName
             << "'s " << batch;
    return success();
  };
  if (failed(check("partial output", partialOutput, "output", output)) ||
      failed(check("partial lse", partialLse, "lse", lse)))
    return failure();
  int64_t outputParts =
      cast<MemRefType>(partialOutput.getType()).getDimSize(0);
  int64_t lseParts = cast<MemRefType>(partialLse.getType()).getDimSize(0);
  if (dimsConflict(outputParts, lseParts))
    return op->emitOpError() << "partial output holds " << outputParts
                             << " batch entries, partial lse " << lseParts
                             << ": they must match";
  if (keyRanges)
    return op->emitOpError("does not take a block mask (key_ranges) with "
                           "partials (split-KV) yet");
  return success();
}

/// FP8's descale factors: all three or none, only with f8E4M3FN inputs,
/// each [B, Hkv] like K's batch and heads.
static LogicalResult verifyDescales(AttentionOp op) {
  Value descales[] = {op.getQDescale(), op.getKDescale(), op.getVDescale()};
  int given = llvm::count_if(descales, [](Value v) { return bool(v); });
  if (given == 0)
    return success();
  if (given != 3)
    return op.emitOpError("takes the three descales (q, k, v) or none");
  auto kType = cast<MemRefType>(op.getKey().getType());
  if (!isa<Float8E4M3FNType>(kType.getElementType()))
    return op.emitOpError() << "takes descales with f8E4M3FN inputs only, got "
                            << kType.getElementType();
  for (auto [name, value] :
       {std::pair<StringRef, Value>{"q_descale", descales[0]},
        {"k_descale", descales[1]},
        {"v_descale", descales[2]}}) {
    ArrayRef<int64_t> shape = cast<MemRefType>(value.getType()).getShape();
    if (dimsConflict(shape[0], kType.getShape()[0]) ||
        dimsConflict(shape[1], kType.getShape()[1]))
      return op.emitOpError()
             << name << " is [" << dimToString(shape[0]) << ", "
             << dimToString(shape[1])
             << "]; it needs one factor per batch entry and K/V head ["
             << dimToString(kType.getShape()[0]) << ", "
             << dimToString(kType.getShape()[1]) << "]";
  }
  return success();
}

/// The problem's batch entries: the query's batch, or with cu_seqlens
/// (i32 [B + 1]) its sequences; dynamic where the size is.
static int64_t problemEntries(Value query, Value cuSeqlensQ) {
  if (!cuSeqlensQ)
    return cast<MemRefType>(query.getType()).getShape()[0];
  int64_t offsets = cast<MemRefType>(cuSeqlensQ.getType()).getShape()[0];
  return ShapedType::isDynamic(offsets) ? offsets : offsets - 1;
}

LogicalResult AttentionOp::verify() {
  // A varlen batch packs its rows into one batch entry; with a block_table
  // K and V are the pool of pages instead.
  SmallVector<Value, 5> packed = {getQuery(), getOutput(), getLse()};
  if (!getBlockTable())
    packed.append({getKey(), getValue()});
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getOutput(), getLse(), getScaleAttr(),
                                     /*pagedKeys=*/getBlockTable() ||
                                         getCacheBatchIdx(),
                                     /*allowFloat8=*/true)) ||
      failed(verifyDescales(*this)) ||
      failed(verifySinks(*this, "sinks", getSinks(), getQuery(),
                         getSinksPerRow())) ||
      failed(verifyCaptures(*this, getCaptures())) ||
      failed(
          verifyBlockMask(*this, "key_ranges", getKeyRanges(), getMaskMod())) ||
      failed(verifyVarlen(*this, getCuSeqlensQ(), getCuSeqlensK(), packed,
                          getKeyRanges())))
    return failure();
  // One used-key count per batch entry, or per varlen sequence.
  int64_t batch = problemEntries(getQuery(), getCuSeqlensQ());
  if (Value kvLens = getKvLens()) {
    int64_t lens = cast<MemRefType>(kvLens.getType()).getShape()[0];
    if (dimsConflict(lens, batch))
      return emitOpError()
             << "kv_lens holds " << dimToString(lens)
             << " entries; it needs one per "
             << (getCuSeqlensQ() ? "sequence (" : "batch entry (")
             << dimToString(batch) << ")";
    if (getKeyRanges())
      return emitOpError("does not take a block mask (key_ranges) with "
                         "kv_lens yet");
  }
  // A page table: one row per batch entry (varlen: per sequence); not
  // with a block mask yet.
  if (Value table = getBlockTable()) {
    int64_t rows = cast<MemRefType>(table.getType()).getShape()[0];
    if (getKeyRanges())
      return emitOpError("does not take a block mask (key_ranges) with a "
                         "block_table (paged KV) yet");
    if (dimsConflict(rows, batch))
      return emitOpError() << "block_table holds " << dimToString(rows)
                           << " rows; it needs one per "
                           << (getCuSeqlensQ() ? "sequence (" : "batch entry (")
                           << dimToString(batch) << ")";
  }
  // K/V entries by index: one per batch entry; not with varlen or pages.
  if (Value index = getCacheBatchIdx()) {
    int64_t entries = cast<MemRefType>(index.getType()).getShape()[0];
    if (getCuSeqlensQ() || getBlockTable())
      return emitOpError() << "does not take cache_batch_idx with "
                           << (getCuSeqlensQ() ? "cu_seqlens" : "a block_table")
                           << " yet";
    if (dimsConflict(entries, batch))
      return emitOpError() << "cache_batch_idx holds " << dimToString(entries)
                           << " entries; it needs one per batch entry ("
                           << dimToString(batch) << ")";
  }
  if (failed(verifyPartials(*this, getPartialOutput(), getPartialLse(),
                            getOutput(), getLse(), getKeyRanges())))
    return failure();
  TypeRange captures = getCaptures().getTypes();
  if (failed(verifyVariantRegion(*this, getScoreMod(), VariantRegion::scoreMod,
                                 captures)))
    return failure();
  return verifyVariantRegion(*this, getMaskMod(), VariantRegion::maskMod,
                             captures);
}

LogicalResult AttentionBackwardOp::verify() {
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getOutput(), getLse(), getScaleAttr())))
    return failure();
  auto qType = cast<MemRefType>(getQuery().getType());
  auto kType = cast<MemRefType>(getKey().getType());
  auto lseType = cast<MemRefType>(getLse().getType());
  Type element = qType.getElementType();
  Type f32 = Float32Type::get(getContext());
  auto typeOf = [](Value v) { return cast<MemRefType>(v.getType()); };
  if (failed(verifySameAs(*this, "output gradient", typeOf(getGradOutput()),
                          "query", qType, element)) ||
      failed(verifySameAs(*this, "query gradient", typeOf(getGradQuery()),
                          "query", qType, element)) ||
      failed(verifySameAs(*this, "key gradient", typeOf(getGradKey()), "key",
                          kType, element)) ||
      failed(verifySameAs(*this, "value gradient", typeOf(getGradValue()),
                          "key", kType, element)) ||
      failed(verifySameAs(*this, "delta workspace", typeOf(getDelta()), "lse",
                          lseType, f32)))
    return failure();
  // dq_chains copies of dQ's accumulator (and of the turn counters), one
  // after another along the head dimension.
  int64_t chains = getDqChains();
  if (chains < 1 || chains > ::fa::kMaxDqChains)
    return emitOpError() << "dq_chains must be in [1, " << ::fa::kMaxDqChains
                         << "], got " << chains;
  if (chains > 1 && !getDqOrder())
    return emitOpError() << "dq_chains = " << chains
                         << " splits the deterministic mode's turns: it "
                            "needs dq_order";
  auto chainCopies = [&](ArrayRef<int64_t> shape) {
    SmallVector<int64_t> copies(shape);
    if (!ShapedType::isDynamic(copies[1]))
      copies[1] *= chains;
    return copies;
  };
  if (failed(verifySameAs(
          *this, "dq_accum workspace", typeOf(getDqAccum()),
          chains > 1 ? "query (its heads times dq_chains)" : "query",
          MemRefType::get(chainCopies(qType.getShape()), f32), f32)))
    return failure();
  if (failed(verifyCaptures(*this, getCaptures())) ||
      failed(verifyBlockMask(*this, "query_ranges", getQueryRanges(),
                             getMaskMod())) ||
      failed(verifyVarlen(*this, getCuSeqlensQ(), getCuSeqlensK(),
                          {getQuery(), getKey(), getValue(), getOutput(),
                           getGradOutput(), getLse(), getGradQuery(),
                           getGradKey(), getGradValue(), getDelta(),
                           getDqAccum()},
                          getQueryRanges())))
    return failure();
  TypeRange captures = getCaptures().getTypes();
  if (failed(verifyVariantRegion(*this, getScoreMod(), VariantRegion::scoreMod,
                                 captures)) ||
      failed(verifyVariantRegion(*this, getMaskMod(), VariantRegion::maskMod,
                                 captures)))
    return failure();
  // With a block mask the turns at a query tile are taken by the K/V tiles
  // its key ranges give it (fa-tile-backward): the deterministic mode reads
  // both tables, and only it reads the key ranges.
  if (failed(verifyRangeTable(*this, "key_ranges", getKeyRanges())))
    return failure();
  if (getDqOrder() && getQueryRanges() && !getKeyRanges())
    return emitOpError("the deterministic backward (dq_order) with a block "
                       "mask (query_ranges) takes key_ranges too: its turns "
                       "at a query tile are those of the K/V tiles its key "
                       "ranges give it");
  if (getKeyRanges() && !(getDqOrder() && getQueryRanges()))
    return emitOpError("takes key_ranges only in the deterministic mode "
                       "(dq_order) with a block mask (query_ranges): they "
                       "order its turns");
  if (getKeyRanges() && chains > 1)
    return emitOpError() << "dq_chains = " << chains
                         << " counts turns one by one; a block mask's turns "
                            "skip the K/V tiles its tables leave out: "
                            "dq_chains must be 1";
  if (Value keys = getKeyRanges()) {
    int64_t keyHeads = typeOf(keys).getShape()[1],
            queryHeads = typeOf(getQueryRanges()).getShape()[1];
    if (dimsConflict(keyHeads, queryHeads))
      return emitOpError() << "key_ranges has " << dimToString(keyHeads)
                           << " heads and query_ranges "
                           << dimToString(queryHeads)
                           << ": the two tables of one block mask have the "
                              "same heads";
  }
  if (bool(getSinks()) != bool(getGradSinks()))
    return emitOpError("takes sinks and grad_sinks together (the sinks' "
                       "gradient is an output whenever sinks are an input)");
  if (failed(verifySinks(*this, "sinks", getSinks(), getQuery())) ||
      failed(verifySinks(*this, "grad_sinks", getGradSinks(), getQuery())))
    return failure();
  // The deterministic mode sums the sinks' gradient through its own
  // workspace (one share per query tile, like the turn counters).
  if (bool(getSinkShares()) != (getDqOrder() && getSinks()))
    return emitOpError("takes sink_shares exactly when it is deterministic "
                       "(dq_order) and has sinks (the shares make their "
                       "gradient's sum deterministic)");
  // The turn counters: per (batch entry, head, query tile), or with
  // cu_seqlens per (sequence, head, query tile of the sequence).
  for (auto [name, perTile] :
       {std::pair<StringRef, Value>{"dq_order", getDqOrder()},
        {"sink_shares", getSinkShares()}}) {
    if (!perTile)
      continue;
    ArrayRef<int64_t> o = typeOf(perTile).getShape(), q = qType.getShape();
    int64_t entries = problemEntries(getQuery(), getCuSeqlensQ());
    if (dimsConflict(o[0], entries))
      return emitOpError() << name << " dimension 0 (" << dimToString(o[0])
                           << ") does not match the "
                           << (getCuSeqlensQ() ? "sequences (" : "query (")
                           << dimToString(entries) << ")";
    int64_t heads = perTile == getDqOrder() ? chainCopies(q)[1] : q[1];
    if (dimsConflict(o[1], heads))
      return emitOpError() << name << " dimension 1 (" << dimToString(o[1])
                           << ") does not match query (" << dimToString(heads)
                           << (heads != q[1] ? ": its heads times dq_chains)"
                                             : ")");
  }
  // Both count the same query tiles.
  if (Value shares = getSinkShares()) {
    int64_t tiles = typeOf(getDqOrder()).getShape()[2],
            shareTiles = typeOf(shares).getShape()[2];
    if (dimsConflict(tiles, shareTiles))
      return emitOpError() << "sink_shares dimension 2 ("
                           << dimToString(shareTiles)
                           << ") does not match dq_order's ("
                           << dimToString(tiles) << ")";
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialect/FAOps.cpp.inc"
