//===- FADialect.cpp - The fa dialect -----------------------------*- C++ -*-===//
#include "dialect/FADialect.h"
#include "dialect/FAOps.h"
#include "lib/Strategy/MmaLayout.h"
#include "lib/Strategy/Registry.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fa;

#include "dialect/FAAttrInterfaces.cpp.inc"
#include "dialect/FADialect.cpp.inc"
#include "dialect/FAEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/FAAttrs.cpp.inc"

void FADialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/FAOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/FAAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Tiles
//===----------------------------------------------------------------------===//

bool mlir::fa::isTileType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.getRank() < 1 || tensor.getRank() > 2)
    return false;
  for (int64_t size : tensor.getShape())
    if (ShapedType::isDynamic(size) || size < 1 || size > kMaxTileDim)
      return false;
  return !tensor.getEncoding() ||
         isa<TileEncodingInterface>(tensor.getEncoding());
}

bool mlir::fa::isKernelName(StringRef name) {
  return !name.empty() && (llvm::isAlpha(name[0]) || name[0] == '_') &&
         llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

const ::fa::StrategyModel &mlir::fa::strategyModelOf(StrategyKind kind) {
  const ::fa::StrategyModel *model =
      ::fa::lookupStrategy(stringifyEnum(kind).str());
  if (!model)
    llvm::report_fatal_error(llvm::Twine("the dialect's strategy '") +
                             stringifyEnum(kind) +
                             "' has no entry in lib/Strategy/Registry.cpp");
  return *model;
}

/// What every encoding asks of its tiles before its own rules: static dims
/// in [1, kMaxTileDim] (the lowerings unroll over a thread's elements), at
/// most kMaxTileRegistersPerThread elements a thread and kMaxSharedBytes of
/// shared memory.
static LogicalResult
verifyTileBudget(StringRef name, TileEncodingInterface encoding,
                 ArrayRef<int64_t> shape, Type elementType,
                 function_ref<InFlightDiagnostic()> emitError) {
  if (shape.empty() || shape.size() > 2)
    return emitError() << name << " tiles are 1-d or 2-d, got rank "
                       << shape.size();
  for (int64_t size : shape)
    if (ShapedType::isDynamic(size) || size < 1 || size > kMaxTileDim)
      return emitError() << name << " tiles need static dims in [1, "
                         << kMaxTileDim << "], got "
                         << (ShapedType::isDynamic(size) ? std::string("?")
                                                         : std::to_string(size));
  if (int64_t registers = encoding.getRegistersPerThread(shape);
      registers > kMaxTileRegistersPerThread)
    return emitError() << name << " tile of " << shape[0]
                       << (shape.size() == 2 ? "x" + std::to_string(shape[1])
                                             : std::string())
                       << " puts " << registers
                       << " elements in each thread, over the limit of "
                       << kMaxTileRegistersPerThread;
  // (Element types without a bit width, such as index or complex, are not
  // tiles of any op: their shared size is not checked here.)
  if (!elementType || !elementType.isIntOrFloat())
    return success();
  int64_t bytes = encoding.getSharedElements(shape) *
                  int64_t(llvm::divideCeil(
                      elementType.getIntOrFloatBitWidth(), 8));
  if (bytes > kMaxSharedBytes)
    return emitError() << name << " tile needs " << bytes
                       << " bytes of shared memory, over the "
                       << kMaxSharedBytes << " of a block";
  return success();
}

//===----------------------------------------------------------------------===//
// BlockedEncodingAttr
//===----------------------------------------------------------------------===//

LogicalResult
BlockedEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                            int64_t threadRows, int64_t threadCols) {
  if (threadRows < 1 || threadCols < 1)
    return emitError() << "thread grid must be positive, got " << threadRows
                       << "x" << threadCols;
  // The threads of a row must be lanes of one warp for shuffle reductions.
  if (threadCols > 32 || 32 % threadCols != 0)
    return emitError() << "threads per row must divide the warp size 32, got "
                       << threadCols;
  return success();
}

/// A tile of `shape` fits a thread grid of rows x cols when every thread
/// owns the same number of elements (the lowerings unroll over them).
LogicalResult
BlockedEncodingAttr::verifyEncoding(ArrayRef<int64_t> shape, Type elementType,
                                    function_ref<InFlightDiagnostic()> emitError) const {
  if (shape.empty() || shape.size() > 2)
    return emitError() << "#fa.blocked tiles are 1-d or 2-d, got rank "
                       << shape.size();
  if (failed(verifyTileBudget("#fa.blocked", *this, shape, elementType,
                              emitError)))
    return failure();
  if (shape[0] % getThreadRows() != 0)
    return emitError() << "#fa.blocked thread grid " << getThreadRows() << "x"
                       << getThreadCols() << " does not divide the tile's "
                       << shape[0] << " rows";
  if (shape.size() == 2 && shape[1] % getThreadCols() != 0)
    return emitError() << "#fa.blocked thread grid " << getThreadRows() << "x"
                       << getThreadCols() << " does not divide the tile's "
                       << shape[1] << " columns";
  return success();
}

bool BlockedEncodingAttr::isShared() const { return false; }

int64_t
BlockedEncodingAttr::getRegistersPerThread(ArrayRef<int64_t> shape) const {
  int64_t rows = llvm::divideCeil(shape[0], getThreadRows());
  if (shape.size() == 1)
    return rows;
  return rows * llvm::divideCeil(shape[1], getThreadCols());
}

int64_t BlockedEncodingAttr::getSharedElements(ArrayRef<int64_t>) const {
  return 0;
}

/// Thread t sits at (t / cols, t % cols) of the thread grid; register slot
/// (i, j) holds element (threadRow + i rows, threadCol + j cols). The
/// `cols` threads of a row are consecutive lanes: a butterfly over them.
FailureOr<RegisterLayout>
BlockedEncodingAttr::getRegisterLayout(ArrayRef<int64_t> shape) const {
  int64_t rows = getThreadRows(), cols = getThreadCols();
  int64_t rowsPerThread = shape[0] / rows;
  int64_t colsPerThread = shape.size() == 2 ? shape[1] / cols : 1;
  RegisterLayout layout;
  layout.rowBase = {ThreadIdTerm{/*modulus=*/0, /*divisor=*/cols}};
  layout.colBase = {ThreadIdTerm{/*modulus=*/cols}};
  for (int64_t i = 0; i < rowsPerThread; ++i) {
    layout.rowSlotOffset.push_back(i * rows);
    for (int64_t j = 0; j < colsPerThread; ++j) {
      layout.rowOffset.push_back(i * rows);
      layout.rowSlotOf.push_back(i);
      if (shape.size() == 2)
        layout.colOffset.push_back(j * cols);
    }
  }
  for (int64_t mask = cols / 2; mask >= 1; mask /= 2)
    layout.rowReduceMasks.push_back(mask);
  layout.vectorWidth = shape.size() == 2 && cols == 1 ? colsPerThread : 1;
  return layout;
}

//===----------------------------------------------------------------------===//
// SharedEncodingAttr
//===----------------------------------------------------------------------===//

LogicalResult
SharedEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           int64_t pad) {
  if (pad < 0 || pad > kMaxTileDim)
    return emitError() << "row padding must be in [0, " << kMaxTileDim
                       << "], got " << pad;
  return success();
}

LogicalResult SharedEncodingAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type elementType,
    function_ref<InFlightDiagnostic()> emitError) const {
  return verifyTileBudget("#fa.shared", *this, shape, elementType, emitError);
}

bool SharedEncodingAttr::isShared() const { return true; }

int64_t SharedEncodingAttr::getRegistersPerThread(ArrayRef<int64_t>) const {
  return 0;
}

FailureOr<RegisterLayout>
SharedEncodingAttr::getRegisterLayout(ArrayRef<int64_t>) const {
  return failure();
}

int64_t
SharedEncodingAttr::getSharedElements(ArrayRef<int64_t> shape) const {
  if (shape.size() == 1)
    return shape[0];
  return shape[0] * (shape[1] + getPad());
}

//===----------------------------------------------------------------------===//
// MmaEncodingAttr, MmaOperandEncodingAttr
//===----------------------------------------------------------------------===//

static LogicalResult verifyWarps(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t warps) {
  if (warps < 1 || warps > 32)
    return emitError() << "warps must be in [1, 32], got " << warps;
  return success();
}

/// m16 row blocks of one warp, for a tile of `rows` rows over `warps`.
static int64_t rowBlocksPerWarp(int64_t rows, int64_t warps) {
  return llvm::divideCeil(llvm::divideCeil(rows, warps), 16);
}

Attribute MmaEncodingAttr::parse(AsmParser &parser, Type) {
  int64_t warps = 0, warpsN = 1, rowsFirst = 0;
  bool transposed = false;
  if (parser.parseLess() || parser.parseKeyword("warps") ||
      parser.parseEqual() || parser.parseInteger(warps))
    return {};
  llvm::StringSet<> seen;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    llvm::SMLoc at = parser.getCurrentLocation();
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return {};
    if (!seen.insert(key).second) {
      parser.emitError(at) << "#fa.mma sets " << key << " twice";
      return {};
    }
    ParseResult parsed = failure();
    if (key == "warps_n") {
      parsed = parser.parseInteger(warpsN);
    } else if (key == "rows_first") {
      parsed = parser.parseInteger(rowsFirst);
    } else if (key == "transposed") {
      StringRef value;
      parsed = parser.parseKeyword(&value);
      if (succeeded(parsed) && value != "true" && value != "false") {
        parser.emitError(at) << "transposed is true or false, got " << value;
        return {};
      }
      transposed = value == "true";
    } else {
      parser.emitError(at) << "#fa.mma has warps, warps_n, rows_first and "
                              "transposed, got "
                           << key;
      return {};
    }
    if (failed(parsed))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<MmaEncodingAttr>(parser.getContext(), warps, warpsN,
                                            rowsFirst, transposed);
}

void MmaEncodingAttr::print(AsmPrinter &printer) const {
  printer << "<warps = " << getWarps();
  if (getWarpsN() != 1)
    printer << ", warps_n = " << getWarpsN();
  if (getRowsFirst() != 0)
    printer << ", rows_first = " << getRowsFirst();
  if (getTransposed())
    printer << ", transposed = true";
  printer << ">";
}

LogicalResult
MmaEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        int64_t warps, int64_t warpsN, int64_t rowsFirst,
                        bool transposed) {
  if (failed(verifyWarps(emitError, warps)))
    return failure();
  if (warpsN < 1 || warps % warpsN != 0)
    return emitError() << "warps_n must divide warps = " << warps << ", got "
                       << warpsN;
  if (rowsFirst != 0 && rowsFirst != 1)
    return emitError() << "rows_first must be 0 or 1, got " << rowsFirst;
  return success();
}

/// Each warp owns whole m16 row blocks (`warps` warps along the rows) and,
/// for rank 2, a column slice in n8 (accumulator) or k8 halves of k16
/// (operand, padded to 16 in the kernel) steps (`warpsN` along the columns).
static LogicalResult
verifyFragmentTile(StringRef name, int64_t warps, ArrayRef<int64_t> shape,
                   int64_t maxRank,
                   function_ref<InFlightDiagnostic()> emitError,
                   int64_t warpsN = 1) {
  if (shape.empty() || int64_t(shape.size()) > maxRank)
    return emitError() << name << " tiles have rank 1 to " << maxRank
                       << ", got " << shape.size();
  if (shape[0] % (16 * warps) != 0)
    return emitError() << name << " over " << warps
                       << (warpsN > 1 ? " warps along the rows" : " warps")
                       << " needs rows in multiples of 16 x " << warps
                       << " = " << 16 * warps << ", got " << shape[0];
  if (shape.size() == 2 && warpsN == 1 && shape[1] % 8 != 0)
    return emitError() << name << " needs columns in multiples of 8, got "
                       << shape[1];
  if (shape.size() == 2 && shape[1] % (8 * warpsN) != 0)
    return emitError() << name << " over " << warpsN
                       << " warps along the columns needs columns in "
                          "multiples of 8 x "
                       << warpsN << " = " << 8 * warpsN << ", got "
                       << shape[1];
  return success();
}

/// The shape of a transposed tile's twin (2-d: the columns and rows
/// swapped).
static SmallVector<int64_t, 2> twinShape(ArrayRef<int64_t> shape) {
  return {shape.rbegin(), shape.rend()};
}

LogicalResult MmaEncodingAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type elementType,
    function_ref<InFlightDiagnostic()> emitError) const {
  if (getTransposed() && shape.size() == 1) {
    // The per-row values of a transposed tile: the twin's columns.
    if (shape[0] % (8 * getWarpsN()) != 0)
      return emitError() << "a 1-d transposed #fa.mma tile holds the twin's "
                            "columns: rows in multiples of 8 x "
                         << getWarpsN() << " = " << 8 * getWarpsN() << ", got "
                         << shape[0];
  } else if (failed(verifyFragmentTile(
                 getTransposed() ? "#fa.mma (transposed: its twin)" : "#fa.mma",
                 getWarpsM(), getTransposed() ? twinShape(shape) : shape, 2,
                 emitError, getWarpsN()))) {
    return failure();
  }
  return verifyTileBudget("#fa.mma", *this, shape, elementType, emitError);
}

bool MmaEncodingAttr::isShared() const { return false; }

int64_t MmaEncodingAttr::getRegistersPerThread(ArrayRef<int64_t> shape) const {
  if (getTransposed())
    return shape.size() == 1
               ? 2 * llvm::divideCeil(shape[0], 8 * getWarpsN())
               : getTwin().getRegistersPerThread(twinShape(shape));
  int64_t rowBlocks = rowBlocksPerWarp(shape[0], getWarpsM());
  if (shape.size() == 1)
    return rowBlocks * 2;
  return rowBlocks * llvm::divideCeil(shape[1], 8 * getWarpsN()) * 4;
}

int64_t MmaEncodingAttr::getSharedElements(ArrayRef<int64_t>) const {
  return 0;
}

/// A transposed tile's layout from its twin's (see `transposed`): rows
/// and columns swapped; a row (the twin's column) is held by the lanes of
/// one t in each warp of the twin's row slices.
static RegisterLayout transposedLayout(const RegisterLayout &twin,
                                       bool oneDimensional,
                                       int64_t twinWarpsM) {
  RegisterLayout layout;
  layout.rowBase = twin.colBase;
  layout.colBase = twin.rowBase;
  // The thread's rows: the twin's distinct column offsets, in slot order.
  for (int64_t col : twin.colOffset)
    if (!llvm::is_contained(layout.rowSlotOffset, col))
      layout.rowSlotOffset.push_back(col);
  layout.rowReduceMasks = {4, 8, 16};
  layout.rowsInOneWarp = twinWarpsM == 1;
  if (oneDimensional) {
    layout.rowOffset = layout.rowSlotOffset;
    for (int64_t r = 0; r < layout.numRowSlots(); ++r)
      layout.rowSlotOf.push_back(r);
    return layout;
  }
  layout.rowOffset = twin.colOffset;
  layout.colOffset = twin.rowOffset;
  for (int64_t col : twin.colOffset)
    layout.rowSlotOf.push_back(llvm::find(layout.rowSlotOffset, col) -
                               layout.rowSlotOffset.begin());
  return layout;
}

/// The fragment tables of lib/Strategy/MmaLayout.h over the warp grid: warp
/// w owns the row slice w / warps_n and the column slice w % warps_n (with
/// rows_first, w % warps_m and w / warps_m); lane
/// (g, t) = (lane / 4, lane % 4) holds rows g and g + 8 of each m16 row
/// block and columns 2t, 2t + 1 of each n8 block. The 4 lanes of a quad
/// share a row.
FailureOr<RegisterLayout>
MmaEncodingAttr::getRegisterLayout(ArrayRef<int64_t> shape) const {
  if (getTransposed()) {
    // A 1-d tile: the columns of a twin with one row block a warp.
    SmallVector<int64_t, 2> twin =
        shape.size() == 1 ? SmallVector<int64_t, 2>{16 * getWarpsM(), shape[0]}
                          : twinShape(shape);
    FailureOr<RegisterLayout> twinLayout = getTwin().getRegisterLayout(twin);
    if (failed(twinLayout))
      return failure();
    return transposedLayout(*twinLayout, shape.size() == 1, getWarpsM());
  }
  namespace frag = ::fa::mma;
  using Acc = frag::AccumulatorFragment;
  int64_t warpsN = getWarpsN();
  int64_t sliceRows = shape[0] / getWarpsM();
  int64_t rowBlocks = sliceRows / frag::kM;
  int64_t warpsM = getWarpsM();
  bool rowsFirst = getRowsFirst() && warpsN > 1;
  RegisterLayout layout;
  layout.rowBase = {rowsFirst ? ThreadIdTerm{32 * warpsM, 32, sliceRows}
                              : ThreadIdTerm{0, 32 * warpsN, sliceRows},
                    ThreadIdTerm{32, 4, 1}};
  for (int64_t mi = 0; mi < rowBlocks; ++mi)
    for (int64_t h = 0; h < 2; ++h)
      layout.rowSlotOffset.push_back(mi * frag::kM + 8 * h);
  layout.rowReduceMasks = {1, 2};
  layout.rowsInOneWarp = warpsN == 1;
  // (A 1-d tile has no columns: its column terms only tell copies apart.)
  int64_t sliceCols = shape.size() == 2 ? shape[1] / warpsN : 1;
  if (warpsN > 1)
    layout.colBase.push_back(rowsFirst
                                 ? ThreadIdTerm{0, 32 * warpsM, sliceCols}
                                 : ThreadIdTerm{32 * warpsN, 32, sliceCols});
  layout.colBase.push_back(ThreadIdTerm{4, 1, 2});
  if (shape.size() == 1) {
    layout.rowOffset = layout.rowSlotOffset;
    for (int64_t r = 0; r < layout.numRowSlots(); ++r)
      layout.rowSlotOf.push_back(r);
    return layout;
  }
  int64_t colBlocks = sliceCols / frag::kN;
  for (int64_t mi = 0; mi < rowBlocks; ++mi)
    for (int64_t ni = 0; ni < colBlocks; ++ni)
      for (int64_t e = 0; e < Acc::kElements; ++e) {
        layout.rowOffset.push_back(mi * frag::kM + 8 * Acc::rowHalf[e]);
        layout.colOffset.push_back(ni * frag::kN + Acc::colPair[e]);
        layout.rowSlotOf.push_back(2 * mi + Acc::rowHalf[e]);
      }
  layout.vectorWidth = 2;
  return layout;
}

LogicalResult
MmaOperandEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t warps) {
  return verifyWarps(emitError, warps);
}

LogicalResult MmaOperandEncodingAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type elementType,
    function_ref<InFlightDiagnostic()> emitError) const {
  // e4m3: the wgmma strategy's 8-bit A operand (P of P V).
  if (!elementType.isF16() && !elementType.isBF16() &&
      !isa<Float8E4M3FNType>(elementType))
    return emitError() << "#fa.mma_operand holds f16, bf16 or f8E4M3FN, got "
                       << elementType;
  if (shape.size() != 2)
    return emitError() << "#fa.mma_operand tiles are 2-d, got rank "
                       << shape.size();
  if (failed(verifyFragmentTile("#fa.mma_operand", getWarps(), shape, 2,
                                emitError)))
    return failure();
  return verifyTileBudget("#fa.mma_operand", *this, shape, elementType,
                          emitError);
}

bool MmaOperandEncodingAttr::isShared() const { return false; }

int64_t
MmaOperandEncodingAttr::getRegistersPerThread(ArrayRef<int64_t> shape) const {
  int64_t rowBlocks = rowBlocksPerWarp(shape[0], getWarps());
  int64_t cols = shape.size() == 2 ? shape[1] : 1;
  return rowBlocks * llvm::divideCeil(cols, 16) * 8;
}

int64_t MmaOperandEncodingAttr::getSharedElements(ArrayRef<int64_t>) const {
  return 0;
}

/// The A-operand fragment table of lib/Strategy/MmaLayout.h: warp w owns
/// row slice w; lane (g, t) holds 8 elements of each 16 x 16 block (rows
/// g, g + 8; columns 2t, 2t + 1, 2t + 8, 2t + 9). The columns are padded
/// to a multiple of 16: slots past the tile's columns hold zeros.
FailureOr<RegisterLayout>
MmaOperandEncodingAttr::getRegisterLayout(ArrayRef<int64_t> shape) const {
  namespace frag = ::fa::mma;
  using A = frag::OperandAFragment;
  if (shape.size() != 2)
    return failure();
  int64_t sliceRows = shape[0] / getWarps();
  int64_t rowBlocks = sliceRows / frag::kM;
  int64_t kBlocks = llvm::divideCeil(shape[1], frag::kK);
  RegisterLayout layout;
  layout.rowBase = {ThreadIdTerm{0, 32, sliceRows}, ThreadIdTerm{32, 4, 1}};
  layout.colBase = {ThreadIdTerm{4, 1, 2}};
  for (int64_t mi = 0; mi < rowBlocks; ++mi) {
    for (int64_t h = 0; h < 2; ++h)
      layout.rowSlotOffset.push_back(mi * frag::kM + 8 * h);
    for (int64_t ki = 0; ki < kBlocks; ++ki)
      for (int64_t e = 0; e < A::kElements; ++e) {
        layout.rowOffset.push_back(mi * frag::kM + 8 * A::rowHalf[e]);
        layout.colOffset.push_back(ki * frag::kK + 8 * A::colHalf[e] +
                                   A::colPair[e]);
        layout.rowSlotOf.push_back(2 * mi + A::rowHalf[e]);
      }
  }
  layout.rowReduceMasks = {1, 2};
  layout.vectorWidth = 2;
  return layout;
}

//===----------------------------------------------------------------------===//
// SwizzledSharedEncodingAttr
//===----------------------------------------------------------------------===//

LogicalResult
SwizzledSharedEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t bytes, bool transposed) {
  if (bytes != 128 && bytes != 64)
    return emitError() << "the swizzle width must be 128 or 64 bytes, got "
                       << bytes;
  return success();
}

LogicalResult SwizzledSharedEncodingAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type elementType,
    function_ref<InFlightDiagnostic()> emitError) const {
  bool float8 = isa<Float8E4M3FNType>(elementType);
  if (!elementType.isF16() && !elementType.isBF16() && !elementType.isF32() &&
      !float8)
    return emitError() << "#fa.swizzled_shared holds f16, bf16, f32 or "
                          "f8E4M3FN, got "
                       << elementType;
  if (shape.size() != 2)
    return emitError() << "#fa.swizzled_shared tiles are 2-d, got rank "
                       << shape.size();
  if (getTransposed() && !float8)
    return emitError() << "#fa.swizzled_shared stores 8-bit tiles transposed "
                          "(the K-major B of 8-bit wgmma), got "
                       << elementType;
  // The lowerings take the 64-byte swizzle where 8-bit rows need it: the
  // e4m3 Q, K and V of head dims that are not whole 128-byte rows.
  if (getBytes() == 64 && (!float8 || getTransposed()))
    return emitError() << "the 64-byte swizzle holds 8-bit tiles stored by "
                          "rows (f8E4M3FN, not transposed), got "
                       << elementType << (getTransposed() ? " transposed" : "");
  // A transposed tile's columns are its storage rows and the other way
  // round.
  int64_t storedRows = getTransposed() ? shape[1] : shape[0];
  int64_t storedColumns = getTransposed() ? shape[0] : shape[1];
  int64_t block = getBlockColumns(elementType);
  if (storedColumns % block != 0)
    return emitError() << "#fa.swizzled_shared needs "
                       << (getTransposed() ? "rows" : "columns")
                       << " in multiples of " << block << " (" << getBytes()
                       << "-byte rows), got " << storedColumns;
  if (storedRows % 8 != 0)
    return emitError() << "#fa.swizzled_shared needs "
                       << (getTransposed() ? "columns" : "rows")
                       << " in multiples of 8 (" << getAtomBytes()
                       << "-byte swizzle atoms), got " << storedRows;
  return verifyTileBudget("#fa.swizzled_shared", *this, shape, elementType,
                          emitError);
}

bool SwizzledSharedEncodingAttr::isShared() const { return true; }

int64_t
SwizzledSharedEncodingAttr::getRegistersPerThread(ArrayRef<int64_t>) const {
  return 0;
}

FailureOr<RegisterLayout>
SwizzledSharedEncodingAttr::getRegisterLayout(ArrayRef<int64_t>) const {
  return failure();
}

int64_t
SwizzledSharedEncodingAttr::getSharedElements(ArrayRef<int64_t> shape) const {
  int64_t elements = 1;
  for (int64_t size : shape)
    elements *= size;
  return elements;
}

//===----------------------------------------------------------------------===//
// LaunchAttr and the placement attributes on ops
//===----------------------------------------------------------------------===//

LogicalResult LaunchAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StrategyKind strategy, int64_t threads,
                                 int64_t sharedBytes, int64_t stages,
                                 int64_t registers, int64_t producerWarps) {
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    return emitError() << "threads must be a whole number of warps in [32, "
                          "1024], got "
                       << threads;
  if (producerWarps < 0 || producerWarps >= threads / 32)
    return emitError() << "producer_warps must be in [0, threads / 32 = "
                       << threads / 32 << "), got " << producerWarps;
  if (producerWarps > 0 && !strategyModelOf(strategy).warpSpecialized)
    return emitError() << "producer_warps belong to the wgmma strategy's "
                          "warp specialization, got "
                       << producerWarps << " on " << stringifyEnum(strategy);
  if (sharedBytes < 0 || sharedBytes > kMaxSharedBytes)
    return emitError() << "shared_bytes must be in [0, " << kMaxSharedBytes
                       << "], got " << sharedBytes;
  if (stages < 1 || stages > kMaxPipelineStages)
    return emitError() << "stages must be in [1, " << kMaxPipelineStages
                       << "], got " << stages;
  if (registers < 0)
    return emitError() << "registers must be non-negative, got " << registers;
  return success();
}

/// A TMA box (fa.tensor_maps): at most 256 rows (the hardware's box limit)
/// of 128 bytes (the swizzle span the runtime encodes): 64 columns of the
/// 16-bit inputs, 32 of the f32 dQ accumulator. The launch plans hold the
/// same limits (lib/LaunchPlan.cpp).
static constexpr int64_t kMaxTensorMapBoxRows = 256;
static constexpr int64_t kTensorMapBoxBytes = 128;

LogicalResult FADialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  if (name == getLaunchAttrName()) {
    if (!isa<LaunchAttr>(value))
      return op->emitOpError() << "'" << name << "' must be a #fa.launch, got "
                               << value;
    return success();
  }
  if (name == getSharedOffsetAttrName() || name == getPipelineStagesAttrName()) {
    if (!isa<LoadTileOp, ConvertLayoutOp>(op))
      return op->emitOpError() << "'" << name
                               << "' belongs on fa.load_tile or "
                                  "fa.convert_layout";
    auto integer = dyn_cast<IntegerAttr>(value);
    bool offset = name == getSharedOffsetAttrName();
    int64_t lowest = offset ? 0 : 1;
    int64_t highest = offset ? kMaxSharedBytes - 16 : kMaxPipelineStages;
    if (!integer || integer.getInt() < lowest || integer.getInt() > highest)
      return op->emitOpError() << "'" << name << "' must be an integer in ["
                               << lowest << ", " << highest << "], got "
                               << value;
    // cp.async, ldmatrix and vector accesses move 16-byte chunks.
    if (offset && integer.getInt() % 16 != 0)
      return op->emitOpError() << "'" << name
                               << "' must be a multiple of 16 bytes, got "
                               << integer.getInt();
    return success();
  }
  if (name == getPrefetchAttrName()) {
    auto load = dyn_cast<LoadTileOp>(op);
    if (!load || !isa<UnitAttr>(value))
      return op->emitOpError() << "'" << name
                               << "' is a unit attribute of fa.load_tile";
    // (Attributes are verified before the op's own result types.)
    auto type = dyn_cast<RankedTensorType>(load->getResult(0).getType());
    auto encoding =
        type ? dyn_cast_or_null<TileEncodingInterface>(type.getEncoding())
             : TileEncodingInterface();
    if (!type || type.getRank() != 1 || !encoding || encoding.isShared())
      return op->emitOpError()
             << "'" << name
             << "' prefetches per-row values into registers: a rank-1 tile "
                "with a register encoding, got "
             << load->getResult(0).getType();
    return success();
  }
  if (name == getCaptureLoadAttrName()) {
    if (!isa<memref::LoadOp>(op) || !isa<UnitAttr>(value))
      return op->emitOpError() << "'" << name
                               << "' is a unit attribute of memref.load";
    return success();
  }
  if (name == getCopyChunksAttrName()) {
    auto load = dyn_cast<LoadTileOp>(op);
    auto type = load ? dyn_cast<RankedTensorType>(load->getResult(0).getType())
                     : RankedTensorType();
    auto encoding =
        type ? dyn_cast_or_null<SharedEncodingAttr>(type.getEncoding())
             : SharedEncodingAttr();
    if (!encoding || type.getRank() != 2 || !isa<UnitAttr>(value))
      return op->emitOpError()
             << "'" << name
             << "' is a unit attribute of an fa.load_tile into a 2-d "
                "#fa.shared tile";
    // The copies move 8 16-bit elements a chunk (as the tensor-core
    // strategies' copies of Q, K, V do).
    if (type.getElementTypeBitWidth() != 16)
      return op->emitOpError()
             << "'" << name
             << "' copies chunks of 8 16-bit elements, got a tile of "
             << type.getElementType();
    // Whole 16-byte chunks in every row, and rows that start 16-byte
    // aligned in shared memory.
    int64_t elementBytes = type.getElementTypeBitWidth() / 8;
    if (type.getDimSize(1) * elementBytes % 16 != 0 ||
        (type.getDimSize(1) + encoding.getPad()) * elementBytes % 16 != 0)
      return op->emitOpError()
             << "'" << name << "' copies 16-byte chunks: the tile's rows ("
             << type.getDimSize(1) << " elements) and their shared pitch ("
             << type.getDimSize(1) + encoding.getPad()
             << ") must be multiples of 16 bytes";
    return success();
  }
  if (name == getSkipUnitFactorsAttrName()) {
    if (!isa<RescaleOp, OnlineSoftmaxOp>(op) || !isa<UnitAttr>(value))
      return op->emitOpError()
             << "'" << name
             << "' is a unit attribute of fa.rescale and fa.online_softmax";
    return success();
  }
  if (name == getUncheckedKeyLoadsAttrName()) {
    auto mask = dyn_cast<MaskOp>(op);
    if (!mask || mask.getMaskMod().empty() || !isa<UnitAttr>(value))
      return op->emitOpError()
             << "'" << name
             << "' is a unit attribute of fa.mask with a mask_mod";
    return success();
  }
  if (name == getHoistCaptureLoadsAttrName()) {
    if (!isa<scf::IfOp>(op) || !isa<UnitAttr>(value))
      return op->emitOpError() << "'" << name
                               << "' is a unit attribute of scf.if";
    return success();
  }
  if (name == getExp2OnFmaAttrName()) {
    auto every = dyn_cast<IntegerAttr>(value);
    if (!isa<OnlineSoftmaxOp>(op) || !every ||
        !every.getType().isSignlessInteger() || every.getInt() < 1)
      return op->emitOpError()
             << "'" << name
             << "' is a positive integer attribute of fa.online_softmax, got "
             << value;
    return success();
  }
  if (name == getProducerWritesAttrName()) {
    auto convert = dyn_cast<ConvertLayoutOp>(op);
    auto encoding = convert ? dyn_cast<SwizzledSharedEncodingAttr>(
                                  convert.getType().getEncoding())
                            : SwizzledSharedEncodingAttr();
    if (!encoding || !encoding.getTransposed() || !isa<UnitAttr>(value))
      return op->emitOpError()
             << "'" << name
             << "' is a unit attribute of an fa.convert_layout into "
                "transposed swizzled shared memory";
    // The producer copies from the swizzled ring its TMA loads fill (the
    // transposed encoding itself holds only 8-bit tiles).
    auto source = cast<RankedTensorType>(convert.getSource().getType());
    if (!isa_and_nonnull<SwizzledSharedEncodingAttr>(source.getEncoding()))
      return op->emitOpError()
             << "'" << name
             << "' marks a copy the producer makes from a tile in swizzled "
                "shared memory, got "
             << source;
    return success();
  }
  if (name == getPersistentAttrName() || name == getWriterWarpAttrName()) {
    if (!isa<UnitAttr>(value))
      return op->emitOpError() << "'" << name << "' must be a unit attribute, got "
                               << value;
    return success();
  }
  if (name == getTensorMapsAttrName()) {
    auto maps = dyn_cast<ArrayAttr>(value);
    auto bad = [&]() {
      return op->emitOpError()
             << "'" << name
             << "' must be an array of {arg, tensor = \"q\" | \"k\" | "
                "\"v\" | \"do\" | \"dq_accum\", box_rows, box_cols} with "
                "positive sizes, got "
             << value;
    };
    if (!maps)
      return bad();
    llvm::SmallDenseSet<int64_t> args;
    llvm::StringSet<> tensors;
    for (Attribute map : maps) {
      auto dict = dyn_cast<DictionaryAttr>(map);
      if (!dict)
        return bad();
      auto arg = dict.getAs<IntegerAttr>("arg");
      auto tensor = dict.getAs<StringAttr>("tensor");
      auto rows = dict.getAs<IntegerAttr>("box_rows");
      auto cols = dict.getAs<IntegerAttr>("box_cols");
      auto bytes = dict.getAs<IntegerAttr>("element_bytes");
      if (!arg || arg.getInt() < 0 || !tensor ||
          !llvm::is_contained({"q", "k", "v", "do", "dq_accum"},
                              tensor.getValue()) ||
          !rows || rows.getInt() < 1 || !cols || cols.getInt() < 1 ||
          (dict.get("element_bytes") &&
           (!bytes || !llvm::is_contained({1, 2, 4}, bytes.getInt()))))
        return bad();
      // The runtime encodes each map once, with the 128-byte swizzle: a TMA
      // box is at most 256 rows of 128 bytes. Elements are 2 bytes (the
      // f32 dQ accumulator: 4) unless element_bytes says (FP8: 1).
      bool isF32 = tensor.getValue() == "dq_accum";
      int64_t elementBytes = bytes ? bytes.getInt() : isF32 ? 4 : 2;
      int64_t maxCols = kTensorMapBoxBytes / elementBytes;
      if (rows.getInt() > kMaxTensorMapBoxRows || cols.getInt() > maxCols)
        return op->emitOpError()
               << "'" << name << "' box of " << tensor << " is "
               << rows.getInt() << " x " << cols.getInt()
               << ": a TMA box has at most " << kMaxTensorMapBoxRows
               << " rows of " << maxCols << " columns (128 bytes of "
               << (elementBytes == 4   ? "f32"
                   : elementBytes == 1 ? "8-bit"
                                       : "16-bit")
               << " elements, the swizzle span)";
      if (!args.insert(arg.getInt()).second)
        return op->emitOpError()
               << "'" << name << "' names kernel parameter " << arg.getInt()
               << " twice: each map is a parameter of its own";
      if (!tensors.insert(tensor.getValue()).second)
        return op->emitOpError() << "'" << name << "' maps tensor " << tensor
                                 << " twice: each tensor has one map";
    }
    return success();
  }
  return op->emitOpError() << "unknown fa attribute '" << name << "'";
}
