//===- Fragments.h - Tensor-core fragments of #fa.mma tiles -----*- C++ -*-===//
//
// The m16n8 fragments of #fa.mma and #fa.mma_operand tiles as the
// lowerings of the strategies that use them (mma, wgmma) see them: a lane's
// coordinates, a warp's fragments of a tile, the patterns that move
// accumulator fragments (to A operands, through shared memory, to global
// memory), and the fragment-level conversion of a kernel. The encoding owns
// these, not a strategy: a warpgroup's m64 wgmma accumulator is its four
// warps' m16n8 fragments.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_CONVERSION_COMMON_FRAGMENTS_H
#define FA_COMPILER_CONVERSION_COMMON_FRAGMENTS_H

#include "compiler/Conversion/Common/FragmentTarget.h"
#include "compiler/Conversion/Common/GpuLowering.h"
#include "dialect/FAOps.h"
#include "lib/Strategy/MmaLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::fa {

/// The calling thread's warp and its lane split as (g, t) = (lane / 4,
/// lane % 4), the coordinates of the fragment tables; and the offsets of
/// the row address a lane gives ldmatrix.x4 inside a 16 x 16 block:
/// matrix row l % 8 (`matrixRow`), and 8 ((l / 8) % 2) and 8 (l / 16)
/// (`secondMatrix`, `upperMatrices`), which pick the block's half for the
/// second and the upper two of the four matrices.
struct Lane {
  Lane(OpBuilder &b, Location loc) {
    Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    Value c32 = indexConst(b, loc, 32), c4 = indexConst(b, loc, 4);
    Value c8 = indexConst(b, loc, 8);
    warp = arith::DivUIOp::create(b, loc, tid, c32);
    lane = arith::RemUIOp::create(b, loc, tid, c32);
    g = arith::DivUIOp::create(b, loc, lane, c4);
    t = arith::RemUIOp::create(b, loc, lane, c4);
    matrixRow = arith::RemUIOp::create(b, loc, lane, c8);
    Value matrix = arith::DivUIOp::create(b, loc, lane, c8);
    secondMatrix = arith::MulIOp::create(
        b, loc, arith::RemUIOp::create(b, loc, matrix, indexConst(b, loc, 2)),
        c8);
    upperMatrices = arith::MulIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, lane, indexConst(b, loc, 16)),
        c8);
  }
  Value warp, lane, g, t;
  Value matrixRow, secondMatrix, upperMatrices;
};

/// Where a warp's fragments of a [R, C] tile placed over `warps` warps lie:
/// `warps / warpsN` warps along the rows and, for a 2-d tile, `warpsN`
/// along the columns (#fa.mma's warps_n), numbered along the columns first
/// or, with `rowsFirst`, along the rows first (#fa.mma's rows_first).
struct FragmentTile {
  FragmentTile(OpBuilder &b, Location loc, const Lane &lane,
               RankedTensorType type, int64_t warps, int64_t warpsN,
               bool rowsFirst = false)
      : rows(type.getDimSize(0)),
        cols(type.getRank() == 2 ? type.getDimSize(1) : 1),
        rowBlocks(rows / (warps / warpsN) / ::fa::mma::kM),
        accColBlocks(cols / (type.getRank() == 2 ? warpsN : 1) / ::fa::mma::kN),
        lane(lane) {
    Value warpRow = lane.warp, warpColumn;
    if (warpsN > 1 && rowsFirst) {
      Value m = indexConst(b, loc, warps / warpsN);
      warpRow = arith::RemUIOp::create(b, loc, lane.warp, m);
      warpColumn = arith::DivUIOp::create(b, loc, lane.warp, m);
    } else if (warpsN > 1) {
      Value n = indexConst(b, loc, warpsN);
      warpRow = arith::DivUIOp::create(b, loc, lane.warp, n);
      warpColumn = arith::RemUIOp::create(b, loc, lane.warp, n);
    }
    warpRow0 = mulConst(b, loc, warpRow, rows / (warps / warpsN));
    warpCol0 = warpColumn && type.getRank() == 2
                   ? mulConst(b, loc, warpColumn, cols / warpsN)
                   : indexConst(b, loc, 0);
  }
  FragmentTile(OpBuilder &b, Location loc, const Lane &lane,
               RankedTensorType type)
      : FragmentTile(b, loc, lane, type, warpsOf(type), warpsNOf(type),
                     rowsFirstOf(type)) {}

  static int64_t warpsOf(RankedTensorType type) {
    if (auto mma = dyn_cast<MmaEncodingAttr>(type.getEncoding()))
      return mma.getWarps();
    return cast<MmaOperandEncodingAttr>(type.getEncoding()).getWarps();
  }
  static int64_t warpsNOf(RankedTensorType type) {
    if (auto mma = dyn_cast<MmaEncodingAttr>(type.getEncoding()))
      return mma.getWarpsN();
    return 1;
  }
  static bool rowsFirstOf(RankedTensorType type) {
    auto mma = dyn_cast<MmaEncodingAttr>(type.getEncoding());
    return mma && mma.getRowsFirst();
  }

  /// Register of accumulator element e of fragment (mi, ni).
  int64_t accSlot(int64_t mi, int64_t ni, int64_t e) const {
    return (mi * accColBlocks + ni) * ::fa::mma::AccumulatorFragment::kElements +
           e;
  }
  /// Register of the per-row value of row half h of row block mi.
  static int64_t rowSlot(int64_t mi, int64_t h) { return mi * 2 + h; }

  /// Tile row of row half h of row block mi: warpRow0 + 16 mi + g + 8 h.
  Value row(OpBuilder &b, Location loc, int64_t mi, int64_t h) const {
    return addConst(b, loc, arith::AddIOp::create(b, loc, warpRow0, lane.g),
                    mi * ::fa::mma::kM + 8 * h);
  }
  /// Tile column of accumulator element e of column block ni.
  Value accCol(OpBuilder &b, Location loc, int64_t ni, int64_t e) const {
    return addConst(
        b, loc,
        arith::AddIOp::create(b, loc, warpCol0, mulConst(b, loc, lane.t, 2)),
        ni * ::fa::mma::kN + ::fa::mma::AccumulatorFragment::colPair[e]);
  }

  /// Calls `fn(row, col, slot)` for each 32-bit element pair a lane holds
  /// of an accumulator tile: tile (row, col) of elements slot and slot + 1.
  void forEachElementPair(
      OpBuilder &b, Location loc,
      function_ref<void(Value row, Value col, int64_t slot)> fn) const {
    for (int64_t mi = 0; mi < rowBlocks; ++mi)
      for (int64_t h = 0; h < 2; ++h) {
        Value r = row(b, loc, mi, h);
        for (int64_t ni = 0; ni < accColBlocks; ++ni)
          fn(r, accCol(b, loc, ni, 2 * h), accSlot(mi, ni, 2 * h));
      }
  }

  int64_t rows, cols, rowBlocks, accColBlocks;
  const Lane &lane;
  /// The first row and column of the warp's slice.
  Value warpRow0, warpCol0;
};

template <typename Op> struct MmaPattern : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  using OpAdaptor = typename Op::Adaptor;
};

/// An #fa.mma tile in its fragments' own orientation: the patterns here
/// index fragments by (row, column); a `transposed` tile is first read as
/// its twin (fa.transpose).
inline bool isMma(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  auto mma = type ? dyn_cast_or_null<MmaEncodingAttr>(type.getEncoding())
                  : MmaEncodingAttr();
  return mma && !mma.getTransposed();
}
inline bool isOperand(Value v) { return hasEncoding<MmaOperandEncodingAttr>(v); }
inline bool isShared(Value v) { return hasEncoding<SharedEncodingAttr>(v); }

/// Where a warp's accumulator fragments are added in global memory (the
/// fa.accumulate_tile lowering): each lane adds its elements of the valid
/// rows with atomic f32 adds, one per element, or with vector reductions
/// one per pair of adjacent columns (red.global.add.v2.f32: half the
/// load/store-unit instructions, whose bursts otherwise throttle the
/// 8-warp backward). A pair must be 8-byte aligned: the vector form runs
/// when the destination's base, offset and strides make every pair so (the
/// runtime's dQ accumulator does), the scalar form otherwise.
struct AccumulateTarget {
  AccumulateTarget(ConversionPatternRewriter &rewriter, Location loc,
                   AccumulateTileOp op, const FragmentTile &tile,
                   const FragmentTarget &target)
      : tile(tile), dest(rewriter.getRemappedValue(op.getDest())),
        batch(rewriter.getRemappedValue(op.getBatch())),
        head(rewriter.getRemappedValue(op.getHead())),
        row(buildSourceRow(rewriter, loc, op.getSequenceFirst(),
                           rewriter.getRemappedValue(op.getRow()))) {
    rowLimit = buildRowLimit(rewriter, loc, dest, op.getSequenceEnd());
    if (target.vectorReductions)
      prepareVectorReductions(rewriter, loc);
  }

  /// Adds n-blocks [nbBegin, nbEnd) of every row block of `values`.
  void add(OpBuilder &b, Location loc, ArrayRef<Value> values,
           int64_t nbBegin, int64_t nbEnd) const {
    if (!pairsAligned) {
      addElements(b, loc, values, nbBegin, nbEnd, /*vector=*/false);
      return;
    }
    auto ifAligned =
        scf::IfOp::create(b, loc, pairsAligned, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifAligned.getThenRegion().front());
    addElements(b, loc, values, nbBegin, nbEnd, /*vector=*/true);
    b.setInsertionPointToStart(&ifAligned.getElseRegion().front());
    addElements(b, loc, values, nbBegin, nbEnd, /*vector=*/false);
  }

  const FragmentTile &tile;
  Value dest, batch, head, row, rowLimit;

private:
  void addElements(OpBuilder &b, Location loc, ArrayRef<Value> values,
                   int64_t nbBegin, int64_t nbEnd, bool vector) const {
    for (int64_t mi = 0; mi < tile.rowBlocks; ++mi)
      for (int64_t h = 0; h < 2; ++h) {
        Value r = arith::AddIOp::create(b, loc, row, tile.row(b, loc, mi, h));
        Value valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                            r, rowLimit);
        auto ifValid = scf::IfOp::create(b, loc, valid);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&ifValid.getThenRegion().front());
        for (int64_t ni = nbBegin; ni < nbEnd; ++ni) {
          // Elements 2h and 2h + 1 of an n-block sit in adjacent columns.
          Value pair[2] = {values[tile.accSlot(mi, ni, 2 * h)],
                           values[tile.accSlot(mi, ni, 2 * h + 1)]};
          Value col = tile.accCol(b, loc, ni, 2 * h);
          if (vector) {
            reducePair(b, loc, r, col, pair);
            continue;
          }
          for (int64_t p = 0; p < 2; ++p)
            memref::AtomicRMWOp::create(
                b, loc, arith::AtomicRMWKind::addf, pair[p], dest,
                ValueRange{batch, head, r, addConst(b, loc, col, p)});
        }
      }
  }

  /// dest's first element as a global pointer, its strides, and whether
  /// every column pair (even column) is 8-byte aligned: base + 4 offset and
  /// 4 x the outer strides multiples of 8, unit column stride.
  void prepareVectorReductions(OpBuilder &b, Location loc) {
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, dest);
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, dest);
    Value offset = metadata.getOffset();
    strides.assign(metadata.getStrides().begin(), metadata.getStrides().end());
    Value four = indexConst(b, loc, 4);
    Value misaligned = arith::AddIOp::create(
        b, loc, base, arith::MulIOp::create(b, loc, offset, four));
    for (int64_t d = 0; d < 3; ++d)
      misaligned = arith::OrIOp::create(
          b, loc, misaligned, arith::MulIOp::create(b, loc, strides[d], four));
    Value lowBits = arith::AndIOp::create(b, loc, misaligned,
                                          indexConst(b, loc, 7));
    Value aligned = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          lowBits, indexConst(b, loc, 0));
    Value unitColumns =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, strides[3],
                              indexConst(b, loc, 1));
    pairsAligned = arith::AndIOp::create(b, loc, aligned, unitColumns);

    auto generic = LLVM::LLVMPointerType::get(b.getContext());
    auto global = LLVM::LLVMPointerType::get(b.getContext(), 1);
    Value address = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), base);
    Value pointer = LLVM::IntToPtrOp::create(b, loc, generic, address);
    pointer = LLVM::AddrSpaceCastOp::create(b, loc, global, pointer);
    globalBase = LLVM::GEPOp::create(
        b, loc, global, b.getF32Type(), pointer,
        ValueRange{arith::IndexCastOp::create(b, loc, b.getI64Type(), offset)});
  }

  /// red.global.add.v2.f32 of `pair` at dest[batch, head, r, col].
  void reducePair(OpBuilder &b, Location loc, Value r, Value col,
                  ArrayRef<Value> pair) const {
    Value index = col; // unit column stride
    Value outer[] = {batch, head, r};
    for (int64_t d = 0; d < 3; ++d)
      index = arith::AddIOp::create(
          b, loc, index, arith::MulIOp::create(b, loc, outer[d], strides[d]));
    Value address = LLVM::GEPOp::create(
        b, loc, globalBase.getType(), b.getF32Type(), globalBase,
        ValueRange{arith::IndexCastOp::create(b, loc, b.getI64Type(), index)});
    LLVM::InlineAsmOp::create(
        b, loc, TypeRange{}, ValueRange{address, pair[0], pair[1]},
        "red.global.add.v2.f32 [$0], {$1, $2};", "l,f,f",
        /*has_side_effects=*/true, /*is_align_stack=*/false,
        LLVM::tailcallkind::TailCallKind::None,
        LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
        /*operand_attrs=*/ArrayAttr());
  }

  Value pairsAligned; // i1, or null without vector reductions
  Value globalBase;   // !llvm.ptr<1> to dest's first element
  SmallVector<Value> strides;
};

/// fa.accumulate_tile of accumulator fragments (dQ of the backward), with
/// `target`'s vector reductions where it has them.
void populateAccumulatePatterns(const TypeConverter &typeConverter,
                                RewritePatternSet &patterns,
                                const FragmentTarget &target);

/// The lowerings of the tile ops that move accumulator fragments: the
/// accumulator -> A-operand renaming (P), the stores of O and LSE, and the
/// staging of P and dS through shared memory. The element-wise tile ops are
/// lowered against the register layout (TileOpLowering.h).
void populateFragmentPatterns(const TypeConverter &typeConverter,
                              RewritePatternSet &patterns);

/// The fragment-level dialect conversion of a kernel whose accumulators are
/// m16n8 fragments (mma, wgmma): placed tile types (PlacedTileTypeConverter),
/// the fragment, tile-op, register-tile, K/V range and structural patterns,
/// plus the strategy's own (its matmul, its operand loads).
LogicalResult applyFragmentConversion(
    gpu::GPUFuncOp kernel,
    function_ref<void(const TypeConverter &, RewritePatternSet &)>
        addStrategyPatterns);

} // namespace mlir::fa

#endif // FA_COMPILER_CONVERSION_COMMON_FRAGMENTS_H
