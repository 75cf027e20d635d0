//===- ExpandFloat8Casts.cpp - e4m3 conversions as integer arithmetic ----===//
//
// fa-expand-float8-casts: arith.extf from f8E4M3FN and arith.truncf to it
// become arithmetic on the bits, scalar or vector alike. e4m3 is a sign,
// 4 exponent bits (bias 7) and 3 mantissa bits; exponent 0 holds the
// subnormals m * 2^-9; 0x7f / 0xff are NaN and there is no infinity.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAEXPANDFLOAT8CASTS
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// `type` with its element type replaced (scalars and vectors).
Type withElement(Type type, Type element) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.clone(element);
  return element;
}

bool isFloat8(Type type) {
  return isa<Float8E4M3FNType>(getElementTypeOrSelf(type));
}

/// A constant of `type`'s shape (scalar or splat).
Value constantLike(OpBuilder &b, Location loc, Type type, TypedAttr scalar) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return arith::ConstantOp::create(b, loc,
                                     DenseElementsAttr::get(shaped, scalar));
  return arith::ConstantOp::create(b, loc, scalar);
}

/// e4m3 -> f32, exact.
struct ExtendFloat8 : OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rewriter) const override {
    if (!isFloat8(op.getIn().getType()) ||
        !getElementTypeOrSelf(op.getType()).isF32())
      return failure();
    Location loc = op.getLoc();
    Type inType = op.getIn().getType();
    Type i8 = withElement(inType, rewriter.getI8Type());
    Type i32 = withElement(inType, rewriter.getI32Type());
    Type f32 = op.getType();
    auto c32 = [&](int32_t v) {
      return constantLike(rewriter, loc, i32, rewriter.getI32IntegerAttr(v));
    };
    Value bits = arith::ExtUIOp::create(
        rewriter, loc, i32,
        arith::BitcastOp::create(rewriter, loc, i8, op.getIn()));
    Value sign = arith::ShLIOp::create(
        rewriter, loc, arith::AndIOp::create(rewriter, loc, bits, c32(0x80)),
        c32(24));
    Value exponent = arith::AndIOp::create(
        rewriter, loc, arith::ShRUIOp::create(rewriter, loc, bits, c32(3)),
        c32(0xF));
    Value mantissa = arith::AndIOp::create(rewriter, loc, bits, c32(7));
    // Normal: 2^(e - 7) (1 + m / 8), f32's exponent e - 7 + 127.
    Value normal = arith::OrIOp::create(
        rewriter, loc,
        arith::ShLIOp::create(
            rewriter, loc,
            arith::AddIOp::create(rewriter, loc, exponent, c32(120)), c32(23)),
        arith::ShLIOp::create(rewriter, loc, mantissa, c32(20)));
    // Subnormal: m * 2^-9.
    Value subnormal = arith::BitcastOp::create(
        rewriter, loc, i32,
        arith::MulFOp::create(
            rewriter, loc,
            arith::UIToFPOp::create(rewriter, loc, f32, mantissa),
            constantLike(rewriter, loc, f32,
                         rewriter.getF32FloatAttr(0x1p-9f))));
    Value isSubnormal = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::eq, exponent, c32(0));
    Value magnitude =
        arith::SelectOp::create(rewriter, loc, isSubnormal, subnormal, normal);
    Value isNan = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::eq,
        arith::AndIOp::create(rewriter, loc, bits, c32(0x7F)), c32(0x7F));
    magnitude = arith::SelectOp::create(rewriter, loc, isNan, c32(0x7FC00000),
                                        magnitude);
    Value result = arith::OrIOp::create(rewriter, loc, sign, magnitude);
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, f32, result);
    return success();
  }
};

/// f32 -> e4m3, to nearest even, saturated to +-448, NaN kept.
struct TruncateToFloat8 : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    if (!isFloat8(op.getType()) ||
        !getElementTypeOrSelf(op.getIn().getType()).isF32())
      return failure();
    Location loc = op.getLoc();
    Type f32 = op.getIn().getType();
    Type i32 = withElement(f32, rewriter.getI32Type());
    Type i8 = withElement(f32, rewriter.getI8Type());
    auto c32 = [&](int32_t v) {
      return constantLike(rewriter, loc, i32, rewriter.getI32IntegerAttr(v));
    };
    auto shr = [&](Value v, int32_t n) -> Value {
      return arith::ShRUIOp::create(rewriter, loc, v, c32(n));
    };
    auto band = [&](Value v, int32_t mask) -> Value {
      return arith::AndIOp::create(rewriter, loc, v, c32(mask));
    };
    Value bits = arith::BitcastOp::create(rewriter, loc, i32, op.getIn());
    Value sign = band(shr(bits, 24), 0x80);
    Value magnitude = band(bits, 0x7FFFFFFF);
    // Normal results (|x| >= 2^-6): round the mantissa to 3 bits, to even,
    // then re-bias the exponent; past 448 (0x7e) saturate.
    Value rounded = arith::AddIOp::create(
        rewriter, loc, magnitude,
        arith::AddIOp::create(rewriter, loc, c32(0x7FFFF),
                              band(shr(magnitude, 20), 1)));
    Value normal =
        arith::SubIOp::create(rewriter, loc, shr(rounded, 20), c32(120 << 3));
    normal = arith::MinSIOp::create(rewriter, loc, normal, c32(0x7E));
    // Subnormal results: |x| / 2^-9 rounded to even (8 is 2^-6, 0x08).
    Value absolute = arith::BitcastOp::create(rewriter, loc, f32, magnitude);
    Value steps = math::RoundEvenOp::create(
        rewriter, loc,
        arith::MulFOp::create(rewriter, loc, absolute,
                              constantLike(rewriter, loc, f32,
                                           rewriter.getF32FloatAttr(512.0f))));
    Value subnormal = arith::FPToUIOp::create(rewriter, loc, i32, steps);
    Value isSubnormal = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, magnitude, c32(0x3C800000));
    Value result =
        arith::SelectOp::create(rewriter, loc, isSubnormal, subnormal, normal);
    Value isNan = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ugt, magnitude, c32(0x7F800000));
    result = arith::SelectOp::create(rewriter, loc, isNan, c32(0x7F), result);
    result = arith::OrIOp::create(rewriter, loc, result, sign);
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(
        op, op.getType(), arith::TruncIOp::create(rewriter, loc, i8, result));
    return success();
  }
};

struct FAExpandFloat8CastsPass
    : mlir::fa::impl::FAExpandFloat8CastsBase<FAExpandFloat8CastsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExtendFloat8, TruncateToFloat8>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
