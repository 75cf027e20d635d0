//===- IRUtils.cpp - Small IR builders every stage uses -------------------===//
#include "compiler/Utils/IRUtils.h"
#include "dialect/FADialect.h"
#include "dialect/FAOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::fa;

Attribute mlir::fa::workgroupSpace(MLIRContext *ctx) {
  return gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
}

MemRefType mlir::fa::sharedBufferType(RankedTensorType type) {
  if (auto swizzled =
          dyn_cast<SwizzledSharedEncodingAttr>(type.getEncoding())) {
    int64_t block = swizzled.getBlockColumns(type.getElementType());
    // Stored rows of column blocks; a transposed tile's stored rows are its
    // columns. 8-bit floats as bytes (LLVM has no 8-bit float type).
    int64_t rows = type.getDimSize(0), columns = type.getDimSize(1);
    if (swizzled.getTransposed())
      std::swap(rows, columns);
    Type element = type.getElementType();
    if (isa<Float8E4M3FNType>(element))
      element = IntegerType::get(type.getContext(), 8);
    return MemRefType::get({columns / block, rows, block}, element,
                           MemRefLayoutAttrInterface(),
                           workgroupSpace(type.getContext()));
  }
  auto encoding = cast<SharedEncodingAttr>(type.getEncoding());
  SmallVector<int64_t> shape(type.getShape());
  if (shape.size() == 2)
    shape[1] += encoding.getPad();
  return MemRefType::get(shape, type.getElementType(),
                         MemRefLayoutAttrInterface(),
                         workgroupSpace(type.getContext()));
}

Value mlir::fa::toI32(OpBuilder &b, Location loc, Value index) {
  return arith::IndexCastUIOp::create(b, loc, b.getI32Type(), index);
}

Value mlir::fa::toIndex(OpBuilder &b, Location loc, Value i32) {
  return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), i32);
}

Value mlir::fa::i32Const(OpBuilder &b, Location loc, int32_t value) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(value));
}

Value mlir::fa::isFirstOfThreadGroup(OpBuilder &b, Location loc,
                                     int64_t groupThreads) {
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  return arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, loc, tid, indexConst(b, loc, groupThreads)),
      indexConst(b, loc, 0));
}

std::optional<int64_t> mlir::fa::warpgroupColumnSlice(RankedTensorType tile) {
  auto mma = dyn_cast_or_null<MmaEncodingAttr>(tile.getEncoding());
  if (!mma || tile.getRank() != 2 || !mma.getRowsFirst() ||
      mma.getWarpsN() < 2 || mma.getWarps() != 4 * mma.getWarpsN())
    return std::nullopt;
  return tile.getDimSize(1) / mma.getWarpsN();
}

std::optional<int64_t>
mlir::fa::warpgroupReductionSlice(RankedTensorType tile) {
  std::optional<int64_t> slice = warpgroupColumnSlice(tile);
  if (!slice || *slice < 2 * kReductionBoxColumns)
    return std::nullopt;
  return slice;
}

bool mlir::fa::takesTurns(Operation *program) {
  return program->walk([](WaitTurnOp) { return WalkResult::interrupt(); })
      .wasInterrupted();
}

bool mlir::fa::readsBlockMaskTables(Operation *program) {
  return program
      ->walk([](QTileRangeOp range) {
        return range.getRanges() ? WalkResult::interrupt()
                                 : WalkResult::advance();
      })
      .wasInterrupted();
}

bool mlir::fa::isForwardProgram(Operation *program) {
  return program
      ->walk([](OnlineSoftmaxOp) { return WalkResult::interrupt(); })
      .wasInterrupted();
}

Value mlir::fa::sharedAtomPad(OpBuilder &b, Location loc, int64_t atomBytes) {
  auto bytes = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                               MemRefLayoutAttrInterface(),
                               workgroupSpace(b.getContext()));
  Value base = gpu::DynamicSharedMemoryOp::create(b, loc, bytes);
  Value address = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, base);
  Value atom = indexConst(b, loc, atomBytes);
  // (atom - address % atom) % atom
  Value rem = arith::RemUIOp::create(b, loc, address, atom);
  return arith::RemUIOp::create(b, loc,
                                arith::SubIOp::create(b, loc, atom, rem), atom);
}

Value mlir::fa::sharedBufferAt(OpBuilder &b, Location loc, Value offset,
                               MemRefType type) {
  auto bytes = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                               MemRefLayoutAttrInterface(),
                               workgroupSpace(b.getContext()));
  Value base = gpu::DynamicSharedMemoryOp::create(b, loc, bytes);
  return memref::ViewOp::create(b, loc, type, base, offset, ValueRange{});
}

Value mlir::fa::addConst(OpBuilder &b, Location loc, Value v, int64_t c) {
  if (c == 0)
    return v;
  return arith::AddIOp::create(b, loc, v, indexConst(b, loc, c));
}

Value mlir::fa::mulConst(OpBuilder &b, Location loc, Value v, int64_t c) {
  return arith::MulIOp::create(b, loc, v, indexConst(b, loc, c));
}

FailureOr<Value> mlir::fa::cloneSliceInto(OpBuilder &b, Region &region,
                                          Value value, IRMapping &mapping) {
  if (Value mapped = mapping.lookupOrNull(value))
    return mapped;
  Operation *def = value.getDefiningOp();
  if (!def || !region.isAncestor(def->getParentRegion()))
    return value; // an argument, or defined outside the region
  // An op whose regions are isolated (a mask_mod, a score_mod) reads only
  // its operands: it is cloned whole like any other.
  if (def->getNumRegions() != 0 &&
      !def->hasTrait<OpTrait::IsIsolatedFromAbove>())
    return def->emitOpError("cannot be recomputed elsewhere (it has regions)");
  for (Value operand : def->getOperands())
    if (failed(cloneSliceInto(b, region, operand, mapping)))
      return failure();
  Operation *clone = b.clone(*def, mapping);
  return clone->getResult(cast<OpResult>(value).getResultNumber());
}

Value mlir::fa::f32Const(OpBuilder &b, Location loc, double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

Value mlir::fa::indexConst(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

void mlir::fa::createComputeBarrier(OpBuilder &b, Location loc, Operation *at) {
  LaunchAttr launch;
  for (Operation *op = at; op && !launch; op = op->getParentOp())
    launch = op->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
  if (!launch || launch.getProducerWarps() == 0) {
    gpu::BarrierOp::create(b, loc);
    return;
  }
  NVVM::BarrierOp::create(
      b, loc, TypeRange{},
      arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(kComputeBarrier)),
      arith::ConstantOp::create(
          b, loc, b.getI32IntegerAttr(int32_t(launch.getComputeThreads()))),
      NVVM::BarrierReductionAttr(), Value());
}

void mlir::fa::clearSharedRowsPastEnd(OpBuilder &b, Location loc, Value start,
                                      int64_t boxes, int64_t rows, Value kept,
                                      Value lane, int64_t threads,
                                      int64_t lineBytes) {
  constexpr int64_t kChunkBytes = 16;
  int64_t chunksPerLine = lineBytes / kChunkBytes;
  int64_t rowsAtOnce = threads / chunksPerLine;
  assert(threads % chunksPerLine == 0 && rows % rowsAtOnce == 0 &&
         "the threads cover whole lines and whole groups of rows");
  Value laneStart = arith::AddIOp::create(
      b, loc, start, toI32(b, loc, mulConst(b, loc, lane, kChunkBytes)));
  // kept - the lane's first row, in 32 bits (negative once past it).
  Value keptFromLaneRow =
      toI32(b, loc,
            arith::SubIOp::create(
                b, loc, kept,
                arith::DivUIOp::create(b, loc, lane,
                                       indexConst(b, loc, chunksPerLine))));
  for (int64_t j = 0; j < rows / rowsAtOnce; ++j) {
    Value rowPastEnd = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::sle, keptFromLaneRow,
        i32Const(b, loc, int32_t(j * rowsAtOnce)));
    for (int64_t box = 0; box < boxes; ++box)
      NVVM::InlinePtxOp::create(
          b, loc, TypeRange{}, ValueRange{laneStart}, ValueRange{},
          "st.shared.v4.b32 [$0+" +
              std::to_string((box * rows + j * rowsAtOnce) * lineBytes) +
              "], {0, 0, 0, 0};",
          rowPastEnd);
  }
}

void mlir::fa::createBarrierArrive(OpBuilder &b, Location loc, Value id,
                                   int64_t threads) {
  LLVM::CallIntrinsicOp::create(
      b, loc, b.getStringAttr("llvm.nvvm.barrier.cta.arrive.aligned.count"),
      ValueRange{id, i32Const(b, loc, int32_t(threads))});
}

void mlir::fa::createBarrierArrive(OpBuilder &b, Location loc, int32_t id,
                                   int64_t threads) {
  createBarrierArrive(b, loc, i32Const(b, loc, id), threads);
}

Value mlir::fa::warpgroupBarrierId(OpBuilder &b, Location loc, int32_t first) {
  Value warpgroup = arith::DivUIOp::create(
      b, loc, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x),
      indexConst(b, loc, kWarpgroupThreads));
  return arith::IndexCastUIOp::create(b, loc, b.getI32Type(),
                                      addConst(b, loc, warpgroup, first));
}

void mlir::fa::createAsyncSharedFence(OpBuilder &b, Location loc) {
  MLIRContext *ctx = b.getContext();
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
}

void mlir::fa::createWarpgroupBarrier(OpBuilder &b, Location loc) {
  Value id = warpgroupBarrierId(b, loc, kWarpgroupBarrier);
  NVVM::BarrierOp::create(
      b, loc, TypeRange{}, id,
      arith::ConstantOp::create(
          b, loc, b.getI32IntegerAttr(int32_t(kWarpgroupThreads))),
      NVVM::BarrierReductionAttr(), Value());
}

PagedTile mlir::fa::buildPagedTile(OpBuilder &b, Location loc, Value table,
                                   Value entry, Value start, Value pageSize,
                                   Value lastColumn, Value lastPage) {
  Value column = arith::MinUIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, start, pageSize), lastColumn);
  Value page = arith::IndexCastUIOp::create(
      b, loc, b.getIndexType(),
      memref::LoadOp::create(b, loc, table, ValueRange{entry, column}));
  return {arith::MinUIOp::create(b, loc, page, lastPage),
          arith::RemUIOp::create(b, loc, start, pageSize)};
}

void mlir::fa::enterTakenBranch(OpBuilder &b, Location loc, Value taken) {
  if (!taken)
    return;
  auto ifTaken = scf::IfOp::create(b, loc, taken);
  b.setInsertionPoint(ifTaken.thenBlock()->getTerminator());
}
