//===- GpuLowering.h - Helpers every GPU strategy lowering uses -*- C++ -*-===//
//
// Strategy-neutral pieces of lowering a placed program to a gpu.func: the
// register-tile <-> element list conversion, shared-tile views of the
// dynamic shared memory, and constants.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_CONVERSION_COMMON_GPULOWERING_H
#define FA_COMPILER_CONVERSION_COMMON_GPULOWERING_H

#include "compiler/Utils/IRUtils.h"
#include "dialect/FAOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::fa {

/// Placed tile types as the lowerings see them: a register tile (any
/// register encoding) becomes a vector of the elements one thread holds,
/// in register order; a shared tile becomes its buffer (sharedBufferType).
/// Unplaced tiles have no conversion.
class PlacedTileTypeConverter : public TypeConverter {
public:
  PlacedTileTypeConverter();
};

/// Whether `value` is a tile whose encoding is one of `Encodings`.
template <typename... Encodings> bool hasEncoding(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa_and_nonnull<Encodings...>(type.getEncoding());
}

/// The indices into its sharedBufferType of element (row, col) of a tile
/// stored in the `rowBytes` swizzle (128 or 64) with B = `blockColumns`
/// elements a column block (#fa.swizzled_shared): a row of a block is
/// n = rowBytes / 16 chunks of 16 bytes, C = B / n elements each (8 of 16
/// bits, 4 of f32, 16 of 8 bits), and chunk j of row r lies at j ^ x with
/// x = (r / (128 / rowBytes)) % n (128 bytes: r % 8; 64: (r / 2) % 4):
/// (col / B, row, C ((col % B / C) ^ x) + col % C). `chunkStart` (col is a
/// multiple of C) leaves out col % C.
SmallVector<Value> swizzledIndices(OpBuilder &b, Location loc, Value row,
                                   Value col, int64_t blockColumns,
                                   int64_t rowBytes, bool chunkStart = false);

/// The indices into sharedBufferType(type) of element (row, col) of a
/// shared tile (#fa.shared: padded rows; #fa.swizzled_shared).
SmallVector<Value> sharedElementIndices(OpBuilder &b, Location loc,
                                        RankedTensorType type, Value row,
                                        Value col);

/// Lanes address shared and global memory at a few dozen fixed offsets of
/// their thread id per loop iteration (fragment reads, staging stores,
/// atomics); LLVM hoists each such address out of the loop into a 64-bit
/// register of its own, and ptxas spills. Inside each innermost loop that
/// holds an op `marks` accepts, the thread id comes from an asm statement
/// LLVM cannot move: the addresses stay in the loop, where they fold into
/// one base register plus immediate offsets.
void keepLaneAddressesInLoops(Operation *kernel,
                              function_ref<bool(Operation *)> marks);

/// The elements of a register tile (a vector), in register order.
SmallVector<Value> unpack(OpBuilder &b, Location loc, Value vector);
/// A register tile of `type` (a vector) from its elements.
Value pack(OpBuilder &b, Location loc, Type type, ValueRange elements);

/// Lowerings of register tiles that hold for any strategy whose register
/// tiles become vectors of the thread's elements: splat tile constants (the
/// initial softmax state), precision casts (P and O rounded to the input
/// type) and element-wise adds and subtracts of tiles of one type (P split
/// in two 16-bit halves by the mma backward), element by element.
void populateRegisterTilePatterns(const TypeConverter &typeConverter,
                                  RewritePatternSet &patterns);
/// Marks the arith ops those patterns lower legal only once their types
/// are converted (the rest of arith stays legal).
void addRegisterTileLegality(ConversionTarget &target,
                             const TypeConverter &typeConverter);

/// The f32 constants of one fa.online_softmax lowering.
struct SoftmaxConstants {
  /// `factor`, where given, is a runtime f32 multiplying the scale.
  SoftmaxConstants(OpBuilder &b, Location loc, double scale,
                   Value factor = Value());
  Value scaleLog2e, scale, log2e, negInf, zero;
};

/// One row of fa.online_softmax in base 2 over the scores a thread holds
/// of it; `rowAllReduce` combines a per-thread partial over the row's
/// threads (shuffles). With c = scale * log2(e):
///   m_new = max(m, scale * rowmax(s)); base = m_new, or 0 if it is -inf
///   p = exp2(s * c - base * log2 e);  l_new = exp2((m - base) log2 e) l +
///   rowsum(p)
/// With `probsScale` (fa.online_softmax's probs_scale), p is that much
/// larger and l still sums the unscaled p.
struct OnlineSoftmaxRow {
  Value newMax, newSum, alpha;
  SmallVector<Value> probs;
};
/// With `exp2OnFmaEvery` = k > 0, every k-th of a thread's p of the row is
/// computed on the FMA and integer pipes (buildExp2OnFma), the others by
/// the MUFU unit's ex2.approx. With `exactUnitCorrection`, alpha is exp2
/// of (m - m_new) log2 e, exactly 1 where the running max did not move
/// (fa.skip_unit_factors); otherwise one FMA, m log2 e - m_new log2 e,
/// which leaves the rounding of m_new log2 e in it.
OnlineSoftmaxRow buildOnlineSoftmaxRow(
    OpBuilder &b, Location loc, const SoftmaxConstants &c,
    ArrayRef<Value> scores, Value runningMax, Value runningSum,
    function_ref<Value(Value, function_ref<Value(Value, Value)>)> rowAllReduce,
    double probsScale = 1.0, int64_t exp2OnFmaEvery = 0,
    bool exactUnitCorrection = false);

/// f32 2^x without the MUFU unit (lib/Exp2Polynomial.h: floor by an add
/// rounded down, a cubic on the fraction, times 2^floor made from the
/// floor's bits; 0 below 2^-126; for x < 128, the online softmax's x <= 8).
Value buildExp2OnFma(OpBuilder &b, Location loc, Value x);
/// The backward's recomputed P of one row, in base 2: with base = LSE (0
/// when LSE is -inf: the row's scores are all masked),
///   baseLog2 = base * log2 e,  p = exp2(s * scale * log2 e - baseLog2).
Value probsBaseLog2(OpBuilder &b, Location loc, const SoftmaxConstants &c,
                    Value lse);
Value recomputedProb(OpBuilder &b, Location loc, const SoftmaxConstants &c,
                     Value score, Value baseLog2);

/// Lowerings of fa.wait_turn / fa.pass_turn (the deterministic backward's
/// fixed order of dQ additions): thread 0 of the block spins and hands on,
/// the block waits at barriers. The same for every strategy.
void populateTurnPatterns(RewritePatternSet &patterns);

/// Runs the query tiles (block x) last to first: with the causal mask the
/// last tiles see the most keys, and starting the longest programs first
/// shortens the tail of the last wave (without a mask all are alike).
void reverseQueryTileOrder(gpu::GPUFuncOp kernel);

} // namespace mlir::fa

#endif // FA_COMPILER_CONVERSION_COMMON_GPULOWERING_H
