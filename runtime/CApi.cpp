//===- CApi.cpp - C ABI of the fa attention runtime -----------------*- C++ -*-===//
#include "lib/Strategy/Registry.h"
#include "lib/Strategy/SpecRules.h"
#include "runtime/CRequest.h"
#include "runtime/Runtime.h"
#include "runtime/fa_runtime.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstring>

struct fa_runtime {
  std::unique_ptr<fa::Runtime> runtime;
};

namespace {

thread_local std::string lastError;

fa_status toStatus(const fa::Result &result) {
  lastError = result.message;
  switch (result.status) {
  case fa::Status::ok:
    return FA_OK;
  case fa::Status::invalidArgument:
    return FA_ERROR_INVALID_ARGUMENT;
  case fa::Status::noDriver:
    return FA_ERROR_NO_DRIVER;
  case fa::Status::cudaError:
    return FA_ERROR_CUDA;
  case fa::Status::compileError:
    return FA_ERROR_COMPILE;
  case fa::Status::cacheError:
    return FA_ERROR_CACHE;
  }
  return FA_ERROR_INVALID_ARGUMENT;
}

fa_status invalid(const char *message) {
  return toStatus({fa::Status::invalidArgument, message});
}

void copyName(char *dest, size_t size, const std::string &text) {
  std::strncpy(dest, text.c_str(), size - 1);
  dest[size - 1] = '\0';
}

} // namespace

extern "C" {

fa_status fa_runtime_create(const char *cacheDir, int device,
                            fa_runtime **runtime) {
  if (!runtime)
    return invalid("runtime is a null pointer");
  *runtime = nullptr;
  fa::RuntimeOptions options;
  options.cacheDir = cacheDir ? cacheDir : "";
  options.device = device;
  auto handle = std::make_unique<fa_runtime>();
  if (fa::Result r = fa::Runtime::create(options, handle->runtime); !r)
    return toStatus(r);
  *runtime = handle.release();
  return toStatus({});
}

void fa_runtime_destroy(fa_runtime *runtime) { delete runtime; }

int fa_runtime_has_driver(const fa_runtime *runtime) {
  return runtime && runtime->runtime->hasDriver();
}

const char *fa_last_error(void) { return lastError.c_str(); }

const char *fa_strategy_name(int32_t code) {
  if (code == FA_STRATEGY_AUTO)
    return "auto";
  const fa::StrategyModel *model = fa::lookupStrategyCode(code);
  return model ? model->name : nullptr;
}

fa_status fa_prepare_kernel(fa_runtime *runtime, int64_t headDim,
                            int dtype, int causal, double scale,
                            const fa_kernel_config *config,
                            fa_kernel_info *info) {
  if (!runtime)
    return invalid("runtime is a null pointer");
  fa_kernel_config configCopy;
  if (std::string error = fa::configFromC(config, configCopy); !error.empty())
    return invalid(error.c_str());
  if (config)
    config = &configCopy;
  if (std::string error = fa::checkInfoSize(info); !error.empty())
    return invalid(error.c_str());
  fa::KernelSpec spec;
  if (std::string error = fa::specFromC(headDim, dtype, causal, scale, config, spec);
      !error.empty())
    return invalid(error.c_str());
  int64_t length = config ? config->sequence_length : 0;
  if (length < 0)
    return invalid(("sequence_length must be >= 0 (0 = not known), got " +
                    std::to_string(length))
                       .c_str());
  fa::KernelInfo kernel;
  fa::Result r = runtime->runtime->prepare(spec, &kernel, length);
  if (r && info) {
    // Filled whole here, then copied as far as the caller's struct reaches.
    fa_kernel_info out = {};
    out.struct_size = info->struct_size;
    copyName(out.name, sizeof(out.name), kernel.name);
    copyName(out.key, sizeof(out.key), kernel.key);
    out.num_threads = kernel.numThreads;
    out.shared_memory_bytes = kernel.sharedMemoryBytes;
    out.registers = kernel.ptxas.registers;
    out.spill_store_bytes = kernel.ptxas.spillStoreBytes;
    out.spill_load_bytes = kernel.ptxas.spillLoadBytes;
    out.source = int32_t(kernel.source);
    out.compile_seconds = kernel.compileSeconds;
    out.lower_seconds = kernel.compileStages.lower;
    out.codegen_seconds = kernel.compileStages.codegen;
    out.assemble_seconds = kernel.compileStages.assemble;
    out.strategy = fa::strategyModel(resolveStrategy(kernel.spec)).abiCode;
    out.block_m = kernel.spec.blockM;
    out.block_n = kernel.spec.blockN;
    out.num_warps = kernel.spec.numWarps;
    out.stages = kernel.spec.stages;
    copyName(out.assembler, sizeof(out.assembler), kernel.assembler);
    std::memcpy(static_cast<void *>(info), &out, size_t(out.struct_size));
  }
  return toStatus(r);
}

fa_status fa_attention_forward(fa_runtime *runtime, const fa_tensor *q,
                               const fa_tensor *k, const fa_tensor *v,
                               const fa_tensor *o, const fa_tensor *lse,
                               int dtype, int causal, double scale,
                               const fa_kernel_config *config, void *stream) {
  return fa_attention_forward_ex(runtime, q, k, v, o, lse, nullptr, dtype,
                                 causal, scale, config, stream);
}

/// A call's config and extras read by their struct_size into the copies,
/// the pointers then pointing at them (NULL stays NULL); "" or why not.
static std::string readConfigAndExtras(const fa_kernel_config *&config,
                                       fa_kernel_config &configCopy,
                                       const fa_attention_extras *&extras,
                                       fa_attention_extras &extrasCopy) {
  if (std::string error = fa::configFromC(config, configCopy); !error.empty())
    return error;
  if (std::string error = fa::extrasFromC(extras, extrasCopy); !error.empty())
    return error;
  if (config)
    config = &configCopy;
  if (extras)
    extras = &extrasCopy;
  return "";
}

/// The forward's request from the C arguments (varlen: with the offsets).
static fa_status forwardFromC(fa_runtime *runtime, const fa_tensor *q,
                              const fa_tensor *k, const fa_tensor *v,
                              const fa_tensor *o, const fa_tensor *lse,
                              const fa_attention_extras *extras, int dtype,
                              int causal, double scale,
                              const fa_kernel_config *config, void *stream,
                              const fa_tensor *cuSeqlensQ,
                              const fa_tensor *cuSeqlensK,
                              int64_t maxSeqlenQ, int64_t maxSeqlenK,
                              const fa_tensor *kvLens = nullptr) {
  if (!runtime)
    return invalid("runtime is a null pointer");
  if (!q || !k || !v || !o || !lse)
    return invalid("a tensor descriptor is a null pointer");
  fa_kernel_config configCopy;
  fa_attention_extras extrasCopy;
  if (std::string error =
          readConfigAndExtras(config, configCopy, extras, extrasCopy);
      !error.empty())
    return invalid(error.c_str());
  fa::KernelSpec spec;
  if (std::string error =
          fa::specFromC(q->sizes[3], dtype, causal, scale, config, spec);
      !error.empty())
    return invalid(error.c_str());
  if (std::string error = fa::sinksFromC(extras, /*backward=*/false, spec);
      !error.empty())
    return invalid(error.c_str());
  if (std::string error =
          fa::blockMaskFromC(extras, /*backward=*/false, spec);
      !error.empty())
    return invalid(error.c_str());
  fa::AttentionArgs args;
  if (std::string error = fa::capturesFromC(extras, args.captures);
      !error.empty())
    return invalid(error.c_str());
  if (spec.sinks)
    args.sinks = fa::tensorFromC(*extras->sinks);
  if (spec.blockMask)
    args.keyRanges = fa::tensorFromC(*extras->key_ranges);
  if (extras)
    args.kvSplits = extras->kv_splits;
  // A cache index: the kvcache call's alone.
  if (extras && extras->cache_batch_idx) {
    if (!kvLens || cuSeqlensQ)
      return invalid("cache_batch_idx is taken by "
                     "fa_attention_kvcache_forward only");
    spec.cacheBatchIndex = true;
    args.cacheBatchIdx = fa::tensorFromC(*extras->cache_batch_idx);
  }
  // A page table: the kvcache and varlen calls'.
  if (extras && extras->block_table) {
    if (!kvLens && !cuSeqlensQ)
      return invalid("a block_table (paged KV cache) is taken by "
                     "fa_attention_kvcache_forward and the varlen forwards "
                     "only");
    spec.pagedKv = true;
    args.blockTable = fa::tensorFromC(*extras->block_table);
  }
  // The varlen call alone takes (and asks for) the varlen kernels.
  spec.varlen = cuSeqlensQ != nullptr;
  if (spec.varlen) {
    args.cuSeqlensQ = fa::tensorFromC(*cuSeqlensQ);
    args.cuSeqlensK = fa::tensorFromC(*cuSeqlensK);
    args.maxSeqlenQ = maxSeqlenQ;
    args.maxSeqlenK = maxSeqlenK;
  }
  // FP8: the three descales and O's type; the other dtypes take neither.
  bool float8 = spec.dtype == fa::ElementType::e4m3;
  bool anyDescale =
      extras && (extras->q_descale || extras->k_descale || extras->v_descale);
  if (float8 && !(anyDescale && extras->q_descale && extras->k_descale &&
                  extras->v_descale))
    return invalid("an FA_E4M3 forward takes extras->q_descale, k_descale "
                   "and v_descale (f32 [B, Hkv] each)");
  if (!float8 && anyDescale)
    return invalid("descales (extras->q_descale, k_descale, v_descale) go "
                   "with dtype FA_E4M3 only");
  if (extras && extras->out_dtype != 0) {
    if (!float8)
      return invalid("extras->out_dtype is O's type for dtype FA_E4M3 only "
                     "(0 otherwise)");
    if (extras->out_dtype != FA_BF16 && extras->out_dtype != FA_F16)
      return invalid(("extras->out_dtype must be 0, FA_F16 (1) or FA_BF16 "
                      "(2), got " +
                      std::to_string(extras->out_dtype))
                         .c_str());
    spec.outDtype = extras->out_dtype == FA_F16 ? fa::ElementType::f16
                                                : fa::ElementType::bf16;
  }
  if (float8) {
    args.qDescale = fa::tensorFromC(*extras->q_descale);
    args.kDescale = fa::tensorFromC(*extras->k_descale);
    args.vDescale = fa::tensorFromC(*extras->v_descale);
  }
  // So does the kvcache call.
  spec.kvLens = kvLens != nullptr;
  if (spec.kvLens)
    args.kvLens = fa::tensorFromC(*kvLens);
  args.q = fa::tensorFromC(*q);
  args.k = fa::tensorFromC(*k);
  args.v = fa::tensorFromC(*v);
  args.o = fa::tensorFromC(*o);
  args.lse = fa::tensorFromC(*lse);
  args.stream = stream;
  return toStatus(runtime->runtime->forward(spec, args));
}

fa_status fa_attention_forward_ex(fa_runtime *runtime, const fa_tensor *q,
                                  const fa_tensor *k, const fa_tensor *v,
                                  const fa_tensor *o, const fa_tensor *lse,
                                  const fa_attention_extras *extras,
                                  int dtype, int causal, double scale,
                                  const fa_kernel_config *config,
                                  void *stream) {
  return forwardFromC(runtime, q, k, v, o, lse, extras, dtype, causal, scale,
                      config, stream, nullptr, nullptr, 0, 0);
}

fa_status fa_attention_varlen_forward(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *lse,
    const fa_tensor *cuSeqlensQ, const fa_tensor *cuSeqlensK,
    int64_t maxSeqlenQ, int64_t maxSeqlenK, const fa_attention_extras *extras,
    int dtype, int causal, double scale, const fa_kernel_config *config,
    void *stream) {
  if (!cuSeqlensQ || !cuSeqlensK)
    return invalid("a cu_seqlens descriptor is a null pointer");
  return forwardFromC(runtime, q, k, v, o, lse, extras, dtype, causal, scale,
                      config, stream, cuSeqlensQ, cuSeqlensK, maxSeqlenQ,
                      maxSeqlenK);
}

fa_status fa_attention_kvcache_forward(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *kCache,
    const fa_tensor *vCache, const fa_tensor *o, const fa_tensor *lse,
    const fa_tensor *kvLens, const fa_attention_extras *extras, int dtype,
    int causal, double scale, const fa_kernel_config *config, void *stream) {
  if (!kvLens)
    return invalid("the kv_lens descriptor is a null pointer");
  return forwardFromC(runtime, q, kCache, vCache, o, lse, extras, dtype,
                      causal, scale, config, stream, nullptr, nullptr, 0, 0,
                      kvLens);
}

fa_status fa_attention_varlen_kvcache_forward(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *lse,
    const fa_tensor *cuSeqlensQ, const fa_tensor *cuSeqlensK,
    int64_t maxSeqlenQ, int64_t maxSeqlenK, const fa_tensor *kvLens,
    const fa_attention_extras *extras, int dtype, int causal, double scale,
    const fa_kernel_config *config, void *stream) {
  if (!cuSeqlensQ || !cuSeqlensK)
    return invalid("a cu_seqlens descriptor is a null pointer");
  if (!kvLens)
    return invalid("the kv_lens descriptor is a null pointer");
  return forwardFromC(runtime, q, k, v, o, lse, extras, dtype, causal, scale,
                      config, stream, cuSeqlensQ, cuSeqlensK, maxSeqlenQ,
                      maxSeqlenK, kvLens);
}

fa_status fa_attention_backward(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *gradOutput,
    const fa_tensor *lse, const fa_tensor *gradQuery, const fa_tensor *gradKey,
    const fa_tensor *gradValue, int dtype, int causal, double scale,
    const fa_kernel_config *config, void *stream) {
  return fa_attention_backward_ex(runtime, q, k, v, o, gradOutput, lse,
                                  gradQuery, gradKey, gradValue, nullptr,
                                  dtype, causal, scale, config, stream);
}

/// The backward's request from the C arguments (varlen: with the offsets).
static fa_status backwardFromC(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *gradOutput,
    const fa_tensor *lse, const fa_tensor *gradQuery, const fa_tensor *gradKey,
    const fa_tensor *gradValue, const fa_attention_extras *extras, int dtype,
    int causal, double scale, const fa_kernel_config *config, void *stream,
    const fa_tensor *cuSeqlensQ, const fa_tensor *cuSeqlensK,
    int64_t maxSeqlenQ, int64_t maxSeqlenK) {
  if (!runtime)
    return invalid("runtime is a null pointer");
  if (!q || !k || !v || !o || !gradOutput || !lse || !gradQuery || !gradKey ||
      !gradValue)
    return invalid("a tensor descriptor is a null pointer");
  fa_kernel_config configCopy;
  fa_attention_extras extrasCopy;
  if (std::string error =
          readConfigAndExtras(config, configCopy, extras, extrasCopy);
      !error.empty())
    return invalid(error.c_str());
  fa::KernelSpec spec;
  if (std::string error =
          fa::specFromC(q->sizes[3], dtype, causal, scale, config, spec);
      !error.empty())
    return invalid(error.c_str());
  if (std::string error = fa::sinksFromC(extras, /*backward=*/true, spec);
      !error.empty())
    return invalid(error.c_str());
  if (std::string error = fa::blockMaskFromC(extras, /*backward=*/true, spec);
      !error.empty())
    return invalid(error.c_str());
  fa::AttentionBackwardArgs args;
  if (std::string error = fa::capturesFromC(extras, args.captures);
      !error.empty())
    return invalid(error.c_str());
  if (spec.sinks) {
    args.sinks = fa::tensorFromC(*extras->sinks);
    args.gradSinks = fa::tensorFromC(*extras->grad_sinks);
  }
  if (spec.blockMask)
    args.queryRanges = fa::tensorFromC(*extras->query_ranges);
  if (spec.blockMask && spec.deterministic)
    args.keyRanges = fa::tensorFromC(*extras->key_ranges);
  // The varlen call alone takes (and asks for) the varlen kernels.
  spec.varlen = cuSeqlensQ != nullptr;
  if (spec.varlen) {
    args.cuSeqlensQ = fa::tensorFromC(*cuSeqlensQ);
    args.cuSeqlensK = fa::tensorFromC(*cuSeqlensK);
    args.maxSeqlenQ = maxSeqlenQ;
    args.maxSeqlenK = maxSeqlenK;
  }
  args.q = fa::tensorFromC(*q);
  args.k = fa::tensorFromC(*k);
  args.v = fa::tensorFromC(*v);
  args.o = fa::tensorFromC(*o);
  args.gradOutput = fa::tensorFromC(*gradOutput);
  args.lse = fa::tensorFromC(*lse);
  args.gradQuery = fa::tensorFromC(*gradQuery);
  args.gradKey = fa::tensorFromC(*gradKey);
  args.gradValue = fa::tensorFromC(*gradValue);
  args.stream = stream;
  return toStatus(runtime->runtime->backward(spec, args));
}

fa_status fa_attention_backward_ex(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *gradOutput,
    const fa_tensor *lse, const fa_tensor *gradQuery, const fa_tensor *gradKey,
    const fa_tensor *gradValue, const fa_attention_extras *extras, int dtype,
    int causal, double scale, const fa_kernel_config *config, void *stream) {
  return backwardFromC(runtime, q, k, v, o, gradOutput, lse, gradQuery,
                       gradKey, gradValue, extras, dtype, causal, scale,
                       config, stream, nullptr, nullptr, 0, 0);
}

fa_status fa_attention_varlen_backward(
    fa_runtime *runtime, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *gradOutput,
    const fa_tensor *lse, const fa_tensor *gradQuery, const fa_tensor *gradKey,
    const fa_tensor *gradValue, const fa_tensor *cuSeqlensQ,
    const fa_tensor *cuSeqlensK, int64_t maxSeqlenQ, int64_t maxSeqlenK,
    const fa_attention_extras *extras, int dtype, int causal, double scale,
    const fa_kernel_config *config, void *stream) {
  if (!cuSeqlensQ || !cuSeqlensK)
    return invalid("a cu_seqlens descriptor is a null pointer");
  return backwardFromC(runtime, q, k, v, o, gradOutput, lse, gradQuery,
                       gradKey, gradValue, extras, dtype, causal, scale,
                       config, stream, cuSeqlensQ, cuSeqlensK, maxSeqlenQ,
                       maxSeqlenK);
}

fa_status fa_compute_block_mask(fa_runtime *runtime, const fa_tensor *q,
                                const fa_tensor *k,
                                const fa_tensor *keyRanges,
                                const fa_tensor *queryRanges,
                                const fa_attention_extras *extras, int causal,
                                const fa_kernel_config *config, void *stream) {
  if (!runtime)
    return invalid("runtime is a null pointer");
  if (!q || !k || !keyRanges || !queryRanges)
    return invalid("a tensor descriptor is a null pointer");
  fa_kernel_config configCopy;
  fa_attention_extras extrasCopy;
  if (std::string error =
          readConfigAndExtras(config, configCopy, extras, extrasCopy);
      !error.empty())
    return invalid(error.c_str());
  if (extras && (extras->sinks || extras->grad_sinks || extras->key_ranges ||
                 extras->query_ranges))
    return invalid("fa_compute_block_mask takes the mask_mod's captured "
                   "tensors from extras: its other fields must be NULL");
  fa::KernelSpec spec;
  // The program reads no element of Q: its dtype and head dim are moot.
  if (std::string error = fa::specFromC(q->sizes[3] > 0 ? q->sizes[3] : 64,
                                        FA_F16, causal, 0.0, config, spec);
      !error.empty())
    return invalid(error.c_str());
  if (spec.maskMod.empty())
    return invalid("fa_compute_block_mask computes a mask_mod's tables: "
                   "config->mask_mod is NULL or empty");
  fa::BlockMaskArgs args;
  if (std::string error = fa::capturesFromC(extras, args.captures);
      !error.empty())
    return invalid(error.c_str());
  args.q = fa::tensorFromC(*q);
  args.k = fa::tensorFromC(*k);
  args.keyRanges = fa::tensorFromC(*keyRanges);
  args.queryRanges = fa::tensorFromC(*queryRanges);
  args.stream = stream;
  return toStatus(runtime->runtime->computeBlockMask(spec, args));
}

} // extern "C"
