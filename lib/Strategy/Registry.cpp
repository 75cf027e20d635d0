//===- Registry.cpp - The code-generation strategies, found by name -------===//
//
// The one list of strategies. Adding one: its model in lib/Strategy (with
// model()), a line here and in compiler/StrategyPasses.cpp, its name in the
// dialect's StrategyKind and the C ABI's fa_strategy (docs/adding.md).
//
//===----------------------------------------------------------------------===//
#include "lib/Strategy/Registry.h"
#include "lib/Strategy/MmaModel.h"
#include "lib/Strategy/SimtModel.h"
#include "lib/Strategy/WgmmaModel.h"

namespace fa {

const std::vector<const StrategyModel *> &registeredStrategies() {
  // In the order `auto` prefers them: warpgroup MMA where it serves the
  // problem (faster than mma.sync on every measured shape,
  // docs/benchmarks.md), then mma.sync, then simt, which serves any.
  static const std::vector<const StrategyModel *> strategies = {
      &wgmma::model(), &mma::model(), &simt::model()};
  return strategies;
}

const StrategyModel &strategyModel(Strategy kind) {
  for (const StrategyModel *model : registeredStrategies())
    if (model->kind == kind)
      return *model;
  // `automatic` is resolved before anyone asks for its model.
  return simt::model();
}

const StrategyModel *lookupStrategyCode(int code) {
  for (const StrategyModel *model : registeredStrategies())
    if (model->abiCode == code)
      return model;
  return nullptr;
}

const StrategyModel *lookupStrategy(const std::string &name) {
  for (const StrategyModel *model : registeredStrategies())
    if (name == model->name)
      return model;
  return nullptr;
}

std::string checkLowersBackward(const StrategyModel &model) {
  if (model.lowersBackward)
    return "";
  // Named from the most general strategy on.
  std::vector<std::string> names;
  for (auto it = registeredStrategies().rbegin();
       it != registeredStrategies().rend(); ++it)
    if ((*it)->lowersBackward)
      names.push_back((*it)->name);
  std::string list;
  for (size_t i = 0; i < names.size(); ++i)
    list += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return "the backward runs on the " + list + " strategies, not on " +
         model.name;
}

std::string strategyNames(bool withAuto) {
  std::string names = withAuto ? "auto" : "";
  for (const StrategyModel *model : registeredStrategies())
    names += (names.empty() ? "" : ", ") + std::string(model->name);
  return names;
}

} // namespace fa
