//===- KernelMetadata.cpp - A kernel's cache metadata -----------*- C++ -*-===//
#include "runtime/KernelMetadata.h"
#include "lib/Strategy/SpecRules.h"
#include "lib/TextNesting.h"

#include "llvm/ADT/StringExtras.h"

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
      {"spec", canonicalText(info.spec)},
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
  // Bounded before the (recursive) JSON parser sees it.
  if (text.size() > kMaxMetadataBytes ||
      !checkTextNesting(text, "metadata", kMaxMetadataNesting).empty())
    return false;
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
  if (!specText || *specText != canonicalText(spec))
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
  // Every field in the range a kernel of this spec can have: a block of at
  // most 1024 threads, shared memory within the largest arch's, registers
  // within the ISA's; the kernel and its launches named after the spec.
  constexpr int64_t kMaxThreads = 1024, kMaxSharedBytes = 256 * 1024,
                    kMaxRegisters = 255, kMaxLocalBytes = int64_t(1) << 24;
  auto inRange = [](int64_t v, int64_t lo, int64_t hi) {
    return v >= lo && v <= hi;
  };
  if (!inRange(info.numThreads, 1, kMaxThreads) ||
      !inRange(info.sharedMemoryBytes, 0, kMaxSharedBytes) ||
      !inRange(info.ptxas.registers, 0, kMaxRegisters) ||
      !inRange(info.ptxas.stackFrameBytes, 0, kMaxLocalBytes) ||
      !inRange(info.ptxas.spillStoreBytes, 0, kMaxLocalBytes) ||
      !inRange(info.ptxas.spillLoadBytes, 0, kMaxLocalBytes) ||
      info.name != kernelName(spec))
    return false;
  for (const LaunchPlan &plan : info.launches) {
    if (!inRange(plan.threads, 1, kMaxThreads) ||
        !inRange(plan.sharedBytes, 0, kMaxSharedBytes) ||
        !llvm::StringRef(plan.function).starts_with(info.name))
      return false;
    for (const LaunchPlan::GridDim &dim : plan.grid)
      if (!inRange(dim.tile, 1, int64_t(1) << 20))
        return false;
  }
  return true;
}

std::string checkCubinImage(const std::vector<char> &cubin,
                            const KernelSpec &spec) {
  // ELF64 header: magic, class (offset 4), machine (18, 2 bytes), flags
  // (48, 4 bytes); CUDA's ABI version (8) says where the SM version sits in
  // the flags: bits 8-15 from version 8 on (ptxas 13 and the driver of
  // CUDA 13), bits 0-7 before.
  constexpr size_t kHeaderBytes = 64;
  constexpr uint16_t kMachineCuda = 190;
  if (cubin.size() < kHeaderBytes)
    return "the cubin is " + std::to_string(cubin.size()) +
           " bytes, shorter than an ELF header";
  auto byte = [&](size_t i) { return uint8_t(cubin[i]); };
  if (byte(0) != 0x7f || byte(1) != 'E' || byte(2) != 'L' || byte(3) != 'F' ||
      byte(4) != 2)
    return "the cubin is not a 64-bit ELF image";
  uint16_t machine = uint16_t(byte(18) | byte(19) << 8);
  if (machine != kMachineCuda)
    return "the cubin is an ELF image for machine " + std::to_string(machine) +
           ", not CUDA (190)";
  uint32_t flags = uint32_t(byte(48)) | uint32_t(byte(49)) << 8 |
                   uint32_t(byte(50)) << 16 | uint32_t(byte(51)) << 24;
  int64_t version = byte(8) >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
  int64_t wanted = 0;
  llvm::StringRef arch(spec.arch);
  if (!arch.consume_front("sm_") ||
      arch.take_while(llvm::isDigit).getAsInteger(10, wanted))
    return "the spec's arch '" + spec.arch + "' has no SM version";
  if (version != wanted)
    return "the cubin is for sm_" + std::to_string(version) + ", the spec for " +
           spec.arch;
  return "";
}

std::string checkPtxImage(const std::vector<char> &image,
                          const KernelSpec &spec) {
  if (image.empty() || image.back() != '\0')
    return "the PTX image does not end in a NUL";
  llvm::StringRef text(image.data(), image.size() - 1);
  if (text.contains('\0'))
    return "the PTX image holds a NUL before its end";
  // The target directive: ".target sm_90a" (optionally followed by
  // ", debug" etc.), on a line of its own.
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    llvm::StringRef rest = line.trim();
    if (!rest.consume_front(".target"))
      continue;
    llvm::StringRef target = rest.trim().take_until(
        [](char c) { return c == ',' || c == ' ' || c == '\t'; });
    if (target == spec.arch)
      return "";
    return "the PTX targets " + target.str() + ", the spec " + spec.arch;
  }
  return "the PTX image has no .target line";
}

} // namespace fa
