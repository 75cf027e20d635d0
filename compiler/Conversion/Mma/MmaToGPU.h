//===- MmaToGPU.h - Lowering of the mma strategy's programs -----*- C++ -*-===//
//
// The tensor-core strategy's half of fa-convert-placed-to-gpu: once a
// program placed by fa-place-mma has been outlined into a gpu.func, its
// tile ops become cp.async copies into shared-memory rings, ldmatrix,
// mma.sync m16n8k16 and per-fragment softmax arithmetic.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_CONVERSION_MMA_MMATOGPU_H
#define FA_COMPILER_CONVERSION_MMA_MMATOGPU_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir {
class TypeConverter;
} // namespace mlir

namespace mlir::fa {

/// The lowerings of the tile ops that move m16n8 accumulator fragments
/// (#fa.mma): the accumulator -> A-operand renaming (P), the stores of O
/// and LSE, and the staging of P and dS through shared memory. Any
/// strategy whose accumulators are m16n8 fragments stacked over warps uses
/// them (wgmma: a warpgroup's m64 accumulator is its 4 warps' fragments).
/// The element-wise tile ops are lowered against the register layout
/// (compiler/Conversion/Common/TileOpLowering.h).
void populateMmaFragmentPatterns(const TypeConverter &typeConverter,
                                 RewritePatternSet &patterns);

/// The fragment-level dialect conversion of a kernel whose accumulators are
/// m16n8 fragments (mma, wgmma): placed tile types (PlacedTileTypeConverter),
/// the fragment, tile-op, register-tile, K/V range and structural patterns, plus
/// the strategy's own (its matmul, its operand loads).
LogicalResult applyFragmentConversion(
    gpu::GPUFuncOp kernel,
    function_ref<void(const TypeConverter &, RewritePatternSet &)>
        addStrategyPatterns);

/// What the mma lowering may use of its target.
struct MmaTarget {
  /// red.global.add.v2.f32: fa.accumulate_tile adds a lane's two adjacent
  /// accumulator columns with one instruction (sm_90 and newer).
  bool vectorReductions = false;
};

/// Lowers the fa ops of `kernel` (an outlined program of the mma strategy).
/// Emits a diagnostic and fails on IR it cannot lower.
LogicalResult lowerMmaKernel(gpu::GPUFuncOp kernel, const MmaTarget &target);

} // namespace mlir::fa

#endif // FA_COMPILER_CONVERSION_MMA_MMATOGPU_H
