//===- MathToNVVMApprox.cpp - exp2/log2 as PTX approximations ------*- C++ -*-===//
#include "compiler/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
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

struct FAMathToNVVMApproxPass
    : public mlir::fa::impl::FAMathToNVVMApproxBase<FAMathToNVVMApproxPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // ex2 is overloaded on the float type; lg2 exists for f32 only.
    patterns.add<ToIntrinsic<math::Exp2Op>>(&getContext(),
                                            "llvm.nvvm.ex2.approx.ftz.f");
    patterns.add<ToIntrinsic<math::Log2Op>>(&getContext(),
                                            "llvm.nvvm.lg2.approx.ftz.f");
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
