//===- WgmmaToGPU.cpp - Lowering of the wgmma strategy's programs -*- C++ -*-=//
//
// Two steps on an outlined kernel placed by fa-place-wgmma:
//
// 1. Copies. Every fa.load_tile becomes 16-byte cp.async copies into its
//    shared buffer in the 128-byte swizzle (#fa.swizzled_shared): chunk c of
//    row r of column block b lands at chunk c ^ (r % 8) of that row of
//    block b. The K/V loop uses the ring of compiler/Conversion/Common/
//    AsyncCopy.h. wgmma reads shared memory through the async proxy, so
//    each thread fences (fence.proxy.async.shared::cta) after its copies
//    complete and before the barrier that publishes them. The dynamic
//    shared memory is aligned up to 1024 bytes (the swizzle atom) at entry.
// 2. Fragments. fa.tile_matmul becomes wgmma.mma_async m64nNk16 per k16
//    step, issued by each warpgroup for its 64 rows: Q K^T with both
//    operands as shared-memory descriptors (K-major), P V with P's A
//    fragments in registers and V as an MN-major descriptor. The other tile
//    ops run on the accumulator fragments with the patterns of #fa.mma
//    (Common/Fragments.h; a warpgroup's m64nN accumulator is its 4 warps'
//    m16n8 fragments) and the layout-generic ones (Common/TileOpLowering.h).
//
// The register-A form of wgmma has no NVVM op (nvvm.wgmma.mma_async and
// nvgpu.warpgroup.mma take A only as a descriptor), so both forms are
// emitted as inline PTX, with the register fences that keep the compiler
// from moving accumulator reads and writes across the asynchronous MMA.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/Wgmma/WgmmaToGPU.h"
#include "compiler/Conversion/Common/AsyncCopy.h"
#include "compiler/Conversion/Common/Fragments.h"
#include "compiler/Conversion/Common/GpuLowering.h"
#include "compiler/Tiling/TileArithmetic.h"
#include "dialect/FAOps.h"
#include "lib/Strategy/MmaLayout.h"
#include "lib/Strategy/WgmmaModel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

#include <optional>
#include <string>

using namespace mlir;
using namespace mlir::fa;
namespace model = ::fa::wgmma;

namespace {

/// The bytes of one swizzled row of a shared tile (its encoding's swizzle:
/// 128, or 64 for 8-bit rows of 64 bytes): a wgmma operand's column block
/// and the transposing copy's source rows.
static int64_t swizzledRowBytes(Type type) {
  return cast<SwizzledSharedEncodingAttr>(
             cast<RankedTensorType>(type).getEncoding())
      .getBytes();
}

Value i64Const(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(value));
}

//===----------------------------------------------------------------------===//
// Shared memory in the 128-byte swizzle
//===----------------------------------------------------------------------===//

/// Bytes from the dynamic shared memory's start to the first 1024-byte
/// boundary (the model reserves kSwizzleAtomBytes for it). Computed once,
/// at the kernel's entry.
Value alignmentPad(gpu::GPUFuncOp kernel) {
  OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
  return sharedAtomPad(b, kernel.getLoc(), model::kSwizzleAtomBytes);
}

SharedTileCopyLayout swizzledLayout(Value pad) {
  SharedTileCopyLayout layout;
  layout.slotBuffer = [pad](OpBuilder &b, Location loc, LoadTileOp load,
                            Value slot) {
    MemRefType type =
        sharedBufferType(cast<RankedTensorType>(load.getType()));
    int64_t slotBytes =
        type.getNumElements() * type.getElementTypeBitWidth() / 8;
    Value offset = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, slot, indexConst(b, loc, slotBytes)),
        indexConst(b, loc, sharedOffset(load)));
    offset = arith::AddIOp::create(b, loc, offset, pad);
    return sharedBufferAt(b, loc, offset, type);
  };
  // (row, col) -> (col / 64, row, 8 ((col % 64 / 8) ^ (row % 8)))
  layout.chunkIndices = [](OpBuilder &b, Location loc, Value row,
                           Value col) -> SmallVector<Value> {
    return swizzledIndices(b, loc, row, col, model::kColumnBlock,
                           model::kSwizzleBytes, /*chunkStart=*/true);
  };
  layout.copiedColumns = [](int64_t headDim) { return headDim; };
  layout.beforePublish = createAsyncSharedFence;
  layout.placePass = "fa-place-wgmma";
  return layout;
}

//===----------------------------------------------------------------------===//
// wgmma
//===----------------------------------------------------------------------===//

/// The shared address of a buffer, as i64.
Value sharedAddress(OpBuilder &b, Location loc, Value buffer) {
  Value address =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), address);
}

/// wgmma shared-memory matrix descriptors: the start address and the two
/// byte offsets in 16-byte units, the swizzle in bits 62-63 (1: 128 bytes,
/// 2: 64 bytes).
///   K-major (Q, K): rows of 128 (64) bytes, 8-row groups 1024 (512) bytes
///     apart (SBO); LBO unused (1).
///   MN-major (V): 8-row (k) groups 1024 bytes apart (SBO), 64-element
///     column blocks `blockBytes` apart (LBO).
/// An operand's k16 steps differ only in the start address, so its low
/// word (start, bits 0-13; LBO, bits 16-29) is built once and each step
/// adds its offset / 16 to it: one 32-bit add per wgmma instead of a 64-bit
/// shift, mask and or. Shared addresses stay below 256 KiB, so the sum never
/// leaves bits 0-13.
struct OperandDescriptor {
  Value lowWord; // i32
  int64_t sbo;
  uint64_t swizzleMode;

  OperandDescriptor(OpBuilder &b, Location loc, Value address, int64_t lbo,
                    int64_t sbo, int64_t rowBytes)
      : sbo(sbo), swizzleMode(rowBytes == 64 ? 2 : 1) {
    Value start = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, address, i64Const(b, loc, 4)),
        i64Const(b, loc, 0x3FFF));
    lowWord = arith::OrIOp::create(
        b, loc, arith::TruncIOp::create(b, loc, b.getI32Type(), start),
        arith::ConstantOp::create(b, loc,
                                  b.getI32IntegerAttr(int32_t((lbo >> 4) << 16))));
  }

  /// The descriptor of the matrix `offset` bytes (a multiple of 16) past
  /// the operand's start.
  Value at(OpBuilder &b, Location loc, int64_t offset) const {
    Value low = lowWord;
    if (offset)
      low = arith::AddIOp::create(
          b, loc, low,
          arith::ConstantOp::create(b, loc,
                                    b.getI32IntegerAttr(int32_t(offset >> 4))));
    uint64_t high = (uint64_t(sbo >> 4) << 32) | (swizzleMode << 62);
    return arith::OrIOp::create(
        b, loc, arith::ExtUIOp::create(b, loc, b.getI64Type(), low),
        i64Const(b, loc, int64_t(high)));
  }
};

/// An empty asm that takes and returns `values` ("+f" / "+r"): it has side
/// effects, so the compiler keeps the reads and writes of these registers
/// on its side of the wgmma fences and waits around it.
SmallVector<Value> fenceRegisters(OpBuilder &b, Location loc,
                                  ArrayRef<Value> values) {
  if (values.empty())
    return {};
  MLIRContext *ctx = b.getContext();
  SmallVector<Type> types;
  std::string constraints;
  for (auto [i, v] : llvm::enumerate(values)) {
    types.push_back(v.getType());
    constraints += (i ? ",=" : "=");
    constraints += v.getType().isF32() ? "f" : "r";
  }
  for (size_t i = 0; i < values.size(); ++i)
    constraints += "," + std::to_string(i);
  auto result = LLVM::LLVMStructType::getLiteral(ctx, types);
  auto asmOp = LLVM::InlineAsmOp::create(
      b, loc, result, values, b.getStringAttr(""),
      b.getStringAttr(constraints), /*has_side_effects=*/b.getUnitAttr(),
      /*is_align_stack=*/UnitAttr(), LLVM::TailCallKindAttr(),
      LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
      /*operand_attrs=*/ArrayAttr());
  SmallVector<Value> out;
  for (size_t i = 0; i < values.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, asmOp.getResult(0),
                                               ArrayRef<int64_t>{int64_t(i)}));
  return out;
}

/// One wgmma.mma_async.m64nNk16 (8-bit: m64nNk32) with f32 accumulators
/// `acc` (N / 2 per thread, tied in and out). A is a descriptor (one i64)
/// or the 4 A registers (i32); `accumulate` false ignores acc's input
/// (D = A B).
SmallVector<Value> wgmmaAsync(OpBuilder &b, Location loc, Type elementType,
                              int64_t n, ArrayRef<Value> acc,
                              ArrayRef<Value> a, Value bDescriptor,
                              bool accumulate, bool transposeA,
                              bool transposeB) {
  MLIRContext *ctx = b.getContext();
  int64_t count = int64_t(acc.size());
  // 8-bit: k32 steps, both shared operands K-major (no transpose
  // immediates).
  bool float8 = isa<Float8E4M3FNType>(elementType);
  std::string type = float8 ? "e4m3" : elementType.isBF16() ? "bf16" : "f16";
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, $" +
                     std::to_string(2 * count + a.size() + 1) +
                     ", 0;\nwgmma.mma_async.sync.aligned.m64n" +
                     std::to_string(n) + (float8 ? "k32.f32." : "k16.f32.") +
                     type + "." + type + " {";
  std::string constraints;
  for (int64_t i = 0; i < count; ++i) {
    text += (i ? ", $" : "$") + std::to_string(i);
    constraints += (i ? ",=f" : "=f");
  }
  text += "}, ";
  for (int64_t i = 0; i < count; ++i)
    constraints += "," + std::to_string(i);
  int64_t next = 2 * count;
  if (a.size() == 1) {
    text += "$" + std::to_string(next++);
    constraints += ",l";
  } else {
    text += "{";
    for (size_t i = 0; i < a.size(); ++i) {
      text += (i ? ", $" : "$") + std::to_string(next++);
      constraints += ",r";
    }
    text += "}";
  }
  text += ", $" + std::to_string(next++) + ", p, 1, 1";
  constraints += ",l,r";
  // The descriptor-A form takes imm-trans-a (0: K-major, 1: MN-major)
  // before imm-trans-b; the 8-bit forms take neither.
  if (!float8) {
    if (a.size() == 1)
      text += transposeA ? ", 1" : ", 0";
    text += transposeB ? ", 1" : ", 0";
  }
  text += ";\n}";

  SmallVector<Value> operands(acc.begin(), acc.end());
  operands.append(a.begin(), a.end());
  operands.push_back(bDescriptor);
  operands.push_back(arith::ConstantOp::create(
      b, loc, b.getI32IntegerAttr(accumulate ? 1 : 0)));
  SmallVector<Type> types(count, b.getF32Type());
  auto result = LLVM::LLVMStructType::getLiteral(ctx, types);
  auto asmOp = LLVM::InlineAsmOp::create(
      b, loc, result, operands, b.getStringAttr(text),
      b.getStringAttr(constraints), /*has_side_effects=*/b.getUnitAttr(),
      /*is_align_stack=*/UnitAttr(), LLVM::TailCallKindAttr(),
      LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
      /*operand_attrs=*/ArrayAttr());
  SmallVector<Value> d;
  for (int64_t i = 0; i < count; ++i)
    d.push_back(LLVM::ExtractValueOp::create(b, loc, asmOp.getResult(0),
                                             ArrayRef<int64_t>{i}));
  return d;
}

bool isSwizzled(Value v) { return hasEncoding<SwizzledSharedEncodingAttr>(v); }

/// The 4 A registers of k32 step `k` of an 8-bit #fa.mma_operand tile
/// (bytes, 8 per 16 columns in the slot order of the 16-bit A fragment:
/// (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1), then columns 2t+8, 2t+9).
/// 8-bit wgmma's A register r holds row g (r = 0, 2) or g + 8 (r = 1, 3)
/// and k 4t .. 4t + 3 (+16 for r = 2, 3), byte 0 lowest; its k 4t + i is
/// the key 2t + (i % 2) + 8 (i / 2) (+16), the order in which the
/// transposed V (#fa.swizzled_shared<transposed>) stores its keys. So each
/// register is 4 of the thread's own bytes: no lane exchanges.
SmallVector<Value> float8Registers(OpBuilder &b, Location loc,
                                   ArrayRef<Value> bytes, int64_t k) {
  static constexpr int64_t kSlots[2][4] = {{0, 1, 4, 5}, {2, 3, 6, 7}};
  SmallVector<Value> regs;
  auto quadType = VectorType::get({4}, b.getI8Type());
  for (int64_t half = 0; half < 2; ++half)
    for (int64_t row = 0; row < 2; ++row) {
      int64_t base = (2 * k + half) * ::fa::mma::OperandAFragment::kElements;
      SmallVector<Value> quad;
      for (int64_t slot : kSlots[row])
        quad.push_back(bytes[base + slot]);
      Value packed = vector::FromElementsOp::create(b, loc, quadType, quad);
      regs.push_back(LLVM::BitcastOp::create(b, loc, b.getI32Type(), packed));
    }
  return regs;
}
bool isOperand(Value v) { return hasEncoding<MmaOperandEncodingAttr>(v); }
bool isAccumulator(Value v) { return isMma(v); }

/// acc (+)= lhs * rhs for one warpgroup's 64 rows: per k16 step one
/// wgmma.mma_async, all committed as one group and waited for before the
/// result is used.
///   lhs shared, stored [m][k] (Q; dS of dQ = dS K): a K-major descriptor
///     at the warpgroup's rows, column 16 k;
///   lhs shared, stored [k][m] (P, dS: transpose_lhs): an MN-major
///     descriptor (trans-a 1) at the warpgroup's column block, row 16 k;
///   lhs A fragments (P): the 4 registers of k16 block k;
///   rhs stored [n][k] (K, transpose_rhs): K-major descriptor at the
///     warpgroup's rows of it, trans-b 0;
///   rhs stored [k][n] (V; dO, Q, K of the backward): MN-major descriptor
///     at row 16 k and the warpgroup's columns, trans-b 1.
/// The accumulator is #fa.mma with 16 rows a warp: the warpgroups along
/// its rows (warps_n = 1) or, numbered down the rows first, along its
/// columns too (the backward's S, dP, dQ: each warpgroup computes its
/// columns, N = columns / warps_n).
struct TileMatmulLowering : OpConversionPattern<TileMatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TileMatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    bool sharedLhs = isSwizzled(op.getLhs());
    if (!(sharedLhs || isOperand(op.getLhs())) || !isSwizzled(op.getRhs()) ||
        !isAccumulator(op.getResult()))
      return rewriter.notifyMatchFailure(op, "not a wgmma matmul");
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op.getType());
    auto rhsType = cast<RankedTensorType>(op.getRhs().getType());
    auto encoding = cast<MmaEncodingAttr>(resultType.getEncoding());
    int64_t warpsN = encoding.getWarpsN(), warpsM = encoding.getWarpsM();
    if (warpsN != 1 && !(encoding.getRowsFirst() &&
                         warpsM % model::kWarpsPerWarpgroup == 0))
      return op.emitOpError("wgmma accumulators are a warpgroup's 64 rows: "
                            "#fa.mma needs warps_n = 1, or rows_first with "
                            "the warps along the rows in whole warpgroups");
    bool transposedLhs = op.getTransposeLhs();
    if (transposedLhs && !sharedLhs)
      return op.emitOpError("wgmma reads a transposed left operand from "
                            "shared memory only");
    Type elementType = rhsType.getElementType();
    // K-major B: stored [n][k], as K with transpose_rhs, or an 8-bit V
    // stored transposed (#fa.swizzled_shared<transposed>).
    bool storedTransposed =
        cast<SwizzledSharedEncodingAttr>(rhsType.getEncoding()).getTransposed();
    bool transposed = op.getTransposeRhs() || storedTransposed;
    int64_t n = resultType.getDimSize(1) / warpsN;
    int64_t contraction =
        op.getTransposeRhs() ? rhsType.getDimSize(1) : rhsType.getDimSize(0);
    // One wgmma's k: 32 bytes of each row (16 16-bit elements, 32 8-bit);
    // a column block: one swizzled row, of 128 bytes (or 64: 8-bit rows of
    // 64 bytes), each operand its own.
    bool float8 = isa<Float8E4M3FNType>(elementType);
    int64_t elementBytes = elementType.getIntOrFloatBitWidth() / 8;
    int64_t kStep = 32 / elementBytes;
    int64_t lhsRowBytes = sharedLhs ? swizzledRowBytes(op.getLhs().getType())
                                    : model::kSwizzleBytes;
    int64_t rhsRowBytes = swizzledRowBytes(op.getRhs().getType());
    if (float8 && !transposed)
      return op.emitOpError("8-bit wgmma reads B K-major only: the right "
                            "operand must be transpose_rhs or stored "
                            "transposed");
    if (resultType.getDimSize(0) != 16 * warpsM || n % 8 != 0 ||
        n > model::kMaxN || contraction % kStep != 0)
      return op.emitOpError("wgmma lowering needs 64 rows per warpgroup (16 "
                            "per warp), an N that is a multiple of 8 up to ")
             << model::kMaxN << " and a contraction in k" << kStep << " steps";

    Value tid = gpu::ThreadIdOp::create(rewriter, loc, gpu::Dimension::x);
    Value warpgroup =
        arith::DivUIOp::create(rewriter, loc, tid, indexConst(rewriter, loc, 128));
    auto i64 = [&](Value index) -> Value {
      return arith::IndexCastUIOp::create(rewriter, loc, rewriter.getI64Type(),
                                          index);
    };
    // The warpgroup's 64-row block and column slice of the accumulator.
    Value rowBlock = warpgroup, columnSlice;
    if (warpsN > 1) {
      Value rowBlocks = indexConst(
          rewriter, loc, warpsM / model::kWarpsPerWarpgroup);
      rowBlock = arith::RemUIOp::create(rewriter, loc, warpgroup, rowBlocks);
      columnSlice = arith::DivUIOp::create(rewriter, loc, warpgroup, rowBlocks);
    }

    // A operand per k16 step.
    SmallVector<Value> lhsElements;
    std::optional<OperandDescriptor> lhsDescriptor;
    int64_t lhsRows = 0;
    if (sharedLhs) {
      lhsRows = cast<RankedTensorType>(op.getLhs().getType()).getDimSize(0);
      // K-major: the block's rows; MN-major: the block's column block.
      int64_t rowBytes = lhsRowBytes;
      int64_t blockBytes = transposedLhs ? lhsRows * rowBytes
                                         : model::kWarpgroupRows * rowBytes;
      Value warpgroupRows = arith::MulIOp::create(
          rewriter, loc, rowBlock, indexConst(rewriter, loc, blockBytes));
      Value lhsBase = arith::AddIOp::create(
          rewriter, loc, sharedAddress(rewriter, loc, adaptor.getLhs()),
          i64(warpgroupRows));
      lhsDescriptor.emplace(rewriter, loc, lhsBase,
                            transposedLhs ? lhsRows * rowBytes : 16,
                            8 * rowBytes, rowBytes);
    } else {
      lhsElements = unpack(rewriter, loc, adaptor.getLhs());
    }
    auto aOperand = [&](int64_t k) -> SmallVector<Value> {
      int64_t rowBytes = lhsRowBytes;
      if (sharedLhs && transposedLhs)
        return {lhsDescriptor->at(rewriter, loc, k * 16 * rowBytes)};
      if (sharedLhs) {
        int64_t columnBlock = rowBytes / elementBytes;
        int64_t offset = (k * kStep / columnBlock) * lhsRows * rowBytes +
                         (k * kStep % columnBlock) * elementBytes;
        return {lhsDescriptor->at(rewriter, loc, offset)};
      }
      if (float8)
        return float8Registers(rewriter, loc, lhsElements, k);
      SmallVector<Value> regs;
      int64_t base = k * ::fa::mma::OperandAFragment::kElements;
      auto pairType = VectorType::get({2}, elementType);
      for (int64_t r = 0; r < 4; ++r) {
        Value pair = vector::FromElementsOp::create(
            rewriter, loc, pairType,
            ValueRange{lhsElements[base + 2 * r], lhsElements[base + 2 * r + 1]});
        regs.push_back(LLVM::BitcastOp::create(rewriter, loc,
                                               rewriter.getI32Type(), pair));
      }
      return regs;
    };
    Value rhsBase = sharedAddress(rewriter, loc, adaptor.getRhs());
    int64_t rowBytes = rhsRowBytes;
    int64_t columnBlock = rowBytes / elementBytes;
    // Rows as stored: a transposed tile's are its columns.
    int64_t rhsRows =
        storedTransposed ? rhsType.getDimSize(1) : rhsType.getDimSize(0);
    if (columnSlice) {
      // The warpgroup's first column: rows of K-major B, a column block
      // (and 16-bit columns inside it) of MN-major B.
      Value column = arith::MulIOp::create(rewriter, loc, columnSlice,
                                           indexConst(rewriter, loc, n));
      Value offset;
      if (transposed) {
        offset = arith::MulIOp::create(rewriter, loc, column,
                                       indexConst(rewriter, loc, rowBytes));
      } else {
        Value block = indexConst(rewriter, loc, model::kColumnBlock);
        offset = arith::AddIOp::create(
            rewriter, loc,
            arith::MulIOp::create(
                rewriter, loc, arith::DivUIOp::create(rewriter, loc, column, block),
                indexConst(rewriter, loc, rhsRows * rowBytes)),
            arith::MulIOp::create(
                rewriter, loc, arith::RemUIOp::create(rewriter, loc, column, block),
                indexConst(rewriter, loc, 2)));
      }
      rhsBase = arith::AddIOp::create(rewriter, loc, rhsBase, i64(offset));
    }
    OperandDescriptor rhsDescriptor(rewriter, loc, rhsBase,
                                    transposed ? 16 : rhsRows * rowBytes,
                                    8 * rowBytes, rowBytes);
    auto bDescriptor = [&](int64_t k) {
      if (transposed)
        return rhsDescriptor.at(rewriter, loc,
                                (k * kStep / columnBlock) * rhsRows * rowBytes +
                                    (k * kStep % columnBlock) * elementBytes);
      return rhsDescriptor.at(rewriter, loc, k * 16 * rowBytes);
    };

    SmallVector<Value> acc;
    bool accumulate = bool(adaptor.getAcc());
    if (accumulate) {
      acc = unpack(rewriter, loc, adaptor.getAcc());
    } else {
      Value undef = LLVM::UndefOp::create(rewriter, loc, rewriter.getF32Type());
      acc.assign(n / 2, undef);
    }
    // The accumulator and A registers are final before the fence.
    SmallVector<Value> fenced(acc);
    int64_t aRegisters = 0;
    SmallVector<SmallVector<Value>> aOperands;
    for (int64_t k = 0; k < contraction / kStep; ++k)
      aOperands.push_back(aOperand(k));
    if (!sharedLhs) {
      for (auto &regs : aOperands)
        fenced.append(regs.begin(), regs.end());
      aRegisters = int64_t(fenced.size() - acc.size());
    }
    if (accumulate || aRegisters) {
      SmallVector<Value> kept = fenceRegisters(
          rewriter, loc,
          accumulate ? ArrayRef<Value>(fenced)
                     : ArrayRef<Value>(fenced).drop_front(acc.size()));
      size_t next = 0;
      if (accumulate)
        for (Value &v : acc)
          v = kept[next++];
      if (!sharedLhs)
        for (auto &regs : aOperands)
          for (Value &r : regs)
            r = kept[next++];
    }
    NVVM::WgmmaFenceAlignedOp::create(rewriter, loc);
    for (int64_t k = 0; k < contraction / kStep; ++k)
      acc = wgmmaAsync(rewriter, loc, elementType, n, acc, aOperands[k],
                       bDescriptor(k), accumulate || k > 0, transposedLhs,
                       /*transposeB=*/!transposed);
    NVVM::WgmmaGroupSyncAlignedOp::create(rewriter, loc);
    // An async matmul's registers are read only after its fa.async_wait.
    if (!op.getAsync()) {
      NVVM::WgmmaWaitGroupSyncOp::create(rewriter, loc, 0);
      acc = fenceRegisters(rewriter, loc, acc);
    }
    rewriter.replaceOp(
        op, pack(rewriter, loc, getTypeConverter()->convertType(resultType),
                 acc));
    return success();
  }
};

/// Writes an 8-bit swizzled tile (keys x cols, #fa.swizzled_shared)
/// transposed (#fa.swizzled_shared<transposed>): V of P V, which 8-bit
/// wgmma reads K-major only. `bases` gives the 32-bit shared addresses of
/// the tile and of the copy (built after the lanes' fields). The 128
/// threads of the running warpgroup (thread id % 128) share the work; the
/// copy is visible to them only (the caller publishes it).
///
/// Work unit: the 4 keys a storage word of the copy holds (keys 2t, 2t+1,
/// 2t+8, 2t+9 of a 16-key half group, see the encoding) x 4 head-dim
/// columns: 4 32-bit loads (one per key row), a 4 x 4 byte transpose (8
/// prmt), 4 32-bit stores (one per head-dim row). Lane (x, q) = (lane / 4,
/// lane % 4) of warp w takes, in step s, storage word 4 (x ^ a) + q of key
/// block `block` and head-dim word 8 blk + x, where a = (4 s + w) % 8 and
/// (block, blk) count the rest of 4 s + w. In the 128-byte swizzle both the
/// loads (8 chunk positions x 4 words) and the stores meet 32 different
/// banks. A tile of 64-byte rows (`sourceRowBytes` 64: e4m3 at head dims
/// 64 and 192)
/// is read in the 64-byte swizzle, where a key's xor (key / 2) % 4 is the
/// lane's q: the loads meet 16 banks (2-way); the stores are the same.
///
/// The swizzled byte offsets then split into bit fields that do not
/// overlap: a lane's own part, XORed with a constant of the step and the
/// byte (row) index, plus a constant of the step. Each access is one XOR
/// and one add on a 32-bit shared address, in the same asm as the access:
/// values LLVM could hoist out of the K/V loop would hold 64 addresses per
/// thread across it (D 256 spilled 436 bytes).
static void emitTransposedCopy(OpBuilder &rewriter, Location loc, int64_t keys,
                               int64_t cols, int64_t sourceRowBytes,
                               function_ref<std::pair<Value, Value>()> bases) {
  MLIRContext *ctx = rewriter.getContext();
  Type i32 = rewriter.getI32Type();
  auto c32 = [&](int64_t v) {
    return arith::ConstantOp::create(rewriter, loc,
                                     rewriter.getI32IntegerAttr(int32_t(v)));
  };
  auto bin = [&](auto tag, Value a, Value b) -> Value {
    return decltype(tag)::create(rewriter, loc, a, b);
  };
  auto shl = [&](Value a, int64_t n) {
    return bin(arith::ShLIOp(), a, c32(n));
  };
  auto shr = [&](Value a, int64_t n) {
    return bin(arith::ShRUIOp(), a, c32(n));
  };
  auto band = [&](Value a, int64_t m) {
    return bin(arith::AndIOp(), a, c32(m));
  };
  auto xori = [&](Value a, Value b) { return bin(arith::XOrIOp(), a, b); };
  auto ori = [&](Value a, Value b) { return bin(arith::OrIOp(), a, b); };
  auto inlineAsm = [&](Type result, ValueRange operands,
                       const std::string &text,
                       const char *constraints) -> Operation * {
    return LLVM::InlineAsmOp::create(
        rewriter, loc, result ? TypeRange{result} : TypeRange{}, operands,
        rewriter.getStringAttr(text), rewriter.getStringAttr(constraints),
        /*has_side_effects=*/rewriter.getUnitAttr(),
        /*is_align_stack=*/UnitAttr(), LLVM::TailCallKindAttr(),
        LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
        /*operand_attrs=*/ArrayAttr());
  };
  auto prmt = [&](Value a, Value b, const char *selector) -> Value {
    auto asmOp = LLVM::InlineAsmOp::create(
        rewriter, loc, i32, ValueRange{a, b},
        rewriter.getStringAttr(std::string("prmt.b32 $0, $1, $2, ") + selector +
                               ";"),
        rewriter.getStringAttr("=r,r,r"), /*has_side_effects=*/UnitAttr(),
        /*is_align_stack=*/UnitAttr(), LLVM::TailCallKindAttr(),
        LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
        /*operand_attrs=*/ArrayAttr());
    return asmOp.getResult(0);
  };

  Value tid = arith::IndexCastUIOp::create(
      rewriter, loc, i32,
      gpu::ThreadIdOp::create(rewriter, loc, gpu::Dimension::x));
  Value inGroup = band(tid, model::kWarpgroupThreads - 1);
  Value w = shr(inGroup, 5), lane = band(inGroup, 31);
  Value q = band(lane, 3), x = shr(lane, 2);
  // The lanes' fields: loads 2048 (x ^ w) | 256 q | ((x / 4 ^ 2 q) << 4)
  // | 4 (x % 4) (64-byte rows: 1024 (x ^ w) | 128 q | ((x / 4 ^ q) << 4)
  // | 4 (x % 4)); stores 512 x | ((x ^ w ^ 4 (x % 2)) << 4) | 4 q.
  bool narrow = sourceRowBytes == 64;
  Value laneSource =
      narrow ? ori(ori(shl(xori(x, w), 10), shl(q, 7)),
                   ori(shl(band(xori(shr(x, 2), q), 3), 4), shl(band(x, 3), 2)))
             : ori(ori(shl(xori(x, w), 11), shl(q, 8)),
                   ori(shl(band(xori(shr(x, 2), shl(q, 1)), 7), 4),
                       shl(band(x, 3), 2)));
  Value laneCopy =
      ori(ori(shl(x, 9), shl(band(xori(xori(x, w), shl(band(x, 1), 2)), 7), 4)),
          shl(q, 2));
  auto [sourceBase, copyBase] = bases();

  int64_t blks = cols / 32, blocks = keys / 128;
  int64_t units = blocks * blks * 8; // (block, blk, a)
  int64_t warps = model::kWarpsPerWarpgroup;
  static constexpr int64_t kKeyOfByte[4] = {0, 1, 8, 9};
  for (int64_t step = 0; step * warps < units; ++step) {
    // Combination 4 step + w: a = 4 (step % 2) ^ w, then blk, block.
    int64_t blk = (step / 2) % blks, block = (step / 2) / blks;
    int64_t flip = step % 2;
    Value rowsIn[4];
    for (int64_t i = 0; i < 4; ++i) {
      int64_t key = kKeyOfByte[i];
      // Key 16 (x ^ a) + 2 q + key, columns 32 blk + 4 x: in 64-byte rows
      // (column block blk / 2) its chunk 2 (blk % 2) + x / 4 sits at
      // that ^ q.
      int64_t fields = narrow ? (4096 * flip) ^ (64 * key) ^ (32 * (blk % 2))
                              : (8192 * flip) ^ (128 * key) ^
                                    (((2 * (blk % 4)) ^ (key % 2)) << 4);
      int64_t constant = narrow ? (blk / 2) * keys * 64 + block * 8192
                                : (blk / 4) * keys * 128 + block * 16384;
      rowsIn[i] = inlineAsm(i32, ValueRange{laneSource, sourceBase},
                            "{\n.reg .b32 a;\nxor.b32 a, $1, " +
                                std::to_string(fields) +
                                ";\nadd.u32 a, a, $2;\nld.shared.b32 $0, [a+" +
                                std::to_string(constant) + "];\n}",
                            "=r,r,r")
                      ->getResult(0);
    }
    // Bytes (key i, column j) -> (column j, key i).
    Value low01 = prmt(rowsIn[0], rowsIn[1], "0x5140");
    Value low23 = prmt(rowsIn[2], rowsIn[3], "0x5140");
    Value high01 = prmt(rowsIn[0], rowsIn[1], "0x7362");
    Value high23 = prmt(rowsIn[2], rowsIn[3], "0x7362");
    Value rowsOut[4] = {
        prmt(low01, low23, "0x5410"), prmt(low01, low23, "0x7632"),
        prmt(high01, high23, "0x5410"), prmt(high01, high23, "0x7632")};
    for (int64_t j = 0; j < 4; ++j) {
      int64_t fields = (128 * j) ^ (((4 * flip) ^ j) << 4);
      int64_t constant = block * cols * 128 + 4096 * blk;
      inlineAsm(Type(), ValueRange{laneCopy, copyBase, rowsOut[j]},
                "{\n.reg .b32 a;\nxor.b32 a, $0, " + std::to_string(fields) +
                    ";\nadd.u32 a, a, $1;\nst.shared.b32 [a+" +
                    std::to_string(constant) + "], $2;\n}",
                "r,r,r");
    }
  }
}

/// The tile shapes emitTransposedCopy takes: 128-key blocks, 32-column
/// steps.
static LogicalResult checkTransposable(Operation *op, RankedTensorType type) {
  int64_t keys = type.getDimSize(0), cols = type.getDimSize(1);
  if (keys % 128 != 0 || cols % 32 != 0 || type.getElementTypeBitWidth() != 8)
    return op->emitOpError("transposes 8-bit tiles of 128-key blocks and "
                           "32-column steps, got ")
           << type;
  return success();
}

/// Whether `source` -> `result` is an 8-bit shared tile -> its transposed
/// copy.
static bool isSharedTranspose(RankedTensorType source,
                              RankedTensorType result) {
  auto from = dyn_cast<SwizzledSharedEncodingAttr>(source.getEncoding());
  auto to = dyn_cast<SwizzledSharedEncodingAttr>(result.getEncoding());
  return from && to && !from.getTransposed() && to.getTransposed();
}

/// A 32-bit shared address (the shared window is below 4 GiB).
static Value sharedAddress32(OpBuilder &b, Location loc, Value buffer) {
  return arith::TruncIOp::create(b, loc, b.getI32Type(),
                                 sharedAddress(b, loc, buffer));
}

/// An 8-bit shared tile -> its transposed copy (#fa.swizzled_shared<
/// transposed>) in a program that is not warp-specialized: each warpgroup
/// writes its own copy (at fa.shared_offset + warpgroup x tile bytes), so
/// no warpgroup waits for another: a P V of this warpgroup's is done before
/// its next transpose (the pipelined loop waits for each P V before the
/// next iteration's). fa-warp-specialize moves the transpose to the
/// producer instead (fa.copy_tile, once per tile).
struct SharedTransposeLowering : OpConversionPattern<ConvertLayoutOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConvertLayoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto sourceType = cast<RankedTensorType>(op.getSource().getType());
    auto resultType = cast<RankedTensorType>(op.getType());
    if (!isSharedTranspose(sourceType, resultType))
      return rewriter.notifyMatchFailure(op, "not a shared transpose");
    auto offset =
        op->getAttrOfType<IntegerAttr>(FADialect::getSharedOffsetAttrName());
    if (!offset)
      return op.emitOpError("has no fa.shared_offset (run fa-place-wgmma)");
    if (failed(checkTransposable(op, sourceType)))
      return failure();
    Location loc = op.getLoc();
    Value buffer;
    emitTransposedCopy(
        rewriter, loc, sourceType.getDimSize(0), sourceType.getDimSize(1),
        swizzledRowBytes(sourceType), [&]() -> std::pair<Value, Value> {
          // The warpgroup's copy: fa.shared_offset + warpgroup x tile
          // bytes past the first swizzle atom.
          int64_t tileBytes = sourceType.getNumElements();
          Value warpgroup = arith::DivUIOp::create(
              rewriter, loc,
              gpu::ThreadIdOp::create(rewriter, loc, gpu::Dimension::x),
              indexConst(rewriter, loc, model::kWarpgroupThreads));
          Value bufferOffset = arith::AddIOp::create(
              rewriter, loc, indexConst(rewriter, loc, offset.getInt()),
              sharedAtomPad(rewriter, loc, model::kSwizzleAtomBytes));
          bufferOffset = arith::AddIOp::create(
              rewriter, loc, bufferOffset,
              arith::MulIOp::create(rewriter, loc, warpgroup,
                                    indexConst(rewriter, loc, tileBytes)));
          buffer = sharedBufferAt(rewriter, loc, bufferOffset,
                                  sharedBufferType(resultType));
          return {sharedAddress32(rewriter, loc, adaptor.getSource()),
                  sharedAddress32(rewriter, loc, buffer)};
        });
    // wgmma reads the copy through the async proxy; the warpgroup's
    // threads all wrote theirs.
    createAsyncSharedFence(rewriter, loc);
    createWarpgroupBarrier(rewriter, loc);
    rewriter.replaceOp(op, buffer);
    return success();
  }
};

/// fa.copy_tile of an 8-bit shared tile into a transposed buffer: the
/// running warpgroup (fa-warp-specialize's producer) writes it; the program
/// publishes it.
struct CopyTileLowering : OpConversionPattern<CopyTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CopyTileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto sourceType = cast<RankedTensorType>(op.getSource().getType());
    auto destType = cast<RankedTensorType>(op.getDest().getType());
    if (!isSharedTranspose(sourceType, destType))
      return op.emitOpError("copies an 8-bit swizzled tile into its "
                            "transposed layout only, got ")
             << sourceType << " into " << destType;
    if (failed(checkTransposable(op, sourceType)))
      return failure();
    Location loc = op.getLoc();
    emitTransposedCopy(
        rewriter, loc, sourceType.getDimSize(0), sourceType.getDimSize(1),
        swizzledRowBytes(sourceType), [&]() -> std::pair<Value, Value> {
          return {sharedAddress32(rewriter, loc, adaptor.getSource()),
                  sharedAddress32(rewriter, loc, adaptor.getDest())};
        });
    rewriter.eraseOp(op);
    return success();
  }
};

/// Ends the assembler's basic block after `after` (register tiles, the first
/// of row sums): ptxas schedules within blocks and hoists a wgmma wait to the
/// start of its block, so the wait that should overlap the softmax would
/// otherwise run before it. The block ends in a branch on the first row sum
/// (never -inf, so always taken; its other way is a loop that never runs),
/// which ptxas cannot fold; every register of `after` is an operand, so
/// their producers stay before it in LLVM's order as well.
LogicalResult endBlockAfter(OpBuilder &b, Location loc, ValueRange after) {
  MLIRContext *ctx = b.getContext();
  auto rowSums = dyn_cast<VectorType>(after.front().getType());
  if (!rowSums || !rowSums.getElementType().isF32())
    return emitError(loc, "fa.async_wait: the first `after` tile must lower "
                          "to f32 registers (row sums), got ")
           << after.front().getType();
  SmallVector<Value> operands;
  std::string constraints;
  auto add = [&](Value v, const char *constraint) {
    constraints += (constraints.empty() ? "" : ",") + std::string(constraint);
    operands.push_back(v);
  };
  for (Value tile : after) {
    auto vector = dyn_cast<VectorType>(tile.getType());
    if (!vector)
      continue;
    if (vector.getElementType().isF32()) {
      for (Value v : unpack(b, loc, tile))
        add(v, "f");
      continue;
    }
    // Packed 16- or 8-bit registers (P): as the 32-bit words they fill.
    int64_t bits = vector.getNumElements() * vector.getElementTypeBitWidth();
    if (bits % 32 != 0)
      continue;
    Value words = vector::BitCastOp::create(
        b, loc, VectorType::get({bits / 32}, b.getI32Type()), tile);
    for (Value v : unpack(b, loc, words))
      add(v, "r");
  }
  LLVM::InlineAsmOp::create(
      b, loc, TypeRange(), operands,
      b.getStringAttr("{\n.reg .pred ROW_SUM_SEEN;\n"
                      "setp.neu.f32 ROW_SUM_SEEN, $0, 0fFF800000;\n"
                      "@ROW_SUM_SEEN bra.uni AFTER_SOFTMAX;\n"
                      "NEVER: bra.uni NEVER;\n"
                      "AFTER_SOFTMAX:\n}"),
      b.getStringAttr(constraints), /*has_side_effects=*/b.getUnitAttr(),
      /*is_align_stack=*/UnitAttr(), LLVM::TailCallKindAttr(),
      LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
      /*operand_attrs=*/ArrayAttr());
  return success();
}

/// Waits until at most `pending` later wgmma groups run (no earlier than
/// `after` is computed), then pins the tile's registers after the wait.
struct AsyncWaitLowering : OpConversionPattern<AsyncWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AsyncWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    if (!adaptor.getAfter().empty() &&
        failed(endBlockAfter(rewriter, loc, adaptor.getAfter())))
      return failure();
    NVVM::WgmmaWaitGroupSyncOp::create(rewriter, loc, op.getPending());
    SmallVector<Value> values = fenceRegisters(
        rewriter, loc, unpack(rewriter, loc, adaptor.getTile()));
    rewriter.replaceOp(
        op, pack(rewriter, loc, adaptor.getTile().getType(), values));
    return success();
  }
};

} // namespace

LogicalResult mlir::fa::lowerWgmmaKernel(gpu::GPUFuncOp kernel,
                                         const FragmentTarget &target) {
  // A persistent kernel orders its tiles itself (fa-warp-specialize). The
  // backward's dkdv program keeps the grid order fa-tile-backward gave its
  // K/V tiles (as on the mma strategy).
  bool forward = isForwardProgram(kernel);
  if (forward && !kernel->hasAttr(FADialect::getPersistentAttrName()))
    reverseQueryTileOrder(kernel);
  // A warp-specialized kernel (fa-warp-specialize) has no loads left: its
  // producer copies with TMA. It needs a register cap at entry for
  // setmaxnreg to move registers between the roles: one block per SM.
  auto launch =
      kernel->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
  if (launch && launch.getProducerWarps() > 0)
    kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                    Builder(kernel.getContext()).getI32IntegerAttr(1));
  bool hasLoads = false;
  kernel.walk([&](LoadTileOp) { hasLoads = true; });
  if (hasLoads &&
      failed(lowerTileLoads(kernel, swizzledLayout(alignmentPad(kernel)))))
    return failure();
  if (failed(applyFragmentConversion(
          kernel,
          [&](const TypeConverter &typeConverter, RewritePatternSet &patterns) {
            patterns.add<TileMatmulLowering, AsyncWaitLowering,
                         SharedTransposeLowering, CopyTileLowering>(
                typeConverter, patterns.getContext());
            populateAccumulatePatterns(typeConverter, patterns, target);
          })))
    return failure();
  // The dkdv loop's staging stores and dQ's atomics (keepLaneAddressesInLoops:
  // 156 bytes of spills at D = 128 otherwise).
  if (!forward)
    keepLaneAddressesInLoops(kernel, [](Operation *op) {
      return isa<NVVM::WgmmaFenceAlignedOp>(op);
    });
  return success();
}
