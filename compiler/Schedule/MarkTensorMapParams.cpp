//===- MarkTensorMapParams.cpp - Tensor maps as grid constants --*- C++ -*-===//
//
// convert-gpu-to-nvvm keeps a kernel's pointer parameters as pointers; a
// TMA tensor map must instead be the 128-byte CUtensorMap itself, passed by
// value in parameter space (`__grid_constant__`). The parameters named by
// the kernel's fa.tensor_maps get llvm.byval, 64-byte alignment and
// nvvm.grid_constant; the NVPTX back end then declares them as
// `.param .align 64 .b8 name[128]` and takes their address with
// cvta.param for cp.async.bulk.tensor.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "dialect/FAOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAMARKTENSORMAPPARAMS
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// sizeof(CUtensorMap) and its alignment.
constexpr int64_t kTensorMapBytes = 128;
constexpr int64_t kTensorMapAlign = 64;

struct FAMarkTensorMapParamsPass
    : public mlir::fa::impl::FAMarkTensorMapParamsBase<
          FAMarkTensorMapParamsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    WalkResult result = getOperation().walk([&](LLVM::LLVMFuncOp func) {
      auto maps = func->getAttrOfType<ArrayAttr>(
          FADialect::getTensorMapsAttrName());
      if (!maps)
        return WalkResult::advance();
      for (Attribute map : maps) {
        int64_t arg =
            cast<DictionaryAttr>(map).getAs<IntegerAttr>("arg").getInt();
        if (arg >= int64_t(func.getNumArguments()) ||
            !isa<LLVM::LLVMPointerType>(func.getArgument(arg).getType())) {
          func.emitOpError("fa.tensor_maps names parameter ")
              << arg << ", which is not a pointer parameter";
          return WalkResult::interrupt();
        }
        func.setArgAttr(
            arg, LLVM::LLVMDialect::getByValAttrName(),
            TypeAttr::get(LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8),
                                                   kTensorMapBytes)));
        func.setArgAttr(arg, LLVM::LLVMDialect::getAlignAttrName(),
                        b.getI64IntegerAttr(kTensorMapAlign));
        func.setArgAttr(arg, NVVM::NVVMDialect::getGridConstantAttrName(),
                        b.getUnitAttr());
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
