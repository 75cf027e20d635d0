//===- MmaToGPU.cpp - Lowering of the mma strategy's programs ---*- C++ -*-===//
//
// Two steps on an outlined kernel placed by fa-place-mma:
//
// 1. Copies. Every fa.load_tile becomes 16-byte cp.async copies into its
//    shared buffer with padded rows; the K/V loop's loads use a ring of
//    `stages` slots (compiler/Conversion/Common/AsyncCopy.h).
// 2. Fragments. A dialect conversion turns the tile ops on #fa.mma and
//    #fa.mma_operand tiles into per-thread code over fragment registers
//    (lib/Strategy/MmaLayout.h): ldmatrix for operands in shared memory,
//    nvvm.mma.sync m16n8k16, quad shuffles for row reductions.
//
// mma.sync is emitted as nvvm.mma.sync rather than nvgpu.mma.sync: the
// upstream nvgpu lowering cannot type bf16 operands (it fails with "failed
// to deduce operand PTX types"). ldmatrix and cp.async use nvgpu.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/Mma/MmaToGPU.h"
#include "compiler/Conversion/Common/AsyncCopy.h"
#include "compiler/Conversion/Common/GpuLowering.h"
#include "compiler/Conversion/Common/TileOpLowering.h"
#include "compiler/Tiling/TileArithmetic.h"
#include "dialect/FAOps.h"
#include "lib/Strategy/MmaLayout.h"
#include "lib/Strategy/MmaModel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fa;
namespace layout = ::fa::mma;

namespace {

//===----------------------------------------------------------------------===//
// Lanes and fragments
//===----------------------------------------------------------------------===//

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
        rowBlocks(rows / (warps / warpsN) / layout::kM),
        accColBlocks(cols / (type.getRank() == 2 ? warpsN : 1) / layout::kN),
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
    return (mi * accColBlocks + ni) * layout::AccumulatorFragment::kElements +
           e;
  }
  /// Register of the per-row value of row half h of row block mi.
  static int64_t rowSlot(int64_t mi, int64_t h) { return mi * 2 + h; }

  /// Tile row of row half h of row block mi: warpRow0 + 16 mi + g + 8 h.
  Value row(OpBuilder &b, Location loc, int64_t mi, int64_t h) const {
    return addConst(b, loc, arith::AddIOp::create(b, loc, warpRow0, lane.g),
                    mi * layout::kM + 8 * h);
  }
  /// Tile column of accumulator element e of column block ni.
  Value accCol(OpBuilder &b, Location loc, int64_t ni, int64_t e) const {
    return addConst(
        b, loc,
        arith::AddIOp::create(b, loc, warpCol0, mulConst(b, loc, lane.t, 2)),
        ni * layout::kN + layout::AccumulatorFragment::colPair[e]);
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

/// A 32-bit mma operand register from its two 16-bit halves (a
/// vector<2xT>): nvvm.mma.sync takes f16 pairs as vector<2xf16> and bf16
/// pairs as i32.
Value operandRegister(OpBuilder &b, Location loc, Value pair) {
  if (cast<VectorType>(pair.getType()).getElementType().isF16())
    return pair;
  return LLVM::BitcastOp::create(b, loc, b.getI32Type(), pair);
}

/// Two 16-bit values as the 32-bit register an mma operand takes.
Value packPair(OpBuilder &b, Location loc, Value lo, Value hi) {
  auto pair = VectorType::get({2}, lo.getType());
  return operandRegister(
      b, loc, vector::FromElementsOp::create(b, loc, pair, ValueRange{lo, hi}));
}

/// Register r of an ldmatrix result (vector<Nx2xT>) as an mma operand.
Value ldmatrixRegister(OpBuilder &b, Location loc, Value loaded, int64_t r) {
  return operandRegister(b, loc, vector::ExtractOp::create(b, loc, loaded, r));
}

Value ldmatrix(OpBuilder &b, Location loc, Value buffer, Value row, Value col,
               int64_t matrices, bool transpose) {
  auto elementType = cast<MemRefType>(buffer.getType()).getElementType();
  auto type = VectorType::get({matrices, 2}, elementType);
  return nvgpu::LdMatrixOp::create(b, loc, type, buffer, ValueRange{row, col},
                                   b.getBoolAttr(transpose),
                                   b.getI32IntegerAttr(matrices));
}

/// The A fragment (a0a1, a2a3, a4a5, a6a7) of the 16 x 16 block (mi, ki)
/// of a warp's rows of `tile`, by one ldmatrix.x4 from `buffer`. Stored
/// [m][k] (Q, dO): lane l points at row m0 + l % 8 + 8 (l / 8 % 2), column
/// k0 + 8 (l / 16). Stored [k][m] (`transposed`: P and dS of the backward,
/// read as P^T and dS^T) with .trans: matrix i holds (m half
/// aMatrixRowHalf[i], k half aMatrixColHalf[i]), i.e. stored rows
/// k0 + 8 aMatrixColHalf[i] and columns m0 + 8 aMatrixRowHalf[i]; lane l
/// points at stored row k0 + l % 8 + 8 (l / 16), column m0 + 8 (l / 8 % 2).
Value ldmatrixA(OpBuilder &b, Location loc, const FragmentTile &tile,
                Value buffer,
                int64_t mi, int64_t ki, bool transposed) {
  const Lane &lane = tile.lane;
  if (!transposed) {
    Value laneRow =
        arith::AddIOp::create(b, loc, lane.matrixRow, lane.secondMatrix);
    Value row = addConst(
        b, loc, arith::AddIOp::create(b, loc, tile.warpRow0, laneRow),
        mi * layout::kM);
    Value col = addConst(b, loc, lane.upperMatrices, ki * layout::kK);
    return ldmatrix(b, loc, buffer, row, col, 4, /*transpose=*/false);
  }
  Value row = addConst(
      b, loc, arith::AddIOp::create(b, loc, lane.matrixRow, lane.upperMatrices),
      ki * layout::kK);
  Value col = addConst(
      b, loc, arith::AddIOp::create(b, loc, tile.warpRow0, lane.secondMatrix),
      mi * layout::kM);
  return ldmatrix(b, loc, buffer, row, col, 4, /*transpose=*/true);
}

/// d = a * b + c for one m16n8k16 fragment.
SmallVector<Value> mmaSync(OpBuilder &b, Location loc, Type elementType,
                           ArrayRef<Value> a, ArrayRef<Value> bRegs,
                           ArrayRef<Value> c) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  auto resultType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  NVVM::MMATypes ptxType =
      elementType.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  auto mma = NVVM::MmaOp::create(
      b, loc, resultType, a, bRegs, c, ArrayRef<int64_t>{16, 8, 16},
      std::nullopt, std::nullopt,
      std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> d;
  for (int64_t i = 0; i < 4; ++i)
    d.push_back(
        LLVM::ExtractValueOp::create(b, loc, mma, ArrayRef<int64_t>{i}));
  return d;
}

//===----------------------------------------------------------------------===//
// Step 1: copies into shared memory (padded rows)
//===----------------------------------------------------------------------===//

/// The view of slot `slot` of the ring (or single buffer) of `load`.
Value slotBuffer(OpBuilder &b, Location loc, LoadTileOp load, Value slot) {
  auto type = sharedBufferType(cast<RankedTensorType>(load.getType()));
  int64_t slotBytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
  Value offset =
      arith::AddIOp::create(b, loc, mulConst(b, loc, slot, slotBytes),
                            indexConst(b, loc, sharedOffset(load)));
  return sharedBufferAt(b, loc, offset, type);
}

/// Rows padded by the placement: a chunk lands at its own (row, col).
SharedTileCopyLayout paddedRowsLayout() {
  SharedTileCopyLayout layout;
  layout.slotBuffer = slotBuffer;
  layout.chunkIndices = [](OpBuilder &, Location, Value row,
                           Value col) -> SmallVector<Value> {
    return {row, col};
  };
  layout.copiedColumns = ::fa::mma::contractionWidth;
  layout.placePass = "fa-place-mma";
  return layout;
}

//===----------------------------------------------------------------------===//
// Step 2: fragments
//===----------------------------------------------------------------------===//

template <typename Op> struct MmaPattern : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  using OpAdaptor = typename Op::Adaptor;
};

bool isMma(Value v) { return hasEncoding<MmaEncodingAttr>(v); }
bool isOperand(Value v) { return hasEncoding<MmaOperandEncodingAttr>(v); }
bool isShared(Value v) { return hasEncoding<SharedEncodingAttr>(v); }

/// Shared -> A fragments (the resident Q tile): one ldmatrix.x4 per 16 x 16
/// fragment; lane l points at row l % 8 + 8 (l / 8 % 2), column 8 (l / 16)
/// of it, so the four matrices arrive as a0a1, a2a3, a4a5, a6a7.
struct SharedToOperandLowering : MmaPattern<ConvertLayoutOp> {
  using MmaPattern::MmaPattern;
  LogicalResult
  matchAndRewrite(ConvertLayoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isShared(op.getSource()) || !isOperand(op.getResult()))
      return rewriter.notifyMatchFailure(op, "not shared -> mma_operand");
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    Lane lane(rewriter, loc);
    FragmentTile tile(rewriter, loc, lane, type);
    int64_t kBlocks = llvm::divideCeil(tile.cols, layout::kK);
    SmallVector<Value> elements;
    for (int64_t mi = 0; mi < tile.rowBlocks; ++mi)
      for (int64_t ki = 0; ki < kBlocks; ++ki) {
        Value loaded = ldmatrixA(rewriter, loc, tile, adaptor.getSource(), mi,
                                 ki, /*transposed=*/false);
        for (int64_t r = 0; r < 4; ++r)
          for (int64_t i = 0; i < 2; ++i)
            elements.push_back(vector::ExtractOp::create(
                rewriter, loc, loaded, ArrayRef<int64_t>{r, i}));
      }
    rewriter.replaceOp(
        op,
        pack(rewriter, loc, getTypeConverter()->convertType(type), elements));
    return success();
  }
};

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

/// The fa.accumulate_tile that is the only reader of `matmul`'s product,
/// with nothing between them that orders memory (the deterministic
/// backward's fa.wait_turn must come first), or null.
AccumulateTileOp fusedAccumulation(TileMatmulOp matmul) {
  if (!matmul->hasOneUse() || matmul.getAcc())
    return nullptr;
  auto sink = dyn_cast<AccumulateTileOp>(*matmul->getUsers().begin());
  if (!sink || sink->getBlock() != matmul->getBlock())
    return nullptr;
  for (Operation *op = matmul->getNextNode(); op != sink;
       op = op->getNextNode())
    if (!isMemoryEffectFree(op))
      return nullptr;
  return sink;
}

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
                   const MmaTarget &target)
      : tile(tile), dest(rewriter.getRemappedValue(op.getDest())),
        batch(rewriter.getRemappedValue(op.getBatch())),
        head(rewriter.getRemappedValue(op.getHead())),
        row(rewriter.getRemappedValue(op.getRow())) {
    rowLimit = memref::DimOp::create(rewriter, loc, dest, 2);
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

/// acc (+)= lhs * rhs with lhs in A fragments and rhs in shared memory:
/// per k16 step, B fragments of two n8 blocks come from one ldmatrix.x4
/// (.trans when rhs is stored [k][n], as V is; plain when it is stored
/// [n][k], as K is for Q K^T), then one mma.sync per (row block, n block).
struct TileMatmulLowering : MmaPattern<TileMatmulOp> {
  TileMatmulLowering(const TypeConverter &converter, MLIRContext *ctx,
                     MmaTarget target)
      : MmaPattern(converter, ctx), target(target) {}
  MmaTarget target;
  LogicalResult
  matchAndRewrite(TileMatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    bool lhsInShared = isShared(op.getLhs());
    if (!(isOperand(op.getLhs()) || lhsInShared) || !isShared(op.getRhs()) ||
        !isMma(op.getResult()))
      return rewriter.notifyMatchFailure(op, "not mma_operand x shared");
    if (op.getTransposeLhs() && !lhsInShared)
      return op.emitOpError("the mma lowering reads a transposed left operand "
                            "from shared memory");
    if (!lhsInShared &&
        FragmentTile::warpsNOf(cast<RankedTensorType>(op.getType())) != 1)
      return op.emitOpError("a left operand in registers holds whole rows: "
                            "its product needs #fa.mma with warps_n = 1");
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op.getType());
    auto rhsType = cast<RankedTensorType>(op.getRhs().getType());
    Type elementType = rhsType.getElementType();
    bool transposed = op.getTransposeRhs();
    int64_t contraction =
        transposed ? ::fa::mma::contractionWidth(rhsType.getDimSize(1))
                   : rhsType.getDimSize(0);
    if (contraction % layout::kK != 0 ||
        resultType.getDimSize(1) % layout::kN != 0)
      return op.emitOpError("mma lowering needs a contraction that is a "
                            "multiple of 16 and an output width that is a "
                            "multiple of 8");
    int64_t kSteps = contraction / layout::kK;
    Lane lane(rewriter, loc);
    FragmentTile tile(rewriter, loc, lane, resultType);
    int64_t nBlocks = tile.accColBlocks;

    SmallVector<Value> acc;
    if (adaptor.getAcc())
      acc = unpack(rewriter, loc, adaptor.getAcc());
    else
      acc.assign(tile.rowBlocks * nBlocks * 4, f32Const(rewriter, loc, 0.0));
    // A registers: (mi, ki) -> 4 x i32, from the A fragments, or read from
    // shared memory at each k-step (the backward's Q and dO, and P^T, dS^T:
    // a warp never holds a whole operand), one ldmatrixA per block.
    SmallVector<Value> lhs;
    if (!lhsInShared)
      lhs = unpack(rewriter, loc, adaptor.getLhs());
    auto aRegisters = [&](int64_t mi, int64_t ki) {
      SmallVector<Value> regs;
      if (lhsInShared) {
        Value loaded = ldmatrixA(rewriter, loc, tile, adaptor.getLhs(), mi, ki,
                                 op.getTransposeLhs());
        for (int64_t r = 0; r < 4; ++r)
          regs.push_back(ldmatrixRegister(rewriter, loc, loaded, r));
        return regs;
      }
      int64_t base = (mi * kSteps + ki) * layout::OperandAFragment::kElements;
      for (int64_t r = 0; r < 4; ++r)
        regs.push_back(
            packPair(rewriter, loc, lhs[base + 2 * r], lhs[base + 2 * r + 1]));
      return regs;
    };

    // B fragments of n-blocks nb, nb + 1 at k-step ki (one ldmatrix), and
    // their products with every row block.
    auto multiplyBlockPair = [&](int64_t ki, int64_t nb,
                                 ArrayRef<SmallVector<Value>> a) {
      int64_t blocks = std::min<int64_t>(2, nBlocks - nb);
      Value row, col;
      // The warp's column slice starts at warpCol0 (2-d warp grids).
      auto nOffset = [&](Value laneOffset) {
        return addConst(rewriter, loc,
                        arith::AddIOp::create(rewriter, loc, tile.warpCol0,
                                              laneOffset),
                        nb * layout::kN);
      };
      if (transposed) {
        // rhs[n][k]: matrices (n lo, k lo), (n lo, k hi), (n hi, k lo), ...
        row = nOffset(arith::AddIOp::create(rewriter, loc, lane.matrixRow,
                                            lane.upperMatrices));
        col = addConst(rewriter, loc, lane.secondMatrix, ki * layout::kK);
      } else {
        // rhs[k][n]: matrices (k lo, n lo), (k hi, n lo), (k lo, n hi), ...
        row = addConst(rewriter, loc,
                       arith::AddIOp::create(rewriter, loc, lane.matrixRow,
                                             lane.secondMatrix),
                       ki * layout::kK);
        col = nOffset(lane.upperMatrices);
      }
      if (transposed && blocks == 1)
        row = nOffset(lane.matrixRow);
      Value loaded = ldmatrix(rewriter, loc, adaptor.getRhs(), row, col,
                              2 * blocks, /*transpose=*/!transposed);
      for (int64_t n = 0; n < blocks; ++n) {
        SmallVector<Value> b = {ldmatrixRegister(rewriter, loc, loaded, 2 * n),
                                ldmatrixRegister(rewriter, loc, loaded,
                                                 2 * n + 1)};
        for (int64_t mi = 0; mi < tile.rowBlocks; ++mi) {
          int64_t base = tile.accSlot(mi, nb + n, 0);
          SmallVector<Value> c(acc.begin() + base, acc.begin() + base + 4);
          SmallVector<Value> d =
              mmaSync(rewriter, loc, elementType, a[mi], b, c);
          std::copy(d.begin(), d.end(), acc.begin() + base);
        }
      }
    };

    // A product that is only added to global memory (dQ of the backward)
    // is computed two n-blocks at a time and added as soon as their
    // k-steps are done: a warp holds 8 accumulators of it instead of all.
    if (AccumulateTileOp sink = fusedAccumulation(op)) {
      SmallVector<SmallVector<Value>> a;
      for (int64_t ki = 0; ki < kSteps; ++ki)
        for (int64_t mi = 0; mi < tile.rowBlocks; ++mi)
          a.push_back(aRegisters(mi, ki));
      AccumulateTarget sinkTarget(rewriter, loc, sink, tile, target);
      for (int64_t nb = 0; nb < nBlocks; nb += 2) {
        for (int64_t ki = 0; ki < kSteps; ++ki)
          multiplyBlockPair(
              ki, nb,
              ArrayRef<SmallVector<Value>>(a).slice(ki * tile.rowBlocks,
                                                    tile.rowBlocks));
        sinkTarget.add(rewriter, loc, acc, nb, std::min<int64_t>(nb + 2, nBlocks));
      }
      rewriter.eraseOp(sink);
      rewriter.eraseOp(op);
      return success();
    }

    for (int64_t ki = 0; ki < kSteps; ++ki) {
      SmallVector<SmallVector<Value>> a;
      for (int64_t mi = 0; mi < tile.rowBlocks; ++mi)
        a.push_back(aRegisters(mi, ki));
      for (int64_t nb = 0; nb < nBlocks; nb += 2)
        multiplyBlockPair(ki, nb, a);
    }
    rewriter.replaceOp(
        op,
        pack(rewriter, loc, getTypeConverter()->convertType(resultType), acc));
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
    Value rowLimit = memref::DimOp::create(rewriter, loc, dest, 2);
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
        Value row = arith::AddIOp::create(rewriter, loc, adaptor.getRow(),
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

//===----------------------------------------------------------------------===//
// The backward's dkdv program
//===----------------------------------------------------------------------===//

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

/// Accumulator fragments -> a shared tile (P and dS of the backward, read
/// transposed by the next products): each lane stores its element pairs
/// (32 bits) at their (row, column). A barrier before (the previous
/// iteration's readers are done) and after (the whole tile is written),
/// unless only the writing lanes read the tile back.
struct AccumulatorToSharedLowering : MmaPattern<ConvertLayoutOp> {
  using MmaPattern::MmaPattern;
  LogicalResult
  matchAndRewrite(ConvertLayoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isMma(op.getSource()) || !isShared(op.getResult()))
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
    Value buffer =
        sharedBufferAt(rewriter, loc, indexConst(rewriter, loc, offset.getInt()),
                       sharedBufferType(resultType));
    SmallVector<Value> values = unpack(rewriter, loc, adaptor.getSource());
    auto pairType = VectorType::get({2}, type.getElementType());
    bool readAcrossLanes = !onlyReadByWritingLanes(op);
    if (readAcrossLanes)
      gpu::BarrierOp::create(rewriter, loc);
    tile.forEachElementPair(rewriter, loc,
                            [&](Value row, Value col, int64_t slot) {
                              Value pair = vector::FromElementsOp::create(
                                  rewriter, loc, pairType,
                                  ValueRange{values[slot], values[slot + 1]});
                              vector::StoreOp::create(rewriter, loc, pair,
                                                      buffer,
                                                      ValueRange{row, col});
                            });
    if (readAcrossLanes)
      gpu::BarrierOp::create(rewriter, loc);
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
    if (!isShared(op.getSource()) || !isMma(op.getResult()))
      return rewriter.notifyMatchFailure(op, "not shared -> mma");
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
                         MmaTarget target)
      : MmaPattern(converter, ctx), target(target) {}
  MmaTarget target;
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

} // namespace

void mlir::fa::populateMmaFragmentPatterns(const TypeConverter &typeConverter,
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
  target.addLegalOp<UnrealizedConversionCastOp>();
  addRegisterTileLegality(target, typeConverter);
  RewritePatternSet patterns(ctx);
  addStrategyPatterns(typeConverter, patterns);
  populateMmaFragmentPatterns(typeConverter, patterns);
  populateTileOpPatterns(typeConverter, patterns);
  populateRegisterTilePatterns(typeConverter, patterns);
  populateKVTileRangeLowering(patterns);
  populateQTileRangeLowering(patterns);
  populateTurnPatterns(patterns);
  scf::populateSCFStructuralTypeConversionsAndLegality(typeConverter, patterns,
                                                       target);
  return applyPartialConversion(kernel, target, std::move(patterns));
}

/// The dkdv program's loop reads K and V, which stay in place, at a few
/// dozen fixed addresses per lane: LLVM hoists each of them out of the loop
/// into a 64-bit register of its own, and ptxas spills (D = 128). Inside
/// each innermost loop that reads fragments, the thread id comes from an
/// asm statement LLVM cannot move: the addresses stay in the loop, where
/// they fold into one base register plus immediate offsets.
static void keepLaneAddressesInLoops(gpu::GPUFuncOp kernel) {
  SmallVector<scf::ForOp> loops;
  kernel.walk([&](scf::ForOp loop) {
    bool readsFragments = false, hasInnerLoop = false;
    loop.getBody()->walk([&](Operation *op) {
      readsFragments |= isa<nvgpu::LdMatrixOp>(op);
      hasInnerLoop |= isa<scf::ForOp>(op);
    });
    if (readsFragments && !hasInnerLoop)
      loops.push_back(loop);
  });
  for (scf::ForOp loop : loops) {
    SmallVector<gpu::ThreadIdOp> ids;
    loop.getBody()->walk([&](gpu::ThreadIdOp op) {
      if (op.getDimension() == gpu::Dimension::x)
        ids.push_back(op);
    });
    if (ids.empty())
      continue;
    OpBuilder b = OpBuilder::atBlockBegin(loop.getBody());
    Location loc = loop.getLoc();
    MLIRContext *ctx = b.getContext();
    auto asmOp = LLVM::InlineAsmOp::create(
        b, loc, b.getI32Type(), ValueRange{},
        b.getStringAttr("mov.u32 $0, %tid.x;"), b.getStringAttr("=r"),
        /*has_side_effects=*/b.getUnitAttr(), /*is_align_stack=*/UnitAttr(),
        LLVM::TailCallKindAttr(),
        LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
        /*operand_attrs=*/ArrayAttr());
    Value tid = arith::IndexCastUIOp::create(b, loc, b.getIndexType(),
                                             asmOp.getResult(0));
    for (gpu::ThreadIdOp id : ids) {
      id.replaceAllUsesWith(tid);
      id.erase();
    }
  }
}

LogicalResult mlir::fa::lowerMmaKernel(gpu::GPUFuncOp kernel,
                                       const MmaTarget &target) {
  // The backward's dkdv program keeps the grid order fa-tile-backward gave
  // its K/V tiles (first to last: with the causal mask the first ones visit
  // the most query tiles; the deterministic causal grid last to first).
  bool forward = false;
  kernel.walk([&](OnlineSoftmaxOp) { forward = true; });
  if (forward)
    reverseQueryTileOrder(kernel);
  if (failed(lowerTileLoads(kernel, paddedRowsLayout())))
    return failure();
  if (failed(applyFragmentConversion(
      kernel, [&](const TypeConverter &typeConverter,
                  RewritePatternSet &patterns) {
        patterns.add<SharedToOperandLowering>(typeConverter,
                                              patterns.getContext());
        patterns.add<TileMatmulLowering, AccumulateTileLowering>(
            typeConverter, patterns.getContext(), target);
      })))
    return failure();
  if (!forward)
    keepLaneAddressesInLoops(kernel);
  return success();
}
