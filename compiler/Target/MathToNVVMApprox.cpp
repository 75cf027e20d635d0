//===- MathToNVVMApprox.cpp - exp2/log2 as PTX approximations ------*- C++ -*-===//
#include "compiler/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

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
