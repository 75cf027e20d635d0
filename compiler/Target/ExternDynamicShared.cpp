//===- ExternDynamicShared.cpp - Dynamic shared base, extern ----*- C++ -*-===//
//
// convert-gpu-to-nvvm lowers gpu.dynamic_shared_memory to an *internal*
// zero-size shared global, which the NVPTX back end emits as an ordinary
// 1-byte `.shared` variable: ptxas then places it among the static shared
// variables in declaration order, not at the dynamic region's start. A
// kernel whose mbarriers (a static `__mbarrier` array) are declared after
// it got the dynamic base in front of them: the wgmma forward aligned its
// tiles from 0x400 to 0x400 and its Q tile covered the barrier words (wrong
// rows and launch failures under compute-sanitizer synccheck; undefined
// behaviour everywhere). With external linkage the back end declares
// `.extern .shared .align 16 .b8 __dynamic_shmem__0[]`, whose address is
// the dynamic region's start, after every static shared variable.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAEXTERNDYNAMICSHARED
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// A global that gpu.dynamic_shared_memory lowered to: a zero-size array in
/// the shared address space.
bool isDynamicSharedBase(LLVM::GlobalOp global) {
  auto array = dyn_cast<LLVM::LLVMArrayType>(global.getGlobalType());
  return unsigned(global.getAddrSpace()) == NVVM::NVVMMemorySpace::Shared &&
         array && array.getNumElements() == 0 && !global.getValueOrNull();
}

struct FAExternDynamicSharedPass
    : public mlir::fa::impl::FAExternDynamicSharedBase<
          FAExternDynamicSharedPass> {
  void runOnOperation() override {
    getOperation().walk([](LLVM::GlobalOp global) {
      if (isDynamicSharedBase(global))
        global.setLinkage(LLVM::Linkage::External);
    });
  }
};

} // namespace
