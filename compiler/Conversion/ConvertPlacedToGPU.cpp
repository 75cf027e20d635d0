//===- ConvertPlacedToGPU.cpp - placed fa.grid -> gpu.func ------*- C++ -*-===//
//
// Strategy-neutral half of the GPU lowering: each placed fa.grid becomes a
// gpu.func kernel in gpu.module @fa_kernels (a function's programs become
// kernels that take the function's parameters), and each
// kernel is then lowered by the patterns of the strategy that placed it
// (compiler/Conversion/Simt, compiler/Conversion/Mma,
// compiler/Conversion/Wgmma).
//
//===----------------------------------------------------------------------===//

#include "compiler/Passes.h"
#include "compiler/StrategyPasses.h"
#include "lib/GpuTarget.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "fa-convert-placed-to-gpu"

namespace mlir::fa {
#define GEN_PASS_DEF_FACONVERTPLACEDTOGPU
#include "compiler/Passes.h.inc"

} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

static constexpr StringLiteral kKernelModuleName = "fa_kernels";

namespace {

/// Threads a register-tile encoding spreads its tile over, or 0 for tiles
/// that are not in registers.
int64_t encodingThreads(Attribute encoding) {
  if (auto blocked = dyn_cast_or_null<BlockedEncodingAttr>(encoding))
    return blocked.getNumThreads();
  if (auto mma = dyn_cast_or_null<MmaEncodingAttr>(encoding))
    return 32 * mma.getWarps();
  if (auto operand = dyn_cast_or_null<MmaOperandEncodingAttr>(encoding))
    return 32 * operand.getWarps();
  return 0;
}

/// Every register tile of the program is spread over exactly the threads
/// its launch starts (else lanes would compute elements nobody owns).
LogicalResult checkRegisterTiles(GridOp grid, LaunchAttr launch) {
  WalkResult walk = grid.walk([&](Operation *op) {
    for (Type type : op->getResultTypes()) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      int64_t threads = tensor ? encodingThreads(tensor.getEncoding()) : 0;
      if (threads && threads != launch.getComputeThreads()) {
        op->emitOpError() << "places a tile on " << threads
                          << " threads, but its program computes on "
                          << launch.getComputeThreads();
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

//===----------------------------------------------------------------------===//
// Outlining: func { fa.grid } -> gpu.func kernel
//===----------------------------------------------------------------------===//

/// The parameters of `func` that are tensor maps of its other programs
/// (fa.tensor_maps of a warp-specialized grid names the function arguments
/// fa-warp-specialize added for it).
static llvm::SmallDenseSet<unsigned> otherProgramsMaps(func::FuncOp func,
                                                       GridOp grid) {
  llvm::SmallDenseSet<unsigned> mine, others;
  func.walk([&](GridOp program) {
    auto maps =
        program->getAttrOfType<ArrayAttr>(FADialect::getTensorMapsAttrName());
    if (!maps)
      return;
    for (Attribute map : maps) // checked by the dialect
      (program == grid ? mine : others)
          .insert(unsigned(
              cast<DictionaryAttr>(map).getAs<IntegerAttr>("arg").getInt()));
  });
  for (unsigned arg : mine)
    others.erase(arg);
  return others;
}

/// The order between a kernel and the one before it: where `target`
/// launches kernels early (programmatic dependent launch), the program's
/// wait for the previous one and its release of the next one become
/// `griddepcontrol`; elsewhere kernels run one after another and both
/// mean nothing.
void lowerProgramOrder(gpu::GPUFuncOp kernel, const ::fa::GpuArch &target) {
  kernel.walk([&](Operation *op) {
    std::optional<NVVM::GridDepActionKind> action;
    if (isa<WaitPreviousProgramOp>(op))
      action = NVVM::GridDepActionKind::wait;
    else if (isa<LaunchNextProgramOp>(op))
      action = NVVM::GridDepActionKind::launch_dependents;
    else
      return;
    if (target.dependentLaunch) {
      OpBuilder builder(op);
      NVVM::GriddepcontrolOp::create(builder, op->getLoc(), *action);
    }
    op->erase();
  });
}

/// A program's (tile, head, batch) indices.
struct ProgramIndices {
  Value tile, head, batch;
};

/// The block ids as they are: block x the tile, y the head, z the batch.
ProgramIndices blockIndices(OpBuilder &b, Location loc) {
  return {gpu::BlockIdOp::create(b, loc, gpu::Dimension::x),
          gpu::BlockIdOp::create(b, loc, gpu::Dimension::y),
          gpu::BlockIdOp::create(b, loc, gpu::Dimension::z)};
}

/// The same grid read with the tile outermost (fa.grid tiles_outermost):
/// blocks start in the order of their linear index x + X (y + Y z), which
/// here runs through every (head, batch) of tile 0, then of tile 1, ...
ProgramIndices tilesOutermostIndices(OpBuilder &b, Location loc) {
  auto id = [&](gpu::Dimension d) -> Value {
    return gpu::BlockIdOp::create(b, loc, d);
  };
  auto count = [&](gpu::Dimension d) -> Value {
    return gpu::GridDimOp::create(b, loc, d);
  };
  Value heads = count(gpu::Dimension::y);
  Value programsPerTile =
      arith::MulIOp::create(b, loc, heads, count(gpu::Dimension::z));
  Value blockRow = arith::AddIOp::create(
      b, loc, id(gpu::Dimension::y),
      arith::MulIOp::create(b, loc, heads, id(gpu::Dimension::z)));
  Value linear = arith::AddIOp::create(
      b, loc, id(gpu::Dimension::x),
      arith::MulIOp::create(b, loc, count(gpu::Dimension::x), blockRow));
  Value tile = arith::DivUIOp::create(b, loc, linear, programsPerTile);
  Value rest = arith::RemUIOp::create(b, loc, linear, programsPerTile);
  return {tile, arith::RemUIOp::create(b, loc, rest, heads),
          arith::DivUIOp::create(b, loc, rest, heads)};
}

/// Moves the program `grid` of `func` into a kernel of `kernels` named
/// `name`; the grid's indices become block ids (x: tile, y: head, z:
/// batch). The kernel takes the function's parameters but the tensor maps
/// of its other programs (so that every backward kernel but the one that
/// reads maps takes LaunchPlan::backwardParams); the function's other
/// programs are left out.
FailureOr<gpu::GPUFuncOp> outlineKernel(func::FuncOp func, GridOp grid,
                                        StringRef name,
                                        gpu::GPUModuleOp kernels) {
  auto launch = grid->getAttrOfType<LaunchAttr>(FADialect::getLaunchAttrName());
  if (!launch)
    return grid.emitOpError("is not placed (run a placement pass first)");
  if (failed(checkRegisterTiles(grid, launch)))
    return failure();
  if (!func.getResultTypes().empty())
    return func.emitOpError("a kernel function cannot return values");

  llvm::SmallDenseSet<unsigned> foreign = otherProgramsMaps(func, grid);
  SmallVector<Type> parameters;
  for (BlockArgument arg : func.getArguments()) {
    if (!foreign.contains(arg.getArgNumber())) {
      parameters.push_back(arg.getType());
      continue;
    }
    // Only the program it was added for reads it.
    for (Operation *user : arg.getUsers()) {
      auto owner = user->getParentOfType<GridOp>();
      if (!owner || owner == grid)
        return user->emitOpError("uses the tensor map of another program");
    }
  }
  OpBuilder builder = OpBuilder::atBlockEnd(kernels.getBody());
  auto kernel = gpu::GPUFuncOp::create(
      builder, func.getLoc(), name,
      builder.getFunctionType(parameters, TypeRange{}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                  builder.getUnitAttr());
  kernel.setKnownBlockSizeAttr(
      builder.getDenseI32ArrayAttr({int32_t(launch.getThreads()), 1, 1}));
  kernel->setAttr(FADialect::getLaunchAttrName(), launch);
  if (Attribute maps = grid->getAttr(FADialect::getTensorMapsAttrName()))
    kernel->setAttr(FADialect::getTensorMapsAttrName(), maps);
  if (Attribute persistent = grid->getAttr(FADialect::getPersistentAttrName()))
    kernel->setAttr(FADialect::getPersistentAttrName(), persistent);


  IRMapping mapping;
  Block &entry = kernel.getBody().front();
  unsigned next = 0;
  for (BlockArgument from : func.getArguments())
    if (!foreign.contains(from.getArgNumber()))
      mapping.map(from, entry.getArgument(next++));
  builder.setInsertionPointToEnd(&entry);
  for (Operation &op : func.getBody().front()) {
    if (isa<func::ReturnOp>(op)) {
      gpu::ReturnOp::create(builder, op.getLoc());
      continue;
    }
    if (isa<GridOp>(op) && &op != grid.getOperation())
      continue;
    if (&op != grid.getOperation()) {
      builder.clone(op, mapping);
      continue;
    }
    // The program body, with the grid indices as block ids.
    Location loc = grid.getLoc();
    ProgramIndices indices = grid.getTilesOutermost()
                                 ? tilesOutermostIndices(builder, loc)
                                 : blockIndices(builder, loc);
    mapping.map(grid.getTileIndex(), indices.tile);
    mapping.map(grid.getHeadIndex(), indices.head);
    mapping.map(grid.getBatchIndex(), indices.batch);
    for (Operation &inner : grid.getBodyBlock())
      builder.clone(inner, mapping);
  }
  return kernel;
}

struct FAConvertPlacedToGPUPass
    : public mlir::fa::impl::FAConvertPlacedToGPUBase<FAConvertPlacedToGPUPass> {
  using FAConvertPlacedToGPUBase::FAConvertPlacedToGPUBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    std::optional<::fa::GpuArch> target = ::fa::lookupGpuArch(arch);
    if (!target) {
      module.emitError() << ::fa::unsupportedArchMessage(arch);
      return signalPassFailure();
    }
    // (function, program, kernel name): a function with one program makes
    // the kernel of its name; with several, program p makes <function>_p.
    struct Program {
      func::FuncOp func;
      GridOp grid;
      std::string name;
    };
    SmallVector<Program> programs;
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<GridOp> grids;
      func.walk([&](GridOp grid) { grids.push_back(grid); });
      llvm::StringSet<> names;
      for (GridOp grid : grids) {
        if (grid->getParentOp() != func) {
          grid.emitOpError("must be at the top level of its function");
          return signalPassFailure();
        }
        std::string name = func.getName().str();
        if (grids.size() > 1) {
          if (!grid.getProgram() || !names.insert(*grid.getProgram()).second) {
            grid.emitOpError("needs a program name of its own: its function "
                             "holds ")
                << grids.size() << " programs";
            return signalPassFailure();
          }
          name += "_" + grid.getProgram()->str();
        }
        if (!isKernelName(name)) {
          grid.emitOpError() << "makes a kernel named '" << name
                             << "': kernel names (the function's, with the "
                                "program's) must be identifiers "
                                "([A-Za-z_][A-Za-z0-9_]*)";
          return signalPassFailure();
        }
        programs.push_back({func, grid, name});
      }
    }
    if (programs.empty())
      return;

    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(ctx));
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    auto kernels = gpu::GPUModuleOp::create(builder, module.getLoc(),
                                            kKernelModuleName);
    // Each kernel is lowered by the patterns of the strategy that placed it
    // (the strategy of its fa.launch).
    llvm::StringMap<SmallVector<gpu::GPUFuncOp>> kernelsByStrategy;
    for (const Program &program : programs) {
      FailureOr<gpu::GPUFuncOp> kernel =
          outlineKernel(program.func, program.grid, program.name, kernels);
      if (failed(kernel))
        return signalPassFailure();
      lowerProgramOrder(*kernel, *target);
      auto launch = (*kernel)->getAttrOfType<LaunchAttr>(
          FADialect::getLaunchAttrName());
      kernelsByStrategy[stringifyStrategyKind(launch.getStrategy())]
          .push_back(*kernel);
    }
    llvm::SetVector<Operation *> outlined;
    for (const Program &program : programs)
      outlined.insert(program.func);
    for (Operation *func : outlined)
      func->erase();
    for (auto &[name, placed] : kernelsByStrategy)
      if (!lookupStrategyPasses(name)) {
        placed.front().emitOpError()
            << "was placed by strategy '" << name
            << "', which has no lowering";
        return signalPassFailure();
      }
    for (const StrategyPasses &strategy : registeredStrategyPasses()) {
      auto placed = kernelsByStrategy.find(strategy.name);
      if (placed != kernelsByStrategy.end() &&
          failed(strategy.lowerKernels(placed->second, *target)))
        return signalPassFailure();
    }
  }
};

} // namespace
