//===- Placement.h - What every placement pass needs ------------*- C++ -*-===//
//
// Strategy-neutral steps of placement: reading a program's tile sizes,
// giving a tile type its encoding, and bringing hoisted tile constants back
// into the program where they get placed.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_PLACEMENT_PLACEMENT_H
#define FA_COMPILER_PLACEMENT_PLACEMENT_H

#include "compiler/Utils/IRUtils.h"
#include "dialect/FAOps.h"
#include "lib/GpuTarget.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>

namespace mlir::fa {

/// Looks up `arch` (an error on `root` naming the supported ones if it is
/// unknown) and places every fa.grid under `root` that is not placed yet
/// with `place`, stopping at the first failure.
LogicalResult placeEachProgram(
    Operation *root, StringRef arch,
    llvm::function_ref<LogicalResult(GridOp, const ::fa::GpuArch &)> place);

/// The tile sizes of one program, read from its ops.
struct ProgramShape {
  int64_t blockM = 0, blockN = 0, headDim = 0;
};

/// B_r, B_c and D of a tiled attention program; an error on `grid` when it
/// is not one (no fa.online_softmax / fa.finalize).
FailureOr<ProgramShape> readProgramShape(GridOp grid);

/// `type` (a ranked tensor) with `encoding`.
RankedTensorType withEncoding(Type type, Attribute encoding);

/// A ranked tensor without an encoding: a tile not placed yet.
bool isUnplacedTile(Type type);

/// Tile constants hoisted out of the program (the initial online-softmax
/// state) are cloned into it, so that each program places its own.
void rematerializeHoistedConstants(GridOp grid);

/// Records where the tensor-core strategies keep Q, K and V: the tile
/// loaded once (Q) at `qOffset`, and the two tiles the K/V loop streams
/// (K, V) in rings of `stages` slots at `kOffset` and `vOffset`
/// (fa.shared_offset, fa.pipeline_stages). An error on `grid`, naming
/// `strategy`, when the program loads other tiles.
LogicalResult placeAttentionTiles(GridOp grid, StringRef strategy,
                                  int64_t qOffset, int64_t kOffset,
                                  int64_t vOffset, int64_t stages);

/// The tiles a backward's dkdv program loads: K and V once, before its
/// loops (`resident`); Q and dO by the query-tile loop (`streamed`); LSE
/// and D, per-row vectors of the query tile (`rowVectors`).
struct BackwardLoads {
  SmallVector<LoadTileOp> resident, streamed, rowVectors;
};

/// The loads of a dkdv program; an error on `grid`, naming `strategy`, when
/// it does not load K and V once and stream Q and dO.
FailureOr<BackwardLoads> readBackwardLoads(GridOp grid, StringRef strategy);

/// Records where the tensor-core strategies keep a dkdv program's tiles: K
/// and V at `kOffset` and `vOffset`, Q and dO in rings of `stages` slots at
/// `qOffset` and `gradOutputOffset` (fa.shared_offset,
/// fa.pipeline_stages); LSE and D in registers of `rowEncoding`, loaded
/// first (their global latency then overlaps the wait for the copies).
void placeBackwardLoads(const BackwardLoads &loads, Attribute rowEncoding,
                        int64_t kOffset, int64_t vOffset, int64_t qOffset,
                        int64_t gradOutputOffset, int64_t stages);

/// The element type of the tiles a program loads from its 2-d inputs.
Type loadedElementType(GridOp grid);

/// An error on `grid`, naming `strategy`, unless `elementType` (the tiles
/// it loads) is f16 or bf16: the tensor cores' inputs.
LogicalResult checkSixteenBitTiles(GridOp grid, Type elementType,
                                   StringRef strategy);

/// An error on the first matmul whose right operand is not a loaded shared
/// tile, naming `strategy` (it reads that operand from shared memory).
LogicalResult checkRightOperandsLoaded(GridOp grid, StringRef strategy);

/// The placed tiles of a program, for the over-budget warning.
struct PlacedTiles {
  int64_t blockM, blockN, headDim, numWarps;
};

/// Sets the program's fa.launch, warning (`what`: which placement) when the
/// model's register estimate is over `registerLimit` (the kernel will
/// spill).
void setPlacedLaunch(GridOp grid, StringRef what, StrategyKind strategy,
                     const PlacedTiles &tiles, int64_t numThreads,
                     int64_t sharedBytes, int64_t stages, int64_t registers,
                     int64_t registerLimit);

/// Gives every unplaced tile value of the program `registers` (constants,
/// op results and region arguments), except fa.load_tile results, which get
/// `shared`.
void placeTiles(GridOp grid, Attribute registers, Attribute shared);
/// The same with the register encoding chosen per tile type (programs whose
/// register tiles do not all share one layout).
void placeTiles(GridOp grid,
                llvm::function_ref<Attribute(RankedTensorType)> registers,
                Attribute shared);

} // namespace mlir::fa

#endif // FA_COMPILER_PLACEMENT_PLACEMENT_H
