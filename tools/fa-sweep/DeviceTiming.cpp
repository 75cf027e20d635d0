//===- DeviceTiming.cpp - fa-sweep's timed mode ---------------------*- C++ -*-===//
#include "tools/fa-sweep/DeviceTiming.h"

#include "lib/LowPrecision.h"
#include "lib/ReferenceAttention.h"
#include "runtime/CudaDriver.h"
#include "runtime/EventTiming.h"
#include "runtime/Runtime.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace fa {

namespace {

/// A device buffer of `count` elements of `bytes` each.
struct Buffer {
  const CudaDriver *driver = nullptr;
  CUdeviceptr ptr = 0;
  int64_t count = 0;
  ~Buffer() {
    if (ptr)
      driver->cuMemFree_v2(ptr);
  }
};

/// [B, H, S, D] (or [B, H, S] for D = 0) contiguous.
TensorArg tensorOf(const Buffer &buffer, int64_t b, int64_t h, int64_t s,
                   int64_t d) {
  TensorArg t;
  t.data = reinterpret_cast<const void *>(buffer.ptr);
  if (d == 0) {
    t.sizes[0] = b, t.sizes[1] = h, t.sizes[2] = s;
    t.strides[2] = 1, t.strides[1] = s, t.strides[0] = h * s;
    return t;
  }
  t.sizes[0] = b, t.sizes[1] = h, t.sizes[2] = s, t.sizes[3] = d;
  t.strides[3] = 1, t.strides[2] = d, t.strides[1] = s * d,
  t.strides[0] = h * s * d;
  return t;
}

} // namespace

struct DeviceTiming::Impl {
  const CudaDriver *driver = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr; // the primary context, the runtime's
  std::unique_ptr<Runtime> runtime;
  AttentionProblem problem;
  int runs = 10;

  std::string error(CUresult r, const char *what) const {
    return std::string(what) + " failed: " + driver->describe(r);
  }

  /// Device buffers of Q, K, V (random, rounded to `dtype`), O and LSE for
  /// `p`, and the rounded host inputs.
  struct Problem {
    Buffer q, k, v, o, lse;
    /// FP8: descale factors of 1, [B, Hkv] (every input's).
    Buffer descales;
    std::vector<float> hostQ, hostK, hostV;
  };
  /// `outType`: O's element type (FP8 inputs write a 16-bit O).
  std::string upload(const AttentionProblem &p, ElementType dtype,
                     ElementType outType, bool keepHost, Problem &out) {
    size_t bytes = size_t(elementBytes(dtype));
    std::mt19937_64 rng(1234);
    std::normal_distribution<float> normal;
    auto fill = [&](Buffer &buffer, int64_t count,
                    std::vector<float> *host) -> std::string {
      buffer.driver = driver;
      buffer.count = count;
      if (CUresult r = driver->cuMemAlloc_v2(&buffer.ptr, count * bytes))
        return error(r, "cuMemAlloc");
      std::vector<float> values(count);
      for (float &x : values)
        x = normal(rng);
      std::vector<uint16_t> bits;
      std::vector<uint8_t> bytesOf;
      const void *data = values.data();
      if (dtype != ElementType::f32) {
        bits.resize(count);
        for (int64_t i = 0; i < count; ++i) {
          bits[i] = toBits(values[i], dtype);
          values[i] = fromBits(bits[i], dtype);
        }
        data = bits.data();
      }
      if (dtype == ElementType::e4m3) {
        bytesOf.assign(bits.begin(), bits.end());
        data = bytesOf.data();
      }
      if (CUresult r = driver->cuMemcpyHtoD_v2(buffer.ptr, data, count * bytes))
        return error(r, "cuMemcpyHtoD");
      if (host)
        *host = std::move(values);
      return "";
    };
    for (auto [buffer, count, host] :
         {std::tuple{&out.q, p.qElements(), keepHost ? &out.hostQ : nullptr},
          std::tuple{&out.k, p.kvElements(), keepHost ? &out.hostK : nullptr},
          std::tuple{&out.v, p.kvElements(),
                     keepHost ? &out.hostV : nullptr}})
      if (std::string e = fill(*buffer, count, host); !e.empty())
        return e;
    out.o.driver = out.lse.driver = out.descales.driver = driver;
    if (CUresult r = driver->cuMemAlloc_v2(
            &out.o.ptr, p.qElements() * size_t(elementBytes(outType))))
      return error(r, "cuMemAlloc");
    if (dtype == ElementType::e4m3) {
      std::vector<float> ones(p.batch * p.kvHeads, 1.0f);
      if (CUresult r =
              driver->cuMemAlloc_v2(&out.descales.ptr, ones.size() * 4 + 4))
        return error(r, "cuMemAlloc");
      if (CUresult r = driver->cuMemcpyHtoD_v2(out.descales.ptr, ones.data(),
                                               ones.size() * 4))
        return error(r, "cuMemcpyHtoD");
    }
    if (CUresult r = driver->cuMemAlloc_v2(&out.lse.ptr, p.lseElements() * 4))
      return error(r, "cuMemAlloc");
    return "";
  }

  /// The timed problem's tensors, uploaded once per dtype (not per
  /// schedule: filling them takes longer than timing a kernel).
  std::unique_ptr<Problem> timed;
  ElementType timedType = ElementType::f32;

  AttentionArgs argsOf(const AttentionProblem &p, const Problem &t) const {
    AttentionArgs a;
    a.q = tensorOf(t.q, p.batch, p.qHeads, p.qLen, p.headDim);
    a.k = tensorOf(t.k, p.batch, p.kvHeads, p.kvLen, p.headDim);
    a.v = tensorOf(t.v, p.batch, p.kvHeads, p.kvLen, p.headDim);
    a.o = tensorOf(t.o, p.batch, p.qHeads, p.qLen, p.headDim);
    a.lse = tensorOf(t.lse, p.batch, p.qHeads, p.qLen, 0);
    if (t.descales.ptr)
      for (TensorArg *descale : {&a.qDescale, &a.kDescale, &a.vDescale}) {
        descale->data = reinterpret_cast<const void *>(t.descales.ptr);
        descale->sizes[0] = p.batch;
        descale->sizes[1] = p.kvHeads;
        descale->strides[0] = p.kvHeads;
        descale->strides[1] = 1;
      }
    return a;
  }
};

DeviceTiming::DeviceTiming(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}
DeviceTiming::~DeviceTiming() {
  if (impl->context)
    impl->driver->cuDevicePrimaryCtxRelease_v2(impl->device);
}

std::string DeviceTiming::create(const AttentionProblem &problem, int runs,
                                 std::unique_ptr<DeviceTiming> &timing) {
  auto impl = std::make_unique<Impl>();
  impl->problem = problem;
  impl->runs = std::max(1, runs);
  RuntimeOptions options;
  options.diskCache = false;
  if (Result r = Runtime::create(options, impl->runtime); !r)
    return r.message;
  if (!impl->runtime->hasDriver())
    return impl->runtime->driverError();
  impl->driver = &CudaDriver::get();
  // The buffers live in the device's primary context, where the runtime
  // launches.
  const CudaDriver &driver = *impl->driver;
  if (CUresult r = driver.cuDeviceGet(&impl->device, 0))
    return impl->error(r, "cuDeviceGet");
  if (CUresult r = driver.cuDevicePrimaryCtxRetain(&impl->context,
                                                   impl->device))
    return impl->error(r, "cuDevicePrimaryCtxRetain");
  if (CUresult r = driver.cuCtxSetCurrent(impl->context)) {
    driver.cuDevicePrimaryCtxRelease_v2(impl->device);
    return impl->error(r, "cuCtxSetCurrent");
  }
  timing.reset(new DeviceTiming(std::move(impl)));
  return "";
}

TimedSchedule DeviceTiming::measure(const KernelSpec &requested,
                                    int64_t kvSplits) {
  TimedSchedule out;
  const CudaDriver &driver = *impl->driver;
  KernelSpec spec = requested;
  spec.arch = ""; // the device's (the sweep's arch may differ)

  // The check: a problem with a ragged last tile, GQA and Sq != Sk, against
  // float64; FlashAttention-style bound: the inputs' rounding (8 u of
  // max |O|) for 16-bit, 1e-4 for f32.
  AttentionProblem small;
  small.batch = 1;
  small.qHeads = 4;
  small.kvHeads = 2;
  small.qLen = 300;
  small.kvLen = 333;
  small.headDim = spec.headDim;
  small.causal = spec.causal;
  small.scale = spec.effectiveScale();
  {
    Impl::Problem t;
    if (std::string e =
            impl->upload(small, spec.dtype, spec.outputDtype(), true, t);
        !e.empty()) {
      out.check = e;
      return out;
    }
    AttentionArgs checked = impl->argsOf(small, t);
    checked.kvSplits = kvSplits;
    if (Result r = impl->runtime->forward(spec, checked); !r) {
      out.check = r.message;
      return out;
    }
    if (CUresult r = driver.cuCtxSynchronize()) {
      out.check = impl->error(r, "cuCtxSynchronize");
      return out;
    }
    ElementType outType = spec.outputDtype();
    size_t bytes = size_t(elementBytes(outType));
    std::vector<float> o(small.qElements());
    std::vector<uint16_t> bits(small.qElements());
    void *host = outType == ElementType::f32 ? static_cast<void *>(o.data())
                                             : bits.data();
    if (CUresult r = driver.cuMemcpyDtoH_v2(host, t.o.ptr, o.size() * bytes)) {
      out.check = impl->error(r, "cuMemcpyDtoH");
      return out;
    }
    if (outType != ElementType::f32)
      for (size_t i = 0; i < o.size(); ++i)
        o[i] = fromBits(bits[i], outType);
    ReferenceResult want =
        referenceAttention(small, t.hostQ.data(), t.hostK.data(),
                           t.hostV.data());
    double scaleOf = 0.0;
    for (double x : want.output)
      scaleOf = std::max(scaleOf, std::fabs(x));
    // FP8: float8OutputBound (P quantized from 256 p, O rounded, 8-bit
    // wgmma's accumulation) of max|V|.
    double maxV = 0.0;
    for (float x : t.hostV)
      maxV = std::max(maxV, double(std::fabs(x)));
    out.bound = spec.dtype == ElementType::f32 ? 1e-4
                : spec.dtype == ElementType::e4m3
                    ? float8OutputBound(outType, small.kvLen,
                                        /*eightBitMma=*/true) *
                              maxV +
                          1e-4
                    : 8 * unitRoundoff(spec.dtype) * std::max(1.0, scaleOf);
    for (size_t i = 0; i < o.size(); ++i) {
      double err = std::fabs(double(o[i]) - want.output[i]);
      out.maxError = std::isnan(err) ? INFINITY : std::max(out.maxError, err);
    }
    out.check = out.maxError <= out.bound ? "ok" : "wrong";
  }

  // The timing, on the stated problem.
  const AttentionProblem &p = impl->problem;
  if (!impl->timed || impl->timedType != spec.dtype) {
    impl->timed.reset();
    auto fresh = std::make_unique<Impl::Problem>();
    if (std::string e =
            impl->upload(p, spec.dtype, spec.outputDtype(), false, *fresh);
        !e.empty()) {
      out.check = e;
      return out;
    }
    impl->timed = std::move(fresh);
    impl->timedType = spec.dtype;
  }
  AttentionArgs args = impl->argsOf(p, *impl->timed);
  args.kvSplits = kvSplits;
  if (Result r = medianMilliseconds(
          driver, /*stream=*/nullptr, /*warmups=*/2, impl->runs,
          [&] { return impl->runtime->forward(spec, args); },
          out.milliseconds);
      !r) {
    out.check = r.message;
    return out;
  }
  double flops = 4.0 * p.batch * p.qHeads * double(p.qLen) * double(p.kvLen) *
                 p.headDim / (p.causal ? 2.0 : 1.0);
  out.tflops = flops / (out.milliseconds * 1e-3) / 1e12;
  return out;
}

} // namespace fa
