//===- Variants.cpp - score_mod / mask_mod regions at the tile level -*- C++ -*-=//
#include "compiler/Tiling/Variants.h"
#include "compiler/Utils/IRUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::fa;

Value mlir::fa::inlineVariantRegion(OpBuilder &b, Region &region,
                                    ValueRange args,
                                    std::optional<unsigned> uncheckedArg) {
  Block &block = region.front();
  IRMapping mapping;
  mapping.map(block.getArguments(), args);
  for (Operation &op : block.without_terminator()) {
    auto load = dyn_cast<memref::LoadOp>(op);
    if (!load) {
      b.clone(op, mapping);
      continue;
    }
    // Each index into [0, size - 1] (unsigned: a negative one reads the
    // last element too): padding rows and keys, and indices a region
    // computes past the tensor, read inside it. (Captures are not empty:
    // the runtime refuses an empty one.)
    Location loc = load.getLoc();
    Value tensor = mapping.lookupOrDefault(load.getMemRef());
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    SmallVector<Value> indices;
    for (auto [dim, index] : llvm::enumerate(load.getIndices())) {
      auto argument = dyn_cast<BlockArgument>(index);
      if (uncheckedArg && argument && argument.getOwner() == &block &&
          argument.getArgNumber() == *uncheckedArg) {
        indices.push_back(mapping.lookupOrDefault(index));
        continue;
      }
      Value size = memref::DimOp::create(b, loc, tensor, int64_t(dim));
      Value last = arith::SubIOp::create(b, loc, size, one);
      indices.push_back(arith::MinUIOp::create(
          b, loc, mapping.lookupOrDefault(index), last));
    }
    auto copy = memref::LoadOp::create(b, loc, tensor, indices);
    copy->setAttr(FADialect::getCaptureLoadAttrName(), b.getUnitAttr());
    mapping.map(load.getResult(), copy.getResult());
  }
  return mapping.lookupOrDefault(
      cast<YieldOp>(block.getTerminator()).getValues()[0]);
}

SmallVector<std::pair<unsigned, unsigned>>
mlir::fa::keyIndexedCaptureDims(Region &maskMod) {
  SmallVector<std::pair<unsigned, unsigned>> dims;
  Block &block = maskMod.front();
  for (auto load : block.getOps<memref::LoadOp>()) {
    auto tensor = dyn_cast<BlockArgument>(load.getMemRef());
    if (!tensor || tensor.getOwner() != &block ||
        tensor.getArgNumber() < kNumVariantIndexArgs)
      continue;
    for (auto [dim, index] : llvm::enumerate(load.getIndices())) {
      auto argument = dyn_cast<BlockArgument>(index);
      std::pair<unsigned, unsigned> entry = {
          tensor.getArgNumber() - kNumVariantIndexArgs, unsigned(dim)};
      if (argument && argument.getOwner() == &block &&
          argument.getArgNumber() == kKeyIndexArg &&
          !llvm::is_contained(dims, entry))
        dims.push_back(entry);
    }
  }
  return dims;
}

void mlir::fa::cloneVariantRegion(Region &from, Region &to) {
  IRMapping mapping;
  from.cloneInto(&to, mapping);
}

bool mlir::fa::allowsApproximateMath(Type elementType) {
  return elementType.getIntOrFloatBitWidth() < 32;
}

void mlir::fa::allowApproximateMath(Region &region) {
  region.walk([](arith::ArithFastMathInterface op) {
    arith::FastMathFlags allowed =
        isa<math::MathDialect>(op->getDialect()) ? arith::FastMathFlags::afn
        : isa<arith::DivFOp>(op)                 ? arith::FastMathFlags::arcp
                                                 : arith::FastMathFlags::none;
    if (allowed == arith::FastMathFlags::none)
      return;
    arith::FastMathFlagsAttr given = op.getFastMathFlagsAttr();
    auto flags =
        (given ? given.getValue() : arith::FastMathFlags::none) | allowed;
    op->setAttr(op.getFastMathAttrName(),
                arith::FastMathFlagsAttr::get(op->getContext(), flags));
  });
}

bool mlir::fa::readsCapturedTensors(Region &region) {
  if (region.empty())
    return false;
  return llvm::any_of(region.front().getArguments(), [](BlockArgument arg) {
    return isa<MemRefType>(arg.getType()) && !arg.use_empty();
  });
}

/// Whether `value` is computed from `argument` (within its region).
static bool computedFrom(Value value, BlockArgument argument) {
  SmallVector<Value> work = {value};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value next = work.pop_back_val();
    if (next == argument)
      return true;
    if (!seen.insert(next).second)
      continue;
    if (Operation *def = next.getDefiningOp())
      llvm::append_range(work, def->getOperands());
  }
  return false;
}

bool mlir::fa::readsCapturesByKey(Region &region, VariantRegion kind) {
  unsigned leading = kind == VariantRegion::scoreMod ? 1 : 0;
  if (region.empty() ||
      region.front().getNumArguments() <= leading + kNumVariantIndexArgs)
    return false;
  Block &block = region.front();
  BlockArgument key = block.getArgument(leading + kKeyIndexArg);
  WalkResult found = region.walk([&](memref::LoadOp load) {
    auto tensor = dyn_cast<BlockArgument>(load.getMemRef());
    if (tensor && tensor.getOwner() == &block &&
        llvm::any_of(load.getIndices(),
                     [&](Value index) { return computedFrom(index, key); }))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return found.wasInterrupted();
}

SmallVector<Value> mlir::fa::variantRegionArgs(ArrayRef<Value> leading,
                                               ValueRange captures) {
  SmallVector<Value> args(leading);
  llvm::append_range(args, captures);
  return args;
}

void mlir::fa::cloneMaskWithoutCaptures(Region &from, Region &to) {
  assert(!readsCapturedTensors(from) && "the mask reads a captured tensor");
  cloneVariantRegion(from, to);
  if (to.empty())
    return;
  Block &block = to.front();
  block.eraseArguments(kNumVariantIndexArgs,
                       block.getNumArguments() - kNumVariantIndexArgs);
}

Value mlir::fa::buildVariantScores(OpBuilder &b, Location loc, Value scores,
                                   Region &scoreMod, Region &maskMod,
                                   MaskKind mask, bool maskScores, float scale,
                                   Value qStart, Value kvStart, Value qLen,
                                   Value kvLen, Value batch, Value head,
                                   ValueRange captures, Value keptWhole) {
  if (!scoreMod.empty()) {
    auto modified =
        ScoreModOp::create(b, loc, scores, qStart, kvStart, qLen, kvLen,
                           batch, head, captures, b.getF32FloatAttr(scale));
    cloneVariantRegion(scoreMod, modified.getScoreMod());
    scores = modified;
  }
  if (!maskScores)
    return scores;
  bool withMod = !maskMod.empty();
  auto masked = MaskOp::create(b, loc, scores.getType(), scores, qStart,
                               kvStart, qLen, kvLen,
                               withMod ? batch : Value(),
                               withMod ? head : Value(),
                               withMod ? captures : ValueRange(),
                               withMod ? keptWhole : Value(), mask);
  cloneVariantRegion(maskMod, masked.getMaskMod());
  return masked;
}

WholeBounds mlir::fa::buildWholeBounds(OpBuilder &b, Location loc,
                                       Value start, Value end, Value batch,
                                       Value head, Value table) {
  auto range = WholeRangeOp::create(b, loc, start, end, batch, head, table);
  auto toI32 = [&](Value index) -> Value {
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
  };
  return {toI32(range.getLo()), toI32(range.getHi())};
}

Value mlir::fa::buildInsideWholeRange(OpBuilder &b, Location loc,
                                      Value tileStart, int64_t tileSize,
                                      const WholeBounds &whole) {
  Value start = arith::IndexCastOp::create(b, loc, b.getI32Type(), tileStart);
  Value end = arith::AddIOp::create(
      b, loc, start, arith::ConstantIntOp::create(b, loc, b.getI32Type(),
                                                  tileSize));
  Value fromLo = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                       whole.lo, start);
  Value toHi = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, end,
                                     whole.hi);
  return arith::AndIOp::create(b, loc, fromLo, toHi);
}

//===----------------------------------------------------------------------===//
// Reading the region
//===----------------------------------------------------------------------===//

namespace {

/// a + sign * b, nullopt on overflow.
std::optional<AffineIndexForm> combine(const AffineIndexForm &a,
                                       const AffineIndexForm &b, int64_t sign) {
  AffineIndexForm sum;
  auto add = [&](int64_t x, int64_t y, int64_t &out) {
    int64_t scaled;
    return !llvm::MulOverflow(y, sign, scaled) &&
           !llvm::AddOverflow(x, scaled, out);
  };
  if (!add(a.constant, b.constant, sum.constant))
    return std::nullopt;
  for (unsigned i = 0; i < kNumVariantIndexArgs; ++i)
    if (!add(a.coefficients[i], b.coefficients[i], sum.coefficients[i]))
      return std::nullopt;
  // Floor terms of one form and divisor add up (floor(x / c) - floor(x /
  // c) cancels); the others are kept side by side.
  sum.floors = a.floors;
  for (FloorTerm term : b.floors) {
    if (llvm::MulOverflow(term.coefficient, sign, term.coefficient))
      return std::nullopt;
    auto same = llvm::find_if(sum.floors, [&](const FloorTerm &other) {
      return other.divisor == term.divisor && other.constant == term.constant &&
             other.coefficients == term.coefficients;
    });
    if (same == sum.floors.end()) {
      sum.floors.push_back(term);
      continue;
    }
    if (llvm::AddOverflow(same->coefficient, term.coefficient,
                          same->coefficient))
      return std::nullopt;
  }
  llvm::erase_if(sum.floors,
                 [](const FloorTerm &term) { return term.coefficient == 0; });
  return sum;
}

std::optional<AffineIndexForm> scaleForm(const AffineIndexForm &a,
                                         int64_t factor) {
  return combine(AffineIndexForm{}, a, factor);
}

bool isConstantForm(const AffineIndexForm &form) {
  return form.floors.empty() &&
         llvm::all_of(form.coefficients, [](int64_t c) { return c == 0; });
}

/// The affine form of an integer value of the mask region.
std::optional<AffineIndexForm> formOf(Value value, Block &block) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (arg.getOwner() != &block || arg.getArgNumber() >= kNumVariantIndexArgs)
      return std::nullopt;
    AffineIndexForm form;
    form.coefficients[arg.getArgNumber()] = 1;
    return form;
  }
  Operation *op = value.getDefiningOp();
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant))) {
    if (constant.getSignificantBits() > 64)
      return std::nullopt;
    AffineIndexForm form;
    form.constant = constant.getSExtValue();
    return form;
  }
  // index <-> integer casts keep the value (masks compare rows, far from
  // any width's limit).
  if (isa<arith::IndexCastOp>(op))
    return formOf(op->getOperand(0), block);
  auto binary = [&]() -> std::optional<std::pair<AffineIndexForm,
                                                 AffineIndexForm>> {
    std::optional<AffineIndexForm> lhs = formOf(op->getOperand(0), block);
    std::optional<AffineIndexForm> rhs = formOf(op->getOperand(1), block);
    if (!lhs || !rhs)
      return std::nullopt;
    return std::make_pair(*lhs, *rhs);
  };
  if (isa<arith::AddIOp, arith::SubIOp>(op)) {
    auto operands = binary();
    if (!operands)
      return std::nullopt;
    return combine(operands->first, operands->second,
                   isa<arith::AddIOp>(op) ? 1 : -1);
  }
  if (isa<arith::MulIOp>(op)) {
    auto operands = binary();
    if (!operands)
      return std::nullopt;
    auto [lhs, rhs] = *operands;
    if (isConstantForm(rhs))
      return scaleForm(lhs, rhs.constant);
    if (isConstantForm(lhs))
      return scaleForm(rhs, lhs.constant);
  }
  // floor(form / c), c > 0 a constant: a chunk's index (chunked masks).
  if (isa<arith::FloorDivSIOp>(op)) {
    auto operands = binary();
    if (!operands)
      return std::nullopt;
    auto [lhs, rhs] = *operands;
    if (!isConstantForm(rhs) || rhs.constant <= 0 || !lhs.floors.empty())
      return std::nullopt;
    AffineIndexForm form;
    if (isConstantForm(lhs)) {
      form.constant = llvm::divideFloorSigned(lhs.constant, rhs.constant);
      return form;
    }
    form.floors.push_back(
        FloorTerm{1, lhs.constant, rhs.constant, lhs.coefficients});
    return form;
  }
  return std::nullopt;
}

MaskFormula constraint(const AffineIndexForm &form) {
  MaskFormula f;
  f.kind = MaskFormula::Kind::constraint;
  f.form = form;
  return f;
}

MaskFormula group(MaskFormula::Kind kind, std::vector<MaskFormula> parts) {
  MaskFormula f;
  f.kind = kind;
  f.children = std::move(parts);
  return f;
}

/// form + c <= 0 (nullopt on overflow).
std::optional<MaskFormula> shifted(const AffineIndexForm &form, int64_t c) {
  AffineIndexForm shift;
  shift.constant = c;
  std::optional<AffineIndexForm> sum = combine(form, shift, 1);
  if (!sum)
    return std::nullopt;
  return constraint(*sum);
}

/// not f: a constraint F <= 0 becomes -F + 1 <= 0 (integers), and
/// De Morgan for the groups.
std::optional<MaskFormula> negate(const MaskFormula &f) {
  using Kind = MaskFormula::Kind;
  switch (f.kind) {
  case Kind::keepAll:
    return group(Kind::keepNone, {});
  case Kind::keepNone:
    return group(Kind::keepAll, {});
  case Kind::constraint: {
    std::optional<AffineIndexForm> negated = scaleForm(f.form, -1);
    if (!negated)
      return std::nullopt;
    return shifted(*negated, 1);
  }
  case Kind::allOf:
  case Kind::anyOf: {
    std::vector<MaskFormula> parts;
    for (const MaskFormula &child : f.children) {
      std::optional<MaskFormula> n = negate(child);
      if (!n)
        return std::nullopt;
      parts.push_back(*n);
    }
    return group(f.kind == Kind::allOf ? Kind::anyOf : Kind::allOf,
                 std::move(parts));
  }
  }
  return std::nullopt;
}

std::optional<MaskFormula> formulaOf(Value value, Block &block) {
  using Kind = MaskFormula::Kind;
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return group(constant.isZero() ? Kind::keepNone : Kind::keepAll, {});
  Operation *op = value.getDefiningOp();
  if (!op)
    return std::nullopt;
  if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
    std::optional<AffineIndexForm> lhs = formOf(cmp.getLhs(), block);
    std::optional<AffineIndexForm> rhs = formOf(cmp.getRhs(), block);
    if (!lhs || !rhs)
      return std::nullopt;
    std::optional<AffineIndexForm> d = combine(*lhs, *rhs, -1); // lhs - rhs
    std::optional<AffineIndexForm> negD = combine(*rhs, *lhs, -1);
    if (!d || !negD)
      return std::nullopt;
    switch (cmp.getPredicate()) {
    case arith::CmpIPredicate::sle:
      return constraint(*d);
    case arith::CmpIPredicate::slt:
      return shifted(*d, 1);
    case arith::CmpIPredicate::sge:
      return constraint(*negD);
    case arith::CmpIPredicate::sgt:
      return shifted(*negD, 1);
    case arith::CmpIPredicate::eq:
      return group(Kind::allOf, {constraint(*d), constraint(*negD)});
    case arith::CmpIPredicate::ne: {
      std::optional<MaskFormula> below = shifted(*d, 1);
      std::optional<MaskFormula> above = shifted(*negD, 1);
      if (!below || !above)
        return std::nullopt;
      return group(Kind::anyOf, {*below, *above});
    }
    default:
      // Unsigned comparisons wrap around below zero: not read.
      return std::nullopt;
    }
  }
  if (isa<arith::AndIOp, arith::OrIOp>(op)) {
    std::optional<MaskFormula> lhs = formulaOf(op->getOperand(0), block);
    std::optional<MaskFormula> rhs = formulaOf(op->getOperand(1), block);
    if (!lhs || !rhs)
      return std::nullopt;
    return group(isa<arith::AndIOp>(op) ? Kind::allOf : Kind::anyOf,
                 {*lhs, *rhs});
  }
  if (isa<arith::XOrIOp>(op)) {
    // x xor true = not x
    for (int side = 0; side < 2; ++side) {
      APInt other;
      if (matchPattern(op->getOperand(1 - side), m_ConstantInt(&other))) {
        std::optional<MaskFormula> inner =
            formulaOf(op->getOperand(side), block);
        if (!inner)
          return std::nullopt;
        return other.isZero() ? inner : negate(*inner);
      }
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<MaskFormula> mlir::fa::analyzeAffineMask(Region &maskMod) {
  Block &block = maskMod.front();
  return formulaOf(cast<YieldOp>(block.getTerminator()).getValues()[0], block);
}

/// Whether the causal mask (kv <= q + Sk - Sq) implies `form <= 0`.
static bool impliedByCausal(const AffineIndexForm &form) {
  std::array<int64_t, kNumVariantIndexArgs> causal{};
  causal[kKeyIndexArg] = 1;
  causal[kQueryIndexArg] = -1;
  causal[kKeyLenArg] = -1;
  causal[kQueryLenArg] = 1;
  return form.floors.empty() && form.coefficients == causal &&
         form.constant <= 0;
}

MaskFormula mlir::fa::dropImpliedByCausal(const MaskFormula &formula) {
  using Kind = MaskFormula::Kind;
  if (formula.kind == Kind::constraint && impliedByCausal(formula.form))
    return MaskFormula{Kind::keepAll, {}, {}};
  if (formula.kind == Kind::anyOf) {
    // Both masks keep a score: the causal mask and one alternative.
    MaskFormula alternatives{Kind::anyOf, {}, {}};
    for (const MaskFormula &child : formula.children) {
      alternatives.children.push_back(dropImpliedByCausal(child));
      if (alternatives.children.back().kind == Kind::keepAll)
        return MaskFormula{Kind::keepAll, {}, {}};
    }
    return alternatives;
  }
  if (formula.kind != Kind::allOf)
    return formula;
  MaskFormula kept{Kind::allOf, {}, {}};
  for (const MaskFormula &child : formula.children)
    if (!(child.kind == Kind::constraint && impliedByCausal(child.form)))
      kept.children.push_back(dropImpliedByCausal(child));
  if (kept.children.size() == 1)
    return kept.children.front();
  return kept;
}

//===----------------------------------------------------------------------===//
// Evaluating a formula on a box
//===----------------------------------------------------------------------===//

IndexBox mlir::fa::variantTileBox(OpBuilder &b, Location loc, Value batch,
                                  Value head, Value qStart, Value kvStart,
                                  RankedTensorType tile, Value qLen,
                                  Value kvLen) {
  IndexBox box;
  box.lo[kBatchArg] = box.hi[kBatchArg] = batch;
  box.lo[kHeadArg] = box.hi[kHeadArg] = head;
  box.lo[kQueryIndexArg] = qStart;
  box.hi[kQueryIndexArg] = addConst(b, loc, qStart, tile.getDimSize(0) - 1);
  box.lo[kKeyIndexArg] = kvStart;
  box.hi[kKeyIndexArg] = addConst(b, loc, kvStart, tile.getDimSize(1) - 1);
  box.lo[kQueryLenArg] = box.hi[kQueryLenArg] = qLen;
  box.lo[kKeyLenArg] = box.hi[kKeyLenArg] = kvLen;
  return box;
}

/// The linear part of a floor term.
static AffineIndexForm innerForm(const FloorTerm &term) {
  AffineIndexForm inner;
  inner.constant = term.constant;
  inner.coefficients = term.coefficients;
  return inner;
}

/// Whether index argument `arg` is in a floor term of `form`.
static bool inFloorTerms(const AffineIndexForm &form, unsigned arg) {
  return llvm::any_of(form.floors, [&](const FloorTerm &term) {
    return term.coefficients[arg] != 0;
  });
}

/// The floor term through which `form` bounds index `arg` by whole chunks
/// (a chunked mask's chunk of it): `arg` in that one floor term only, with
/// coefficient 1 there, the term's own coefficient +-1, and no `arg`
/// outside floor terms. Null if `arg` appears in a floor term any other
/// way (or in none).
static const FloorTerm *chunkTerm(const AffineIndexForm &form, unsigned arg) {
  auto holdsArg = [&](const FloorTerm &term) {
    return term.coefficients[arg] != 0;
  };
  if (form.coefficients[arg] != 0 || llvm::count_if(form.floors, holdsArg) != 1)
    return nullptr;
  const FloorTerm &term = *llvm::find_if(form.floors, holdsArg);
  if (term.coefficients[arg] != 1 ||
      (term.coefficient != 1 && term.coefficient != -1))
    return nullptr;
  return &term;
}

/// The largest (or smallest) value of `form` over `box`: each argument at
/// the end its coefficient's sign picks (a floor term's form too: the
/// floor keeps the order; for a sum of floor terms this bounds the
/// extreme rather than meeting it).
static Value formExtreme(OpBuilder &b, Location loc,
                         const AffineIndexForm &form, const IndexBox &box,
                         bool largest) {
  Value sum = indexConst(b, loc, form.constant);
  for (unsigned i = 0; i < kNumVariantIndexArgs; ++i) {
    int64_t c = form.coefficients[i];
    if (c == 0)
      continue;
    Value x = (c > 0) == largest ? box.hi[i] : box.lo[i];
    Value term = c == 1 ? x : mulConst(b, loc, x, c);
    sum = arith::AddIOp::create(b, loc, sum, term);
  }
  for (const FloorTerm &floor : form.floors) {
    Value x = formExtreme(b, loc, innerForm(floor), box,
                          (floor.coefficient > 0) == largest);
    Value chunk = arith::FloorDivSIOp::create(
        b, loc, x, indexConst(b, loc, floor.divisor));
    Value term = floor.coefficient == 1
                     ? chunk
                     : mulConst(b, loc, chunk, floor.coefficient);
    sum = arith::AddIOp::create(b, loc, sum, term);
  }
  return sum;
}

static Value boolConst(OpBuilder &b, Location loc, bool value) {
  return arith::ConstantIntOp::create(b, loc, value, 1);
}

Value mlir::fa::buildKeepsWholeBox(OpBuilder &b, Location loc,
                                   const MaskFormula &formula,
                                   const IndexBox &box) {
  using Kind = MaskFormula::Kind;
  switch (formula.kind) {
  case Kind::keepAll:
    return boolConst(b, loc, true);
  case Kind::keepNone:
    return boolConst(b, loc, false);
  case Kind::constraint:
    // The form's largest value over the box (with floor terms a bound of
    // it, each term at its own extreme; for a chunk comparison the exact
    // one): a tile whose rows and keys all lie in one chunk is whole.
    return arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::sle,
        formExtreme(b, loc, formula.form, box, /*largest=*/true),
        indexConst(b, loc, 0));
  case Kind::allOf:
  case Kind::anyOf: {
    Value result;
    for (const MaskFormula &child : formula.children) {
      Value part = buildKeepsWholeBox(b, loc, child, box);
      if (!result)
        result = part;
      else if (formula.kind == Kind::allOf)
        result = arith::AndIOp::create(b, loc, result, part);
      else
        result = arith::OrIOp::create(b, loc, result, part);
    }
    return result ? result : boolConst(b, loc, formula.kind == Kind::allOf);
  }
  }
  return boolConst(b, loc, false);
}

IndexBounds mlir::fa::buildIndexBounds(OpBuilder &b, Location loc,
                                       const MaskFormula &formula,
                                       const IndexBox &box, unsigned arg) {
  using Kind = MaskFormula::Kind;
  switch (formula.kind) {
  case Kind::keepAll:
    return {};
  case Kind::keepNone:
    return {indexConst(b, loc, 1), indexConst(b, loc, 0)};
  case Kind::constraint: {
    // c * x + rest <= 0 with c = +1: x <= -rest, at most -min(rest);
    // with c = -1: x >= rest, at least min(rest).
    if (inFloorTerms(formula.form, arg)) {
      // d * floor((x + g) / C) + rest <= 0 with d = +-1 and x = `arg` in
      // that one floor term alone (chunkTerm): d = 1, x + g <= C * (1 -
      // min(rest)) - 1; d = -1, x + g >= C * min(rest). Any other shape
      // does not bound x.
      const FloorTerm *chunk = chunkTerm(formula.form, arg);
      if (!chunk)
        return {};
      FloorTerm floor = *chunk;
      AffineIndexForm rest = formula.form;
      rest.floors.erase(rest.floors.begin() +
                        (chunk - formula.form.floors.data()));
      AffineIndexForm shift = innerForm(floor);
      shift.coefficients[arg] = 0;
      Value leastRest = formExtreme(b, loc, rest, box, /*largest=*/false);
      Value divisor = indexConst(b, loc, floor.divisor);
      if (floor.coefficient == 1) {
        Value chunkEnd = arith::MulIOp::create(
            b, loc, divisor,
            arith::SubIOp::create(b, loc, indexConst(b, loc, 1), leastRest));
        Value last = arith::SubIOp::create(
            b, loc, addConst(b, loc, chunkEnd, -1),
            formExtreme(b, loc, shift, box, /*largest=*/false));
        return {Value(), last};
      }
      Value chunkStart = arith::MulIOp::create(b, loc, divisor, leastRest);
      return {arith::SubIOp::create(
                  b, loc, chunkStart,
                  formExtreme(b, loc, shift, box, /*largest=*/true)),
              Value()};
    }
    AffineIndexForm rest = formula.form;
    int64_t c = rest.coefficients[arg];
    rest.coefficients[arg] = 0;
    if (c == 0) {
      // Without `arg` the constraint keeps every value of it or none, as
      // the box's other indices allow: none where even the least of the
      // form over the box is positive (prefix-LM's kv < n for a K/V tile
      // past the prefix: its `or` with the causal side then bounds the
      // query rows by the causal side alone, not by all of them).
      Value least = formExtreme(b, loc, rest, box, /*largest=*/false);
      Value holds = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                          least, indexConst(b, loc, 0));
      Value far = indexConst(b, loc, kUnboundedIndex);
      Value nearFar = indexConst(b, loc, -kUnboundedIndex);
      return {arith::SelectOp::create(b, loc, holds, nearFar, far),
              arith::SelectOp::create(b, loc, holds, far, nearFar)};
    }
    if (c != 1 && c != -1)
      return {};
    Value least = formExtreme(b, loc, rest, box, /*largest=*/false);
    if (c == -1)
      return {least, Value()};
    return {Value(), arith::SubIOp::create(b, loc, indexConst(b, loc, 0),
                                           least)};
  }
  case Kind::allOf:
  case Kind::anyOf: {
    bool all = formula.kind == Kind::allOf;
    IndexBounds result;
    bool first = true;
    for (const MaskFormula &child : formula.children) {
      IndexBounds part = buildIndexBounds(b, loc, child, box, arg);
      if (first) {
        result = part;
        first = false;
        continue;
      }
      // allOf: the tighter of each side (an unbounded side gives way);
      // anyOf: the looser (an unbounded side wins).
      auto merge = [&](Value x, Value y, bool lower) -> Value {
        if (!x || !y)
          return all ? (x ? x : y) : Value();
        bool takeMax = lower == all;
        return takeMax ? Value(arith::MaxSIOp::create(b, loc, x, y))
                       : Value(arith::MinSIOp::create(b, loc, x, y));
      };
      result.lo = merge(result.lo, part.lo, /*lower=*/true);
      result.hi = merge(result.hi, part.hi, /*lower=*/false);
    }
    return result;
  }
  }
  return {};
}

/// Whether every key `formula` keeps is bounded above (below) by its
/// constraints: a constraint with kv_idx at coefficient +1 (-1), alone or
/// in a chunk's floor term (chunkTerm); a conjunction through any part, an
/// `or` through all of them.
static bool boundsKeys(const MaskFormula &formula, bool above) {
  using Kind = MaskFormula::Kind;
  int64_t sign = above ? 1 : -1;
  switch (formula.kind) {
  case Kind::keepNone:
    return true;
  case Kind::keepAll:
    return false;
  case Kind::constraint: {
    if (const FloorTerm *chunk = chunkTerm(formula.form, kKeyIndexArg))
      return chunk->coefficient == sign;
    return formula.form.floors.empty() &&
           formula.form.coefficients[kKeyIndexArg] == sign;
  }
  case Kind::allOf:
    return llvm::any_of(formula.children, [&](const MaskFormula &child) {
      return boundsKeys(child, above);
    });
  case Kind::anyOf:
    return llvm::all_of(formula.children, [&](const MaskFormula &child) {
      return boundsKeys(child, above);
    });
  }
  return false;
}

bool mlir::fa::mayLeaveKeyGap(const MaskFormula &formula) {
  using Kind = MaskFormula::Kind;
  if (formula.kind == Kind::allOf)
    return llvm::any_of(formula.children, mayLeaveKeyGap);
  if (formula.kind != Kind::anyOf || formula.children.size() != 2)
    return false;
  const MaskFormula &first = formula.children[0], &second = formula.children[1];
  return (boundsKeys(first, /*above=*/true) &&
          boundsKeys(second, /*above=*/false)) ||
         (boundsKeys(second, /*above=*/true) &&
          boundsKeys(first, /*above=*/false));
}

std::pair<Value, Value> mlir::fa::buildKeyGap(OpBuilder &b, Location loc,
                                              const MaskFormula &formula,
                                              const IndexBox &box) {
  if (formula.kind == MaskFormula::Kind::allOf) {
    // The conjunction keeps a subset of the `or`'s keys: its gap holds.
    for (const MaskFormula &child : formula.children)
      if (mayLeaveKeyGap(child))
        return buildKeyGap(b, loc, child, box);
  }
  if (!mayLeaveKeyGap(formula) || formula.kind != MaskFormula::Kind::anyOf) {
    Value none = indexConst(b, loc, 0);
    return {none, none};
  }
  // Each alternative's keys [lo, hi] over the box (an unbounded side at
  // -+kUnboundedIndex); between them, if both hold a key, the keys past
  // the lower interval's end up to the upper one's start.
  auto bounds = [&](const MaskFormula &child) -> std::pair<Value, Value> {
    IndexBounds keys = buildIndexBounds(b, loc, child, box, kKeyIndexArg);
    return {keys.lo ? keys.lo : indexConst(b, loc, -kUnboundedIndex),
            keys.hi ? keys.hi : indexConst(b, loc, kUnboundedIndex)};
  };
  auto [firstLo, firstHi] = bounds(formula.children[0]);
  auto [secondLo, secondHi] = bounds(formula.children[1]);
  Value start =
      addConst(b, loc, arith::MinSIOp::create(b, loc, firstHi, secondHi), 1);
  Value end = arith::MaxSIOp::create(b, loc, firstLo, secondLo);
  Value bothKeep = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, firstLo,
                            firstHi),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, secondLo,
                            secondHi));
  return {start, arith::SelectOp::create(b, loc, bothKeep, end, start)};
}

bool mlir::fa::skipsKeyHole(Region &maskMod) {
  std::optional<MaskFormula> formula = analyzeAffineMask(maskMod);
  return formula && mayLeaveKeyGap(*formula);
}

Value mlir::fa::kvTileOfVisit(OpBuilder &b, Location loc, Value visit,
                              Value holeBegin, Value holeEnd) {
  Value pastHole = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                         visit, holeBegin);
  Value skipped = arith::SelectOp::create(
      b, loc, pastHole, arith::SubIOp::create(b, loc, holeEnd, holeBegin),
      indexConst(b, loc, 0));
  return arith::AddIOp::create(b, loc, visit, skipped);
}

Value mlir::fa::kvVisitOfTile(OpBuilder &b, Location loc, Value tile,
                              Value holeBegin, Value holeEnd) {
  Value pastHole =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, tile, holeEnd);
  Value skipped = arith::SelectOp::create(
      b, loc, pastHole, arith::SubIOp::create(b, loc, holeEnd, holeBegin),
      indexConst(b, loc, 0));
  return arith::SubIOp::create(b, loc, tile, skipped);
}

Value mlir::fa::kvVisitsEnd(OpBuilder &b, Location loc, Value end,
                            Value holeBegin, Value holeEnd) {
  return arith::SubIOp::create(
      b, loc, end, arith::SubIOp::create(b, loc, holeEnd, holeBegin));
}

bool mlir::fa::hasConstraintWithout(const MaskFormula &formula, unsigned arg) {
  if (formula.kind == MaskFormula::Kind::constraint)
    return formula.form.coefficients[arg] == 0 &&
           !inFloorTerms(formula.form, arg);
  return llvm::any_of(formula.children, [&](const MaskFormula &child) {
    return hasConstraintWithout(child, arg);
  });
}

bool mlir::fa::keepsAKeyIntervalPerRow(const MaskFormula &formula) {
  using Kind = MaskFormula::Kind;
  switch (formula.kind) {
  case Kind::keepAll:
    return true;
  case Kind::constraint: {
    int64_t c = formula.form.coefficients[kKeyIndexArg];
    return formula.form.floors.empty() && (c == 1 || c == -1);
  }
  case Kind::allOf:
    return llvm::all_of(formula.children, keepsAKeyIntervalPerRow);
  case Kind::anyOf:
  case Kind::keepNone:
    return false;
  }
  return false;
}

std::optional<SmallVector<MaskFormula>>
mlir::fa::keyIntervalsPerRow(const MaskFormula &formula,
                             unsigned maxIntervals) {
  if (formula.kind != MaskFormula::Kind::anyOf ||
      formula.children.size() > maxIntervals ||
      !llvm::all_of(formula.children, keepsAKeyIntervalPerRow))
    return std::nullopt;
  return SmallVector<MaskFormula>(formula.children.begin(),
                                  formula.children.end());
}

/// Whether `form <= 0` compares the chunks of kv_idx and q_idx: two floor
/// terms of opposite unit coefficients, one of kv_idx alone, one of q_idx
/// alone (plus constants and the non-index arguments), and no other index
/// term. buildIndexBounds bounds each index by whole chunks there, from
/// the other's chunk at the box's end: exactly the tiles whose box meets
/// the constraint, from both sides.
static bool comparesChunks(const AffineIndexForm &form) {
  const FloorTerm *key = chunkTerm(form, kKeyIndexArg);
  const FloorTerm *query = chunkTerm(form, kQueryIndexArg);
  return form.floors.size() == 2 && key && query && key != query &&
         key->coefficient == -query->coefficient;
}

/// See tileRangesAgree: `formula` is a conjunction of constraints that
/// bound kv_idx and q_idx alike: each side to the tiles whose box meets
/// the constraint (a unit coefficient; none, which keeps all or nothing;
/// a chunk comparison), or neither side (another coefficient).
static bool boundsBothIndicesAlike(const MaskFormula &formula) {
  using Kind = MaskFormula::Kind;
  switch (formula.kind) {
  case Kind::keepAll:
  case Kind::keepNone:
    return true;
  case Kind::constraint: {
    if (!formula.form.floors.empty())
      return comparesChunks(formula.form);
    auto exact = [&](unsigned arg) {
      int64_t c = formula.form.coefficients[arg];
      return c == 0 || c == 1 || c == -1;
    };
    return exact(kKeyIndexArg) == exact(kQueryIndexArg);
  }
  case Kind::allOf:
    return llvm::all_of(formula.children, boundsBothIndicesAlike);
  case Kind::anyOf:
    return false;
  }
  return false;
}

bool mlir::fa::tileRangesAgree(Region &maskMod) {
  std::optional<MaskFormula> formula = analyzeAffineMask(maskMod);
  return !formula || boundsBothIndicesAlike(*formula);
}

//===----------------------------------------------------------------------===//
// The derivative of a score_mod
//===----------------------------------------------------------------------===//

namespace {

/// Forward-mode differentiation of a score_mod's ops with respect to the
/// score: each float value's tangent (null = 0, which keeps the derivative
/// of score-independent parts free).
class ScoreModDifferentiator {
public:
  ScoreModDifferentiator(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  /// The tangent of `op`'s result from its operands' (`clone` is `op`
  /// rebuilt on the new block's values); failure when `op` has none.
  LogicalResult differentiate(Operation &op, Operation *clone);

  DenseMap<Value, Value> tangent; // keyed by the clone's values

private:
  Value constant(double value, Type type) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
  }
  Value add(Value x, Value y) {
    if (!x)
      return y;
    if (!y)
      return x;
    return arith::AddFOp::create(b, loc, x, y);
  }
  Value mul(Value x, Value y) {
    if (!x || !y)
      return Value();
    return arith::MulFOp::create(b, loc, x, y);
  }
  Value neg(Value x) { return x ? arith::NegFOp::create(b, loc, x) : x; }
  Value div(Value x, Value y) {
    return x ? arith::DivFOp::create(b, loc, x, y) : x;
  }
  Value select(Value c, Value x, Value y, Type type) {
    if (!x && !y)
      return Value();
    if (!x)
      x = constant(0.0, type);
    if (!y)
      y = constant(0.0, type);
    return arith::SelectOp::create(b, loc, c, x, y);
  }

  OpBuilder &b;
  Location loc;
};

LogicalResult ScoreModDifferentiator::differentiate(Operation &op,
                                                    Operation *clone) {
  if (clone->getNumResults() != 1 ||
      !isa<FloatType>(clone->getResult(0).getType()))
    return success(); // integers, indices, i1: no tangent
  Value r = clone->getResult(0);
  Type type = r.getType();
  auto x = [&](unsigned i) { return clone->getOperand(i); };
  auto dx = [&](unsigned i) { return tangent.lookup(clone->getOperand(i)); };
  bool anyTangent = llvm::any_of(clone->getOperands(), [&](Value v) {
    return bool(tangent.lookup(v));
  });
  if (!anyTangent)
    return success(); // constants, casts of indices, score-free parts
  Value d;
  if (isa<arith::AddFOp>(op))
    d = add(dx(0), dx(1));
  else if (isa<arith::SubFOp>(op))
    d = add(dx(0), neg(dx(1)));
  else if (isa<arith::MulFOp>(op))
    d = add(mul(dx(0), x(1)), mul(x(0), dx(1)));
  else if (isa<arith::DivFOp>(op)) // r = x / y: (dx - r dy) / y
    d = div(add(dx(0), neg(mul(r, dx(1)))), x(1));
  else if (isa<arith::NegFOp>(op))
    d = neg(dx(0));
  else if (isa<arith::MaximumFOp, arith::MaxNumFOp>(op))
    d = select(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, x(0),
                                     x(1)),
               dx(0), dx(1), type);
  else if (isa<arith::MinimumFOp, arith::MinNumFOp>(op))
    d = select(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLE, x(0),
                                     x(1)),
               dx(0), dx(1), type);
  else if (isa<arith::SelectOp>(op))
    d = select(x(0), dx(1), dx(2), type);
  else if (isa<arith::ExtFOp, arith::TruncFOp>(op))
    d = dx(0) ? (isa<arith::ExtFOp>(op)
                     ? Value(arith::ExtFOp::create(b, loc, type, dx(0)))
                     : Value(arith::TruncFOp::create(b, loc, type, dx(0))))
              : Value();
  else if (isa<math::TanhOp>(op)) // 1 - tanh^2
    d = mul(dx(0), arith::SubFOp::create(b, loc, constant(1.0, type),
                                         arith::MulFOp::create(b, loc, r, r)));
  else if (isa<math::ExpOp>(op))
    d = mul(dx(0), r);
  else if (isa<math::Exp2Op>(op))
    d = mul(dx(0), arith::MulFOp::create(b, loc, r, constant(M_LN2, type)));
  else if (isa<math::ExpM1Op>(op))
    d = mul(dx(0), arith::AddFOp::create(b, loc, r, constant(1.0, type)));
  else if (isa<math::LogOp>(op))
    d = div(dx(0), x(0));
  else if (isa<math::Log2Op>(op))
    d = div(dx(0), arith::MulFOp::create(b, loc, x(0), constant(M_LN2, type)));
  else if (isa<math::Log1pOp>(op))
    d = div(dx(0), arith::AddFOp::create(b, loc, x(0), constant(1.0, type)));
  else if (isa<math::SqrtOp>(op))
    d = div(dx(0), arith::MulFOp::create(b, loc, r, constant(2.0, type)));
  else if (isa<math::RsqrtOp>(op)) // -r / (2 x)
    d = mul(dx(0), div(arith::MulFOp::create(b, loc, r, constant(-0.5, type)),
                       x(0)));
  else if (isa<math::AbsFOp>(op))
    d = select(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x(0),
                                     constant(0.0, type)),
               neg(dx(0)), dx(0), type);
  else if (isa<math::SinOp>(op))
    d = mul(dx(0), math::CosOp::create(b, loc, x(0)));
  else if (isa<math::CosOp>(op))
    d = mul(dx(0), neg(math::SinOp::create(b, loc, x(0))));
  else if (isa<math::FmaOp>(op))
    d = add(add(mul(dx(0), x(1)), mul(x(0), dx(1))), dx(2));
  else if (isa<math::AtanOp>(op)) // 1 / (1 + x^2)
    d = div(dx(0), arith::AddFOp::create(
                       b, loc, constant(1.0, type),
                       arith::MulFOp::create(b, loc, x(0), x(0))));
  else if (isa<math::ErfOp>(op)) // 2 / sqrt(pi) exp(-x^2)
    d = mul(dx(0),
            arith::MulFOp::create(
                b, loc, constant(M_2_SQRTPI, type),
                math::ExpOp::create(
                    b, loc,
                    arith::NegFOp::create(
                        b, loc, arith::MulFOp::create(b, loc, x(0), x(0))))));
  else if (isa<math::FloorOp, math::CeilOp, math::RoundOp, math::RoundEvenOp,
               math::TruncOp>(op))
    d = Value(); // piecewise constant
  else
    return failure();
  if (d)
    tangent[r] = d;
  return success();
}

} // namespace

LogicalResult mlir::fa::buildScoreModDerivative(Region &scoreMod,
                                                Region &derivative,
                                                Operation *diagnosticsOn) {
  Block &source = scoreMod.front();
  auto *block = new Block();
  derivative.push_back(block);
  for (BlockArgument arg : source.getArguments())
    block->addArgument(arg.getType(), arg.getLoc());
  // `derivative` may belong to no op yet: the context comes from the op.
  OpBuilder b(diagnosticsOn->getContext());
  b.setInsertionPointToEnd(block);
  Location loc = diagnosticsOn->getLoc();
  IRMapping values;
  values.map(source.getArguments(), block->getArguments());
  ScoreModDifferentiator differentiator(b, loc);
  Type f32 = b.getF32Type();
  differentiator.tangent[block->getArgument(0)] =
      arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, 1.0));
  for (Operation &op : source.without_terminator()) {
    Operation *clone = b.clone(op, values);
    if (failed(differentiator.differentiate(op, clone)))
      return diagnosticsOn->emitOpError()
             << "the backward needs the derivative of the score_mod, and '"
             << op.getName() << "' has no derivative rule";
  }
  Value result = values.lookupOrDefault(
      cast<YieldOp>(source.getTerminator()).getValues()[0]);
  Value d = differentiator.tangent.lookup(result);
  if (!d)
    d = arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, 0.0));
  YieldOp::create(b, loc, d);
  return success();
}

namespace {
/// Half-open intervals of keys, sorted and disjoint.
using KeyIntervals = std::vector<std::pair<int64_t, int64_t>>;

KeyIntervals intersectIntervals(const KeyIntervals &a, const KeyIntervals &b) {
  KeyIntervals out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t lo = std::max(a[i].first, b[j].first);
    int64_t hi = std::min(a[i].second, b[j].second);
    if (lo < hi)
      out.push_back({lo, hi});
    (a[i].second < b[j].second ? i : j)++;
  }
  return out;
}

KeyIntervals uniteIntervals(const KeyIntervals &a, const KeyIntervals &b) {
  KeyIntervals all(a);
  all.insert(all.end(), b.begin(), b.end());
  llvm::sort(all);
  KeyIntervals out;
  for (auto [lo, hi] : all) {
    if (!out.empty() && lo <= out.back().second)
      out.back().second = std::max(out.back().second, hi);
    else
      out.push_back({lo, hi});
  }
  return out;
}

/// The keys of [0, kvLen) that `formula` keeps in the row whose other
/// index arguments are `args` (kKeyIndexArg's entry unused).
KeyIntervals keptKeys(const MaskFormula &formula,
                      const std::array<int64_t, kNumVariantIndexArgs> &args,
                      int64_t kvLen) {
  KeyIntervals all = {{0, kvLen}};
  switch (formula.kind) {
  case MaskFormula::Kind::keepAll:
    return all;
  case MaskFormula::Kind::keepNone:
    return {};
  case MaskFormula::Kind::constraint: {
    // c + a kv <= 0, c holding every other argument's term (in 128 bits:
    // each term fits 64 bits, their sum need not).
    __int128 c = formula.form.constant;
    for (unsigned arg = 0; arg < kNumVariantIndexArgs; ++arg)
      if (arg != kKeyIndexArg)
        c += __int128(formula.form.coefficients[arg]) * args[arg];
    // Floor terms without kv are numbers here; one with kv (kv + g alone
    // in it, coefficient d = +-1: keptKeysExact) bounds kv by chunks:
    // d = 1, kv <= C (1 - c) - 1 - g; d = -1, kv >= C c - g.
    const FloorTerm *withKey = nullptr;
    __int128 g = 0;
    for (const FloorTerm &floor : formula.form.floors) {
      __int128 inner = floor.constant;
      for (unsigned arg = 0; arg < kNumVariantIndexArgs; ++arg)
        if (arg != kKeyIndexArg)
          inner += __int128(floor.coefficients[arg]) * args[arg];
      if (floor.coefficients[kKeyIndexArg] != 0) {
        withKey = &floor;
        g = inner;
        continue;
      }
      __int128 chunk = inner / floor.divisor;
      if (inner % floor.divisor != 0 && inner < 0)
        --chunk;
      c += __int128(floor.coefficient) * chunk;
    }
    auto clampKey = [&](__int128 v) {
      return int64_t(std::clamp<__int128>(v, -1, kvLen));
    };
    if (withKey) {
      __int128 divisor = withKey->divisor;
      if (withKey->coefficient > 0)
        return intersectIntervals(
            all, {{0, clampKey(divisor * (1 - c) - 1 - g) + 1}});
      return intersectIntervals(all, {{clampKey(divisor * c - g), kvLen}});
    }
    int64_t a = formula.form.coefficients[kKeyIndexArg];
    if (a == 0)
      return c <= 0 ? all : KeyIntervals{};
    // a > 0: kv <= floor(-c / a); a < 0: kv >= ceil(c / -a); the bound is
    // clamped to the keys before it is used.
    __int128 n = a > 0 ? -c : c, d = a > 0 ? __int128(a) : -__int128(a);
    __int128 quotient = n / d, rest = n % d;
    auto clampToKeys = [&](__int128 v) {
      return int64_t(std::clamp<__int128>(v, -1, kvLen));
    };
    if (a > 0)
      return intersectIntervals(
          all, {{0, clampToKeys(quotient - (rest != 0 && n < 0)) + 1}});
    return intersectIntervals(
        all, {{clampToKeys(quotient + (rest != 0 && n > 0)), kvLen}});
  }
  case MaskFormula::Kind::allOf: {
    KeyIntervals kept = all;
    for (const MaskFormula &child : formula.children)
      kept = intersectIntervals(kept, keptKeys(child, args, kvLen));
    return kept;
  }
  case MaskFormula::Kind::anyOf: {
    KeyIntervals kept;
    for (const MaskFormula &child : formula.children)
      kept = uniteIntervals(kept, keptKeys(child, args, kvLen));
    return kept;
  }
  }
  llvm_unreachable("a mask formula's kind");
}

/// Whether keptKeys is exact for `formula`: kv in a constraint's floor
/// terms only as chunkTerm takes it.
bool keptKeysExact(const MaskFormula &formula) {
  if (formula.kind != MaskFormula::Kind::constraint)
    return llvm::all_of(formula.children, keptKeysExact);
  return !inFloorTerms(formula.form, kKeyIndexArg) ||
         chunkTerm(formula.form, kKeyIndexArg);
}
} // namespace

bool mlir::fa::visitedKeysGrowWithQuery(Region &maskMod) {
  std::optional<MaskFormula> formula = analyzeAffineMask(maskMod);
  if (!formula || !keptKeysExact(*formula))
    return false;
  constexpr int64_t length = 4096;
  std::array<int64_t, kNumVariantIndexArgs> args{};
  args[kQueryLenArg] = args[kKeyLenArg] = length;
  // The keys a row's K/V loop visits: the hull of those it keeps, less a
  // gap the loop skips (fa.kv_tile_hole: two intervals apart).
  bool skipsGap = skipsKeyHole(maskMod);
  auto hullAt = [&](int64_t row) -> int64_t {
    args[kQueryIndexArg] = row;
    KeyIntervals keys = keptKeys(*formula, args, length);
    if (keys.empty())
      return 0;
    int64_t hull = keys.back().second - keys.front().first;
    if (skipsGap && keys.size() == 2)
      hull -= keys[1].first - keys[0].second;
    return hull;
  };
  return hullAt(length - 1) >= 2 * std::max<int64_t>(hullAt(length / 4), 1);
}

std::optional<double> mlir::fa::countKeptScores(Region &maskMod, MaskKind mask,
                                                int64_t qLen, int64_t kvLen,
                                                int64_t batch, int64_t head) {
  std::optional<MaskFormula> formula = analyzeAffineMask(maskMod);
  if (!formula || !keptKeysExact(*formula))
    return std::nullopt;
  std::array<int64_t, kNumVariantIndexArgs> args{};
  args[kBatchArg] = batch;
  args[kHeadArg] = head;
  args[kQueryLenArg] = qLen;
  args[kKeyLenArg] = kvLen;
  double kept = 0;
  for (int64_t row = 0; row < qLen; ++row) {
    args[kQueryIndexArg] = row;
    KeyIntervals keys = keptKeys(*formula, args, kvLen);
    // The causal mask (bottom-right): keys up to row + Sk - Sq.
    if (mask == MaskKind::causal)
      keys = intersectIntervals(keys, {{0, row + kvLen - qLen + 1}});
    for (auto [lo, hi] : keys)
      kept += double(hi - lo);
  }
  return kept;
}
