//===- FATileOps.cpp - The tiled program's operations of the fa dialect -===//
//
// Verifiers of fa.grid and the tile ops (loads and stores, matmul, mask,
// online softmax, the backward's row ops, layouts): what the tiled and
// placed IR promises, with messages that name the offending values.
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
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::detail;

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

static LogicalResult verifySharedPlacement(Operation *op, RankedTensorType tile,
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
           << offset.getInt()
           << ", past the program's shared_bytes = " << launch.getSharedBytes();
  // wgmma descriptors and TMA address the 128-byte swizzle in 1024-byte
  // atoms.
  if (isa<SwizzledSharedEncodingAttr>(placement) && offset.getInt() % 1024)
    return op->emitOpError()
           << "places a swizzled tile at offset " << offset.getInt()
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
  auto launch =
      (*this)->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
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
          bool overlaps =
              buffer.offset < other.end && other.offset < buffer.end;
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
            InFlightDiagnostic diag =
                op->emitOpError()
                << "places shared bytes [" << buffer.offset << ", "
                << buffer.end << ") over another tile's [" << other.offset
                << ", " << other.end << ")";
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
                          << "the program's "
                          << stringifyEnum(launch.getStrategy())
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
    return op->emitOpError()
           << "tile of rank " << tile.getRank() << " needs a memref of rank "
           << tile.getRank() + 2 << ", got rank " << memref.getRank();
  if (tile.getElementType() != memref.getElementType())
    return op->emitOpError()
           << "tile element type " << tile.getElementType()
           << " does not match memref element type " << memref.getElementType();
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
    return op->emitOpError()
           << name << " must be a register tile, got " << type;
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
                         << result.getDimSize(0) << "x" << result.getDimSize(1);
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
  if (!getAfter().empty() &&
      !cast<RankedTensorType>(getAfter().front().getType())
           .getElementType()
           .isF32())
    return emitOpError("takes row sums (f32) first among its `after` tiles, "
                       "got ")
           << getAfter().front().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Row-wise ops: MaskOp, OnlineSoftmaxOp, RescaleOp, FinalizeOp
//===----------------------------------------------------------------------===//

/// Checks a [R, C] tile against a per-row [R] vector: both in registers,
/// placed alike (a thread holds the values of the rows it holds).
static LogicalResult verifyRowVector(Operation *op, Type tileType, Type rowType,
                                     StringRef tileName, StringRef rowName,
                                     bool placedAlike = true) {
  auto tile = cast<RankedTensorType>(tileType);
  auto row = cast<RankedTensorType>(rowType);
  if (tile.getRank() != 2)
    return op->emitOpError() << tileName << " must be a 2-d tile";
  if (row.getRank() != 1 || row.getDimSize(0) != tile.getDimSize(0))
    return op->emitOpError()
           << rowName << " must hold one value per row of " << tileName << " ("
           << tile.getDimSize(0) << "), got " << row;
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
  build(builder, state, scores.getType(), scores, qStart, kvStart, qLen, kvLen,
        /*batch=*/Value(), /*head=*/Value(), /*captures=*/ValueRange(),
        /*kept_whole=*/Value(), mask);
}

LogicalResult MaskOp::verify() {
  if (cast<RankedTensorType>(getScores().getType()).getRank() != 2)
    return emitOpError("scores must be a 2-d tile");
  if (getKeptWhole() && getMaskMod().empty())
    return emitOpError("kept_whole skips a mask_mod: it needs one");
  if (failed(verifyMaskModOperands(*this, getMaskMod(), getBatch(), getHead(),
                                   getCaptures().getTypes())))
    return failure();
  return verifyRegisterTile(*this, getScores().getType(), "scores");
}

void KVTileRangeOp::build(OpBuilder &builder, OperationState &state,
                          Value qStart, Value qLen, Value kvLen, int64_t blockM,
                          int64_t blockN, MaskKind mask) {
  Type index = builder.getIndexType();
  build(builder, state, index, index, qStart, qLen, kvLen, /*batch=*/Value(),
        /*head=*/Value(), /*ranges=*/Value(), /*part=*/Value(),
        /*num_parts=*/Value(), blockM, blockN, mask);
}

/// The single-bound loops whose upper bound is `end` (the loops over a
/// tile range's tiles).
static SmallVector<LoopLikeOpInterface> loopsBoundedBy(Value end) {
  SmallVector<LoopLikeOpInterface> loops;
  for (OpOperand &use : end.getUses()) {
    auto loop = dyn_cast<LoopLikeOpInterface>(use.getOwner());
    if (!loop)
      continue;
    std::optional<SmallVector<OpFoldResult>> upper = loop.getLoopUpperBounds();
    if (upper && upper->size() == 1 &&
        dyn_cast_if_present<Value>((*upper)[0]) == end)
      loops.push_back(loop);
  }
  return loops;
}

/// The loops a tile range bounds (its end is their upper bound) load tiles
/// of the range's block rows and mask at least as the range assumes (the
/// causal mask, a mask_mod): a range computed for other tiles or for
/// another mask skips tiles the loop needs, or visits rows past its tiles.
template <typename RangeOp>
static LogicalResult verifyRangeAgreesWithLoops(RangeOp op, Value end,
                                                int64_t blockRows,
                                                StringRef blockName) {
  for (LoopLikeOpInterface loop : loopsBoundedBy(end)) {
    WalkResult result = loop->walk([&](Operation *inner) {
      if (auto load = dyn_cast<LoadTileOp>(inner)) {
        int64_t rows = cast<RankedTensorType>(load.getType()).getDimSize(0);
        if (rows != blockRows) {
          InFlightDiagnostic diag = op.emitOpError()
                                    << "bounds a loop that loads tiles of "
                                    << rows << " rows, but " << blockName
                                    << " is " << blockRows;
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
              op.emitOpError() << "skips the tiles of a "
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
  if (bool(getPart()) != bool(getNumParts()))
    return emitOpError("takes a part and the number of parts together");
  return verifyRangeAgreesWithLoops(*this, getEnd(), getBlockN(), "block_n");
}

LogicalResult KVTileHoleOp::verify() {
  if (failed(verifyMaskModOperands(*this, getMaskMod(), getBatch(), getHead())))
    return failure();
  // The hole is of one range: its [begin, end), on the same tiles.
  auto range = getBegin().getDefiningOp<KVTileRangeOp>();
  if (!range || getBegin() != range.getBegin() || getEnd() != range.getEnd() ||
      range.getBlockM() != getBlockM() || range.getBlockN() != getBlockN())
    return emitOpError("takes the begin and end of one fa.kv_tile_range, "
                       "with its block_m and block_n");
  // A loop over the range's tiles skips the hole: it runs over the visits
  // (to end - (hole end - hole begin)), each mapped past the hole. One
  // bounded by the range's end would visit the hole's tiles, and on a
  // warp-specialized kernel wait for tiles its producer never copies.
  SmallVector<LoopLikeOpInterface> loops = loopsBoundedBy(getEnd());
  if (loops.empty())
    return success();
  InFlightDiagnostic diag =
      emitOpError("skips tiles of a range whose end bounds a loop: the "
                  "loop must run over the visits, to the range's end "
                  "less the hole's tiles");
  diag.attachNote(loops.front()->getLoc()) << "that loop";
  return diag;
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

LogicalResult PreviousVisitorOp::verify() {
  return failure(failed(verifyMaskModOperands(*this, getMaskMod(), getBatch(),
                                              getHead(), {}, getRanges())) ||
                 failed(verifyRangeTable(*this, "ranges", getRanges())));
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
      failed(verifyVariantRegion(*this, getScoreMod(), VariantRegion::scoreMod,
                                 getCaptures().getTypes())))
    return failure();
  return verifyRegisterTile(*this, getScores().getType(), "scores");
}

void OnlineSoftmaxOp::build(OpBuilder &builder, OperationState &state,
                            Value scores, Value runningMax, Value runningSum,
                            float scale, Value scaleFactor, float probsScale) {
  Type rowType = runningMax.getType();
  build(builder, state, rowType, scores.getType(), rowType, rowType, scores,
        runningMax, runningSum, scaleFactor, builder.getF32FloatAttr(scale),
        probsScale == 1.0f ? FloatAttr() : builder.getF32FloatAttr(probsScale));
}

LogicalResult OnlineSoftmaxOp::verify() {
  if (failed(verifyRowVector(*this, getScores().getType(),
                             getRunningMax().getType(), "scores",
                             "running max")))
    return failure();
  // A power of two: scaling p and dividing it out again is then exact.
  if (auto probsScale = getProbsScaleAttr()) {
    int exponent;
    double value = probsScale.getValueAsDouble();
    if (!(value > 0.0) || !std::isfinite(value) ||
        std::frexp(value, &exponent) != 0.5)
      return emitOpError()
             << "probs_scale must be a positive power of two, got " << value;
  }
  return verifyScale(*this, getScaleAttr());
}

LogicalResult RescaleOp::verify() {
  return verifyRowVector(*this, getAcc().getType(), getFactor().getType(),
                         "accumulator", "correction factor");
}

void FinalizeOp::build(OpBuilder &builder, OperationState &state, Value acc,
                       Value runningMax, Value runningSum, Value outputScale) {
  build(builder, state, acc.getType(), runningMax.getType(), acc, runningMax,
        runningSum, outputScale);
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

LogicalResult JoinRowSinksOp::verify() {
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

LogicalResult TileTotalOp::verify() {
  // Every thread of the program reaches it (it synchronizes them): at the
  // top level of the program (the grid, or the kernel outlined from it).
  Operation *parent = getOperation()->getParentOp();
  if (!isa<GridOp, FunctionOpInterface>(parent))
    return emitOpError("must be at the top level of a program (every thread "
                       "reaches it: it synchronizes them), not inside '")
           << parent->getName() << "'";
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
// HandOffOp
//===----------------------------------------------------------------------===//

LogicalResult HandOffOp::verify() {
  auto type = cast<RankedTensorType>(getTile().getType());
  auto encoding = dyn_cast_or_null<TileEncodingInterface>(type.getEncoding());
  if (!encoding || !encoding.isShared())
    return emitOpError("hands off a tile in shared memory, got ") << type;
  // Barrier 0 is the block's __syncthreads; a block has 16.
  if (getBarrier() < 1 || getBarrier() > 15)
    return emitOpError("named barrier must be in 1..15, got ") << getBarrier();
  if (getThreads() <= 0 || getThreads() % 32 != 0 || getThreads() > 1024)
    return emitOpError("a named barrier counts whole warps (1..1024 "
                       "threads, a multiple of 32), got ")
           << getThreads();
  return success();
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
  // A rotating staging (fa.pipeline_stages buffers, picked by `iteration`):
  // written in a loop's body and read only by that iteration's matmuls,
  // which wait for their reads there, so that a buffer's next writer (at
  // least one staging barrier later) finds its readers done.
  auto stages = (*this)->getAttrOfType<IntegerAttr>(
      FADialect::getPipelineStagesAttrName());
  bool rotates = stages && stages.getInt() > 1;
  if (getIteration() && !rotates)
    return emitOpError("has an iteration operand but no rotation to pick a "
                       "buffer of: it needs fa.pipeline_stages >= 2");
  if (!rotates)
    return success();
  if (!getIteration())
    return emitOpError() << "rotates among " << stages.getInt()
                         << " staging buffers (fa.pipeline_stages) but has "
                            "no iteration operand to pick one";
  auto shared = dyn_cast<TileEncodingInterface>(result.getEncoding());
  if (!shared || !shared.isShared())
    return emitOpError("rotates among staging buffers, so its result must "
                       "be a shared tile, got ")
           << result;
  if (!isa_and_nonnull<LoopLikeOpInterface>((*this)->getParentOp()))
    return emitOpError("rotates among staging buffers by iteration, so it "
                       "must sit directly in a loop's body");
  Block *block = (*this)->getBlock();
  for (Operation *user : getResult().getUsers()) {
    auto matmul = dyn_cast<TileMatmulOp>(user);
    if (!matmul || user->getBlock() != block)
      return emitOpError("rotates among staging buffers, so every reader "
                         "must be a matmul of the same iteration (the same "
                         "block), not ")
             << user->getName();
    if (matmul.getAsync() &&
        llvm::none_of(matmul.getResult().getUsers(), [&](Operation *wait) {
          return isa<AsyncWaitOp>(wait) && wait->getBlock() == block;
        }))
      return emitOpError("rotates among staging buffers, so its async "
                         "readers must be waited for in the same iteration "
                         "(an fa.async_wait in the same block)");
  }
  return success();
}

LogicalResult TransposeOp::verify() {
  auto source = cast<RankedTensorType>(getSource().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (source.getRank() != 2 || result.getRank() != 2 ||
      source.getDimSize(0) != result.getDimSize(1) ||
      source.getDimSize(1) != result.getDimSize(0) ||
      source.getElementType() != result.getElementType())
    return emitOpError("transposes a 2-d tile: the result's shape is the "
                       "source's swapped, of the same element type, got ")
           << source << " -> " << result;
  auto sourceEncoding =
      dyn_cast_or_null<TileEncodingInterface>(source.getEncoding());
  auto resultEncoding =
      dyn_cast_or_null<TileEncodingInterface>(result.getEncoding());
  FailureOr<RegisterLayout> from =
      sourceEncoding ? sourceEncoding.getRegisterLayout(source.getShape())
                     : FailureOr<RegisterLayout>(failure());
  FailureOr<RegisterLayout> to =
      resultEncoding ? resultEncoding.getRegisterLayout(result.getShape())
                     : FailureOr<RegisterLayout>(failure());
  if (failed(from) || failed(to))
    return emitOpError("reads a register tile the other way: both types "
                       "need a register encoding, got ")
           << source << " -> " << result;
  // Every thread's slot s holds (r, c) in the source and (c, r) in the
  // result: the terms and offsets swapped.
  if (from->rowBase != to->colBase || from->colBase != to->rowBase ||
      from->rowOffset != to->colOffset || from->colOffset != to->rowOffset)
    return emitOpError("needs encodings whose register layouts are each "
                       "other's transposes (e.g. #fa.mma and its "
                       "`transposed` twin), got ")
           << source.getEncoding() << " -> " << result.getEncoding();
  return success();
}

LogicalResult CopyTileOp::verify() {
  auto source = cast<RankedTensorType>(getSource().getType());
  auto dest = cast<RankedTensorType>(getDest().getType());
  if (source.getShape() != dest.getShape() ||
      source.getElementType() != dest.getElementType())
    return emitOpError("must keep the shape and element type, got ")
           << source << " into " << dest;
  if (!isa_and_nonnull<SwizzledSharedEncodingAttr>(source.getEncoding()) ||
      !isa_and_nonnull<SwizzledSharedEncodingAttr>(dest.getEncoding()))
    return emitOpError("copies between shared buffers: both types need a "
                       "#fa.swizzled_shared placement, got ")
           << source << " into " << dest;
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

void KVTileHoleOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getHoleBegin(), "hole_begin");
  setNameFn(getHoleEnd(), "hole_end");
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
