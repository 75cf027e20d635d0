//===- SimtToGPU.cpp - Lowering of the simt strategy's programs -*- C++ -*-===//
//
// The SIMT lowering of the placement level. A register tile becomes the
// vector of the elements one thread owns (see #fa.blocked); a shared tile
// becomes a view of the block's dynamic shared memory. Each tile op becomes
// per-thread code over owned elements, unrolled at compile time, so that
// every register index is a constant.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/Simt/SimtToGPU.h"
#include "compiler/Conversion/Common/AsyncCopy.h"
#include "compiler/Conversion/Common/GpuLowering.h"
#include "compiler/Conversion/Common/TileOpLowering.h"
#include "compiler/Tiling/TileArithmetic.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fa;

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

namespace {

//===----------------------------------------------------------------------===//
// Per-thread view of a blocked tile
//===----------------------------------------------------------------------===//

/// A blocked tile's register slots as rows x columns: slot
/// i * colsPerThread + j holds row slot i, column j of the thread's grid
/// cell. Where they lie comes from the tile's register layout
/// (#fa.blocked's getRegisterLayout), as for every strategy.
struct ThreadTile {
  ThreadTile(OpBuilder &b, Location loc, RankedTensorType type)
      : thread(b, loc, type), rowsPerThread(thread.layout.numRowSlots()),
        colsPerThread(thread.layout.numSlots() / rowsPerThread) {}

  int64_t size() const { return rowsPerThread * colsPerThread; }
  int64_t slot(int64_t i, int64_t j) const { return i * colsPerThread + j; }

  /// Tile row of register row i.
  Value row(OpBuilder &b, Location loc, int64_t i) const {
    return thread.rowOfRowSlot(b, loc, i);
  }
  /// Tile column of register column j.
  Value col(OpBuilder &b, Location loc, int64_t j) const {
    return thread.col(b, loc, j);
  }
  /// The thread's column in the thread grid (0: the first of its row).
  Value threadCol(OpBuilder &b, Location loc) const {
    return thread.colBase(b, loc);
  }

  ThreadElements thread;
  int64_t rowsPerThread, colsPerThread;
};

/// An f16/bf16 value as f32 (tiles are stored in the input precision and
/// computed in f32); f32 values pass through.
Value widenToF32(OpBuilder &b, Location loc, Value value) {
  if (value.getType().isF32())
    return value;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), value);
}

/// The view of the dynamic shared memory that holds a shared tile.
Value sharedBuffer(OpBuilder &b, Location loc, Operation *producer,
                   MemRefType type) {
  auto offset = producer->getAttrOfType<IntegerAttr>(
      FADialect::getSharedOffsetAttrName());
  return sharedBufferAt(b, loc, indexConst(b, loc, offset.getInt()), type);
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

template <typename Op>
struct PlacedPattern : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  using OpAdaptor = typename Op::Adaptor;
};

/// Global loads a thread issues before it stores any of them to shared
/// memory. The copy is latency-bound (one block per SM at the default tiles,
/// so nothing else hides it): a load followed by its dependent store per step
/// exposes the global latency on every element; a batch of independent loads
/// pays it once per batch. 8 keeps the extra registers small next to the
/// live O accumulator.
static constexpr int64_t kLoadsInFlight = 8;

/// global -> shared: the block copies the tile cooperatively, consecutive
/// threads on consecutive elements (coalesced), rows past the end as zero.
/// Thread t copies elements t, t + T, t + 2T, ... (T threads). When a block
/// row of T threads covers whole tile rows (cols divides T, T divides the
/// tile) every copy of a thread is in the same column, T / cols rows apart,
/// and the copy runs in batches of up to kLoadsInFlight loads, then their
/// stores. Otherwise a thread's column changes from copy to copy, and
/// unrolling would keep one row/column pair per copy live through the K/V
/// loop (measured: spills at head dim 40); those tiles use a strided loop.
struct LoadTileLowering : PlacedPattern<LoadTileOp> {
  using PlacedPattern::PlacedPattern;
  LogicalResult
  matchAndRewrite(LoadTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto tileType = cast<RankedTensorType>(op.getType());
    if (tileType.getRank() != 2 ||
        !isa<SharedEncodingAttr>(tileType.getEncoding()))
      return rewriter.notifyMatchFailure(op, "expected a 2-d shared tile");
    auto bufferType = cast<MemRefType>(getTypeConverter()->convertType(tileType));
    auto kernel = op->getParentOfType<gpu::GPUFuncOp>();
    int64_t numThreads = kernel.getKnownBlockSizeAttr()[0];
    int64_t rows = tileType.getDimSize(0), cols = tileType.getDimSize(1);

    Value buffer = sharedBuffer(rewriter, loc, op, bufferType);
    Value source = adaptor.getSource();
    Value rowLimit =
        buildRowLimit(rewriter, loc, source, op.getSequenceEnd());
    Value firstRow = buildSourceRow(rewriter, loc, op.getSequenceFirst(),
                                    adaptor.getRow());
    // Nobody may still read the previous contents (WAR).
    gpu::BarrierOp::create(rewriter, loc);
    Value tid = gpu::ThreadIdOp::create(rewriter, loc, gpu::Dimension::x);
    Value colsV = indexConst(rewriter, loc, cols);
    // Tile element (r, c) from global row `row + r`, column c.
    auto loadElement = [&](OpBuilder &b, Location loc, Value r, Value c) {
      Value row = arith::AddIOp::create(b, loc, firstRow, r);
      return buildZeroPaddedLoad(b, loc, source, adaptor.getPages(),
                                 adaptor.getBatch(), adaptor.getHead(), row,
                                 rowLimit, c, bool(op.getSequenceEnd()));
    };

    if (numThreads % cols == 0 && (rows * cols) % numThreads == 0) {
      int64_t perThread = rows * cols / numThreads;
      int64_t rowStep = numThreads / cols;
      int64_t batch = std::min(perThread, kLoadsInFlight);
      while (perThread % batch != 0)
        --batch;
      Value firstRow = arith::DivUIOp::create(rewriter, loc, tid, colsV);
      Value col = arith::RemUIOp::create(rewriter, loc, tid, colsV);
      scf::ForOp::create(
          rewriter, loc, indexConst(rewriter, loc, 0),
          indexConst(rewriter, loc, perThread), indexConst(rewriter, loc, batch),
          ValueRange{}, [&](OpBuilder &b, Location loc, Value first, ValueRange) {
            SmallVector<std::pair<Value, Value>> loaded; // (row, value)
            for (int64_t u = 0; u < batch; ++u) {
              // Copy k = first + u: tile row firstRow + k * rowStep.
              Value k = arith::AddIOp::create(b, loc, first,
                                              indexConst(b, loc, u));
              Value r = arith::AddIOp::create(
                  b, loc, firstRow,
                  arith::MulIOp::create(b, loc, k,
                                        indexConst(b, loc, rowStep)));
              loaded.emplace_back(r, loadElement(b, loc, r, col));
            }
            for (auto [r, v] : loaded)
              memref::StoreOp::create(b, loc, v, buffer, ValueRange{r, col});
            scf::YieldOp::create(b, loc);
          });
    } else {
      scf::ForOp::create(
          rewriter, loc, tid, indexConst(rewriter, loc, rows * cols),
          indexConst(rewriter, loc, numThreads), ValueRange{},
          [&](OpBuilder &b, Location loc, Value e, ValueRange) {
            Value r = arith::DivUIOp::create(b, loc, e, colsV);
            Value c = arith::RemUIOp::create(b, loc, e, colsV);
            memref::StoreOp::create(b, loc, loadElement(b, loc, r, c), buffer,
                                    ValueRange{r, c});
            scf::YieldOp::create(b, loc);
          });
    }
    // Everyone sees the whole tile (RAW).
    gpu::BarrierOp::create(rewriter, loc);
    rewriter.replaceOp(op, buffer);
    return success();
  }
};

/// registers -> shared: each thread writes the elements it owns.
struct ConvertLayoutLowering : PlacedPattern<ConvertLayoutOp> {
  using PlacedPattern::PlacedPattern;
  LogicalResult
  matchAndRewrite(ConvertLayoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto from = cast<RankedTensorType>(op.getSource().getType());
    auto to = cast<RankedTensorType>(op.getType());
    if (!isa<BlockedEncodingAttr>(from.getEncoding()) ||
        !isa<SharedEncodingAttr>(to.getEncoding()) || from.getRank() != 2)
      return rewriter.notifyMatchFailure(op, "only 2-d registers -> shared");
    auto bufferType = cast<MemRefType>(getTypeConverter()->convertType(to));
    Value buffer = sharedBuffer(rewriter, loc, op, bufferType);
    ThreadTile tile(rewriter, loc, from);
    SmallVector<Value> values = unpack(rewriter, loc, adaptor.getSource());
    gpu::BarrierOp::create(rewriter, loc);
    for (int64_t i = 0; i < tile.rowsPerThread; ++i)
      for (int64_t j = 0; j < tile.colsPerThread; ++j)
        memref::StoreOp::create(
            rewriter, loc, values[tile.slot(i, j)], buffer,
            ValueRange{tile.row(rewriter, loc, i), tile.col(rewriter, loc, j)});
    gpu::BarrierOp::create(rewriter, loc);
    rewriter.replaceOp(op, buffer);
    return success();
  }
};

/// For each element a thread owns of a register tile (`values`, in register
/// order) whose row `rowStart` + r of dest lies before `limit` (null: the
/// end of `dest`'s rows) (and
/// where `guard`, if given, holds): `body` with the element and its indices
/// in dest[batch, head] (per-row vectors: no column index).
void forEachOwnedValidElement(
    ConversionPatternRewriter &rewriter, Location loc, const ThreadTile &tile,
    RankedTensorType tileType, ArrayRef<Value> values, Value dest, Value batch,
    Value head, Value rowStart, Value limit, Value guard,
    function_ref<void(OpBuilder &, Location, Value, ValueRange)> body) {
  Value rowLimit = buildRowLimit(rewriter, loc, dest, limit);
  for (int64_t i = 0; i < tile.rowsPerThread; ++i) {
    Value row = arith::AddIOp::create(rewriter, loc, rowStart,
                                      tile.row(rewriter, loc, i));
    Value valid = arith::CmpIOp::create(rewriter, loc,
                                        arith::CmpIPredicate::ult, row,
                                        rowLimit);
    if (guard)
      valid = arith::AndIOp::create(rewriter, loc, valid, guard);
    auto ifValid = scf::IfOp::create(rewriter, loc, valid);
    OpBuilder::InsertionGuard insertion(rewriter);
    rewriter.setInsertionPointToStart(&ifValid.getThenRegion().front());
    for (int64_t j = 0; j < tile.colsPerThread; ++j) {
      SmallVector<Value> indices = {batch, head, row};
      if (tileType.getRank() == 2)
        indices.push_back(tile.col(rewriter, loc, j));
      body(rewriter, loc, values[tile.slot(i, j)], indices);
    }
  }
}

/// registers -> global: each thread stores its elements of the valid rows;
/// a per-row value is stored by the first thread of its row.
struct StoreTileLowering : PlacedPattern<StoreTileOp> {
  using PlacedPattern::PlacedPattern;
  LogicalResult
  matchAndRewrite(StoreTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto tileType = cast<RankedTensorType>(op.getTile().getType());
    if (!isa<BlockedEncodingAttr>(tileType.getEncoding()))
      return rewriter.notifyMatchFailure(op, "expected a register tile");
    ThreadTile tile(rewriter, loc, tileType);
    SmallVector<Value> values = unpack(rewriter, loc, adaptor.getTile());
    Value dest = adaptor.getDest();
    Value firstInRow;
    if (tileType.getRank() == 1)
      firstInRow = arith::CmpIOp::create(rewriter, loc,
                                         arith::CmpIPredicate::eq,
                                         tile.threadCol(rewriter, loc),
                                         indexConst(rewriter, loc, 0));
    forEachOwnedValidElement(
        rewriter, loc, tile, tileType, values, dest, adaptor.getBatch(),
        adaptor.getHead(),
        buildSourceRow(rewriter, loc, op.getSequenceFirst(), adaptor.getRow()),
        op.getSequenceEnd(), firstInRow,
        [&](OpBuilder &b, Location loc, Value v, ValueRange indices) {
          memref::StoreOp::create(b, loc, v, dest, indices);
        });
    rewriter.eraseOp(op);
    return success();
  }
};

/// Elements a thread reads at once along the contraction dimension when a
/// shared row allows it (16-byte ld.shared.v4).
static constexpr int64_t kVectorWidth = 4;

/// Whether rows of `buffer` can be read `kVectorWidth` at a time from every
/// multiple of `kVectorWidth`: the row pitch keeps 16-byte alignment.
static bool hasVectorRows(MemRefType buffer) {
  return buffer.getRank() == 2 && buffer.getDimSize(1) % kVectorWidth == 0;
}

/// shared x shared (+ registers) -> registers. Each thread accumulates its
/// own outputs over the contraction dimension: per step it reads one lhs
/// value per owned row and one rhs value per owned column (register
/// blocking) and does rows x cols FMAs. For Q K^T, whose operands are both
/// read along their rows, a step covers 4 contraction indices with one
/// 16-byte load per Q row and per K row where the shared rows allow,
/// accumulating in the same order as the scalar loop. (Vectorizing P V's
/// P rows too measured 7% faster at D=128 on the H200 but made ptxas spill
/// in small configs; docs/benchmarks.md.)
struct TileMatmulLowering : PlacedPattern<TileMatmulOp> {
  using PlacedPattern::PlacedPattern;
  LogicalResult
  matchAndRewrite(TileMatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto lhsType = cast<RankedTensorType>(op.getLhs().getType());
    auto resultType = cast<RankedTensorType>(op.getType());
    if (!isa<SharedEncodingAttr>(lhsType.getEncoding()) ||
        !isa<SharedEncodingAttr>(
            cast<RankedTensorType>(op.getRhs().getType()).getEncoding()))
      return rewriter.notifyMatchFailure(op, "operands must be in shared memory");
    ThreadTile tile(rewriter, loc, resultType);
    Type vectorType = getTypeConverter()->convertType(resultType);
    SmallVector<Value> init =
        adaptor.getAcc()
            ? unpack(rewriter, loc, adaptor.getAcc())
            : SmallVector<Value>(tile.size(), f32Const(rewriter, loc, 0.0));
    SmallVector<Value> rows, cols;
    for (int64_t i = 0; i < tile.rowsPerThread; ++i)
      rows.push_back(tile.row(rewriter, loc, i));
    for (int64_t j = 0; j < tile.colsPerThread; ++j)
      cols.push_back(tile.col(rewriter, loc, j));
    bool transposed = op.getTransposeRhs();
    // The backward's P^T dO and dS^T Q read the lhs down its columns.
    bool transposedLhs = op.getTransposeLhs();
    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
    auto lhsBuffer = cast<MemRefType>(lhs.getType());
    auto rhsBuffer = cast<MemRefType>(rhs.getType());
    int64_t contraction = lhsType.getDimSize(transposedLhs ? 0 : 1);
    int64_t step = !transposedLhs && transposed &&
                           contraction % kVectorWidth == 0 &&
                           hasVectorRows(lhsBuffer)
                       ? kVectorWidth
                       : 1;
    bool vectorRhs = step > 1 && transposed && hasVectorRows(rhsBuffer);

    // The `step` values of one row starting at column k (one vector load
    // when step > 1: 16 bytes of f32, 8 of f16/bf16) as f32 scalars: 16-bit
    // operands are widened, the products and sums stay in f32.
    auto loadRow = [&](OpBuilder &b, Location loc, Value buffer, Value row,
                       Value k) -> SmallVector<Value> {
      if (step == 1)
        return {widenToF32(
            b, loc, memref::LoadOp::create(b, loc, buffer, ValueRange{row, k}))};
      Type element = cast<MemRefType>(buffer.getType()).getElementType();
      auto vec = VectorType::get({kVectorWidth}, element);
      Value v = vector::LoadOp::create(
          b, loc, vec, buffer, ValueRange{row, k},
          /*nontemporal=*/false,
          llvm::MaybeAlign(kVectorWidth * element.getIntOrFloatBitWidth() / 8));
      SmallVector<Value> values = unpack(b, loc, v);
      for (Value &value : values)
        value = widenToF32(b, loc, value);
      return values;
    };
    auto loop = scf::ForOp::create(
        rewriter, loc, indexConst(rewriter, loc, 0),
        indexConst(rewriter, loc, contraction), indexConst(rewriter, loc, step),
        init, [&](OpBuilder &b, Location loc, Value k, ValueRange acc) {
          // a[i][u] = lhs[row_i][k + u]; bv[j][u] = rhs at (k + u, col_j)
          SmallVector<SmallVector<Value>> a, bv;
          for (Value r : rows)
            a.push_back(transposedLhs ? loadRow(b, loc, lhs, k, r)
                                      : loadRow(b, loc, lhs, r, k));
          for (Value c : cols) {
            if (vectorRhs) {
              bv.push_back(loadRow(b, loc, rhs, c, k));
              continue;
            }
            SmallVector<Value> column;
            for (int64_t u = 0; u < step; ++u) {
              Value ku = u ? arith::AddIOp::create(b, loc, k,
                                                   indexConst(b, loc, u))
                                 .getResult()
                           : k;
              column.push_back(widenToF32(
                  b, loc,
                  memref::LoadOp::create(b, loc, rhs,
                                         transposed ? ValueRange{c, ku}
                                                    : ValueRange{ku, c})));
            }
            bv.push_back(column);
          }
          SmallVector<Value> next(acc.begin(), acc.end());
          for (int64_t u = 0; u < step; ++u)
            for (int64_t i = 0; i < tile.rowsPerThread; ++i)
              for (int64_t j = 0; j < tile.colsPerThread; ++j) {
                Value &sum = next[tile.slot(i, j)];
                sum = math::FmaOp::create(b, loc, a[i][u], bv[j][u], sum);
              }
          scf::YieldOp::create(b, loc, next);
        });
    rewriter.replaceOp(op, pack(rewriter, loc, vectorType, loop.getResults()));
    return success();
  }
};

/// D = rowsum(dO * O) from two shared tiles: each thread sums the columns
/// it owns of its rows, then a butterfly over the lanes of the row.
struct RowDotLowering : PlacedPattern<RowDotOp> {
  using PlacedPattern::PlacedPattern;
  LogicalResult
  matchAndRewrite(RowDotOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op.getType());
    auto operandType = cast<RankedTensorType>(op.getLhs().getType());
    if (!isa<SharedEncodingAttr>(operandType.getEncoding()) ||
        !isa<BlockedEncodingAttr>(resultType.getEncoding()))
      return rewriter.notifyMatchFailure(op, "expected shared operands");
    // The thread grid of the result, spread over the operands' columns.
    auto threadGrid = RankedTensorType::get(
        operandType.getShape(), rewriter.getF32Type(), resultType.getEncoding());
    ThreadTile tile(rewriter, loc, threadGrid);
    RegisterLayout layout = *registerLayoutOf(threadGrid);
    SmallVector<Value> sums;
    for (int64_t i = 0; i < tile.rowsPerThread; ++i) {
      Value row = tile.row(rewriter, loc, i);
      Value partial = f32Const(rewriter, loc, 0.0);
      for (int64_t j = 0; j < tile.colsPerThread; ++j) {
        Value col = tile.col(rewriter, loc, j);
        auto load = [&](Value buffer) {
          return widenToF32(rewriter, loc,
                            memref::LoadOp::create(rewriter, loc, buffer,
                                                   ValueRange{row, col}));
        };
        partial = math::FmaOp::create(rewriter, loc, load(adaptor.getLhs()),
                                      load(adaptor.getRhs()), partial);
      }
      sums.push_back(rowAllReduce(
          rewriter, loc, layout, partial, [&](Value a, Value b) {
            return arith::AddFOp::create(rewriter, loc, a, b).getResult();
          }));
    }
    rewriter.replaceOp(
        op, pack(rewriter, loc, getTypeConverter()->convertType(resultType),
                 sums));
    return success();
  }
};

/// registers -> global, added: each thread adds the elements it owns of the
/// valid rows with atomic adds (other K/V tiles' programs add to the same
/// rows concurrently).
struct AccumulateTileLowering : PlacedPattern<AccumulateTileOp> {
  using PlacedPattern::PlacedPattern;
  LogicalResult
  matchAndRewrite(AccumulateTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto tileType = cast<RankedTensorType>(op.getTile().getType());
    if (!isa<BlockedEncodingAttr>(tileType.getEncoding()))
      return rewriter.notifyMatchFailure(op, "expected a register tile");
    ThreadTile tile(rewriter, loc, tileType);
    SmallVector<Value> values = unpack(rewriter, loc, adaptor.getTile());
    Value dest = adaptor.getDest();
    forEachOwnedValidElement(
        rewriter, loc, tile, tileType, values, dest, adaptor.getBatch(),
        adaptor.getHead(),
        buildSourceRow(rewriter, loc, op.getSequenceFirst(), adaptor.getRow()),
        op.getSequenceEnd(), /*guard=*/Value(),
        [&](OpBuilder &b, Location loc, Value v, ValueRange indices) {
          memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addf, v,
                                      dest, indices);
        });
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

LogicalResult mlir::fa::lowerSimtKernels(ArrayRef<Operation *> kernels) {
  if (kernels.empty())
    return success();
  // Tiles the placement copies in 16-byte chunks (fa.copy_chunks) take the
  // tensor-core strategies' cp.async copies; the rest are copied element
  // by element below.
  for (Operation *kernel : kernels)
    if (failed(lowerChunkedTileLoads(
            cast<gpu::GPUFuncOp>(kernel),
            paddedRowsLayout([](int64_t columns) { return columns; },
                             "fa-place-simt"))))
      return failure();
  MLIRContext *ctx = kernels.front()->getContext();
  PlacedTileTypeConverter typeConverter;
  ConversionTarget target(*ctx);
  target.addIllegalDialect<FADialect>();
  target.addLegalDialect<arith::ArithDialect, gpu::GPUDialect,
                         math::MathDialect, memref::MemRefDialect,
                         NVVM::NVVMDialect, scf::SCFDialect,
                         vector::VectorDialect>();
  addRegisterTileLegality(target, typeConverter);
  RewritePatternSet patterns(ctx);
  patterns.add<LoadTileLowering, ConvertLayoutLowering, StoreTileLowering,
               TileMatmulLowering, RowDotLowering, AccumulateTileLowering>(
      typeConverter, ctx);
  populateTileOpPatterns(typeConverter, patterns);
  populateRegisterTilePatterns(typeConverter, patterns);
  populateTileRangeLowering(patterns);
  populateTurnPatterns(patterns);
  scf::populateSCFStructuralTypeConversionsAndLegality(typeConverter, patterns,
                                                       target);
  return applyPartialConversion(kernels, target, std::move(patterns));
}
