//===- CRequest.cpp - A C ABI call's arguments as a kernel spec -*- C++ -*-===//
#include "runtime/CRequest.h"
#include "lib/Strategy/Registry.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstring>
#include <utility>
#include <vector>

// The layouts struct_size came in with: a struct only grows past them.
static_assert(sizeof(fa_kernel_config) >= fa::kFirstConfigSize &&
                  sizeof(fa_attention_extras) >= fa::kFirstExtrasSize &&
                  sizeof(fa_kernel_info) >= fa::kFirstInfoSize,
              "a versioned C struct shrank");

namespace {
/// "" when `size` (a struct_size) names a layout of struct `name` this
/// library reads and writes: from its first versioned size to its own.
std::string checkStructSize(int64_t size, const char *name, int64_t first,
                            size_t current) {
  if (size >= first && size <= int64_t(current))
    return "";
  return std::string(name) + "->struct_size must be sizeof(" + name +
         ") as fa_runtime.h defines it: " + std::to_string(first) + " to " +
         std::to_string(current) + " bytes for this library, got " +
         std::to_string(size) +
         (size > int64_t(current) ? " (built against a newer fa_runtime.h?)"
                                  : " (start from its _INIT macro)");
}

/// `in`'s first struct_size bytes into `out` (zeroed; NULL: all zero), or
/// why not.
template <typename Struct>
std::string readVersioned(const Struct *in, Struct &out, const char *name,
                          int64_t first) {
  out = Struct{};
  out.struct_size = int64_t(sizeof(Struct));
  if (!in)
    return "";
  if (std::string error =
          checkStructSize(in->struct_size, name, first, sizeof(Struct));
      !error.empty())
    return error;
  std::memcpy(static_cast<void *>(&out), in, size_t(in->struct_size));
  out.struct_size = int64_t(sizeof(Struct));
  return "";
}
} // namespace

std::string fa::configFromC(const fa_kernel_config *config,
                            fa_kernel_config &out) {
  return readVersioned(config, out, "fa_kernel_config", kFirstConfigSize);
}

std::string fa::extrasFromC(const fa_attention_extras *extras,
                            fa_attention_extras &out) {
  return readVersioned(extras, out, "fa_attention_extras", kFirstExtrasSize);
}

std::string fa::checkInfoSize(const fa_kernel_info *info) {
  return info ? checkStructSize(info->struct_size, "fa_kernel_info",
                                kFirstInfoSize, sizeof(fa_kernel_info))
              : "";
}

std::string fa::specFromC(int64_t headDim, int dtype, int causal,
                          double scale, const fa_kernel_config *config,
                          KernelSpec &spec) {
  spec.headDim = headDim;
  switch (dtype) {
  case FA_F32:
    spec.dtype = ElementType::f32;
    break;
  case FA_F16:
    spec.dtype = ElementType::f16;
    break;
  case FA_BF16:
    spec.dtype = ElementType::bf16;
    break;
  case FA_E4M3:
    spec.dtype = ElementType::e4m3;
    break;
  default:
    return "dtype must be FA_F32 (0), FA_F16 (1), FA_BF16 (2) or FA_E4M3 "
           "(6), got " +
           std::to_string(dtype);
  }
  auto flag = [](const char *name, int value, bool &out) -> std::string {
    if (value != 0 && value != 1)
      return std::string(name) + " must be 0 or 1, got " +
             std::to_string(value);
    out = value == 1;
    return "";
  };
  if (std::string error = flag("causal", causal, spec.causal); !error.empty())
    return error;
  // 0 selects the default 1/sqrt(head-dim); anything else is validated.
  spec.scale = scale;
  spec.blockM = config ? config->block_m : 0;
  spec.blockN = config ? config->block_n : 0;
  spec.numWarps = config ? config->num_warps : 0;
  spec.stages = config ? config->stages : 0;
  spec.arch = config && config->arch ? config->arch : "";
  spec.scoreMod = config && config->score_mod ? config->score_mod : "";
  spec.maskMod = config && config->mask_mod ? config->mask_mod : "";
  if (config) {
    if (std::string error = flag("backward", config->backward, spec.backward);
        !error.empty())
      return error;
    if (std::string error =
            flag("deterministic", config->deterministic, spec.deterministic);
        !error.empty())
      return error;
    if (std::string error = flag("sinks", config->sinks, spec.sinks);
        !error.empty())
      return error;
    if (std::string error =
            flag("block_mask", config->block_mask, spec.blockMask);
        !error.empty())
      return error;
    if (std::string error = flag("varlen", config->varlen, spec.varlen);
        !error.empty())
      return error;
    if (std::string error = flag("kv_lens", config->kv_lens, spec.kvLens);
        !error.empty())
      return error;
  }
  int strategy = config ? config->strategy : FA_STRATEGY_AUTO;
  if (strategy == FA_STRATEGY_AUTO) {
    spec.strategy = Strategy::automatic;
  } else if (const StrategyModel *model =
                 lookupStrategyCode(strategy)) {
    spec.strategy = model->kind;
  } else {
    // Every code, in order: FA_STRATEGY_AUTO (0), FA_STRATEGY_SIMT (1), ...
    std::vector<std::pair<int, std::string>> codes = {{FA_STRATEGY_AUTO,
                                                       "AUTO"}};
    for (const StrategyModel *model : registeredStrategies())
      codes.push_back({model->abiCode, llvm::StringRef(model->name).upper()});
    llvm::sort(codes);
    std::string list;
    for (size_t i = 0; i < codes.size(); ++i)
      list += std::string(i == 0 ? "" : i + 1 == codes.size() ? " or " : ", ") +
              "FA_STRATEGY_" + codes[i].second + " (" +
              std::to_string(codes[i].first) + ")";
    return "strategy must be " + list + ", got " + std::to_string(strategy);
  }
  return "";
}

fa::TensorArg fa::tensorFromC(const fa_tensor &t) {
  TensorArg arg;
  arg.data = t.data;
  std::memcpy(arg.sizes, t.sizes, sizeof(arg.sizes));
  std::memcpy(arg.strides, t.strides, sizeof(arg.strides));
  return arg;
}

std::string fa::sinksFromC(const fa_attention_extras *extras, bool backward,
                           KernelSpec &spec) {
  const fa_tensor *sinks = extras ? extras->sinks : nullptr;
  const fa_tensor *gradSinks = extras ? extras->grad_sinks : nullptr;
  if (spec.sinks && !sinks)
    return "config->sinks is 1 but extras->sinks is NULL (the kernel takes "
           "the sink logits)";
  if (gradSinks && !sinks)
    return "extras->grad_sinks is given without extras->sinks";
  if (gradSinks && !backward)
    return "extras->grad_sinks is the backward's: the forward takes only "
           "extras->sinks";
  if (sinks && backward && !gradSinks)
    return "the backward with sinks writes their gradient: extras->grad_sinks "
           "is NULL";
  spec.sinks = sinks != nullptr;
  return "";
}

std::string fa::blockMaskFromC(const fa_attention_extras *extras,
                               bool backward, KernelSpec &spec) {
  const fa_tensor *keyRanges = extras ? extras->key_ranges : nullptr;
  const fa_tensor *queryRanges = extras ? extras->query_ranges : nullptr;
  const fa_tensor *table = backward ? queryRanges : keyRanges;
  // The deterministic backward orders its turns by the key ranges too.
  bool bothTables = backward && spec.deterministic;
  if (backward && keyRanges && !(bothTables && queryRanges))
    return "extras->key_ranges is the forward's: the backward takes "
           "extras->query_ranges (and key_ranges with them when "
           "config->deterministic = 1)";
  if (bothTables && queryRanges && !keyRanges)
    return "the deterministic backward (config->deterministic = 1) with a "
           "block mask takes extras->key_ranges with extras->query_ranges: "
           "its turns at a query tile are those of the K/V tiles its key "
           "ranges give it";
  if (!backward && queryRanges)
    return "extras->query_ranges is the backward's: the forward takes "
           "extras->key_ranges";
  if (spec.blockMask && !table)
    return std::string("config->block_mask is 1 but extras->") +
           (backward ? "query_ranges" : "key_ranges") +
           " is NULL (the kernel takes the table)";
  spec.blockMask = table != nullptr;
  return "";
}

std::string fa::capturesFromC(const fa_attention_extras *extras,
                              std::vector<CaptureArg> &captures) {
  captures.clear();
  if (!extras || extras->num_captures == 0)
    return "";
  if (extras->num_captures < 0 || extras->num_captures > kMaxCaptures)
    return "extras->num_captures must be in [0, " +
           std::to_string(kMaxCaptures) + "], got " +
           std::to_string(extras->num_captures);
  if (!extras->captures)
    return "extras->captures is NULL but extras->num_captures is " +
           std::to_string(extras->num_captures);
  for (int64_t i = 0; i < extras->num_captures; ++i) {
    const fa_capture &c = extras->captures[i];
    std::string name = "extras->captures[" + std::to_string(i) + "]";
    CaptureArg arg;
    switch (c.dtype) {
    case FA_F32:
      arg.type = ScalarType::f32;
      break;
    case FA_F16:
      arg.type = ScalarType::f16;
      break;
    case FA_BF16:
      arg.type = ScalarType::bf16;
      break;
    case FA_I32:
      arg.type = ScalarType::i32;
      break;
    case FA_I64:
      arg.type = ScalarType::i64;
      break;
    case FA_I8:
      arg.type = ScalarType::i8;
      break;
    default:
      return name + ".dtype must be an fa_dtype (0-5), got " +
             std::to_string(c.dtype);
    }
    if (c.rank < 1 || c.rank > 4)
      return name + ".rank must be in [1, 4], got " + std::to_string(c.rank);
    arg.rank = c.rank;
    arg.tensor = tensorFromC(c.tensor);
    captures.push_back(arg);
  }
  return "";
}
