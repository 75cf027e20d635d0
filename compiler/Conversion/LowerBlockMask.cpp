//===- LowerBlockMask.cpp - fa.block_mask -> its table-filling programs ---===//
//
// The block mask of a mask_mod (fa.block_mask) is computed by five
// programs: two write empty ranges into the tables; the third tests every
// score 16 x 16 at a time and narrows, with atomic min / max, the entries
// of the squares that keep a score (their ranges) and of the squares that
// keep all of them (their whole ranges); the last two empty each whole
// range that spans a square that is not whole (the whole squares of an
// entry need not be consecutive). The programs' bodies are built once;
// the GPU target maps their (entry, group, head, batch) to thread and
// block ids, the CPU target to loops.
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/Tiling/TileArithmetic.h"
#include "compiler/Tiling/Variants.h"
#include "lib/LaunchPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

namespace mlir::fa {
#define GEN_PASS_DEF_FALOWERBLOCKMASK
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Threads of a block of the GPU programs.
constexpr int64_t kThreads = 128;
constexpr StringLiteral kKernelModuleName = "fa_kernels";

/// The operands of one fa.block_mask where its programs are built (the
/// op's own, or a kernel's parameters).
struct BlockMaskOperands {
  Value query, key, keyRanges, queryRanges;
  SmallVector<Value> captures;
};

Value indexConst(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value toI32(OpBuilder &b, Location loc, Value index) {
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
}

/// A range table entry's columns: the range, then the whole range.
enum class EntryRange : int64_t { kept = 0, whole = 2 };

/// Writes the empty ranges [emptyFirst, 0) into entry `group` of `table`
/// (batch, head) when the entry exists (group < groups).
void buildEmptyEntry(OpBuilder &b, Location loc, Value table, Value batch,
                     Value head, Value group, Value groups, Value emptyFirst) {
  Value exists =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, group, groups);
  auto ifOp = scf::IfOp::create(b, loc, exists, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  Value first = toI32(b, loc, emptyFirst);
  Value end = arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0);
  for (int64_t column = 0; column < ::fa::kRangeTableColumns; ++column)
    memref::StoreOp::create(
        b, loc, column % 2 == 0 ? first : end, table,
        ValueRange{batch, head, group, indexConst(b, loc, column)});
}

/// Narrows range `which` of entry `group` of `table` (batch, head) to take
/// [lo, hi) in, if that range is not empty.
void buildNarrowEntry(OpBuilder &b, Location loc, Value table, Value batch,
                      Value head, Value group, EntryRange which, Value lo,
                      Value hi) {
  Value kept =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lo, hi);
  auto ifOp = scf::IfOp::create(b, loc, kept, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  int64_t first = static_cast<int64_t>(which);
  memref::AtomicRMWOp::create(
      b, loc, arith::AtomicRMWKind::mins, toI32(b, loc, lo), table,
      ValueRange{batch, head, group, indexConst(b, loc, first)});
  memref::AtomicRMWOp::create(
      b, loc, arith::AtomicRMWKind::maxs, toI32(b, loc, hi), table,
      ValueRange{batch, head, group, indexConst(b, loc, first + 1)});
}

/// Whether the mask (op's causal flag and mask_mod) keeps score (row, key)
/// of (batch, head).
Value buildKeeps(OpBuilder &b, Location loc, BlockMaskOp op,
                 const BlockMaskOperands &in, Value batch, Value head,
                 Value row, Value key, Value qLen, Value kvLen) {
  Value hidden = buildIsMasked(b, loc, op.getMask(), row, key, qLen, kvLen);
  Value kept = arith::XOrIOp::create(
      b, loc, hidden, arith::ConstantIntOp::create(b, loc, 1, 1));
  Region &maskMod = op.getMaskMod();
  SmallVector<Value> args = variantRegionArgs({batch, head, row, key, qLen, kvLen}, in.captures);
  return arith::AndIOp::create(b, loc, kept,
                               inlineVariantRegion(b, maskMod, args));
}

/// The rows [start, min(start + 16, length)) of a 16-index group.
std::pair<Value, Value> groupIndices(OpBuilder &b, Location loc, Value group,
                                     Value length) {
  Value size = indexConst(b, loc, ::fa::kBlockMaskGroup);
  Value start = arith::MulIOp::create(b, loc, group, size);
  Value end = arith::MinUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, start, size), length);
  return {start, end};
}

/// The scores of rows [16 group, 16 group + 16) of (batch, head): the keys
/// in squares firstSquare, firstSquare + step, ... are tested; each square
/// that keeps a score narrows its query_ranges entry's range (and, kept
/// whole, its whole range), and the keys kept over all of them narrow the
/// group's key_ranges entry (the squares kept whole, its whole range).
void buildGroupRanges(OpBuilder &b, Location loc, BlockMaskOp op,
                      const BlockMaskOperands &in, Value batch, Value head,
                      Value group, Value firstSquare, Value step) {
  Value qLen = memref::DimOp::create(b, loc, in.query, 2);
  Value kvLen = memref::DimOp::create(b, loc, in.key, 2);
  Value one = indexConst(b, loc, 1);
  Value size = indexConst(b, loc, ::fa::kBlockMaskGroup);
  auto [rowStart, rowEnd] = groupIndices(b, loc, group, qLen);
  Value squares = arith::CeilDivUIOp::create(b, loc, kvLen, size);
  if (op.getMask() == MaskKind::causal) {
    // Keys past rowEnd - 1 + Sk - Sq are hidden from every row of the
    // group (signed: no key at all when negative).
    Value visibleKeys = arith::SubIOp::create(
        b, loc, arith::AddIOp::create(b, loc, rowEnd, kvLen), qLen);
    Value visibleSquares =
        arith::CeilDivSIOp::create(b, loc, visibleKeys, size);
    squares = arith::MaxSIOp::create(
        b, loc, indexConst(b, loc, 0),
        arith::MinSIOp::create(b, loc, visibleSquares, squares));
  }
  // Empty hulls start as [max, 0).
  Value none = indexConst(b, loc, std::numeric_limits<int32_t>::max());
  Value zero = indexConst(b, loc, 0);
  Value yes = arith::ConstantIntOp::create(b, loc, 1, 1);
  Value no = arith::ConstantIntOp::create(b, loc, 0, 1);
  // Carried over the squares: the keys kept, and the keys of the squares
  // kept whole.
  auto keyHull = scf::ForOp::create(
      b, loc, firstSquare, squares, step, ValueRange{none, zero, none, zero},
      [&](OpBuilder &sb, Location loc, Value square, ValueRange keysKept) {
        auto [keyStart, keyEnd] = groupIndices(sb, loc, square, kvLen);
        // Over the group's rows: the rows that keep a key of the square,
        // the keys kept, and whether every score was kept.
        auto rows = scf::ForOp::create(
            sb, loc, rowStart, rowEnd, one,
            ValueRange{none, zero, keysKept[0], keysKept[1], yes},
            [&](OpBuilder &rb, Location loc, Value row, ValueRange hulls) {
              auto keys = scf::ForOp::create(
                  rb, loc, keyStart, keyEnd, one,
                  ValueRange{hulls[2], hulls[3], no, hulls[4]},
                  [&](OpBuilder &kb, Location loc, Value key,
                      ValueRange state) {
                    Value kept = buildKeeps(kb, loc, op, in, batch, head, row,
                                            key, qLen, kvLen);
                    Value lo = arith::SelectOp::create(
                        kb, loc, kept,
                        arith::MinSIOp::create(kb, loc, state[0], key),
                        state[0]);
                    Value next = arith::AddIOp::create(kb, loc, key, one);
                    Value hi = arith::SelectOp::create(
                        kb, loc, kept,
                        arith::MaxSIOp::create(kb, loc, state[1], next),
                        state[1]);
                    Value any = arith::OrIOp::create(kb, loc, state[2], kept);
                    Value all = arith::AndIOp::create(kb, loc, state[3], kept);
                    scf::YieldOp::create(kb, loc,
                                         ValueRange{lo, hi, any, all});
                  });
              Value rowKept = keys.getResult(2);
              Value rowLo = arith::SelectOp::create(
                  rb, loc, rowKept,
                  arith::MinSIOp::create(rb, loc, hulls[0], row), hulls[0]);
              Value rowHi = arith::SelectOp::create(
                  rb, loc, rowKept,
                  arith::MaxSIOp::create(
                      rb, loc, hulls[1],
                      arith::AddIOp::create(rb, loc, row, one)),
                  hulls[1]);
              scf::YieldOp::create(
                  rb, loc,
                  ValueRange{rowLo, rowHi, keys.getResult(0),
                             keys.getResult(1), keys.getResult(3)});
            });
        buildNarrowEntry(sb, loc, in.queryRanges, batch, head, square,
                         EntryRange::kept, rows.getResult(0),
                         rows.getResult(1));
        // A square kept whole: its rows are whole for its keys, its keys
        // for the group's rows.
        Value whole = rows.getResult(4);
        Value wholeRowsEnd =
            arith::SelectOp::create(sb, loc, whole, rowEnd, rowStart);
        buildNarrowEntry(sb, loc, in.queryRanges, batch, head, square,
                         EntryRange::whole, rowStart, wholeRowsEnd);
        Value wholeLo = arith::SelectOp::create(
            sb, loc, whole, arith::MinSIOp::create(sb, loc, keysKept[2], keyStart),
            keysKept[2]);
        Value wholeHi = arith::SelectOp::create(
            sb, loc, whole, arith::MaxSIOp::create(sb, loc, keysKept[3], keyEnd),
            keysKept[3]);
        scf::YieldOp::create(sb, loc,
                             ValueRange{rows.getResult(2), rows.getResult(3),
                                        wholeLo, wholeHi});
      });
  buildNarrowEntry(b, loc, in.keyRanges, batch, head, group, EntryRange::kept,
                   keyHull.getResult(0), keyHull.getResult(1));
  buildNarrowEntry(b, loc, in.keyRanges, batch, head, group,
                   EntryRange::whole, keyHull.getResult(2),
                   keyHull.getResult(3));
}

/// Which table a whole-range check reads: an entry of key_ranges is a
/// group of rows whose squares run along the keys, one of query_ranges a
/// group of keys whose squares run along the rows.
enum class CheckedTable { keyRanges, queryRanges };

/// Empties the whole range of `entry` of the checked table (batch, head)
/// if a square it spans is not kept whole: the squares firstSquare,
/// firstSquare + step, ... of those it spans are tested.
void buildWholeCheck(OpBuilder &b, Location loc, BlockMaskOp op,
                     const BlockMaskOperands &in, CheckedTable checked,
                     Value batch, Value head, Value entry, Value firstSquare,
                     Value step) {
  bool keyTable = checked == CheckedTable::keyRanges;
  Value table = keyTable ? in.keyRanges : in.queryRanges;
  Value qLen = memref::DimOp::create(b, loc, in.query, 2);
  Value kvLen = memref::DimOp::create(b, loc, in.key, 2);
  Value one = indexConst(b, loc, 1);
  Value size = indexConst(b, loc, ::fa::kBlockMaskGroup);
  auto read = [&](int64_t column) -> Value {
    Value value = memref::LoadOp::create(
        b, loc, table,
        ValueRange{batch, head, entry, indexConst(b, loc, column)});
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), value);
  };
  Value first = read(2), end = read(3);
  // Empty: [first, first) spans no square.
  end = arith::MaxSIOp::create(b, loc, end, first);
  Value firstSpanned = arith::AddIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, first, size), firstSquare);
  Value endSpanned = arith::CeilDivUIOp::create(b, loc, end, size);
  scf::ForOp::create(
      b, loc, firstSpanned, endSpanned, step, ValueRange{},
      [&](OpBuilder &sb, Location loc, Value square, ValueRange) {
        Value rowGroup = keyTable ? entry : square;
        Value keyGroup = keyTable ? square : entry;
        auto [rowStart, rowEnd] = groupIndices(sb, loc, rowGroup, qLen);
        auto [keyStart, keyEnd] = groupIndices(sb, loc, keyGroup, kvLen);
        auto rows = scf::ForOp::create(
            sb, loc, rowStart, rowEnd, one,
            ValueRange{arith::ConstantIntOp::create(sb, loc, 1, 1)},
            [&](OpBuilder &rb, Location loc, Value row, ValueRange rowsAll) {
              auto keys = scf::ForOp::create(
                  rb, loc, keyStart, keyEnd, one, rowsAll,
                  [&](OpBuilder &kb, Location loc, Value key,
                      ValueRange all) {
                    Value kept = buildKeeps(kb, loc, op, in, batch, head, row,
                                            key, qLen, kvLen);
                    scf::YieldOp::create(
                        kb, loc, arith::AndIOp::create(kb, loc, all[0], kept)
                                     .getResult());
                  });
              scf::YieldOp::create(rb, loc, keys.getResults());
            });
        Value broken = arith::XOrIOp::create(
            sb, loc, rows.getResult(0),
            arith::ConstantIntOp::create(sb, loc, 1, 1));
        auto ifOp = scf::IfOp::create(sb, loc, broken,
                                      /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(sb);
        sb.setInsertionPointToStart(ifOp.thenBlock());
        // [whole_first, 0): empty (every writer writes the same).
        memref::AtomicRMWOp::create(
            sb, loc, arith::AtomicRMWKind::mins,
            arith::ConstantIntOp::create(sb, loc, sb.getI32Type(), 0), table,
            ValueRange{batch, head, entry, indexConst(sb, loc, 3)});
        sb.setInsertionPointAfter(ifOp);
        scf::YieldOp::create(sb, loc);
      });
}

/// The tables' entry counts: ceil(Sq / 16) and ceil(Sk / 16).
std::pair<Value, Value> tableGroups(OpBuilder &b, Location loc,
                                    const BlockMaskOperands &in) {
  Value size = indexConst(b, loc, ::fa::kBlockMaskGroup);
  return {arith::CeilDivUIOp::create(
              b, loc, memref::DimOp::create(b, loc, in.query, 2), size),
          arith::CeilDivUIOp::create(
              b, loc, memref::DimOp::create(b, loc, in.key, 2), size)};
}

/// The CPU target: every program as loops in place of the op.
void lowerToLoops(BlockMaskOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  BlockMaskOperands in{op.getQuery(), op.getKey(), op.getKeyRanges(),
                       op.getQueryRanges(),
                       SmallVector<Value>(op.getCaptures())};
  Value zero = indexConst(b, loc, 0), one = indexConst(b, loc, 1);
  Value batches = memref::DimOp::create(b, loc, in.keyRanges, 0);
  Value heads = memref::DimOp::create(b, loc, in.keyRanges, 1);
  auto [queryGroups, keyGroups] = tableGroups(b, loc, in);
  Value qLen = memref::DimOp::create(b, loc, in.query, 2);
  Value kvLen = memref::DimOp::create(b, loc, in.key, 2);
  auto forEachProgram = [&](Value groups, auto body) {
    scf::ForOp::create(
        b, loc, zero, batches, one, ValueRange{},
        [&](OpBuilder &bb, Location loc, Value batch, ValueRange) {
          scf::ForOp::create(
              bb, loc, zero, heads, one, ValueRange{},
              [&](OpBuilder &hb, Location loc, Value head, ValueRange) {
                scf::ForOp::create(
                    hb, loc, zero, groups, one, ValueRange{},
                    [&](OpBuilder &gb, Location loc, Value group, ValueRange) {
                      body(gb, loc, batch, head, group);
                      scf::YieldOp::create(gb, loc);
                    });
                scf::YieldOp::create(hb, loc);
              });
          scf::YieldOp::create(bb, loc);
        });
  };
  forEachProgram(queryGroups, [&](OpBuilder &at, Location loc, Value batch,
                                  Value head, Value group) {
    buildEmptyEntry(at, loc, in.keyRanges, batch, head, group, queryGroups,
                    kvLen);
  });
  forEachProgram(keyGroups, [&](OpBuilder &at, Location loc, Value batch,
                                Value head, Value group) {
    buildEmptyEntry(at, loc, in.queryRanges, batch, head, group, keyGroups,
                    qLen);
  });
  forEachProgram(queryGroups, [&](OpBuilder &at, Location loc, Value batch,
                                  Value head, Value group) {
    buildGroupRanges(at, loc, op, in, batch, head, group,
                     indexConst(at, loc, 0), indexConst(at, loc, 1));
  });
  forEachProgram(queryGroups, [&](OpBuilder &at, Location loc, Value batch,
                                  Value head, Value group) {
    buildWholeCheck(at, loc, op, in, CheckedTable::keyRanges, batch, head,
                    group, indexConst(at, loc, 0), indexConst(at, loc, 1));
  });
  forEachProgram(keyGroups, [&](OpBuilder &at, Location loc, Value batch,
                                Value head, Value group) {
    buildWholeCheck(at, loc, op, in, CheckedTable::queryRanges, batch, head,
                    group, indexConst(at, loc, 0), indexConst(at, loc, 1));
  });
  op.erase();
}

/// The GPU target: the function's three programs as kernels of `kernels`,
/// each taking the function's parameters.
LogicalResult lowerToKernels(func::FuncOp func, BlockMaskOp op,
                             gpu::GPUModuleOp kernels) {
  if (!func.getResultTypes().empty())
    return func.emitOpError("a kernel function cannot return values");
  MLIRContext *ctx = func.getContext();
  auto launch = LaunchAttr::get(ctx, StrategyKind::simt, kThreads,
                                /*sharedBytes=*/0, /*stages=*/1,
                                /*registers=*/0);
  auto makeKernel = [&](StringRef suffix,
                        function_ref<void(OpBuilder &, Location,
                                          const BlockMaskOperands &)>
                            body) {
    OpBuilder b = OpBuilder::atBlockEnd(kernels.getBody());
    Location loc = op.getLoc();
    auto kernel = gpu::GPUFuncOp::create(
        b, func.getLoc(), (func.getName() + suffix).str(),
        b.getFunctionType(func.getArgumentTypes(), TypeRange{}));
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                    b.getUnitAttr());
    kernel.setKnownBlockSizeAttr(
        b.getDenseI32ArrayAttr({int32_t(kThreads), 1, 1}));
    kernel->setAttr(FADialect::getLaunchAttrName(), launch);
    IRMapping mapping;
    mapping.map(func.getArguments(), kernel.getArguments());
    BlockMaskOperands in{mapping.lookup(op.getQuery()),
                         mapping.lookup(op.getKey()),
                         mapping.lookup(op.getKeyRanges()),
                         mapping.lookup(op.getQueryRanges()), {}};
    for (Value capture : op.getCaptures())
      in.captures.push_back(mapping.lookup(capture));
    b.setInsertionPointToStart(&kernel.getBody().front());
    body(b, loc, in);
    gpu::ReturnOp::create(b, loc);
  };
  auto ids = [](OpBuilder &b, Location loc) {
    return std::array<Value, 3>{
        gpu::BlockIdOp::create(b, loc, gpu::Dimension::x),
        gpu::BlockIdOp::create(b, loc, gpu::Dimension::y),
        gpu::BlockIdOp::create(b, loc, gpu::Dimension::z)};
  };
  // Init: thread t of block (x, head, batch) writes entry 128 x + t.
  auto initBody = [&](bool keyTable) {
    return [&, keyTable](OpBuilder &b, Location loc,
                         const BlockMaskOperands &in) {
      auto [x, head, batch] = ids(b, loc);
      Value entry = arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, x, indexConst(b, loc, kThreads)),
          gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
      auto [queryGroups, keyGroups] = tableGroups(b, loc, in);
      if (keyTable)
        buildEmptyEntry(b, loc, in.keyRanges, batch, head, entry,
                        queryGroups, memref::DimOp::create(b, loc, in.key, 2));
      else
        buildEmptyEntry(b, loc, in.queryRanges, batch, head, entry,
                        keyGroups, memref::DimOp::create(b, loc, in.query, 2));
    };
  };
  makeKernel("_init_keys", initBody(/*keyTable=*/true));
  makeKernel("_init_queries", initBody(/*keyTable=*/false));
  // Ranges: block (group, head, batch); thread t takes squares t, t + 128,
  // ...
  makeKernel("_ranges", [&](OpBuilder &b, Location loc,
                            const BlockMaskOperands &in) {
    auto [group, head, batch] = ids(b, loc);
    buildGroupRanges(b, loc, op, in, batch, head, group,
                     gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x),
                     indexConst(b, loc, kThreads));
  });
  // Whole-range checks: block (entry, head, batch); thread t takes the
  // spanned squares t, t + 128, ...
  auto checkBody = [&](CheckedTable checked) {
    return [&, checked](OpBuilder &b, Location loc,
                        const BlockMaskOperands &in) {
      auto [entry, head, batch] = ids(b, loc);
      buildWholeCheck(b, loc, op, in, checked, batch, head, entry,
                      gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x),
                      indexConst(b, loc, kThreads));
    };
  };
  makeKernel("_whole_keys", checkBody(CheckedTable::keyRanges));
  makeKernel("_whole_queries", checkBody(CheckedTable::queryRanges));
  return success();
}

struct FALowerBlockMaskPass
    : public mlir::fa::impl::FALowerBlockMaskBase<FALowerBlockMaskPass> {
  using FALowerBlockMaskBase::FALowerBlockMaskBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (target != "gpu" && target != "cpu") {
      module.emitError() << "fa-lower-block-mask: unknown target '" << target
                         << "' (expected gpu or cpu)";
      return signalPassFailure();
    }
    SmallVector<BlockMaskOp> ops;
    module.walk([&](BlockMaskOp op) { ops.push_back(op); });
    if (ops.empty())
      return;
    if (target == "cpu") {
      for (BlockMaskOp op : ops)
        lowerToLoops(op);
      return;
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(module.getContext()));
    // fa-convert-placed-to-gpu's module, where it made one.
    auto kernels = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
    if (!kernels) {
      OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
      kernels = gpu::GPUModuleOp::create(builder, module.getLoc(),
                                         kKernelModuleName);
    }
    SmallVector<func::FuncOp> lowered;
    for (BlockMaskOp op : ops) {
      auto func = op->getParentOfType<func::FuncOp>();
      if (!func || llvm::is_contained(lowered, func) ||
          llvm::count_if(ops, [&](BlockMaskOp other) {
            return other->getParentOfType<func::FuncOp>() == func;
          }) != 1) {
        op.emitOpError("must be the only fa.block_mask of its function (the "
                       "function becomes its programs)");
        return signalPassFailure();
      }
      if (failed(lowerToKernels(func, op, kernels)))
        return signalPassFailure();
      lowered.push_back(func);
    }
    for (func::FuncOp func : lowered)
      func.erase();
  }
};

} // namespace
