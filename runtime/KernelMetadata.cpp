//===- KernelMetadata.cpp - A kernel's cache metadata -----------*- C++ -*-===//
#include "runtime/KernelMetadata.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <optional>

namespace fa {

KernelResources combineResources(const std::string &name,
                                 const std::vector<KernelResources> &all) {
  if (all.size() == 1)
    return all.front();
  KernelResources combined;
  combined.name = name;
  for (const KernelResources &k : all) {
    combined.registers = std::max(combined.registers, k.registers);
    combined.staticSharedBytes =
        std::max(combined.staticSharedBytes, k.staticSharedBytes);
    combined.stackFrameBytes =
        std::max(combined.stackFrameBytes, k.stackFrameBytes);
    combined.spillStoreBytes += k.spillStoreBytes;
    combined.spillLoadBytes += k.spillLoadBytes;
    combined.barriers = std::max(combined.barriers, k.barriers);
  }
  return combined;
}

std::string toMetadata(const KernelInfo &info) {
  llvm::json::Object object{
      {"key", info.key},
      {"name", info.name},
      {"spec", info.spec.canonicalText()},
      {"num_threads", info.numThreads},
      {"shared_memory_bytes", info.sharedMemoryBytes},
      {"registers", info.ptxas.registers},
      {"stack_frame_bytes", info.ptxas.stackFrameBytes},
      {"spill_store_bytes", info.ptxas.spillStoreBytes},
      {"spill_load_bytes", info.ptxas.spillLoadBytes},
      {"assembler", info.assembler},
      {"launches", llvm::json::Array(llvm::map_range(
                       info.launches,
                       [](const LaunchPlan &plan) { return plan.toJson(); }))},
  };
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(object));
  return text;
}

bool fromMetadata(const std::string &text, const KernelSpec &spec,
                  KernelInfo &info) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(text);
  if (!value) {
    llvm::consumeError(value.takeError());
    return false;
  }
  const llvm::json::Object *object = value->getAsObject();
  if (!object)
    return false;
  auto integer = [&](llvm::StringRef field, int64_t &out) {
    std::optional<int64_t> v = object->getInteger(field);
    if (v)
      out = *v;
    return v.has_value();
  };
  std::optional<llvm::StringRef> name = object->getString("name");
  std::optional<llvm::StringRef> specText = object->getString("spec");
  if (!specText || *specText != spec.canonicalText())
    return false;
  if (!name || !integer("num_threads", info.numThreads) ||
      !integer("shared_memory_bytes", info.sharedMemoryBytes))
    return false;
  const llvm::json::Array *launches = object->getArray("launches");
  if (!launches || launches->empty())
    return false;
  info.launches.clear();
  for (const llvm::json::Value &launch : *launches) {
    std::optional<LaunchPlan> plan = LaunchPlan::fromJson(launch);
    if (!plan)
      return false;
    info.launches.push_back(std::move(*plan));
  }
  info.name = name->str();
  info.ptxas.name = info.name;
  integer("registers", info.ptxas.registers);
  integer("stack_frame_bytes", info.ptxas.stackFrameBytes);
  integer("spill_store_bytes", info.ptxas.spillStoreBytes);
  integer("spill_load_bytes", info.ptxas.spillLoadBytes);
  if (std::optional<llvm::StringRef> assembler = object->getString("assembler"))
    info.assembler = assembler->str();
  return info.numThreads > 0;
}

} // namespace fa
