//===- Fragments.cpp - Tensor-core fragments of #fa.mma tiles -------------===//
//
// Moves of accumulator fragments shared by the mma and wgmma lowerings, and
// the fragment-level conversion (see Fragments.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/Common/Fragments.h"
#include "compiler/Conversion/Common/TileOpLowering.h"
#include "compiler/Tiling/TileArithmetic.h"
#include "lib/Strategy/MmaModel.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::fa;
namespace layout = ::fa::mma;

namespace {

/// Accumulator -> A fragments (P for P V): the same elements in the same
/// lanes, renamed (layout::accumulatorSlotOfOperandA).
struct AccumulatorToOperandLowering : MmaPattern<ConvertLayoutOp> {
  using MmaPattern::MmaPattern;
  LogicalResult
  matchAndRewrite(ConvertLayoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isMma(op.getSource()) || !isOperand(op.getResult()))
      return rewriter.notifyMatchFailure(op, "not mma -> mma_operand");
    if (FragmentTile::warpsNOf(
            cast<RankedTensorType>(op.getSource().getType())) != 1)
      return op.emitOpError("A fragments hold whole rows: the accumulator "
                            "needs #fa.mma with warps_n = 1");
    auto type = cast<RankedTensorType>(op.getType());
    if (type.getDimSize(1) % layout::kK != 0)
      return rewriter.notifyMatchFailure(op, "columns not a multiple of 16");
    Location loc = op.getLoc();
    int64_t warps = FragmentTile::warpsOf(type);
    int64_t rowBlocks = type.getDimSize(0) / warps / layout::kM;
    int64_t nBlocks = type.getDimSize(1) / layout::kN;
    int64_t kBlocks = type.getDimSize(1) / layout::kK;
    SmallVector<Value> acc = unpack(rewriter, loc, adaptor.getSource());
    SmallVector<Value> elements;
    for (int64_t mi = 0; mi < rowBlocks; ++mi)
      for (int64_t kb = 0; kb < kBlocks; ++kb)
        for (int64_t e = 0; e < layout::OperandAFragment::kElements; ++e) {
          layout::AccumulatorSlot slot =
              layout::accumulatorSlotOfOperandA(kb, e);
          elements.push_back(acc[(mi * nBlocks + slot.nBlock) *
                                     layout::AccumulatorFragment::kElements +
                                 slot.element]);
        }
    rewriter.replaceOp(
        op,
        pack(rewriter, loc, getTypeConverter()->convertType(type), elements));
    return success();
  }
};

/// The 4 x 4 transpose of 32-bit element pairs across a quad: lane t holds
/// pair t of each of 4 adjacent n8 column blocks of a row and ends with the
/// 4 pairs of block t (8 adjacent elements: one 16-byte store). Two
/// butterfly steps (lane masks 2, then 1): in each, a lane keeps the pairs
/// whose index agrees with its lane bit and swaps the others with lane ^ m.
void transposeQuadPairs(OpBuilder &b, Location loc, const Lane &lane,
                        MutableArrayRef<Value> pairs) {
  for (int64_t mask : {2, 1}) {
    Value laneBit = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne,
        arith::AndIOp::create(b, loc, lane.t, indexConst(b, loc, mask)),
        indexConst(b, loc, 0));
    for (int64_t low = 0; low < 4; ++low) {
      if (low & mask)
        continue;
      Value &keepIfClear = pairs[low], &keepIfSet = pairs[low | mask];
      Value send =
          arith::SelectOp::create(b, loc, laneBit, keepIfClear, keepIfSet);
      Value received = gpu::ShuffleOp::create(b, loc, send, mask,
                                              /*width=*/32,
                                              gpu::ShuffleMode::XOR)
                           .getShuffleResult();
      keepIfClear =
          arith::SelectOp::create(b, loc, laneBit, received, keepIfClear);
      keepIfSet = arith::SelectOp::create(b, loc, laneBit, keepIfSet, received);
    }
  }
}

/// registers -> global. 2-d 16-bit tiles (O, dK, dV): each run of 4 column
/// blocks is transposed across the quad (transposeQuadPairs) and every lane
/// stores 16 bytes, a quad 64 adjacent bytes of its row; blocks past the
/// last run of 4 are stored as element pairs. LSE: lane t = 0 of each quad
/// stores its two rows.
struct StoreTileLowering : MmaPattern<StoreTileOp> {
  using MmaPattern::MmaPattern;
  LogicalResult
  matchAndRewrite(StoreTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isMma(op.getTile()))
      return rewriter.notifyMatchFailure(op, "not an mma tile");
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getTile().getType());
    Lane lane(rewriter, loc);
    FragmentTile tile(rewriter, loc, lane, type);
    SmallVector<Value> values = unpack(rewriter, loc, adaptor.getTile());
    Value dest = adaptor.getDest();
    Value rowLimit = buildRowLimit(rewriter, loc, dest, op.getSequenceEnd());
    Value firstRow = buildSourceRow(rewriter, loc, op.getSequenceFirst(),
                                    adaptor.getRow());
    bool perRow = type.getRank() == 1;
    Value firstOfQuad =
        perRow ? arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                       lane.t, indexConst(rewriter, loc, 0))
               : Value();
    Type elementType = type.getElementType();
    int64_t elementBytes = elementType.getIntOrFloatBitWidth() / 8;
    constexpr int64_t kRun = 4;
    int64_t runs =
        !perRow && elementBytes == 2 ? tile.accColBlocks / kRun : 0;
    // Elements slot and slot + 1 of a row: adjacent columns.
    auto pairAt = [&](int64_t slot) -> Value {
      return vector::FromElementsOp::create(
          rewriter, loc, VectorType::get({2}, elementType),
          ValueRange{values[slot], values[slot + 1]});
    };
    auto chunkType = VectorType::get({2 * kRun}, elementType);
    Type i32 = rewriter.getI32Type();
    // The runtime guarantees 16-byte alignment of rows and base
    // (kOutputAccessElements).
    auto chunkAlign = llvm::MaybeAlign(::fa::mma::kOutputAccessElements *
                                       elementBytes);
    for (int64_t mi = 0; mi < tile.rowBlocks; ++mi)
      for (int64_t h = 0; h < 2; ++h) {
        // Every lane of the quad takes part in the shuffles, outside the
        // row guard.
        SmallVector<Value> chunks;
        for (int64_t run = 0; run < runs; ++run) {
          SmallVector<Value, kRun> pairs;
          for (int64_t j = 0; j < kRun; ++j)
            pairs.push_back(LLVM::BitcastOp::create(
                rewriter, loc, i32,
                pairAt(tile.accSlot(mi, run * kRun + j, 2 * h))));
          transposeQuadPairs(rewriter, loc, lane, pairs);
          Value words = vector::FromElementsOp::create(
              rewriter, loc, VectorType::get({kRun}, i32), pairs);
          chunks.push_back(
              vector::BitCastOp::create(rewriter, loc, chunkType, words));
        }
        Value row = arith::AddIOp::create(rewriter, loc, firstRow,
                                          tile.row(rewriter, loc, mi, h));
        Value valid = arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::ult, row, rowLimit);
        if (perRow)
          valid = arith::AndIOp::create(rewriter, loc, valid, firstOfQuad);
        auto ifValid = scf::IfOp::create(rewriter, loc, valid);
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPointToStart(&ifValid.getThenRegion().front());
        if (perRow) {
          memref::StoreOp::create(
              rewriter, loc, values[FragmentTile::rowSlot(mi, h)], dest,
              ValueRange{adaptor.getBatch(), adaptor.getHead(), row});
          continue;
        }
        for (int64_t run = 0; run < runs; ++run) {
          // Lane t stores column block kRun * run + t.
          Value col = arith::AddIOp::create(
              rewriter, loc, tile.warpCol0,
              mulConst(rewriter, loc,
                       addConst(rewriter, loc, lane.t, run * kRun),
                       layout::kN));
          vector::StoreOp::create(
              rewriter, loc, chunks[run], dest,
              ValueRange{adaptor.getBatch(), adaptor.getHead(), row, col},
              /*nontemporal=*/false, chunkAlign);
        }
        for (int64_t ni = runs * kRun; ni < tile.accColBlocks; ++ni)
          vector::StoreOp::create(
              rewriter, loc, pairAt(tile.accSlot(mi, ni, 2 * h)), dest,
              ValueRange{adaptor.getBatch(), adaptor.getHead(), row,
                         tile.accCol(rewriter, loc, ni, 2 * h)},
              /*nontemporal=*/false, llvm::MaybeAlign(2 * elementBytes));
      }
    rewriter.eraseOp(op);
    return success();
  }
};

/// Whether every reader of a staged tile reads it back into the
/// accumulator layout it was written from, so that each lane reads only
/// the elements it wrote itself (P's rounding residual in the backward),
/// and no other tile of the kernel uses its bytes (whose readers a barrier
/// before the write would have to wait for).
static bool onlyReadByWritingLanes(ConvertLayoutOp staging) {
  Attribute written =
      cast<RankedTensorType>(staging.getSource().getType()).getEncoding();
  if (!llvm::all_of(staging->getUsers(), [&](Operation *user) {
        auto reload = dyn_cast<ConvertLayoutOp>(user);
        return reload && reload.getType().getEncoding() == written;
      }))
    return false;
  Attribute offset = staging->getAttr(FADialect::getSharedOffsetAttrName());
  WalkResult sharing =
      staging->getParentOfType<gpu::GPUFuncOp>().walk([&](Operation *op) {
        return op != staging &&
                       op->getAttr(FADialect::getSharedOffsetAttrName()) ==
                           offset
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      });
  return !sharing.wasInterrupted();
}

/// Whether every reader of a staged tile reads only the columns its own
/// warpgroup wrote (warpgroupColumnSlice), so that each warpgroup's
/// barriers around the staging need only its own threads: a product that
/// reads the tile transposed (P^T dO, dS^T Q) into rows the warpgroups
/// split as the writer split the columns, or fa-tma-reduce's bulk
/// reduction where each warpgroup's first thread reduces its own columns
/// (warpgroupReductionSlice). dS, also read by dQ = dS K across all
/// columns, is not.
static bool readByWritingWarpgroups(ConvertLayoutOp staging) {
  auto source = cast<RankedTensorType>(staging.getSource().getType());
  std::optional<int64_t> slice = warpgroupColumnSlice(source);
  if (!slice)
    return false;
  int64_t warps = cast<MmaEncodingAttr>(source.getEncoding()).getWarps();
  return llvm::all_of(staging->getUsers(), [&](Operation *user) {
    if (isa<UnrealizedConversionCastOp>(user))
      return warpgroupReductionSlice(source).has_value();
    auto matmul = dyn_cast<TileMatmulOp>(user);
    if (!matmul || !matmul.getTransposeLhs() ||
        matmul.getRhs() == staging.getResult())
      return false;
    auto result = cast<RankedTensorType>(matmul.getType());
    auto rows = dyn_cast_or_null<MmaEncodingAttr>(result.getEncoding());
    // Warp w holds rows [w R / warps, ...): warpgroup g the rows of lhs^T
    // that are column slice g of the tile.
    return rows && rows.getWarpsN() == 1 && rows.getWarps() == warps &&
           result.getDimSize(0) / warps * 4 == *slice;
  });
}

/// Accumulator fragments -> a shared tile (P and dS of the backward, read
/// transposed by the next products): each lane stores its element pairs
/// (32 bits) at their (row, column) (sharedElementIndices: padded rows or
/// the 128-byte swizzle). A barrier before (the previous iteration's
/// readers are done) and after (the whole tile is written), unless only the
/// writing lanes read the tile back; only the warpgroup's threads when its
/// readers stay in the writing warpgroup (readByWritingWarpgroups). A
/// swizzled tile is read by wgmma (or the TMA engine) through the async
/// proxy: each thread fences its writes before the barrier that publishes
/// them.
struct AccumulatorToSharedLowering : MmaPattern<ConvertLayoutOp> {
  using MmaPattern::MmaPattern;
  LogicalResult
  matchAndRewrite(ConvertLayoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    bool swizzled = hasEncoding<SwizzledSharedEncodingAttr>(op.getResult());
    if (!isMma(op.getSource()) || !(isShared(op.getResult()) || swizzled))
      return rewriter.notifyMatchFailure(op, "not mma -> shared");
    auto offset =
        op->getAttrOfType<IntegerAttr>(FADialect::getSharedOffsetAttrName());
    if (!offset)
      return op.emitOpError("has no fa.shared_offset (run fa-place-mma)");
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getSource().getType());
    Lane lane(rewriter, loc);
    FragmentTile tile(rewriter, loc, lane, type);
    auto resultType = cast<RankedTensorType>(op.getType());
    Value bufferOffset = indexConst(rewriter, loc, offset.getInt());
    // Swizzled tiles start on a swizzle atom: the placement's offsets count
    // from the first 1024-byte boundary, which every swizzle's atom (1024
    // or 512 bytes) divides.
    if (swizzled)
      bufferOffset = arith::AddIOp::create(
          rewriter, loc, bufferOffset,
          sharedAtomPad(rewriter, loc, kSwizzleBoundaryBytes));
    // A rotating staging: buffer `iteration mod stages`, consecutive from
    // the offset.
    Value iteration = adaptor.getIteration();
    if (iteration) {
      int64_t stages =
          op->getAttrOfType<IntegerAttr>(FADialect::getPipelineStagesAttrName())
              .getInt();
      int64_t bufferBytes =
          cast<TileEncodingInterface>(resultType.getEncoding())
              .getSharedElements(resultType.getShape()) *
          resultType.getElementTypeBitWidth() / 8;
      Value slot = arith::RemUIOp::create(rewriter, loc, iteration,
                                          indexConst(rewriter, loc, stages));
      bufferOffset =
          arith::AddIOp::create(rewriter, loc, bufferOffset,
                                mulConst(rewriter, loc, slot, bufferBytes));
    }
    Value buffer = sharedBufferAt(rewriter, loc, bufferOffset,
                                  sharedBufferType(resultType));
    SmallVector<Value> values = unpack(rewriter, loc, adaptor.getSource());
    auto pairType = VectorType::get({2}, type.getElementType());
    // Handed off (fa.hand_off): the hand-off publishes the tile and its
    // readers' own barrier frees the buffer.
    bool handedOff =
        !op->use_empty() && llvm::all_of(op->getUsers(), [](Operation *user) {
          return isa<HandOffOp>(user);
        });
    bool readAcrossLanes = !handedOff && !onlyReadByWritingLanes(op);
    bool warpgroupLocal = readAcrossLanes && readByWritingWarpgroups(op);
    auto barrier = [&](OpBuilder &b) {
      if (warpgroupLocal)
        createWarpgroupBarrier(b, loc);
      else if (readAcrossLanes)
        createComputeBarrier(b, loc, op);
    };
    // Before writing, the previous readers are done: with a rotation, the
    // barrier after the previous iteration's staging already waited for
    // the readers of the buffer before (the convert's verifier: they wait
    // for their reads within their iteration), so only iteration 0 waits.
    if (iteration && (warpgroupLocal || readAcrossLanes)) {
      Value first =
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                iteration, indexConst(rewriter, loc, 0));
      auto firstIteration =
          scf::IfOp::create(rewriter, loc, first, /*withElseRegion=*/false);
      OpBuilder in(firstIteration.thenBlock()->getTerminator());
      barrier(in);
    } else {
      barrier(rewriter);
    }
    // f32 pairs (8 bytes) in the 128-byte swizzle (dQ for the TMA
    // reduction): a 64-bit store is served a half-warp (rows g = 0..3 or
    // 4..7) at a time, and with one column block for all lanes, lanes
    // t = 0, 1 and t = 2, 3 fill the two halves of a 16-byte chunk whose
    // row xor lands the half-warp's 16 pairs on 4 chunks twice: a 2-way
    // bank conflict (ncu: twice the ideal wavefronts). At block ni's turn,
    // lanes t = 2, 3 store block ni ^ 2 instead (the same 32-column box):
    // the half-warp's pairs then cover all 8 chunks once.
    auto swizzle =
        dyn_cast<SwizzledSharedEncodingAttr>(resultType.getEncoding());
    Value upperLanes;
    if (swizzle && swizzle.getBytes() == 128 &&
        type.getElementTypeBitWidth() == 32 && tile.accColBlocks % 4 == 0)
      upperLanes =
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::uge,
                                lane.t, indexConst(rewriter, loc, 2));
    for (int64_t mi = 0; mi < tile.rowBlocks; ++mi)
      for (int64_t h = 0; h < 2; ++h) {
        Value row = tile.row(rewriter, loc, mi, h);
        for (int64_t ni = 0; ni < tile.accColBlocks; ++ni) {
          int64_t slot = tile.accSlot(mi, ni, 2 * h);
          Value first = values[slot], second = values[slot + 1];
          Value col;
          if (upperLanes) {
            int64_t other = tile.accSlot(mi, ni ^ 2, 2 * h);
            auto pick = [&](Value upper, Value lower) -> Value {
              return arith::SelectOp::create(rewriter, loc, upperLanes, upper,
                                             lower);
            };
            Value otherCol = tile.accCol(rewriter, loc, ni ^ 2, 2 * h);
            col = pick(otherCol, tile.accCol(rewriter, loc, ni, 2 * h));
            first = pick(values[other], first);
            second = pick(values[other + 1], second);
          } else {
            col = tile.accCol(rewriter, loc, ni, 2 * h);
          }
          Value pair = vector::FromElementsOp::create(
              rewriter, loc, pairType, ValueRange{first, second});
          // A pair never straddles a 16-byte chunk (col is even): aligned
          // to its size, whatever LLVM can prove of the swizzled index.
          vector::StoreOp::create(
              rewriter, loc, pair, buffer,
              sharedElementIndices(rewriter, loc, resultType, row, col),
              /*nontemporal=*/false,
              llvm::MaybeAlign(2 * type.getElementTypeBitWidth() / 8));
        }
      }
    if (swizzled)
      createAsyncSharedFence(rewriter, loc);
    barrier(rewriter);
    rewriter.replaceOp(op, buffer);
    return success();
  }
};

/// A staged shared tile -> accumulator fragments (P read back for dS): each
/// lane loads the element pairs it stored (no barrier: the same lane wrote
/// them).
struct SharedToAccumulatorLowering : MmaPattern<ConvertLayoutOp> {
  using MmaPattern::MmaPattern;
  LogicalResult
  matchAndRewrite(ConvertLayoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isShared(op.getSource()) || !isMma(op.getResult()) ||
        cast<RankedTensorType>(op.getType()).getRank() != 2)
      return rewriter.notifyMatchFailure(op, "not a shared tile -> mma");
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    Lane lane(rewriter, loc);
    FragmentTile tile(rewriter, loc, lane, type);
    auto pairType = VectorType::get({2}, type.getElementType());
    SmallVector<Value> values(tile.rowBlocks * tile.accColBlocks * 4);
    tile.forEachElementPair(
        rewriter, loc, [&](Value row, Value col, int64_t slot) {
          Value pair = vector::LoadOp::create(rewriter, loc, pairType,
                                              adaptor.getSource(),
                                              ValueRange{row, col});
          for (int64_t p = 0; p < 2; ++p)
            values[slot + p] = vector::ExtractOp::create(rewriter, loc, pair,
                                                         ArrayRef<int64_t>{p});
        });
    rewriter.replaceOp(
        op, pack(rewriter, loc, getTypeConverter()->convertType(type), values));
    return success();
  }
};

/// Accumulator fragments added into global memory (dQ of the backward):
/// each lane adds its elements of the valid rows (AccumulateTarget: vector
/// reductions of column pairs where the target allows, else atomic adds).
struct AccumulateTileLowering : MmaPattern<AccumulateTileOp> {
  AccumulateTileLowering(const TypeConverter &converter, MLIRContext *ctx,
                         FragmentTarget target)
      : MmaPattern(converter, ctx), target(target) {}
  FragmentTarget target;
  LogicalResult
  matchAndRewrite(AccumulateTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isMma(op.getTile()))
      return rewriter.notifyMatchFailure(op, "not an mma tile");
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getTile().getType());
    Lane lane(rewriter, loc);
    FragmentTile tile(rewriter, loc, lane, type);
    AccumulateTarget sinkTarget(rewriter, loc, op, tile, target);
    sinkTarget.add(rewriter, loc, unpack(rewriter, loc, adaptor.getTile()), 0,
               tile.accColBlocks);
    rewriter.eraseOp(op);
    return success();
  }
};

/// A shared tile cast to its own lowered type (fa-tma-reduce hands the
/// staged dQ buffer to the TMA engine so) is the lowered buffer.
struct SharedTileToBufferCast
    : OpConversionPattern<UnrealizedConversionCastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(UnrealizedConversionCastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op->getNumOperands() != 1 || op->getNumResults() != 1 ||
        adaptor.getOperands()[0].getType() != op.getResult(0).getType())
      return rewriter.notifyMatchFailure(op, "not a tile to its buffer");
    rewriter.replaceOp(op, adaptor.getOperands()[0]);
    return success();
  }
};

/// fa.hand_off: the arrival on its named barrier (bar.arrive).
struct HandOffLowering : OpConversionPattern<HandOffOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(HandOffOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int32_t first = int32_t(op.getBarrier());
    createBarrierArrive(rewriter, loc,
                        op.getPerWarpgroup()
                            ? warpgroupBarrierId(rewriter, loc, first)
                            : i32Const(rewriter, loc, first),
                        op.getThreads());
    rewriter.eraseOp(op);
    return success();
  }
};

/// Whether `op` casts a shared tile to the buffer it is lowered to.
static bool isSharedTileToBufferCast(UnrealizedConversionCastOp op,
                                     const TypeConverter &typeConverter) {
  if (op->getNumOperands() != 1 || op->getNumResults() != 1)
    return false;
  auto tile = dyn_cast<RankedTensorType>(op.getOperand(0).getType());
  auto encoding =
      tile ? dyn_cast_or_null<TileEncodingInterface>(tile.getEncoding())
           : TileEncodingInterface();
  return encoding && encoding.isShared() &&
         typeConverter.convertType(tile) == op.getResult(0).getType();
}

} // namespace

void mlir::fa::populateAccumulatePatterns(const TypeConverter &typeConverter,
                                          RewritePatternSet &patterns,
                                          const FragmentTarget &target) {
  patterns.add<AccumulateTileLowering>(typeConverter, patterns.getContext(),
                                       target);
}

void mlir::fa::populateFragmentPatterns(const TypeConverter &typeConverter,
                                        RewritePatternSet &patterns) {
  patterns.add<AccumulatorToOperandLowering, StoreTileLowering,
               AccumulatorToSharedLowering, SharedToAccumulatorLowering>(
      typeConverter, patterns.getContext());
}

LogicalResult mlir::fa::applyFragmentConversion(
    gpu::GPUFuncOp kernel,
    function_ref<void(const TypeConverter &, RewritePatternSet &)>
        addStrategyPatterns) {
  MLIRContext *ctx = kernel.getContext();
  PlacedTileTypeConverter typeConverter;
  ConversionTarget target(*ctx);
  target.addIllegalDialect<FADialect>();
  target.addLegalDialect<
      arith::ArithDialect, gpu::GPUDialect, LLVM::LLVMDialect,
      math::MathDialect, memref::MemRefDialect, NVVM::NVVMDialect,
      nvgpu::NVGPUDialect, scf::SCFDialect, vector::VectorDialect>();
  target.addDynamicallyLegalOp<UnrealizedConversionCastOp>(
      [&](UnrealizedConversionCastOp op) {
        return !isSharedTileToBufferCast(op, typeConverter);
      });
  addRegisterTileLegality(target, typeConverter);
  RewritePatternSet patterns(ctx);
  addStrategyPatterns(typeConverter, patterns);
  populateFragmentPatterns(typeConverter, patterns);
  patterns.add<SharedTileToBufferCast, HandOffLowering>(typeConverter, ctx);
  populateTileOpPatterns(typeConverter, patterns);
  populateRegisterTilePatterns(typeConverter, patterns);
  populateTileRangeLowering(patterns);
  populateTurnPatterns(patterns);
  scf::populateSCFStructuralTypeConversionsAndLegality(typeConverter, patterns,
                                                       target);
  return applyPartialConversion(kernel, target, std::move(patterns));
}
