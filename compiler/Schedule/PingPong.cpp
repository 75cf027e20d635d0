//===- PingPong.cpp - Consumer warpgroups take turns at the MMAs -*- C++ -*-===//
//
// fa-pingpong: in a warp-specialized wgmma program with two or more
// consumer warpgroups, the warpgroups issue the matmuls of an iteration of
// the (pipelined) K/V loop in turn, so that one warpgroup's softmax runs
// while the next one's matmuls use the tensor cores (FlashAttention-3's
// inter-warpgroup ping-pong). Warpgroup w waits on named barrier 1 + w
// before its first matmul of the iteration and, after its last, arrives on
// the barrier of warpgroup (w + 1) % W; each barrier counts 256 threads (the
// waiting warpgroup and the arriving one). Before the loop the last
// warpgroup arrives on warpgroup 0's barrier (warpgroup 0 goes first);
// after it warpgroup 0 consumes the one arrival left over. Barrier 0 stays
// the block-wide one (kComputeBarrier the consumers' one).
//
//===----------------------------------------------------------------------===//

#include "compiler/Utils/IRUtils.h"
#include "compiler/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#define DEBUG_TYPE "fa-pingpong"

namespace mlir::fa {
#define GEN_PASS_DEF_FAPINGPONG
#include "compiler/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

struct FAPingPongPass
    : public mlir::fa::impl::FAPingPongBase<FAPingPongPass> {
  void runOnOperation() override {
    getOperation().walk([&](GridOp grid) {
      auto launch =
          grid->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
      // The backward's warpgroups share one query tile (they split its
      // columns): they stay in step.
      if (!launch || launch.getStrategy() != StrategyKind::wgmma ||
          launch.getProducerWarps() == 0 || !isForwardProgram(grid))
        return;
      int64_t warpgroups = launch.getComputeThreads() / kWarpgroupThreads;
      if (warpgroups < 2)
        return;
      grid.walk([&](scf::ForOp loop) {
        SmallVector<TileMatmulOp> matmuls;
        for (Operation &op : *loop.getBody())
          if (auto matmul = dyn_cast<TileMatmulOp>(op);
              matmul && matmul.getAsync())
            matmuls.push_back(matmul);
        if (!matmuls.empty())
          takeTurns(loop, matmuls.front(), matmuls.back(), warpgroups);
      });
    });
  }

  void takeTurns(scf::ForOp loop, TileMatmulOp first, TileMatmulOp last,
                 int64_t warpgroups);
};

void FAPingPongPass::takeTurns(scf::ForOp loop, TileMatmulOp first,
                               TileMatmulOp last, int64_t warpgroups) {
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value warpgroup = arith::DivUIOp::create(
      b, loc, tid, indexConst(b, loc, kWarpgroupThreads));
  Value mine = toI32(b, loc, arith::AddIOp::create(b, loc, warpgroup,
                                             indexConst(b, loc, 1)));
  Value nextWarpgroup = arith::RemUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, warpgroup, indexConst(b, loc, 1)),
      indexConst(b, loc, warpgroups));
  Value next = toI32(b, loc, arith::AddIOp::create(b, loc, nextWarpgroup,
                                             indexConst(b, loc, 1)));
  Value pair = arith::ConstantOp::create(
      b, loc, b.getI32IntegerAttr(int32_t(2 * kWarpgroupThreads)));
  Value firstBarrier = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(1));
  // Warpgroup 0 goes first: the last warpgroup lets it.
  {
    Value isLast = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq, warpgroup,
        indexConst(b, loc, warpgroups - 1));
    auto ifLast = scf::IfOp::create(b, loc, isLast);
    OpBuilder in = OpBuilder::atBlockBegin(&ifLast.getThenRegion().front());
    NVVM::BarrierArriveOp::create(in, loc, firstBarrier, pair);
  }
  // Each iteration: my turn, my matmuls, the next warpgroup's turn.
  {
    OpBuilder before(first);
    NVVM::BarrierOp::create(before, loc, TypeRange{}, mine, pair,
                            NVVM::BarrierReductionAttr(), Value());
    OpBuilder after(last->getBlock(), std::next(Block::iterator(last)));
    NVVM::BarrierArriveOp::create(after, loc, next, pair);
  }
  // The arrival left on warpgroup 0's barrier.
  {
    OpBuilder after(loop->getBlock(), std::next(Block::iterator(loop)));
    Value isFirst = arith::CmpIOp::create(
        after, loc, arith::CmpIPredicate::eq, warpgroup,
        indexConst(after, loc, 0));
    auto ifFirst = scf::IfOp::create(after, loc, isFirst);
    OpBuilder in = OpBuilder::atBlockBegin(&ifFirst.getThenRegion().front());
    NVVM::BarrierOp::create(in, loc, TypeRange{}, firstBarrier, pair,
                            NVVM::BarrierReductionAttr(), Value());
  }
}

} // namespace
