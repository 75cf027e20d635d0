//===- CheckSharedBounds.cpp - Shared views within the launch -----*- C++ -*-===//
//
// A lowered kernel's views of dynamic shared memory at constant offsets lie
// within its launch's shared bytes. The verifier checks the placed tiles;
// this checks what the strategies' lowerings made of them (tiles and
// staging buffers at fixed offsets). Views at run-time offsets (ring
// slots, the wgmma pipeline's buffers) are not checked. A view past the end
// would read or corrupt memory the launch never asked for: an error, not a
// kernel.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "dialect/FAOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FACHECKSHAREDBOUNDS
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {
struct FACheckSharedBoundsPass
    : public mlir::fa::impl::FACheckSharedBoundsBase<FACheckSharedBoundsPass> {
  void runOnOperation() override {
    gpu::GPUFuncOp kernel = getOperation();
    auto launch =
        kernel->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
    if (!launch)
      return;
    WalkResult result = kernel.walk([&](memref::ViewOp view) {
      if (!view.getSource().getDefiningOp<gpu::DynamicSharedMemoryOp>())
        return WalkResult::advance();
      std::optional<int64_t> offset = getConstantIntValue(view.getByteShift());
      MemRefType type = view.getType();
      if (!offset || !type.hasStaticShape() ||
          !type.getElementType().isIntOrFloat())
        return WalkResult::advance();
      int64_t bytes = type.getNumElements() *
                      llvm::divideCeil(type.getElementTypeBitWidth(), 8);
      if (*offset >= 0 && *offset + bytes <= launch.getSharedBytes())
        return WalkResult::advance();
      view.emitOpError() << "views shared memory bytes [" << *offset << ", "
                         << *offset + bytes << ") of a kernel whose launch has "
                         << launch.getSharedBytes() << " bytes";
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
