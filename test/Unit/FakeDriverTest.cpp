//===- FakeDriverTest.cpp - The runtime's launch path without a GPU -------===//
//
// Runs against test/FakeCuda's libcuda.so.1 (ctest puts it first on the
// library path): a fake H200 that records the launches and fails a call on
// request. What a machine without a GPU otherwise never runs: the device
// query, module loads, the launch plans' grids, blocks and shared memory,
// the backward's launch order, workspaces allocated and freed, and the
// driver's failures reported and cleaned up.
//
//===----------------------------------------------------------------------===//
#include "runtime/Runtime.h"
#include "runtime/fa_runtime.h"
#include "test/Common/FakeTensors.h"

#include "llvm/Support/FileSystem.h"
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

namespace {

/// The fake driver's record, or nulls where the process loaded another
/// libcuda.so.1 (a real driver: the tests skip).
struct FakeCuda {
  int64_t (*launchCount)() = nullptr;
  const char *(*launch)(int64_t, unsigned *, unsigned *, unsigned *) = nullptr;
  void (*allocations)(int64_t *, int64_t *, int64_t *) = nullptr;
  void (*reset)() = nullptr;
  void (*fail)(const char *, int64_t) = nullptr;
  int (*tensorMapSwizzle)(int64_t) = nullptr;
  int (*launchDependent)(int64_t) = nullptr;

  static const FakeCuda &get() {
    static const FakeCuda fake = [] {
      FakeCuda f;
      void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
      if (!library)
        return f;
      f.launchCount = reinterpret_cast<decltype(f.launchCount)>(
          dlsym(library, "fake_cuda_launch_count"));
      f.launch = reinterpret_cast<decltype(f.launch)>(
          dlsym(library, "fake_cuda_launch"));
      f.allocations = reinterpret_cast<decltype(f.allocations)>(
          dlsym(library, "fake_cuda_allocations"));
      f.reset = reinterpret_cast<decltype(f.reset)>(
          dlsym(library, "fake_cuda_reset"));
      f.fail =
          reinterpret_cast<decltype(f.fail)>(dlsym(library, "fake_cuda_fail"));
      f.tensorMapSwizzle = reinterpret_cast<decltype(f.tensorMapSwizzle)>(
          dlsym(library, "fake_cuda_tensor_map_swizzle"));
      f.launchDependent = reinterpret_cast<decltype(f.launchDependent)>(
          dlsym(library, "fake_cuda_launch_dependent"));
      return f;
    }();
    return fake;
  }
  bool present() const {
    return launchCount && launch && allocations && reset && fail &&
           launchDependent && tensorMapSwizzle;
  }
};

struct Launch {
  std::string name;
  unsigned grid[3], block[3], sharedBytes;
};

Launch launchAt(int64_t i) {
  Launch l;
  const char *name = FakeCuda::get().launch(i, l.grid, l.block, &l.sharedBytes);
  l.name = name ? name : "";
  return l;
}

using fa::test::fakeTensor;

fa::TensorArg rowValues(int &next, int64_t b, int64_t h, int64_t s) {
  fa::TensorArg t = fakeTensor(next, b, h, s, 1);
  t.sizes[3] = 0;
  t.strides[0] = h * s, t.strides[1] = s, t.strides[2] = 1, t.strides[3] = 0;
  return t;
}

/// A backward's tensors: Q, O, dO, dQ [b, hq, sq, d]; K, V, dK, dV
/// [b, hkv, sk, d]; LSE [b, hq, sq].
fa::AttentionBackwardArgs backwardArgs(int &next, int64_t b, int64_t hq,
                                       int64_t hkv, int64_t sq, int64_t sk,
                                       int64_t d) {
  fa::AttentionBackwardArgs args;
  args.q = fakeTensor(next, b, hq, sq, d);
  args.k = fakeTensor(next, b, hkv, sk, d);
  args.v = fakeTensor(next, b, hkv, sk, d);
  args.o = fakeTensor(next, b, hq, sq, d);
  args.lse = rowValues(next, b, hq, sq);
  args.gradOutput = fakeTensor(next, b, hq, sq, d);
  args.gradQuery = fakeTensor(next, b, hq, sq, d);
  args.gradKey = fakeTensor(next, b, hkv, sk, d);
  args.gradValue = fakeTensor(next, b, hkv, sk, d);
  return args;
}

/// The backward's three launches of `info`'s kernel, in order: D and dQ a
/// program per query tile (of `qRows`) of each of the `hq` query heads, dK/dV
/// per K/V tile (of `kvRows`) of each of the `hkv` K/V heads (the GQA
/// group's query heads inside), for each of the `entries` batch entries or
/// sequences; dK/dV with the kernel's threads and shared memory.
void expectBackwardLaunches(const fa::KernelInfo &info, int64_t qRows,
                            int64_t kvRows, unsigned hq, unsigned hkv,
                            unsigned entries) {
  ASSERT_EQ(FakeCuda::get().launchCount(), 3) << info.name;
  Launch delta = launchAt(0), dkdv = launchAt(1), dq = launchAt(2);
  EXPECT_EQ(delta.name, info.name + "_delta");
  EXPECT_EQ(dkdv.name, info.name + "_dkdv");
  EXPECT_EQ(dq.name, info.name + "_dq");
  int64_t queryTiles = (qRows + info.spec.blockM - 1) / info.spec.blockM;
  int64_t keyTiles = (kvRows + info.spec.blockN - 1) / info.spec.blockN;
  for (const Launch *l : {&delta, &dq}) {
    EXPECT_EQ(l->grid[0], unsigned(queryTiles)) << l->name;
    EXPECT_EQ(l->grid[1], hq) << l->name;
    EXPECT_EQ(l->grid[2], entries) << l->name;
  }
  EXPECT_EQ(dkdv.grid[0], unsigned(keyTiles)) << dkdv.name;
  EXPECT_EQ(dkdv.grid[1], hkv) << dkdv.name;
  EXPECT_EQ(dkdv.grid[2], entries) << dkdv.name;
  EXPECT_EQ(int64_t(dkdv.block[0]), info.numThreads) << dkdv.name;
  EXPECT_EQ(int64_t(dkdv.sharedBytes), info.sharedMemoryBytes) << dkdv.name;
}

/// An i32 vector [n] (offsets, lengths), contiguous.
fa::TensorArg int32Vector(int &next, int64_t n) {
  fa::TensorArg t = fakeTensor(next, n, 1, 1, 1);
  t.sizes[1] = t.sizes[2] = t.sizes[3] = 0;
  t.strides[0] = 1;
  t.strides[1] = t.strides[2] = t.strides[3] = 0;
  return t;
}

/// An i32 table [rows, columns] (a paged cache's), row-major.
fa::TensorArg int32Table(int &next, int64_t rows, int64_t columns) {
  fa::TensorArg t = fakeTensor(next, rows, columns, 1, 1);
  t.sizes[2] = t.sizes[3] = 0;
  t.strides[0] = columns, t.strides[1] = 1;
  t.strides[2] = t.strides[3] = 0;
  return t;
}

/// A forward's Q, K, V, O and LSE: B x Hq query rows Sq, B x Hkv keys Sk
/// (kvBatch entries of them: a paged cache's pool), head dim D.
fa::AttentionArgs forwardArgs(int &next, int64_t b, int64_t hq, int64_t hkv,
                              int64_t sq, int64_t sk, int64_t d,
                              int64_t kvBatch = 0) {
  fa::AttentionArgs args;
  args.q = fakeTensor(next, b, hq, sq, d);
  args.k = fakeTensor(next, kvBatch ? kvBatch : b, hkv, sk, d);
  args.v = fakeTensor(next, kvBatch ? kvBatch : b, hkv, sk, d);
  args.o = fakeTensor(next, b, hq, sq, d);
  args.lse = rowValues(next, b, hq, sq);
  return args;
}

/// A request with every tile choice left to the defaults.
fa::KernelSpec defaultsFor(int64_t headDim, fa::ElementType dtype,
                           bool causal, bool backward = false) {
  fa::KernelSpec spec;
  spec.headDim = headDim;
  spec.dtype = dtype;
  spec.causal = causal;
  spec.backward = backward;
  spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
  return spec;
}

/// The launch covers `rows` query rows in the kernel's tiles for each of
/// `rowSets` (heads x batch entries or sequences): a program per tile, or
/// (persistent) at most one per SM of the fake's 132.
void expectCoversQueryTiles(const Launch &l, const fa::KernelInfo &info,
                            int64_t rows, int64_t rowSets) {
  int64_t programs = int64_t(l.grid[0]) * l.grid[1] * l.grid[2];
  int64_t tiles = (rows + info.spec.blockM - 1) / info.spec.blockM * rowSets;
  if (info.launches[0].persistent)
    EXPECT_TRUE(programs >= 1 && programs <= std::min<int64_t>(132, tiles))
        << l.name << ": " << programs;
  else
    EXPECT_EQ(programs, tiles) << l.name;
}

class FakeDriver : public testing::Test {
protected:
  void SetUp() override {
    if (!FakeCuda::get().present())
      GTEST_SKIP() << "libcuda.so.1 is not test/FakeCuda's (run through "
                      "ctest, which puts it on LD_LIBRARY_PATH)";
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("fa-fake-driver", dir));
    cacheDir = std::string(dir);
    fa::RuntimeOptions options;
    options.cacheDir = cacheDir;
    ASSERT_TRUE(bool(fa::Runtime::create(options, runtime)));
    ASSERT_TRUE(runtime->hasDriver()) << runtime->driverError();
    FakeCuda::get().reset();
  }
  void TearDown() override {
    if (!cacheDir.empty())
      llvm::sys::fs::remove_directories(cacheDir);
  }
  /// Runs the forward of `spec` on `args` and checks its one launch
  /// against the kernel prepare() gives the request at `length`: its name,
  /// threads and shared memory.
  void launchOnce(const fa::KernelSpec &spec, const fa::AttentionArgs &args,
                  int64_t length, Launch &launch, fa::KernelInfo &info) {
    fa::Result r = runtime->forward(spec, args);
    ASSERT_TRUE(bool(r)) << r.message;
    ASSERT_TRUE(bool(runtime->prepare(spec, &info, length)));
    ASSERT_EQ(FakeCuda::get().launchCount(), 1) << info.name;
    launch = launchAt(0);
    EXPECT_EQ(launch.name, info.name);
    EXPECT_EQ(int64_t(launch.block[0]) * launch.block[1] * launch.block[2],
              info.numThreads);
    EXPECT_EQ(int64_t(launch.sharedBytes), info.sharedMemoryBytes);
  }

  std::string cacheDir;
  std::unique_ptr<fa::Runtime> runtime;
};

/// The fake describes an sm_90 part with 132 SMs: the runtime targets
/// sm_90a and launches the default forward's one plan with the compiled
/// kernel's threads and shared memory, over a grid that covers the query
/// tiles (or, persistent, at most one program per SM).
TEST_F(FakeDriver, ForwardLaunchesItsPlan) {
  EXPECT_EQ(runtime->deviceArch(), "sm_90a");
  for (fa::ElementType dtype : {fa::ElementType::bf16, fa::ElementType::f32}) {
    FakeCuda::get().reset();
    int next = 0;
    fa::AttentionArgs args = forwardArgs(next, 2, 8, 2, 1000, 1000, 128);
    fa::KernelSpec spec = defaultsFor(128, dtype, /*causal=*/true);
    Launch l;
    fa::KernelInfo info;
    launchOnce(spec, args, 1024, l, info);
    if (HasFatalFailure())
      return;
    expectCoversQueryTiles(l, info, 1000, 8 * 2);
    int64_t allocated, freed, loaded;
    FakeCuda::get().allocations(&allocated, &freed, &loaded);
    EXPECT_EQ(loaded, 1);
    EXPECT_EQ(allocated, freed);
  }
}

/// The backward (wgmma, its deterministic mode, simt): its plans in order
/// (D per query tile, dK/dV per K/V tile, dQ) over their grids, and every
/// workspace it allocates freed again.
TEST_F(FakeDriver, BackwardLaunchesDeltaThenGradients) {
  for (auto [dtype, deterministic] : {std::pair{fa::ElementType::bf16, false},
                                      std::pair{fa::ElementType::f16, true},
                                      std::pair{fa::ElementType::f32, false}}) {
    FakeCuda::get().reset();
    int next = 0;
    fa::AttentionBackwardArgs args = backwardArgs(next, 1, 4, 2, 700, 500, 128);
    fa::KernelSpec spec =
        defaultsFor(128, dtype, /*causal=*/false, /*backward=*/true);
    spec.deterministic = deterministic;
    fa::Result r = runtime->backward(spec, args);
    ASSERT_TRUE(bool(r)) << r.message;
    fa::KernelInfo info;
    ASSERT_TRUE(bool(runtime->prepare(spec, &info, 1024)));
    expectBackwardLaunches(info, 700, 500, 4, 2, 1);
    if (HasFatalFailure())
      return;
    int64_t allocated, freed, loaded;
    FakeCuda::get().allocations(&allocated, &freed, &loaded);
    EXPECT_GE(allocated, 1); // D and the f32 dQ accumulator
    EXPECT_EQ(allocated, freed);
  }
}

/// The deterministic backward with sinks (wgmma, simt): the three plans
/// take the sinks, their gradient and the query tiles' shares of it last;
/// the shares' workspace is allocated with the others and freed again.
TEST_F(FakeDriver, DeterministicSinksBackwardLaunches) {
  for (fa::ElementType dtype : {fa::ElementType::bf16, fa::ElementType::f32}) {
    FakeCuda::get().reset();
    int next = 0;
    fa::AttentionBackwardArgs args = backwardArgs(next, 2, 4, 2, 700, 500, 128);
    // f32 [Hq] each: contiguous vectors like the i32 ones.
    args.sinks = int32Vector(next, 4);
    args.gradSinks = int32Vector(next, 4);
    fa::KernelSpec spec =
        defaultsFor(128, dtype, /*causal=*/false, /*backward=*/true);
    spec.deterministic = true;
    spec.sinks = true;
    fa::Result r = runtime->backward(spec, args);
    ASSERT_TRUE(bool(r)) << r.message;
    fa::KernelInfo info;
    ASSERT_TRUE(bool(runtime->prepare(spec, &info, 1024)));
    EXPECT_NE(info.name.find("_det_sinks"), std::string::npos) << info.name;
    expectBackwardLaunches(info, 700, 500, 4, 2, 2);
    if (HasFatalFailure())
      return;
    for (const fa::LaunchPlan &plan : info.launches)
      EXPECT_EQ(plan.params.back(), fa::LaunchPlan::Operand::sinkShares)
          << plan.function;
    int64_t allocated, freed, loaded;
    FakeCuda::get().allocations(&allocated, &freed, &loaded);
    EXPECT_GE(allocated, 1);
    EXPECT_EQ(allocated, freed);
  }
}

/// FP8 (e4m3 Q, K, V with their descales, a bf16 O): the wgmma kernel's
/// plan, its 8-bit tensor maps and descale operands accepted by the
/// launch path.
/// At head dims 64 and 192 the 8-bit rows are 64 bytes: Q, K and V's maps
/// take the 64-byte swizzle (a box of 64 bytes), at 128 the 128-byte one.
TEST_F(FakeDriver, Float8ForwardLaunchesItsPlan) {
  for (int64_t d : {128, 64, 192}) {
    SCOPED_TRACE(d);
    FakeCuda::get().reset();
    int next = 0;
    fa::AttentionArgs args = forwardArgs(next, 2, 8, 2, 700, 900, d);
    // Descales f32 [B, Hkv].
    for (fa::TensorArg *descale :
         {&args.qDescale, &args.kDescale, &args.vDescale}) {
      *descale = fakeTensor(next, 2, 2, 1, 1);
      descale->sizes[2] = descale->sizes[3] = 0;
      descale->strides[0] = 2, descale->strides[1] = 1;
      descale->strides[2] = descale->strides[3] = 0;
    }
    fa::KernelSpec spec =
        defaultsFor(d, fa::ElementType::e4m3, /*causal=*/true);
    spec.outDtype = fa::ElementType::bf16;
    Launch l;
    fa::KernelInfo info;
    launchOnce(spec, args, 1024, l, info);
    if (HasFatalFailure())
      return;
    EXPECT_NE(l.name.find("_e4m3_"), std::string::npos) << l.name;
    EXPECT_EQ(info.ptxas.spillStoreBytes, 0) << l.name;
    int span = d % 128 == 0 ? 128 : 64;
    ASSERT_NE(FakeCuda::get().tensorMapSwizzle(0), -1) << "no tensor map";
    for (int64_t i = 0; FakeCuda::get().tensorMapSwizzle(i) != -1; ++i)
      EXPECT_EQ(FakeCuda::get().tensorMapSwizzle(i), span) << "map " << i;
  }
}

/// A packed varlen batch (3 sequences of at most 300 rows and 400 keys):
/// the grid covers the longest sequence's query tiles for every sequence
/// and query head, whatever the offsets hold (the runtime never reads
/// them).
TEST_F(FakeDriver, VarlenForwardCoversTheLongestSequence) {
  int next = 0;
  fa::AttentionArgs args = forwardArgs(next, 1, 8, 2, 600, 800, 64);
  args.cuSeqlensQ = int32Vector(next, 4);
  args.cuSeqlensK = int32Vector(next, 4);
  args.maxSeqlenQ = 300;
  args.maxSeqlenK = 400;
  fa::KernelSpec spec = defaultsFor(64, fa::ElementType::f16, /*causal=*/true);
  spec.varlen = true;
  Launch l;
  fa::KernelInfo info;
  launchOnce(spec, args, 512, l, info);
  if (HasFatalFailure())
    return;
  EXPECT_NE(l.name.find("_varlen"), std::string::npos) << l.name;
  expectCoversQueryTiles(l, info, 300, 3 * 8);
}

/// The varlen backward (3 sequences of at most 300 query rows and 400 keys,
/// GQA 8/2) takes the wgmma kernels by default on sm_90a: D per query tile
/// of the longest sequence, dK/dV per K/V tile of the longest sequence's
/// keys, for every head and sequence (the runtime never reads the offsets);
/// the workspaces freed again.
TEST_F(FakeDriver, VarlenBackwardRunsOnWgmma) {
  for (bool deterministic : {false, true}) {
    FakeCuda::get().reset();
    int next = 0;
    fa::AttentionBackwardArgs args = backwardArgs(next, 1, 8, 2, 600, 800, 128);
    args.cuSeqlensQ = int32Vector(next, 4);
    args.cuSeqlensK = int32Vector(next, 4);
    args.maxSeqlenQ = 300;
    args.maxSeqlenK = 400;
    fa::KernelSpec spec = defaultsFor(128, fa::ElementType::bf16,
                                      /*causal=*/true, /*backward=*/true);
    spec.varlen = true;
    spec.deterministic = deterministic;
    fa::Result r = runtime->backward(spec, args);
    ASSERT_TRUE(bool(r)) << r.message;
    fa::KernelInfo info;
    ASSERT_TRUE(bool(runtime->prepare(spec, &info, 1024)));
    EXPECT_EQ(info.spec.strategy, fa::Strategy::wgmma) << info.name;
    EXPECT_NE(info.name.find("_varlen_"), std::string::npos) << info.name;
    // The longest sequence's tiles for each of the 3 sequences.
    expectBackwardLaunches(info, 300, 400, 8, 2, 3);
    if (HasFatalFailure())
      return;
    int64_t allocated, freed, loaded;
    FakeCuda::get().allocations(&allocated, &freed, &loaded);
    EXPECT_EQ(allocated, freed);
  }
}

/// A paged KV cache (pages of 256 keys, 4 pages an entry, each entry's
/// filled length in kv_lens): decode reads the pages through the table,
/// split over the keys, then combined.
TEST_F(FakeDriver, PagedCacheDecodeLaunches) {
  int next = 0;
  // K and V: a pool of 16 pages of 256 keys.
  fa::AttentionArgs args =
      forwardArgs(next, 4, 32, 8, 1, 256, 128, /*kvBatch=*/16);
  args.blockTable = int32Table(next, 4, 4);
  args.kvLens = int32Vector(next, 4);
  fa::KernelSpec spec =
      defaultsFor(128, fa::ElementType::bf16, /*causal=*/false);
  spec.pagedKv = true;
  spec.kvLens = true;
  fa::Result r = runtime->forward(spec, args);
  ASSERT_TRUE(bool(r)) << r.message;
  ASSERT_EQ(FakeCuda::get().launchCount(), 2);
  Launch split = launchAt(0), combine = launchAt(1);
  for (const Launch *l : {&split, &combine})
    EXPECT_NE(l->name.find("_kvlens_paged_splitkv"), std::string::npos)
        << l->name;
  EXPECT_EQ(split.name.substr(split.name.size() - 6), "_split");
  EXPECT_EQ(combine.name.substr(combine.name.size() - 8), "_combine");
  EXPECT_EQ(split.grid[1], 8u) << "a program per K/V head";
  EXPECT_EQ(split.grid[2] % 4, 0u) << "parts x batch entries";
  EXPECT_GE(split.grid[2], 8u) << "at least two parts an entry";
  EXPECT_EQ(combine.grid[1], 8u);
  EXPECT_EQ(combine.grid[2], 4u) << "a program per batch entry";
  int64_t allocated, freed, loaded;
  FakeCuda::get().allocations(&allocated, &freed, &loaded);
  EXPECT_EQ(allocated, freed);
}

/// A paged varlen batch (3 sequences; a pool of 20 pages of 64 keys, 5
/// pages a sequence): prefill covers the longest sequence's query tiles
/// with one kernel; decode (a query row a sequence over up to 4k keys)
/// splits the keys, then combines a program per sequence.
TEST_F(FakeDriver, PagedVarlenPrefillAndDecode) {
  for (bool decode : {false, true}) {
    SCOPED_TRACE(decode ? "decode" : "prefill");
    FakeCuda::get().reset();
    int next = 0;
    int64_t page = decode ? 256 : 64, pages = decode ? 16 : 5;
    fa::AttentionArgs args =
        forwardArgs(next, 1, 8, 2, decode ? 3 : 600, page, 64, /*kvBatch=*/20);
    args.cuSeqlensQ = int32Vector(next, 4);
    args.cuSeqlensK = int32Vector(next, 4);
    args.blockTable = int32Table(next, 3, pages);
    args.maxSeqlenQ = decode ? 1 : 300;
    args.maxSeqlenK = pages * page;
    fa::KernelSpec spec =
        defaultsFor(64, fa::ElementType::f16, /*causal=*/!decode);
    spec.varlen = true;
    spec.pagedKv = true;
    fa::Result r = runtime->forward(spec, args);
    ASSERT_TRUE(bool(r)) << r.message;
    ASSERT_EQ(FakeCuda::get().launchCount(), decode ? 2 : 1);
    Launch first = launchAt(0);
    EXPECT_NE(first.name.find("_varlen_paged"), std::string::npos)
        << first.name;
    EXPECT_EQ(first.grid[1], 8u) << "a program per query head";
    if (!decode) {
      fa::KernelInfo info;
      ASSERT_TRUE(bool(runtime->prepare(spec, &info, 300)));
      EXPECT_EQ(first.name, info.name);
      expectCoversQueryTiles(first, info, 300, 3 * 8);
      continue;
    }
    Launch combine = launchAt(1);
    EXPECT_EQ(first.name.substr(first.name.size() - 6), "_split");
    EXPECT_EQ(combine.name.substr(combine.name.size() - 8), "_combine");
    EXPECT_EQ(first.grid[2] % 3, 0u) << "parts x sequences";
    EXPECT_GE(first.grid[2], 6u) << "at least two parts a sequence";
    EXPECT_EQ(combine.grid[2], 3u) << "a program per sequence";
    int64_t allocated, freed, loaded;
    FakeCuda::get().allocations(&allocated, &freed, &loaded);
    EXPECT_EQ(allocated, freed);
  }
}

/// The C ABI's whole path: a forward with attention sinks through
/// fa_attention_forward_ex (the versioned config and extras read by their
/// struct_size), launched once.
TEST_F(FakeDriver, CApiForwardWithSinks) {
  fa_runtime *c = nullptr;
  ASSERT_EQ(fa_runtime_create(cacheDir.c_str(), 0, &c), FA_OK)
      << fa_last_error();
  ASSERT_TRUE(fa_runtime_has_driver(c));
  int next = 0;
  auto describe = [](const fa::TensorArg &t) {
    fa_tensor d{};
    d.data = t.data;
    std::copy(t.sizes, t.sizes + 4, d.sizes);
    std::copy(t.strides, t.strides + 4, d.strides);
    return d;
  };
  fa_tensor q = describe(fakeTensor(next, 1, 8, 300, 64));
  fa_tensor k = describe(fakeTensor(next, 1, 8, 300, 64));
  fa_tensor v = describe(fakeTensor(next, 1, 8, 300, 64));
  fa_tensor o = describe(fakeTensor(next, 1, 8, 300, 64));
  fa_tensor lse = describe(rowValues(next, 1, 8, 300));
  fa_tensor sinks = describe(fakeTensor(next, 8, 1, 1, 1));
  std::fill(sinks.sizes + 1, sinks.sizes + 4, 0);
  sinks.strides[0] = 1;
  std::fill(sinks.strides + 1, sinks.strides + 4, 0);
  fa_kernel_config config{};
  config.struct_size = sizeof(config);
  fa_attention_extras extras{};
  extras.struct_size = sizeof(extras);
  extras.sinks = &sinks;
  ASSERT_EQ(fa_attention_forward_ex(c, &q, &k, &v, &o, &lse, &extras, FA_F16, 1,
                                    0.0, &config, nullptr),
            FA_OK)
      << fa_last_error();
  ASSERT_EQ(FakeCuda::get().launchCount(), 1);
  EXPECT_NE(launchAt(0).name.find("_sinks"), std::string::npos)
      << launchAt(0).name;
  fa_runtime_destroy(c);
}

/// Decode (one query token a head, many keys): the keys split over parts
/// (one program per part and K/V head, the GQA group's query heads packed
/// into its rows), then one combine over the parts' partials, whose
/// workspace is freed again.
TEST_F(FakeDriver, DecodeSplitsTheKeysThenCombines) {
  int next = 0;
  fa::AttentionArgs args = forwardArgs(next, 1, 32, 8, 1, 4096, 128);
  fa::KernelSpec spec =
      defaultsFor(128, fa::ElementType::bf16, /*causal=*/false);
  fa::Result r = runtime->forward(spec, args);
  ASSERT_TRUE(bool(r)) << r.message;
  ASSERT_EQ(FakeCuda::get().launchCount(), 2);
  Launch split = launchAt(0), combine = launchAt(1);
  EXPECT_NE(split.name.find("_splitkv"), std::string::npos) << split.name;
  EXPECT_EQ(split.name.substr(split.name.size() - 6), "_split");
  EXPECT_EQ(combine.name.substr(combine.name.size() - 8), "_combine");
  EXPECT_EQ(split.grid[1], 8u) << "a program per K/V head";
  EXPECT_GE(split.grid[2], 2u) << "parts";
  EXPECT_EQ(combine.grid[1], 8u);
  EXPECT_EQ(combine.grid[2], 1u);
  // On sm_90 the merge is launched while the parts run (it waits for them
  // itself: griddepcontrol.wait); the parts' kernel is launched plainly.
  EXPECT_EQ(FakeCuda::get().launchDependent(0), 0);
  EXPECT_EQ(FakeCuda::get().launchDependent(1), 1);
  int64_t allocated, freed, loaded;
  FakeCuda::get().allocations(&allocated, &freed, &loaded);
  EXPECT_EQ(allocated, 1); // the parts' O and LSE
  EXPECT_EQ(freed, 1);
  EXPECT_NE(split.name.find("_32x32_"), std::string::npos) << split.name;
  // Few programs over many keys: 128-key tiles, one block an SM, so the
  // parts are SMs / programs (132 / 8); eight entries keep 32-key tiles
  // (grid z: the parts of each entry).
  for (auto [batch, tiles, parts] :
       {std::tuple(1, "_32x128_", 16u), std::tuple(8, "_32x32_", 5u)}) {
    FakeCuda::get().reset();
    fa::AttentionArgs longer = forwardArgs(next, batch, 32, 8, 1, 8192, 128);
    r = runtime->forward(spec, longer);
    ASSERT_TRUE(bool(r)) << r.message;
    ASSERT_EQ(FakeCuda::get().launchCount(), 2);
    EXPECT_NE(launchAt(0).name.find(tiles), std::string::npos)
        << launchAt(0).name;
    EXPECT_EQ(launchAt(0).grid[2], batch * parts) << "batch " << batch;
  }
}

/// Decode with sinks (gpt-oss's). Packed (packQueryGroups with sinks), the
/// GQA group's query heads share a program, each row joining its own query
/// head's sink (..._rowsinks) in the split's combine; a sinks vector of the
/// wrong size is named against the query heads. forward() packs so only
/// with kPackDecodeWithSinks; without, a program per query head.
TEST_F(FakeDriver, DecodeWithSinksPacksTheGroupRows) {
  int next = 0;
  fa::AttentionArgs args = forwardArgs(next, 1, 32, 8, 1, 4096, 128);
  // f32 [Hq]: a contiguous vector like the i32 ones.
  args.sinks = int32Vector(next, 32);
  fa::KernelSpec spec =
      defaultsFor(128, fa::ElementType::bf16, /*causal=*/false);
  spec.sinks = true;
  fa::Result r = runtime->forward(spec, args);
  ASSERT_TRUE(bool(r)) << r.message;
  ASSERT_EQ(FakeCuda::get().launchCount(), 2);
  EXPECT_EQ(launchAt(0).grid[1], fa::kPackDecodeWithSinks ? 8u : 32u);
  EXPECT_NE(
      launchAt(0).name.find(fa::kPackDecodeWithSinks ? "_rowsinks" : "_sinks_"),
      std::string::npos)
      << launchAt(0).name;
  FakeCuda::get().reset();
  fa::KernelSpec packedSpec = spec;
  fa::AttentionArgs packed = args;
  ASSERT_TRUE(fa::packQueryGroups(packedSpec, packed, /*withSinks=*/true));
  r = runtime->forward(packedSpec, packed);
  ASSERT_TRUE(bool(r)) << r.message;
  ASSERT_EQ(FakeCuda::get().launchCount(), 2);
  Launch split = launchAt(0), combine = launchAt(1);
  EXPECT_NE(split.name.find("_rowsinks"), std::string::npos) << split.name;
  EXPECT_EQ(split.grid[1], 8u) << "a program per K/V head";
  EXPECT_EQ(combine.grid[1], 8u);
  packed.sinks = int32Vector(next, 8);
  r = runtime->forward(packedSpec, packed);
  ASSERT_FALSE(bool(r));
  EXPECT_NE(r.message.find("size 8 does not match the 32"), std::string::npos)
      << r.message;
}

/// A driver call that fails mid-request is an error naming the call, and
/// what the request allocated is freed again: a launch of the backward
/// (after D's, with the workspace allocated), the workspace's own
/// allocation, a module load. The runtime then serves the next request.
TEST_F(FakeDriver, DriverFailuresAreReportedAndCleanedUp) {
  int next = 0;
  fa::AttentionBackwardArgs args;
  fa::AttentionArgs forward = forwardArgs(next, 1, 4, 2, 300, 300, 64);
  args.q = forward.q, args.k = forward.k, args.v = forward.v;
  args.o = forward.o, args.lse = forward.lse;
  args.gradOutput = fakeTensor(next, 1, 4, 300, 64);
  args.gradQuery = fakeTensor(next, 1, 4, 300, 64);
  args.gradKey = fakeTensor(next, 1, 2, 300, 64);
  args.gradValue = fakeTensor(next, 1, 2, 300, 64);
  fa::KernelSpec spec = defaultsFor(64, fa::ElementType::bf16, true);
  spec.backward = true;
  struct Injected {
    const char *function;
    int64_t after;
    const char *named;
  };
  for (Injected injected : {Injected{"cuLaunchKernel", 1, "cuLaunchKernel"},
                            Injected{"cuMemAlloc", 0, "cuMemAllocAsync"},
                            Injected{"cuModuleLoadData", 0, "cuModuleLoad"}}) {
    SCOPED_TRACE(injected.function);
    // A fresh runtime: the module load happens on its first request.
    fa::RuntimeOptions options;
    options.cacheDir = cacheDir;
    std::unique_ptr<fa::Runtime> fresh;
    ASSERT_TRUE(bool(fa::Runtime::create(options, fresh)));
    FakeCuda::get().reset();
    FakeCuda::get().fail(injected.function, injected.after);
    fa::Result r = fresh->backward(spec, args);
    ASSERT_FALSE(bool(r));
    EXPECT_EQ(r.status, fa::Status::cudaError) << r.message;
    EXPECT_NE(r.message.find(injected.named), std::string::npos) << r.message;
    int64_t allocated, freed, loaded;
    FakeCuda::get().allocations(&allocated, &freed, &loaded);
    EXPECT_EQ(allocated, freed);
    // The failure was the call's, not the runtime's state.
    FakeCuda::get().reset();
    r = fresh->backward(spec, args);
    EXPECT_TRUE(bool(r)) << r.message;
    EXPECT_EQ(FakeCuda::get().launchCount(), 3);
  }
}

/// The same for a decode: its combine's launch fails after the parts ran
/// (their partials' workspace allocated), or a tensor map of the wgmma
/// forward cannot be encoded.
TEST_F(FakeDriver, ForwardFailuresAreReportedAndCleanedUp) {
  int next = 0;
  fa::AttentionArgs decode = forwardArgs(next, 1, 32, 8, 1, 4096, 128);
  fa::AttentionArgs prefill = forwardArgs(next, 2, 8, 2, 1000, 1000, 128);
  fa::KernelSpec spec = defaultsFor(128, fa::ElementType::bf16, false);
  struct Injected {
    const char *function;
    int64_t after;
    fa::AttentionArgs *args;
  };
  for (Injected injected : {Injected{"cuLaunchKernel", 1, &decode},
                            Injected{"cuTensorMapEncodeTiled", 0, &prefill}}) {
    SCOPED_TRACE(injected.function);
    fa::Result r = runtime->forward(spec, *injected.args);
    ASSERT_TRUE(bool(r)) << r.message; // compiled and loaded first
    FakeCuda::get().reset();
    FakeCuda::get().fail(injected.function, injected.after);
    r = runtime->forward(spec, *injected.args);
    ASSERT_FALSE(bool(r));
    EXPECT_EQ(r.status, fa::Status::cudaError) << r.message;
    EXPECT_NE(r.message.find(injected.function), std::string::npos)
        << r.message;
    int64_t allocated, freed, loaded;
    FakeCuda::get().allocations(&allocated, &freed, &loaded);
    EXPECT_EQ(allocated, freed);
  }
}

} // namespace
