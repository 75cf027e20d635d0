//===- MmaToGPU.cpp - Lowering of the mma strategy's programs ---*- C++ -*-===//
//
// Two steps on an outlined kernel placed by fa-place-mma:
//
// 1. Copies. Every fa.load_tile becomes 16-byte cp.async copies into its
//    shared buffer with padded rows; the K/V loop's loads use a ring of
//    `stages` slots (compiler/Conversion/Common/AsyncCopy.h).
// 2. Fragments. The fragment-level conversion (Common/Fragments.h) with
//    this strategy's patterns: ldmatrix for operands in shared memory,
//    nvvm.mma.sync m16n8k16, and dQ added to global memory with vector
//    reductions (fa.accumulate_tile).
//
// mma.sync is emitted as nvvm.mma.sync rather than nvgpu.mma.sync: the
// upstream nvgpu lowering cannot type bf16 operands (it fails with "failed
// to deduce operand PTX types"). ldmatrix and cp.async use nvgpu.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/Mma/MmaToGPU.h"
#include "compiler/Conversion/Common/AsyncCopy.h"
#include "compiler/Conversion/Common/Fragments.h"
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
// Step 2: fragments (step 1, the copies into padded rows: AsyncCopy.h)
//===----------------------------------------------------------------------===//

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

/// acc (+)= lhs * rhs with lhs in A fragments and rhs in shared memory:
/// per k16 step, B fragments of two n8 blocks come from one ldmatrix.x4
/// (.trans when rhs is stored [k][n], as V is; plain when it is stored
/// [n][k], as K is for Q K^T), then one mma.sync per (row block, n block).
struct TileMatmulLowering : MmaPattern<TileMatmulOp> {
  TileMatmulLowering(const TypeConverter &converter, MLIRContext *ctx,
                     FragmentTarget target)
      : MmaPattern(converter, ctx), target(target) {}
  FragmentTarget target;
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

//===----------------------------------------------------------------------===//
// The backward's dkdv program
//===----------------------------------------------------------------------===//

} // namespace

LogicalResult mlir::fa::lowerMmaKernel(gpu::GPUFuncOp kernel,
                                       const FragmentTarget &target) {
  // The backward's dkdv program keeps the grid order fa-tile-backward gave
  // its K/V tiles (first to last: with the causal mask the first ones visit
  // the most query tiles; the deterministic causal grid last to first).
  bool forward = isForwardProgram(kernel);
  if (forward)
    reverseQueryTileOrder(kernel);
  if (failed(
          lowerTileLoads(kernel, paddedRowsLayout(::fa::mma::contractionWidth,
                                                  "fa-place-mma"))))
    return failure();
  if (failed(applyFragmentConversion(
      kernel, [&](const TypeConverter &typeConverter,
                  RewritePatternSet &patterns) {
        patterns.add<SharedToOperandLowering>(typeConverter,
                                              patterns.getContext());
        patterns.add<TileMatmulLowering>(typeConverter,
                                         patterns.getContext(), target);
        populateAccumulatePatterns(typeConverter, patterns, target);
      })))
    return failure();
  // The dkdv program's loop reads K and V, which stay in place, at a few
  // dozen fixed addresses per lane (ldmatrix): pinned in the loop, they
  // fold into one base register plus immediate offsets (measured: 100
  // bytes of spills at D = 128 otherwise).
  if (!forward)
    keepLaneAddressesInLoops(kernel, [](Operation *op) {
      return isa<nvgpu::LdMatrixOp>(op);
    });
  return success();
}
