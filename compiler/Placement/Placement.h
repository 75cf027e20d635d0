//===- Placement.h - What every placement pass needs ------------*- C++ -*-===//
//
// Strategy-neutral steps of placement: reading a program's tile sizes,
// giving a tile type its encoding, and bringing hoisted tile constants back
// into the program where they get placed.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_PLACEMENT_PLACEMENT_H
#define FA_COMPILER_PLACEMENT_PLACEMENT_H

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
