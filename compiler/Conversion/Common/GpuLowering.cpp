//===- GpuLowering.cpp - Helpers of every GPU lowering ----------*- C++ -*-===//
#include "compiler/Conversion/Common/GpuLowering.h"
#include "lib/Exp2Polynomial.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fa;

PlacedTileTypeConverter::PlacedTileTypeConverter() {
  addConversion([](Type type) { return type; });
  addConversion([](RankedTensorType type) -> std::optional<Type> {
    auto encoding =
        dyn_cast_or_null<TileEncodingInterface>(type.getEncoding());
    if (!encoding)
      return std::nullopt; // an unplaced tile cannot be lowered
    if (encoding.isShared())
      return sharedBufferType(type);
    // 8-bit floats as bytes: LLVM has no 8-bit float type.
    Type element = type.getElementType();
    if (isa<Float8E4M3FNType>(element))
      element = IntegerType::get(type.getContext(), 8);
    return VectorType::get({encoding.getRegistersPerThread(type.getShape())},
                           element);
  });
}

SmallVector<Value> mlir::fa::swizzledIndices(OpBuilder &b, Location loc,
                                             Value row, Value col,
                                             int64_t blockColumns,
                                             int64_t rowBytes,
                                             bool chunkStart) {
  int64_t chunks = rowBytes / 16;
  int64_t chunkElements = blockColumns / chunks;
  Value block =
      arith::DivUIOp::create(b, loc, col, indexConst(b, loc, blockColumns));
  Value chunk = arith::DivUIOp::create(
      b, loc,
      arith::RemUIOp::create(b, loc, col, indexConst(b, loc, blockColumns)),
      indexConst(b, loc, chunkElements));
  // The row's xor: address bits 7.. of its start, below the atom.
  Value phase = row;
  if (rowBytes != 128)
    phase =
        arith::DivUIOp::create(b, loc, row, indexConst(b, loc, 128 / rowBytes));
  Value swizzled = arith::XOrIOp::create(
      b, loc, chunk,
      arith::RemUIOp::create(b, loc, phase, indexConst(b, loc, chunks)));
  Value column =
      arith::MulIOp::create(b, loc, swizzled, indexConst(b, loc, chunkElements));
  if (!chunkStart)
    column = arith::AddIOp::create(
        b, loc, column,
        arith::RemUIOp::create(b, loc, col, indexConst(b, loc, chunkElements)));
  return {block, row, column};
}

SmallVector<Value> mlir::fa::sharedElementIndices(OpBuilder &b, Location loc,
                                                  RankedTensorType type,
                                                  Value row, Value col) {
  if (auto swizzled = dyn_cast<SwizzledSharedEncodingAttr>(type.getEncoding()))
    return swizzledIndices(b, loc, row, col,
                           swizzled.getBlockColumns(type.getElementType()),
                           swizzled.getBytes());
  return {row, col};
}

void mlir::fa::keepLaneAddressesInLoops(
    Operation *kernel, function_ref<bool(Operation *)> marks) {
  SmallVector<scf::ForOp> loops;
  kernel->walk([&](scf::ForOp loop) {
    bool marked = false, hasInnerLoop = false;
    loop.getBody()->walk([&](Operation *op) {
      marked |= marks(op);
      hasInnerLoop |= isa<scf::ForOp>(op);
    });
    if (marked && !hasInnerLoop)
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

SmallVector<Value> mlir::fa::unpack(OpBuilder &b, Location loc, Value vector) {
  int64_t n = cast<VectorType>(vector.getType()).getNumElements();
  SmallVector<Value> elements;
  for (int64_t i = 0; i < n; ++i)
    elements.push_back(vector::ExtractOp::create(b, loc, vector, i));
  return elements;
}

Value mlir::fa::pack(OpBuilder &b, Location loc, Type type,
                     ValueRange elements) {
  return vector::FromElementsOp::create(b, loc, cast<VectorType>(type),
                                        elements);
}

SoftmaxConstants::SoftmaxConstants(OpBuilder &b, Location loc, double scale,
                                   Value factor)
    : scaleLog2e(f32Const(b, loc, scale * M_LOG2E)),
      scale(f32Const(b, loc, scale)), log2e(f32Const(b, loc, M_LOG2E)),
      negInf(f32Const(b, loc, -INFINITY)), zero(f32Const(b, loc, 0.0)) {
  if (factor) {
    scaleLog2e = arith::MulFOp::create(b, loc, scaleLog2e, factor);
    this->scale = arith::MulFOp::create(b, loc, this->scale, factor);
  }
}

Value mlir::fa::buildExp2OnFma(OpBuilder &b, Location loc, Value x) {
  namespace poly = ::fa::exp2poly;
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  // t = x + 1.5 * 2^23 rounded down (add.rm, NVVM's pure intrinsic: MLIR's
  // arith has no rounding mode); its last bits hold floor(x).
  Value t = LLVM::CallIntrinsicOp::create(
                b, loc, f32, b.getStringAttr("llvm.nvvm.add.rm.f"),
                ValueRange{x, f32Const(b, loc, poly::kRoundingBias)})
                .getResult(0);
  Value floor =
      arith::SubFOp::create(b, loc, t, f32Const(b, loc, poly::kRoundingBias));
  Value f = arith::SubFOp::create(b, loc, x, floor);
  Value p = math::FmaOp::create(b, loc, f32Const(b, loc, poly::kC3), f,
                                f32Const(b, loc, poly::kC2));
  p = math::FmaOp::create(b, loc, p, f, f32Const(b, loc, poly::kC1));
  p = math::FmaOp::create(b, loc, p, f, f32Const(b, loc, 1.0));
  // (t's bits) << 23 is floor(x) << 23 (1.5 * 2^23 ends in nine zero bits),
  // plus 1.0's bits: 2^floor(x), which scales p exactly (an FMUL, which
  // keeps a NaN a NaN).
  Value shifted = arith::ShLIOp::create(
      b, loc, arith::BitcastOp::create(b, loc, i32, t), i32Const(b, loc, 23));
  Value scale = arith::BitcastOp::create(
      b, loc, f32,
      arith::AddIOp::create(b, loc, shifted, i32Const(b, loc, poly::kOneBits)));
  Value power = arith::MulFOp::create(b, loc, p, scale);
  Value tiny = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x,
                                     f32Const(b, loc, poly::kLowest));
  return arith::SelectOp::create(b, loc, tiny, f32Const(b, loc, 0.0), power);
}

OnlineSoftmaxRow mlir::fa::buildOnlineSoftmaxRow(
    OpBuilder &b, Location loc, const SoftmaxConstants &c,
    ArrayRef<Value> scores, Value runningMax, Value runningSum,
    function_ref<Value(Value, function_ref<Value(Value, Value)>)> rowAllReduce,
    double probsScale, int64_t exp2OnFmaEvery, bool exactUnitCorrection) {
  auto max = [&](Value x, Value y) -> Value {
    return arith::MaximumFOp::create(b, loc, x, y);
  };
  auto add = [&](Value x, Value y) -> Value {
    return arith::AddFOp::create(b, loc, x, y);
  };
  OnlineSoftmaxRow row;
  // m_new = max(m, scale * rowmax(s))
  Value rowMax = scores.front();
  for (Value s : scores.drop_front())
    rowMax = max(rowMax, s);
  rowMax = rowAllReduce(rowMax, max);
  row.newMax = max(runningMax, arith::MulFOp::create(b, loc, rowMax, c.scale));
  // A row that has seen only -inf uses 0 as the base: p = alpha = 0.
  Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                      row.newMax, c.negInf);
  Value base = arith::SelectOp::create(b, loc, empty, c.zero, row.newMax);
  Value baseLog2 = arith::MulFOp::create(b, loc, base, c.log2e);
  Value negBaseLog2 = arith::NegFOp::create(b, loc, baseLog2);
  // p = exp2(s * c - m_new * log2 e), times probs_scale: its log2 joins
  // the row's term, and the row sum divides it out.
  Value probsBias = negBaseLog2;
  if (probsScale != 1.0)
    probsBias = arith::AddFOp::create(b, loc, negBaseLog2,
                                      f32Const(b, loc, std::log2(probsScale)));
  Value rowSum;
  for (auto [i, s] : llvm::enumerate(scores)) {
    Value x = math::FmaOp::create(b, loc, s, c.scaleLog2e, probsBias);
    bool onFma =
        exp2OnFmaEvery > 0 && int64_t(i) % exp2OnFmaEvery == exp2OnFmaEvery - 1;
    Value p = onFma ? buildExp2OnFma(b, loc, x)
                    : math::Exp2Op::create(b, loc, x).getResult();
    row.probs.push_back(p);
    rowSum = rowSum ? add(rowSum, p) : p;
  }
  rowSum = rowAllReduce(rowSum, add);
  if (probsScale != 1.0)
    rowSum = arith::MulFOp::create(b, loc, rowSum,
                                   f32Const(b, loc, 1.0 / probsScale));
  // alpha = exp2(m * log2 e - m_new * log2 e) (one FMA, or exactly 1 where
  // m = m_new: exp2((m - m_new) log2 e)); l_new = alpha * l + rowsum
  Value alphaLog2 =
      exactUnitCorrection
          ? arith::MulFOp::create(
                b, loc, arith::SubFOp::create(b, loc, runningMax, base),
                c.log2e)
                .getResult()
          : math::FmaOp::create(b, loc, runningMax, c.log2e, negBaseLog2)
                .getResult();
  row.alpha = math::Exp2Op::create(b, loc, alphaLog2);
  row.newSum = math::FmaOp::create(b, loc, row.alpha, runningSum, rowSum);
  return row;
}

Value mlir::fa::probsBaseLog2(OpBuilder &b, Location loc,
                              const SoftmaxConstants &c, Value lse) {
  Value empty =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, lse, c.negInf);
  Value base = arith::SelectOp::create(b, loc, empty, c.zero, lse);
  return arith::MulFOp::create(b, loc, base, c.log2e);
}

Value mlir::fa::recomputedProb(OpBuilder &b, Location loc,
                               const SoftmaxConstants &c, Value score,
                               Value baseLog2) {
  Value x = math::FmaOp::create(b, loc, score, c.scaleLog2e,
                                arith::NegFOp::create(b, loc, baseLog2));
  return math::Exp2Op::create(b, loc, x);
}

namespace {

/// Splat tile constants (the initial softmax state) -> vector constants.
struct ConstantLowering : OpConversionPattern<arith::ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(arith::ConstantOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto dense = dyn_cast<SplatElementsAttr>(op.getValue());
    Type type = getTypeConverter()->convertType(op.getType());
    if (!dense || !type || type == op.getType())
      return failure();
    auto vectorType = cast<VectorType>(type);
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(
        op, vectorType,
        SplatElementsAttr::get(vectorType, dense.getSplatValue<Attribute>()));
    return success();
  }
};

/// An element-wise op on register tiles of one encoding (the threads own
/// the same elements of each): precision casts (P and O rounded to the
/// input type before P V and the store) and adds and subtracts (P's two
/// 16-bit halves in the mma backward) are the same op on each owned element.
template <typename ElementwiseOp>
struct RegisterElementwiseLowering : OpConversionPattern<ElementwiseOp> {
  using OpConversionPattern<ElementwiseOp>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ElementwiseOp op, typename ElementwiseOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type type = this->getTypeConverter()->convertType(op.getType());
    if (!type || type == op.getType() || !isa<VectorType>(type))
      return rewriter.notifyMatchFailure(op, "not a register tile");
    rewriter.replaceOpWithNewOp<ElementwiseOp>(op, type,
                                               adaptor.getOperands());
    return success();
  }
};

/// f32 register tile -> f8E4M3FN (bytes): pairs of elements through
/// cvt.rn.satfinite.e4m3x2.f32 (sm_89+; no LLVM op narrows to 8-bit
/// floats), which puts its first operand in the high byte: element 2i in
/// byte 0, element 2i + 1 in byte 1. Out-of-range values saturate to
/// +-448, NaN stays NaN (the CPU lowering's fa-expand-float8-casts rounds
/// alike). Four elements at a time where the tile holds multiples of four:
/// two conversions joined into one 32-bit value (elements 4i .. 4i + 3 in
/// bytes 0 .. 3), so that a consumer which packs them into registers again
/// (the A registers of P V) starts from whole registers; built from bytes,
/// LLVM reassembled each register with three byte permutes.
struct Float8TruncLowering : OpConversionPattern<arith::TruncFOp> {
  Float8TruncLowering(const TypeConverter &typeConverter, MLIRContext *ctx)
      : OpConversionPattern(typeConverter, ctx, /*benefit=*/2) {}
  LogicalResult
  matchAndRewrite(arith::TruncFOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto resultType = dyn_cast<RankedTensorType>(op.getType());
    auto type = dyn_cast_or_null<VectorType>(
        getTypeConverter()->convertType(op.getType()));
    if (!resultType || !type ||
        !isa<Float8E4M3FNType>(resultType.getElementType()))
      return rewriter.notifyMatchFailure(op, "not an 8-bit register tile");
    Location loc = op.getLoc();
    SmallVector<Value> in = unpack(rewriter, loc, adaptor.getIn());
    if (in.size() % 2 != 0)
      return op.emitOpError("an 8-bit register tile holds pairs of elements "
                            "per thread, got ")
             << in.size();
    int64_t group = in.size() % 4 == 0 ? 4 : 2;
    Type word = rewriter.getIntegerType(8 * group);
    StringRef asmText = group == 4 ? "{\n.reg .b16 lo, hi;\n"
                                     "cvt.rn.satfinite.e4m3x2.f32 lo, $1, $2;\n"
                                     "cvt.rn.satfinite.e4m3x2.f32 hi, $3, $4;\n"
                                     "mov.b32 $0, {lo, hi};\n}"
                                   : "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;";
    StringRef constraints = group == 4 ? "=r,f,f,f,f" : "=h,f,f";
    auto bytesType = VectorType::get({group}, rewriter.getI8Type());
    SmallVector<Value> bytes;
    for (size_t i = 0; i < in.size(); i += group) {
      // Each pair's higher element first (the high byte).
      SmallVector<Value> operands;
      for (int64_t pair = 0; pair < group / 2; ++pair)
        operands.append({in[i + 2 * pair + 1], in[i + 2 * pair]});
      auto cvt = LLVM::InlineAsmOp::create(
          rewriter, loc, word, operands, rewriter.getStringAttr(asmText),
          rewriter.getStringAttr(constraints),
          /*has_side_effects=*/UnitAttr(),
          /*is_align_stack=*/UnitAttr(), LLVM::TailCallKindAttr(),
          LLVM::AsmDialectAttr::get(rewriter.getContext(),
                                    LLVM::AsmDialect::AD_ATT),
          /*operand_attrs=*/ArrayAttr());
      Value packed =
          LLVM::BitcastOp::create(rewriter, loc, bytesType, cvt.getResult(0));
      for (int64_t b = 0; b < group; ++b)
        bytes.push_back(LLVM::ExtractElementOp::create(
            rewriter, loc, packed,
            LLVM::ConstantOp::create(rewriter, loc, rewriter.getI32Type(),
                                     rewriter.getI32IntegerAttr(b))));
    }
    rewriter.replaceOp(op, pack(rewriter, loc, type, bytes));
    return success();
  }
};

} // namespace

void mlir::fa::populateRegisterTilePatterns(const TypeConverter &typeConverter,
                                            RewritePatternSet &patterns) {
  patterns.add<Float8TruncLowering>(typeConverter, patterns.getContext());
  patterns.add<ConstantLowering, RegisterElementwiseLowering<arith::TruncFOp>,
               RegisterElementwiseLowering<arith::ExtFOp>,
               RegisterElementwiseLowering<arith::AddFOp>,
               RegisterElementwiseLowering<arith::SubFOp>>(
      typeConverter, patterns.getContext());
}

void mlir::fa::addRegisterTileLegality(ConversionTarget &target,
                                       const TypeConverter &typeConverter) {
  target.addDynamicallyLegalOp<arith::ConstantOp, arith::TruncFOp,
                               arith::ExtFOp, arith::AddFOp, arith::SubFOp>(
      [&typeConverter](Operation *op) { return typeConverter.isLegal(op); });
}

/// Runs the query tiles last to first: with the causal mask the last tiles
/// see the most keys, and starting the longest programs first shortens the
/// tail of the last wave (without a mask all programs are alike).
void mlir::fa::reverseQueryTileOrder(gpu::GPUFuncOp kernel) {
  SmallVector<gpu::BlockIdOp> ids;
  kernel.walk([&](gpu::BlockIdOp op) {
    if (op.getDimension() == gpu::Dimension::x)
      ids.push_back(op);
  });
  for (gpu::BlockIdOp id : ids) {
    OpBuilder b(id->getBlock(), std::next(Block::iterator(id)));
    Location loc = id.getLoc();
    Value tiles = gpu::GridDimOp::create(b, loc, gpu::Dimension::x);
    Value last = arith::SubIOp::create(b, loc, tiles, indexConst(b, loc, 1));
    Value reversed = arith::SubIOp::create(b, loc, last, id);
    id.getResult().replaceAllUsesExcept(reversed, reversed.getDefiningOp());
  }
}

//===----------------------------------------------------------------------===//
// The deterministic backward's turns (any strategy: one thread per block
// waits and hands on)
//===----------------------------------------------------------------------===//

namespace {

/// The thread that speaks for the threads taking a turn: the block's
/// thread 0, or (`by_warp`) the executing warp's lane 0.
Value isTurnSpeaker(OpBuilder &b, Location loc, bool byWarp) {
  if (byWarp)
    return isFirstOfThreadGroup(b, loc, 32);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                               indexConst(b, loc, 0));
}

/// The threads taking a turn meet: the block's compute threads, or
/// (`by_warp`) the executing warp.
void createTurnBarrier(OpBuilder &b, Location loc, Operation *op, bool byWarp) {
  if (!byWarp) {
    createComputeBarrier(b, loc, op);
    return;
  }
  NVVM::SyncWarpOp::create(b, loc, i32Const(b, loc, -1));
}

/// fa.wait_turn: thread 0 (by_warp: the warp's lane 0) spins on the
/// counter (an atomic read: `or 0`) until it holds the turn, then fences so
/// that the later reads see what the previous programs added; the block
/// (by_warp: the warp) waits for it.
struct WaitTurnLowering : OpConversionPattern<WaitTurnOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(WaitTurnOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> indices = {adaptor.getBatch(), adaptor.getHead(),
                                  adaptor.getTile()};
    bool byWarp = op.getByWarp();
    OpBuilder::InsertionGuard taken(rewriter);
    enterTakenBranch(rewriter, loc, adaptor.getTaken());
    auto ifFirst =
        scf::IfOp::create(rewriter, loc, isTurnSpeaker(rewriter, loc, byWarp));
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(&ifFirst.getThenRegion().front());
      Value turn = arith::IndexCastOp::create(
          rewriter, loc, rewriter.getI32Type(), adaptor.getTurn());
      Value zero = arith::ConstantOp::create(rewriter, loc,
                                             rewriter.getI32IntegerAttr(0));
      scf::WhileOp::create(
          rewriter, loc, TypeRange{}, ValueRange{},
          [&](OpBuilder &b, Location loc, ValueRange) {
            Value current = memref::AtomicRMWOp::create(
                b, loc, arith::AtomicRMWKind::ori, zero, adaptor.getOrder(),
                indices);
            Value notYet = arith::CmpIOp::create(
                b, loc, arith::CmpIPredicate::ne, current, turn);
            scf::ConditionOp::create(b, loc, notYet, ValueRange{});
          },
          [&](OpBuilder &b, Location loc, ValueRange) {
            scf::YieldOp::create(b, loc);
          });
      NVVM::MembarOp::create(rewriter, loc, NVVM::MemScopeKind::GPU);
    }
    createTurnBarrier(rewriter, loc, op, byWarp);
    rewriter.eraseOp(op);
    return success();
  }
};

/// fa.pass_turn: once every thread of the block (by_warp: of the warp) has
/// made its adds (its atomics issued, or its TMA reductions waited for
/// until complete; barrier), thread 0 (lane 0) fences at GPU scope
/// (cumulative: those writes become visible first) and hands the turn on.
struct PassTurnLowering : OpConversionPattern<PassTurnOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(PassTurnOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    bool byWarp = op.getByWarp();
    OpBuilder::InsertionGuard taken(rewriter);
    enterTakenBranch(rewriter, loc, adaptor.getTaken());
    createTurnBarrier(rewriter, loc, op, byWarp);
    auto ifFirst =
        scf::IfOp::create(rewriter, loc, isTurnSpeaker(rewriter, loc, byWarp));
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(&ifFirst.getThenRegion().front());
    NVVM::MembarOp::create(rewriter, loc, NVVM::MemScopeKind::GPU);
    Value next = arith::AddIOp::create(rewriter, loc, adaptor.getTurn(),
                                       indexConst(rewriter, loc, 1));
    Value value = arith::IndexCastOp::create(rewriter, loc,
                                             rewriter.getI32Type(), next);
    memref::AtomicRMWOp::create(
        rewriter, loc, arith::AtomicRMWKind::assign, value, adaptor.getOrder(),
        ValueRange{adaptor.getBatch(), adaptor.getHead(), adaptor.getTile()});
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fa::populateTurnPatterns(RewritePatternSet &patterns) {
  patterns.add<WaitTurnLowering, PassTurnLowering>(patterns.getContext());
}
