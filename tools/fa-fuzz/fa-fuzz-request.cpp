//===- fa-fuzz-request.cpp - libFuzzer target: the C ABI's request path ---===//
//
// What a C caller hands the runtime before anything is compiled or
// launched, with arbitrary values: the codes, flags, scale and config of a
// call (specFromC), the spec's validation and defaults (validate,
// withDefaults for the length bucket, defaultCandidates, the kernel name,
// the cache key text, the request key), and the tensor descriptors'
// argument checks against the spec that would run (checkAttentionArgs,
// checkAttentionBackwardArgs). The same order as Runtime::runRequest.
// Any input must end in a clean accept or reject: no crash, no sanitizer
// report (signed overflow included), no unbounded work. No GPU and no
// compiler are needed, so runs are fast. Seeds: none needed (the provider
// reads zeros past the input's end: a default request).
//
//===----------------------------------------------------------------------===//

#include "lib/KernelSpec.h"
#include "lib/Strategy/SpecRules.h"
#include "runtime/ArgumentChecks.h"
#include "runtime/Autotune.h"
#include "runtime/CRequest.h"
#include "runtime/ResolvedRequest.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

/// An integer that is often small and sometimes anything: sizes, strides,
/// tiles and codes near their limits are where the bugs are.
int64_t pickInteger(FuzzedDataProvider &in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
  case 0:
    return in.ConsumeIntegralInRange<int64_t>(-4, 300);
  case 1:
    return int64_t(1) << in.ConsumeIntegralInRange<int>(0, 62);
  case 2:
    return in.ConsumeIntegralInRange<int64_t>(0, 1 << 20);
  default:
    return in.ConsumeIntegral<int64_t>();
  }
}

/// Descriptors of one consistent problem (contiguous, 2^40 bytes apart,
/// shapes that agree), then a few fields changed to anything: random
/// descriptors alone rarely get past the first shape check.
std::array<fa_tensor, 9> pickTensors(FuzzedDataProvider &in) {
  static constexpr int64_t kHeadDims[] = {32, 40, 64, 96, 128, 256};
  int64_t batch = in.ConsumeIntegralInRange<int64_t>(0, 3);
  int64_t kvHeads = in.ConsumeIntegralInRange<int64_t>(1, 4);
  int64_t queryHeads = kvHeads * in.ConsumeIntegralInRange<int64_t>(1, 4);
  int64_t queryLength = in.ConsumeIntegralInRange<int64_t>(0, 300);
  int64_t keyLength = in.ConsumeIntegralInRange<int64_t>(0, 300);
  int64_t headDim = in.PickValueInArray(kHeadDims);
  std::array<fa_tensor, 9> tensors; // q, k, v, o, lse, do, dq, dk, dv
  const bool isKey[] = {false, true, true, false, false,
                        false, false, true, true};
  for (size_t i = 0; i < tensors.size(); ++i) {
    fa_tensor &t = tensors[i];
    int64_t heads = isKey[i] ? kvHeads : queryHeads;
    int64_t length = isKey[i] ? keyLength : queryLength;
    int64_t columns = i == 4 ? 1 : headDim; // lse: [B, H, S] (+ 1)
    t.data = reinterpret_cast<const void *>(uintptr_t(i + 1) << 40);
    int64_t sizes[4] = {batch, heads, length, columns};
    int64_t strides[4] = {heads * length * columns, length * columns, columns,
                          1};
    for (int d = 0; d < 4; ++d) {
      t.sizes[d] = sizes[d];
      t.strides[d] = strides[d];
    }
  }
  for (int changes = in.ConsumeIntegralInRange<int>(0, 3); changes > 0;
       --changes) {
    fa_tensor &t = tensors[in.ConsumeIntegralInRange<size_t>(0, 8)];
    int d = in.ConsumeIntegralInRange<int>(0, 3);
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: // an address anywhere, aligned or not (never dereferenced)
      t.data = reinterpret_cast<const void *>(
          uintptr_t(t.data) + uintptr_t(pickInteger(in)));
      break;
    case 1:
      t.sizes[d] = pickInteger(in);
      break;
    default:
      t.strides[d] = pickInteger(in);
    }
  }
  return tensors;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider in(data, size);
  int dtype = in.ConsumeIntegralInRange<int>(-1, 3);
  int causal = in.ConsumeIntegralInRange<int>(-1, 2);
  double scale = in.ConsumeBool() ? 0.0 : in.ConsumeFloatingPoint<double>();
  std::string arch = in.ConsumeBool() ? "sm_90a"
                     : in.ConsumeBool() ? "sm_80"
                                        : in.ConsumeRandomLengthString(16);
  std::string scoreMod = in.ConsumeBool() ? "" : in.ConsumeRandomLengthString(256);
  std::string maskMod = in.ConsumeBool() ? "" : in.ConsumeRandomLengthString(256);
  // The versioned structs' struct_size: their size, or any value (the
  // library's read must refuse what it cannot read, never read past it).
  auto pickStructSize = [&](size_t size) -> int64_t {
    return in.ConsumeBool() ? int64_t(size)
                            : in.ConsumeIntegralInRange<int64_t>(-8, 4096);
  };
  fa_kernel_config config{};
  config.struct_size = pickStructSize(sizeof(config));
  config.block_m = pickInteger(in);
  config.block_n = pickInteger(in);
  config.num_warps = pickInteger(in);
  config.stages = pickInteger(in);
  config.strategy = in.ConsumeIntegralInRange<int32_t>(-1, 4);
  config.backward = in.ConsumeIntegralInRange<int32_t>(-1, 2);
  config.deterministic = in.ConsumeIntegralInRange<int32_t>(-1, 2);
  config.sequence_length = pickInteger(in);
  config.sinks = in.ConsumeIntegralInRange<int32_t>(-1, 2);
  config.block_mask = in.ConsumeIntegralInRange<int32_t>(-1, 2);
  config.arch = in.ConsumeBool() ? nullptr : arch.c_str();
  config.score_mod = scoreMod.c_str();
  config.mask_mod = maskMod.c_str();
  std::array<fa_tensor, 9> tensors = pickTensors(in);
  // The _ex calls' extras: sinks and their gradient, each given or not.
  std::array<fa_tensor, 9> extraTensors = pickTensors(in);
  fa_attention_extras extras{};
  extras.struct_size = pickStructSize(sizeof(extras));
  extras.sinks = in.ConsumeBool() ? &extraTensors[0] : nullptr;
  extras.grad_sinks = in.ConsumeBool() ? &extraTensors[1] : nullptr;
  // Captured tensors: arbitrary codes, counts and descriptors, checked as
  // the launch checks them against a kernel reading an i32 [B, S] tensor.
  // (As many as the count may claim: capturesFromC reads them all.)
  std::array<fa_capture, fa::kMaxCaptures> captures{};
  for (size_t i = 0; i < captures.size(); ++i) {
    captures[i].tensor = extraTensors[2 + i % 7];
    captures[i].dtype = in.ConsumeIntegralInRange<int32_t>(-1, 6);
    captures[i].rank = in.ConsumeIntegralInRange<int32_t>(-1, 5);
  }
  // A block mask's tables, each given or not.
  extras.key_ranges = in.ConsumeBool() ? &extraTensors[2] : nullptr;
  extras.query_ranges = in.ConsumeBool() ? &extraTensors[3] : nullptr;
  extras.captures = in.ConsumeBool() ? captures.data() : nullptr;
  extras.num_captures =
      in.ConsumeIntegralInRange<int64_t>(-1, fa::kMaxCaptures + 1);
  // FP8's descales and O's type, each given or not, any code.
  extras.q_descale = in.ConsumeBool() ? &extraTensors[4] : nullptr;
  extras.k_descale = in.ConsumeBool() ? &extraTensors[5] : nullptr;
  extras.v_descale = in.ConsumeBool() ? &extraTensors[6] : nullptr;
  extras.out_dtype = in.ConsumeIntegralInRange<int32_t>(-1, 7);
  // CApi's first step: the caller's structs read by their struct_size.
  fa_kernel_config configRead;
  fa_attention_extras extrasRead;
  if (!fa::configFromC(&config, configRead).empty() ||
      !fa::extrasFromC(&extras, extrasRead).empty())
    return 0;
  config = configRead;
  extras = extrasRead;
  bool withExtras = in.ConsumeBool();
  std::vector<fa::CaptureArg> captureArgs;
  if (fa::capturesFromC(withExtras ? &extras : nullptr, captureArgs).empty())
    (void)fa::checkCaptures({{fa::ScalarType::i32, 2}}, captureArgs);

  fa::KernelSpec requested;
  if (!fa::specFromC(tensors[0].sizes[3], dtype, causal, scale,
                     in.ConsumeBool() ? &config : nullptr, requested)
           .empty())
    return 0;
  if (!fa::sinksFromC(withExtras ? &extras : nullptr, requested.backward,
                      requested)
           .empty() ||
      !fa::blockMaskFromC(withExtras ? &extras : nullptr, requested.backward,
                          requested)
           .empty())
    return 0;
  // fa_compute_block_mask's checks, on the same descriptors.
  {
    fa::BlockMaskArgs maskArgs;
    maskArgs.q = fa::tensorFromC(tensors[0]);
    maskArgs.k = fa::tensorFromC(tensors[1]);
    maskArgs.keyRanges = fa::tensorFromC(extraTensors[2]);
    maskArgs.queryRanges = fa::tensorFromC(extraTensors[3]);
    maskArgs.captures = captureArgs;
    (void)fa::checkBlockMaskArgs(maskArgs);
  }
  // Runtime::runRequest: the request's key, then its first candidate for
  // the length bucket, validated, then the arguments against it.
  if (requested.arch.empty())
    requested.arch = "sm_90a";
  int64_t queryLength = tensors[0].sizes[2], keyLength = tensors[1].sizes[2];
  int64_t bucket = requested.needsDefaults()
                       ? fa::lengthBucket(queryLength, keyLength)
                       : 0;
  fa::RequestKey key(requested, bucket, /*tuned=*/false);
  (void)key;
  fa::KernelSpec first = withDefaults(requested, bucket);
  if (!validateSpec(first).empty())
    return 0;
  (void)kernelName(first);
  (void)canonicalText(first);
  for (const fa::KernelSpec &candidate : defaultCandidates(requested, bucket)) {
    (void)validateSpec(candidate);
    (void)kernelName(candidate);
  }
  if (first.backward) {
    fa::AttentionBackwardArgs args;
    fa::TensorArg *slots[] = {&args.q,          &args.k,         &args.v,
                              &args.o,          &args.lse,       &args.gradOutput,
                              &args.gradQuery,  &args.gradKey,   &args.gradValue};
    for (size_t i = 0; i < tensors.size(); ++i)
      *slots[i] = fa::tensorFromC(tensors[i]);
    if (first.sinks) {
      args.sinks = fa::tensorFromC(*extras.sinks);
      args.gradSinks = fa::tensorFromC(*extras.grad_sinks);
    }
    if (first.blockMask)
      args.queryRanges = fa::tensorFromC(*extras.query_ranges);
    (void)fa::checkAttentionBackwardArgs(first, args);
  } else {
    fa::AttentionArgs args;
    fa::TensorArg *slots[] = {&args.q, &args.k, &args.v, &args.o, &args.lse};
    for (size_t i = 0; i < 5; ++i)
      *slots[i] = fa::tensorFromC(tensors[i]);
    if (first.sinks)
      args.sinks = fa::tensorFromC(*extras.sinks);
    if (first.blockMask)
      args.keyRanges = fa::tensorFromC(*extras.key_ranges);
    // FP8: the descales the request gives (an absent one stays empty, as
    // the C ABI refuses before it gets here).
    if (first.dtype == fa::ElementType::e4m3) {
      if (extras.q_descale)
        args.qDescale = fa::tensorFromC(*extras.q_descale);
      if (extras.k_descale)
        args.kDescale = fa::tensorFromC(*extras.k_descale);
      if (extras.v_descale)
        args.vDescale = fa::tensorFromC(*extras.v_descale);
    }
    (void)fa::checkAttentionArgs(first, args);
  }
  return 0;
}
