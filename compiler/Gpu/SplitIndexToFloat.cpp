//===- SplitIndexToFloat.cpp - Constants out of int -> float conversions -===//
//
// fa-split-index-to-float: a score_mod that turns index arithmetic into a
// float (ALiBi's distance |q + Sk - Sq - kv|) converts once per score after
// the layout lowering inlined it at each of the thread's elements, whose
// key index is the thread's first column plus a constant. The conversion
// (I2F, at a quarter of the FMA rate like the exponentials) then costs as
// much as the softmax's own exp2. This pass moves the constants out:
//
//   before (per element c):              after:
//     d = (q + Sk - Sq) - (col0 + c)       f = sitofp(q + Sk - Sq - col0)  (per
//     row) x = sitofp(|d|)                      x = |f - c| (per element)
//
// sitofp(base + c) -> sitofp(base) + c, with the integer's constant terms
// gathered through add/sub and index_cast (index to an integer no wider:
// the casts commute with wrapping add/sub), and sitofp(|d|) -> |sitofp(d)|
// (the integer abs as math.absi or its select form). The result is the
// same float where the integers and the constant have magnitude < 2^24 (all
// exactly representable: positions in sequences under 16M); past that it
// is within a rounding of it. CSE then shares each row's conversion.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/MathExtras.h"

#define DEBUG_TYPE "fa-split-index-to-float"

namespace mlir::fa {
#define GEN_PASS_DEF_FASPLITINDEXTOFLOAT
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;

namespace {

/// Constants up to this magnitude are exact in f32 (and their sums with
/// integers below it too).
constexpr int64_t kExactInF32 = int64_t(1) << 24;
/// How deep an add/sub tree is searched for constants.
constexpr int kMaxDepth = 8;

/// The add/sub node `value` is (searched below kMaxDepth), or null.
Operation *sumNode(Value value, int depth) {
  Operation *def = value.getDefiningOp();
  if (depth >= kMaxDepth || !isa_and_nonnull<arith::AddIOp, arith::SubIOp>(def))
    return nullptr;
  return def;
}

/// The sum of `value`'s constant terms, gathered through add and sub;
/// nullopt where it overflows.
std::optional<int64_t> constantTerms(Value value, int depth) {
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return constant.getSignificantBits() <= 64
               ? std::optional<int64_t>(constant.getSExtValue())
               : std::nullopt;
  Operation *sum = sumNode(value, depth);
  if (!sum)
    return 0;
  std::optional<int64_t> lhs = constantTerms(sum->getOperand(0), depth + 1);
  std::optional<int64_t> rhs = constantTerms(sum->getOperand(1), depth + 1);
  int64_t result;
  if (!lhs || !rhs ||
      (isa<arith::AddIOp>(sum) ? llvm::AddOverflow(*lhs, *rhs, result)
                               : llvm::SubOverflow(*lhs, *rhs, result)))
    return std::nullopt;
  return result;
}

/// `value` without its constant terms (null where it is all constant),
/// new sums built at `b`; a subtree without constants stays as it is.
Value withoutConstantTerms(OpBuilder &b, Value value, int depth) {
  if (matchPattern(value, m_Constant()))
    return Value();
  Operation *sum = sumNode(value, depth);
  if (!sum || constantTerms(value, depth) == std::optional<int64_t>(0))
    return value;
  Value lhs = withoutConstantTerms(b, sum->getOperand(0), depth + 1);
  Value rhs = withoutConstantTerms(b, sum->getOperand(1), depth + 1);
  Location loc = value.getLoc();
  bool add = isa<arith::AddIOp>(sum);
  if (!rhs)
    return lhs;
  if (!lhs) {
    if (add)
      return rhs;
    Value zero =
        arith::ConstantOp::create(b, loc, b.getIntegerAttr(value.getType(), 0));
    return arith::SubIOp::create(b, loc, zero, rhs);
  }
  if (add)
    return arith::AddIOp::create(b, loc, lhs, rhs);
  return arith::SubIOp::create(b, loc, lhs, rhs);
}

/// The integer `value` converts: through an index_cast from index to an
/// integer type no wider than 64 bits (which commutes with wrapping add
/// and sub), so that the sum is split in index arithmetic.
Value throughIndexCast(Value value) {
  auto cast = value.getDefiningOp<arith::IndexCastOp>();
  if (cast && cast.getIn().getType().isIndex() &&
      cast.getType().getIntOrFloatBitWidth() <= 64)
    return cast.getIn();
  return value;
}

/// The integer whose absolute value `value` is (math.absi, or select(x < 0,
/// 0 - x, x) and its mirror), or null.
Value absoluteOf(Value value) {
  if (auto abs = value.getDefiningOp<math::AbsIOp>())
    return abs.getOperand();
  auto select = value.getDefiningOp<arith::SelectOp>();
  if (!select)
    return Value();
  auto compare = select.getCondition().getDefiningOp<arith::CmpIOp>();
  if (!compare || !matchPattern(compare.getRhs(), m_Zero()))
    return Value();
  Value x = compare.getLhs();
  auto isNegation = [&](Value v) {
    auto neg = v.getDefiningOp<arith::SubIOp>();
    return neg && neg.getRhs() == x && matchPattern(neg.getLhs(), m_Zero());
  };
  using P = arith::CmpIPredicate;
  P predicate = compare.getPredicate();
  if ((predicate == P::slt || predicate == P::sle) &&
      isNegation(select.getTrueValue()) && select.getFalseValue() == x)
    return x;
  if ((predicate == P::sgt || predicate == P::sge) &&
      select.getTrueValue() == x && isNegation(select.getFalseValue()))
    return x;
  return Value();
}

/// sitofp of an integer as the float of its converted source at `b`
/// (index sources through an index_cast to `intType`).
Value convert(OpBuilder &b, Location loc, Value integer, Type intType,
              Type floatType) {
  if (integer.getType().isIndex())
    integer = arith::IndexCastOp::create(b, loc, intType, integer);
  return arith::SIToFPOp::create(b, loc, floatType, integer);
}

struct SplitConversion : OpRewritePattern<arith::SIToFPOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::SIToFPOp op,
                                PatternRewriter &rewriter) const override {
    auto floatType = dyn_cast<FloatType>(op.getType());
    if (!floatType || !floatType.isF32())
      return rewriter.notifyMatchFailure(op, "f32 results only");
    Type intType = op.getIn().getType();
    Value source = throughIndexCast(op.getIn());
    Location loc = op.getLoc();
    // sitofp(|x|) = |sitofp(x)| (round to nearest is symmetric).
    if (Value x = absoluteOf(source)) {
      Value converted = convert(rewriter, loc, x, intType, floatType);
      rewriter.replaceOpWithNewOp<math::AbsFOp>(op, converted);
      return success();
    }
    // (A constant source is left to the folders.)
    std::optional<int64_t> terms = constantTerms(source, 0);
    if (!terms || *terms == 0 || std::abs(*terms) > kExactInF32 ||
        matchPattern(source, m_Constant()))
      return rewriter.notifyMatchFailure(op, "no exact constant to move");
    Value base = withoutConstantTerms(rewriter, source, 0);
    Value converted = convert(rewriter, loc, base, intType, floatType);
    Value constant = arith::ConstantOp::create(
        rewriter, loc, rewriter.getF32FloatAttr(float(*terms)));
    rewriter.replaceOpWithNewOp<arith::AddFOp>(op, converted, constant);
    return success();
  }
};

struct FASplitIndexToFloatPass
    : public mlir::fa::impl::FASplitIndexToFloatBase<FASplitIndexToFloatPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SplitConversion>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation().emitError("fa-split-index-to-float did not converge");
      signalPassFailure();
    }
  }
};

} // namespace
