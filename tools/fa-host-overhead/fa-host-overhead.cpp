//===- fa-host-overhead.cpp - Host time of a runtime call
//------------------===//
//
// How long the host spends in one Runtime::forward / backward call once its
// kernel is compiled and loaded: the request lookup, the argument checks,
// the launch parameters, workspaces and launches. With test/FakeCuda's
// libcuda.so.1 first on the library path (no GPU), that is the runtime's
// own work alone; with a real driver it adds the driver's (the kernels run
// on buffers of zeros).
//
//   LD_LIBRARY_PATH=build/test/Unit/fake-cuda build/bin/fa-host-overhead
//   fa-host-overhead [--calls=N]
//
//===----------------------------------------------------------------------===//
#include "runtime/CudaDriver.h"
#include "runtime/Runtime.h"

#include "llvm/Support/CommandLine.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

llvm::cl::opt<int> calls("calls", llvm::cl::desc("timed calls per case"),
                         llvm::cl::init(20000));

/// Device buffers, zeroed, freed at exit.
struct Buffers {
  std::vector<CUdeviceptr> owned;
  ~Buffers() {
    for (CUdeviceptr p : owned)
      fa::CudaDriver::get().cuMemFree_v2(p);
  }
  fa::TensorArg tensor(int64_t b, int64_t h, int64_t s, int64_t d,
                       int64_t elementBytes) {
    const fa::CudaDriver &driver = fa::CudaDriver::get();
    int64_t elements = b * h * s * (d ? d : 1);
    CUdeviceptr p = 0;
    if (driver.cuMemAlloc_v2(&p, size_t(elements * elementBytes)) !=
            CUDA_SUCCESS ||
        driver.cuMemsetD32_v2(p, 0, size_t(elements * elementBytes / 4)) !=
            CUDA_SUCCESS) {
      std::fprintf(stderr, "fa-host-overhead: cannot allocate %lld bytes\n",
                   (long long)(elements * elementBytes));
      std::exit(1);
    }
    owned.push_back(p);
    fa::TensorArg t;
    t.data = reinterpret_cast<const void *>(p);
    int64_t sizes[4] = {b, h, s, d};
    int64_t strides[4] = {h * s * (d ? d : 1), s * (d ? d : 1), d ? d : 1,
                          d ? 1 : 0};
    std::copy(sizes, sizes + 4, t.sizes);
    std::copy(strides, strides + 4, t.strides);
    return t;
  }
};

/// Microseconds per call of `call` (after one untimed call that compiles
/// and loads), the stream drained at the end.
double timePerCall(const std::function<fa::Result()> &call) {
  if (fa::Result r = call(); !r) {
    std::fprintf(stderr, "fa-host-overhead: %s\n", r.message.c_str());
    std::exit(1);
  }
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    (void)call();
  fa::CudaDriver::get().cuCtxSynchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
             .count() /
         calls * 1e6;
}

} // namespace

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "fa-host-overhead: host time per call\n");
  if (calls < 1) {
    std::fprintf(stderr, "fa-host-overhead: --calls must be >= 1, got %d\n",
                 int(calls));
    return 1;
  }
  fa::RuntimeOptions options;
  options.diskCache = false;
  std::unique_ptr<fa::Runtime> runtime;
  if (fa::Result r = fa::Runtime::create(options, runtime); !r) {
    std::fprintf(stderr, "fa-host-overhead: %s\n", r.message.c_str());
    return 1;
  }
  if (!runtime->hasDriver()) {
    std::fprintf(stderr, "fa-host-overhead: %s\n",
                 runtime->driverError().c_str());
    return 1;
  }
  std::printf("device %s, %d calls per case\n", runtime->deviceArch().c_str(),
              int(calls));
  Buffers buffers;
  fa::KernelSpec spec;
  spec.headDim = 128;
  spec.dtype = fa::ElementType::bf16;
  spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;

  // Prefill: B 2, 16/4 heads, 1k causal.
  fa::AttentionArgs prefill;
  prefill.q = buffers.tensor(2, 16, 1024, 128, 2);
  prefill.k = buffers.tensor(2, 4, 1024, 128, 2);
  prefill.v = buffers.tensor(2, 4, 1024, 128, 2);
  prefill.o = buffers.tensor(2, 16, 1024, 128, 2);
  prefill.lse = buffers.tensor(2, 16, 1024, 0, 4);
  fa::KernelSpec causal = spec;
  causal.causal = true;
  std::printf("forward, B 2, 16/4 heads, S 1k, causal: %.2f us\n",
              timePerCall([&] { return runtime->forward(causal, prefill); }));

  // Decode: one token, 32/8 heads, 1k keys (split-KV: parts and a combine).
  fa::AttentionArgs decode;
  decode.q = buffers.tensor(1, 32, 1, 128, 2);
  decode.k = buffers.tensor(1, 8, 1024, 128, 2);
  decode.v = buffers.tensor(1, 8, 1024, 128, 2);
  decode.o = buffers.tensor(1, 32, 1, 128, 2);
  decode.lse = buffers.tensor(1, 32, 1, 0, 4);
  std::printf("forward, decode B 1, 32/8 heads, 1k keys: %.2f us\n",
              timePerCall([&] { return runtime->forward(spec, decode); }));

  // The backward of the prefill.
  fa::AttentionBackwardArgs backward;
  backward.q = prefill.q, backward.k = prefill.k, backward.v = prefill.v;
  backward.o = prefill.o, backward.lse = prefill.lse;
  backward.gradOutput = buffers.tensor(2, 16, 1024, 128, 2);
  backward.gradQuery = buffers.tensor(2, 16, 1024, 128, 2);
  backward.gradKey = buffers.tensor(2, 4, 1024, 128, 2);
  backward.gradValue = buffers.tensor(2, 4, 1024, 128, 2);
  fa::KernelSpec causalBackward = causal;
  causalBackward.backward = true;
  std::printf(
      "backward, B 2, 16/4 heads, S 1k, causal: %.2f us\n",
      timePerCall([&] { return runtime->backward(causalBackward, backward); }));
  return 0;
}
