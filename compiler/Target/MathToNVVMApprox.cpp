//===- MathToNVVMApprox.cpp - exp2/log2 as PTX approximations ------*- C++ -*-===//
#include "compiler/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

#define DEBUG_TYPE "fa-math-to-nvvm-approx"

namespace mlir::fa {
#define GEN_PASS_DEF_FAMATHTONVVMAPPROX
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;

namespace {

/// f32 `MathOp` -> call of the NVVM intrinsic `intrinsic`.
template <typename MathOp>
struct ToIntrinsic : OpRewritePattern<MathOp> {
  ToIntrinsic(MLIRContext *ctx, StringRef intrinsic)
      : OpRewritePattern<MathOp>(ctx), intrinsic(intrinsic) {}

  LogicalResult matchAndRewrite(MathOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getType().isF32())
      return rewriter.notifyMatchFailure(op, "only f32 has an approximation");
    auto call = LLVM::CallIntrinsicOp::create(
        rewriter, op.getLoc(), op.getType(),
        rewriter.getStringAttr(intrinsic), op->getOperands());
    rewriter.replaceOp(op, call.getResults());
    return success();
  }

  std::string intrinsic;
};

/// f32 tanh(x) = 1 - 2 / (2^(2 log2(e) x) + 1) on the hardware exp2 and
/// reciprocal (ex2.approx, rcp.approx): five instructions where the
/// polynomial takes some twenty (a softcap runs it on every score), with
/// an absolute error of a few 2^-24 (inf and 0 at the ends give +-1).
struct TanhFromExp2 : OpRewritePattern<math::TanhOp> {
  TanhFromExp2(MLIRContext *ctx) : OpRewritePattern(ctx, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(math::TanhOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getType().isF32())
      return rewriter.notifyMatchFailure(op, "f32 only");
    Location loc = op.getLoc();
    Type f32 = op.getType();
    auto constant = [&](double value) -> Value {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getF32FloatAttr(value));
    };
    Value scaled = arith::MulFOp::create(rewriter, loc, op.getOperand(),
                                         constant(2.0 * M_LOG2E));
    Value power = math::Exp2Op::create(rewriter, loc, scaled);
    Value denominator =
        arith::AddFOp::create(rewriter, loc, power, constant(1.0));
    Value reciprocal =
        LLVM::CallIntrinsicOp::create(
            rewriter, loc, f32,
            rewriter.getStringAttr("llvm.nvvm.rcp.approx.ftz.f"),
            ValueRange{denominator})
            .getResult(0);
    rewriter.replaceOpWithNewOp<math::FmaOp>(op, constant(-2.0), reciprocal,
                                             constant(1.0));
    return success();
  }
};

/// f32 tanh marked fastmath afn (a 16-bit kernel's score_mod,
/// allowApproximateFunctions): LLVM's tanh with afn, which NVPTX selects as
/// tanh.approx.f32, one MUFU op (2^-11 relative error) where TanhFromExp2
/// takes two (ex2, rcp) beside the softmax's own exponential.
struct TanhApprox : OpRewritePattern<math::TanhOp> {
  TanhApprox(MLIRContext *ctx) : OpRewritePattern(ctx, /*benefit=*/3) {}

  LogicalResult matchAndRewrite(math::TanhOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getType().isF32() ||
        !bitEnumContainsAll(op.getFastmath(), arith::FastMathFlags::afn))
      return rewriter.notifyMatchFailure(op, "f32 with afn only");
    rewriter.replaceOpWithNewOp<LLVM::TanhOp>(
        op, op.getType(), op.getOperand(),
        LLVM::FastmathFlagsAttr::get(op.getContext(),
                                     LLVM::FastmathFlags::afn));
    return success();
  }
};

/// The math functions rewritten by polynomial approximation: all MLIR has
/// one for except exp2 and log2, which the hardware approximates.
bool isApproximated(StringRef name) { return name != "exp2" && name != "log2"; }

struct FAMathToNVVMApproxPass
    : public mlir::fa::impl::FAMathToNVVMApproxBase<FAMathToNVVMApproxPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // ex2 is overloaded on the float type; lg2 exists for f32 only.
    patterns.add<ToIntrinsic<math::Exp2Op>>(&getContext(),
                                            "llvm.nvvm.ex2.approx.ftz.f");
    patterns.add<ToIntrinsic<math::Log2Op>>(&getContext(),
                                            "llvm.nvvm.lg2.approx.ftz.f");
    // A variant's other math ops (tanh, exp, log, sin, erf, ...): MLIR's
    // f32 polynomial approximations (arith, fma and bit casts), which keep
    // f32 accuracy; the rest (abs, sqrt, floor, ...) as the LLVM
    // intrinsics NVPTX selects, called directly: convert-gpu-to-nvvm takes
    // the LLVM dialect's math ops for libdevice calls.
    patterns.add<TanhApprox, TanhFromExp2>(&getContext());
    populateMathF32ExpansionPatterns(patterns, isApproximated);
    populateMathPolynomialApproximationPatterns(patterns, isApproximated);
    math::populateExpansionPatterns(patterns, {"powf", "fpowi", "sinh",
                                               "cosh", "tan", "acosh",
                                               "asinh", "atanh"});
    patterns.add<ToIntrinsic<math::AbsFOp>>(&getContext(), "llvm.fabs");
    patterns.add<ToIntrinsic<math::SqrtOp>>(&getContext(), "llvm.sqrt");
    patterns.add<ToIntrinsic<math::FloorOp>>(&getContext(), "llvm.floor");
    patterns.add<ToIntrinsic<math::CeilOp>>(&getContext(), "llvm.ceil");
    patterns.add<ToIntrinsic<math::RoundEvenOp>>(&getContext(),
                                                 "llvm.roundeven");
    patterns.add<ToIntrinsic<math::RoundOp>>(&getContext(), "llvm.round");
    patterns.add<ToIntrinsic<math::CopySignOp>>(&getContext(),
                                                "llvm.copysign");
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
