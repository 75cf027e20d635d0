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

#include "compiler/Conversion/Common/GpuLowering.h"
#include "dialect/FAOps.h"
#include "lib/Strategy/MmaLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
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
/// along the columns (#fa.mma's warps_n).
struct FragmentTile {
  FragmentTile(OpBuilder &b, Location loc, const Lane &lane,
               RankedTensorType type, int64_t warps, int64_t warpsN)
      : rows(type.getDimSize(0)),
        cols(type.getRank() == 2 ? type.getDimSize(1) : 1),
        rowBlocks(rows / (warps / warpsN) / ::fa::mma::kM),
        accColBlocks(cols / (type.getRank() == 2 ? warpsN : 1) / ::fa::mma::kN),
        lane(lane) {
    Value warpRow = lane.warp, warpColumn;
    if (warpsN > 1) {
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
      : FragmentTile(b, loc, lane, type, warpsOf(type), warpsNOf(type)) {}

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

inline bool isMma(Value v) { return hasEncoding<MmaEncodingAttr>(v); }
inline bool isOperand(Value v) { return hasEncoding<MmaOperandEncodingAttr>(v); }
inline bool isShared(Value v) { return hasEncoding<SharedEncodingAttr>(v); }

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
