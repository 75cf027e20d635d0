//===- FADialect.h - The fa dialect -------------------------------*- C++ -*-===//
#ifndef FA_DIALECT_FADIALECT_H
#define FA_DIALECT_FADIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/TensorEncoding.h"
#include "mlir/Support/LLVM.h"

#include "dialect/RegisterLayout.h"

#include "dialect/FADialect.h.inc"
#include "dialect/FAEnums.h.inc"

#include "dialect/FAAttrInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/FAAttrs.h.inc"

namespace fa {
struct StrategyModel;
} // namespace fa

namespace mlir::fa {

/// Limits of the tile level, far above any schedule the strategies make
/// (block sizes up to 1024, head dims up to 512) and low enough that the
/// lowerings, which unroll over a thread's elements, stay bounded.
constexpr int64_t kMaxTileDim = 65536;
/// Elements of one register tile a thread may hold.
constexpr int64_t kMaxTileRegistersPerThread = 2048;
/// Shared memory of one block: the largest of the supported archs (sm_90,
/// 227 KiB).
constexpr int64_t kMaxSharedBytes = 232448;
/// K/V (or Q/dO) tiles in flight in a ring.
constexpr int64_t kMaxPipelineStages = 4;

/// A tile of the tile and placement levels: a ranked tensor of rank 1 or 2
/// with static dims in [1, kMaxTileDim], unplaced or with an fa encoding
/// (TileEncodingInterface). The tile ops' operand and result constraint.
bool isTileType(Type type);

/// Whether `name` can name a kernel in PTX, or be the program part of one:
/// [A-Za-z_][A-Za-z0-9_]* (LLVM's NVPTX backend aborts on other names).
bool isKernelName(StringRef name);

/// The registry's model of a strategy (lib/Strategy/Registry.h: what its
/// placed programs may hold), found by the strategy's name: the verifiers
/// ask it instead of switching on the strategy.
const ::fa::StrategyModel &strategyModelOf(StrategyKind kind);

} // namespace mlir::fa

#endif // FA_DIALECT_FADIALECT_H
