//===- FAOps.cpp - Operations of the fa dialect --------------------*- C++ -*-===//
//
// Verifiers check what the IR promises: consistent shapes, element types and
// head counts, with messages that name the offending values.
//
//===----------------------------------------------------------------------===//

#include "dialect/FAOps.h"
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

/// Prints a dimension the way MLIR types spell it.
static std::string dimToString(int64_t dim) {
  return ShapedType::isDynamic(dim) ? "?" : std::to_string(dim);
}

/// Two dimensions are consistent unless both are static and differ.
static bool dimsConflict(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
}

static LogicalResult verifyScale(Operation *op, FloatAttr scale) {
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
static LogicalResult verifyVariantRegion(Operation *op, Region &region,
                                         VariantRegion kind,
                                         TypeRange captures = {}) {
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
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
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
static LogicalResult verifyAttentionOperands(Operation *op, Value query,
                                             Value key, Value value,
                                             Value output, Value lse,
                                             FloatAttr scale,
                                             bool pagedKeys = false) {
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
  for (auto [name, type] : {std::pair<StringRef, MemRefType>{"key", kType},
                            {"value", vType},
                            {"output", oType}}) {
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
                                 Value query) {
  if (!sinks)
    return success();
  int64_t heads = cast<MemRefType>(sinks.getType()).getShape()[0];
  int64_t queryHeads = cast<MemRefType>(query.getType()).getShape()[1];
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

/// A block mask's range table: [?, ?, ?, 2] i32, row-major, in global
/// memory.
static LogicalResult verifyRangeTable(Operation *op, StringRef name,
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

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getOutput(), getLse(), getScaleAttr(),
                                     /*pagedKeys=*/getBlockTable() ||
                                         getCacheBatchIdx())) ||
      failed(verifySinks(*this, "sinks", getSinks(), getQuery())) ||
      failed(verifyCaptures(*this, getCaptures())) ||
      failed(verifyBlockMask(*this, "key_ranges", getKeyRanges(),
                             getMaskMod())) ||
      failed(verifyVarlen(*this, getCuSeqlensQ(), getCuSeqlensK(),
                          {getQuery(), getKey(), getValue(), getOutput(),
                           getLse()},
                          getKeyRanges())))
    return failure();
  // One used-key count per batch entry, or per varlen sequence.
  if (Value kvLens = getKvLens()) {
    int64_t lens = cast<MemRefType>(kvLens.getType()).getShape()[0];
    int64_t batch =
        getCuSeqlensQ()
            ? cast<MemRefType>(getCuSeqlensQ().getType()).getShape()[0]
            : cast<MemRefType>(getQuery().getType()).getShape()[0];
    if (getCuSeqlensQ() && !ShapedType::isDynamic(batch))
      batch -= 1;
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
  // A page table: one row per batch entry; not with a varlen batch or a
  // block mask yet.
  if (Value table = getBlockTable()) {
    int64_t rows = cast<MemRefType>(table.getType()).getShape()[0];
    int64_t batch = cast<MemRefType>(getQuery().getType()).getShape()[0];
    if (getCuSeqlensQ())
      return emitOpError("does not take a block_table (paged KV) with "
                         "cu_seqlens yet");
    if (getKeyRanges())
      return emitOpError("does not take a block mask (key_ranges) with a "
                         "block_table (paged KV) yet");
    if (dimsConflict(rows, batch))
      return emitOpError() << "block_table holds " << dimToString(rows)
                           << " rows; it needs one per batch entry ("
                           << dimToString(batch) << ")";
  }
  // K/V entries by index: one per batch entry; not with varlen or pages.
  if (Value index = getCacheBatchIdx()) {
    int64_t entries = cast<MemRefType>(index.getType()).getShape()[0];
    int64_t batch = cast<MemRefType>(getQuery().getType()).getShape()[0];
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
                          lseType, f32)) ||
      failed(verifySameAs(*this, "dq_accum workspace", typeOf(getDqAccum()),
                          "query", qType, f32)))
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
  // The turn counters are per (batch entry, head, query tile) of the
  // tensors, not per sequence.
  if (getDqOrder() && getCuSeqlensQ())
    return emitOpError("the deterministic backward (dq_order) does not take "
                       "cu_seqlens yet");
  TypeRange captures = getCaptures().getTypes();
  if (failed(verifyVariantRegion(*this, getScoreMod(), VariantRegion::scoreMod,
                                 captures)) ||
      failed(verifyVariantRegion(*this, getMaskMod(), VariantRegion::maskMod,
                                 captures)))
    return failure();
  // The turn counters count the K/V tiles of a query tile from 0: with a
  // mask_mod the visiting tiles need not start at 0 nor be exactly those
  // of the K/V range.
  if (getDqOrder() && !getMaskMod().empty())
    return emitOpError("the deterministic backward (dq_order) does not take "
                       "a mask_mod yet");
  if (bool(getSinks()) != bool(getGradSinks()))
    return emitOpError("takes sinks and grad_sinks together (the sinks' "
                       "gradient is an output whenever sinks are an input)");
  if (failed(verifySinks(*this, "sinks", getSinks(), getQuery())) ||
      failed(verifySinks(*this, "grad_sinks", getGradSinks(), getQuery())))
    return failure();
  // The sinks' gradient is added in any order.
  if (getDqOrder() && getSinks())
    return emitOpError("the deterministic backward (dq_order) does not take "
                       "sinks yet (their gradient is added in any order)");
  if (Value order = getDqOrder()) {
    ArrayRef<int64_t> o = typeOf(order).getShape(), q = qType.getShape();
    for (int d = 0; d < 2; ++d)
      if (dimsConflict(o[d], q[d]))
        return emitOpError() << "dq_order dimension " << d << " ("
                             << dimToString(o[d]) << ") does not match query ("
                             << dimToString(q[d]) << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// GridOp
//===----------------------------------------------------------------------===//

void GridOp::build(OpBuilder &builder, OperationState &state, Value batchSize,
                   Value numHeads, Value numQTiles) {
  state.addOperands({batchSize, numHeads, numQTiles});
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (int i = 0; i < 3; ++i)
    block->addArgument(builder.getIndexType(), state.location);
}

ParseResult GridOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::Argument, 3> indices;
  SmallVector<OpAsmParser::UnresolvedOperand, 3> bounds;
  Type indexType = parser.getBuilder().getIndexType();
  if (parser.parseArgumentList(indices, OpAsmParser::Delimiter::Paren) ||
      parser.parseKeyword("in") ||
      parser.parseOperandList(bounds, OpAsmParser::Delimiter::Paren))
    return failure();
  if (indices.size() != 3 || bounds.size() != 3)
    return parser.emitError(parser.getNameLoc(),
                            "expected three grid indices and three bounds");
  if (parser.resolveOperands(bounds, indexType, result.operands))
    return failure();
  for (OpAsmParser::Argument &index : indices)
    index.type = indexType;
  Region *body = result.addRegion();
  if (parser.parseRegion(*body, indices) ||
      parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  return success();
}

void GridOp::print(OpAsmPrinter &p) {
  p << " (";
  llvm::interleaveComma(getBodyBlock().getArguments(), p,
                        [&](BlockArgument arg) { p.printOperand(arg); });
  p << ") in (" << getOperands() << ") ";
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false);
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs());
}

/// A shared tile of a placed program: at its fa.shared_offset, its ring of
/// fa.pipeline_stages slots lies inside the launch's shared_bytes; on the
/// mma strategy its padded rows are whole 16-byte chunks (cp.async and
/// ldmatrix move 16-byte rows).
/// The bytes a shared tile and its ring slots (fa.pipeline_stages) take.
/// Bounded by the encodings' and attributes' verifiers: no overflow.
static int64_t sharedFootprint(Operation *op, RankedTensorType tile,
                               TileEncodingInterface placement) {
  int64_t elementBytes = llvm::divideCeil(tile.getElementTypeBitWidth(), 8);
  int64_t slots = 1;
  if (auto stages = op->getAttrOfType<IntegerAttr>(
          FADialect::getPipelineStagesAttrName()))
    slots = stages.getInt();
  return placement.getSharedElements(tile.getShape()) * elementBytes * slots;
}

static int64_t sharedOffset(Operation *op) {
  return op->getAttrOfType<IntegerAttr>(FADialect::getSharedOffsetAttrName())
      .getInt();
}

static LogicalResult verifySharedPlacement(Operation *op,
                                           RankedTensorType tile,
                                           TileEncodingInterface placement,
                                           LaunchAttr launch) {
  auto offset =
      op->getAttrOfType<IntegerAttr>(FADialect::getSharedOffsetAttrName());
  if (!offset)
    return op->emitOpError() << "puts a tile in shared memory in a placed "
                                "program (fa.launch) without an "
                             << FADialect::getSharedOffsetAttrName();
  int64_t elementBytes = llvm::divideCeil(tile.getElementTypeBitWidth(), 8);
  int64_t bytes = sharedFootprint(op, tile, placement);
  if (offset.getInt() + bytes > launch.getSharedBytes())
    return op->emitOpError()
           << "places " << bytes << " bytes of shared memory at offset "
           << offset.getInt() << ", past the program's shared_bytes = "
           << launch.getSharedBytes();
  // wgmma descriptors and TMA address the 128-byte swizzle in 1024-byte
  // atoms.
  if (isa<SwizzledSharedEncodingAttr>(placement) && offset.getInt() % 1024)
    return op->emitOpError() << "places a swizzled tile at offset "
                             << offset.getInt()
                             << ", not a multiple of the 1024-byte swizzle "
                                "atom";
  auto shared = dyn_cast<SharedEncodingAttr>(placement);
  const ::fa::StrategyModel &model = strategyModelOf(launch.getStrategy());
  int64_t chunk = model.sharedRowChunkBytes;
  if (shared && chunk && tile.getRank() == 2 &&
      (tile.getDimSize(1) + shared.getPad()) * elementBytes % chunk != 0)
    return op->emitOpError()
           << "rows of " << tile.getDimSize(1) << " + pad " << shared.getPad()
           << " elements are not whole " << chunk << "-byte chunks, which the "
           << model.name << " strategy's copies and ldmatrix need";
  return success();
}

LogicalResult GridOp::verifyRegions() {
  Block &block = getBodyBlock();
  if (block.getNumArguments() != 3 ||
      !llvm::all_of(block.getArgumentTypes(),
                    [](Type t) { return t.isIndex(); }))
    return emitOpError("body must take three index arguments (batch, head, "
                       "tile)");
  if (std::optional<StringRef> program = getProgram();
      program && !isKernelName(*program))
    return emitOpError() << "program name '" << *program
                         << "' must be an identifier ([A-Za-z_][A-Za-z0-9_]*): "
                            "it becomes part of a kernel's name";
  // A placed program (fa.launch) has every tile placed, its register tiles
  // in the encodings of its strategy.
  auto launch = (*this)->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
  if ((*this)->hasAttr(FADialect::getTensorMapsAttrName()) &&
      (!launch || !strategyModelOf(launch.getStrategy()).tensorMapInputs))
    return emitOpError() << FADialect::getTensorMapsAttrName()
                         << " describe the TMA loads of a wgmma program; this "
                            "program is not placed for wgmma";
  if (!launch)
    return success();
  // Shared buffers [offset, end) seen so far: two tiles share bytes only as
  // the same buffer of staged tiles (fa.convert_layout into shared memory,
  // written between barriers: the mma backward stages P, then dS, in one).
  // A loaded tile shares bytes only with loads of the same operand: the
  // tiles a program loads are live together (K and V of one iteration, Q
  // across the K/V loop).
  struct Buffer {
    int64_t offset, end;
    Operation *op;
  };
  SmallVector<Buffer> buffers;
  WalkResult result = getBody().walk([&](Operation *op) {
    if (isa<LoadTileOp, ConvertLayoutOp>(op)) {
      auto tile = cast<RankedTensorType>(op->getResult(0).getType());
      auto placement =
          dyn_cast_or_null<TileEncodingInterface>(tile.getEncoding());
      if (placement && placement.isShared()) {
        if (failed(verifySharedPlacement(op, tile, placement, launch)))
          return WalkResult::interrupt();
        Buffer buffer{sharedOffset(op), 0, op};
        buffer.end = buffer.offset + sharedFootprint(op, tile, placement);
        for (const Buffer &other : buffers) {
          bool overlaps = buffer.offset < other.end && other.offset < buffer.end;
          bool sameRange =
              buffer.offset == other.offset && buffer.end == other.end;
          // The same operand loaded in another place (a peeled or
          // pipelined iteration, the other branch of a visit) is the same
          // buffer.
          auto load = dyn_cast<LoadTileOp>(op);
          auto otherLoad = dyn_cast<LoadTileOp>(other.op);
          bool sameOperand =
              load && otherLoad && load.getSource() == otherLoad.getSource();
          if (overlaps && sameRange && (load || otherLoad) && !sameOperand) {
            InFlightDiagnostic diag =
                op->emitOpError()
                << "places shared bytes [" << buffer.offset << ", "
                << buffer.end
                << ") on a loaded tile's: loaded tiles are live together "
                   "and share bytes with no other tile";
            diag.attachNote(other.op->getLoc()) << "that tile";
            return WalkResult::interrupt();
          }
          if (overlaps && !sameRange) {
            InFlightDiagnostic diag = op->emitOpError()
                                      << "places shared bytes ["
                                      << buffer.offset << ", " << buffer.end
                                      << ") over another tile's ["
                                      << other.offset << ", " << other.end
                                      << ")";
            diag.attachNote(other.op->getLoc()) << "that tile";
            return WalkResult::interrupt();
          }
        }
        buffers.push_back(buffer);
      }
    }
    for (Type type : op->getResultTypes()) {
      auto tile = dyn_cast<RankedTensorType>(type);
      if (!tile)
        continue;
      Attribute encoding = tile.getEncoding();
      if (!encoding) {
        op->emitOpError() << "is in a placed program (fa.launch) but its "
                             "result is not placed: "
                          << type;
        return WalkResult::interrupt();
      }
      auto placement = dyn_cast<TileEncodingInterface>(encoding);
      if (!placement || placement.isShared())
        continue;
      bool blocked = isa<BlockedEncodingAttr>(encoding);
      bool ofStrategy =
          blocked == strategyModelOf(launch.getStrategy()).blockedRegisterTiles;
      if (!ofStrategy) {
        op->emitOpError() << "register tile " << type << " is not placed for "
                          << "the program's " << stringifyEnum(launch.getStrategy())
                          << " strategy ("
                          << (blocked ? "#fa.blocked belongs to simt"
                                      : "fragments belong to mma and wgmma")
                          << ")";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

//===----------------------------------------------------------------------===//
// LoadTileOp / StoreTileOp
//===----------------------------------------------------------------------===//

/// A tile of rank R covers dims [2, R+2) of a memref of rank R+2: the first
/// tile dim runs along the sequence, the others cover trailing dims whole.
static LogicalResult verifyTileOfMemRef(Operation *op, RankedTensorType tile,
                                        MemRefType memref) {
  if (memref.getRank() != tile.getRank() + 2)
    return op->emitOpError() << "tile of rank " << tile.getRank()
                             << " needs a memref of rank "
                             << tile.getRank() + 2 << ", got rank "
                             << memref.getRank();
  if (tile.getElementType() != memref.getElementType())
    return op->emitOpError()
           << "tile element type " << tile.getElementType()
           << " does not match memref element type "
           << memref.getElementType();
  if (!tile.hasStaticShape())
    return op->emitOpError("tile shape must be static");
  for (int64_t d = 1; d < tile.getRank(); ++d)
    if (tile.getDimSize(d) != memref.getDimSize(d + 2))
      return op->emitOpError()
             << "tile dimension " << d << " (" << tile.getDimSize(d)
             << ") must cover memref dimension " << d + 2 << " ("
             << dimToString(memref.getDimSize(d + 2)) << ") whole";
  return success();
}

Value mlir::fa::buildRowLimit(OpBuilder &b, Location loc, Value memref,
                              Value end) {
  return end ? end : memref::DimOp::create(b, loc, memref, 2);
}

Value mlir::fa::buildSourceRow(OpBuilder &b, Location loc, Value first,
                               Value row) {
  return first ? arith::AddIOp::create(b, loc, first, row).getResult() : row;
}

std::pair<Value, Value>
mlir::fa::buildSourceRowAddress(OpBuilder &b, Location loc, Value source,
                                Value pages, Value batch, Value index) {
  if (!pages)
    return {batch, index};
  Value pageRows = memref::DimOp::create(b, loc, source, 2);
  Value entry = buildPageEntry(b, loc, source, pages, batch,
                               arith::DivUIOp::create(b, loc, index, pageRows));
  return {entry, arith::RemUIOp::create(b, loc, index, pageRows)};
}

Value mlir::fa::buildPageEntry(OpBuilder &b, Location loc, Value source,
                               Value pages, Value batch, Value page) {
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value lastPage = arith::SubIOp::create(
      b, loc, memref::DimOp::create(b, loc, pages, 1), one);
  Value lastEntry = arith::SubIOp::create(
      b, loc, memref::DimOp::create(b, loc, source, 0), one);
  Value number = arith::IndexCastUIOp::create(
      b, loc, b.getIndexType(),
      memref::LoadOp::create(
          b, loc, pages,
          ValueRange{batch, arith::MinUIOp::create(b, loc, page, lastPage)}));
  return arith::MinUIOp::create(b, loc, number, lastEntry);
}

/// A sequence is its first row and its end: two values or none.
static LogicalResult verifySequence(Operation *op, ValueRange sequence) {
  if (!sequence.empty() && sequence.size() != 2)
    return op->emitOpError() << "takes a sequence as (first, end), got "
                             << sequence.size() << " values";
  return success();
}

LogicalResult LoadTileOp::verify() {
  if (failed(verifySequence(*this, getSequence())))
    return failure();
  if (getPages() && getSequence().empty())
    return emitOpError("a paged load (pages) needs its sequence(first, end): "
                       "the end is the number of rows its pages hold");
  return verifyTileOfMemRef(*this, cast<RankedTensorType>(getTile().getType()),
                            cast<MemRefType>(getSource().getType()));
}

LogicalResult StoreTileOp::verify() {
  if (failed(verifySequence(*this, getSequence())))
    return failure();
  return verifyTileOfMemRef(*this, cast<RankedTensorType>(getTile().getType()),
                            cast<MemRefType>(getDest().getType()));
}

/// Tiles that ops compute on live in registers: unplaced, or with a
/// register encoding (#fa.blocked, #fa.mma, #fa.mma_operand).
static LogicalResult verifyRegisterTile(Operation *op, Type type,
                                        StringRef name) {
  auto encoding = dyn_cast_or_null<TileEncodingInterface>(
      cast<RankedTensorType>(type).getEncoding());
  if (encoding && encoding.isShared())
    return op->emitOpError() << name << " must be a register tile, got "
                             << type;
  return success();
}

//===----------------------------------------------------------------------===//
// TileMatmulOp
//===----------------------------------------------------------------------===//

LogicalResult TileMatmulOp::verify() {
  if (getAsync())
    for (Operation *user : getResult().getUsers())
      if (!isa<AsyncWaitOp>(user))
        return emitOpError("the result of an async matmul is read only "
                           "through fa.async_wait");
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  auto rhs = cast<RankedTensorType>(getRhs().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (lhs.getRank() != 2 || rhs.getRank() != 2 || result.getRank() != 2)
    return emitOpError("operands and result must be 2-d tiles");
  if (lhs.getElementType() != rhs.getElementType())
    return emitOpError() << "lhs element type " << lhs.getElementType()
                         << " does not match rhs element type "
                         << rhs.getElementType();
  int64_t m = getTransposeLhs() ? lhs.getDimSize(1) : lhs.getDimSize(0);
  int64_t k = getTransposeLhs() ? lhs.getDimSize(0) : lhs.getDimSize(1);
  int64_t rhsK = getTransposeRhs() ? rhs.getDimSize(1) : rhs.getDimSize(0);
  int64_t n = getTransposeRhs() ? rhs.getDimSize(0) : rhs.getDimSize(1);
  if (k != rhsK)
    return emitOpError() << "contraction sizes differ: lhs has " << k
                         << ", rhs has " << rhsK;
  if (result.getDimSize(0) != m || result.getDimSize(1) != n)
    return emitOpError() << "result must be " << m << "x" << n << ", got "
                         << result.getDimSize(0) << "x"
                         << result.getDimSize(1);
  return verifyRegisterTile(*this, result, "result");
}

LogicalResult AsyncWaitOp::verify() {
  // wgmma.wait_group takes 0..7 groups in flight.
  if (int64_t pending = getPendingAttr().getInt(); pending < 0 || pending > 7)
    return emitOpError() << "pending must be in [0, 7], got " << pending;
  auto matmul = getTile().getDefiningOp<TileMatmulOp>();
  if (!matmul || !matmul.getAsync())
    return emitOpError("waits for a tile produced by an async "
                       "fa.tile_matmul");
  return success();
}

//===----------------------------------------------------------------------===//
// Row-wise ops: MaskOp, OnlineSoftmaxOp, RescaleOp, FinalizeOp
//===----------------------------------------------------------------------===//

/// Checks a [R, C] tile against a per-row [R] vector: both in registers,
/// placed alike (a thread holds the values of the rows it holds).
static LogicalResult verifyRowVector(Operation *op, Type tileType,
                                     Type rowType, StringRef tileName,
                                     StringRef rowName,
                                     bool placedAlike = true) {
  auto tile = cast<RankedTensorType>(tileType);
  auto row = cast<RankedTensorType>(rowType);
  if (tile.getRank() != 2)
    return op->emitOpError() << tileName << " must be a 2-d tile";
  if (row.getRank() != 1 || row.getDimSize(0) != tile.getDimSize(0))
    return op->emitOpError() << rowName << " must hold one value per row of "
                             << tileName << " (" << tile.getDimSize(0)
                             << "), got " << row;
  if (!placedAlike)
    return success();
  if (failed(verifyRegisterTile(op, tile, tileName)) ||
      failed(verifyRegisterTile(op, row, rowName)))
    return failure();
  if (tile.getEncoding() != row.getEncoding())
    return op->emitOpError() << rowName << " must be placed like " << tileName
                             << " (" << tile << "), got " << row;
  return success();
}

/// The tile ops that carry a mask_mod take the program's batch and head
/// with it (the region's b and h), and only then.
static LogicalResult verifyMaskModOperands(Operation *op, Region &maskMod,
                                           Value batch, Value head,
                                           TypeRange captures = {},
                                           Value ranges = {}) {
  if (ranges) {
    if (!batch || !head)
      return op->emitOpError("indexes its range table by the batch and head "
                             "(at(%b, %h)): give them");
  } else if (maskMod.empty() != !batch || !batch != !head) {
    return op->emitOpError("takes the batch and head (at(%b, %h)) exactly "
                           "when it has a mask_mod region or a range table");
  }
  if (maskMod.empty() && !captures.empty())
    return op->emitOpError("takes captured tensors only with a mask_mod "
                           "region");
  return verifyVariantRegion(op, maskMod, VariantRegion::maskMod, captures);
}

void MaskOp::build(OpBuilder &builder, OperationState &state, Value scores,
                   Value qStart, Value kvStart, Value qLen, Value kvLen,
                   MaskKind mask) {
  build(builder, state, scores.getType(), scores, qStart, kvStart, qLen,
        kvLen, /*batch=*/Value(), /*head=*/Value(), /*captures=*/ValueRange(),
        /*kept_whole=*/Value(), mask);
}

LogicalResult MaskOp::verify() {
  if (cast<RankedTensorType>(getScores().getType()).getRank() != 2)
    return emitOpError("scores must be a 2-d tile");
  if (getKeptWhole() && getMaskMod().empty())
    return emitOpError("kept_whole skips a mask_mod: it needs one");
  if (failed(verifyMaskModOperands(*this, getMaskMod(), getBatch(),
                                   getHead(), getCaptures().getTypes())))
    return failure();
  return verifyRegisterTile(*this, getScores().getType(), "scores");
}

void KVTileRangeOp::build(OpBuilder &builder, OperationState &state,
                          Value qStart, Value qLen, Value kvLen, int64_t blockM,
                          int64_t blockN, MaskKind mask) {
  Type index = builder.getIndexType();
  build(builder, state, index, index, qStart, qLen, kvLen, /*batch=*/Value(),
        /*head=*/Value(), /*ranges=*/Value(), blockM, blockN, mask);
}

/// The loops a tile range bounds (its end is their upper bound) load tiles
/// of the range's block rows and mask at least as the range assumes (the
/// causal mask, a mask_mod): a range computed for other tiles or for
/// another mask skips tiles the loop needs, or visits rows past its tiles.
template <typename RangeOp>
static LogicalResult verifyRangeAgreesWithLoops(RangeOp op, Value end,
                                                int64_t blockRows,
                                                StringRef blockName) {
  for (OpOperand &use : end.getUses()) {
    auto loop = dyn_cast<LoopLikeOpInterface>(use.getOwner());
    if (!loop)
      continue;
    std::optional<SmallVector<OpFoldResult>> upper = loop.getLoopUpperBounds();
    if (!upper || upper->size() != 1 ||
        dyn_cast_if_present<Value>((*upper)[0]) != end)
      continue;
    WalkResult result = use.getOwner()->walk([&](Operation *inner) {
      if (auto load = dyn_cast<LoadTileOp>(inner)) {
        int64_t rows = cast<RankedTensorType>(load.getType()).getDimSize(0);
        if (rows != blockRows) {
          InFlightDiagnostic diag =
              op.emitOpError()
              << "bounds a loop that loads tiles of " << rows << " rows, but "
              << blockName << " is " << blockRows;
          diag.attachNote(load.getLoc()) << "that load";
          return WalkResult::interrupt();
        }
      }
      if (auto mask = dyn_cast<MaskOp>(inner)) {
        bool causal = op.getMask() == MaskKind::causal;
        // A range table bounds a mask_mod's tiles (a block mask).
        bool maskMod = !op.getMaskMod().empty() || op.getRanges();
        if ((causal && mask.getMask() != MaskKind::causal) ||
            (maskMod && mask.getMaskMod().empty())) {
          InFlightDiagnostic diag =
              op.emitOpError()
              << "skips the tiles of a "
              << (causal ? "causal mask" : "mask_mod")
              << ", but the loop it bounds masks with "
              << (mask.getMaskMod().empty()
                      ? stringifyMaskKind(mask.getMask()).str()
                      : std::string("a mask_mod"));
          diag.attachNote(mask.getLoc()) << "that mask";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return failure();
  }
  return success();
}

LogicalResult KVTileRangeOp::verify() {
  if (failed(verifyMaskModOperands(*this, getMaskMod(), getBatch(), getHead(),
                                   {}, getRanges())) ||
      failed(verifyRangeTable(*this, "ranges", getRanges())))
    return failure();
  return verifyRangeAgreesWithLoops(*this, getEnd(), getBlockN(), "block_n");
}

void QTileRangeOp::build(OpBuilder &builder, OperationState &state,
                         Value kvStart, Value qLen, Value kvLen, int64_t blockM,
                         int64_t blockN, MaskKind mask) {
  Type index = builder.getIndexType();
  build(builder, state, index, index, kvStart, qLen, kvLen, /*batch=*/Value(),
        /*head=*/Value(), /*ranges=*/Value(), blockM, blockN, mask);
}

LogicalResult QTileRangeOp::verify() {
  if (failed(verifyMaskModOperands(*this, getMaskMod(), getBatch(), getHead(),
                                   {}, getRanges())) ||
      failed(verifyRangeTable(*this, "ranges", getRanges())))
    return failure();
  return verifyRangeAgreesWithLoops(*this, getEnd(), getBlockM(), "block_m");
}

LogicalResult ScoreModGradOp::verify() {
  if (cast<RankedTensorType>(getGrad().getType()).getRank() != 2)
    return emitOpError("the gradient must be a 2-d tile");
  if (failed(verifyScale(*this, getScaleAttr())) ||
      failed(verifyVariantRegion(*this, getDerivative(),
                                 VariantRegion::scoreMod,
                                 getCaptures().getTypes())))
    return failure();
  return verifyRegisterTile(*this, getGrad().getType(), "gradient");
}

LogicalResult ScoreModOp::verify() {
  if (cast<RankedTensorType>(getScores().getType()).getRank() != 2)
    return emitOpError("scores must be a 2-d tile");
  if (failed(verifyScale(*this, getScaleAttr())) ||
      failed(verifyVariantRegion(*this, getScoreMod(),
                                 VariantRegion::scoreMod,
                                 getCaptures().getTypes())))
    return failure();
  return verifyRegisterTile(*this, getScores().getType(), "scores");
}

void OnlineSoftmaxOp::build(OpBuilder &builder, OperationState &state,
                            Value scores, Value runningMax, Value runningSum,
                            float scale) {
  Type rowType = runningMax.getType();
  build(builder, state, rowType, scores.getType(), rowType, rowType, scores,
        runningMax, runningSum, builder.getF32FloatAttr(scale));
}

LogicalResult OnlineSoftmaxOp::verify() {
  if (failed(verifyRowVector(*this, getScores().getType(),
                             getRunningMax().getType(), "scores",
                             "running max")))
    return failure();
  return verifyScale(*this, getScaleAttr());
}

LogicalResult RescaleOp::verify() {
  return verifyRowVector(*this, getAcc().getType(), getFactor().getType(),
                         "accumulator", "correction factor");
}

void FinalizeOp::build(OpBuilder &builder, OperationState &state, Value acc,
                       Value runningMax, Value runningSum) {
  build(builder, state, acc.getType(), runningMax.getType(), acc, runningMax,
        runningSum);
}

LogicalResult FinalizeOp::verify() {
  return verifyRowVector(*this, getAcc().getType(), getRunningMax().getType(),
                         "accumulator", "running max");
}

/// A per-row tile (rank 1) in registers.
static LogicalResult verifyRowTile(Operation *op, Type type, StringRef name) {
  if (cast<RankedTensorType>(type).getRank() != 1)
    return op->emitOpError() << name << " must be a 1-d tile (one value per "
                             << "row), got " << type;
  return verifyRegisterTile(op, type, name);
}

LogicalResult JoinSinkOp::verify() {
  return verifyRowTile(*this, getRunningMax().getType(), "running max");
}

LogicalResult MergePartialOp::verify() {
  return verifyRowVector(*this, getOutput().getType(), getLse().getType(),
                         "output", "lse");
}

//===----------------------------------------------------------------------===//
// The backward's tile ops
//===----------------------------------------------------------------------===//

LogicalResult RowDotOp::verify() {
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  if (lhs.getRank() != 2)
    return emitOpError("operands must be 2-d tiles");
  // The operands may be read from shared memory (the simt delta program).
  if (failed(verifyRowVector(*this, lhs, getResult().getType(), "operand",
                             "result", /*placedAlike=*/false)))
    return failure();
  return verifyRegisterTile(*this, getResult().getType(), "result");
}

LogicalResult RecomputeProbsOp::verify() {
  if (failed(verifyRowVector(*this, getScores().getType(), getLse().getType(),
                             "scores", "lse")))
    return failure();
  return verifyScale(*this, getScaleAttr());
}

LogicalResult SoftmaxGradOp::verify() {
  if (failed(verifyRowVector(*this, getProbs().getType(), getDelta().getType(),
                             "probabilities", "delta")))
    return failure();
  return verifyScale(*this, getScaleAttr());
}

LogicalResult SinkGradOp::verify() {
  return verifyRowTile(*this, getLse().getType(), "lse");
}

LogicalResult AccumulateTotalOp::verify() {
  return verifyRowTile(*this, getTile().getType(), "tile");
}

LogicalResult AccumulateTileOp::verify() {
  if (failed(verifySequence(*this, getSequence())))
    return failure();
  auto memref = cast<MemRefType>(getDest().getType());
  if (!memref.getElementType().isF32())
    return emitOpError() << "accumulates into an f32 memref, got "
                         << memref.getElementType();
  return verifyTileOfMemRef(*this, cast<RankedTensorType>(getTile().getType()),
                            memref);
}

LogicalResult WholeRangeOp::verify() {
  return verifyRangeTable(*this, "ranges", getRanges());
}

void WholeRangeOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getLo(), "whole_lo");
  setNameFn(getHi(), "whole_hi");
}

void QTileRangeOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getBegin(), "q_begin");
  setNameFn(getEnd(), "q_end");
}

//===----------------------------------------------------------------------===//
// ConvertLayoutOp
//===----------------------------------------------------------------------===//

LogicalResult ConvertLayoutOp::verify() {
  auto source = cast<RankedTensorType>(getSource().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (source.getShape() != result.getShape() ||
      source.getElementType() != result.getElementType())
    return emitOpError("must keep the shape and element type, got ")
           << source << " -> " << result;
  if (!source.getEncoding() || !result.getEncoding())
    return emitOpError("converts between placements: both types need an "
                       "encoding");
  return success();
}

//===----------------------------------------------------------------------===//
// Readable SSA names: the printed tile level reads like the algorithm.
//===----------------------------------------------------------------------===//

void GridOp::getAsmBlockArgumentNames(Region &region,
                                      OpAsmSetValueNameFn setNameFn) {
  if (region.empty())
    return;
  const char *names[] = {"b", "h", "tile"};
  for (auto [arg, name] : llvm::zip(region.front().getArguments(), names))
    setNameFn(arg, name);
}

void KVTileRangeOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getBegin(), "kv_begin");
  setNameFn(getEnd(), "kv_end");
}

void OnlineSoftmaxOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getNewMax(), "m_new");
  setNameFn(getProbs(), "p");
  setNameFn(getNewSum(), "l_new");
  setNameFn(getCorrection(), "alpha");
}

void FinalizeOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getOutput(), "o");
  setNameFn(getLse(), "lse");
}

#define GET_OP_CLASSES
#include "dialect/FAOps.cpp.inc"
