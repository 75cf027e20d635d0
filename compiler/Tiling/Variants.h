//===- Variants.h - score_mod / mask_mod regions at the tile level -*- C++ -*-===//
//
// What every lowering of a variant needs: the region inlined at one score,
// and what the compiler knows of an affine mask_mod (which K/V rows a query
// tile can see, and whether a tile is kept whole). The interval analysis
// reads the region as a formula of "affine form <= 0" constraints combined
// with and/or/not; its results are IR (built from the tile's bounds at run
// time), so one analysis serves every tile and every shape.
//
//===----------------------------------------------------------------------===//
#ifndef FA_COMPILER_TILING_VARIANTS_H
#define FA_COMPILER_TILING_VARIANTS_H

#include "dialect/FAOps.h"
#include "mlir/IR/Builders.h"

#include <array>
#include <optional>
#include <vector>

namespace mlir::fa {

/// The value a variant region yields for `args` (its block arguments in
/// order), its ops cloned at `b`'s insertion point. Its loads of captured
/// tensors clamp each index to the tensor's last (unsigned: a negative
/// index too), so that padding rows and keys, and any index the region
/// computes, read inside the tensor; they are marked fa.capture_load.
/// `uncheckedArg`: an index operand that is this block argument itself
/// goes unclamped (the caller checked that its value lies inside every
/// dimension it indexes: keyIndexedCaptureDims).
Value inlineVariantRegion(OpBuilder &b, Region &region, ValueRange args,
                          std::optional<unsigned> uncheckedArg = {});

/// The captured tensor dimensions mask_mod `maskMod`'s loads index by the
/// key itself (its kv_idx argument, not a value computed from it), as
/// (capture position among the captures, dimension), without repeats.
SmallVector<std::pair<unsigned, unsigned>>
keyIndexedCaptureDims(Region &maskMod);

/// A copy of a problem's variant region (empty for none) into a tile op's.
void cloneVariantRegion(Region &from, Region &to);

/// Whether a score_mod's math functions may use the hardware's
/// approximations (fastmath afn: tanh.approx, 2^-10.987 relative error)
/// and its divisions a multiplication by the reciprocal (arcp: an ulp of
/// f32) in a kernel of `elementType` inputs: for 16- and 8-bit inputs,
/// whose own rounding of the function's result (2^-8 bf16, 2^-11 f16) is
/// what the FlashAttention criterion measures against; f32 keeps f32
/// accuracy.
bool allowsApproximateMath(Type elementType);

/// Marks variant region `region`'s math ops fastmath afn and its divf ops
/// arcp (see allowsApproximateMath); its copies and its derivative's
/// copies of them keep the flags.
void allowApproximateMath(Region &region);

/// Whether variant region `region` reads one of its captured tensors (its
/// memref arguments). A mask_mod that does not can go to the tile range
/// ops, which only read its formula (cloneMaskWithoutCaptures); one that
/// does is data-dependent and narrows no range.
bool readsCapturedTensors(Region &region);

/// Whether variant region `region` (of `kind`) loads a captured tensor at
/// an index computed from its kv_idx argument (a key's document id, a bias
/// column): the default tiles' VariantTraits::keyIndexedCaptures.
bool readsCapturesByKey(Region &region, VariantRegion kind);

/// The arguments of a variant region at one score: `leading` (the
/// score of a score_mod, then b, h, q_idx, kv_idx, q_len, kv_len), then
/// the `captures`. (Padding rows and keys go in as they are: the loads of
/// captures clamp their indices, inlineVariantRegion.)
SmallVector<Value> variantRegionArgs(ArrayRef<Value> leading,
                                     ValueRange captures);

/// A copy of mask_mod `from` (not readsCapturedTensors) without its capture
/// arguments, the form the tile range ops take.
void cloneMaskWithoutCaptures(Region &from, Region &to);

/// The step from S = Q K^T to the scores the softmax takes, on a [R, C]
/// tile at (qStart, kvStart) of program (batch, head): fa.score_mod where
/// `scoreMod` is not empty (scaled there), then, where `maskScores`,
/// fa.mask with `mask` and the mask_mod (and its batch and head). Both
/// take the problem's `captures` with their regions. `keptWhole` (i1, may
/// be null): a block mask's word that the mask_mod keeps the whole tile.
Value buildVariantScores(OpBuilder &b, Location loc, Value scores,
                         Region &scoreMod, Region &maskMod, MaskKind mask,
                         bool maskScores, float scale, Value qStart,
                         Value kvStart, Value qLen, Value kvLen, Value batch,
                         Value head, ValueRange captures,
                         Value keptWhole = Value());

/// An fa.whole_range's [lo, hi) in i32, made before the tile loop: the
/// bounds stay live across it (the backward's dK/dV consumers run at the
/// register limit), and indices of a masked problem fit 31 bits.
struct WholeBounds {
  Value lo, hi;
};
WholeBounds buildWholeBounds(OpBuilder &b, Location loc, Value start,
                             Value end, Value batch, Value head,
                             Value table);

/// Whether the tile [tileStart, tileStart + tileSize) lies inside `whole`:
/// the i1 of fa.mask's kept_whole.
Value buildInsideWholeRange(OpBuilder &b, Location loc, Value tileStart,
                            int64_t tileSize, const WholeBounds &whole);

/// coefficient * floor((constant + sum_i coefficients[i] * argument i) /
/// divisor), divisor > 0: a chunked mask's chunk of a row or key.
struct FloorTerm {
  int64_t coefficient = 0, constant = 0, divisor = 1;
  std::array<int64_t, kNumVariantIndexArgs> coefficients{};
};

/// constant + sum_i coefficients[i] * (index argument i of a mask_mod, in
/// VariantIndexArg order) + the floor terms (their own forms are linear).
struct AffineIndexForm {
  int64_t constant = 0;
  std::array<int64_t, kNumVariantIndexArgs> coefficients{};
  std::vector<FloorTerm> floors;
};

/// A mask_mod as a formula: a leaf keeps a score iff its form is <= 0.
struct MaskFormula {
  enum class Kind { constraint, allOf, anyOf, keepAll, keepNone };
  Kind kind = Kind::keepAll;
  AffineIndexForm form; // constraint
  std::vector<MaskFormula> children; // allOf, anyOf (std::vector: the type is incomplete here)
};

/// The formula of an affine mask_mod: its result built from signed integer
/// comparisons (and eq/ne) of index sums, differences and constant
/// multiples of its arguments, with andi, ori, xori with true, and i1
/// constants. nullopt for any other mask (a data-dependent one, or one the
/// analysis does not read): such a mask is tested per element everywhere.
std::optional<MaskFormula> analyzeAffineMask(Region &maskMod);

/// Whether the keys a query row visits (the hull of those an affine
/// mask_mod keeps) grow with the row as the causal mask's do: with 4096
/// queries and keys, the last row's hull at least twice the quarter row's
/// (prefix-LM; not a sliding window). The persistent forward then pairs
/// each query tile with its mirror, as for the causal mask, so that its
/// work items are about equally long.
bool visitedKeysGrowWithQuery(Region &maskMod);

/// The scores a mask_mod keeps (with `mask`, the causal mask or none) in
/// program (`batch`, `head`) of a `qLen` x `kvLen` problem, counted exactly
/// row by row: each row's kept keys are intervals, those of a constraint
/// intersected (allOf) and united (anyOf). nullopt for a mask_mod
/// analyzeAffineMask does not read (one that reads a captured tensor).
std::optional<double> countKeptScores(Region &maskMod, MaskKind mask,
                                      int64_t qLen, int64_t kvLen,
                                      int64_t batch, int64_t head);

/// `formula` under the causal mask: constraints the causal mask implies
/// (kv - q - Sk + Sq + c <= 0 with c <= 0: a window's right edge at or past
/// the diagonal) are dropped, since both masks must keep a score (in each
/// alternative of an `or` too; one that keeps all makes the `or` keep all).
/// A formula without such a constraint comes back unchanged.
MaskFormula dropImpliedByCausal(const MaskFormula &formula);

/// A box of index values: each argument of a mask_mod between lo and hi
/// (inclusive); lo == hi for the batch, head and lengths.
struct IndexBox {
  std::array<Value, kNumVariantIndexArgs> lo, hi;
};

/// The box of the [R, C] score tile `tile` whose first element is (qStart,
/// kvStart), in the program of (batch, head).
IndexBox variantTileBox(OpBuilder &b, Location loc, Value batch, Value head,
                        Value qStart, Value kvStart, RankedTensorType tile,
                        Value qLen, Value kvLen);

/// i1: the mask keeps every point of `box`. Exact for a conjunction of
/// constraints; for or it asks whether one alternative keeps the box
/// (false may then be conservative, which only costs the per-element test).
Value buildKeepsWholeBox(OpBuilder &b, Location loc,
                         const MaskFormula &formula, const IndexBox &box);

/// The values [lo, hi] of index argument `arg` (kKeyIndexArg or
/// kQueryIndexArg) for which the mask can keep a score with the other
/// arguments in `box` (the box's range of `arg` is ignored); a null side
/// is unbounded. Constraints in which `arg` has a coefficient other than
/// +1, -1 or 0 do not bound it; one without `arg` gives all of it
/// (-+kUnboundedIndex) or none ([kUnboundedIndex, -kUnboundedIndex]), as
/// it can hold in the box or not.
constexpr int64_t kUnboundedIndex = int64_t(1) << 40;
struct IndexBounds {
  Value lo, hi;
};
IndexBounds buildIndexBounds(OpBuilder &b, Location loc,
                             const MaskFormula &formula, const IndexBox &box,
                             unsigned arg);

/// Whether `formula` can keep two key intervals with a gap between them
/// (an `or` of an alternative bounded above in kv_idx and one bounded
/// below, e.g. sink tokens and a sliding window, or a conjunction with
/// such an `or`): buildKeyGap's gap may then hold whole K/V tiles.
bool mayLeaveKeyGap(const MaskFormula &formula);

/// The keys [start, end) between the two alternatives' key intervals of
/// mayLeaveKeyGap's `or` (buildIndexBounds of each over `box`) that no row
/// of the box keeps; start >= end when the intervals meet or one is empty.
std::pair<Value, Value> buildKeyGap(OpBuilder &b, Location loc,
                                    const MaskFormula &formula,
                                    const IndexBox &box);

/// Whether the forward's K/V loop under affine mask_mod `maskMod` skips
/// the tiles of a key gap (fa.kv_tile_hole): mayLeaveKeyGap of its formula.
bool skipsKeyHole(Region &maskMod);

/// K/V tile `visit` of a loop over the visits of a range with a hole: the
/// tiles [holeBegin, holeEnd) are skipped, so visit v is tile v below
/// holeBegin and v + (holeEnd - holeBegin) from it on.
Value kvTileOfVisit(OpBuilder &b, Location loc, Value visit, Value holeBegin,
                    Value holeEnd);

/// The inverse: the visit of K/V tile `tile` (not in the hole).
Value kvVisitOfTile(OpBuilder &b, Location loc, Value tile, Value holeBegin,
                    Value holeEnd);

/// One past the last visit of a range [begin, end) with a hole: end less
/// the hole's tiles.
Value kvVisitsEnd(OpBuilder &b, Location loc, Value end, Value holeBegin,
                  Value holeEnd);

/// Whether `formula` has a constraint without index argument `arg` (whose
/// bounds may then say "none": buildIndexBounds).
bool hasConstraintWithout(const MaskFormula &formula, unsigned arg);

/// Whether, for every query row, the keys `formula` keeps are exactly the
/// interval buildIndexBounds gives for that row alone (a conjunction of
/// constraints in each of which kv_idx has coefficient +1 or -1): then a
/// row's mask is two compares per score instead of the region.
bool keepsAKeyIntervalPerRow(const MaskFormula &formula);

/// The key intervals a query row keeps where `formula` is an `or` of at
/// most `maxIntervals` alternatives that each keepsAKeyIntervalPerRow (sink
/// tokens and a window: [0, sinks) and the row's window): the
/// alternatives; nullopt otherwise (one interval is keepsAKeyIntervalPerRow's
/// case). A row's mask is then two compares per score and interval.
std::optional<SmallVector<MaskFormula>>
keyIntervalsPerRow(const MaskFormula &formula, unsigned maxIntervals);

/// Whether fa.kv_tile_range and fa.q_tile_range of mask_mod `maskMod`
/// describe one set of tile pairs, seen from either side, with contiguous
/// ranges: its formula is a conjunction of constraints in each of which
/// kv_idx and q_idx both have coefficient +1 or -1 (each side then keeps
/// the tiles whose index box meets the constraint), or neither has (no side
/// bounds by it); or the mask is not affine (no side narrows). The
/// deterministic backward counts a query tile's dQ turns from its first
/// K/V tile by these ranges; other masks take every tile there.
bool tileRangesAgree(Region &maskMod);

/// Builds in `derivative` (empty) the derivative of the score_mod region
/// `scoreMod` with respect to its score, same arguments (forward-mode over
/// the arith and math ops). Fails, naming the op, on a float op without a
/// derivative rule.
LogicalResult buildScoreModDerivative(Region &scoreMod, Region &derivative,
                                      Operation *diagnosticsOn);

} // namespace mlir::fa

#endif // FA_COMPILER_TILING_VARIANTS_H
