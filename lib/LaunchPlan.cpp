//===- LaunchPlan.cpp - How the runtime launches a kernel -------*- C++ -*-===//
#include "lib/LaunchPlan.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace fa {

static constexpr const char *kExtentNames[] = {
    "query_length", "query_heads", "batch", "key_length", "key_heads",
    "parts_batch"};
static constexpr const char *kOperandNames[] = {"q",
                                                "k",
                                                "v",
                                                "o",
                                                "lse",
                                                "do",
                                                "dq",
                                                "dk",
                                                "dv",
                                                "delta",
                                                "dq_accum",
                                                "dq_order",
                                                "sinks",
                                                "dsinks",
                                                "sink_shares",
                                                "key_ranges",
                                                "query_ranges",
                                                "cu_seqlens_q",
                                                "cu_seqlens_k",
                                                "kv_lens",
                                                "block_table",
                                                "cache_batch_idx",
                                                "partial_o",
                                                "partial_lse",
                                                "q_descale",
                                                "k_descale",
                                                "v_descale",
                                                "capture0",
                                                "capture1",
                                                "capture2",
                                                "capture3",
                                                "capture4",
                                                "capture5",
                                                "capture6",
                                                "capture7"};
static_assert(std::size(kOperandNames) ==
                  size_t(LaunchPlan::Operand::lastCapture) + 1,
              "one name per operand");
static constexpr const char *kScalarTypeNames[] = {"f32", "f16", "bf16",
                                                   "i32", "i64", "i8"};

const char *scalarTypeName(ScalarType type) {
  return kScalarTypeNames[int(type)];
}

std::optional<ScalarType> scalarTypeNamed(llvm::StringRef name) {
  for (size_t i = 0; i < std::size(kScalarTypeNames); ++i)
    if (name == kScalarTypeNames[i])
      return ScalarType(i);
  return std::nullopt;
}

int64_t scalarTypeBytes(ScalarType type) {
  switch (type) {
  case ScalarType::f16:
  case ScalarType::bf16:
    return 2;
  case ScalarType::i64:
    return 8;
  case ScalarType::i8:
    return 1;
  default:
    return 4;
  }
}

static bool isCapture(LaunchPlan::Operand operand) {
  return operand >= LaunchPlan::Operand::capture0 &&
         operand <= LaunchPlan::Operand::lastCapture;
}

int LaunchPlan::paramRank(Operand operand) const {
  if (isCapture(operand))
    return captures[size_t(operand) - size_t(Operand::capture0)].rank;
  return rankOf(operand);
}

void LaunchPlan::addCaptures(const std::vector<CaptureType> &types) {
  assert(types.size() <= size_t(kMaxCaptures) && "more captures than operands");
  for (size_t i = 0; i < types.size(); ++i)
    params.push_back(captureOperand(int(i)));
  captures = types;
}

int LaunchPlan::rankOf(Operand operand) {
  switch (operand) {
  case Operand::lse:
  case Operand::partialLse:
  case Operand::delta:
  case Operand::dqOrder:
  case Operand::sinkShares:
    return 3;
  case Operand::sinks:
  case Operand::gradSinks:
  case Operand::cuSeqlensQ:
  case Operand::cuSeqlensK:
  case Operand::kvLens:
  case Operand::cacheBatchIdx:
    return 1;
  case Operand::blockTable:
  case Operand::queryDescale:
  case Operand::keyDescale:
  case Operand::valueDescale:
    return 2;
  default:
    return 4;
  }
}

LaunchPlan LaunchPlan::forwardAttention(std::string function, int64_t blockM,
                                        int64_t threads, int64_t sharedBytes,
                                        bool sinks, bool blockMask, bool varlen,
                                        bool kvLens, ForwardKernel kernel,
                                        bool pagedKv, bool cacheBatchIndex,
                                        bool descales) {
  LaunchPlan plan;
  plan.function = std::move(function);
  plan.grid = {GridDim{Extent::queryLength, blockM},
               GridDim{Extent::queryHeads, 1}, GridDim{Extent::batch, 1}};
  if (kernel == ForwardKernel::split)
    plan.grid[2].extent = Extent::partsBatch;
  if (kernel == ForwardKernel::combine)
    plan.grid[0].tile = std::min(blockM, kCombineRows);
  plan.threads = threads;
  plan.sharedBytes = sharedBytes;
  plan.params = {Operand::query, Operand::key, Operand::value,
                 Operand::output, Operand::lse};
  if (sinks)
    plan.params.push_back(Operand::sinks);
  if (varlen)
    plan.params.insert(plan.params.end(),
                       {Operand::cuSeqlensQ, Operand::cuSeqlensK});
  if (kvLens)
    plan.params.push_back(Operand::kvLens);
  if (pagedKv)
    plan.params.push_back(Operand::blockTable);
  if (cacheBatchIndex)
    plan.params.push_back(Operand::cacheBatchIdx);
  if (kernel != ForwardKernel::whole)
    plan.params.insert(plan.params.end(),
                       {Operand::partialOutput, Operand::partialLse});
  if (blockMask)
    plan.params.push_back(Operand::keyRanges);
  if (descales)
    plan.params.insert(
        plan.params.end(),
        {Operand::queryDescale, Operand::keyDescale, Operand::valueDescale});
  return plan;
}

bool LaunchPlan::readByTensorMap(Operand operand) {
  return operand == Operand::query || operand == Operand::key ||
         operand == Operand::value || operand == Operand::gradOutput ||
         operand == Operand::dqAccum;
}

int64_t LaunchPlan::tensorMapElementBytes(Operand operand) {
  return operand == Operand::dqAccum ? 4 : 2;
}

std::optional<LaunchPlan::Operand>
LaunchPlan::operandNamed(llvm::StringRef name) {
  for (size_t i = 0; i < std::size(kOperandNames); ++i)
    if (name == kOperandNames[i])
      return Operand(i);
  return std::nullopt;
}

std::vector<LaunchPlan::Operand> LaunchPlan::backwardParams(bool deterministic,
                                                            bool sinks,
                                                            bool blockMask,
                                                            bool varlen) {
  std::vector<Operand> params = {
      Operand::query,     Operand::key,     Operand::value,
      Operand::output,    Operand::gradOutput, Operand::lse,
      Operand::gradQuery, Operand::gradKey, Operand::gradValue,
      Operand::delta,     Operand::dqAccum};
  if (deterministic)
    params.push_back(Operand::dqOrder);
  if (sinks)
    params.insert(params.end(), {Operand::sinks, Operand::gradSinks});
  if (sinks && deterministic)
    params.push_back(Operand::sinkShares);
  if (blockMask)
    params.push_back(Operand::queryRanges);
  if (blockMask && deterministic)
    params.push_back(Operand::keyRanges);
  if (varlen)
    params.insert(params.end(), {Operand::cuSeqlensQ, Operand::cuSeqlensK});
  return params;
}

int64_t LaunchPlan::blocks(int dim, const ProblemExtents &problem) const {
  const GridDim &g = grid[dim];
  int64_t extent = 0;
  switch (g.extent) {
  case Extent::queryLength:
    extent = problem.queryLength;
    break;
  case Extent::queryHeads:
    extent = problem.queryHeads;
    break;
  case Extent::batch:
    extent = problem.batch;
    break;
  case Extent::keyLength:
    extent = problem.keyLength;
    break;
  case Extent::keyHeads:
    extent = problem.keyHeads;
    break;
  case Extent::partsBatch:
    extent = problem.batch * problem.parts;
    break;
  }
  return (extent + g.tile - 1) / g.tile;
}

int64_t LaunchPlan::tiles(const ProblemExtents &problem) const {
  return blocks(0, problem) * blocks(1, problem) * blocks(2, problem);
}

std::string LaunchPlan::checkLaunch(const ProblemExtents &problem) const {
  constexpr int64_t kMaxPersistentTiles = std::numeric_limits<int32_t>::max();
  if (!persistent) {
    // CUDA's grid limits: 2^31 - 1 blocks along x, 65535 along y and z.
    static constexpr const char *kAxes[] = {"x", "y", "z"};
    for (int d = 0; d < 3; ++d) {
      int64_t limit = d == 0 ? kMaxPersistentTiles : 65535;
      if (blocks(d, problem) > limit)
        return function + " needs " + std::to_string(blocks(d, problem)) +
               " blocks along " + kAxes[d] + " (" +
               kExtentNames[int(grid[d].extent)] + "), over CUDA's " +
               std::to_string(limit);
    }
    return "";
  }
  if (tiles(problem) <= kMaxPersistentTiles)
    return "";
  return "the problem has " + std::to_string(tiles(problem)) + " tiles of " +
         std::to_string(grid[0].tile) + " query rows; " + function +
         " walks at most " + std::to_string(kMaxPersistentTiles);
}

std::array<int64_t, 3>
LaunchPlan::launchGrid(const ProblemExtents &problem,
                       int64_t multiprocessors) const {
  if (!persistent)
    return {blocks(0, problem), blocks(1, problem), blocks(2, problem)};
  int64_t all = tiles(problem);
  return {std::min(all, std::max<int64_t>(multiprocessors, 1)),
          all == 0 ? 0 : 1, all == 0 ? 0 : 1};
}

llvm::json::Value LaunchPlan::toJson() const {
  llvm::json::Array gridJson, paramsJson;
  for (const GridDim &g : grid)
    gridJson.push_back(llvm::json::Object{
        {"extent", kExtentNames[int(g.extent)]}, {"tile", g.tile}});
  for (Operand p : params)
    paramsJson.push_back(kOperandNames[int(p)]);
  llvm::json::Array mapsJson;
  for (const TensorMap &m : tensorMaps) {
    llvm::json::Object map{{"operand", kOperandNames[int(m.operand)]},
                           {"box_rows", m.boxRows},
                           {"box_cols", m.boxCols}};
    if (m.elementBytes)
      map["element_bytes"] = m.elementBytes;
    mapsJson.push_back(std::move(map));
  }
  llvm::json::Array capturesJson;
  for (const CaptureType &c : captures)
    capturesJson.push_back(llvm::json::Object{
        {"type", scalarTypeName(c.type)}, {"rank", c.rank}});
  return llvm::json::Object{{"function", function},
                            {"captures", std::move(capturesJson)},
                            {"grid", std::move(gridJson)},
                            {"threads", threads},
                            {"shared_bytes", sharedBytes},
                            {"persistent", persistent},
                            {"dependent_launch", dependentLaunch},
                            {"tensor_maps", std::move(mapsJson)},
                            {"params", std::move(paramsJson)}};
}

template <typename Enum, size_t N>
static std::optional<Enum> parseName(const char *const (&names)[N],
                                     std::optional<llvm::StringRef> text) {
  for (size_t i = 0; text && i < N; ++i)
    if (*text == names[i])
      return Enum(i);
  return std::nullopt;
}

std::optional<LaunchPlan> LaunchPlan::fromJson(const llvm::json::Value &json) {
  const llvm::json::Object *object = json.getAsObject();
  if (!object)
    return std::nullopt;
  LaunchPlan plan;
  const llvm::json::Array *gridJson = object->getArray("grid");
  const llvm::json::Array *paramsJson = object->getArray("params");
  std::optional<int64_t> threads = object->getInteger("threads");
  std::optional<int64_t> sharedBytes = object->getInteger("shared_bytes");
  if (!gridJson || gridJson->size() != 3 || !paramsJson || !threads ||
      *threads < 1 || !sharedBytes || *sharedBytes < 0)
    return std::nullopt;
  for (size_t d = 0; d < 3; ++d) {
    const llvm::json::Object *dim = (*gridJson)[d].getAsObject();
    if (!dim)
      return std::nullopt;
    std::optional<Extent> extent =
        parseName<Extent>(kExtentNames, dim->getString("extent"));
    std::optional<int64_t> tile = dim->getInteger("tile");
    if (!extent || !tile || *tile < 1)
      return std::nullopt;
    plan.grid[d] = {*extent, *tile};
  }
  for (const llvm::json::Value &p : *paramsJson) {
    std::optional<Operand> operand =
        parseName<Operand>(kOperandNames, p.getAsString());
    if (!operand)
      return std::nullopt;
    plan.params.push_back(*operand);
  }
  // Plans stored before captures existed have none.
  if (const llvm::json::Array *capturesJson = object->getArray("captures")) {
    for (const llvm::json::Value &c : *capturesJson) {
      const llvm::json::Object *capture = c.getAsObject();
      if (!capture)
        return std::nullopt;
      std::optional<llvm::StringRef> typeName = capture->getString("type");
      std::optional<ScalarType> type =
          typeName ? scalarTypeNamed(*typeName) : std::nullopt;
      std::optional<int64_t> rank = capture->getInteger("rank");
      if (!type || !rank || *rank < 1 || *rank > 4)
        return std::nullopt;
      plan.captures.push_back({*type, int(*rank)});
    }
  }
  // Every capture parameter names a listed capture.
  if (plan.captures.size() > size_t(kMaxCaptures) ||
      llvm::any_of(plan.params, [&](Operand p) {
        return isCapture(p) && size_t(p) - size_t(Operand::capture0) >=
                                   plan.captures.size();
      }))
    return std::nullopt;
  // Plans stored before tensor maps existed have none.
  if (const llvm::json::Array *mapsJson = object->getArray("tensor_maps")) {
    for (const llvm::json::Value &m : *mapsJson) {
      const llvm::json::Object *map = m.getAsObject();
      if (!map)
        return std::nullopt;
      std::optional<Operand> operand =
          parseName<Operand>(kOperandNames, map->getString("operand"));
      std::optional<int64_t> rows = map->getInteger("box_rows");
      std::optional<int64_t> cols = map->getInteger("box_cols");
      // FP8 inputs: 1-byte elements (absent: the operand's usual).
      int64_t elementBytes = map->getInteger("element_bytes").value_or(0);
      if (!operand)
        return std::nullopt;
      TensorMap parsed{*operand, rows.value_or(0), cols.value_or(0),
                       elementBytes};
      // TMA boxes: at most 256 rows of 128 or 64 bytes (the runtime's
      // swizzle of that span).
      if (!readByTensorMap(*operand) || parsed.boxRows < 1 ||
          parsed.boxRows > 256 || parsed.boxCols < 1 ||
          !llvm::is_contained({0, 1, 2, 4}, elementBytes) ||
          !llvm::is_contained({64, 128}, parsed.swizzleBytes()))
        return std::nullopt;
      plan.tensorMaps.push_back(parsed);
    }
  }
  plan.threads = *threads;
  plan.sharedBytes = *sharedBytes;
  // Plans stored before persistent kernels existed are not persistent.
  if (const llvm::json::Value *persistent = object->get("persistent")) {
    std::optional<bool> value = persistent->getAsBoolean();
    if (!value)
      return std::nullopt;
    plan.persistent = *value;
  }
  // Nor did dependent launches.
  if (const llvm::json::Value *dependent = object->get("dependent_launch")) {
    std::optional<bool> value = dependent->getAsBoolean();
    if (!value)
      return std::nullopt;
    plan.dependentLaunch = *value;
  }
  if (std::optional<llvm::StringRef> function = object->getString("function"))
    plan.function = function->str();
  if (plan.function.empty())
    return std::nullopt;
  return plan;
}

} // namespace fa
