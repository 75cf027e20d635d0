//===- GpuAttentionTest.cpp - Generated kernels on the GPU ---------*- C++
//-*-===//
//
// Runs the generated kernels through the runtime on a real GPU and compares O
// and LSE (and the backward's dQ, dK, dV) with the float64 reference, over head
// dims, lengths (with Sq != Sk), causal and not, MHA/GQA/MQA, f32 and f16/bf16
// inputs. Outputs are poisoned with NaN before each run, inputs are fresh
// random normals. Skips (with a message) without a GPU.
//
//   FA_GPU_TEST_QUICK=1    a small subset (for compute-sanitizer)
//
// The long tests come in four parts (GpuAttentionPart) so that gtest's
// sharding spreads them; scripts/gpu-run.sh runs the shards, in parallel
// where the machine has several GPUs.
//
//===----------------------------------------------------------------------===//

#include "lib/ReferenceAttention.h"
#include "lib/Strategy/SpecRules.h"
#include "lib/Variants.h"
#include "runtime/CudaDriver.h"
#include "runtime/Runtime.h"
#include "test/Common/BlockMaskTables.h"
#include "test/Common/LowPrecision.h"
#include "test/Common/Random.h"
#include "tools/fa-sweep/DeviceTiming.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <thread>

namespace {

const fa::CudaDriver &driver() { return fa::CudaDriver::get(); }

#define CU_ASSERT(call)                                                        \
  do {                                                                         \
    CUresult result_ = (call);                                                 \
    ASSERT_EQ(result_, CUDA_SUCCESS) << #call << ": "                          \
                                     << driver().describe(result_);            \
  } while (0)

/// Device memory for n elements of `elementBytes` each (floats by default).
struct DeviceBuffer {
  CUdeviceptr ptr = 0;
  size_t count = 0;
  explicit DeviceBuffer(size_t n, size_t elementBytes = sizeof(float))
      : count(n) {
    if (n)
      EXPECT_EQ(driver().cuMemAlloc_v2(&ptr, n * elementBytes), CUDA_SUCCESS)
          << "cuMemAlloc of " << n << " x " << elementBytes << " bytes";
  }
  ~DeviceBuffer() {
    if (ptr)
      driver().cuMemFree_v2(ptr);
  }
  void *data() const { return reinterpret_cast<void *>(ptr); }
};

/// A captured tensor of a variant on the host: its bytes, contiguous.
struct HostCapture {
  fa::ScalarType type = fa::ScalarType::f32;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> bytes;
};

/// Uploads the captures to `buffers` and describes them in `args`.
void uploadCaptures(const std::vector<HostCapture> &captures,
                    std::vector<std::unique_ptr<DeviceBuffer>> &buffers,
                    std::vector<fa::CaptureArg> &args) {
  for (const HostCapture &c : captures) {
    buffers.push_back(std::make_unique<DeviceBuffer>(c.bytes.size(), 1));
    ASSERT_EQ(driver().cuMemcpyHtoD_v2(buffers.back()->ptr, c.bytes.data(),
                                       c.bytes.size()),
              CUDA_SUCCESS);
    fa::CaptureArg arg;
    arg.type = c.type;
    arg.rank = int(c.sizes.size());
    arg.tensor.data = buffers.back()->data();
    int64_t stride = 1;
    for (int d = arg.rank - 1; d >= 0; --d) {
      arg.tensor.sizes[d] = c.sizes[d];
      arg.tensor.strides[d] = stride;
      stride *= c.sizes[d];
    }
    args.push_back(arg);
  }
}

fa::TensorArg tensorArg(const DeviceBuffer &buffer, int64_t b, int64_t h,
                        int64_t s, int64_t d) {
  fa::TensorArg t;
  t.data = buffer.data();
  int64_t sizes[4] = {b, h, s, d};
  int64_t strides[4] = {h * s * d, s * d, d, 1};
  std::memcpy(t.sizes, sizes, sizeof(sizes));
  std::memcpy(t.strides, strides, sizeof(strides));
  return t;
}

/// Uploads `values` as `type` (f32, or 16-bit bits); 16-bit values are
/// rounded in place, so that a reference sees what the kernel sees.
CUresult uploadAs(const DeviceBuffer &to, std::vector<float> &values,
                  fa::ElementType type) {
  if (type == fa::ElementType::f32)
    return driver().cuMemcpyHtoD_v2(to.ptr, values.data(), values.size() * 4);
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bits[i] = fa::test::toBits(values[i], type);
    values[i] = fa::test::fromBits(bits[i], type);
  }
  return driver().cuMemcpyHtoD_v2(to.ptr, bits.data(), bits.size() * 2);
}

/// Poisons an output of `type` with quiet NaNs.
CUresult poison(const DeviceBuffer &buffer, fa::ElementType type) {
  if (type == fa::ElementType::f32)
    return driver().cuMemsetD32_v2(buffer.ptr, 0x7fc00000, buffer.count);
  return driver().cuMemsetD16_v2(buffer.ptr, fa::test::nanBits(type),
                                 buffer.count);
}

/// Errors below this fail no case; the measured maxima are printed.
/// f32 accumulation over up to 4096 keys and 256 dims with the ex2/lg2
/// hardware approximations (relative error ~2^-22) gives ~1e-6 .. 1e-5.
constexpr double kOutputTolerance = 1e-4;
constexpr double kLseTolerance = 1e-4;

using fa::test::fromBits;
using fa::test::nanBits;
using fa::test::toBits;

/// Wall seconds since construction.
struct Stopwatch {
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  }
};

/// Where a case's time went (the suite's shards must fit a device call):
/// the whole case, the runtime's call (a compile on the first use of a
/// kernel, then the launch) and the float64 reference.
std::string caseTimes(double whole, double call, double reference) {
  char text[96];
  std::snprintf(text, sizeof(text), "%.2f s: call %.2f, reference %.2f", whole,
                call, reference);
  return text;
}

class GpuAttention : public testing::Test {
protected:
  void SetUp() override {
    if (!driver().available())
      GTEST_SKIP() << "no GPU: " << driver().loadError();
    // FA_GPU_TEST_CACHE_DIR: one kernel cache for every test and shard
    // (scripts/gpu-run.sh), so that a kernel compiles once per suite run;
    // else a fresh folder per test.
    if (const char *shared = std::getenv("FA_GPU_TEST_CACHE_DIR");
        shared && *shared) {
      cacheDir = shared;
      ASSERT_FALSE(llvm::sys::fs::create_directories(cacheDir)) << shared;
    } else {
      useFreshCache();
    }
    fa::RuntimeOptions options;
    options.cacheDir = std::string(cacheDir);
    fa::Result r = fa::Runtime::create(options, runtime);
    ASSERT_TRUE(bool(r)) << r.message;
    if (!runtime->hasDriver())
      GTEST_SKIP() << "no GPU: " << runtime->driverError();
    // The test's own allocations and copies use the device's primary
    // context, the one the runtime launches in.
    CUdevice device;
    CU_ASSERT(driver().cuDeviceGet(&device, 0));
    CU_ASSERT(driver().cuDevicePrimaryCtxRetain(&context, device));
    CU_ASSERT(driver().cuCtxSetCurrent(context));
  }
  void TearDown() override {
    runtime.reset();
    if (ownsCacheDir)
      llvm::sys::fs::remove_directories(cacheDir);
  }

  /// A new empty cache folder of this test's own (removed at the end), for
  /// the tests that count what a cache holds or where a kernel came from;
  /// `runtime` is then recreated on it.
  void useFreshCache() {
    if (ownsCacheDir)
      llvm::sys::fs::remove_directories(cacheDir);
    cacheDir.clear();
    ASSERT_FALSE(
        llvm::sys::fs::createUniqueDirectory("fa-gpu-test-cache", cacheDir));
    ownsCacheDir = true;
    if (runtime) {
      fa::RuntimeOptions options;
      options.cacheDir = std::string(cacheDir);
      runtime.reset();
      fa::Result r = fa::Runtime::create(options, runtime);
      ASSERT_TRUE(bool(r)) << r.message;
    }
  }

  struct Case {
    int64_t headDim, batch, qHeads, kvHeads, qLen, kvLen;
    bool causal;
    fa::ElementType dtype = fa::ElementType::f32;
    /// A variant: its spec texts (lib/Variants.h) and the same function in
    /// plain C++ for the reference (AttentionProblem::scoreMod, maskMod).
    std::string scoreMod = "", maskMod = "";
    std::function<double(double, int64_t, int64_t, int64_t, int64_t)>
        referenceScore = nullptr;
    std::function<bool(int64_t, int64_t, int64_t, int64_t)> referenceKeep =
        nullptr;
    /// What a 16-bit kernel's score_mod may differ by from referenceScore
    /// (its math functions on the hardware's approximations, fastmath afn):
    /// each score by at most `scoreError`, the derivative by
    /// `derivativeError` (absolute). The softmax's weights then move by a
    /// factor within exp(+-2 scoreError): LSE by scoreError, O by
    /// 2 scoreError max|V|, the gradients by 2 scoreError + derivativeError
    /// of their size. f32 kernels keep f32 accuracy (no term).
    double scoreError = 0.0, derivativeError = 0.0;
    /// Attention sinks: one logit per query head (empty: none).
    std::vector<double> sinks = {};
    /// The variant's captured tensors (the reference reads the same).
    std::vector<HostCapture> captures = {};
    /// A block mask: computeBlockMask's tables (one head: the mask is the
    /// same for every head), checked against tables computed here from
    /// referenceKeep, passed to the kernel.
    bool blockMask = false;
    /// Split-KV parts (AttentionArgs::kvSplits: 0 the runtime's choice).
    int64_t kvSplits = 0;
  };

  /// The tables of a block mask of `c` (Hb = 1) in `keyTable` /
  /// `queryTable`, described in `keyArg` / `queryArg`: computed by the
  /// runtime's program and compared with the exact tables of
  /// referenceKeep (and the causal mask).
  void blockMaskTables(const Case &c, const fa::TensorArg &q,
                       const fa::TensorArg &k,
                       const std::vector<fa::CaptureArg> &captures,
                       std::unique_ptr<DeviceBuffer> &keyTable,
                       std::unique_ptr<DeviceBuffer> &queryTable,
                       fa::TensorArg &keyArg, fa::TensorArg &queryArg) {
    const int64_t group = fa::kBlockMaskGroup;
    const int64_t columns = fa::kRangeTableColumns;
    int64_t queryGroups = (c.qLen + group - 1) / group,
            keyGroups = (c.kvLen + group - 1) / group;
    keyTable =
        std::make_unique<DeviceBuffer>(c.batch * queryGroups * columns);
    queryTable =
        std::make_unique<DeviceBuffer>(c.batch * keyGroups * columns);
    for (auto [arg, buffer, groups] :
         {std::tuple<fa::TensorArg *, DeviceBuffer *, int64_t>{
              &keyArg, keyTable.get(), queryGroups},
          {&queryArg, queryTable.get(), keyGroups}}) {
      int64_t sizes[4] = {c.batch, 1, groups, columns};
      int64_t strides[4] = {groups * columns, groups * columns, columns, 1};
      arg->data = buffer->data();
      std::memcpy(arg->sizes, sizes, sizeof(sizes));
      std::memcpy(arg->strides, strides, sizeof(strides));
      // Poison: the program must write every entry.
      CU_ASSERT(driver().cuMemsetD32_v2(buffer->ptr, 0x7fc00000,
                                        buffer->count));
    }
    fa::KernelSpec spec;
    spec.maskMod = c.maskMod;
    spec.causal = c.causal;
    spec.arch = "";
    fa::BlockMaskArgs args{q, k, keyArg, queryArg, nullptr, captures};
    fa::Result r = runtime->computeBlockMask(spec, args);
    ASSERT_TRUE(bool(r)) << r.message;
    std::vector<int32_t> keys(keyTable->count), queries(queryTable->count);
    CU_ASSERT(driver().cuMemcpyDtoH_v2(keys.data(), keyTable->ptr,
                                       keys.size() * 4));
    CU_ASSERT(driver().cuMemcpyDtoH_v2(queries.data(), queryTable->ptr,
                                       queries.size() * 4));
    fa::test::RangeTables want = fa::test::expectedRangeTables(
        [&](int64_t b, int64_t, int64_t i, int64_t j) {
          int64_t position = i + c.kvLen - c.qLen;
          return !(c.causal && j > position) && c.referenceKeep(b, 0, i, j);
        },
        c.batch, 1, c.qLen, c.kvLen);
    EXPECT_EQ(keys, want.keyRanges) << "the key ranges";
    EXPECT_EQ(queries, want.queryRanges) << "the query ranges";
  }

  static fa::AttentionProblem problemOf(const Case &c) {
    fa::AttentionProblem p;
    p.batch = c.batch;
    p.qHeads = c.qHeads;
    p.kvHeads = c.kvHeads;
    p.qLen = c.qLen;
    p.kvLen = c.kvLen;
    p.headDim = c.headDim;
    p.causal = c.causal;
    p.scale = 1.0 / std::sqrt(double(c.headDim));
    p.scoreMod = c.referenceScore;
    p.maskMod = c.referenceKeep;
    p.sinks = c.sinks;
    return p;
  }

  /// The strategy `spec` runs on this device (its arch left empty, as the
  /// runtime reads it: the device's).
  fa::Strategy strategyOnDevice(fa::KernelSpec spec) const {
    if (spec.arch.empty())
      spec.arch = runtime->deviceArch();
    return resolveStrategy(spec);
  }

  /// A spec whose strategy, tiles, warps and stages are the defaults.
  static fa::KernelSpec defaults() {
    fa::KernelSpec spec;
    spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
    return spec;
  }

  /// Runs one case with the strategy and tiles of `tiles` (0 = default);
  /// prints the max |error| of O and LSE.
  void runCase(const Case &c, const fa::KernelSpec &tiles = defaults()) {
    Stopwatch whole;
    fa::KernelSpec spec = tiles;
    spec.headDim = c.headDim;
    spec.causal = c.causal;
    spec.dtype = c.dtype;
    spec.scoreMod = c.scoreMod;
    spec.maskMod = c.maskMod;
    spec.sinks = !c.sinks.empty();
    spec.blockMask = c.blockMask;
    bool wide = c.dtype == fa::ElementType::f32;
    size_t elementBytes = wide ? 4 : 2;
    if (!tiles.blockM) {
      spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
    }
    spec.arch = "";
    uint64_t seed = std::random_device{}();
    SCOPED_TRACE(testing::Message()
                 << "seed=" << seed
                 << " strategy=" << fa::toString(strategyOnDevice(spec))
                 << " D=" << c.headDim << " B=" << c.batch << " Hq=" << c.qHeads
                 << " Hkv=" << c.kvHeads << " Sq=" << c.qLen
                 << " Sk=" << c.kvLen << (c.causal ? " causal" : "") << " "
                 << fa::toString(c.dtype)
                 << (spec.hasVariant() ? " variant " + kernelName(spec) : "")
                 << (spec.sinks ? " sinks" : "")
                 << " kv_splits=" << c.kvSplits);
    fa::AttentionProblem p = problemOf(c);
    std::mt19937_64 rng(seed);
    auto random = [&](int64_t n) { return fa::test::randomNormal(n, rng); };
    std::vector<float> q = random(p.qElements()), k = random(p.kvElements()),
                       v = random(p.kvElements());
    DeviceBuffer dq(q.size(), elementBytes), dk(k.size(), elementBytes),
        dv(v.size(), elementBytes), dout(q.size(), elementBytes),
        dlse(p.lseElements());
    // 16-bit inputs: the kernel gets the rounded values, and so does the
    // reference.
    CU_ASSERT(uploadAs(dq, q, c.dtype));
    CU_ASSERT(uploadAs(dk, k, c.dtype));
    CU_ASSERT(uploadAs(dv, v, c.dtype));
    // Poison: a quiet NaN in every output element.
    CU_ASSERT(poison(dout, c.dtype));
    CU_ASSERT(driver().cuMemsetD32_v2(dlse.ptr, 0x7fc00000, dlse.count));

    fa::AttentionArgs args;
    args.q = tensorArg(dq, p.batch, p.qHeads, p.qLen, p.headDim);
    args.k = tensorArg(dk, p.batch, p.kvHeads, p.kvLen, p.headDim);
    args.v = tensorArg(dv, p.batch, p.kvHeads, p.kvLen, p.headDim);
    args.o = tensorArg(dout, p.batch, p.qHeads, p.qLen, p.headDim);
    args.lse = tensorArg(dlse, p.batch, p.qHeads, p.qLen, 1);
    args.lse.strides[0] = p.qHeads * p.qLen;
    args.lse.strides[1] = p.qLen;
    args.lse.strides[2] = 1;
    std::vector<float> sinks(c.sinks.begin(), c.sinks.end());
    DeviceBuffer sinksBuf(sinks.size());
    if (spec.sinks) {
      CU_ASSERT(driver().cuMemcpyHtoD_v2(sinksBuf.ptr, sinks.data(),
                                         sinks.size() * 4));
      args.sinks.data = sinksBuf.data();
      args.sinks.sizes[0] = p.qHeads;
      args.sinks.strides[0] = 1;
    }
    std::vector<std::unique_ptr<DeviceBuffer>> captureBuffers;
    uploadCaptures(c.captures, captureBuffers, args.captures);
    if (HasFatalFailure())
      return;
    std::unique_ptr<DeviceBuffer> keyTable, queryTable;
    fa::TensorArg queryRanges;
    if (c.blockMask) {
      blockMaskTables(c, args.q, args.k, args.captures, keyTable, queryTable,
                      args.keyRanges, queryRanges);
      if (HasFatalFailure() || HasNonfatalFailure())
        return;
    }
    args.kvSplits = c.kvSplits;
    Stopwatch call;
    fa::Result r = runtime->forward(spec, args);
    ASSERT_TRUE(bool(r)) << r.message;
    CU_ASSERT(driver().cuCtxSynchronize());
    double callSeconds = call.seconds();

    std::vector<float> out(q.size()), lse(p.lseElements());
    if (wide) {
      CU_ASSERT(driver().cuMemcpyDtoH_v2(out.data(), dout.ptr, out.size() * 4));
    } else {
      std::vector<uint16_t> bits(out.size());
      CU_ASSERT(driver().cuMemcpyDtoH_v2(bits.data(), dout.ptr, bits.size() * 2));
      for (size_t i = 0; i < bits.size(); ++i)
        out[i] = fromBits(bits[i], c.dtype);
    }
    CU_ASSERT(driver().cuMemcpyDtoH_v2(lse.data(), dlse.ptr, lse.size() * 4));
    Stopwatch reference;
    fa::ReferenceResult want =
        fa::referenceAttention(p, q.data(), k.data(), v.data());
    double referenceSeconds = reference.seconds();
    // 16-bit: P is rounded before P V and O before the store, each by at most
    // u = 2^-11 (f16) or 2^-8 (bf16) relative; O is a convex combination of
    // V rows, so |O - O_ref| <= 2 u max|V| on top of the f32 tolerance.
    double outputTolerance = kOutputTolerance, lseTolerance = kLseTolerance;
    if (!wide) {
      double unit = fa::test::unitRoundoff(c.dtype);
      double maxV = 0.0;
      for (float x : v)
        maxV = std::max(maxV, double(std::fabs(x)));
      outputTolerance += 2 * (unit + c.scoreError) * maxV;
      lseTolerance += c.scoreError;
    }
    double maxOut = 0.0, maxLse = 0.0;
    // On failure: how many elements are wrong and where the first one is
    // ([b, h, s, d]), which tells a layout bug from a tail or mask bug.
    size_t bad = 0, firstBad = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      double err = std::fabs(double(out[i]) - want.output[i]);
      if (!(err <= outputTolerance)) {
        if (bad++ == 0)
          firstBad = i;
        continue;
      }
      maxOut = std::max(maxOut, err);
    }
    if (bad) {
      size_t d = firstBad % p.headDim, s = firstBad / p.headDim % p.qLen,
             h = firstBad / (p.headDim * p.qLen) % p.qHeads,
             b = firstBad / (p.headDim * p.qLen * p.qHeads);
      ADD_FAILURE() << bad << " of " << out.size() << " O elements wrong; "
                    << "first O[" << b << ", " << h << ", " << s << ", " << d
                    << "] = " << out[firstBad] << ", expected "
                    << want.output[firstBad];
      return;
    }
    for (size_t i = 0; i < lse.size(); ++i) {
      if (std::isinf(want.lse[i])) {
        if (!(std::isinf(lse[i]) && lse[i] < 0)) {
          ADD_FAILURE() << "LSE[" << i << "] = " << lse[i] << ", expected -inf";
          return;
        }
        continue;
      }
      double err = std::fabs(double(lse[i]) - want.lse[i]);
      if (!(err <= lseTolerance)) {
        ADD_FAILURE() << "LSE[" << i << "] = " << lse[i] << ", expected "
                      << want.lse[i];
        return;
      }
      maxLse = std::max(maxLse, err);
    }
    std::printf(
        "  ok %-4s%s D=%-3ld B=%ld Hq=%ld Hkv=%ld Sq=%-5ld Sk=%-5ld %-6s "
        "%-4s max|dO|=%.2e (bound %.1e) max|dLSE|=%.2e [%s]\n",
        fa::toString(strategyOnDevice(spec)),
        spec.hasVariant() || spec.sinks ? (" " + kernelName(spec)).c_str() : "",
        long(c.headDim), long(c.batch), long(c.qHeads), long(c.kvHeads),
        long(c.qLen), long(c.kvLen), c.causal ? "causal" : "full",
        fa::toString(c.dtype), maxOut, outputTolerance, maxLse,
        caseTimes(whole.seconds(), callSeconds, referenceSeconds).c_str());
  }

  /// A packed varlen batch: per sequence, its query and key lengths.
  struct VarlenCase {
    int64_t headDim, qHeads, kvHeads;
    std::vector<int64_t> qLens, kvLens;
    bool causal;
    fa::ElementType dtype;
    /// Query rows after the last sequence that no sequence owns.
    int64_t spareRows = 0;
    /// V rows of every odd sequence are NaN: an even sequence, whose last
    /// K/V tile may reach into the next sequence's rows (TMA reads whole
    /// tiles), must not see them; the odd ones are not compared.
    bool poisonOddSequences = false;

    /// cu_seqlens_q, cu_seqlens_k and the longest sequence's rows, keys.
    std::tuple<std::vector<int32_t>, std::vector<int32_t>, int64_t, int64_t>
    offsets() const {
      std::vector<int32_t> cuQ = {0}, cuK = {0};
      int64_t maxQ = 0, maxK = 0;
      for (size_t b = 0; b < qLens.size(); ++b) {
        cuQ.push_back(cuQ.back() + int32_t(qLens[b]));
        cuK.push_back(cuK.back() + int32_t(kvLens[b]));
        maxQ = std::max(maxQ, qLens[b]);
        maxK = std::max(maxK, kvLens[b]);
      }
      return {cuQ, cuK, maxQ, maxK};
    }

    /// The varlen kernel's spec on the tiles and strategy of `tiles`.
    fa::KernelSpec spec(const fa::KernelSpec &tiles) const {
      fa::KernelSpec s = tiles;
      s.headDim = headDim;
      s.causal = causal;
      s.dtype = dtype;
      s.varlen = true;
      s.arch = "";
      return s;
    }

    /// Sequence b alone, as the float64 reference takes it.
    fa::AttentionProblem problem(size_t b) const {
      fa::AttentionProblem p;
      p.batch = 1;
      p.qHeads = qHeads;
      p.kvHeads = kvHeads;
      p.qLen = qLens[b];
      p.kvLen = kvLens[b];
      p.headDim = headDim;
      p.causal = causal;
      p.scale = 1.0 / std::sqrt(double(headDim));
      return p;
    }

    /// Rows [first, first + rows) of packed [total, heads, D] values as one
    /// sequence's [1, heads, rows, D].
    std::vector<float> alone(const std::vector<float> &from, int64_t heads,
                             int64_t first, int64_t rows) const {
      int64_t d = headDim;
      std::vector<float> to(size_t(heads * rows * d));
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t e = 0; e < d; ++e)
            to[size_t((h * rows + i) * d + e)] =
                from[size_t(((first + i) * heads + h) * d + e)];
      return to;
    }
  };

  /// A packed [total, H, width] buffer as [1, H, total, width] (flash-attn's
  /// varlen layout through strides).
  static fa::TensorArg packedRows(const DeviceBuffer &buffer, int64_t heads,
                                  int64_t rows, int64_t width) {
    fa::TensorArg t;
    t.data = buffer.data();
    int64_t sizes[4] = {1, heads, rows, width};
    int64_t strides[4] = {rows * heads * width, width, heads * width, 1};
    std::memcpy(t.sizes, sizes, sizeof(sizes));
    std::memcpy(t.strides, strides, sizeof(strides));
    return t;
  }

  /// A varlen batch's LSE [1, H, total] and its two offset tables.
  static void setPackedLseAndOffsets(fa::TensorArg &lse,
                                     const DeviceBuffer &lseBuffer,
                                     int64_t heads, int64_t rows,
                                     fa::TensorArg &cuSeqlensQ,
                                     const DeviceBuffer &cuQ,
                                     fa::TensorArg &cuSeqlensK,
                                     const DeviceBuffer &cuK) {
    int64_t lseSizes[4] = {1, heads, rows, 0};
    int64_t lseStrides[4] = {heads * rows, rows, 1, 0};
    lse.data = lseBuffer.data();
    std::memcpy(lse.sizes, lseSizes, sizeof(lseSizes));
    std::memcpy(lse.strides, lseStrides, sizeof(lseStrides));
    for (auto [arg, buffer] :
         {std::pair<fa::TensorArg *, const DeviceBuffer *>{&cuSeqlensQ, &cuQ},
          {&cuSeqlensK, &cuK}}) {
      arg->data = buffer->data();
      arg->sizes[0] = int64_t(buffer->count);
      arg->strides[0] = 1;
    }
  }

  /// Runs one varlen forward with flash-attn's layout (q [total_q, Hq, D],
  /// k and v [total_k, Hkv, D], LSE [Hq, total_q]) and compares every
  /// sequence with the float64 reference run on it alone; spare rows must
  /// keep their NaN poison.
  void runVarlenCase(const VarlenCase &c, const fa::KernelSpec &tiles) {
    fa::KernelSpec spec = c.spec(tiles);
    bool wide = c.dtype == fa::ElementType::f32;
    size_t elementBytes = wide ? 4 : 2;
    int64_t batch = int64_t(c.qLens.size());
    auto [cuQ, cuK, maxQ, maxK] = c.offsets();
    int64_t totalQ = cuQ.back() + c.spareRows, totalK = cuK.back();
    int64_t d = c.headDim, hq = c.qHeads, hkv = c.kvHeads;
    uint64_t seed = std::random_device{}();
    SCOPED_TRACE(testing::Message()
                 << "varlen seed=" << seed << " strategy="
                 << fa::toString(strategyOnDevice(spec)) << " D=" << d
                 << " sequences=" << batch << " Hq=" << hq << " Hkv=" << hkv
                 << " total_q=" << totalQ << " total_k=" << totalK
                 << (c.causal ? " causal " : " ") << fa::toString(c.dtype));
    std::mt19937_64 rng(seed);
    std::vector<float> q = fa::test::randomNormal(totalQ * hq * d, rng),
                       k = fa::test::randomNormal(totalK * hkv * d, rng),
                       v = fa::test::randomNormal(totalK * hkv * d, rng);
    if (c.poisonOddSequences)
      for (int64_t b = 1; b < batch; b += 2)
        std::fill(v.begin() + cuK[b] * hkv * d,
                  v.begin() + cuK[b + 1] * hkv * d,
                  std::numeric_limits<float>::quiet_NaN());
    DeviceBuffer qBuf(q.size(), elementBytes), kBuf(k.size(), elementBytes),
        vBuf(v.size(), elementBytes), oBuf(q.size(), elementBytes),
        lseBuf(size_t(hq * totalQ)), cuQBuf(cuQ.size()), cuKBuf(cuK.size());
    CU_ASSERT(uploadAs(qBuf, q, c.dtype));
    CU_ASSERT(uploadAs(kBuf, k, c.dtype));
    CU_ASSERT(uploadAs(vBuf, v, c.dtype));
    CU_ASSERT(driver().cuMemcpyHtoD_v2(cuQBuf.ptr, cuQ.data(), cuQ.size() * 4));
    CU_ASSERT(driver().cuMemcpyHtoD_v2(cuKBuf.ptr, cuK.data(), cuK.size() * 4));
    CU_ASSERT(poison(oBuf, c.dtype));
    CU_ASSERT(driver().cuMemsetD32_v2(lseBuf.ptr, 0x7fc00000, lseBuf.count));

    // [total, H, D] viewed as [1, H, total, D]; LSE [H, total].
    fa::AttentionArgs args;
    args.q = packedRows(qBuf, hq, totalQ, d);
    args.k = packedRows(kBuf, hkv, totalK, d);
    args.v = packedRows(vBuf, hkv, totalK, d);
    args.o = packedRows(oBuf, hq, totalQ, d);
    setPackedLseAndOffsets(args.lse, lseBuf, hq, totalQ, args.cuSeqlensQ,
                           cuQBuf, args.cuSeqlensK, cuKBuf);
    args.maxSeqlenQ = maxQ;
    args.maxSeqlenK = maxK;
    fa::Result r = runtime->forward(spec, args);
    ASSERT_TRUE(bool(r)) << r.message;
    CU_ASSERT(driver().cuCtxSynchronize());

    std::vector<float> out(q.size()), lse(size_t(hq * totalQ));
    if (wide) {
      CU_ASSERT(driver().cuMemcpyDtoH_v2(out.data(), oBuf.ptr, out.size() * 4));
    } else {
      std::vector<uint16_t> bits(out.size());
      CU_ASSERT(
          driver().cuMemcpyDtoH_v2(bits.data(), oBuf.ptr, bits.size() * 2));
      for (size_t i = 0; i < bits.size(); ++i)
        out[i] = fromBits(bits[i], c.dtype);
    }
    CU_ASSERT(driver().cuMemcpyDtoH_v2(lse.data(), lseBuf.ptr, lse.size() * 4));
    double unit = wide ? 0.0 : fa::test::unitRoundoff(c.dtype);
    double maxOut = 0.0, maxLse = 0.0;
    for (int64_t b = 0; b < batch; ++b) {
      if (c.poisonOddSequences && b % 2)
        continue;
      int64_t sq = c.qLens[b], sk = c.kvLens[b];
      std::vector<float> vs = c.alone(v, hkv, cuK[b], sk);
      fa::ReferenceResult want = fa::referenceAttention(
          c.problem(size_t(b)), c.alone(q, hq, cuQ[b], sq).data(),
          c.alone(k, hkv, cuK[b], sk).data(), vs.data());
      double maxV = 0.0;
      for (float x : vs)
        maxV = std::max(maxV, double(std::fabs(x)));
      double tolerance = kOutputTolerance + 2 * unit * maxV;
      for (int64_t h = 0; h < hq; ++h)
        for (int64_t i = 0; i < sq; ++i) {
          for (int64_t e = 0; e < d; ++e) {
            double got = out[size_t(((cuQ[b] + i) * hq + h) * d + e)];
            double err = std::fabs(got - want.output[size_t((h * sq + i) * d + e)]);
            if (!(err <= tolerance)) {
              ADD_FAILURE() << "sequence " << b << " (Sq=" << sq << ", Sk="
                            << sk << ") O[" << h << ", " << i << ", " << e
                            << "] = " << got << ", expected "
                            << want.output[size_t((h * sq + i) * d + e)];
              return;
            }
            maxOut = std::max(maxOut, err);
          }
          double gotLse = lse[size_t(h * totalQ + cuQ[b] + i)];
          double wantLse = want.lse[size_t(h * sq + i)];
          double err = std::isinf(wantLse)
                           ? (gotLse == wantLse ? 0.0 : INFINITY)
                           : std::fabs(gotLse - wantLse);
          if (!(err <= kLseTolerance)) {
            ADD_FAILURE() << "sequence " << b << " LSE[" << h << ", " << i
                          << "] = " << gotLse << ", expected " << wantLse;
            return;
          }
          maxLse = std::max(maxLse, err);
        }
    }
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t i = cuQ.back(); i < totalQ; ++i)
        if (!std::isnan(lse[size_t(h * totalQ + i)]) ||
            !std::isnan(out[size_t((i * hq + h) * d)])) {
          ADD_FAILURE() << "spare row " << i << " of head " << h
                        << " was written";
          return;
        }
    std::printf("  ok %-5s varlen D=%-3ld sequences=%ld Hq=%ld Hkv=%ld "
                "total_q=%-5ld total_k=%-5ld max_q=%-4ld %-6s %-4s%s "
                "max|dO|=%.2e max|dLSE|=%.2e\n",
                fa::toString(strategyOnDevice(spec)), long(d), long(batch),
                long(hq), long(hkv), long(totalQ), long(totalK), long(maxQ),
                c.causal ? "causal" : "full", fa::toString(c.dtype),
                c.poisonOddSequences ? " NaN in odd V" : "", maxOut, maxLse);
  }

  /// The backward of one packed varlen batch (flash-attn's layout, as
  /// runVarlenCase's): O and LSE from the float64 reference of each
  /// sequence alone, random dO; dQ, dK, dV of every sequence against that
  /// sequence's exact gradients (the bound of runBackwardCase); dQ rows
  /// past the last sequence keep their NaN poison.
  void runVarlenBackwardCase(const VarlenCase &c, const fa::KernelSpec &tiles) {
    fa::KernelSpec spec = c.spec(tiles);
    bool wide = c.dtype == fa::ElementType::f32;
    size_t elementBytes = wide ? 4 : 2;
    int64_t batch = int64_t(c.qLens.size());
    auto [cuQ, cuK, maxQ, maxK] = c.offsets();
    int64_t totalQ = cuQ.back() + c.spareRows, totalK = cuK.back();
    int64_t d = c.headDim, hq = c.qHeads, hkv = c.kvHeads;
    uint64_t seed = std::random_device{}();
    SCOPED_TRACE(testing::Message()
                 << "varlen backward seed=" << seed << " strategy="
                 << fa::toString(strategyOnDevice(spec)) << " D=" << d
                 << " sequences=" << batch << " Hq=" << hq << " Hkv=" << hkv
                 << " total_q=" << totalQ << " total_k=" << totalK
                 << (c.causal ? " causal " : " ") << fa::toString(c.dtype));
    std::mt19937_64 rng(seed);
    std::vector<float> q = fa::test::randomNormal(totalQ * hq * d, rng),
                       k = fa::test::randomNormal(totalK * hkv * d, rng),
                       v = fa::test::randomNormal(totalK * hkv * d, rng),
                       gradOutput = fa::test::randomNormal(totalQ * hq * d,
                                                           rng);
    // Odd sequences: NaN in all their inputs (an even sequence's boxes may
    // reach into them; their own dQ rows past their end must not reach the
    // next even sequence's).
    auto poisoned = [&](int64_t b) { return c.poisonOddSequences && b % 2; };
    for (int64_t b = 1; c.poisonOddSequences && b < batch; b += 2) {
      float nan = std::numeric_limits<float>::quiet_NaN();
      for (std::vector<float> *rows : {&q, &gradOutput})
        std::fill(rows->begin() + cuQ[b] * hq * d,
                  rows->begin() + cuQ[b + 1] * hq * d, nan);
      for (std::vector<float> *rows : {&k, &v})
        std::fill(rows->begin() + cuK[b] * hkv * d,
                  rows->begin() + cuK[b + 1] * hkv * d, nan);
    }
    DeviceBuffer qBuf(q.size(), elementBytes), kBuf(k.size(), elementBytes),
        vBuf(v.size(), elementBytes), oBuf(q.size(), elementBytes),
        doBuf(q.size(), elementBytes), lseBuf(size_t(hq * totalQ)),
        dqBuf(q.size(), elementBytes), dkBuf(k.size(), elementBytes),
        dvBuf(v.size(), elementBytes), cuQBuf(cuQ.size()),
        cuKBuf(cuK.size());
    // Rounded in place: the references see what the kernel sees.
    CU_ASSERT(uploadAs(qBuf, q, c.dtype));
    CU_ASSERT(uploadAs(kBuf, k, c.dtype));
    CU_ASSERT(uploadAs(vBuf, v, c.dtype));
    CU_ASSERT(uploadAs(doBuf, gradOutput, c.dtype));
    CU_ASSERT(driver().cuMemcpyHtoD_v2(cuQBuf.ptr, cuQ.data(), cuQ.size() * 4));
    CU_ASSERT(driver().cuMemcpyHtoD_v2(cuKBuf.ptr, cuK.data(), cuK.size() * 4));

    // The forward's O and LSE, packed (spare rows: zero dO, O and LSE).
    std::vector<float> o(q.size(), 0.0f), lse(size_t(hq * totalQ), 0.0f);
    for (int64_t b = 0; b < batch; ++b) {
      if (poisoned(b))
        continue;
      int64_t sq = c.qLens[b], sk = c.kvLens[b];
      fa::ReferenceResult forward = fa::referenceAttention(
          c.problem(size_t(b)), c.alone(q, hq, cuQ[b], sq).data(),
          c.alone(k, hkv, cuK[b], sk).data(),
          c.alone(v, hkv, cuK[b], sk).data());
      for (int64_t h = 0; h < hq; ++h)
        for (int64_t i = 0; i < sq; ++i) {
          lse[size_t(h * totalQ + cuQ[b] + i)] =
              float(forward.lse[size_t(h * sq + i)]);
          for (int64_t e = 0; e < d; ++e)
            o[size_t(((cuQ[b] + i) * hq + h) * d + e)] =
                float(forward.output[size_t((h * sq + i) * d + e)]);
        }
    }
    CU_ASSERT(uploadAs(oBuf, o, c.dtype));
    CU_ASSERT(driver().cuMemcpyHtoD_v2(lseBuf.ptr, lse.data(), lse.size() * 4));
    for (const DeviceBuffer *out : {&dqBuf, &dkBuf, &dvBuf})
      CU_ASSERT(poison(*out, c.dtype));

    fa::AttentionBackwardArgs args;
    args.q = packedRows(qBuf, hq, totalQ, d);
    args.k = packedRows(kBuf, hkv, totalK, d);
    args.v = packedRows(vBuf, hkv, totalK, d);
    args.o = packedRows(oBuf, hq, totalQ, d);
    args.gradOutput = packedRows(doBuf, hq, totalQ, d);
    args.gradQuery = packedRows(dqBuf, hq, totalQ, d);
    args.gradKey = packedRows(dkBuf, hkv, totalK, d);
    args.gradValue = packedRows(dvBuf, hkv, totalK, d);
    setPackedLseAndOffsets(args.lse, lseBuf, hq, totalQ, args.cuSeqlensQ,
                           cuQBuf, args.cuSeqlensK, cuKBuf);
    args.maxSeqlenQ = maxQ;
    args.maxSeqlenK = maxK;
    fa::Result r = runtime->backward(spec, args);
    ASSERT_TRUE(bool(r)) << r.message;
    CU_ASSERT(driver().cuCtxSynchronize());

    auto download = [&](const DeviceBuffer &from, size_t n) {
      std::vector<float> values(n);
      if (wide) {
        EXPECT_EQ(driver().cuMemcpyDtoH_v2(values.data(), from.ptr, n * 4),
                  CUDA_SUCCESS);
        return values;
      }
      std::vector<uint16_t> bits(n);
      EXPECT_EQ(driver().cuMemcpyDtoH_v2(bits.data(), from.ptr, n * 2),
                CUDA_SUCCESS);
      for (size_t i = 0; i < n; ++i)
        values[i] = fromBits(bits[i], c.dtype);
      return values;
    };
    std::vector<float> dq = download(dqBuf, q.size()),
                       dk = download(dkBuf, k.size()),
                       dv = download(dvBuf, v.size());
    double relative = wide ? 1e-4 : 8 * fa::test::unitRoundoff(c.dtype);
    double worst[3] = {0, 0, 0};
    std::vector<fa::ReferenceGradients> wants;
    for (int64_t b = 0; b < batch; ++b)
      wants.push_back(
          poisoned(b)
              ? fa::ReferenceGradients{}
              : fa::referenceAttentionBackward(
                    c.problem(size_t(b)),
                    c.alone(q, hq, cuQ[b], c.qLens[b]).data(),
                    c.alone(k, hkv, cuK[b], c.kvLens[b]).data(),
                    c.alone(v, hkv, cuK[b], c.kvLens[b]).data(),
                    c.alone(gradOutput, hq, cuQ[b], c.qLens[b]).data()));
    // Each gradient's bound scales with its largest value over the packed
    // tensor, as runBackwardCase's over a batch: a sequence whose exact
    // gradient is 0 (one key seen by every row: dS = 0) still gets the
    // rounding of D = rowsum(dO * O) that the other rows have.
    double scales[3] = {0, 0, 0};
    for (const fa::ReferenceGradients &want : wants)
      for (auto [g, values] :
           {std::pair<int, const std::vector<double> *>{0, &want.gradQuery},
            {1, &want.gradKey},
            {2, &want.gradValue}})
        for (double x : *values)
          scales[g] = std::max(scales[g], std::fabs(x));
    for (int64_t b = 0; b < batch; ++b) {
      if (poisoned(b))
        continue;
      int64_t sq = c.qLens[b], sk = c.kvLens[b];
      const fa::ReferenceGradients &want = wants[size_t(b)];
      struct Grad {
        const char *name;
        std::vector<float> got;
        const std::vector<double> &want;
      };
      Grad grads[] = {{"dQ", c.alone(dq, hq, cuQ[b], sq), want.gradQuery},
                      {"dK", c.alone(dk, hkv, cuK[b], sk), want.gradKey},
                      {"dV", c.alone(dv, hkv, cuK[b], sk), want.gradValue}};
      for (int g = 0; g < 3; ++g) {
        double tolerance = relative * scales[g] + 1e-5;
        for (size_t i = 0; i < grads[g].want.size(); ++i) {
          double err = std::fabs(double(grads[g].got[i]) - grads[g].want[i]);
          if (!(err <= tolerance)) {
            ADD_FAILURE() << "sequence " << b << " (Sq=" << sq << ", Sk="
                          << sk << ") " << grads[g].name << "[" << i
                          << "] = " << grads[g].got[i] << ", expected "
                          << grads[g].want[i] << " (tolerance " << tolerance
                          << ")";
            return;
          }
          worst[g] = std::max(worst[g], err / tolerance);
        }
      }
    }
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t i = cuQ.back(); i < totalQ; ++i)
        if (!std::isnan(dq[size_t((i * hq + h) * d)])) {
          ADD_FAILURE() << "spare row " << i << " of head " << h
                        << " of dQ was written";
          return;
        }
    std::printf("  ok %-5s varlen backward D=%-3ld sequences=%ld Hq=%ld "
                "Hkv=%ld total_q=%-5ld total_k=%-5ld %-6s %-4s%s error/tol "
                "dQ %.2f dK %.2f dV %.2f\n",
                fa::toString(strategyOnDevice(spec)), long(d), long(batch),
                long(hq), long(hkv), long(totalQ), long(totalK),
                c.causal ? "causal" : "full", fa::toString(c.dtype),
                c.poisonOddSequences ? " NaN in odd inputs" : "", worst[0],
                worst[1], worst[2]);
  }

  /// Runs the backward of one case: dQ, dK, dV from random dO and the
  /// forward's O and LSE (the float64 reference's, rounded to the kernel's
  /// types), against the exact float64 gradients; prints each gradient's
  /// max |error| as a fraction of its tolerance.
  void runBackwardCase(const Case &c, const fa::KernelSpec &tiles = defaults()) {
    Stopwatch whole;
    fa::KernelSpec spec = tiles;
    spec.headDim = c.headDim;
    spec.causal = c.causal;
    spec.dtype = c.dtype;
    spec.scoreMod = c.scoreMod;
    spec.maskMod = c.maskMod;
    spec.sinks = !c.sinks.empty();
    spec.blockMask = c.blockMask;
    spec.arch = "";
    bool wide = c.dtype == fa::ElementType::f32;
    size_t elementBytes = wide ? 4 : 2;
    uint64_t seed = std::random_device{}();
    SCOPED_TRACE(testing::Message()
                 << "backward seed=" << seed << (spec.sinks ? " sinks" : "")
                 << " strategy=" << fa::toString(strategyOnDevice(spec))
                 << " D=" << c.headDim << " B=" << c.batch << " Hq=" << c.qHeads
                 << " Hkv=" << c.kvHeads << " Sq=" << c.qLen
                 << " Sk=" << c.kvLen << (c.causal ? " causal" : "") << " "
                 << fa::toString(c.dtype));
    fa::AttentionProblem p = problemOf(c);
    std::mt19937_64 rng(seed);
    auto random = [&](int64_t n) { return fa::test::randomNormal(n, rng); };
    // Inputs rounded to the kernel's type first, so that the reference
    // sees what the kernel sees.
    auto round = [&](std::vector<float> &values) {
      if (!wide)
        for (float &x : values)
          x = fromBits(toBits(x, c.dtype), c.dtype);
    };
    std::vector<float> q = random(p.qElements()), k = random(p.kvElements()),
                       v = random(p.kvElements()),
                       gradOutput = random(p.qElements());
    round(q);
    round(k);
    round(v);
    round(gradOutput);
    Stopwatch reference;
    fa::ReferenceResult forward =
        fa::referenceAttention(p, q.data(), k.data(), v.data());
    double referenceSeconds = reference.seconds();
    std::vector<float> o(forward.output.begin(), forward.output.end());
    std::vector<float> lse(forward.lse.begin(), forward.lse.end());
    round(o);

    DeviceBuffer qBuf(q.size(), elementBytes), kBuf(k.size(), elementBytes),
        vBuf(v.size(), elementBytes), oBuf(o.size(), elementBytes),
        doBuf(q.size(), elementBytes), lseBuf(lse.size()),
        dqBuf(q.size(), elementBytes), dkBuf(k.size(), elementBytes),
        dvBuf(v.size(), elementBytes);
    auto upload = [&](const DeviceBuffer &to, const std::vector<float> &values,
                      bool f32) {
      if (f32)
        return driver().cuMemcpyHtoD_v2(to.ptr, values.data(),
                                        values.size() * 4);
      std::vector<uint16_t> bits(values.size());
      for (size_t i = 0; i < values.size(); ++i)
        bits[i] = toBits(values[i], c.dtype);
      return driver().cuMemcpyHtoD_v2(to.ptr, bits.data(), bits.size() * 2);
    };
    CU_ASSERT(upload(qBuf, q, wide));
    CU_ASSERT(upload(kBuf, k, wide));
    CU_ASSERT(upload(vBuf, v, wide));
    CU_ASSERT(upload(oBuf, o, wide));
    CU_ASSERT(upload(doBuf, gradOutput, wide));
    CU_ASSERT(upload(lseBuf, lse, true));
    for (const DeviceBuffer *out : {&dqBuf, &dkBuf, &dvBuf}) {
      if (wide)
        CU_ASSERT(driver().cuMemsetD32_v2(out->ptr, 0x7fc00000, out->count));
      else
        CU_ASSERT(
            driver().cuMemsetD16_v2(out->ptr, nanBits(c.dtype), out->count));
    }

    fa::AttentionBackwardArgs args;
    args.q = tensorArg(qBuf, p.batch, p.qHeads, p.qLen, p.headDim);
    args.k = tensorArg(kBuf, p.batch, p.kvHeads, p.kvLen, p.headDim);
    args.v = tensorArg(vBuf, p.batch, p.kvHeads, p.kvLen, p.headDim);
    args.o = tensorArg(oBuf, p.batch, p.qHeads, p.qLen, p.headDim);
    args.gradOutput = tensorArg(doBuf, p.batch, p.qHeads, p.qLen, p.headDim);
    args.lse = tensorArg(lseBuf, p.batch, p.qHeads, p.qLen, 1);
    args.lse.strides[0] = p.qHeads * p.qLen;
    args.lse.strides[1] = p.qLen;
    args.lse.strides[2] = 1;
    args.gradQuery = tensorArg(dqBuf, p.batch, p.qHeads, p.qLen, p.headDim);
    args.gradKey = tensorArg(dkBuf, p.batch, p.kvHeads, p.kvLen, p.headDim);
    args.gradValue = tensorArg(dvBuf, p.batch, p.kvHeads, p.kvLen, p.headDim);
    // Sinks: the logits, and their gradient (poisoned: the call sets it).
    std::vector<float> sinks(c.sinks.begin(), c.sinks.end());
    DeviceBuffer sinksBuf(sinks.size()), gradSinksBuf(sinks.size());
    if (spec.sinks) {
      CU_ASSERT(upload(sinksBuf, sinks, true));
      CU_ASSERT(driver().cuMemsetD32_v2(gradSinksBuf.ptr, 0x7fc00000,
                                        gradSinksBuf.count));
      for (auto [arg, buffer] :
           {std::pair<fa::TensorArg *, const DeviceBuffer *>{&args.sinks,
                                                             &sinksBuf},
            {&args.gradSinks, &gradSinksBuf}}) {
        arg->data = buffer->data();
        arg->sizes[0] = p.qHeads;
        arg->strides[0] = 1;
      }
    }
    std::vector<std::unique_ptr<DeviceBuffer>> captureBuffers;
    uploadCaptures(c.captures, captureBuffers, args.captures);
    if (HasFatalFailure())
      return;
    std::unique_ptr<DeviceBuffer> keyTable, queryTable;
    fa::TensorArg keyRanges;
    if (c.blockMask) {
      blockMaskTables(c, args.q, args.k, args.captures, keyTable, queryTable,
                      keyRanges, args.queryRanges);
      if (HasFatalFailure() || HasNonfatalFailure())
        return;
    }
    Stopwatch call;
    fa::Result r = runtime->backward(spec, args);
    ASSERT_TRUE(bool(r)) << r.message;
    CU_ASSERT(driver().cuCtxSynchronize());
    double callSeconds = call.seconds();
    // Deterministic: runs again on the same inputs give the same bits.
    if (spec.deterministic) {
      auto bytesOf = [&](const DeviceBuffer &buffer) {
        std::vector<char> bytes(buffer.count * elementBytes);
        EXPECT_EQ(driver().cuMemcpyDtoH_v2(bytes.data(), buffer.ptr,
                                           bytes.size()),
                  CUDA_SUCCESS);
        return bytes;
      };
      // The sinks' gradient is f32 whatever the inputs.
      auto sinkBytes = [&]() {
        std::vector<float> values(gradSinksBuf.count);
        if (spec.sinks)
          EXPECT_EQ(driver().cuMemcpyDtoH_v2(values.data(), gradSinksBuf.ptr,
                                             values.size() * 4),
                    CUDA_SUCCESS);
        return values;
      };
      std::vector<char> first[3] = {bytesOf(dqBuf), bytesOf(dkBuf),
                                    bytesOf(dvBuf)};
      std::vector<float> firstSinks = sinkBytes();
      for (int run = 0; run < 3; ++run) {
        r = runtime->backward(spec, args);
        ASSERT_TRUE(bool(r)) << r.message;
        CU_ASSERT(driver().cuCtxSynchronize());
        EXPECT_EQ(bytesOf(dqBuf), first[0]) << "dQ differs in run " << run + 2;
        EXPECT_EQ(bytesOf(dkBuf), first[1]) << "dK differs in run " << run + 2;
        EXPECT_EQ(bytesOf(dvBuf), first[2]) << "dV differs in run " << run + 2;
        std::vector<float> sinksAgain = sinkBytes();
        EXPECT_EQ(std::memcmp(sinksAgain.data(), firstSinks.data(),
                              firstSinks.size() * 4),
                  0)
            << "dSinks differs in run " << run + 2;
      }
    }

    auto download = [&](const DeviceBuffer &from, size_t n) {
      std::vector<float> values(n);
      if (wide) {
        EXPECT_EQ(driver().cuMemcpyDtoH_v2(values.data(), from.ptr, n * 4),
                  CUDA_SUCCESS);
        return values;
      }
      std::vector<uint16_t> bits(n);
      EXPECT_EQ(driver().cuMemcpyDtoH_v2(bits.data(), from.ptr, n * 2),
                CUDA_SUCCESS);
      for (size_t i = 0; i < n; ++i)
        values[i] = fromBits(bits[i], c.dtype);
      return values;
    };
    reference = Stopwatch();
    fa::ReferenceGradients want = fa::referenceAttentionBackward(
        p, q.data(), k.data(), v.data(), gradOutput.data());
    referenceSeconds += reference.seconds();
    // f32: the exp2 approximation and the atomic dQ sums (any order) keep
    // errors near 1e-6 of the gradient's size; 16-bit: P, dS and the
    // gradients are rounded, a few u (the CPU suite's bound, 8 u).
    double relative = wide ? 1e-4
                           : 8 * fa::test::unitRoundoff(c.dtype) +
                                 2 * c.scoreError + c.derivativeError;
    struct Grad {
      const char *name;
      std::vector<float> got;
      const std::vector<double> &want;
    };
    Grad grads[] = {{"dQ", download(dqBuf, q.size()), want.gradQuery},
                    {"dK", download(dkBuf, k.size()), want.gradKey},
                    {"dV", download(dvBuf, v.size()), want.gradValue}};
    double errors[3] = {0, 0, 0};
    for (int g = 0; g < 3; ++g) {
      double scaleOf = 0.0;
      for (double x : grads[g].want)
        scaleOf = std::max(scaleOf, std::fabs(x));
      double tolerance = relative * scaleOf + 1e-5;
      size_t bad = 0, firstBad = 0;
      for (size_t i = 0; i < grads[g].want.size(); ++i) {
        double err = std::fabs(double(grads[g].got[i]) - grads[g].want[i]);
        if (!(err <= tolerance)) {
          if (bad++ == 0)
            firstBad = i;
          continue;
        }
        errors[g] = std::max(errors[g], err / tolerance);
      }
      if (bad) {
        ADD_FAILURE() << bad << " of " << grads[g].want.size() << " "
                      << grads[g].name << " elements wrong; first ["
                      << firstBad << "] = " << grads[g].got[firstBad]
                      << ", expected " << grads[g].want[firstBad]
                      << " (tolerance " << tolerance << ")";
        return;
      }
    }
    // The sinks' gradient, -sum_{b,i} P_sink D_i over the head's rows,
    // added in any order: within the gradients' relative bound of its
    // largest value, plus (16-bit) what rounding O does to each D_i =
    // rowsum(dO * O): up to u rowsum(|dO * O|), summed over rows of both
    // signs (the term can be large next to dsinks itself).
    double sinkError = 0.0;
    if (spec.sinks) {
      std::vector<float> got(sinks.size());
      CU_ASSERT(driver().cuMemcpyDtoH_v2(got.data(), gradSinksBuf.ptr,
                                         got.size() * 4));
      double scaleOf = 0.0;
      for (double x : want.gradSinks)
        scaleOf = std::max(scaleOf, std::fabs(x));
      double unit = wide ? 0.0 : fa::test::unitRoundoff(c.dtype);
      std::vector<double> rounding(got.size(), 0.0);
      for (int64_t row = 0; row < p.lseElements(); ++row) {
        int64_t h = row / p.qLen % p.qHeads;
        if (std::isinf(lse[row]))
          continue;
        double sum = 0.0;
        for (int64_t d = 0; d < p.headDim; ++d)
          sum += std::fabs(double(gradOutput[row * p.headDim + d]) *
                           double(o[row * p.headDim + d]));
        rounding[h] += unit * std::exp(c.sinks[h] - double(lse[row])) * sum;
      }
      for (size_t h = 0; h < got.size(); ++h) {
        double tolerance = relative * scaleOf + rounding[h] + 1e-5;
        double err = std::fabs(double(got[h]) - want.gradSinks[h]);
        if (!(err <= tolerance)) {
          ADD_FAILURE() << "dsinks[" << h << "] = " << got[h] << ", expected "
                        << want.gradSinks[h] << " (tolerance " << tolerance
                        << ")";
          return;
        }
        sinkError = std::max(sinkError, err / tolerance);
      }
      std::printf("  dsinks max |error| / tolerance %.3f\n", sinkError);
    }
    std::printf(
        "  ok bwd%s D=%-3ld B=%ld Hq=%ld Hkv=%ld Sq=%-5ld Sk=%-5ld %-6s "
        "%-4s max |error| / tolerance: dQ %.3f dK %.3f dV %.3f "
        "(tolerance %.1e x max|grad| + 1e-5) [%s]\n",
        spec.deterministic ? " det" : "", long(c.headDim), long(c.batch),
        long(c.qHeads), long(c.kvHeads), long(c.qLen), long(c.kvLen),
        c.causal ? "causal" : "full", fa::toString(c.dtype), errors[0],
        errors[1], errors[2], relative,
        caseTimes(whole.seconds(), callSeconds, referenceSeconds).c_str());
  }

  /// A built-in variant (lib/Variants.h) with its twin in plain C++.
  struct Variant {
    const char *name;
    std::string scoreMod, maskMod;
    bool causal;
    std::function<double(double, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t)>
        score; // (s, b, h, i, j, Sq, Sk)
    std::function<bool(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t)>
        keep; // (b, h, i, j, Sq, Sk)
    /// Case::scoreError and derivativeError of its 16-bit kernels.
    double scoreError = 0.0, derivativeError = 0.0;
  };
  struct Config {
    fa::Strategy strategy;
    fa::ElementType dtype;
  };
  struct Shape {
    int64_t b, hq, hkv, sq, sk;
  };

  /// Masks that narrow the K/V range (windows, prefix-LM), one that does
  /// not (chunks: a division), score_mods (softcap, ALiBi over `heads`),
  /// and both at once.
  static std::vector<Variant> builtInVariants(int64_t heads) {
    auto window = [](int64_t left, int64_t right) {
      return [left, right](int64_t, int64_t, int64_t i, int64_t j, int64_t sq,
                           int64_t sk) {
        int64_t diag = i + sk - sq;
        return (left < 0 || j >= diag - left) &&
               (right < 0 || j <= diag + right);
      };
    };
    auto softcap = [](double cap) {
      return [cap](double s, int64_t, int64_t, int64_t, int64_t, int64_t,
                   int64_t) { return cap * std::tanh(s / cap); };
    };
    // tanh.approx.f32's relative error bound (PTX ISA, 2^-10.987): cap *
    // tanh moves by at most cap times it, its derivative 1 - tanh^2 by
    // twice it.
    const double kTanhApprox = std::exp2(-10.987);
    return {
        {"softcap",
         fa::variants::softcap(2.0),
         "",
         false,
         softcap(2.0),
         {},
         2.0 * kTanhApprox,
         2 * kTanhApprox},
        {"window",
         "",
         fa::variants::slidingWindow(100, 0),
         false,
         {},
         window(100, 0)},
        {"window2",
         "",
         fa::variants::slidingWindow(200, 37),
         false,
         {},
         window(200, 37)},
        {"prefix",
         "",
         fa::variants::prefixLm(70),
         false,
         {},
         [](int64_t, int64_t, int64_t i, int64_t j, int64_t sq, int64_t sk) {
           return j < 70 || j <= i + sk - sq;
         }},
        {"chunk",
         "",
         fa::variants::sameChunk(96),
         false,
         {},
         [](int64_t, int64_t, int64_t i, int64_t j, int64_t sq, int64_t sk) {
           auto floorDiv = [](int64_t a, int64_t b) {
             return a >= 0 ? a / b : -((-a + b - 1) / b);
           };
           return floorDiv(i + sk - sq, 96) == floorDiv(j, 96);
         }},
        {"alibi",
         fa::variants::alibi(heads),
         "",
         true,
         [heads](double s, int64_t, int64_t h, int64_t i, int64_t j, int64_t sq,
                 int64_t sk) {
           double slope = std::exp2(-8.0 * double(h + 1) / double(heads));
           return s - slope * std::fabs(double(i + sk - sq - j));
         },
         {}},
        {"softcap+window", fa::variants::softcap(2.0),
         fa::variants::slidingWindow(150, 0), true, softcap(2.0),
         window(150, 0), 2.0 * kTanhApprox, 2 * kTanhApprox},
    };
  }

  /// The strategies and types every variant runs on: simt f32, mma
  /// f16/bf16 (every arch), wgmma f16/bf16 on sm_90a.
  std::vector<Config> variantConfigs() const {
    std::vector<Config> configs = {{fa::Strategy::simt, fa::ElementType::f32},
                                   {fa::Strategy::mma, fa::ElementType::f16},
                                   {fa::Strategy::mma, fa::ElementType::bf16}};
    if (runtime->deviceArch() == "sm_90a") {
      configs.push_back({fa::Strategy::wgmma, fa::ElementType::f16});
      configs.push_back({fa::Strategy::wgmma, fa::ElementType::bf16});
    }
    return configs;
  }

  /// The case of `variant` on shape `s`, its twin bound to the lengths.
  static Case variantCase(const Variant &variant, int64_t d,
                          fa::ElementType dtype, Shape s) {
    Case c{d, s.b, s.hq, s.hkv, s.sq, s.sk, variant.causal, dtype};
    c.scoreMod = variant.scoreMod;
    c.maskMod = variant.maskMod;
    c.scoreError = variant.scoreError;
    c.derivativeError = variant.derivativeError;
    if (variant.score)
      c.referenceScore = [score = variant.score, s](double x, int64_t b,
                                                    int64_t h, int64_t i,
                                                    int64_t j) {
        return score(x, b, h, i, j, s.sq, s.sk);
      };
    if (variant.keep)
      c.referenceKeep = [keep = variant.keep, s](int64_t b, int64_t h,
                                                 int64_t i, int64_t j) {
        return keep(b, h, i, j, s.sq, s.sk);
      };
    return c;
  }

  /// A document mask over shape `s`: i32 ids [B, Sk] in runs of 1 to 300
  /// keys (every fifth document of one key), as the captured tensor of
  /// fa::variants::document(), and its twin reading the same ids.
  static Case documentCase(std::mt19937 &rng, int64_t d,
                           fa::ElementType dtype, Shape s, bool causal) {
    auto ids = std::make_shared<std::vector<int32_t>>(size_t(s.b * s.sk));
    for (int64_t b = 0; b < s.b; ++b) {
      int32_t id = 0;
      for (int64_t j = 0; j < s.sk; ++id) {
        int64_t run = id % 5 == 1 ? 1 : 1 + int64_t(rng() % 300);
        for (int64_t r = 0; r < run && j < s.sk; ++r, ++j)
          (*ids)[size_t(b * s.sk + j)] = id;
      }
    }
    Variant v{"document", "", fa::variants::document(), causal, {},
              [ids](int64_t b, int64_t, int64_t i, int64_t j, int64_t sq,
                    int64_t sk) {
                int64_t position = i + sk - sq;
                return position >= 0 && (*ids)[size_t(b * sk + position)] ==
                                            (*ids)[size_t(b * sk + j)];
              }};
    Case c = variantCase(v, d, dtype, s);
    HostCapture capture{fa::ScalarType::i32, {s.b, s.sk}, {}};
    capture.bytes.resize(ids->size() * 4);
    std::memcpy(capture.bytes.data(), ids->data(), capture.bytes.size());
    c.captures = {capture};
    return c;
  }

  /// The deterministic backward's cases (`spec` deterministic): many K/V
  /// tiles per query tile, GQA, Sq != Sk, causal and not, f32 and bf16.
  void runDeterministicBackwardCases(const fa::KernelSpec &spec);

  llvm::SmallString<128> cacheDir;
  bool ownsCacheDir = false;
  std::unique_ptr<fa::Runtime> runtime;
  CUcontext context = nullptr;
};

bool quick() { return std::getenv("FA_GPU_TEST_QUICK") != nullptr; }

void GpuAttention::runDeterministicBackwardCases(const fa::KernelSpec &spec) {
  for (fa::ElementType type : {fa::ElementType::f32, fa::ElementType::bf16})
    for (bool causal : {false, true}) {
      runBackwardCase({64, 2, 8, 2, quick() ? 300 : 1000, quick() ? 300 : 1000,
                       causal, type},
                      spec);
      runBackwardCase({128, 1, 4, 1, 77, quick() ? 200 : 700, causal, type},
                      spec);
      // More queries than keys: with the causal mask the first Sq - Sk rows
      // see no key, and the dQ turns start past them (GQA, 2 heads/group).
      runBackwardCase({64, 1, 4, 2, quick() ? 333 : 900, 130, causal, type},
                      spec);
      if (HasFatalFailure() || HasNonfatalFailure())
        return;
    }
}

/// The long tests in parts, so that gtest's sharding (GTEST_TOTAL_SHARDS,
/// GTEST_SHARD_INDEX; scripts/gpu-run.sh) spreads them: part p of a test
/// runs the items (its loops' iterations, counted in order) i with
/// i % kParts == p. A part stops at its first failing item, as the whole
/// test did.
class GpuAttentionPart : public GpuAttention,
                         public testing::WithParamInterface<int64_t> {
public:
  static constexpr int64_t kParts = 4;

protected:
  /// Whether item `item` (0, 1, ... in loop order) is this part's.
  bool ownsItem(int64_t item) const { return item % kParts == GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Part, GpuAttentionPart,
                         testing::Range<int64_t>(0, GpuAttentionPart::kParts));

TEST_P(GpuAttentionPart, MatchesFloat64Reference) {
  std::vector<int64_t> headDims = {32, 64, 128, 256};
  std::vector<int64_t> lengths = {1, 17, 128, 1000, 4096};
  if (quick()) {
    headDims = {64, 128};
    lengths = {17, 128};
  }
  int64_t item = 0;
  for (int64_t d : headDims)
    for (bool causal : {false, true}) {
      if (!ownsItem(item++))
        continue;
      // Sq = Sk over all lengths, one head.
      for (int64_t len : lengths)
        runCase({d, 1, 1, 1, len, len, causal});
      // Sq != Sk both ways, GQA 8/2 and MQA 8/1, batch 2.
      runCase({d, 2, 4, 4, 17, quick() ? 128 : 1000, causal});
      runCase({d, 1, 2, 2, quick() ? 128 : 1000, 17, causal});
      runCase({d, 2, 8, 2, 128, 128, causal});
      runCase({d, 1, 8, 1, quick() ? 17 : 1000, 128, causal});
      if (!quick())
        runCase({d, 1, 8, 2, 4096, 1, causal});
      if (HasFatalFailure() || HasNonfatalFailure())
        return;
    }
}

/// f16 and bf16 inputs on the SIMT strategy (computed in f32), against the
/// float64 reference on the rounded inputs, within the rounding bound.
TEST_P(GpuAttentionPart, MatchesFloat64ReferenceIn16Bit) {
  std::vector<int64_t> headDims = {32, 64, 128, 256};
  std::vector<int64_t> lengths = {1, 17, 1000, 4096};
  if (quick()) {
    headDims = {64, 128};
    lengths = {17, 128};
  }
  fa::KernelSpec simt = defaults();
  simt.strategy = fa::Strategy::simt;
  int64_t item = 0;
  for (fa::ElementType type : {fa::ElementType::f16, fa::ElementType::bf16})
    for (int64_t d : headDims)
      for (bool causal : {false, true}) {
        if (!ownsItem(item++))
          continue;
        for (int64_t len : lengths)
          runCase({d, 1, 2, 2, len, len, causal, type}, simt);
        runCase({d, 2, 4, 4, 17, quick() ? 128 : 1000, causal, type}, simt);
        runCase({d, 2, 8, 2, 128, 128, causal, type}, simt);
        runCase({d, 1, 8, 1, quick() ? 17 : 333, 128, causal, type}, simt);
        if (HasFatalFailure() || HasNonfatalFailure())
          return;
      }
}

/// The mma.sync strategy (the default for f16/bf16 before Hopper) with its default
/// configs: head dims 16..256 (odd multiples of 8 padded to k16 inside the
/// kernel), lengths that are and are not multiples of the tiles, up to 16k
/// keys or queries, Sq != Sk both ways, GQA/MQA, batch, causal and not.
TEST_P(GpuAttentionPart, MmaMatchesFloat64Reference) {
  std::vector<int64_t> headDims = {16, 40, 64, 72, 96, 128, 136, 192, 256};
  std::vector<int64_t> lengths = {1, 17, 64, 1000, 2048};
  if (quick()) {
    headDims = {64, 72, 128};
    lengths = {17, 128};
  }
  fa::KernelSpec mma = defaults();
  mma.strategy = fa::Strategy::mma;
  int64_t item = 0;
  for (fa::ElementType type : {fa::ElementType::f16, fa::ElementType::bf16})
    for (int64_t d : headDims)
      for (bool causal : {false, true}) {
        if (!ownsItem(item++))
          continue;
        for (int64_t len : lengths)
          runCase({d, 1, 2, 2, len, len, causal, type}, mma);
        runCase({d, 2, 4, 4, 17, quick() ? 128 : 1000, causal, type}, mma);
        runCase({d, 1, 2, 2, quick() ? 128 : 1000, 17, causal, type}, mma);
        runCase({d, 2, 8, 2, 128, 128, causal, type}, mma);
        runCase({d, 1, 8, 1, quick() ? 17 : 333, 200, causal, type}, mma);
        if (!quick()) {
          runCase({d, 1, 1, 1, 16, 16384, causal, type}, mma);
          runCase({d, 1, 1, 1, 16384, 48, causal, type}, mma);
        }
        if (HasFatalFailure() || HasNonfatalFailure())
          return;
      }
}

/// Explicit mma configs: one to four stages, one to eight warps, block_m of
/// 16 per warp and more, block_n 16 to 128.
TEST_P(GpuAttentionPart, MmaExplicitConfigs) {
  struct Config {
    int64_t bm, bn, warps, stages;
  };
  int64_t item = 0;
  for (Config c : {Config{64, 64, 4, 1}, {128, 64, 8, 3}, {128, 32, 4, 4},
                   {64, 32, 2, 2}, {16, 16, 1, 2}, {128, 128, 8, 2}}) {
    if (!ownsItem(item++))
      continue;
    fa::KernelSpec tiles;
    tiles.strategy = fa::Strategy::mma;
    tiles.blockM = c.bm;
    tiles.blockN = c.bn;
    tiles.numWarps = c.warps;
    tiles.stages = c.stages;
    for (fa::ElementType type : {fa::ElementType::f16, fa::ElementType::bf16}) {
      runCase({64, 1, 2, 2, 1000, 1000, true, type}, tiles);
      runCase({72, 1, 2, 2, 333, 777, false, type}, tiles);
      runCase({128, 2, 4, 2, 777, 333, true, type}, tiles);
    }
    if (HasFatalFailure() || HasNonfatalFailure())
      return;
  }
}

/// The Hopper strategy (sm_90a only; skipped elsewhere) with its default
/// configs: head dims 64..256, lengths that are and are not multiples of
/// the tiles, up to 16k keys or queries, Sq != Sk both ways, GQA/MQA,
/// batch, causal and not.
TEST_P(GpuAttentionPart, WgmmaMatchesFloat64Reference) {
  if (runtime->deviceArch() != "sm_90a")
    GTEST_SKIP() << "wgmma needs sm_90a, the device is "
                 << runtime->deviceArch();
  std::vector<int64_t> headDims = {64, 128, 192, 256};
  std::vector<int64_t> lengths = {1, 17, 64, 1000, 2048};
  if (quick()) {
    headDims = {64, 128};
    lengths = {17, 128};
  }
  fa::KernelSpec wgmma = defaults();
  wgmma.strategy = fa::Strategy::wgmma;
  int64_t item = 0;
  for (fa::ElementType type : {fa::ElementType::f16, fa::ElementType::bf16})
    for (int64_t d : headDims)
      for (bool causal : {false, true}) {
        if (!ownsItem(item++))
          continue;
        for (int64_t len : lengths)
          runCase({d, 1, 2, 2, len, len, causal, type}, wgmma);
        runCase({d, 2, 4, 4, 17, quick() ? 128 : 1000, causal, type}, wgmma);
        runCase({d, 1, 2, 2, quick() ? 128 : 1000, 17, causal, type}, wgmma);
        runCase({d, 2, 8, 2, 128, 128, causal, type}, wgmma);
        runCase({d, 1, 8, 1, quick() ? 17 : 333, 200, causal, type}, wgmma);
        if (!quick()) {
          runCase({d, 1, 1, 1, 16, 16384, causal, type}, wgmma);
          runCase({d, 1, 1, 1, 16384, 48, causal, type}, wgmma);
        }
        if (HasFatalFailure() || HasNonfatalFailure())
          return;
      }
}

/// Packed varlen batches (flash-attn's layout) on every strategy that
/// serves the dtype: random lengths with 0 and 1 among them, Sq != Sk both
/// ways (causal rows that see no key), sequences of many tiles, GQA, rows
/// past the last sequence left alone; each sequence against the float64
/// reference run on it alone.
/// Split-KV on simt and mma: 1 to 64 parts (many of them without a key:
/// 1000 keys are 16 tiles of 64), decode rows and query tiles, GQA and
/// packed decode, causal with rows that see no key (Sq > Sk), sinks, head
/// dims 64..256; and the runtime's own choice on a long decode.
TEST_P(GpuAttentionPart, SplitKvMatchesFloat64Reference) {
  struct Config {
    fa::Strategy strategy;
    fa::ElementType dtype;
  };
  const Config configs[] = {{fa::Strategy::simt, fa::ElementType::f32},
                            {fa::Strategy::mma, fa::ElementType::f16},
                            {fa::Strategy::mma, fa::ElementType::bf16}};
  std::vector<int64_t> headDims = {64, 128, 256};
  if (quick())
    headDims = {128};
  int64_t item = 0;
  for (const Config &config : configs)
    for (int64_t d : headDims)
      for (bool causal : {false, true})
        for (int64_t parts : {1, 3, 64}) {
          if (!ownsItem(item++))
            continue;
          fa::KernelSpec spec = defaults();
          spec.strategy = config.strategy;
          Case decode{d, 3, 8, 2, 1, 1000, causal, config.dtype};
          decode.kvSplits = parts;
          runCase(decode, spec);
          Case rows{d, 2, 4, 4, 70, 1000, causal, config.dtype};
          rows.kvSplits = parts;
          runCase(rows, spec);
          Case noKeys{d, 1, 2, 1, 300, 200, causal, config.dtype};
          noKeys.kvSplits = parts;
          noKeys.sinks = {0.5, -1.0};
          runCase(noKeys, spec);
          if (HasFatalFailure() || HasNonfatalFailure())
            return;
        }
  Case longDecode{128, 1, 32, 8, 1, 40000, false, fa::ElementType::bf16};
  if (ownsItem(item++))
    runCase(longDecode);
}

TEST_F(GpuAttention, VarlenMatchesEachSequence) {
  std::mt19937_64 rng(2026);
  auto lengths = [&](int64_t n, int64_t longest) {
    std::vector<int64_t> l = {0, 1};
    std::uniform_int_distribution<int64_t> pick(1, longest);
    while (int64_t(l.size()) < n)
      l.push_back(pick(rng));
    std::shuffle(l.begin(), l.end(), rng);
    return l;
  };
  struct Served {
    fa::Strategy strategy;
    fa::ElementType dtype;
    std::vector<int64_t> headDims;
  };
  std::vector<Served> served = {
      {fa::Strategy::simt, fa::ElementType::f32, {64}},
      {fa::Strategy::mma, fa::ElementType::f16, {64, 128}},
      {fa::Strategy::mma, fa::ElementType::bf16, {128}}};
  if (runtime->deviceArch() == "sm_90a")
    served.push_back(
        {fa::Strategy::wgmma, fa::ElementType::bf16, {64, 128, 256}});
  int64_t sequences = quick() ? 4 : 12, longest = quick() ? 200 : 700;
  for (const Served &s : served)
    for (int64_t d : s.headDims)
      for (bool causal : {false, true}) {
        fa::KernelSpec tiles = defaults();
        tiles.strategy = s.strategy;
        std::vector<int64_t> qLens = lengths(sequences, longest);
        std::vector<int64_t> kvLens = lengths(sequences, longest);
        runVarlenCase({d, 4, 2, qLens, kvLens, causal, s.dtype, 0}, tiles);
        // Queries and keys of equal lengths, spare rows at the end.
        runVarlenCase({d, 2, 2, qLens, qLens, causal, s.dtype, 5}, tiles);
        // NaN in the values of the odd sequences, which the even ones'
        // last K/V tiles may read.
        VarlenCase poisoned{d, 2, 2, qLens, kvLens, causal, s.dtype, 0};
        poisoned.poisonOddSequences = true;
        runVarlenCase(poisoned, tiles);
        if (HasFatalFailure() || HasNonfatalFailure())
          return;
      }
}

/// The varlen backward on the strategies that take it (simt f32, mma
/// f16/bf16, wgmma on sm_90a; auto: wgmma on sm_90a, mma elsewhere): the
/// lengths of VarlenMatchesEachSequence (0 and 1 among them, Sq != Sk both
/// ways, GQA, spare rows), each sequence against its own float64
/// gradients; and NaN in every input of the odd sequences, which the even
/// ones' TMA boxes read (wgmma) and whose dQ boxes reach into the even
/// ones' rows.
TEST_F(GpuAttention, VarlenBackwardMatchesEachSequence) {
  std::mt19937_64 rng(2027);
  auto lengths = [&](int64_t n, int64_t longest) {
    std::vector<int64_t> l = {0, 1};
    std::uniform_int_distribution<int64_t> pick(1, longest);
    while (int64_t(l.size()) < n)
      l.push_back(pick(rng));
    std::shuffle(l.begin(), l.end(), rng);
    return l;
  };
  struct Served {
    fa::Strategy strategy;
    fa::ElementType dtype;
    std::vector<int64_t> headDims;
  };
  std::vector<Served> served = {
      {fa::Strategy::simt, fa::ElementType::f32, {64}},
      {fa::Strategy::mma, fa::ElementType::f16, {64, 128}},
      {fa::Strategy::automatic, fa::ElementType::bf16, {128}}};
  if (runtime->deviceArch() == "sm_90a")
    served.push_back({fa::Strategy::wgmma, fa::ElementType::f16, {64, 128}});
  int64_t sequences = quick() ? 4 : 10, longest = quick() ? 200 : 600;
  for (const Served &s : served)
    for (int64_t d : s.headDims)
      for (bool causal : {false, true}) {
        fa::KernelSpec tiles = defaults();
        tiles.strategy = s.strategy;
        std::vector<int64_t> qLens = lengths(sequences, longest);
        std::vector<int64_t> kvLens = lengths(sequences, longest);
        runVarlenBackwardCase({d, 4, 2, qLens, kvLens, causal, s.dtype, 0},
                              tiles);
        runVarlenBackwardCase({d, 2, 2, qLens, qLens, causal, s.dtype, 5},
                              tiles);
        VarlenCase poisoned{d, 4, 2, qLens, kvLens, causal, s.dtype, 0};
        poisoned.poisonOddSequences = true;
        runVarlenBackwardCase(poisoned, tiles);
        if (HasFatalFailure() || HasNonfatalFailure())
          return;
      }
}

/// The built-in variants (lib/Variants.h) on every strategy that serves the
/// dtype, against the float64 reference with the variant written in C++:
/// masks that narrow the K/V range (windows, prefix-LM), one that does not
/// (chunks: a division), score_mods (softcap, ALiBi), and both at once.
TEST_P(GpuAttentionPart, VariantsMatchFloat64Reference) {
  const int64_t heads = 4;
  std::vector<Config> configs = variantConfigs();
  int64_t item = 0;
  for (const Variant &variant : builtInVariants(heads))
    for (Config config : configs)
      for (int64_t d : {64, 128}) {
        // The quick subset: head dim 64 only.
        if ((quick() && d != 64) || !ownsItem(item++))
          continue;
        fa::KernelSpec spec = defaults();
        spec.strategy = config.strategy;
        for (Shape s : {Shape{1, heads, heads, 1000, 1000},
                        Shape{2, heads, 2, 300, 1000},
                        Shape{1, heads, 1, 1000, 300},
                        Shape{1, heads, heads, 17, 17}}) {
          std::printf("  %s:\n", variant.name);
          runCase(variantCase(variant, d, config.dtype, s), spec);
          if (HasFatalFailure() || HasNonfatalFailure())
            return;
        }
      }
}

/// The backward of the built-in variants (simt f32; mma f16/bf16, the
/// 16-bit backward on every arch; wgmma on sm_90a), against the float64
/// gradients of the C++ twin (its score_mod differentiated numerically).
TEST_P(GpuAttentionPart, BackwardVariantsMatchFloat64Gradients) {
  const int64_t heads = 4;
  std::vector<Config> configs = variantConfigs();
  int64_t item = 0;
  for (const Variant &variant : builtInVariants(heads))
    for (Config config : configs)
      for (int64_t d : {64, 128}) {
        // The quick subset: head dim 64 only.
        if ((quick() && d != 64) || !ownsItem(item++))
          continue;
        fa::KernelSpec spec = defaults();
        spec.strategy = config.strategy;
        for (Shape s : {Shape{1, heads, heads, 700, 700},
                        Shape{2, heads, 2, 300, 700},
                        Shape{1, heads, 1, 700, 300}}) {
          std::printf("  %s:\n", variant.name);
          runBackwardCase(variantCase(variant, d, config.dtype, s), spec);
          if (HasFatalFailure() || HasNonfatalFailure())
            return;
        }
      }
}

/// The deterministic backward of the built-in variants on mma and wgmma
/// (16-bit): bitwise identical gradients run to run (runBackwardCase runs
/// it twice) and the float64 gradients' accuracy. A window's dQ turns count
/// back from each query tile's last K/V tile (the grid runs last to first);
/// prefix-LM (an or) visits every tile, first to last. A program off its
/// turn would hang: the part's timeout catches it.
TEST_P(GpuAttentionPart, DeterministicBackwardVariants) {
  const int64_t heads = 4;
  int64_t item = 0;
  for (const Variant &variant : builtInVariants(heads))
    for (Config config : variantConfigs()) {
      if (config.strategy == fa::Strategy::simt || !ownsItem(item++))
        continue;
      fa::KernelSpec spec = defaults();
      spec.strategy = config.strategy;
      spec.deterministic = true;
      for (Shape s :
           {Shape{1, heads, heads, 700, 700}, Shape{2, heads, 2, 300, 700},
            Shape{1, heads, 1, 700, 300}}) {
        std::printf("  deterministic %s:\n", variant.name);
        runBackwardCase(variantCase(variant, 64, config.dtype, s), spec);
        if (HasFatalFailure() || HasNonfatalFailure())
          return;
      }
    }
}

/// Attention sinks (forward and backward, with the sinks' gradient) on
/// every strategy and 16-bit type, causal or not, with a window, GQA, a
/// GQA decode and rows that see no key (Sq > Sk, causal: O = 0, LSE = the
/// sink). The
/// logits range from below the scores to far above them (12: the row's
/// weight goes almost all to the sink).
TEST_P(GpuAttentionPart, SinksMatchFloat64Reference) {
  const int64_t heads = 4;
  std::vector<Config> configs = variantConfigs();
  Variant plain{"plain", "", "", false, {}, {}};
  Variant causal{"causal", "", "", true, {}, {}};
  Variant window = builtInVariants(heads)[6]; // softcap + window, causal
  ASSERT_EQ(std::string(window.name), "softcap+window");
  int64_t item = 0;
  for (const Variant &variant : {plain, causal, window})
    for (Config config : configs)
      for (int64_t d : {64, 128}) {
        if (quick() && d != 64)
          break;
        if (!ownsItem(item++))
          continue;
        fa::KernelSpec spec = defaults();
        spec.strategy = config.strategy;
        // (The decode: the runtime packs a K/V head's query heads into one
        // program's rows, each joining its own head's sink.)
        for (Shape s :
             {Shape{2, heads, 2, 300, 700}, Shape{1, heads, 1, 700, 300},
              Shape{1, heads, heads, 17, 17}, Shape{2, heads, 2, 1, 700}}) {
          std::printf("  sinks, %s:\n", variant.name);
          Case c = variantCase(variant, d, config.dtype, s);
          c.sinks = {-3.0, 0.5, 2.0, 12.0};
          runCase(c, spec);
          if (HasFatalFailure() || HasNonfatalFailure())
            return;
          runBackwardCase(c, spec);
          if (HasFatalFailure() || HasNonfatalFailure())
            return;
          // Deterministic: dSinks summed per query tile, then per head in
          // order (runBackwardCase repeats it and compares the bits).
          fa::KernelSpec deterministic = spec;
          deterministic.deterministic = true;
          std::printf("  sinks, deterministic, %s:\n", variant.name);
          runBackwardCase(c, deterministic);
          if (HasFatalFailure() || HasNonfatalFailure())
            return;
        }
      }
}

/// Variants that read tensors (captured tensors), forward and backward on
/// every strategy and 16-bit type: packed documents (i32 ids [B, Sk] in
/// runs of 1 to 300 keys; causal and not; Sq > Sk gives rows in no
/// document), a bias table (f16 [Hq, Sq, Sk]) and ALiBi with its slopes
/// read per head (f32 [Hq]).
TEST_P(GpuAttentionPart, CapturesMatchFloat64Reference) {
  const int64_t heads = 4;
  std::vector<Config> configs = variantConfigs();
  std::mt19937 rng(7);
  // Each case owns its tensors; the reference reads them through `data`.
  auto biasCase = [&](int64_t d, fa::ElementType dtype, Shape s) {
    auto bias = std::make_shared<std::vector<uint16_t>>(
        size_t(s.hq * s.sq * s.sk));
    std::normal_distribution<float> normal;
    for (uint16_t &x : *bias)
      x = toBits(2.0f * normal(rng), fa::ElementType::f16);
    Variant v{"bias", fa::variants::scoreBias(), "", false,
              [bias](double x, int64_t, int64_t h, int64_t i, int64_t j,
                     int64_t sq, int64_t sk) {
                return x + fromBits((*bias)[size_t((h * sq + i) * sk + j)],
                                    fa::ElementType::f16);
              },
              {}};
    Case c = variantCase(v, d, dtype, s);
    HostCapture capture{fa::ScalarType::f16, {s.hq, s.sq, s.sk}, {}};
    capture.bytes.resize(bias->size() * 2);
    std::memcpy(capture.bytes.data(), bias->data(), capture.bytes.size());
    c.captures = {capture};
    return c;
  };
  auto alibiCase = [&](int64_t d, fa::ElementType dtype, Shape s) {
    auto slopes = std::make_shared<std::vector<float>>();
    for (int64_t h = 0; h < s.hq; ++h)
      slopes->push_back(float(std::exp2(-8.0 * double(h + 1) / double(s.hq))));
    Variant v{"alibi_slopes", fa::variants::alibiSlopes(), "", true,
              [slopes](double x, int64_t, int64_t h, int64_t i, int64_t j,
                       int64_t sq, int64_t sk) {
                return x - double((*slopes)[size_t(h)]) *
                               std::fabs(double(i + sk - sq - j));
              },
              {}};
    Case c = variantCase(v, d, dtype, s);
    HostCapture capture{fa::ScalarType::f32, {s.hq}, {}};
    capture.bytes.resize(slopes->size() * 4);
    std::memcpy(capture.bytes.data(), slopes->data(), capture.bytes.size());
    c.captures = {capture};
    return c;
  };
  int64_t item = 0;
  for (Config config : configs)
    for (int64_t d : {64, 128}) {
      if (quick() && d != 64)
        break;
      if (!ownsItem(item++))
        continue;
      fa::KernelSpec spec = defaults();
      spec.strategy = config.strategy;
      for (Shape s : {Shape{2, heads, 2, 300, 700},
                      Shape{1, heads, 1, 700, 300},
                      Shape{1, heads, heads, 1000, 1000}}) {
        for (Case c : {documentCase(rng, d, config.dtype, s, false),
                       documentCase(rng, d, config.dtype, s, true),
                       biasCase(d, config.dtype, s),
                       alibiCase(d, config.dtype, s)}) {
          std::printf("  captures, %s%s:\n",
                      c.scoreMod.empty() ? "document" : "score_mod",
                      c.causal ? " causal" : "");
          runCase(c, spec);
          if (HasFatalFailure() || HasNonfatalFailure())
            return;
          runBackwardCase(c, spec);
          if (HasFatalFailure() || HasNonfatalFailure())
            return;
        }
      }
    }
}

/// Document masks with a block mask: the runtime's program computes the
/// tables (checked against tables computed on the host), and the forward
/// and backward that visit only the tiles they meet match float64, on
/// every strategy, causal or not, Sq < Sk, Sq > Sk and GQA.
TEST_P(GpuAttentionPart, BlockMaskMatchesFloat64Reference) {
  const int64_t heads = 4;
  std::mt19937 rng(11);
  int64_t item = 0;
  for (Config config : variantConfigs())
    for (int64_t d : {64, 128}) {
      if (quick() && d != 64)
        break;
      if (!ownsItem(item++))
        continue;
      fa::KernelSpec spec = defaults();
      spec.strategy = config.strategy;
      for (Shape s : {Shape{2, heads, 2, 300, 700},
                      Shape{1, heads, 1, 700, 300},
                      Shape{1, heads, heads, 2000, 2000}})
        for (bool causal : {false, true}) {
          Case c = documentCase(rng, d, config.dtype, s, causal);
          c.blockMask = true;
          std::printf("  block mask, document%s:\n", causal ? " causal" : "");
          runCase(c, spec);
          if (HasFatalFailure() || HasNonfatalFailure())
            return;
          runBackwardCase(c, spec);
          if (HasFatalFailure() || HasNonfatalFailure())
            return;
        }
    }
}

/// The persistent wgmma grid (two consumer warpgroups, D <= 128) walks
/// more tiles than the H200 has SMs (132): each block runs several items,
/// its K/V rings' phases and Q's barriers running on from item to item;
/// with the causal mask an item is a query tile and its mirror (T - 1 - k
/// and k; the middle one alone: 7 and 3 tiles). With long keys the (batch,
/// head) pairs come in several L2 sections (12 MiB of K and V each: 6
/// pairs at D = 64 and Sk = 8192, 12 at D = 128 and Sk = 2048), the last
/// one partial. D = 256 keeps one block per tile (the control).
TEST_P(GpuAttentionPart, WgmmaPersistentWalksManyTiles) {
  if (runtime->deviceArch() != "sm_90a")
    GTEST_SKIP() << "wgmma needs sm_90a, the device is "
                 << runtime->deviceArch();
  fa::KernelSpec wgmma = defaults();
  wgmma.strategy = fa::Strategy::wgmma;
  fa::KernelSpec twoWarpgroups = wgmma;
  twoWarpgroups.blockM = 128;
  twoWarpgroups.blockN = 128;
  twoWarpgroups.numWarps = 8;
  twoWarpgroups.stages = 2;
  std::vector<fa::ElementType> types = {fa::ElementType::f16};
  if (!quick())
    types.push_back(fa::ElementType::bf16);
  int64_t item = 0;
  for (fa::ElementType type : types)
    for (bool causal : {false, true}) {
      const std::pair<Case, const fa::KernelSpec *> cases[] = {
          {{64, 4, 66, 33, 17, 8192, causal, type}, &twoWarpgroups},
          {{64, 2, 40, 8, 900, 1000, causal, type}, &twoWarpgroups},
          {{128, 2, 40, 8, 129, 2048, causal, type}, &wgmma},
          {{128, 1, 70, 7, 333, 200, causal, type}, &wgmma},
          {{256, 3, 32, 32, 200, 300, causal, type}, &wgmma}};
      for (const auto &[c, spec] : cases) {
        if (!ownsItem(item++))
          continue;
        runCase(c, *spec);
        if (HasFatalFailure() || HasNonfatalFailure())
          return;
      }
    }
}

/// Explicit wgmma configs: one to three warpgroups, one to four stages,
/// block_n 16 to 256.
TEST_P(GpuAttentionPart, WgmmaExplicitConfigs) {
  if (runtime->deviceArch() != "sm_90a")
    GTEST_SKIP() << "wgmma needs sm_90a, the device is "
                 << runtime->deviceArch();
  struct Config {
    int64_t bm, bn, warps, stages;
  };
  int64_t item = 0;
  for (Config c : {Config{64, 64, 4, 1}, {128, 128, 8, 2}, {128, 64, 8, 3},
                   {192, 64, 12, 2}, {128, 32, 8, 4}, {64, 16, 4, 2},
                   {64, 256, 4, 1}, {128, 176, 8, 2}, {128, 144, 8, 2}}) {
    if (!ownsItem(item++))
      continue;
    fa::KernelSpec tiles;
    tiles.strategy = fa::Strategy::wgmma;
    tiles.blockM = c.bm;
    tiles.blockN = c.bn;
    tiles.numWarps = c.warps;
    tiles.stages = c.stages;
    for (fa::ElementType type : {fa::ElementType::f16, fa::ElementType::bf16}) {
      runCase({64, 1, 2, 2, 1000, 1000, true, type}, tiles);
      runCase({128, 2, 4, 2, 777, 333, true, type}, tiles);
      runCase({128, 1, 2, 2, 333, 777, false, type}, tiles);
    }
    if (HasFatalFailure() || HasNonfatalFailure())
      return;
  }
}

/// FP8 (e4m3) forward on wgmma against the float64 reference on the
/// dequantized inputs: Q, K, V normal values divided by per-(batch, K/V
/// head) descales in [0.5, 4) and quantized; O in bf16 or f16. Criterion:
/// P is quantized from 256 p, a relative error of at most 2^-4 (below
/// 2^-14, 2^-18 absolute each, Sk of them), and O rounded to its type
/// (u_out); O is a convex combination of V rows, so |O - O_ref| <= (2^-4 +
/// u_out + Sk 2^-18) max|V|, plus 2^-9 max|V| for the scores: 8-bit wgmma
/// accumulates with about 14 bits of mantissa (relative 2^-14 of a score's
/// |terms|, at most ~8 here: 5e-4 in a score, LSE's tolerance 4e-3).
/// Head dims 64, 128, 192 and 256 (64 and 192: rows in the 64-byte
/// swizzle), causal and not, GQA, Sq != Sk both ways, lengths 1 .. 2048 and
/// the tail tile.
TEST_F(GpuAttention, Float8MatchesFloat64Reference) {
  if (runtime->deviceArch() != "sm_90a")
    GTEST_SKIP() << "FP8 runs on wgmma, which needs sm_90a; the device is "
                 << runtime->deviceArch();
  struct Shape {
    int64_t batch, qHeads, kvHeads, qLen, kvLen;
  };
  std::vector<Shape> shapes = {{1, 2, 2, 1, 1},      {1, 2, 2, 17, 17},
                               {1, 2, 2, 128, 128},  {1, 2, 2, 1000, 1000},
                               {2, 8, 2, 128, 333},  {1, 4, 1, 1000, 17},
                               {1, 2, 2, 2048, 2048}};
  if (quick())
    shapes = {{1, 2, 2, 17, 17}, {2, 8, 2, 128, 333}};
  for (int64_t d : {64, 128, 192, 256})
    for (bool causal : {false, true})
      for (fa::ElementType out : {fa::ElementType::bf16, fa::ElementType::f16})
        for (Shape sh : shapes) {
          if (out == fa::ElementType::f16 && sh.qLen != sh.kvLen)
            continue;
          fa::KernelSpec spec = defaults();
          spec.headDim = d;
          spec.causal = causal;
          spec.dtype = fa::ElementType::e4m3;
          spec.outDtype = out;
          spec.arch = "";
          uint64_t seed = std::random_device{}();
          SCOPED_TRACE(testing::Message()
                       << "seed=" << seed << " D=" << d << " B=" << sh.batch
                       << " Hq=" << sh.qHeads << " Hkv=" << sh.kvHeads
                       << " Sq=" << sh.qLen << " Sk=" << sh.kvLen
                       << (causal ? " causal" : "") << " O "
                       << fa::toString(out));
          fa::AttentionProblem p;
          p.batch = sh.batch;
          p.qHeads = sh.qHeads;
          p.kvHeads = sh.kvHeads;
          p.qLen = sh.qLen;
          p.kvLen = sh.kvLen;
          p.headDim = d;
          p.causal = causal;
          p.scale = 1.0 / std::sqrt(double(d));
          std::mt19937_64 rng(seed);
          std::uniform_real_distribution<float> factor(0.5f, 4.0f);
          auto descales = [&] {
            std::vector<float> f(sh.batch * sh.kvHeads);
            for (float &x : f)
              x = factor(rng);
            return f;
          };
          std::vector<float> qd = descales(), kd = descales(), vd = descales();
          fa::Float8Values q = fa::quantizeFloat8(
              fa::test::randomNormal(sh.batch * sh.qHeads * sh.qLen * d, rng),
              fa::perQueryHead(qd, sh.batch, sh.qHeads, sh.kvHeads),
              sh.qLen * d);
          fa::Float8Values k = fa::quantizeFloat8(
              fa::test::randomNormal(sh.batch * sh.kvHeads * sh.kvLen * d, rng),
              kd, sh.kvLen * d);
          fa::Float8Values v = fa::quantizeFloat8(
              fa::test::randomNormal(sh.batch * sh.kvHeads * sh.kvLen * d, rng),
              vd, sh.kvLen * d);
          DeviceBuffer dq(q.codes.size(), 1), dk(k.codes.size(), 1),
              dv(v.codes.size(), 1), dout(q.codes.size(), 2),
              dlse(p.lseElements()), dqd(qd.size()), dkd(kd.size()),
              dvd(vd.size());
          for (auto [buffer, tensor] :
               {std::pair<DeviceBuffer *, fa::Float8Values *>{&dq, &q},
                {&dk, &k},
                {&dv, &v}})
            CU_ASSERT(driver().cuMemcpyHtoD_v2(
                buffer->ptr, tensor->codes.data(), tensor->codes.size()));
          CU_ASSERT(
              driver().cuMemcpyHtoD_v2(dqd.ptr, qd.data(), qd.size() * 4));
          CU_ASSERT(
              driver().cuMemcpyHtoD_v2(dkd.ptr, kd.data(), kd.size() * 4));
          CU_ASSERT(
              driver().cuMemcpyHtoD_v2(dvd.ptr, vd.data(), vd.size() * 4));
          CU_ASSERT(poison(dout, out));
          CU_ASSERT(driver().cuMemsetD32_v2(dlse.ptr, 0x7fc00000, dlse.count));
          fa::AttentionArgs args;
          args.q = tensorArg(dq, sh.batch, sh.qHeads, sh.qLen, d);
          args.k = tensorArg(dk, sh.batch, sh.kvHeads, sh.kvLen, d);
          args.v = tensorArg(dv, sh.batch, sh.kvHeads, sh.kvLen, d);
          args.o = tensorArg(dout, sh.batch, sh.qHeads, sh.qLen, d);
          args.lse = tensorArg(dlse, sh.batch, sh.qHeads, sh.qLen, 1);
          args.lse.strides[0] = sh.qHeads * sh.qLen;
          args.lse.strides[1] = sh.qLen;
          args.lse.strides[2] = 1;
          for (auto [arg, buffer] : {std::pair<fa::TensorArg *, DeviceBuffer *>{
                                         &args.qDescale, &dqd},
                                     {&args.kDescale, &dkd},
                                     {&args.vDescale, &dvd}}) {
            arg->data = buffer->data();
            arg->sizes[0] = sh.batch;
            arg->sizes[1] = sh.kvHeads;
            arg->strides[0] = sh.kvHeads;
            arg->strides[1] = 1;
          }
          fa::Result r = runtime->forward(spec, args);
          ASSERT_TRUE(bool(r)) << r.message;
          CU_ASSERT(driver().cuCtxSynchronize());
          std::vector<uint16_t> outBits(q.values.size());
          std::vector<float> lse(p.lseElements());
          CU_ASSERT(driver().cuMemcpyDtoH_v2(outBits.data(), dout.ptr,
                                             outBits.size() * 2));
          CU_ASSERT(
              driver().cuMemcpyDtoH_v2(lse.data(), dlse.ptr, lse.size() * 4));
          fa::ReferenceResult want = fa::referenceAttention(
              p, q.values.data(), k.values.data(), v.values.data());
          double maxV = 0.0;
          for (float x : v.values)
            maxV = std::max(maxV, double(std::fabs(x)));
          double tolerance =
              fa::float8OutputBound(out, sh.kvLen, /*eightBitMma=*/true) *
                  maxV +
              kOutputTolerance;
          double maxError = 0.0, maxLseError = 0.0;
          for (size_t i = 0; i < outBits.size(); ++i) {
            double err =
                std::fabs(double(fromBits(outBits[i], out)) - want.output[i]);
            ASSERT_LE(err, tolerance) << "O[" << i << "]";
            maxError = std::max(maxError, err);
          }
          for (size_t i = 0; i < lse.size(); ++i) {
            if (std::isinf(want.lse[i])) {
              ASSERT_TRUE(std::isinf(lse[i]) && lse[i] < 0)
                  << "LSE[" << i << "]";
              continue;
            }
            double err = std::fabs(double(lse[i]) - want.lse[i]);
            ASSERT_LE(err, 4e-3) << "LSE[" << i << "]";
            maxLseError = std::max(maxLseError, err);
          }
          // Not vacuous: P's quantization shows (measured 9e-4 .. 1.4e-2 of
          // max|V| on these cases; a 16-bit P would give ~1e-4).
          if (sh.qLen * sh.kvLen > 1000)
            EXPECT_GT(maxError, 3e-4 * maxV) << "suspiciously exact";
          std::printf(
              "  fp8 D=%lld %s Sq=%lld Sk=%lld Hq=%lld Hkv=%lld O %s: "
              "max |O err| %.3g (%.3g of max|V|), |LSE err| %.3g\n",
              (long long)d, causal ? "causal" : "full", (long long)sh.qLen,
              (long long)sh.kvLen, (long long)sh.qHeads, (long long)sh.kvHeads,
              fa::toString(out), maxError, maxError / maxV, maxLseError);
        }
}

TEST_F(GpuAttention, ExplicitTileConfigs) {
  // The lecture's kernel, and the B_r x B_c sweep corners.
  for (auto [bm, bn, warps] : {std::tuple<int64_t, int64_t, int64_t>{8, 32, 8},
                               {16, 32, 4},
                               {16, 64, 4},
                               {32, 32, 8},
                               {64, 32, 1}}) {
    fa::KernelSpec tiles;
    tiles.blockM = bm;
    tiles.blockN = bn;
    tiles.numWarps = warps;
    runCase({128, 1, 2, 2, 1000, 1000, true}, tiles);
    runCase({128, 1, 2, 2, 333, 777, false}, tiles);
  }
}

/// The backward (each strategy with its default tiles: simt for every
/// dtype, mma for 16-bit inputs) against the exact float64 gradients: head
/// dims, lengths that are and are not multiples of the tiles, Sq != Sk both
/// ways (causal rows that see no key), GQA/MQA, batch, causal and not.
TEST_P(GpuAttentionPart, BackwardMatchesFloat64Gradients) {
  std::vector<int64_t> headDims = {32, 64, 72, 128, 256};
  std::vector<int64_t> lengths = {1, 17, 128, 1000};
  if (quick()) {
    headDims = {64, 128};
    lengths = {17, 128};
  }
  int64_t item = 0;
  for (fa::Strategy strategy : {fa::Strategy::simt, fa::Strategy::mma})
    for (fa::ElementType type :
         {fa::ElementType::f32, fa::ElementType::f16, fa::ElementType::bf16})
      for (int64_t d : headDims)
        for (bool causal : {false, true}) {
          if (strategy == fa::Strategy::mma && type == fa::ElementType::f32)
            continue;
          if (!ownsItem(item++))
            continue;
          if (quick() && type != fa::ElementType::f32 && d != 64 &&
              strategy == fa::Strategy::simt)
            continue;
          fa::KernelSpec spec = defaults();
          spec.strategy = strategy;
          SCOPED_TRACE(fa::toString(strategy));
          for (int64_t len : lengths)
            runBackwardCase({d, 1, 1, 1, len, len, causal, type}, spec);
          runBackwardCase({d, 2, 4, 4, 17, quick() ? 128 : 300, causal, type},
                          spec);
          runBackwardCase({d, 1, 2, 2, quick() ? 128 : 300, 17, causal, type},
                          spec);
          runBackwardCase({d, 2, 8, 2, 128, 128, causal, type}, spec);
          runBackwardCase({d, 1, 8, 1, quick() ? 17 : 200, 77, causal, type},
                          spec);
          if (HasFatalFailure() || HasNonfatalFailure())
            return;
        }
}

/// The deterministic backward: dQ's shares added in K/V tile order give
/// bitwise identical gradients run to run (many K/V tiles per query tile,
/// GQA, causal and not), and the same accuracy.
TEST_F(GpuAttention, BackwardDeterministic) {
  fa::KernelSpec spec = defaults();
  spec.deterministic = true;
  runDeterministicBackwardCases(spec);
}

/// The deterministic backward with its dQ turns split into chains
/// (KernelSpec::dqChains): each chain's copy of the accumulator in its own
/// fixed order, the copies summed in chain order; bitwise identical run to
/// run and as accurate, with more K/V tiles than chains and fewer, causal
/// (chains counted from the last K/V tile) and not, GQA, Sq != Sk.
TEST_F(GpuAttention, BackwardDeterministicChains) {
  for (int64_t chains : {2, 3}) {
    fa::KernelSpec spec = defaults();
    spec.deterministic = true;
    spec.dqChains = chains;
    SCOPED_TRACE(testing::Message() << chains << " chains");
    runDeterministicBackwardCases(spec);
    if (HasFatalFailure() || HasNonfatalFailure())
      return;
  }
}

/// Explicit backward tiles: the thread grid over K/V tiles of 8 to 64 rows.
TEST_F(GpuAttention, BackwardExplicitTiles) {
  struct Config {
    int64_t bm, bn, warps;
  };
  for (Config c : {Config{64, 64, 8}, {32, 64, 8}, {32, 32, 4}, {16, 16, 4},
                   {8, 8, 2}}) {
    fa::KernelSpec tiles;
    tiles.strategy = fa::Strategy::simt;
    tiles.blockM = c.bm;
    tiles.blockN = c.bn;
    tiles.numWarps = c.warps;
    runBackwardCase({64, 1, 4, 2, 333, 200, true}, tiles);
    runBackwardCase({64, 2, 2, 2, 100, 257, false, fa::ElementType::bf16},
                    tiles);
    if (HasFatalFailure() || HasNonfatalFailure())
      return;
  }
}

/// Explicit mma backward configs: one to two m16 row blocks of S and dK/dV
/// per warp, 1 to 8 warps, Q/dO rings of 1 to 3 stages, head dims that are
/// odd multiples of 8 (the contraction padded to 16); on 8 warps the 4 x 2
/// warp grid (64 x 128 and 128 x 128 tiles) and, where the head dim does
/// not split in 16-column halves (D = 40), whole rows; past head dim 128
/// the defaults' 64 x 64 tiles on the 8-warp grid (D = 160, 192).
TEST_F(GpuAttention, BackwardMmaExplicitTiles) {
  struct Config {
    int64_t bm, bn, warps, stages, headDim;
  };
  for (Config c : {Config{64, 64, 4, 2, 64},
                   {128, 128, 8, 2, 64},
                   {64, 128, 4, 1, 64},
                   {32, 32, 2, 3, 40},
                   {16, 16, 1, 2, 24},
                   {128, 64, 4, 2, 128},
                   {64, 64, 4, 1, 128},
                   {64, 128, 8, 1, 128},
                   {128, 128, 8, 1, 40},
                   {64, 64, 8, 1, 160},
                   {64, 64, 8, 2, 192}}) {
    fa::KernelSpec tiles;
    tiles.strategy = fa::Strategy::mma;
    tiles.blockM = c.bm;
    tiles.blockN = c.bn;
    tiles.numWarps = c.warps;
    tiles.stages = c.stages;
    SCOPED_TRACE(testing::Message() << "mma " << c.bm << "x" << c.bn << " w"
                                    << c.warps << " s" << c.stages);
    runBackwardCase({c.headDim, 1, 4, 2, 333, 200, true, fa::ElementType::f16},
                    tiles);
    runBackwardCase(
        {c.headDim, 2, 2, 2, 100, 257, false, fa::ElementType::bf16}, tiles);
    runBackwardCase({c.headDim, 1, 2, 1, 300, 300, true, fa::ElementType::f16},
                    tiles);
    if (HasFatalFailure() || HasNonfatalFailure())
      return;
  }
}

/// The 16-bit backward past head dim 128 with everything left to `auto`:
/// mma's 64 x 64 tiles on 8 warps where they fit (sm_80, sm_90), simt
/// elsewhere; head dims 160, 192 and 256, GQA, Sq != Sk both ways, causal
/// rows that see no key, both 16-bit types.
TEST_F(GpuAttention, WideHeadBackwardDefaults) {
  std::string arch = runtime->deviceArch();
  bool tensorCores = arch == "sm_80" || arch == "sm_90" || arch == "sm_90a";
  for (int64_t d : {160, 192, 256})
    for (fa::ElementType type : {fa::ElementType::f16, fa::ElementType::bf16})
      for (bool causal : {false, true}) {
        fa::KernelSpec spec = defaults();
        spec.headDim = d;
        spec.dtype = type;
        spec.causal = causal;
        spec.backward = true;
        fa::KernelInfo info;
        ASSERT_TRUE(bool(runtime->prepare(spec, &info)));
        EXPECT_EQ(info.spec.strategy,
                  tensorCores ? fa::Strategy::mma : fa::Strategy::simt)
            << info.name;
        EXPECT_FALSE(info.ptxas.spills()) << info.name;
        runBackwardCase({d, 1, 4, 2, 333, 200, causal, type});
        runBackwardCase({d, 2, 2, 2, 100, 257, causal, type});
        if (HasFatalFailure() || HasNonfatalFailure())
          return;
      }
}

/// The backward on the Hopper strategy (sm_90a only; skipped elsewhere):
/// head dims 64 and 128, lengths that are and are not multiples of the
/// tiles up to 16k, Sq != Sk both ways (causal rows that see no key),
/// GQA/MQA, batch, causal and not, both 16-bit types, one and two
/// warpgroups, one to three Q/dO stages, and the deterministic mode.
TEST_P(GpuAttentionPart, BackwardWgmmaMatchesFloat64Gradients) {
  if (runtime->deviceArch() != "sm_90a")
    GTEST_SKIP() << "wgmma needs sm_90a, the device is "
                 << runtime->deviceArch();
  std::vector<int64_t> lengths = {1, 17, 128, 1000};
  if (quick())
    lengths = {17, 128};
  fa::KernelSpec wgmma = defaults();
  wgmma.strategy = fa::Strategy::wgmma;
  int64_t item = 0;
  for (fa::ElementType type : {fa::ElementType::f16, fa::ElementType::bf16})
    for (int64_t d : {64, 128})
      for (bool causal : {false, true}) {
        if (!ownsItem(item++))
          continue;
        SCOPED_TRACE("wgmma");
        for (int64_t len : lengths)
          runBackwardCase({d, 1, 1, 1, len, len, causal, type}, wgmma);
        runBackwardCase({d, 2, 4, 4, 17, quick() ? 128 : 300, causal, type},
                        wgmma);
        runBackwardCase({d, 1, 2, 2, quick() ? 128 : 300, 17, causal, type},
                        wgmma);
        runBackwardCase({d, 2, 8, 2, 128, 128, causal, type}, wgmma);
        runBackwardCase({d, 1, 8, 1, quick() ? 17 : 200, 77, causal, type},
                        wgmma);
        if (!quick()) {
          runBackwardCase({d, 1, 1, 1, 64, 16384, causal, type}, wgmma);
          runBackwardCase({d, 1, 1, 1, 16384, 64, causal, type}, wgmma);
        }
        if (HasFatalFailure() || HasNonfatalFailure())
          return;
      }
  struct Config {
    int64_t bn, warps, stages;
  };
  for (Config c : {Config{64, 4, 1}, {64, 4, 3}, {128, 8, 1}, {128, 8, 3}}) {
    if (!ownsItem(item++))
      continue;
    fa::KernelSpec tiles;
    tiles.strategy = fa::Strategy::wgmma;
    tiles.blockM = 64;
    tiles.blockN = c.bn;
    tiles.numWarps = c.warps;
    tiles.stages = c.stages;
    SCOPED_TRACE(testing::Message() << "wgmma 64x" << c.bn << " w" << c.warps
                                    << " s" << c.stages);
    runBackwardCase({64, 1, 4, 2, 333, 200, true, fa::ElementType::f16}, tiles);
    runBackwardCase({128, 2, 2, 2, 100, 257, false, fa::ElementType::bf16},
                    tiles);
    if (HasFatalFailure() || HasNonfatalFailure())
      return;
  }
  fa::KernelSpec deterministic = wgmma;
  deterministic.deterministic = true;
  for (bool causal : {false, true}) {
    if (!ownsItem(item++))
      continue;
    runBackwardCase({64, 2, 8, 2, quick() ? 300 : 1000, quick() ? 300 : 1000,
                     causal, fa::ElementType::bf16},
                    deterministic);
    runBackwardCase(
        {128, 1, 4, 2, quick() ? 333 : 900, 130, causal, fa::ElementType::f16},
        deterministic);
    if (HasFatalFailure() || HasNonfatalFailure())
      return;
  }
}

/// Another thread clearing the memory cache while this one launches: a
/// launch keeps its kernel loaded until it is done (no use after unload),
/// later launches load it again, and every result is right.
TEST_F(GpuAttention, ClearMemoryCacheWhileLaunching) {
  std::atomic<bool> stop{false};
  std::thread clearer([&] {
    while (!stop) {
      runtime->clearMemoryCache();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  for (int i = 0; i < (quick() ? 8 : 40); ++i) {
    runCase({64, 1, 2, 2, 128, 128, i % 2 == 0});
    if (i % 4 == 3)
      runBackwardCase({32, 1, 2, 1, 100, 77, true});
    if (HasFatalFailure() || HasNonfatalFailure())
      break;
  }
  stop = true;
  clearer.join();
}

/// Autotuning: with it on, a request with default tiles times the first
/// candidates once per (spec, length bucket) on its own tensors and runs the
/// fastest (results still right); the choice lands in the disk cache, where
/// a second runtime (as a second process would) reads it instead of timing;
/// another length bucket is tuned again. Forward and backward.
TEST_F(GpuAttention, AutotuneChoosesPersistsAndReuses) {
  useFreshCache();
  fa::RuntimeOptions options;
  options.cacheDir = std::string(cacheDir);
  options.autotune = true;
  std::unique_ptr<fa::Runtime> first;
  ASSERT_TRUE(bool(fa::Runtime::create(options, first)));
  std::swap(runtime, first); // runCase and runBackwardCase use `runtime`
  ASSERT_TRUE(runtime->autotunes());
  runCase({128, 2, 4, 4, 1000, 1000, true, fa::ElementType::f16});
  EXPECT_EQ(runtime->tuningsTimed(), 1);
  runCase({128, 2, 4, 4, 1000, 1000, true, fa::ElementType::f16});
  EXPECT_EQ(runtime->tuningsTimed(), 1) << "the same bucket is tuned once";
  runBackwardCase({64, 1, 4, 2, 300, 300, true, fa::ElementType::bf16});
  EXPECT_EQ(runtime->tuningsTimed(), 2);
  int stored = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(cacheDir, ec), end;
       it != end && !ec; it.increment(ec))
    stored += llvm::StringRef(it->path()).contains("autotune-");
  EXPECT_EQ(stored, 2) << "one stored choice per tuning";

  std::unique_ptr<fa::Runtime> second;
  ASSERT_TRUE(bool(fa::Runtime::create(options, second)));
  std::swap(runtime, second);
  runCase({128, 2, 4, 4, 1000, 1000, true, fa::ElementType::f16});
  runBackwardCase({64, 1, 4, 2, 300, 300, true, fa::ElementType::bf16});
  EXPECT_EQ(runtime->tuningsTimed(), 0) << "choices read back from disk";
  runCase({128, 1, 4, 4, 3000, 3000, true, fa::ElementType::f16});
  EXPECT_EQ(runtime->tuningsTimed(), 1) << "a new length bucket";
  std::swap(runtime, first);
}

/// fa-sweep's timed mode on a small problem: every schedule is checked
/// against float64 and timed (simt and mma, causal, GQA).
TEST_F(GpuAttention, SweepTimingChecksAndTimes) {
  fa::AttentionProblem problem;
  problem.batch = 1;
  problem.qHeads = 4;
  problem.kvHeads = 2;
  problem.qLen = problem.kvLen = 512;
  problem.headDim = 64;
  problem.causal = true;
  std::unique_ptr<fa::DeviceTiming> timing;
  ASSERT_EQ(fa::DeviceTiming::create(problem, 3, timing), "");
  fa::KernelSpec simt;
  simt.headDim = 64;
  simt.causal = true;
  simt.strategy = fa::Strategy::simt;
  simt.blockM = 8;
  simt.blockN = 32;
  simt.numWarps = 4;
  simt.stages = 1;
  fa::KernelSpec mma = simt;
  mma.dtype = fa::ElementType::f16;
  mma.strategy = fa::Strategy::mma;
  mma.blockM = 64;
  mma.blockN = 64;
  mma.stages = 2;
  for (const fa::KernelSpec &spec : {simt, mma}) {
    fa::TimedSchedule t = timing->measure(spec);
    std::printf("  sweep timing %s: check %s (max error %.2e, bound %.2e), "
                "%.4f ms, %.2f TFLOP/s\n",
                kernelName(spec).c_str(), t.check.c_str(), t.maxError, t.bound,
                t.milliseconds, t.tflops);
    EXPECT_EQ(t.check, "ok") << kernelName(spec);
    EXPECT_LE(t.maxError, t.bound);
    EXPECT_GT(t.milliseconds, 0.0);
    EXPECT_GT(t.tflops, 0.0);
  }
}

TEST_F(GpuAttention, JitAndCacheTimes) {
  useFreshCache();
  fa::KernelSpec spec;
  spec.headDim = 96;
  spec.causal = true;
  spec.arch = "";
  fa::KernelInfo cold, memory;
  ASSERT_TRUE(bool(runtime->load(spec, &cold)));
  ASSERT_EQ(cold.source, fa::KernelSource::compiled);
  ASSERT_TRUE(bool(runtime->load(spec, &memory)));
  ASSERT_EQ(memory.source, fa::KernelSource::memoryCache);
  std::unique_ptr<fa::Runtime> second;
  fa::RuntimeOptions options;
  options.cacheDir = std::string(cacheDir);
  ASSERT_TRUE(bool(fa::Runtime::create(options, second)));
  fa::KernelInfo disk;
  ASSERT_TRUE(bool(second->load(spec, &disk)));
  ASSERT_EQ(disk.source, fa::KernelSource::diskCache);
  std::printf("  %s: cold JIT %.1f ms (compile + %s) + load %.2f ms; disk "
              "cache read %.2f ms + load %.2f ms; registers %d, local %d B\n",
              cold.name.c_str(), cold.compileSeconds * 1e3,
              cold.assembler.c_str(),
              cold.loadSeconds * 1e3, disk.compileSeconds * 1e3,
              disk.loadSeconds * 1e3, disk.registers, disk.localBytes);
  EXPECT_EQ(disk.registers, cold.registers);
  EXPECT_EQ(disk.assembler, cold.assembler);
  // The assembler's report reached the kernel info on either path.
  EXPECT_GT(cold.ptxas.registers, 0) << cold.assembler;
}

} // namespace
