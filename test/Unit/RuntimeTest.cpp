//===- RuntimeTest.cpp - The runtime without a GPU ------------------*- C++ -*-===//
//
// Spec keys, the memory and disk caches (compile-only path), argument checks
// and the behaviour without a CUDA driver. Runs on machines without a GPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/Runtime.h"
#include "compiler/KernelCompiler.h"
#include "lib/CudaToolkit.h"
#include "lib/LaunchPlan.h"
#include "lib/SplitKv.h"
#include "lib/Strategy/Registry.h"
#include "lib/Strategy/SpecRules.h"
#include "lib/Variants.h"
#include "runtime/ArgumentChecks.h"
#include "runtime/Autotune.h"
#include "runtime/CRequest.h"
#include "runtime/DiskCache.h"
#include "runtime/KernelMetadata.h"
#include "runtime/fa_runtime.h"
#include "test/Common/FakeTensors.h"

#include <cstring>
#include <tuple>

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cstddef>
#include <cmath>
#include <fstream>
#include <set>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace {

/// A fresh cache folder per test, removed afterwards.
class TempDir {
public:
  TempDir() {
    llvm::sys::fs::createUniqueDirectory("fa-runtime-test", path);
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string str() const { return std::string(path); }

private:
  llvm::SmallString<128> path;
};

fa::KernelSpec smallSpec() {
  fa::KernelSpec spec;
  spec.headDim = 32;
  spec.blockM = 8;
  spec.blockN = 32;
  spec.numWarps = 8;
  spec.arch = "sm_90a";
  return spec;
}

std::unique_ptr<fa::Runtime> makeRuntime(const std::string &dir,
                                         bool diskCache = true) {
  fa::RuntimeOptions options;
  options.cacheDir = dir;
  options.diskCache = diskCache;
  std::unique_ptr<fa::Runtime> runtime;
  fa::Result r = fa::Runtime::create(options, runtime);
  EXPECT_TRUE(bool(r)) << r.message;
  return runtime;
}

/// The C ABI's versioned structs as a C++ caller starts them: zero, with
/// struct_size = their size.
fa_kernel_config cConfig() {
  fa_kernel_config config{};
  config.struct_size = sizeof(config);
  return config;
}
fa_attention_extras cExtras() {
  fa_attention_extras extras{};
  extras.struct_size = sizeof(extras);
  return extras;
}
fa_kernel_info cInfo() {
  fa_kernel_info info{};
  info.struct_size = sizeof(info);
  return info;
}

//===----------------------------------------------------------------------===//
// Specs and keys
//===----------------------------------------------------------------------===//

TEST(KernelKey, CanonicalTextNamesEveryCodeChangingField) {
  fa::KernelSpec spec = smallSpec();
  EXPECT_EQ(canonicalText(spec),
            "fa-kernel-spec v2;op=attention_fwd;strategy=simt;head_dim=32;"
            "dtype=f32;mask=none;block_m=8;block_n=32;num_warps=8;stages=1;"
            "arch=sm_90a;scale=0x3fc6a09e667f3bcc");
  std::set<std::string> texts = {canonicalText(spec)};
  auto vary = [&](auto mutate) {
    fa::KernelSpec other = spec;
    mutate(other);
    EXPECT_TRUE(texts.insert(canonicalText(other)).second)
        << canonicalText(other);
  };
  vary([](fa::KernelSpec &s) { s.headDim = 64; });
  vary([](fa::KernelSpec &s) { s.dtype = fa::ElementType::f16; });
  vary([](fa::KernelSpec &s) { s.causal = true; });
  vary([](fa::KernelSpec &s) { s.blockM = 16; });
  vary([](fa::KernelSpec &s) { s.blockN = 64; });
  vary([](fa::KernelSpec &s) { s.numWarps = 4; });
  vary([](fa::KernelSpec &s) { s.arch = "sm_80"; });
  vary([](fa::KernelSpec &s) { s.scale = 0.5; });
  // f16 alone resolves to mma (above); f16 on the CUDA cores differs.
  vary([](fa::KernelSpec &s) {
    s.dtype = fa::ElementType::f16;
    s.strategy = fa::Strategy::simt;
  });
  vary([](fa::KernelSpec &s) {
    s.dtype = fa::ElementType::f16;
    s.strategy = fa::Strategy::mma;
    s.stages = 3;
  });
  vary([](fa::KernelSpec &s) { s.sinks = true; });
  // A variant text that ends like the sinks' field is still another spec.
  fa::KernelSpec sinksWindow = spec, tailedWindow = spec;
  sinksWindow.sinks = true;
  sinksWindow.maskMod = fa::variants::slidingWindow(8, 0);
  tailedWindow.maskMod = sinksWindow.maskMod + ";sinks";
  EXPECT_NE(canonicalText(sinksWindow), canonicalText(tailedWindow));
}

TEST(KernelKey, KeyDependsOnCompilerAndPtxasVersions) {
  fa::KernelSpec spec = smallSpec();
  std::string key = fa::cacheKey(spec, "1.0", "13.0.88");
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, fa::cacheKey(spec, "1.0", "13.0.88"));
  EXPECT_NE(key, fa::cacheKey(spec, "1.1", "13.0.88"));
  EXPECT_NE(key, fa::cacheKey(spec, "1.0", "12.8.0"));
  fa::KernelSpec other = spec;
  other.arch = "sm_80";
  EXPECT_NE(key, fa::cacheKey(other, "1.0", "13.0.88"));
}

TEST(KernelKey, DefaultsFillOnlyWhatIsUnset) {
  fa::KernelSpec spec;
  spec.headDim = 128;
  spec.blockM = spec.blockN = spec.numWarps = 0;
  fa::KernelSpec resolved = withDefaults(spec);
  EXPECT_EQ(validateSpec(resolved), "");
  EXPECT_GT(resolved.blockM, 0);
  spec.blockN = 64;
  EXPECT_EQ(withDefaults(spec).blockN, 64);
  // Every head dim gets defaults whose thread grid divides the tiles.
  for (int64_t d : {1, 3, 8, 24, 40, 72, 100, 128, 200, 256}) {
    fa::KernelSpec s;
    s.headDim = d;
    s.blockM = s.blockN = s.numWarps = 0;
    fa::KernelSpec r = withDefaults(s);
    int64_t cols = 32;
    while (r.blockN % cols || d % cols)
      cols /= 2;
    EXPECT_EQ(r.blockM % (r.numWarps * 32 / cols), 0) << "head dim " << d;
  }
}

/// The defaults predict the compiler's shared-memory and thread-layout rules;
/// every head dim, dtype and arch must get a config that compiles without
/// spills.
TEST(KernelKey, DefaultConfigsCompileWithoutSpills) {
  TempDir dir;
  std::unique_ptr<fa::Runtime> runtime =
      makeRuntime(dir.str(), /*diskCache=*/false);
  ASSERT_TRUE(runtime);
  for (fa::ElementType dtype :
       {fa::ElementType::f32, fa::ElementType::f16, fa::ElementType::bf16})
    for (const char *arch : {"sm_80", "sm_86", "sm_90a"})
      for (int64_t d : {8, 40, 64, 96, 128, 192, 256, 512}) {
        fa::KernelSpec spec;
        spec.headDim = d;
        spec.dtype = dtype;
        spec.arch = arch;
        spec.blockM = spec.blockN = spec.numWarps = 0;
        fa::KernelInfo info;
        fa::Result r = runtime->prepare(spec, &info);
        ASSERT_TRUE(bool(r)) << arch << " " << fa::toString(dtype)
                             << " d=" << d << ": " << r.message;
        EXPECT_FALSE(info.ptxas.spills())
            << info.name << " spills " << info.ptxas.spillStoreBytes
            << " bytes";
      }
}

/// The 16-bit backward past head dim 128 runs on tensor cores where the
/// 8-warp grid's tiles fit (sm_80, sm_90a): its default kernels compile
/// without spills (ptxas decides; the model only ranks).
TEST(KernelKey, WideHeadBackwardDefaultsRunOnTensorCores) {
  TempDir dir;
  std::unique_ptr<fa::Runtime> runtime =
      makeRuntime(dir.str(), /*diskCache=*/false);
  ASSERT_TRUE(runtime);
  for (const char *arch : {"sm_80", "sm_90a"})
    for (int64_t d : {192, 256}) {
      fa::KernelSpec spec;
      spec.headDim = d;
      spec.dtype = fa::ElementType::bf16;
      spec.arch = arch;
      spec.backward = true;
      spec.causal = d == 256;
      spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
      fa::KernelInfo info;
      fa::Result r = runtime->prepare(spec, &info);
      ASSERT_TRUE(bool(r)) << arch << " d=" << d << ": " << r.message;
      EXPECT_EQ(info.spec.strategy, fa::Strategy::mma) << info.name;
      EXPECT_EQ(info.spec.numWarps, 8) << info.name;
      EXPECT_FALSE(info.ptxas.spills())
          << info.name << " spills " << info.ptxas.spillStoreBytes << " bytes";
    }
}

/// With tiles left to the defaults, the runtime uses the first candidate
/// that compiles without spills, not just the first by rank: the register
/// estimate behind the ranking cannot see ptxas's allocation (head dim 8 in
/// f16 at 128 x 128 on 16 warps spills 8 bytes with ptxas 13.0).
TEST(KernelKey, DefaultsSkipCandidatesThatSpill) {
  TempDir dir;
  std::unique_ptr<fa::Runtime> runtime =
      makeRuntime(dir.str(), /*diskCache=*/false);
  ASSERT_TRUE(runtime);
  for (fa::ElementType dtype : {fa::ElementType::f32, fa::ElementType::f16}) {
    fa::KernelSpec spec;
    spec.headDim = 8;
    spec.dtype = dtype;
    spec.arch = "sm_90a";
    spec.blockM = spec.blockN = spec.numWarps = 0;
    std::vector<fa::KernelSpec> candidates = defaultCandidates(spec);
    ASSERT_GT(candidates.size(), 1u);
    EXPECT_EQ(canonicalText(candidates.front()),
              canonicalText(withDefaults(spec)));
    // The expected choice, compiling each candidate explicitly.
    std::string expected;
    for (const fa::KernelSpec &candidate : candidates) {
      fa::KernelInfo info;
      ASSERT_TRUE(bool(runtime->prepare(candidate, &info)));
      if (!info.ptxas.spills()) {
        expected = canonicalText(candidate);
        break;
      }
    }
    ASSERT_NE(expected, "") << "every candidate spills";
    fa::KernelInfo chosen;
    ASSERT_TRUE(bool(runtime->prepare(spec, &chosen)));
    EXPECT_EQ(canonicalText(chosen.spec), expected);
    EXPECT_FALSE(chosen.ptxas.spills());
    // Remembered: the same kernel, from memory.
    fa::KernelInfo again;
    ASSERT_TRUE(bool(runtime->prepare(spec, &again)));
    EXPECT_EQ(again.key, chosen.key);
    EXPECT_EQ(again.source, fa::KernelSource::memoryCache);
  }
}

/// prepare() with a sequence length gives the kernel forward() launches for
/// such tensors: at D = 64 (wgmma) up to 1k two consumer warpgroups, longer
/// or unknown lengths three; each length's choice is remembered apart.
TEST(KernelKey, DefaultsFollowTheSequenceLength) {
  TempDir dir;
  std::unique_ptr<fa::Runtime> runtime =
      makeRuntime(dir.str(), /*diskCache=*/false);
  ASSERT_TRUE(runtime);
  fa::KernelSpec spec;
  spec.headDim = 64;
  spec.dtype = fa::ElementType::f16;
  spec.causal = true;
  spec.arch = "sm_90a";
  spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
  auto prepared = [&](int64_t length) {
    fa::KernelInfo info;
    fa::Result r = runtime->prepare(spec, &info, length);
    EXPECT_TRUE(bool(r)) << r.message;
    return info.name;
  };
  EXPECT_EQ(prepared(1000), "fa_fwd_d64_f16_causal_128x128_w8_s2_wgmma");
  EXPECT_EQ(prepared(4096), "fa_fwd_d64_f16_causal_192x128_w12_s2_wgmma");
  EXPECT_EQ(prepared(0), "fa_fwd_d64_f16_causal_192x128_w12_s2_wgmma");
  EXPECT_EQ(prepared(512), "fa_fwd_d64_f16_causal_128x128_w8_s2_wgmma");
  EXPECT_EQ(kernelName(runtime->resolve(spec, 1000)),
            "fa_fwd_d64_f16_causal_128x128_w8_s2_wgmma");
  EXPECT_EQ(kernelName(runtime->resolve(spec)),
            "fa_fwd_d64_f16_causal_192x128_w12_s2_wgmma");
}

//===----------------------------------------------------------------------===//
// Caches (compile only: no GPU needed)
//===----------------------------------------------------------------------===//

TEST(KernelCache, CompilesOnceThenHitsMemoryThenDisk) {
  TempDir dir;
  auto runtime = makeRuntime(dir.str());
  fa::KernelInfo info;
  ASSERT_TRUE(bool(runtime->prepare(smallSpec(), &info)));
  EXPECT_EQ(info.source, fa::KernelSource::compiled);
  EXPECT_EQ(info.name, "fa_fwd_d32_f32_full_8x32_w8");
  EXPECT_EQ(info.numThreads, 256);
  EXPECT_GT(info.sharedMemoryBytes, 0);
  EXPECT_GT(info.ptxas.registers, 0);
  EXPECT_TRUE(llvm::sys::fs::exists(fa::DiskCache(dir.str()).pathFor(info.key)));

  fa::KernelInfo again;
  ASSERT_TRUE(bool(runtime->prepare(smallSpec(), &again)));
  EXPECT_EQ(again.source, fa::KernelSource::memoryCache);
  EXPECT_EQ(again.key, info.key);

  auto other = makeRuntime(dir.str());
  fa::KernelInfo fromDisk;
  ASSERT_TRUE(bool(other->prepare(smallSpec(), &fromDisk)));
  EXPECT_EQ(fromDisk.source, fa::KernelSource::diskCache);
  EXPECT_EQ(fromDisk.name, info.name);
  EXPECT_EQ(fromDisk.numThreads, info.numThreads);
  EXPECT_EQ(fromDisk.sharedMemoryBytes, info.sharedMemoryBytes);
  EXPECT_EQ(fromDisk.ptxas.registers, info.ptxas.registers);
  // The compiler's launch plan travels with the cubin.
  ASSERT_EQ(info.launches.size(), 1u);
  ASSERT_EQ(fromDisk.launches.size(), 1u);
  EXPECT_EQ(fromDisk.launches[0].toJson(), info.launches[0].toJson());
  EXPECT_EQ(info.launches[0].function, info.name);
  EXPECT_EQ(info.launches[0].threads, info.numThreads);
  EXPECT_EQ(info.launches[0].sharedBytes, info.sharedMemoryBytes);
  EXPECT_EQ(info.launches[0].grid[0].tile, 8); // B_r of smallSpec
}

/// The backward is three kernels in one cubin, launched in order: D per
/// query tile, dK/dV per K/V tile of a K/V head, dQ per query tile; each
/// takes the eleven operands. Their plans travel with the cubin too.
TEST(KernelCache, BackwardIsThreeLaunches) {
  TempDir dir;
  fa::KernelSpec spec = smallSpec();
  spec.backward = true;
  spec.blockM = 16;
  spec.blockN = 32;
  spec.numWarps = 4;
  auto rt = makeRuntime(dir.str());
  fa::KernelInfo info;
  fa::Result r = rt->prepare(spec, &info);
  ASSERT_TRUE(bool(r)) << r.message;
  EXPECT_EQ(info.name.rfind("fa_bwd_", 0), 0u) << info.name;
  ASSERT_EQ(info.launches.size(), 3u);
  using Extent = fa::LaunchPlan::Extent;
  const char *suffixes[] = {"_delta", "_dkdv", "_dq"};
  for (int i = 0; i < 3; ++i) {
    const fa::LaunchPlan &launch = info.launches[i];
    EXPECT_EQ(launch.function, info.name + suffixes[i]);
    EXPECT_EQ(launch.params, fa::LaunchPlan::backwardParams());
    EXPECT_EQ(launch.threads, 128);
  }
  EXPECT_EQ(info.launches[0].grid[0].extent, Extent::queryLength);
  EXPECT_EQ(info.launches[0].grid[0].tile, 16);
  EXPECT_EQ(info.launches[1].grid[0].extent, Extent::keyLength);
  EXPECT_EQ(info.launches[1].grid[0].tile, 32);
  EXPECT_EQ(info.launches[1].grid[1].extent, Extent::keyHeads);
  EXPECT_EQ(info.launches[2].grid[1].extent, Extent::queryHeads);
  // 100 keys, 2 K/V heads: 4 tiles x 2 heads x batch 3 blocks.
  fa::ProblemExtents problem{3, 8, 50, 2, 100};
  EXPECT_EQ(info.launches[1].blocks(0, problem), 4);
  EXPECT_EQ(info.launches[1].blocks(1, problem), 2);
  EXPECT_EQ(info.launches[0].blocks(0, problem), 4);
  EXPECT_EQ(info.launches[0].blocks(1, problem), 8);

  auto other = makeRuntime(dir.str());
  fa::KernelInfo fromDisk;
  ASSERT_TRUE(bool(other->prepare(spec, &fromDisk)));
  EXPECT_EQ(fromDisk.source, fa::KernelSource::diskCache);
  ASSERT_EQ(fromDisk.launches.size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(fromDisk.launches[i].toJson(), info.launches[i].toJson());
  // The forward of the same spec is another kernel.
  fa::KernelInfo forward;
  ASSERT_TRUE(bool(rt->prepare(smallSpec(), &forward)));
  EXPECT_NE(forward.key, info.key);
}

/// With FA_ASSEMBLER=nvjitlink the runtime assembles in-process with
/// libnvJitLink (no ptxas run, no GPU needed): the kernel info names it and
/// carries the same report, and the cache key differs from ptxas's.
TEST(Assemblers, NvJitLinkAssemblesAndKeysApart) {
  if (llvm::Expected<std::string> version = fa::nvJitLinkVersion(); !version)
    GTEST_SKIP() << llvm::toString(version.takeError());
  TempDir dir;
  struct Forced {
    explicit Forced(const char *value) { setenv("FA_ASSEMBLER", value, 1); }
    ~Forced() { unsetenv("FA_ASSEMBLER"); }
  };
  fa::KernelInfo viaNvJitLink, viaPtxas;
  {
    Forced forced("nvjitlink");
    ASSERT_TRUE(bool(makeRuntime(dir.str())->prepare(smallSpec(), &viaNvJitLink)));
  }
  {
    Forced forced("ptxas");
    ASSERT_TRUE(bool(makeRuntime(dir.str())->prepare(smallSpec(), &viaPtxas)));
  }
  EXPECT_TRUE(llvm::StringRef(viaNvJitLink.assembler).starts_with("nvjitlink "))
      << viaNvJitLink.assembler;
  EXPECT_TRUE(llvm::StringRef(viaPtxas.assembler).starts_with("ptxas "))
      << viaPtxas.assembler;
  EXPECT_NE(viaNvJitLink.key, viaPtxas.key);
  EXPECT_EQ(viaNvJitLink.ptxas.name, viaNvJitLink.name);
  EXPECT_GT(viaNvJitLink.ptxas.registers, 0);
  EXPECT_EQ(viaNvJitLink.ptxas.spillStoreBytes, 0);
  {
    Forced forced("tcgen");
    fa::KernelInfo info;
    fa::Result r = makeRuntime(dir.str())->prepare(smallSpec(), &info);
    EXPECT_FALSE(bool(r));
    EXPECT_NE(r.message.find("FA_ASSEMBLER must be ptxas, nvjitlink or driver, "
                             "got 'tcgen'"),
              std::string::npos)
        << r.message;
  }
}

/// The launch plan: blocks per grid dimension from the problem's shapes,
/// the parameter order, and a JSON form that rejects what is not a plan.
TEST(LaunchPlan, GridParamsAndJson) {
  fa::LaunchPlan plan =
      fa::LaunchPlan::forwardAttention("kernel", 128, 256, 104448);
  // 1000 query rows in tiles of 128, 16 heads, batch 3.
  fa::ProblemExtents problem{3, 16, 1000, 4, 77};
  EXPECT_EQ(plan.blocks(0, problem), 8);
  EXPECT_EQ(plan.blocks(1, problem), 16);
  EXPECT_EQ(plan.blocks(2, problem), 3);
  EXPECT_FALSE(plan.persistent);
  EXPECT_EQ(plan.launchGrid(problem, 132), (std::array<int64_t, 3>{8, 16, 3}));
  ASSERT_EQ(plan.params.size(), 5u);
  EXPECT_EQ(plan.params.front(), fa::LaunchPlan::Operand::query);
  EXPECT_EQ(plan.params.back(), fa::LaunchPlan::Operand::lse);
  std::optional<fa::LaunchPlan> back = fa::LaunchPlan::fromJson(plan.toJson());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->toJson(), plan.toJson());
  EXPECT_EQ(back->grid[0].tile, 128);
  EXPECT_EQ(back->sharedBytes, 104448);
  auto parse = [](const char *text) {
    llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
    EXPECT_TRUE(bool(json));
    return json ? fa::LaunchPlan::fromJson(*json) : std::nullopt;
  };
  const char *grid = R"("function": "f",
      "grid": [{"extent": "query_length", "tile": 64},
      {"extent": "query_heads", "tile": 1}, {"extent": "batch", "tile": 1}])";
  EXPECT_TRUE(parse((std::string("{") + grid +
                     R"(, "threads": 128, "shared_bytes": 0, "params": ["q"]})")
                        .c_str()));
  // A zero tile, an unknown extent or operand, no threads: not a plan.
  EXPECT_FALSE(parse(R"({"grid": [{"extent": "query_length", "tile": 0},
      {"extent": "query_heads", "tile": 1}, {"extent": "batch", "tile": 1}],
      "threads": 128, "shared_bytes": 0, "params": []})"));
  EXPECT_FALSE(parse(R"({"grid": [{"extent": "keys", "tile": 1},
      {"extent": "query_heads", "tile": 1}, {"extent": "batch", "tile": 1}],
      "threads": 128, "shared_bytes": 0, "params": []})"));
  EXPECT_FALSE(parse((std::string("{") + grid +
                      R"(, "threads": 128, "shared_bytes": 0, "params": ["x"]})")
                         .c_str()));
  EXPECT_FALSE(parse((std::string("{") + grid +
                      R"(, "shared_bytes": 0, "params": []})")
                         .c_str()));
  // No entry point: not a plan.
  EXPECT_FALSE(parse(R"({"grid": [{"extent": "query_length", "tile": 64},
      {"extent": "query_heads", "tile": 1}, {"extent": "batch", "tile": 1}],
      "threads": 128, "shared_bytes": 0, "params": ["q"]})"));
  // Tensor maps (the wgmma strategy's TMA loads) round-trip; a map of an
  // output, or a box beyond TMA's 256 elements, is not a plan.
  fa::LaunchPlan tma = plan;
  tma.tensorMaps = {{fa::LaunchPlan::Operand::query, 128, 64},
                    {fa::LaunchPlan::Operand::value, 64, 64}};
  std::optional<fa::LaunchPlan> tmaBack = fa::LaunchPlan::fromJson(tma.toJson());
  ASSERT_TRUE(tmaBack.has_value());
  ASSERT_EQ(tmaBack->tensorMaps.size(), 2u);
  EXPECT_EQ(tmaBack->tensorMaps[1].operand, fa::LaunchPlan::Operand::value);
  EXPECT_EQ(tmaBack->tensorMaps[0].boxRows, 128);
  EXPECT_EQ(tmaBack->tensorMaps[0].boxCols, 64);
  EXPECT_TRUE(back->tensorMaps.empty());
  // dO (the wgmma backward's) is read by a tensor map too.
  fa::LaunchPlan gradOutputMap = plan;
  gradOutputMap.tensorMaps = {{fa::LaunchPlan::Operand::gradOutput, 64, 64}};
  std::optional<fa::LaunchPlan> gradOutputBack =
      fa::LaunchPlan::fromJson(gradOutputMap.toJson());
  ASSERT_TRUE(gradOutputBack.has_value());
  EXPECT_EQ(gradOutputBack->tensorMaps[0].operand,
            fa::LaunchPlan::Operand::gradOutput);
  // The f32 dQ accumulator too, in boxes of at most 32 columns (128 bytes).
  fa::LaunchPlan accumMap = plan;
  accumMap.tensorMaps = {{fa::LaunchPlan::Operand::dqAccum, 64, 32}};
  std::optional<fa::LaunchPlan> accumBack =
      fa::LaunchPlan::fromJson(accumMap.toJson());
  ASSERT_TRUE(accumBack.has_value());
  EXPECT_EQ(accumBack->tensorMaps[0].operand,
            fa::LaunchPlan::Operand::dqAccum);
  accumMap.tensorMaps[0].boxCols = 64;
  EXPECT_FALSE(fa::LaunchPlan::fromJson(accumMap.toJson()).has_value());
  fa::LaunchPlan persistent = plan;
  persistent.persistent = true;
  std::optional<fa::LaunchPlan> persistentBack =
      fa::LaunchPlan::fromJson(persistent.toJson());
  ASSERT_TRUE(persistentBack.has_value());
  EXPECT_TRUE(persistentBack->persistent);
  EXPECT_FALSE(back->persistent);
  // A dependent launch round-trips; plans stored without it have none.
  fa::LaunchPlan dependent = plan;
  dependent.dependentLaunch = true;
  std::optional<fa::LaunchPlan> dependentBack =
      fa::LaunchPlan::fromJson(dependent.toJson());
  ASSERT_TRUE(dependentBack.has_value());
  EXPECT_TRUE(dependentBack->dependentLaunch);
  EXPECT_FALSE(back->dependentLaunch);
  EXPECT_FALSE(parse((std::string("{") + grid +
                      R"(, "threads": 128, "shared_bytes": 0, "params": [],
                      "dependent_launch": "yes"})")
                         .c_str()));
  EXPECT_FALSE(parse((std::string("{") + grid +
                      R"(, "threads": 128, "shared_bytes": 0, "params": [],
                      "persistent": 1})")
                         .c_str()));
  EXPECT_FALSE(parse((std::string("{") + grid +
                      R"(, "threads": 128, "shared_bytes": 0, "params": [],
                      "tensor_maps": [{"operand": "o", "box_rows": 64,
                                       "box_cols": 64}]})")
                         .c_str()));
  EXPECT_FALSE(parse((std::string("{") + grid +
                      R"(, "threads": 128, "shared_bytes": 0, "params": [],
                      "tensor_maps": [{"operand": "q", "box_rows": 512,
                                       "box_cols": 64}]})")
                         .c_str()));
}

/// Split-KV: the split kernel runs every part of the batch along z, the
/// combine kernel tiles of at most kCombineRows rows; both take the
/// partials after the KV cache's lengths; the parts-batch extent
/// round-trips through JSON. CUDA's 65535 blocks along z are named.
TEST(LaunchPlan, SplitKvKernels) {
  using Plan = fa::LaunchPlan;
  Plan split = Plan::forwardAttention("f_split", 64, 128, 0, false, false,
                                      false, /*kvLens=*/true,
                                      Plan::ForwardKernel::split);
  Plan combine = Plan::forwardAttention("f_combine", 64, 128, 0, false, false,
                                        false, true,
                                        Plan::ForwardKernel::combine);
  fa::ProblemExtents problem{3, 8, 40, 2, 5000};
  problem.parts = 7;
  EXPECT_EQ(split.launchGrid(problem, 132),
            (std::array<int64_t, 3>{1, 8, 21}));
  EXPECT_EQ(combine.launchGrid(problem, 132),
            (std::array<int64_t, 3>{10, 8, 3})); // 40 rows in tiles of 4
  std::vector<Plan::Operand> params = {
      Plan::Operand::query,         Plan::Operand::key,
      Plan::Operand::value,         Plan::Operand::output,
      Plan::Operand::lse,           Plan::Operand::kvLens,
      Plan::Operand::partialOutput, Plan::Operand::partialLse};
  EXPECT_EQ(split.params, params);
  EXPECT_EQ(combine.params, params);
  EXPECT_EQ(Plan::rankOf(Plan::Operand::partialOutput), 4);
  EXPECT_EQ(Plan::rankOf(Plan::Operand::partialLse), 3);
  // Query tiles smaller than kCombineRows: the combine takes the tile.
  EXPECT_EQ(Plan::forwardAttention("g", 2, 64, 0, false, false, false, false,
                                   Plan::ForwardKernel::combine)
                .grid[0]
                .tile,
            2);
  std::optional<Plan> back = Plan::fromJson(split.toJson());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->grid[2].extent, Plan::Extent::partsBatch);
  EXPECT_EQ(back->toJson(), split.toJson());
  EXPECT_EQ(Plan::operandNamed("partial_o"), Plan::Operand::partialOutput);
  EXPECT_EQ(split.checkLaunch(problem), "");
  problem.batch = 600;
  problem.parts = 128;
  EXPECT_EQ(split.checkLaunch(problem),
            "f_split needs 76800 blocks along z (parts_batch), over CUDA's "
            "65535");
}

/// Decode: a forward of a few query rows a head left to the defaults takes
/// its strategy's decode tiles (mma: 32 x 32 on two warps, two stages);
/// anything else is left as it is.
/// Tiles left to the defaults, as the C ABI's zeros leave them.
static fa::KernelSpec defaultTiles(fa::KernelSpec spec) {
  spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
  return spec;
}

TEST(SplitKv, DecodeRequestTakesTheDecodeTiles) {
  fa::KernelSpec request = defaultTiles({});
  request.headDim = 128;
  request.dtype = fa::ElementType::bf16;
  request.kvLens = true;
  fa::KernelSpec decode = fa::decodeRequest(request, 4, 0, "sm_90a");
  EXPECT_EQ(decode.strategy, fa::Strategy::mma);
  EXPECT_EQ(
      std::tuple(decode.blockM, decode.blockN, decode.numWarps, decode.stages),
      std::tuple(32, 32, 2, 2));
  EXPECT_FALSE(decode.splitKv); // the parts decide that
  EXPECT_EQ(decode.arch, request.arch);
  EXPECT_EQ(fa::decodeRequest(request, fa::kDecodeRows, 0, "sm_80").blockM, 32);
  // A request without an arch (the C ABI's) is checked on the device's and
  // keeps none.
  fa::KernelSpec archless = request;
  archless.arch = "";
  fa::KernelSpec fromC = fa::decodeRequest(archless, 4, 0, "sm_90a");
  EXPECT_EQ(fromC.blockM, 32);
  EXPECT_EQ(fromC.arch, "");
  // Not a decode, or not left to the defaults: unchanged.
  auto unchanged = [&](const fa::KernelSpec &r, int64_t rows, int64_t page) {
    fa::KernelSpec got = fa::decodeRequest(r, rows, page, "sm_90a");
    return canonicalText(got) == canonicalText(r);
  };
  EXPECT_TRUE(unchanged(request, fa::kDecodeRows + 1, 0));
  EXPECT_TRUE(unchanged(request, 0, 0));
  fa::KernelSpec tiled = request;
  tiled.blockM = 64;
  EXPECT_TRUE(unchanged(tiled, 4, 0));
  fa::KernelSpec wgmma = request;
  wgmma.strategy = fa::Strategy::wgmma;
  EXPECT_TRUE(unchanged(wgmma, 4, 0));
  fa::KernelSpec f32 = request;
  f32.dtype = fa::ElementType::f32; // simt: no decode tiles
  EXPECT_TRUE(unchanged(f32, 4, 0));
  fa::KernelSpec backward = request;
  backward.backward = true;
  backward.kvLens = false;
  EXPECT_TRUE(unchanged(backward, 4, 0));
  // A paged cache: the decode tiles, a tile a page where 32 keys divide
  // the page, else their rows gathered; a block-n the caller set is kept.
  fa::KernelSpec paged = request;
  paged.pagedKv = true;
  EXPECT_EQ(fa::decodeRequest(paged, 4, 256, "sm_90a").blockN, 32);
  EXPECT_FALSE(fa::decodeRequest(paged, 4, 256, "sm_90a").pageGather);
  for (int64_t page : {1, 8, 16, 24, 48}) {
    fa::KernelSpec gathered = fa::decodeRequest(paged, 4, page, "sm_90a");
    EXPECT_EQ(std::tuple(gathered.blockM, gathered.blockN, gathered.pageGather),
              std::tuple(32, 32, true))
        << "page " << page;
  }
  fa::KernelSpec wide = request;
  wide.headDim = 256; // 16 keys a tile
  EXPECT_EQ(fa::decodeRequest(wide, 4, 0, "sm_90a").blockN, 16);
  paged.blockN = 64;
  EXPECT_EQ(fa::decodeRequest(paged, 4, 256, "sm_90a").blockN, 64);
  // The page rule both the defaults and the decode tiles use.
  EXPECT_EQ(fa::blockNForPage(256, 64, 16), 64);
  EXPECT_EQ(fa::blockNForPage(48, 64, 16), 16);
  EXPECT_EQ(fa::blockNForPage(24, 64, 16), 0);
  EXPECT_EQ(fa::blockNForPage(24, 32, 1), 8);
}

/// Few programs (B 1 at 8 K/V heads on 132 SMs) stream 128-key tiles, one
/// block an SM, where each of SMs / programs parts still gets
/// kMinTilesPerPart of them and a paged cache's pages hold whole tiles;
/// other decodes keep the 32-key tiles.
TEST(SplitKv, FewDecodeProgramsStreamWideTiles) {
  fa::KernelSpec request = defaultTiles({});
  request.headDim = 128;
  request.dtype = fa::ElementType::bf16;
  request.kvLens = true;
  auto tiles = [&](fa::KernelSpec r, fa::DecodeShape shape,
                   const std::string &arch = "sm_90a") {
    r.arch = arch;
    fa::KernelSpec got = fa::decodeRequest(r, 4, 0, arch, shape);
    return std::tuple(got.blockM, got.blockN, got.numWarps, got.stages);
  };
  using Tiles = std::tuple<int64_t, int64_t, int64_t, int64_t>;
  const Tiles wide{32, 128, 2, 2}, narrow{32, 32, 2, 2};
  EXPECT_EQ(tiles(request, {8, 8192, 132}), wide); // B 1: 16 parts
  EXPECT_EQ(tiles(request, {8, 131072, 132}), wide);
  EXPECT_EQ(tiles(request, {4, 16896, 132}), wide);  // 33 parts
  EXPECT_EQ(tiles(request, {8, 8191, 132}), narrow); // a part < 4 tiles
  EXPECT_EQ(tiles(request, {8, 4096, 132}), narrow);
  EXPECT_EQ(tiles(request, {16, 32768, 132}), narrow); // B 2: 8 parts
  EXPECT_EQ(tiles(request, {24, 32768, 132}), narrow);
  EXPECT_EQ(tiles(request, {64, 32768, 132}), narrow); // B 8
  EXPECT_EQ(tiles(request, {8, 8192, 0}), narrow);     // no device
  EXPECT_EQ(tiles(request, {}), narrow);
  // 128-key tiles do not fit sm_89's shared memory at D 128; D 64 takes
  // them; past D 128 the decode tiles stay at 16 keys.
  EXPECT_EQ(tiles(request, {8, 8192, 132}, "sm_89"), narrow);
  EXPECT_EQ(tiles(request, {4, 16384, 108}, "sm_80"), wide);
  fa::KernelSpec small = request;
  small.headDim = 64;
  EXPECT_EQ(tiles(small, {8, 8192, 132}), wide);
  fa::KernelSpec large = request;
  large.headDim = 256;
  EXPECT_EQ(std::get<1>(tiles(large, {8, 8192, 132})), 16);
  // A paged cache: a page of 256 holds two tiles; pages that hold no
  // whole 128-key tile keep the 32-key tiles (read a tile a page, or
  // gathered); a block-n the caller set is kept.
  fa::KernelSpec paged = request;
  paged.pagedKv = true;
  fa::KernelSpec whole =
      fa::decodeRequest(paged, 4, 256, "sm_90a", {8, 8192, 132});
  EXPECT_EQ(std::tuple(whole.blockN, whole.pageGather), std::tuple(128, false));
  fa::KernelSpec pages64 =
      fa::decodeRequest(paged, 4, 64, "sm_90a", {8, 8192, 132});
  EXPECT_EQ(std::tuple(pages64.blockN, pages64.pageGather),
            std::tuple(32, false));
  fa::KernelSpec gathered =
      fa::decodeRequest(paged, 4, 16, "sm_90a", {8, 8192, 132});
  EXPECT_EQ(std::tuple(gathered.blockN, gathered.pageGather),
            std::tuple(32, true));
  paged.blockN = 64;
  EXPECT_EQ(fa::decodeRequest(paged, 4, 256, "sm_90a", {8, 8192, 132}).blockN,
            64);
  // One block of the wide tiles an SM (their shared memory), several of
  // the narrow ones: the parts heuristic keeps to one wave of them.
  fa::KernelSpec wideSpec =
      fa::decodeRequest(request, 4, 0, "sm_90a", {8, 8192, 132});
  wideSpec.arch = "sm_90a";
  fa::KernelSpec narrowSpec = fa::decodeRequest(request, 4, 0, "sm_90a");
  narrowSpec.arch = "sm_90a";
  const fa::StrategyModel &mma = fa::strategyModel(fa::Strategy::mma);
  ASSERT_NE(mma.residentBlocks, nullptr);
  EXPECT_EQ(mma.residentBlocks(wideSpec), 1);
  EXPECT_GE(mma.residentBlocks(narrowSpec), 5);
  EXPECT_EQ(fa::chooseKvParts(8, 64, 132, 1), 16);  // 8k keys, B 1
  EXPECT_EQ(fa::chooseKvParts(8, 256, 132, 1), 16); // 32k keys
}

TEST(SplitKv, FitToPagesGathersPagesNoTileDivides) {
  fa::KernelSpec request = defaultTiles({});
  request.dtype = fa::ElementType::f16;
  request.pagedKv = true;
  using Fit = std::pair<int64_t, bool>; // block-n, pageGather
  auto fit = [&](int64_t blockN, int64_t page) {
    fa::KernelSpec spec = request;
    spec.blockN = blockN;
    fa::KernelSpec got = fa::fitToPages(spec, page, 64);
    EXPECT_EQ(validateSpec(got), "");
    return Fit(got.blockN, got.pageGather);
  };
  // Defaults: the widest of 64, 32, 16 that divides the page, else the
  // defaults' own block-n (0, chosen later) with the rows gathered.
  EXPECT_EQ(fit(0, 256), Fit(64, false));
  EXPECT_EQ(fit(0, 48), Fit(16, false));
  EXPECT_EQ(fit(0, 8), Fit(0, true));
  EXPECT_EQ(fit(0, 1), Fit(0, true));
  // A caller's block-n is kept: gathered where it does not divide.
  EXPECT_EQ(fit(32, 64), Fit(32, false));
  EXPECT_EQ(fit(32, 16), Fit(32, true));
  // Not paged: unchanged.
  fa::KernelSpec plain = request;
  plain.pagedKv = false;
  EXPECT_EQ(fa::canonicalText(fitToPages(plain, 3, 64)), canonicalText(plain));
  // pageGather names a paged cache.
  plain.pageGather = true;
  EXPECT_NE(validateSpec(plain).find("page_gather reads a paged KV cache row "
                                     "by row; it needs paged_kv"),
            std::string::npos);
}

/// The decode tiles compile without spills for every head dim the mma
/// forward takes, split or not.
TEST(SplitKv, DecodeTilesDoNotSpill) {
  if (llvm::Expected<std::string> version = fa::ptxasVersion(); !version)
    GTEST_SKIP() << llvm::toString(version.takeError());
  for (int64_t headDim : {64, 128, 256})
    for (bool split : {false, true})
      for (int64_t programs : {64, 8}) { // the few programs' tiles too
        fa::KernelSpec request = defaultTiles({});
        request.headDim = headDim;
        request.dtype = fa::ElementType::bf16;
        request.kvLens = true;
        request.arch = "sm_90a";
        fa::KernelSpec spec =
            fa::decodeRequest(request, 4, 0, "sm_90a", {programs, 32768, 132});
        spec.splitKv = split;
        ASSERT_EQ(spec.blockM, 32) << headDim;
        llvm::Expected<mlir::fa::CompiledKernel> kernel =
            mlir::fa::compileKernel(spec, /*assemble=*/true);
        ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
        for (const fa::KernelResources &r : kernel->resources)
          EXPECT_FALSE(r.spills()) << r.name << ": " << r.spillStoreBytes
                                   << " bytes of spill stores";
      }
}

/// A split-KV forward's combine kernel waits for the parts itself on sm_90
/// (fa.wait_previous_program), so its plan launches it while they run;
/// older archs launch both plainly.
TEST(SplitKv, CombineLaunchesWhileThePartsRunOnSm90) {
  for (const char *arch : {"sm_90a", "sm_80"}) {
    fa::KernelSpec spec;
    spec.headDim = 64;
    spec.dtype = fa::ElementType::bf16;
    spec.strategy = fa::Strategy::mma;
    spec.kvLens = true;
    spec.splitKv = true;
    spec.arch = arch;
    spec.blockM = 32, spec.blockN = 32, spec.numWarps = 2, spec.stages = 2;
    llvm::Expected<mlir::fa::CompiledKernel> kernel =
        mlir::fa::compileKernel(spec, /*assemble=*/false);
    ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
    ASSERT_EQ(kernel->launches.size(), 2u);
    EXPECT_FALSE(kernel->launches[0].dependentLaunch) << arch;
    EXPECT_EQ(kernel->launches[1].dependentLaunch,
              std::string(arch) == "sm_90a");
    bool waits = kernel->ptx.find("griddepcontrol.wait") != std::string::npos;
    EXPECT_EQ(waits, std::string(arch) == "sm_90a");
  }
}

/// The parts heuristic: none where the programs fill most SMs or the keys
/// are a few tiles; about two blocks per SM otherwise, each part at least
/// kMinTilesPerPart tiles, at most kMaxKvParts; caller values checked.
TEST(SplitKv, ChoosesPartsFromTheProgramsAndTheKeys) {
  EXPECT_EQ(fa::chooseKvParts(132, 512, 132), 1);
  EXPECT_EQ(fa::chooseKvParts(106, 512, 132), 1);  // 80% of a wave
  EXPECT_EQ(fa::chooseKvParts(8, 512, 132), 33);   // B = 1, 8 K/V heads
  EXPECT_EQ(fa::chooseKvParts(8, 40, 132), 10);    // 4 tiles a part
  EXPECT_EQ(fa::chooseKvParts(8, 7, 132), 1);      // too few tiles
  EXPECT_EQ(fa::chooseKvParts(1, 100000, 132), fa::kMaxKvParts);
  EXPECT_EQ(fa::chooseKvParts(0, 512, 132), 1);
  EXPECT_EQ(fa::chooseKvParts(8, 512, 0), 1);      // no device
  // At most one wave of the blocks an SM holds (0: not known).
  EXPECT_EQ(fa::chooseKvParts(8, 512, 132, 5), 33);
  EXPECT_EQ(fa::chooseKvParts(64, 512, 132, 5), 5);
  // Where two blocks fit an SM, programs that fill one wave of one block
  // each are still split (B 16 at 8 K/V heads), two blocks an SM are not.
  EXPECT_EQ(fa::chooseKvParts(128, 512, 132, 5), 3);
  EXPECT_EQ(fa::chooseKvParts(128, 512, 132, 1), 1);
  EXPECT_EQ(fa::chooseKvParts(212, 512, 132, 5), 1);
  EXPECT_EQ(fa::chooseKvParts(200, 512, 132, 5), 2);
  EXPECT_EQ(fa::chooseKvParts(64, 512, 132, 2), 4);
  EXPECT_EQ(fa::chooseKvParts(100, 512, 132, 1), 1);
  EXPECT_EQ(fa::checkKvParts(0), "");
  EXPECT_EQ(fa::checkKvParts(128), "");
  EXPECT_EQ(fa::checkKvParts(-1),
            "kv splits must be 0 (chosen by the runtime), 1 (no split) or up "
            "to 128, got -1");
  EXPECT_NE(fa::checkKvParts(129), "");
}

/// A wgmma spec at D = 128 with explicit tiles on two consumer warpgroups
/// and two stages (nothing left to the defaults).
fa::KernelSpec wgmmaTiles(fa::ElementType dtype, int64_t blockM,
                          int64_t blockN) {
  fa::KernelSpec spec;
  spec.headDim = 128;
  spec.dtype = dtype;
  spec.strategy = fa::Strategy::wgmma;
  spec.blockM = blockM;
  spec.blockN = blockN;
  spec.numWarps = 8;
  spec.stages = 2;
  return spec;
}

/// A variant's captured tensors are the kernel's last parameters, the
/// score_mod's then the mask_mod's, in every launch (the backward's three
/// kernels too); a text whose extra argument is not a capture is named.
TEST(LaunchPlan, CapturesAreTheLastParameters) {
  for (bool backward : {false, true}) {
    fa::KernelSpec spec;
    spec.headDim = 64;
    spec.arch = "sm_90a";
    spec.dtype = fa::ElementType::f16;
    spec.strategy = fa::Strategy::mma;
    spec.blockM = 64;
    spec.blockN = 64;
    spec.numWarps = 4;
    spec.backward = backward;
    spec.scoreMod = fa::variants::scoreBias();
    spec.maskMod = fa::variants::document();
    llvm::Expected<mlir::fa::CompiledKernel> kernel =
        mlir::fa::compileKernel(spec, /*assemble=*/false);
    ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
    ASSERT_EQ(kernel->launches.size(), backward ? 3u : 1u);
    for (const fa::LaunchPlan &plan : kernel->launches) {
      ASSERT_EQ(plan.captures.size(), 2u);
      EXPECT_TRUE(plan.captures[0] ==
                  (fa::CaptureType{fa::ScalarType::f16, 3}));
      EXPECT_TRUE(plan.captures[1] ==
                  (fa::CaptureType{fa::ScalarType::i32, 2}));
      ASSERT_GE(plan.params.size(), 2u);
      EXPECT_EQ(plan.params[plan.params.size() - 2],
                fa::LaunchPlan::Operand::capture0);
      EXPECT_EQ(plan.params.back(), fa::LaunchPlan::captureOperand(1));
    }
  }
  fa::KernelSpec spec = smallSpec();
  spec.maskMod =
      "func.func @mask_mod(%b: index, %h: index, %q: index, %kv: index, "
      "%sq: index, %sk: index, %doc: memref<8xi32>) -> i1 {\n"
      "  %x = memref.load %doc[%b] : memref<8xi32>\n"
      "  %z = arith.constant 0 : i32\n"
      "  %keep = arith.cmpi eq, %x, %z : i32\n"
      "  return %keep : i1\n}\n";
  llvm::Expected<mlir::fa::CompiledKernel> kernel =
      mlir::fa::compileKernel(spec, /*assemble=*/false);
  ASSERT_FALSE(bool(kernel));
  std::string error = llvm::toString(kernel.takeError());
  EXPECT_NE(error.find("the mask_mod's argument 6 (past the indices) must be "
                       "a captured tensor, a memref of 1 to 4 dynamic sizes"),
            std::string::npos)
      << error;
}

/// A score_mod reading `n` f32 tensors [H] (their sum added to the score)
/// and a mask_mod reading `m` i32 tensors [B] (kept where all are 0).
static std::pair<std::string, std::string> variantsWithCaptures(int n,
                                                                int m) {
  std::string score = "func.func @score_mod(%s: f32, %b: index, %h: index, "
                      "%q: index, %kv: index, %sq: index, %sk: index";
  std::string scoreBody = "  %r0 = arith.addf %s, %s : f32\n";
  for (int i = 0; i < n; ++i) {
    score += ", %t" + std::to_string(i) + ": memref<?xf32>";
    scoreBody += "  %x" + std::to_string(i) + " = memref.load %t" +
                 std::to_string(i) + "[%h] : memref<?xf32>\n  %r" +
                 std::to_string(i + 1) + " = arith.addf %r" +
                 std::to_string(i) + ", %x" + std::to_string(i) + " : f32\n";
  }
  score += ") -> f32 {\n" + scoreBody + "  return %r" + std::to_string(n) +
           " : f32\n}\n";
  std::string mask = "func.func @mask_mod(%b: index, %h: index, %q: index, "
                     "%kv: index, %sq: index, %sk: index";
  std::string maskBody = "  %z = arith.constant 0 : i32\n"
                         "  %k0 = arith.constant true\n";
  for (int i = 0; i < m; ++i) {
    std::string id = std::to_string(i);
    mask += ", %u" + id + ": memref<?xi32>";
    maskBody += "  %y" + id + " = memref.load %u" + id +
                "[%b] : memref<?xi32>\n  %e" + id + " = arith.cmpi eq, %y" +
                id + ", %z : i32\n  %k" + std::to_string(i + 1) +
                " = arith.andi %k" + id + ", %e" + id + " : i1\n";
  }
  mask += ") -> i1 {\n" + maskBody + "  return %k" + std::to_string(m) +
          " : i1\n}\n";
  return {score, mask};
}

/// A kernel takes at most kMaxCaptures (8) captured tensors, the
/// score_mod's and the mask_mod's together: 4 + 4 compile (the last
/// parameter is capture 7), 5 + 4 is an error naming the count and the
/// limit, in the forward and the backward.
TEST(LaunchPlan, AKernelTakesAtMostEightCaptures) {
  for (bool backward : {false, true}) {
    fa::KernelSpec spec = smallSpec();
    spec.backward = backward;
    std::tie(spec.scoreMod, spec.maskMod) = variantsWithCaptures(4, 4);
    llvm::Expected<mlir::fa::CompiledKernel> kernel =
        mlir::fa::compileKernel(spec, /*assemble=*/false);
    ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
    for (const fa::LaunchPlan &plan : kernel->launches) {
      EXPECT_EQ(plan.captures.size(), size_t(fa::kMaxCaptures));
      EXPECT_EQ(plan.params.back(),
                fa::LaunchPlan::captureOperand(fa::kMaxCaptures - 1));
    }
    std::tie(spec.scoreMod, spec.maskMod) = variantsWithCaptures(5, 4);
    kernel = mlir::fa::compileKernel(spec, /*assemble=*/false);
    ASSERT_FALSE(bool(kernel));
    std::string error = llvm::toString(kernel.takeError());
    EXPECT_NE(error.find("the variant captures 9 tensors; a kernel takes at "
                         "most 8"),
              std::string::npos)
        << error;
  }
}

/// The wgmma backward's dkdv kernel is warp-specialized: tensor maps of K
/// and V (boxes of block-n rows) and of Q and dO (block-m rows), and the
/// producer warpgroup in its block. The delta and dq kernels (simt) take
/// none.
TEST(LaunchPlan, WgmmaBackwardTakesTensorMaps) {
  fa::KernelSpec spec = wgmmaTiles(fa::ElementType::bf16, 64, 128);
  spec.backward = true;
  llvm::Expected<mlir::fa::CompiledKernel> kernel =
      mlir::fa::compileKernel(spec, /*assemble=*/false);
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  ASSERT_EQ(kernel->launches.size(), 3u);
  EXPECT_TRUE(kernel->launches[0].tensorMaps.empty());
  EXPECT_TRUE(kernel->launches[2].tensorMaps.empty());
  const fa::LaunchPlan &dkdv = kernel->launches[1];
  EXPECT_NE(dkdv.function.find("_dkdv"), std::string::npos) << dkdv.function;
  EXPECT_EQ(dkdv.threads, 8 * 32 + 128);
  EXPECT_FALSE(dkdv.persistent);
  using Operand = fa::LaunchPlan::Operand;
  // K, V, Q and dO are read with TMA; the f32 dQ part is added to the
  // accumulator with TMA's reduction, in boxes of 32 columns (128 bytes).
  ASSERT_EQ(dkdv.tensorMaps.size(), 5u);
  const std::tuple<Operand, int64_t, int64_t> expected[] = {
      {Operand::key, 128, 64},
      {Operand::value, 128, 64},
      {Operand::query, 64, 64},
      {Operand::gradOutput, 64, 64},
      {Operand::dqAccum, 64, 32}};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(dkdv.tensorMaps[i].operand, std::get<0>(expected[i])) << i;
    EXPECT_EQ(dkdv.tensorMaps[i].boxRows, std::get<1>(expected[i])) << i;
    EXPECT_EQ(dkdv.tensorMaps[i].boxCols, std::get<2>(expected[i])) << i;
  }
  // The deterministic mode has the TMA engine add dQ too, between its
  // turns: the same maps.
  spec.deterministic = true;
  llvm::Expected<mlir::fa::CompiledKernel> ordered =
      mlir::fa::compileKernel(spec, /*assemble=*/false);
  ASSERT_TRUE(bool(ordered)) << llvm::toString(ordered.takeError());
  ASSERT_EQ(ordered->launches[1].tensorMaps.size(), 5u);
  EXPECT_EQ(ordered->launches[1].tensorMaps[4].operand, Operand::dqAccum);
}

/// A warp-specialized wgmma kernel hands the runtime its tensor maps (Q,
/// K, V, boxes of block-m / block-n rows by 64 columns) and a block with
/// the producer warpgroup.
TEST(LaunchPlan, WgmmaKernelsTakeTensorMaps) {
  fa::KernelSpec spec = wgmmaTiles(fa::ElementType::f16, 128, 64);
  llvm::Expected<mlir::fa::CompiledKernel> kernel =
      mlir::fa::compileKernel(spec, /*assemble=*/false);
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
  ASSERT_EQ(kernel->launches.size(), 1u);
  const fa::LaunchPlan &plan = kernel->launches.front();
  EXPECT_EQ(plan.threads, 8 * 32 + 128);
  ASSERT_EQ(plan.tensorMaps.size(), 3u);
  EXPECT_EQ(plan.tensorMaps[0].operand, fa::LaunchPlan::Operand::query);
  EXPECT_EQ(plan.tensorMaps[0].boxRows, 128);
  EXPECT_EQ(plan.tensorMaps[1].operand, fa::LaunchPlan::Operand::key);
  EXPECT_EQ(plan.tensorMaps[2].operand, fa::LaunchPlan::Operand::value);
  EXPECT_EQ(plan.tensorMaps[2].boxRows, 64);
  EXPECT_EQ(plan.tensorMaps[2].boxCols, 64);
  ASSERT_EQ(plan.params.size(), 5u);
  // Persistent: one block per SM (132 on an H200) walks the 8 x 16 x 3
  // tiles of 1000 query rows, 16 heads, batch 3; fewer tiles than SMs, one
  // block each.
  EXPECT_TRUE(plan.persistent);
  fa::ProblemExtents problem{3, 16, 1000, 4, 1000};
  EXPECT_EQ(plan.launchGrid(problem, 132), (std::array<int64_t, 3>{132, 1, 1}));
  fa::ProblemExtents small{1, 2, 300, 2, 300};
  EXPECT_EQ(plan.launchGrid(small, 132), (std::array<int64_t, 3>{6, 1, 1}));
  fa::ProblemExtents none{1, 2, 0, 2, 300};
  EXPECT_EQ(plan.launchGrid(none, 132), (std::array<int64_t, 3>{0, 0, 0}));
  // It counts its tiles in 32 bits: 2^20 x 2^12 x 2^13 tiles are refused,
  // with the count and the limit.
  EXPECT_EQ(plan.checkLaunch(problem), "");
  fa::ProblemExtents huge{int64_t(1) << 20, int64_t(1) << 12,
                          int64_t(1) << 20, 1, 1};
  std::string error = plan.checkLaunch(huge);
  EXPECT_NE(error.find("the problem has 35184372088832 tiles of 128 query "
                       "rows;"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("walks at most 2147483647"), std::string::npos)
      << error;
}

/// Damages the entry in `path` with `damage`, then checks that a fresh
/// runtime detects it, rebuilds it, and that the rebuilt entry is good.
void expectRebuilt(const std::string &dir, const std::string &path,
                   void (*damage)(const std::string &)) {
  damage(path);
  auto runtime = makeRuntime(dir);
  fa::KernelInfo info;
  ASSERT_TRUE(bool(runtime->prepare(smallSpec(), &info)));
  EXPECT_EQ(info.source, fa::KernelSource::compiled);
  EXPECT_TRUE(info.replacedCorruptEntry);
  auto after = makeRuntime(dir);
  ASSERT_TRUE(bool(after->prepare(smallSpec(), &info)));
  EXPECT_EQ(info.source, fa::KernelSource::diskCache);
}

TEST(KernelCache, DetectsAndRebuildsCorruptEntries) {
  TempDir dir;
  fa::KernelInfo info;
  ASSERT_TRUE(bool(makeRuntime(dir.str())->prepare(smallSpec(), &info)));
  std::string path = fa::DiskCache(dir.str()).pathFor(info.key);

  expectRebuilt(dir.str(), path, [](const std::string &p) {
    ::truncate(p.c_str(), 100); // truncated
  });
  expectRebuilt(dir.str(), path, [](const std::string &p) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x5a'); // one byte of the cubin changed
  });
  expectRebuilt(dir.str(), path, [](const std::string &p) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << "garbage";
  });
}

/// Processes that fill one entry at once both succeed, and the kernel is
/// compiled once: the others wait on the filler's lock file and read its
/// entry.
TEST(KernelCache, TwoProcessesFillingOneEntryBothSucceed) {
  TempDir dir;
  pid_t children[3];
  for (pid_t &child : children) {
    child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      fa::RuntimeOptions options;
      options.cacheDir = dir.str();
      std::unique_ptr<fa::Runtime> runtime;
      fa::KernelInfo info;
      bool ok = fa::Runtime::create(options, runtime) &&
                runtime->prepare(smallSpec(), &info);
      // 10: compiled here; 11: read from the disk; 1: failed.
      _exit(!ok ? 1 : info.source == fa::KernelSource::compiled ? 10 : 11);
    }
  }
  int compiled = 0;
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_NE(WEXITSTATUS(status), 1);
    compiled += WEXITSTATUS(status) == 10;
  }
  EXPECT_EQ(compiled, 1);
  fa::KernelInfo info;
  ASSERT_TRUE(bool(makeRuntime(dir.str())->prepare(smallSpec(), &info)));
  EXPECT_EQ(info.source, fa::KernelSource::diskCache);
  // No temporary or lock files are left behind.
  std::error_code ec;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(dir.str(), ec), end;
       it != end && !ec; it.increment(ec))
    ++files;
  EXPECT_EQ(files, 1);
}

TEST(KernelCache, ConcurrentRuntimesInOneProcess) {
  TempDir dir;
  auto a = makeRuntime(dir.str()), b = makeRuntime(dir.str());
  fa::Result ra, rb;
  std::thread ta([&] { ra = a->prepare(smallSpec()); });
  std::thread tb([&] { rb = b->prepare(smallSpec()); });
  ta.join();
  tb.join();
  EXPECT_TRUE(bool(ra)) << ra.message;
  EXPECT_TRUE(bool(rb)) << rb.message;
}

TEST(KernelCache, RejectsInvalidSpecs) {
  TempDir dir;
  auto runtime = makeRuntime(dir.str());
  fa::KernelSpec spec = smallSpec();
  spec.headDim = 0;
  fa::Result r = runtime->prepare(spec);
  EXPECT_EQ(r.status, fa::Status::invalidArgument);
  EXPECT_EQ(r.message, "head-dim must be in [1, 512], got 0");
  spec = smallSpec();
  spec.blockM = 4; // 8 thread rows do not divide 4 query rows
  r = runtime->prepare(spec);
  EXPECT_EQ(r.status, fa::Status::compileError);
  EXPECT_NE(r.message.find("does not divide the tiles"), std::string::npos)
      << r.message;
}

TEST(KernelCache, UnusableCacheFolderIsAnError) {
  TempDir dir;
  std::string file = dir.str() + "/not-a-folder";
  std::ofstream(file) << "x";
  fa::RuntimeOptions options;
  options.cacheDir = file + "/cache";
  std::unique_ptr<fa::Runtime> runtime;
  fa::Result r = fa::Runtime::create(options, runtime);
  EXPECT_EQ(r.status, fa::Status::cacheError);
  EXPECT_NE(r.message.find("cannot create the kernel cache folder"),
            std::string::npos)
      << r.message;
}

/// Temporary files of writers killed before their rename are removed when
/// a runtime opens the cache, once nobody can still be writing them.
/// Only the names fa writes (key.tmp-XXXXXXXX) are removed: the folder may
/// hold the user's files, whatever their names.
TEST(KernelCache, StaleTemporaryFilesAreRemoved) {
  TempDir dir;
  std::string key(64, 'a'), other(64, 'b');
  std::string stale = dir.str() + "/" + key + ".tmp-0123abcd";
  std::string staleTune = dir.str() + "/autotune-" + other + ".tmp-89abcdef";
  std::string fresh = dir.str() + "/" + other + ".tmp-0123abcd";
  // Old files of the user's whose names only look alike.
  std::vector<std::string> users = {
      dir.str() + "/notes.tmp-abcdefgh", dir.str() + "/0123.tmp-abcdefgh",
      dir.str() + "/" + key + ".tmp-0123abcd.keep",
      dir.str() + "/" + key.substr(1) + ".tmp-0123abcd",
      dir.str() + "/" + std::string(64, 'A') + ".tmp-0123abcd"};
  std::vector<std::string> old = users;
  old.push_back(stale);
  old.push_back(staleTune);
  for (const std::string &path : old)
    std::ofstream(path) << "half an entry, or a user's file";
  std::ofstream(fresh) << "being written";
  for (const std::string &path : old) {
    int fd;
    ASSERT_FALSE(llvm::sys::fs::openFileForWrite(path, fd,
                                                 llvm::sys::fs::CD_OpenExisting));
    auto hourAgo = std::chrono::system_clock::now() - std::chrono::hours(1);
    ASSERT_FALSE(llvm::sys::fs::setLastAccessAndModificationTime(
        fd, llvm::sys::toTimePoint(std::chrono::system_clock::to_time_t(hourAgo))));
    ::close(fd);
  }
  auto runtime = makeRuntime(dir.str());
  ASSERT_TRUE(runtime);
  EXPECT_FALSE(llvm::sys::fs::exists(stale));
  EXPECT_FALSE(llvm::sys::fs::exists(staleTune));
  EXPECT_TRUE(llvm::sys::fs::exists(fresh));
  for (const std::string &path : users)
    EXPECT_TRUE(llvm::sys::fs::exists(path)) << path << " was deleted";
}

/// A folder others may write to could hold planted kernels: not trusted.
TEST(KernelCache, WorldWritableFolderIsNotTrusted) {
  TempDir dir;
  llvm::sys::fs::setPermissions(dir.str(), llvm::sys::fs::all_all);
  fa::RuntimeOptions options;
  options.cacheDir = dir.str();
  std::unique_ptr<fa::Runtime> runtime;
  fa::Result r = fa::Runtime::create(options, runtime);
  EXPECT_EQ(r.status, fa::Status::cacheError);
  EXPECT_NE(r.message.find("is writable by other users: not trusted"),
            std::string::npos)
      << r.message;
}

/// A folder that belongs to another user is not trusted either. (Needs root
/// to give a folder away; skipped otherwise.)
TEST(KernelCache, FolderOfAnotherUserIsNotTrusted) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "giving a folder to another user needs root";
  TempDir dir;
  ASSERT_EQ(::chown(dir.str().c_str(), 12345, 12345), 0);
  fa::RuntimeOptions options;
  options.cacheDir = dir.str();
  std::unique_ptr<fa::Runtime> runtime;
  fa::Result r = fa::Runtime::create(options, runtime);
  EXPECT_EQ(r.status, fa::Status::cacheError);
  EXPECT_NE(r.message.find("belongs to user 12345, not to this process's "
                           "user: not trusted"),
            std::string::npos)
      << r.message;
}

/// Without FA_CACHE_DIR and HOME there is no shared fallback folder: the
/// runtime works from memory and says why.
TEST(KernelCache, NoHomeMeansNoDiskCache) {
  std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  std::string cacheEnv =
      std::getenv("FA_CACHE_DIR") ? std::getenv("FA_CACHE_DIR") : "";
  ::unsetenv("HOME");
  ::unsetenv("FA_CACHE_DIR");
  EXPECT_EQ(fa::defaultCacheDir(), "");
  std::unique_ptr<fa::Runtime> runtime = makeRuntime("");
  ASSERT_TRUE(runtime);
  EXPECT_EQ(runtime->cacheWarning(),
            "no disk cache: neither FA_CACHE_DIR nor HOME is set");
  fa::KernelInfo info;
  EXPECT_TRUE(bool(runtime->prepare(smallSpec(), &info)));
  if (!home.empty())
    ::setenv("HOME", home.c_str(), 1);
  if (!cacheEnv.empty())
    ::setenv("FA_CACHE_DIR", cacheEnv.c_str(), 1);
}

/// A FIFO where an entry should be is a corrupt entry, never opened (a read
/// would block); the kernel is compiled and the FIFO replaced.
TEST(KernelCache, FifoEntryIsCorruptNotAHang) {
  TempDir dir;
  auto first = makeRuntime(dir.str(), /*diskCache=*/false);
  fa::KernelInfo info;
  ASSERT_TRUE(bool(first->prepare(smallSpec(), &info)));
  std::string path = fa::DiskCache(dir.str()).pathFor(info.key);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto runtime = makeRuntime(dir.str());
  fa::KernelInfo rebuilt;
  ASSERT_TRUE(bool(runtime->prepare(smallSpec(), &rebuilt)));
  EXPECT_EQ(rebuilt.source, fa::KernelSource::compiled);
  EXPECT_TRUE(rebuilt.replacedCorruptEntry);
  llvm::sys::fs::file_status status;
  ASSERT_FALSE(llvm::sys::fs::status(path, status));
  EXPECT_EQ(status.type(), llvm::sys::fs::file_type::regular_file);
}

/// An intact entry whose metadata names another spec (a key collision or a
/// planted file with a forged key) is not loaded.
TEST(KernelCache, EntryForAnotherSpecIsRebuilt) {
  TempDir dir;
  auto runtime = makeRuntime(dir.str());
  fa::KernelInfo info;
  ASSERT_TRUE(bool(runtime->prepare(smallSpec(), &info)));
  fa::DiskCache disk(dir.str());
  fa::CachedKernel entry;
  std::string why;
  ASSERT_EQ(disk.read(info.key, entry, why), fa::DiskCache::Lookup::hit);
  fa::KernelSpec other = smallSpec();
  other.causal = true;
  std::string text = entry.metadata;
  size_t at = text.find(canonicalText(smallSpec()));
  ASSERT_NE(at, std::string::npos);
  text.replace(at, canonicalText(smallSpec()).size(), canonicalText(other));
  entry.metadata = text;
  ASSERT_EQ(disk.write(info.key, entry), "");
  auto fresh = makeRuntime(dir.str());
  fa::KernelInfo rebuilt;
  ASSERT_TRUE(bool(fresh->prepare(smallSpec(), &rebuilt)));
  EXPECT_EQ(rebuilt.source, fa::KernelSource::compiled);
  EXPECT_TRUE(rebuilt.replacedCorruptEntry);
}

/// Entries whose checksum is right but whose contents fa would never have
/// written are rebuilt, not loaded: metadata nested deeper than the JSON
/// fa writes (the parser recursed until the stack overflowed), fields out
/// of range, a kernel name from another spec, a cubin that is no CUDA ELF
/// image for the spec's arch.
TEST(KernelCache, ForgedEntriesAreRebuilt) {
  TempDir dir;
  auto runtime = makeRuntime(dir.str());
  fa::KernelInfo info;
  ASSERT_TRUE(bool(runtime->prepare(smallSpec(), &info)));
  fa::DiskCache disk(dir.str());
  fa::CachedKernel good;
  std::string why;
  ASSERT_EQ(disk.read(info.key, good, why), fa::DiskCache::Lookup::hit);
  // The entry as written loads from disk.
  {
    fa::KernelInfo again;
    ASSERT_TRUE(bool(makeRuntime(dir.str())->prepare(smallSpec(), &again)));
    EXPECT_EQ(again.source, fa::KernelSource::diskCache);
  }
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string text = good.metadata;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos)
      text.replace(at, from.size(), to);
    return text;
  };
  std::vector<std::pair<std::string, fa::CachedKernel>> forged;
  fa::CachedKernel deep = good;
  deep.metadata = std::string(100000, '[') + std::string(100000, ']');
  forged.push_back({"deep metadata", deep});
  fa::CachedKernel threads = good;
  threads.metadata = replaced("\"num_threads\":256", "\"num_threads\":4096");
  forged.push_back({"4096 threads", threads});
  fa::CachedKernel shared = good;
  shared.metadata = replaced("\"shared_memory_bytes\":",
                             "\"shared_memory_bytes\":-");
  forged.push_back({"negative shared memory", shared});
  fa::KernelSpec other = smallSpec();
  other.blockN = 16;
  fa::CachedKernel name = good;
  name.metadata = replaced("\"name\":\"" + kernelName(smallSpec()),
                           "\"name\":\"" + kernelName(withDefaults(other)));
  forged.push_back({"another kernel's name", name});
  fa::CachedKernel truncated = good;
  truncated.cubin.resize(8);
  forged.push_back({"a truncated cubin", truncated});
  fa::CachedKernel notElf = good;
  notElf.cubin[1] = 'X';
  forged.push_back({"not an ELF image", notElf});
  fa::CachedKernel otherArch = good;
  otherArch.cubin[49] = char(80); // the SM version in e_flags: sm_80
  forged.push_back({"a cubin for sm_80", otherArch});
  for (auto &[what, entry] : forged) {
    SCOPED_TRACE(what);
    ASSERT_EQ(disk.write(info.key, entry), "");
    fa::KernelInfo rebuilt;
    ASSERT_TRUE(bool(makeRuntime(dir.str())->prepare(smallSpec(), &rebuilt)));
    EXPECT_EQ(rebuilt.source, fa::KernelSource::compiled);
    EXPECT_TRUE(rebuilt.replacedCorruptEntry);
  }
}

/// The cubin check itself: what a CUDA ELF header of each arch looks like
/// to it.
TEST(KernelCache, CubinImageCheck) {
  fa::KernelSpec spec = smallSpec(); // sm_90a
  std::vector<char> image(64, 0);
  image[0] = 0x7f, image[1] = 'E', image[2] = 'L', image[3] = 'F';
  image[4] = 2;                         // 64-bit
  image[8] = 8;                         // CUDA ELF ABI version 8
  image[18] = char(190);                // EM_CUDA
  image[48] = 0x04, image[49] = 0x5a;   // sm_90 (0x5a) as ptxas 13 writes
  EXPECT_EQ(fa::checkCubinImage(image, spec), "");
  image[49] = 0x50;
  EXPECT_EQ(fa::checkCubinImage(image, spec),
            "the cubin is for sm_80, the spec for sm_90a");
  image[8] = 7; // older ABI: the SM version in the low byte
  image[48] = 0x5a;
  EXPECT_EQ(fa::checkCubinImage(image, spec), "");
  image[18] = 62; // x86-64
  EXPECT_EQ(fa::checkCubinImage(image, spec),
            "the cubin is an ELF image for machine 62, not CUDA (190)");
  image.resize(10);
  EXPECT_EQ(fa::checkCubinImage(image, spec),
            "the cubin is 10 bytes, shorter than an ELF header");
}

/// The driver's entries hold PTX (compiled by the driver's JIT at load):
/// NUL-terminated text whose .target is the spec's arch.
TEST(KernelCache, PtxImageCheck) {
  fa::KernelSpec spec = smallSpec(); // sm_90a
  auto image = [](std::string text) {
    return std::vector<char>(text.c_str(), text.c_str() + text.size() + 1);
  };
  std::string ptx = "//\n.version 8.1\n.target sm_90a\n.address_size 64\n";
  EXPECT_EQ(fa::checkPtxImage(image(ptx), spec), "");
  EXPECT_EQ(fa::checkPtxImage(image(".target sm_90a, debug\n"), spec), "");
  EXPECT_EQ(fa::checkPtxImage(image(".version 8.1\n.target sm_80\n"), spec),
            "the PTX targets sm_80, the spec sm_90a");
  EXPECT_EQ(fa::checkPtxImage(image(".version 8.1\n"), spec),
            "the PTX image has no .target line");
  std::vector<char> unterminated(ptx.begin(), ptx.end());
  EXPECT_EQ(fa::checkPtxImage(unterminated, spec),
            "the PTX image does not end in a NUL");
  std::vector<char> inner = image(ptx);
  inner[3] = '\0';
  EXPECT_EQ(fa::checkPtxImage(inner, spec),
            "the PTX image holds a NUL before its end");
  EXPECT_EQ(fa::checkPtxImage({}, spec), "the PTX image does not end in a NUL");
}

/// Another user's entry in this user's folder (group-writable folders are
/// the norm) is not trusted: rebuilt, and the rebuilt entry is this
/// user's. Needs root to make a file of another owner; skipped otherwise.
TEST(KernelCache, AnotherUsersEntryIsNotTrusted) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to give an entry another owner";
  TempDir dir;
  auto runtime = makeRuntime(dir.str());
  fa::KernelInfo info;
  ASSERT_TRUE(bool(runtime->prepare(smallSpec(), &info)));
  std::string path = fa::DiskCache(dir.str()).pathFor(info.key);
  ASSERT_EQ(::chown(path.c_str(), 12345, 12345), 0);
  fa::CachedKernel entry;
  std::string why;
  EXPECT_EQ(fa::DiskCache(dir.str()).read(info.key, entry, why),
            fa::DiskCache::Lookup::corrupt);
  EXPECT_NE(why.find("owned by user 12345, not by this process's user: not "
                     "trusted"),
            std::string::npos)
      << why;
  fa::KernelInfo rebuilt;
  ASSERT_TRUE(bool(makeRuntime(dir.str())->prepare(smallSpec(), &rebuilt)));
  EXPECT_EQ(rebuilt.source, fa::KernelSource::compiled);
  llvm::sys::fs::file_status status;
  ASSERT_FALSE(llvm::sys::fs::status(path, status));
  EXPECT_EQ(status.getUser(), ::geteuid());
  // Writable by others: not trusted either.
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  EXPECT_EQ(fa::DiskCache(dir.str()).read(info.key, entry, why),
            fa::DiskCache::Lookup::corrupt);
  EXPECT_NE(why.find("writable by other users"), std::string::npos) << why;
}

/// A cache that cannot be written is a warning: the kernel is compiled and
/// kept in memory.
TEST(KernelCache, UnwritableCacheKeepsTheKernelInMemory) {
  TempDir dir;
  std::string folder = dir.str() + "/cache";
  auto runtime = makeRuntime(folder);
  ASSERT_TRUE(runtime);
  // The folder turns into a file: no entry can be created, even as root.
  llvm::sys::fs::remove_directories(folder);
  std::ofstream(folder) << "x";
  fa::KernelInfo info;
  ASSERT_TRUE(bool(runtime->prepare(smallSpec(), &info)));
  EXPECT_EQ(info.source, fa::KernelSource::compiled);
  EXPECT_NE(info.cacheWarning.find("cannot create a file in"),
            std::string::npos)
      << info.cacheWarning;
  fa::KernelInfo again;
  ASSERT_TRUE(bool(runtime->prepare(smallSpec(), &again)));
  EXPECT_EQ(again.source, fa::KernelSource::memoryCache);
}

//===----------------------------------------------------------------------===//
// Argument checks
//===----------------------------------------------------------------------===//

/// Valid contiguous arguments for B=2, Hq=8, Hkv=2, Sq=100, Sk=70, D=32 on
/// fake (never dereferenced), aligned, disjoint addresses.
fa::AttentionArgs validArgs(int64_t headDim = 32) {
  fa::AttentionArgs a;
  int next = 0;
  auto tensor = [&](int64_t b, int64_t h, int64_t s, int64_t d) {
    return fa::test::fakeTensor(next, b, h, s, d);
  };
  a.q = tensor(2, 8, 100, headDim);
  a.k = tensor(2, 2, 70, headDim);
  a.v = tensor(2, 2, 70, headDim);
  a.o = tensor(2, 8, 100, headDim);
  a.lse = tensor(2, 8, 100, 1);
  a.lse.strides[0] = 800;
  a.lse.strides[1] = 100;
  a.lse.strides[2] = 1;
  return a;
}

std::string checkMessage(const fa::AttentionArgs &args) {
  fa::Result r = fa::checkAttentionArgs(smallSpec(), args);
  EXPECT_TRUE(r.status == fa::Status::ok ||
              r.status == fa::Status::invalidArgument);
  return r.message;
}

/// The backward's arguments: the forward's validArgs() plus dO like O and
/// gradients like Q, K, V, each at its own fake address.
fa::AttentionBackwardArgs validBackwardArgs() {
  fa::AttentionArgs f = validArgs();
  fa::AttentionBackwardArgs a;
  a.q = f.q;
  a.k = f.k;
  a.v = f.v;
  a.o = f.o;
  a.lse = f.lse;
  auto moved = [](fa::TensorArg t, int slot) {
    t.data = reinterpret_cast<const void *>((uintptr_t(1) << 40) * (10 + slot));
    return t;
  };
  a.gradOutput = moved(f.o, 0);
  a.gradQuery = moved(f.q, 1);
  a.gradKey = moved(f.k, 2);
  a.gradValue = moved(f.v, 3);
  return a;
}

TEST(ArgumentChecks, Backward) {
  fa::KernelSpec spec = smallSpec();
  spec.backward = true;
  auto check = [&](const fa::AttentionBackwardArgs &a) {
    return fa::checkAttentionBackwardArgs(spec, a).message;
  };
  EXPECT_EQ(check(validBackwardArgs()), "");
  fa::AttentionBackwardArgs a = validBackwardArgs();
  a.gradOutput.sizes[2] = 99;
  EXPECT_EQ(check(a), "do shape [2, 8, 99, 32] does not match o shape "
                      "[2, 8, 100, 32]");
  a = validBackwardArgs();
  a.gradKey.sizes[1] = 8;
  EXPECT_EQ(check(a), "dk shape [2, 8, 70, 32] does not match k shape "
                      "[2, 2, 70, 32]");
  a = validBackwardArgs();
  a.gradValue.data = a.v.data;
  EXPECT_EQ(check(a), "dv overlaps v in memory (gradients must not alias "
                      "the inputs)");
  a = validBackwardArgs();
  a.gradKey.data = a.gradQuery.data;
  EXPECT_EQ(check(a), "dk overlaps dq in memory");
  a = validBackwardArgs();
  a.gradQuery.strides[3] = 2;
  EXPECT_EQ(check(a), "dq must be contiguous in its last dimension (stride "
                      "1), got stride 2");
  // The forward's rules hold for the forward's operands.
  a = validBackwardArgs();
  a.o.sizes[2] = 7;
  EXPECT_NE(check(a).find("o shape"), std::string::npos) << check(a);
}

/// The direction of a spec is checked before anything needs a device.
TEST(ArgumentChecks, DirectionAndStrategyOfTheBackward) {
  auto rt = makeRuntime("", /*diskCache=*/false);
  fa::KernelSpec spec = smallSpec();
  spec.backward = true;
  fa::Result r = rt->forward(spec, validArgs());
  EXPECT_EQ(r.status, fa::Status::invalidArgument);
  EXPECT_EQ(r.message, "forward() runs a forward spec; this one is a backward "
                       "(call backward())");
  fa::KernelSpec wgmma = smallSpec();
  wgmma.dtype = fa::ElementType::f16;
  wgmma.strategy = fa::Strategy::wgmma;
  wgmma.headDim = 192;
  wgmma.arch = "sm_90a";
  wgmma.blockM = 64;
  wgmma.blockN = 128;
  wgmma.numWarps = 8;
  wgmma.stages = 2;
  r = rt->backward(wgmma, validBackwardArgs());
  EXPECT_EQ(r.status, fa::Status::invalidArgument);
  EXPECT_EQ(r.message,
            "the wgmma backward needs a head dim of 64 or 128, got 192 (dK "
            "and dV of a warpgroup's 64 rows take head-dim registers each per "
            "thread; use the mma or simt strategy)");
}

/// The mma backward copies dO and O (its delta program) and stores dK, dV
/// rows in 16-byte chunks.
TEST(ArgumentChecks, AccessWidthOfTheMmaBackward) {
  fa::KernelSpec spec = smallSpec();
  spec.backward = true;
  spec.dtype = fa::ElementType::f16;
  spec.strategy = fa::Strategy::mma;
  auto check = [&](const fa::AttentionBackwardArgs &a) {
    return fa::checkAttentionBackwardArgs(spec, a).message;
  };
  EXPECT_EQ(check(validBackwardArgs()), "");
  fa::AttentionBackwardArgs a = validBackwardArgs();
  a.gradOutput.data = static_cast<const char *>(a.gradOutput.data) + 8;
  EXPECT_EQ(check(a), "do must be 16-byte aligned for the mma strategy (rows "
                      "are copied in 16-byte chunks)");
  // O keeps the forward's rule (its delta program copies O's rows in
  // 16-byte chunks too).
  a = validBackwardArgs();
  a.o.data = static_cast<const char *>(a.o.data) + 8;
  EXPECT_EQ(check(a), "o must be 16-byte aligned for the mma strategy (O rows "
                      "are stored in 16-byte chunks)");
  a = validBackwardArgs();
  a.o.strides[0] += 4;
  EXPECT_EQ(check(a), "o stride " + std::to_string(a.o.strides[0]) +
                          " in dimension 0 must be a multiple of 8 elements "
                          "for the mma strategy (O rows are stored in 16-byte "
                          "chunks)");
  a = validBackwardArgs();
  a.gradKey.data = static_cast<const char *>(a.gradKey.data) + 8;
  EXPECT_EQ(check(a), "dk must be 16-byte aligned for the mma strategy (dK "
                      "and dV rows are stored in 16-byte chunks)");
  a = validBackwardArgs();
  a.gradValue.strides[0] += 4; // 4484: a gap between batches
  EXPECT_EQ(check(a), "dv stride 4484 in dimension 0 must be a multiple of 8 "
                      "elements for the mma strategy (dK and dV rows are "
                      "stored in 16-byte chunks)");
  // The simt strategy reads and writes single elements.
  spec.strategy = fa::Strategy::simt;
  EXPECT_EQ(check(a), "");
}

/// wgmma's dkdv kernel reads dO with TMA as it reads Q, K and V: TMA's
/// stride limit applies to it, with its name.
TEST(ArgumentChecks, TensorMapLimitsOfTheWgmmaBackward) {
  fa::KernelSpec spec = smallSpec();
  spec.backward = true;
  spec.dtype = fa::ElementType::f16;
  spec.strategy = fa::Strategy::wgmma;
  spec.headDim = 64;
  auto valid = [] {
    fa::AttentionArgs f = validArgs(64);
    fa::AttentionBackwardArgs a = validBackwardArgs();
    for (auto [to, from] :
         {std::pair{&a.q, &f.q}, {&a.k, &f.k}, {&a.v, &f.v}, {&a.o, &f.o}}) {
      std::copy(from->sizes, from->sizes + 4, to->sizes);
      std::copy(from->strides, from->strides + 4, to->strides);
    }
    for (auto [to, from] : {std::pair{&a.gradOutput, &f.o}, {&a.gradQuery, &f.q},
                            {&a.gradKey, &f.k}, {&a.gradValue, &f.v}}) {
      std::copy(from->sizes, from->sizes + 4, to->sizes);
      std::copy(from->strides, from->strides + 4, to->strides);
    }
    return a;
  };
  auto check = [&](const fa::AttentionBackwardArgs &a) {
    return fa::checkAttentionBackwardArgs(spec, a).message;
  };
  EXPECT_EQ(check(valid()), "");
  fa::AttentionBackwardArgs a = valid();
  a.gradOutput.strides[0] = int64_t(1) << 40; // 2^41 bytes
  // (far from the other tensors, so that it overlaps none of them)
  a.gradOutput.data = reinterpret_cast<const void *>(uintptr_t(1) << 50);
  EXPECT_EQ(check(a), "do stride 1099511627776 in dimension 0 exceeds the "
                      "TMA limit of 2^40 bytes (wgmma strategy)");
  // The mma strategy copies dO with cp.async: no such limit.
  spec.strategy = fa::Strategy::mma;
  EXPECT_EQ(check(a), "");
}

TEST(ArgumentChecks, AcceptsValidArguments) {
  EXPECT_EQ(checkMessage(validArgs()), "");
  // [B, S, H, D] storage viewed as [B, H, S, D] is fine too.
  fa::AttentionArgs a = validArgs();
  a.q.strides[1] = 32;
  a.q.strides[2] = 8 * 32;
  EXPECT_EQ(checkMessage(a), "");
  // An empty problem whose output is described with zero strides: nothing
  // to overlap (it was refused as "o has overlapping elements").
  fa::AttentionArgs empty = validArgs();
  for (fa::TensorArg *t : {&empty.q, &empty.k, &empty.v, &empty.o, &empty.lse})
    t->sizes[0] = 0;
  for (int d = 0; d < 3; ++d)
    empty.o.strides[d] = 0;
  EXPECT_EQ(checkMessage(empty), "");
}

TEST(ArgumentChecks, RejectsBadArgumentsWithSpecificMessages) {
  struct Case {
    const char *expected;
    void (*mutate)(fa::AttentionArgs &);
  };
  alignas(16) static char bytes[64];
  Case cases[] = {
      {"q is a null pointer", [](fa::AttentionArgs &a) { a.q.data = nullptr; }},
      {"o is not aligned to its 4-byte elements",
       [](fa::AttentionArgs &a) { a.o.data = bytes + 2; }},
      {"k head dim 64 does not match the kernel's head dim 32",
       [](fa::AttentionArgs &a) { a.k.sizes[3] = 64; }},
      {"v shape [2, 2, 71, 32] does not match k shape [2, 2, 70, 32]",
       [](fa::AttentionArgs &a) { a.v.sizes[2] = 71; }},
      {"o shape [2, 8, 99, 32] does not match q shape [2, 8, 100, 32]",
       [](fa::AttentionArgs &a) { a.o.sizes[2] = 99; }},
      {"lse shape [2, 4, 100] must be q's [B, H, S] = [2, 8, 100]",
       [](fa::AttentionArgs &a) { a.lse.sizes[1] = 4; }},
      {"k batch 1 does not match q batch 2",
       [](fa::AttentionArgs &a) { a.k.sizes[0] = a.v.sizes[0] = 1; }},
      {"q heads (8) must be a multiple of k/v heads (3)",
       [](fa::AttentionArgs &a) { a.k.sizes[1] = a.v.sizes[1] = 3; }},
      {"q must be contiguous in its last dimension (stride 1), got stride 2",
       [](fa::AttentionArgs &a) { a.q.strides[3] = 2; }},
      {"k has a negative stride -1 in dimension 2 (not supported)",
       [](fa::AttentionArgs &a) { a.k.strides[2] = -1; }},
      {"q has a negative size -1 in dimension 2",
       [](fa::AttentionArgs &a) {
         a.q.sizes[2] = a.o.sizes[2] = a.lse.sizes[2] = -1;
       }},
      {"o has overlapping elements (stride 16 is smaller than the 32 "
       "elements of the inner dimensions)",
       [](fa::AttentionArgs &a) { a.o.strides[2] = 16; }},
      {"q spans more elements than 64-bit indexing can address",
       [](fa::AttentionArgs &a) { a.q.strides[1] = int64_t(1) << 62; }},
      // Elements that 64-bit indexing reaches but bytes that it does not,
      // and a span that wraps past the top of the address space.
      {"q spans past the end of the address space (4611686018427413504 "
       "elements of 4 bytes from 1099511627776)",
       [](fa::AttentionArgs &a) { a.q.strides[0] = int64_t(1) << 62; }},
      // The last element at index 2^63 - 1: its count does not fit int64
      // (fa-fuzz-request: signed overflow in the message).
      {"q spans past the end of the address space (9223372036854775808 "
       "elements of 4 bytes from 1099511627776)",
       [](fa::AttentionArgs &a) {
         a.q.strides[0] =
             INT64_MAX - (7 * a.q.strides[1] + 99 * a.q.strides[2] + 31);
       }},
      {"o spans past the end of the address space (51200 elements of 4 "
       "bytes from 18446744073709551552)",
       [](fa::AttentionArgs &a) {
         a.o.data = reinterpret_cast<const void *>(UINTPTR_MAX - 63);
       }},
      {"batch 70000 exceeds the grid limit 65535",
       [](fa::AttentionArgs &a) {
         for (fa::TensorArg *t : {&a.q, &a.k, &a.v, &a.o, &a.lse}) {
           t->sizes[0] = 70000;
         }
       }},
  };
  for (const Case &c : cases) {
    fa::AttentionArgs args = validArgs();
    c.mutate(args);
    EXPECT_EQ(checkMessage(args), c.expected);
  }
}

/// The mma strategy copies Q, K and V rows in 16-byte chunks and stores O
/// in pairs: pointers and strides must allow that.
TEST(ArgumentChecks, MmaNeedsItsAccessWidth) {
  fa::KernelSpec spec = smallSpec();
  spec.dtype = fa::ElementType::f16;
  spec.strategy = fa::Strategy::mma;
  spec.blockM = 64;
  spec.blockN = 64;
  spec.numWarps = 4;
  spec.stages = 2;
  auto message = [&](void (*mutate)(fa::AttentionArgs &)) {
    fa::AttentionArgs args = validArgs();
    mutate(args);
    return fa::checkAttentionArgs(spec, args).message;
  };
  alignas(16) static char bytes[64];
  EXPECT_EQ(message([](fa::AttentionArgs &) {}), "");
  EXPECT_EQ(message([](fa::AttentionArgs &a) { a.k.data = bytes + 8; }),
            "k must be 16-byte aligned for the mma strategy (rows are copied "
            "in 16-byte chunks)");
  EXPECT_EQ(message([](fa::AttentionArgs &a) { a.v.strides[2] = 36; }),
            "v stride 36 in dimension 2 must be a multiple of 8 elements for "
            "the mma strategy (rows are copied in 16-byte chunks)");
  EXPECT_EQ(message([](fa::AttentionArgs &a) { a.o.data = bytes + 8; }),
            "o must be 16-byte aligned for the mma strategy (O rows are "
            "stored in 16-byte chunks)");
  EXPECT_EQ(message([](fa::AttentionArgs &a) { a.o.strides[0] += 4; }),
            "o stride 25604 in dimension 0 must be a multiple of 8 elements for "
            "the mma strategy (O rows are stored in 16-byte chunks)");
  // The wgmma strategy names itself, and TMA's limits apply to its inputs.
  fa::KernelSpec wgmma = spec;
  wgmma.strategy = fa::Strategy::wgmma;
  wgmma.headDim = 64;
  auto wgmmaMessage = [&](void (*mutate)(fa::AttentionArgs &)) {
    fa::AttentionArgs args = validArgs(64);
    mutate(args);
    return fa::checkAttentionArgs(wgmma, args).message;
  };
  EXPECT_EQ(wgmmaMessage([](fa::AttentionArgs &) {}), "");
  EXPECT_EQ(wgmmaMessage([](fa::AttentionArgs &a) { a.v.strides[2] = 68; }),
            "v stride 68 in dimension 2 must be a multiple of 8 elements for "
            "the wgmma strategy (rows are copied in 16-byte chunks)");
  EXPECT_EQ(wgmmaMessage([](fa::AttentionArgs &a) {
              a.q.strides[0] = int64_t(1) << 40; // 2^41 bytes
            }),
            "q stride 1099511627776 in dimension 0 exceeds the TMA limit of "
            "2^40 bytes (wgmma strategy)");
  // The simt strategy reads element by element: the same offsets are fine.
  spec.strategy = fa::Strategy::simt;
  spec.stages = 1;
  EXPECT_EQ(message([](fa::AttentionArgs &a) { a.k.data = bytes + 8; }), "");
}

/// Outputs must not share memory with the inputs or each other; empty
/// tensors overlap nothing.
TEST(ArgumentChecks, RejectsAliasedOutputs) {
  fa::AttentionArgs a = validArgs();
  a.o.data = a.q.data; // in-place attention
  EXPECT_EQ(checkMessage(a),
            "o overlaps q in memory (outputs must not alias the inputs)");
  a = validArgs();
  // LSE placed inside V's span (V spans 2 * 2 * 70 * 32 floats).
  a.lse.data = static_cast<const char *>(a.v.data) + 4096;
  EXPECT_EQ(checkMessage(a),
            "lse overlaps v in memory (outputs must not alias the inputs)");
  a = validArgs();
  a.lse.data = static_cast<const char *>(a.o.data) + 64;
  EXPECT_EQ(checkMessage(a), "o overlaps lse in memory");
  // Adjacent but disjoint: fine.
  a = validArgs();
  a.o.data = static_cast<const char *>(a.q.data) + 2 * 8 * 100 * 32 * 4;
  EXPECT_EQ(checkMessage(a), "");
  // An empty tensor at an input's address is not an overlap.
  a = validArgs();
  for (fa::TensorArg *t : {&a.q, &a.o, &a.lse})
    t->sizes[2] = 0;
  a.o.data = a.q.data;
  EXPECT_EQ(checkMessage(a), "");
}

TEST(ArgumentChecks, EmptyTensorsMayBeNull) {
  fa::AttentionArgs a = validArgs();
  a.k.sizes[2] = a.v.sizes[2] = 0; // no keys: O = 0, LSE = -inf
  a.k.data = a.v.data = nullptr;
  EXPECT_EQ(checkMessage(a), "");
}

//===----------------------------------------------------------------------===//
// Without a driver, and the C ABI
//===----------------------------------------------------------------------===//

TEST(NoDriver, EveryLaunchReportsNoDriver) {
  TempDir dir;
  auto runtime = makeRuntime(dir.str());
  if (runtime->hasDriver())
    GTEST_SKIP() << "a CUDA driver is present; the GPU suite covers launches";
  EXPECT_NE(runtime->driverError().find("no CUDA"), std::string::npos)
      << runtime->driverError();
  fa::Result r = runtime->forward(smallSpec(), validArgs());
  EXPECT_EQ(r.status, fa::Status::noDriver);
  EXPECT_EQ(r.message, runtime->driverError());
  r = runtime->load(smallSpec());
  EXPECT_EQ(r.status, fa::Status::noDriver);
  // Bad arguments are still reported as such, before the driver.
  fa::AttentionArgs bad = validArgs();
  bad.q.data = nullptr;
  EXPECT_EQ(runtime->forward(smallSpec(), bad).status,
            fa::Status::invalidArgument);
}

//===----------------------------------------------------------------------===//
// Resolved requests: a request seen before costs one lookup
//===----------------------------------------------------------------------===//

/// prepare() resolves a request once (validation, default choice, cache
/// key) and reuses the resolution; the SHA-256 cache key is computed once
/// per kernel, not per request or call.
TEST(ResolvedRequests, PrepareResolvesOnceAndHashesOncePerKernel) {
  TempDir dir;
  auto rt = makeRuntime(dir.str());
  fa::KernelInfo info, again;
  ASSERT_TRUE(bool(rt->prepare(smallSpec(), &info)));
  fa::RuntimeCounters c = rt->counters();
  EXPECT_EQ(c.requestsResolved, 1);
  EXPECT_EQ(c.requestsReused, 0);
  EXPECT_EQ(c.cacheKeysComputed, 1);
  ASSERT_TRUE(bool(rt->prepare(smallSpec(), &again)));
  c = rt->counters();
  EXPECT_EQ(c.requestsResolved, 1);
  EXPECT_EQ(c.requestsReused, 1);
  EXPECT_EQ(c.cacheKeysComputed, 1);
  EXPECT_EQ(again.source, fa::KernelSource::memoryCache);
  EXPECT_EQ(again.key, info.key);
  // The same kernel asked for with its strategy written out: another
  // request, the same kernel, no second key.
  fa::KernelSpec spelled = smallSpec();
  spelled.strategy = fa::Strategy::simt;
  ASSERT_TRUE(bool(rt->prepare(spelled, &again)));
  c = rt->counters();
  EXPECT_EQ(c.requestsResolved, 2);
  EXPECT_EQ(c.cacheKeysComputed, 1);
  EXPECT_EQ(again.key, info.key);
  EXPECT_EQ(again.source, fa::KernelSource::memoryCache);
  // An invalid spec is never remembered: every call fails alike.
  fa::KernelSpec bad = smallSpec();
  bad.headDim = 0;
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(rt->prepare(bad).message, "head-dim must be in [1, 512], got 0");
  EXPECT_EQ(rt->counters().requestsResolved, 4);
  // clearMemoryCache forgets the resolutions; the disk cache answers.
  rt->clearMemoryCache();
  ASSERT_TRUE(bool(rt->prepare(smallSpec(), &again)));
  c = rt->counters();
  EXPECT_EQ(c.requestsResolved, 5);
  EXPECT_EQ(c.cacheKeysComputed, 2);
  EXPECT_EQ(again.source, fa::KernelSource::diskCache);
  EXPECT_EQ(again.key, info.key);
}

/// A remembered default never answers an invalid request: invalid scales
/// and a deterministic forward are refused after the valid request they
/// would once have been folded into was prepared.
TEST(ResolvedRequests, InvalidRequestsAreNeverAnsweredFromMemory) {
  TempDir dir;
  auto rt = makeRuntime(dir.str());
  fa::KernelSpec valid = smallSpec();
  valid.blockM = valid.blockN = valid.numWarps = 0; // defaults to choose
  ASSERT_TRUE(bool(rt->prepare(valid)));
  for (double scale : {-1.0, std::nan(""), -double(INFINITY), double(INFINITY),
                       1e-300}) {
    fa::KernelSpec bad = valid;
    bad.scale = scale;
    fa::Result r = rt->prepare(bad);
    EXPECT_EQ(r.status, fa::Status::invalidArgument) << scale;
    EXPECT_NE(r.message.find("softmax scale must be positive and finite"),
              std::string::npos)
        << r.message;
  }
  fa::KernelSpec deterministicForward = valid;
  deterministicForward.deterministic = true;
  fa::Result r = rt->prepare(deterministicForward);
  EXPECT_EQ(r.status, fa::Status::invalidArgument);
  EXPECT_NE(r.message.find("deterministic applies to the backward"),
            std::string::npos)
      << r.message;
}

/// Variants are kernels of their own: two specs that differ only in their
/// score_mod or mask_mod text resolve apart and compile two kernels (with
/// distinct names and cache keys), and each comes back from memory.
TEST(ResolvedRequests, VariantsResolveApart) {
  TempDir dir;
  auto rt = makeRuntime(dir.str());
  fa::KernelSpec window = smallSpec(), wider = smallSpec(),
                 capped = smallSpec();
  window.maskMod = fa::variants::slidingWindow(16, 0);
  wider.maskMod = fa::variants::slidingWindow(17, 0);
  capped.scoreMod = fa::variants::softcap(20.0);
  fa::KernelInfo a, b, c, again;
  ASSERT_TRUE(bool(rt->prepare(window, &a)));
  ASSERT_TRUE(bool(rt->prepare(wider, &b)));
  ASSERT_TRUE(bool(rt->prepare(capped, &c)));
  EXPECT_EQ(rt->counters().requestsResolved, 3);
  EXPECT_EQ(rt->counters().cacheKeysComputed, 3);
  EXPECT_NE(a.key, b.key);
  EXPECT_NE(a.name, b.name);
  EXPECT_NE(a.key, c.key);
  ASSERT_TRUE(bool(rt->prepare(wider, &again)));
  EXPECT_EQ(again.key, b.key);
  EXPECT_EQ(again.source, fa::KernelSource::memoryCache);
  // A text that is not a variant fails to compile, naming the problem.
  fa::KernelSpec bad = smallSpec();
  bad.maskMod = "func.func @mask_mod() -> i1 {\n  %t = arith.constant true\n"
                "  return %t : i1\n}\n";
  fa::Result r = rt->prepare(bad);
  EXPECT_EQ(r.status, fa::Status::compileError);
  EXPECT_NE(r.message.find("mask_mod region must take"), std::string::npos)
      << r.message;
}

/// A default whose variant loads a captured tensor by the key (the
/// documents' ids) compiles one candidate, the tile the wide ones' spills
/// left (mlir::fa::variantTraits ranks it first): one kernel, one key.
TEST(ResolvedRequests, KeyIndexedCapturesCompileOneCandidate) {
  if (llvm::Expected<std::string> ptxas = fa::findPtxas(); !ptxas)
    GTEST_SKIP() << llvm::toString(ptxas.takeError());
  TempDir dir;
  auto rt = makeRuntime(dir.str(), /*diskCache=*/false);
  fa::KernelSpec spec;
  spec.dtype = fa::ElementType::bf16;
  spec.headDim = 128;
  spec.causal = true;
  spec.arch = "sm_90a";
  spec.strategy = fa::Strategy::wgmma;
  spec.maskMod = fa::variants::document();
  spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
  fa::KernelInfo info;
  fa::Result r = rt->prepare(spec, &info);
  ASSERT_TRUE(bool(r)) << r.message;
  EXPECT_EQ(rt->counters().cacheKeysComputed, 1);
  EXPECT_EQ(std::make_pair(info.spec.blockM, info.spec.blockN),
            std::make_pair(int64_t(128), int64_t(64)));
  EXPECT_EQ(info.ptxas.spilledBytes(), 0);
}

/// A forward whose request was resolved (here by prepare() for its length;
/// on a GPU by an earlier forward) checks the arguments once, against the
/// kernel's spec, and neither validates nor hashes. Bad arguments fail
/// with the message a first call gives. Without a driver the launch itself
/// reports noDriver.
TEST(ResolvedRequests, WarmForwardChecksOnceNeitherValidatesNorHashes) {
  TempDir dir, coldDir;
  auto rt = makeRuntime(dir.str());
  if (rt->hasDriver())
    GTEST_SKIP() << "a CUDA driver is present; the GPU suite covers launches";
  fa::KernelSpec spec = smallSpec(); // strategy auto: defaults by length
  fa::AttentionArgs args = validArgs(); // S = 100 and 70: bucket 128
  // Without a driver a first forward resolves nothing: it checks and stops.
  EXPECT_EQ(rt->forward(spec, args).status, fa::Status::noDriver);
  fa::RuntimeCounters c = rt->counters();
  EXPECT_EQ(c.requestsResolved, 0);
  EXPECT_EQ(c.argumentChecks, 1);
  ASSERT_TRUE(bool(rt->prepare(spec, nullptr, 100)));
  fa::RuntimeCounters before = rt->counters();
  EXPECT_EQ(before.requestsResolved, 1);
  for (int i = 0; i < 3; ++i) {
    fa::Result r = rt->forward(spec, args);
    EXPECT_EQ(r.status, fa::Status::noDriver);
    EXPECT_EQ(r.message, rt->driverError());
  }
  c = rt->counters();
  EXPECT_EQ(c.requestsResolved, before.requestsResolved);
  EXPECT_EQ(c.cacheKeysComputed, before.cacheKeysComputed);
  EXPECT_EQ(c.requestsReused, before.requestsReused + 3);
  EXPECT_EQ(c.argumentChecks, before.argumentChecks + 3);

  auto cold = makeRuntime(coldDir.str());
  struct Case {
    const char *expected;
    void (*mutate)(fa::AttentionArgs &);
  };
  Case cases[] = {
      {"q is a null pointer", [](fa::AttentionArgs &a) { a.q.data = nullptr; }},
      {"k head dim 64 does not match the kernel's head dim 32",
       [](fa::AttentionArgs &a) { a.k.sizes[3] = 64; }},
      {"lse shape [2, 4, 100] must be q's [B, H, S] = [2, 8, 100]",
       [](fa::AttentionArgs &a) { a.lse.sizes[1] = 4; }},
      {"o overlaps q in memory (outputs must not alias the inputs)",
       [](fa::AttentionArgs &a) { a.o.data = a.q.data; }},
  };
  for (const Case &bad : cases) {
    fa::AttentionArgs a = validArgs();
    bad.mutate(a);
    fa::Result warm = rt->forward(spec, a), first = cold->forward(spec, a);
    EXPECT_EQ(warm.status, fa::Status::invalidArgument);
    EXPECT_EQ(warm.message, bad.expected);
    EXPECT_EQ(first.message, bad.expected);
  }
  EXPECT_EQ(rt->counters().requestsReused, before.requestsReused + 7);
  // What depends on the request is checked however warm the kernel is.
  fa::KernelSpec backward = spec;
  backward.backward = true;
  EXPECT_EQ(rt->forward(backward, args).message,
            "forward() runs a forward spec; this one is a backward (call "
            "backward())");
  fa::KernelSpec wider = spec;
  wider.headDim = 64;
  EXPECT_EQ(rt->forward(wider, args).message,
            "q head dim 32 does not match the kernel's head dim 64");
  fa::KernelSpec invalid = spec;
  invalid.numWarps = 99;
  EXPECT_EQ(rt->forward(invalid, args).message,
            "num-warps must be in [1, 32], got 99");
  EXPECT_EQ(rt->counters().requestsResolved, before.requestsResolved);
}

/// Forward and backward of one spec are two requests, and so are two length
/// buckets of a forward with defaults to choose; a backward's defaults do
/// not depend on the length. Autotuning keys its choices apart from
/// prepare()'s.
TEST(ResolvedRequests, DirectionsAndLengthBucketsResolveApart) {
  TempDir dir;
  auto rt = makeRuntime(dir.str());
  if (rt->hasDriver())
    GTEST_SKIP() << "a CUDA driver is present; the GPU suite covers launches";
  fa::KernelSpec spec = smallSpec(); // strategy auto: defaults by length
  spec.blockM = 16;
  spec.numWarps = 4;
  fa::KernelSpec backwardSpec = spec;
  backwardSpec.backward = true;
  auto reused = [&] { return rt->counters().requestsReused; };

  // The backward, resolved: a forward of the same spec does not use it,
  // with defaults to choose or without (then neither has a length bucket).
  fa::KernelSpec exact = spec;
  exact.strategy = fa::Strategy::simt;
  fa::KernelSpec exactBackward = exact;
  exactBackward.backward = true;
  ASSERT_TRUE(bool(rt->prepare(exactBackward)));
  EXPECT_EQ(rt->forward(exact, validArgs()).status, fa::Status::noDriver);
  EXPECT_EQ(reused(), 0);
  EXPECT_EQ(rt->backward(exact, validBackwardArgs()).status,
            fa::Status::noDriver);
  EXPECT_EQ(reused(), 1);
  ASSERT_TRUE(bool(rt->prepare(backwardSpec)));
  EXPECT_EQ(rt->forward(spec, validArgs()).status, fa::Status::noDriver);
  EXPECT_EQ(reused(), 1);
  fa::AttentionBackwardArgs backwardArgs = validBackwardArgs();
  EXPECT_EQ(rt->backward(spec, backwardArgs).status, fa::Status::noDriver);
  EXPECT_EQ(reused(), 2);
  // ... at any length.
  for (fa::TensorArg *t : {&backwardArgs.q, &backwardArgs.o, &backwardArgs.lse,
                           &backwardArgs.gradOutput, &backwardArgs.gradQuery})
    t->sizes[2] = 5000;
  for (int d = 0; d < 2; ++d) {
    backwardArgs.q.strides[d] *= 50;
    backwardArgs.o.strides[d] *= 50;
    backwardArgs.gradOutput.strides[d] *= 50;
    backwardArgs.gradQuery.strides[d] *= 50;
    backwardArgs.lse.strides[d] *= 50;
  }
  EXPECT_EQ(rt->backward(spec, backwardArgs).message, rt->driverError());
  EXPECT_EQ(reused(), 3);

  // The forward at S = 100 (bucket 128): a forward at S = 5000 (bucket
  // 8192) is another request.
  ASSERT_TRUE(bool(rt->prepare(spec, nullptr, 100)));
  fa::AttentionArgs longer = validArgs();
  for (fa::TensorArg *t : {&longer.q, &longer.o, &longer.lse})
    t->sizes[2] = 5000;
  for (int d = 0; d < 2; ++d)
    for (fa::TensorArg *t : {&longer.q, &longer.o, &longer.lse})
      t->strides[d] *= 50;
  EXPECT_EQ(rt->forward(spec, longer).status, fa::Status::noDriver);
  EXPECT_EQ(reused(), 3);
  EXPECT_EQ(rt->forward(spec, validArgs()).status, fa::Status::noDriver);
  EXPECT_EQ(reused(), 4);
  ASSERT_TRUE(bool(rt->prepare(spec, nullptr, 5000)));
  EXPECT_EQ(rt->forward(spec, longer).status, fa::Status::noDriver);
  EXPECT_EQ(reused(), 5);
  // Four requests, two kernels (the simt forward does not rank by length;
  // the exact backward is the defaulted one's kernel).
  fa::RuntimeCounters c = rt->counters();
  EXPECT_EQ(c.requestsResolved, 4);
  EXPECT_EQ(c.cacheKeysComputed, 2);

  // With autotuning a forward's choice is timed, not prepare()'s.
  fa::RuntimeOptions options;
  options.cacheDir = dir.str();
  options.autotune = true;
  std::unique_ptr<fa::Runtime> tuning;
  ASSERT_TRUE(bool(fa::Runtime::create(options, tuning)));
  ASSERT_TRUE(bool(tuning->prepare(spec, nullptr, 100)));
  EXPECT_EQ(tuning->forward(spec, validArgs()).status, fa::Status::noDriver);
  EXPECT_EQ(tuning->counters().requestsReused, 0);
}

TEST(CApi, ReportsErrorsAndPreparesKernels) {
  TempDir dir;
  fa_runtime *runtime = nullptr;
  ASSERT_EQ(fa_runtime_create(dir.str().c_str(), 0, &runtime), FA_OK)
      << fa_last_error();
  EXPECT_EQ(fa_attention_forward(runtime, nullptr, nullptr, nullptr, nullptr,
                                 nullptr, FA_F32, 0, 0.0, nullptr, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "a tensor descriptor is a null pointer");
  EXPECT_EQ(fa_prepare_kernel(runtime, 32, 7, 0, 0.0, nullptr,
                              nullptr),
            FA_ERROR_INVALID_ARGUMENT);

  fa_kernel_config config = {sizeof(fa_kernel_config), 8, 32, 8, "sm_90a", 0,
                             FA_STRATEGY_AUTO,         0, 0};
  fa_kernel_info info = cInfo();
  ASSERT_EQ(fa_prepare_kernel(runtime, 32, FA_F32, 1, 0.0, &config, &info),
            FA_OK)
      << fa_last_error();
  EXPECT_STREQ(info.name, "fa_fwd_d32_f32_causal_8x32_w8");
  EXPECT_EQ(std::string(info.key).size(), 64u);
  EXPECT_EQ(info.num_threads, 256);
  EXPECT_EQ(info.source, 0);
  // Compiled here: the split of compile_seconds, each stage timed.
  EXPECT_GT(info.lower_seconds, 0.0);
  EXPECT_GT(info.codegen_seconds, 0.0);
  EXPECT_GT(info.assemble_seconds, 0.0) << info.assembler;
  EXPECT_LE(info.lower_seconds + info.codegen_seconds + info.assemble_seconds,
            info.compile_seconds);
  ASSERT_EQ(fa_prepare_kernel(runtime, 32, FA_F32, 1, 0.0, &config, &info),
            FA_OK);
  EXPECT_EQ(info.source, 2);

  // The sequence length the defaults are chosen for.
  fa_kernel_config byLength = {sizeof(fa_kernel_config), 0, 0, 0,   "sm_90a", 0,
                               FA_STRATEGY_AUTO,         0, 0, 1000};
  ASSERT_EQ(fa_prepare_kernel(runtime, 64, FA_F16, 0, 0.0, &byLength, &info),
            FA_OK)
      << fa_last_error();
  EXPECT_STREQ(info.name, "fa_fwd_d64_f16_full_128x128_w8_s2_wgmma");
  byLength.sequence_length = -1;
  EXPECT_EQ(fa_prepare_kernel(runtime, 64, FA_F16, 0, 0.0, &byLength, &info),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(),
               "sequence_length must be >= 0 (0 = not known), got -1");

  if (!fa_runtime_has_driver(runtime)) {
    fa_tensor t = {nullptr, {0, 0, 0, 32}, {0, 0, 0, 1}};
    EXPECT_EQ(fa_attention_forward(runtime, &t, &t, &t, &t, &t, FA_F32, 0, 0.0,
                                   nullptr, nullptr),
              FA_ERROR_NO_DRIVER);
    EXPECT_NE(std::string(fa_last_error()).find("no CUDA driver"),
              std::string::npos);
  }
  fa_runtime_destroy(runtime);
}

/// The C ABI's varlen forward: its offset tables must be given, its
/// kernels are prepared with config->varlen, and the plain forward never
/// takes them (config->varlen is the varlen call's to set).
TEST(CApi, VarlenForward) {
  TempDir dir;
  fa_runtime *runtime = nullptr;
  ASSERT_EQ(fa_runtime_create(dir.str().c_str(), 0, &runtime), FA_OK)
      << fa_last_error();
  fa_tensor t = {nullptr, {1, 2, 0, 32}, {0, 0, 32, 1}};
  EXPECT_EQ(fa_attention_varlen_forward(runtime, &t, &t, &t, &t, &t, nullptr,
                                        &t, 0, 0, nullptr, FA_F32, 0, 0.0,
                                        nullptr, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "a cu_seqlens descriptor is a null pointer");
  EXPECT_EQ(fa_attention_varlen_backward(runtime, &t, &t, &t, &t, &t, &t, &t,
                                         &t, &t, &t, nullptr, 0, 0, nullptr,
                                         FA_F32, 0, 0.0, nullptr, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "a cu_seqlens descriptor is a null pointer");
  // seqused_k: the varlen call with the used keys of each sequence.
  EXPECT_EQ(fa_attention_varlen_kvcache_forward(
                runtime, &t, &t, &t, &t, &t, &t, &t, 0, 0, nullptr, nullptr,
                FA_F32, 0, 0.0, nullptr, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "the kv_lens descriptor is a null pointer");
  EXPECT_EQ(fa_attention_varlen_kvcache_forward(
                runtime, &t, &t, &t, &t, &t, nullptr, &t, 0, 0, &t, nullptr,
                FA_F32, 0, 0.0, nullptr, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "a cu_seqlens descriptor is a null pointer");
  if (!fa_runtime_has_driver(runtime)) {
    // Three offsets (two sequences), three lengths: named.
    const void *device = reinterpret_cast<const void *>(uintptr_t(1) << 40);
    fa_tensor offsets = {device, {3, 0, 0, 0}, {1, 0, 0, 0}};
    fa_tensor lens = {device, {3, 0, 0, 0}, {1, 0, 0, 0}};
    fa_tensor rows = {device, {1, 2, 4, 32}, {256, 128, 32, 1}};
    fa_tensor lse = {device, {1, 2, 4, 0}, {8, 4, 1, 0}};
    EXPECT_EQ(fa_attention_varlen_kvcache_forward(
                  runtime, &rows, &rows, &rows, &rows, &lse, &offsets,
                  &offsets, 4, 4, &lens, nullptr, FA_F32, 0, 0.0, nullptr,
                  nullptr),
              FA_ERROR_INVALID_ARGUMENT);
    EXPECT_STREQ(fa_last_error(), "kv_lens holds 3 lengths; it needs one per "
                                  "sequence (2)");
  }
  fa_kernel_config config = cConfig();
  config.arch = "sm_90a";
  config.varlen = 1;
  fa_kernel_info info = cInfo();
  ASSERT_EQ(fa_prepare_kernel(runtime, 64, FA_F16, 1, 0.0, &config, &info),
            FA_OK)
      << fa_last_error();
  EXPECT_NE(std::string(info.name).find("_varlen"), std::string::npos)
      << info.name;
  config.varlen = 2;
  EXPECT_EQ(fa_prepare_kernel(runtime, 64, FA_F16, 1, 0.0, &config, &info),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "varlen must be 0 or 1, got 2");
  if (!fa_runtime_has_driver(runtime)) {
    // One offset (no sequence); a null table would be named.
    fa_tensor offsets = {nullptr, {1, 0, 0, 0}, {1, 0, 0, 0}};
    EXPECT_EQ(fa_attention_varlen_forward(runtime, &t, &t, &t, &t, &t,
                                          &offsets, &offsets, 0, 0, nullptr,
                                          FA_F32, 0, 0.0, nullptr, nullptr),
              FA_ERROR_INVALID_ARGUMENT);
    EXPECT_STREQ(fa_last_error(), "cu_seqlens_q is a null pointer");
    offsets.data = reinterpret_cast<const void *>(uintptr_t(1) << 40);
    EXPECT_EQ(fa_attention_varlen_forward(runtime, &t, &t, &t, &t, &t,
                                          &offsets, &offsets, 0, 0, nullptr,
                                          FA_F32, 0, 0.0, nullptr, nullptr),
              FA_ERROR_NO_DRIVER)
        << fa_last_error();
  }
  fa_runtime_destroy(runtime);
}

/// The kvcache call: a null lengths descriptor is named, config->kv_lens
/// prepares the kernel that takes them, and the lengths' checks run before
/// the driver is needed.
TEST(CApi, KvCacheForward) {
  TempDir dir;
  fa_runtime *runtime = nullptr;
  ASSERT_EQ(fa_runtime_create(dir.str().c_str(), 0, &runtime), FA_OK)
      << fa_last_error();
  fa_tensor t = {nullptr, {2, 2, 0, 32}, {0, 0, 32, 1}};
  EXPECT_EQ(fa_attention_kvcache_forward(runtime, &t, &t, &t, &t, &t, nullptr,
                                         nullptr, FA_F32, 0, 0.0, nullptr,
                                         nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "the kv_lens descriptor is a null pointer");
  fa_kernel_config config = cConfig();
  config.arch = "sm_90a";
  config.kv_lens = 1;
  fa_kernel_info info = cInfo();
  ASSERT_EQ(fa_prepare_kernel(runtime, 64, FA_F16, 1, 0.0, &config, &info),
            FA_OK)
      << fa_last_error();
  EXPECT_NE(std::string(info.name).find("_kvlens"), std::string::npos)
      << info.name;
  // auto takes wgmma on sm_90a (its tile past a length clears V's rows).
  EXPECT_NE(std::string(info.name).find("_wgmma"), std::string::npos)
      << info.name;
  config.kv_lens = 2;
  EXPECT_EQ(fa_prepare_kernel(runtime, 64, FA_F16, 1, 0.0, &config, &info),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "kv_lens must be 0 or 1, got 2");
  if (!fa_runtime_has_driver(runtime)) {
    fa_tensor lens = {reinterpret_cast<const void *>(uintptr_t(1) << 40),
                      {3, 0, 0, 0},
                      {1, 0, 0, 0}};
    EXPECT_EQ(fa_attention_kvcache_forward(runtime, &t, &t, &t, &t, &t, &lens,
                                           nullptr, FA_F32, 0, 0.0, nullptr,
                                           nullptr),
              FA_ERROR_INVALID_ARGUMENT);
    EXPECT_STREQ(fa_last_error(), "kv_lens holds 3 lengths; it needs one per "
                                  "batch entry (2)");
  }
  // Split-KV parts: out of range, or asked of a strategy that does not
  // split, named before anything runs (or a driver is needed).
  fa_tensor q16 = {reinterpret_cast<const void *>(uintptr_t(1) << 40),
                   {2, 2, 1, 128},
                   {256, 128, 128, 1}};
  fa_tensor lse16 = {q16.data, {2, 2, 1, 0}, {2, 1, 1, 0}};
  fa_tensor lens = {q16.data, {2, 0, 0, 0}, {1, 0, 0, 0}};
  fa_attention_extras extras = cExtras();
  // The kvcache call on q16's problem with the cache `kv` and `extras`.
  auto kvcache = [&](const fa_tensor &kv) {
    return fa_attention_kvcache_forward(runtime, &q16, &kv, &kv, &q16, &lse16,
                                        &lens, &extras, FA_F16, 0, 0.0, nullptr,
                                        nullptr);
  };
  for (int64_t parts : {-1, 129}) {
    extras.kv_splits = parts;
    EXPECT_EQ(kvcache(q16), FA_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(fa_last_error()),
              "kv splits must be 0 (chosen by the runtime), 1 (no split) or "
              "up to 128, got " +
                  std::to_string(parts));
  }
  // A paged cache: the table is the kvcache call's; its rows are the batch
  // entries.
  extras.kv_splits = 0;
  fa_tensor table = {q16.data, {2, 3, 0, 0}, {3, 1, 0, 0}};
  fa_tensor pool = {q16.data, {9, 2, 16, 128}, {4096, 2048, 128, 1}};
  extras.block_table = &table;
  EXPECT_EQ(fa_attention_forward_ex(runtime, &q16, &pool, &pool, &q16, &lse16,
                                    &extras, FA_F16, 0, 0.0, nullptr, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "a block_table (paged KV cache) is taken by "
                                "fa_attention_kvcache_forward and the varlen "
                                "forwards only");
  fa_tensor tallTable = {q16.data, {3, 3, 0, 0}, {3, 1, 0, 0}};
  extras.block_table = &tallTable;
  EXPECT_EQ(kvcache(pool), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(),
               "block_table has 3 rows; it needs one per batch entry (2)");
  // Pages no K/V tile divides (24) are read row by row: the page checks
  // pass and the call stops at the next one (these tensors overlap).
  fa_tensor oddPool = {q16.data, {9, 2, 24, 128}, {6144, 3072, 128, 1}};
  extras.block_table = &table;
  EXPECT_EQ(kvcache(oddPool), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "o overlaps q in memory (outputs must not "
                                "alias the inputs)");
  // A pool without pages, or a table without columns: named.
  fa_tensor emptyTable = {q16.data, {2, 0, 0, 0}, {1, 1, 0, 0}};
  extras.block_table = &emptyTable;
  EXPECT_EQ(kvcache(pool), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error())
                .find("a paged cache needs at least one page of at least one "
                      "row and a block_table of at least one column"),
            std::string::npos)
      << fa_last_error();
  // A paged varlen batch: a table row per sequence (K, V: the pool, not
  // packed); a sequence's keys at most its row's pages' rows (3 x 16).
  {
    fa_tensor packedQ = {q16.data, {1, 2, 5, 128}, {1280, 128, 256, 1}};
    fa_tensor packedLse = {q16.data, {1, 2, 5, 0}, {10, 5, 1, 0}};
    fa_tensor offsets = {q16.data, {3, 0, 0, 0}, {1, 0, 0, 0}};
    auto varlen = [&](int64_t maxSeqlenK) {
      return fa_attention_varlen_forward(
          runtime, &packedQ, &pool, &pool, &packedQ, &packedLse, &offsets,
          &offsets, 5, maxSeqlenK, &extras, FA_F16, 0, 0.0, nullptr, nullptr);
    };
    extras.block_table = &tallTable;
    EXPECT_EQ(varlen(48), FA_ERROR_INVALID_ARGUMENT);
    EXPECT_STREQ(fa_last_error(),
                 "block_table has 3 rows; it needs one per sequence (2)");
    extras.block_table = &table;
    EXPECT_EQ(varlen(49), FA_ERROR_INVALID_ARGUMENT);
    EXPECT_STREQ(fa_last_error(), "max_seqlen_k must be in [0, 48] (a table "
                                  "row's pages' rows), got 49");
    // Within them, the call stops at the next check (these overlap).
    EXPECT_EQ(varlen(48), FA_ERROR_INVALID_ARGUMENT);
    EXPECT_STREQ(fa_last_error(), "o overlaps q in memory (outputs must not "
                                  "alias the inputs)");
  }
  // cache_batch_idx: the kvcache call's; one entry per batch entry; not
  // with a page table.
  extras.block_table = nullptr;
  fa_tensor index = {q16.data, {3, 0, 0, 0}, {1, 0, 0, 0}};
  extras.cache_batch_idx = &index;
  EXPECT_EQ(fa_attention_forward_ex(runtime, &q16, &pool, &pool, &q16, &lse16,
                                    &extras, FA_F16, 0, 0.0, nullptr, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "cache_batch_idx is taken by "
                                "fa_attention_kvcache_forward only");
  EXPECT_EQ(kvcache(pool), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(),
               "cache_batch_idx holds 3 entries; it needs one per batch entry "
               "(2)");
  index.sizes[0] = 2;
  extras.block_table = &table;
  EXPECT_EQ(kvcache(pool), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "cache_batch_idx does not take a paged KV "
                                "cache (block_table) yet");
  extras.cache_batch_idx = nullptr;
  extras.block_table = nullptr;
  extras.kv_splits = 4;
  fa_kernel_config wgmma = cConfig();
  wgmma.strategy = FA_STRATEGY_WGMMA;
  wgmma.arch = "sm_90a";
  // wgmma splits the keys when asked to by name: the request passes the
  // spec's checks and stops at the arguments' (these tensors overlap).
  EXPECT_EQ(fa_attention_forward_ex(runtime, &q16, &q16, &q16, &q16, &lse16,
                                    &extras, FA_F16, 0, 0.0, &wgmma, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "o overlaps q in memory (outputs must not "
                                "alias the inputs)");
  fa_runtime_destroy(runtime);
}

/// FP8 through the C ABI: FA_E4M3 takes the three descales and O's type in
/// the extras, the other dtypes neither; the descales' shapes are checked
/// with the other arguments, before anything runs.
TEST(CApi, Float8TakesDescalesAndAnOutputType) {
  TempDir dir;
  fa_runtime *runtime = nullptr;
  ASSERT_EQ(fa_runtime_create(dir.str().c_str(), 0, &runtime), FA_OK)
      << fa_last_error();
  // Distinct (never dereferenced) device addresses: nothing overlaps.
  auto at = [](uintptr_t gib) {
    return reinterpret_cast<const void *>(gib << 30);
  };
  fa_tensor q = {at(1), {2, 4, 128, 128}, {65536, 16384, 128, 1}};
  fa_tensor k = {at(2), {2, 2, 128, 128}, {32768, 16384, 128, 1}};
  fa_tensor v = {at(3), {2, 2, 128, 128}, {32768, 16384, 128, 1}};
  fa_tensor o = {at(4), {2, 4, 128, 128}, {65536, 16384, 128, 1}};
  fa_tensor lse = {at(5), {2, 4, 128, 0}, {512, 128, 1, 0}};
  fa_tensor qd = {at(6), {2, 2, 0, 0}, {2, 1, 0, 0}};
  fa_tensor kd = {at(7), {2, 2, 0, 0}, {0, 0, 0, 0}}; // an expanded scalar
  fa_tensor vd = {at(8), {2, 2, 0, 0}, {2, 1, 0, 0}};
  fa_kernel_config config = cConfig();
  config.arch = "sm_90a";
  fa_attention_extras extras = cExtras();
  auto forward = [&](int dtype) {
    fa_status status =
        fa_attention_forward_ex(runtime, &q, &k, &v, &o, &lse, &extras, dtype,
                                0, 0.0, &config, nullptr);
    return std::make_pair(status, std::string(fa_last_error()));
  };
  using Outcome = std::pair<fa_status, std::string>;
  EXPECT_EQ(forward(FA_E4M3),
            Outcome(FA_ERROR_INVALID_ARGUMENT,
                    "an FA_E4M3 forward takes extras->q_descale, k_descale "
                    "and v_descale (f32 [B, Hkv] each)"));
  extras.q_descale = &qd;
  extras.k_descale = &kd;
  EXPECT_EQ(forward(FA_E4M3).first, FA_ERROR_INVALID_ARGUMENT);
  extras.v_descale = &vd;
  EXPECT_EQ(forward(FA_BF16),
            Outcome(FA_ERROR_INVALID_ARGUMENT,
                    "descales (extras->q_descale, k_descale, v_descale) go "
                    "with dtype FA_E4M3 only"));
  extras.out_dtype = 7;
  EXPECT_EQ(forward(FA_E4M3),
            Outcome(FA_ERROR_INVALID_ARGUMENT,
                    "extras->out_dtype must be 0, FA_F16 (1) or FA_BF16 (2), "
                    "got 7"));
  extras = cExtras();
  extras.out_dtype = FA_F16;
  EXPECT_EQ(forward(FA_BF16),
            Outcome(FA_ERROR_INVALID_ARGUMENT,
                    "extras->out_dtype is O's type for dtype FA_E4M3 only (0 "
                    "otherwise)"));
  // A descale of the wrong shape: named with the shape it needs.
  fa_tensor wide = {at(9), {2, 4, 0, 0}, {4, 1, 0, 0}};
  extras = cExtras();
  extras.q_descale = &wide;
  extras.k_descale = &kd;
  extras.v_descale = &vd;
  Outcome wrong = forward(FA_E4M3);
  EXPECT_EQ(wrong.first, FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(wrong.second,
            "q_descale is [2, 4]; it needs one f32 factor per batch entry and "
            "K/V head [2, 2]");
  // Strides past 64-bit indexing: named, not computed with.
  fa_tensor far = {at(9), {2, 2, 0, 0}, {INT64_MAX, 1, 0, 0}};
  extras.q_descale = &far;
  wrong = forward(FA_E4M3);
  EXPECT_EQ(wrong.first, FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(wrong.second,
            "q_descale spans more elements than 64-bit indexing can address");
  // The backward takes 16-bit inputs.
  config.backward = 1;
  EXPECT_EQ(fa_prepare_kernel(runtime, 128, FA_E4M3, 0, 0.0, &config, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "the backward takes 16-bit inputs: e4m3 (FP8) "
                                "is a forward format (quantize in the forward "
                                "only)");
  fa_runtime_destroy(runtime);
}

/// The C ABI checks codes and flags by value and passes the scale on for
/// KernelSpec::validate, whose texts Python and fa-compile share: NaN, a
/// negative scale or one beyond float32 is an error, never the default; a
/// flag is 0 or 1; deterministic is the backward's.
// The C ABI's strategy codes are the registry's: each registered strategy
// has the code its FA_STRATEGY_ constant names, and the codes are distinct.
TEST(CApi, StrategyCodesAreTheRegistrys) {
  EXPECT_EQ(fa::lookupStrategy("simt")->abiCode, FA_STRATEGY_SIMT);
  EXPECT_EQ(fa::lookupStrategy("mma")->abiCode, FA_STRATEGY_MMA);
  EXPECT_EQ(fa::lookupStrategy("wgmma")->abiCode, FA_STRATEGY_WGMMA);
  for (const fa::StrategyModel *model : fa::registeredStrategies()) {
    EXPECT_NE(model->abiCode, FA_STRATEGY_AUTO) << model->name;
    EXPECT_EQ(fa::lookupStrategyCode(model->abiCode), model) << model->name;
  }
  EXPECT_EQ(fa::lookupStrategyCode(FA_STRATEGY_AUTO), nullptr);
  EXPECT_EQ(fa::lookupStrategyCode(4), nullptr);
}

/// The versioned structs: a struct_size the library cannot read (0: not
/// set; past its own struct: a newer header) is refused, naming the sizes,
/// before anything else; fields past a struct_size read as 0 and a
/// fa_kernel_info is written only up to its struct_size.
TEST(CApi, VersionedStructsAreReadByTheirSize) {
  TempDir dir;
  fa_runtime *runtime = nullptr;
  ASSERT_EQ(fa_runtime_create(dir.str().c_str(), 0, &runtime), FA_OK)
      << fa_last_error();
  fa_kernel_config config = cConfig();
  config.block_m = 8;
  config.block_n = 32;
  config.num_warps = 8;
  config.arch = "sm_90a";
  fa_kernel_info info = cInfo();
  ASSERT_EQ(fa_prepare_kernel(runtime, 32, FA_F32, 0, 0.0, &config, &info),
            FA_OK)
      << fa_last_error();
  EXPECT_STREQ(info.name, "fa_fwd_d32_f32_full_8x32_w8");
  EXPECT_EQ(info.struct_size, int64_t(sizeof(info))); // the caller's, kept

  std::string sizes = " bytes for this library, got ";
  for (int64_t size : {int64_t(0), int64_t(-8), int64_t(sizeof(config) - 8),
                       int64_t(sizeof(config) + 8)}) {
    fa_kernel_config bad = config;
    bad.struct_size = size;
    EXPECT_EQ(fa_prepare_kernel(runtime, 32, FA_F32, 0, 0.0, &bad, &info),
              FA_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(fa_last_error(),
              "fa_kernel_config->struct_size must be sizeof(fa_kernel_config) "
              "as fa_runtime.h defines it: " +
                  std::to_string(fa::kFirstConfigSize) + " to " +
                  std::to_string(sizeof(config)) + sizes +
                  std::to_string(size) +
                  (size > int64_t(sizeof(config))
                       ? " (built against a newer fa_runtime.h?)"
                       : " (start from its _INIT macro)"));
  }
  // An info the library cannot fill is refused before the compile, and
  // left as it was.
  fa_kernel_info unset{};
  std::memset(unset.name, 'x', 4);
  EXPECT_EQ(fa_prepare_kernel(runtime, 32, FA_F32, 0, 0.0, &config, &unset),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error())
                .find("fa_kernel_info->struct_size must be "
                      "sizeof(fa_kernel_info)"),
            std::string::npos)
      << fa_last_error();
  EXPECT_EQ(unset.name[0], 'x');
  // Extras: checked before the tensors meet a driver.
  fa_tensor t{};
  fa_attention_extras extras = cExtras();
  extras.struct_size = 0;
  EXPECT_EQ(fa_attention_forward_ex(runtime, &t, &t, &t, &t, &t, &extras,
                                    FA_F32, 0, 0.0, &config, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error())
                .find("fa_attention_extras->struct_size must be"),
            std::string::npos)
      << fa_last_error();
  extras.struct_size = sizeof(extras);
  EXPECT_NE(fa_attention_forward_ex(runtime, &t, &t, &t, &t, &t, &extras,
                                    FA_F32, 0, 0.0, &config, nullptr),
            FA_OK); // the empty descriptors' own errors: not struct_size's
  EXPECT_EQ(std::string(fa_last_error()).find("struct_size"), std::string::npos)
      << fa_last_error();
  fa_runtime_destroy(runtime);

  // The reading itself: the caller's bytes up to struct_size, zero past it.
  fa_kernel_config read;
  ASSERT_EQ(fa::configFromC(&config, read), "");
  EXPECT_EQ(read.block_m, 8);
  EXPECT_STREQ(read.arch, "sm_90a");
  ASSERT_EQ(fa::configFromC(nullptr, read), "");
  EXPECT_EQ(read.struct_size, int64_t(sizeof(read)));
  EXPECT_EQ(read.block_m, 0);
}

TEST(CApi, RejectsBadCodesFlagsAndScales) {
  TempDir dir;
  fa_runtime *runtime = nullptr;
  EXPECT_EQ(fa_runtime_create(dir.str().c_str(), -7, &runtime),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(),
               "device -7 does not exist: device indices start at 0");
  ASSERT_EQ(fa_runtime_create(dir.str().c_str(), 0, &runtime), FA_OK)
      << fa_last_error();
  auto prepare = [&](int dtype, int causal, double scale,
                     const fa_kernel_config *config) {
    fa_status status =
        fa_prepare_kernel(runtime, 64, dtype, causal, scale, config, nullptr);
    return std::make_pair(status, std::string(fa_last_error()));
  };
  using Outcome = std::pair<fa_status, std::string>;
  EXPECT_EQ(prepare(7, 0, 0.0, nullptr),
            Outcome(FA_ERROR_INVALID_ARGUMENT,
                    "dtype must be FA_F32 (0), FA_F16 (1), FA_BF16 (2) or "
                    "FA_E4M3 (6), got 7"));
  EXPECT_EQ(prepare(FA_F32, 2, 0.0, nullptr),
            Outcome(FA_ERROR_INVALID_ARGUMENT, "causal must be 0 or 1, got 2"));
  const std::string scaleRule = "softmax scale must be positive and finite in "
                                "float32 (0 for the default "
                                "1/sqrt(head-dim)), got ";
  for (auto [scale, text] :
       {std::pair<double, const char *>{std::nan(""), "nan"},
        {-1.0, "-1"},
        {-INFINITY, "-inf"},
        {1e39, "1e+39"},
        {1e-46, "1e-46"}}) {
    Outcome got = prepare(FA_F32, 0, scale, nullptr);
    EXPECT_EQ(got.first, FA_ERROR_INVALID_ARGUMENT) << text;
    EXPECT_EQ(got.second.rfind(scaleRule, 0), 0u) << got.second;
  }
  fa_kernel_config config = {
      sizeof(fa_kernel_config), 0, 0, 0, nullptr, 0, 9, 0, 0};
  EXPECT_EQ(prepare(FA_F16, 0, 0.0, &config),
            Outcome(FA_ERROR_INVALID_ARGUMENT,
                    "strategy must be FA_STRATEGY_AUTO (0), FA_STRATEGY_SIMT "
                    "(1), FA_STRATEGY_MMA (2) or FA_STRATEGY_WGMMA (3), got 9"));
  config = {sizeof(fa_kernel_config), 0,  0, 0, nullptr, 0,
            FA_STRATEGY_AUTO,         -1, 0};
  EXPECT_EQ(prepare(FA_F32, 0, 0.0, &config),
            Outcome(FA_ERROR_INVALID_ARGUMENT,
                    "backward must be 0 or 1, got -1"));
  config = {sizeof(fa_kernel_config), 0, 0, 0, nullptr, 0,
            FA_STRATEGY_AUTO,         0, 1};
  EXPECT_EQ(prepare(FA_F32, 0, 0.0, &config),
            Outcome(FA_ERROR_INVALID_ARGUMENT,
                    "deterministic applies to the backward (the forward has "
                    "no accumulation across programs)"));
  fa_runtime_destroy(runtime);
}

} // namespace

/// Autotuning's pieces that need no device: the length buckets, keys that
/// change with everything a choice depends on, and stored choices that
/// read back only for their own request and bucket.
TEST(Autotune, BucketsKeysAndStoredChoices) {
  EXPECT_EQ(fa::lengthBucket(1, 1), 64);
  EXPECT_EQ(fa::lengthBucket(100, 17), 128);
  EXPECT_EQ(fa::lengthBucket(4096, 4096), 4096);
  EXPECT_EQ(fa::lengthBucket(1, 4097), 8192);

  fa::KernelSpec request;
  request.headDim = 128;
  request.dtype = fa::ElementType::f16;
  request.blockM = request.blockN = request.numWarps = request.stages = 0;
  request.arch = "sm_80";
  std::string key = fa::autotuneKey(request, 4096, "v1", "ptxas 13.0");
  EXPECT_EQ(key.rfind("autotune-", 0), 0u);
  EXPECT_NE(key, fa::autotuneKey(request, 8192, "v1", "ptxas 13.0"));
  EXPECT_NE(key, fa::autotuneKey(request, 4096, "v2", "ptxas 13.0"));
  EXPECT_NE(key, fa::autotuneKey(request, 4096, "v1", "driver 13000"));
  fa::KernelSpec causal = request;
  causal.causal = true;
  EXPECT_NE(key, fa::autotuneKey(causal, 4096, "v1", "ptxas 13.0"));

  std::vector<fa::KernelSpec> candidates = defaultCandidates(request);
  ASSERT_GE(candidates.size(), 2u);
  const fa::KernelSpec &second = candidates[1];
  std::string json = fa::tunedChoiceJson(
      key, request, 4096, second, {{candidates[0], 2.5}, {second, 1.5}});
  fa::KernelSpec chosen;
  EXPECT_EQ(fa::parseTunedChoice(json, request, 4096, chosen), "");
  EXPECT_EQ(canonicalText(chosen), canonicalText(second));
  // Stored in and read back from the disk cache, whose entries name their
  // key.
  TempDir dir;
  fa::DiskCache disk(dir.str());
  ASSERT_EQ(disk.open(), "");
  ASSERT_EQ(disk.write(key, {json, {}}), "");
  fa::CachedKernel stored;
  std::string why;
  ASSERT_EQ(disk.read(key, stored, why), fa::DiskCache::Lookup::hit) << why;
  EXPECT_EQ(fa::parseTunedChoice(stored.metadata, request, 4096, chosen), "");
  EXPECT_EQ(canonicalText(chosen), canonicalText(second));
  EXPECT_EQ(fa::parseTunedChoice(json, request, 8192, chosen),
            "it was made for another length bucket");
  EXPECT_EQ(fa::parseTunedChoice(json, causal, 4096, chosen),
            "it was made for another request");
  EXPECT_EQ(fa::parseTunedChoice("{", request, 4096, chosen).rfind(
                "not JSON", 0),
            0u);
  fa::KernelSpec bad = second;
  bad.numWarps = 99;
  EXPECT_EQ(fa::parseTunedChoice(fa::tunedChoiceJson(key, request, 4096, bad,
                                                     {}),
                                 request, 4096, chosen)
                .rfind("its tiles are invalid: num-warps must be in [1, 32]",
                       0),
            0u);
}

/// Autotuning is opt-in: RuntimeOptions::autotune or FA_AUTOTUNE=1.
TEST(Autotune, OnByOptionOrEnvironment) {
  TempDir dir;
  fa::RuntimeOptions options;
  options.cacheDir = dir.str();
  std::unique_ptr<fa::Runtime> rt;
  ::unsetenv("FA_AUTOTUNE");
  ASSERT_TRUE(bool(fa::Runtime::create(options, rt)));
  EXPECT_FALSE(rt->autotunes());
  EXPECT_EQ(rt->tuningsTimed(), 0);
  ::setenv("FA_AUTOTUNE", "1", 1);
  ASSERT_TRUE(bool(fa::Runtime::create(options, rt)));
  EXPECT_TRUE(rt->autotunes());
  ::setenv("FA_AUTOTUNE", "0", 1);
  ASSERT_TRUE(bool(fa::Runtime::create(options, rt)));
  EXPECT_FALSE(rt->autotunes());
  ::unsetenv("FA_AUTOTUNE");
  options.autotune = true;
  ASSERT_TRUE(bool(fa::Runtime::create(options, rt)));
  EXPECT_TRUE(rt->autotunes());
}

//===----------------------------------------------------------------------===//
// Attention sinks through the runtime and the C ABI
//===----------------------------------------------------------------------===//

/// A kernel with sinks is another kernel (name, key, request), takes the
/// logits after LSE (forward) or the logits and their gradient after the
/// workspaces (every backward kernel), and comes back so from the disk.
TEST(Sinks, KernelsTakeTheLogitsAndResolveApart) {
  TempDir dir;
  auto rt = makeRuntime(dir.str());
  fa::KernelSpec plain = smallSpec(), sinks = smallSpec();
  sinks.sinks = true;
  fa::KernelInfo a, b;
  ASSERT_TRUE(bool(rt->prepare(plain, &a)));
  fa::Result r = rt->prepare(sinks, &b);
  ASSERT_TRUE(bool(r)) << r.message;
  EXPECT_NE(a.key, b.key);
  EXPECT_EQ(b.name, a.name + "_sinks");
  EXPECT_EQ(rt->counters().requestsResolved, 2);
  using Operand = fa::LaunchPlan::Operand;
  ASSERT_EQ(b.launches.size(), 1u);
  EXPECT_EQ(b.launches[0].params,
            (std::vector<Operand>{Operand::query, Operand::key, Operand::value,
                                  Operand::output, Operand::lse,
                                  Operand::sinks}));
  EXPECT_EQ(fa::LaunchPlan::rankOf(Operand::sinks), 1);
  EXPECT_EQ(fa::LaunchPlan::rankOf(Operand::gradSinks), 1);
  EXPECT_EQ(fa::LaunchPlan::rankOf(Operand::lse), 3);

  fa::KernelSpec backward = sinks;
  backward.backward = true;
  backward.blockM = 16;
  backward.numWarps = 4;
  fa::KernelInfo c;
  r = rt->prepare(backward, &c);
  ASSERT_TRUE(bool(r)) << r.message;
  ASSERT_EQ(c.launches.size(), 3u);
  for (const fa::LaunchPlan &launch : c.launches) {
    EXPECT_EQ(launch.params, fa::LaunchPlan::backwardParams(false, true));
    EXPECT_EQ(launch.params.back(), Operand::gradSinks);
  }
  // The plan's operand names round-trip through the disk cache.
  auto other = makeRuntime(dir.str());
  fa::KernelInfo fromDisk;
  ASSERT_TRUE(bool(other->prepare(backward, &fromDisk)));
  EXPECT_EQ(fromDisk.source, fa::KernelSource::diskCache);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(fromDisk.launches[i].toJson(), c.launches[i].toJson());

  // The deterministic backward takes the turn counters, then (after the
  // sinks and their gradient) the query tiles' shares of the gradient.
  fa::KernelSpec deterministic = backward;
  deterministic.deterministic = true;
  fa::KernelInfo d;
  r = rt->prepare(deterministic, &d);
  ASSERT_TRUE(bool(r)) << r.message;
  ASSERT_EQ(d.launches.size(), 3u);
  for (const fa::LaunchPlan &launch : d.launches) {
    EXPECT_EQ(launch.params, fa::LaunchPlan::backwardParams(true, true));
    EXPECT_EQ(launch.params.back(), Operand::sinkShares);
  }
  EXPECT_EQ(fa::LaunchPlan::rankOf(Operand::sinkShares), 3);
  EXPECT_EQ(fa::LaunchPlan::operandNamed("sink_shares"), Operand::sinkShares);
}

/// The sinks' arguments: Hq values, a non-negative stride, a pointer; the
/// gradient contiguous and apart from every input and output.
TEST(Sinks, ArgumentChecks) {
  fa::KernelSpec spec = smallSpec();
  spec.sinks = true;
  auto sinksOf = [](int64_t heads, uintptr_t slot) {
    fa::TensorArg t;
    t.data = reinterpret_cast<const void *>((uintptr_t(1) << 40) * slot);
    t.sizes[0] = heads;
    t.strides[0] = 1;
    return t;
  };
  fa::AttentionArgs a = validArgs();
  a.sinks = sinksOf(8, 30);
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message, "");
  a.sinks.strides[0] = 0; // a broadcast logit: contiguous ones only
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "sinks must be contiguous in its last dimension (stride 1), got "
            "stride 0");
  a.sinks = sinksOf(8, 30);
  a.sinks.data = static_cast<const char *>(a.sinks.data) + 2;
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "sinks is not aligned to its 4-byte elements");
  a.sinks = sinksOf(4, 30);
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "sinks holds one f32 logit per query head: size 4 does not match "
            "the 8 query heads");
  a.sinks = sinksOf(8, 30);
  a.sinks.strides[0] = -1;
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "sinks has a negative stride -1 in dimension 0 (not supported)");
  a.sinks = sinksOf(8, 30);
  a.sinks.data = nullptr;
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "sinks is a null pointer");
  a.sinks = sinksOf(8, 30);
  a.sinks.data = a.lse.data;
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "lse overlaps sinks in memory (outputs must not alias the "
            "inputs)");
  // Without spec.sinks the tensor is not looked at.
  a.sinks = {};
  EXPECT_EQ(fa::checkAttentionArgs(smallSpec(), a).message, "");

  fa::KernelSpec backward = spec;
  backward.backward = true;
  fa::AttentionBackwardArgs g = validBackwardArgs();
  g.sinks = sinksOf(8, 30);
  g.gradSinks = sinksOf(8, 31);
  auto check = [&] { return fa::checkAttentionBackwardArgs(backward, g).message; };
  EXPECT_EQ(check(), "");
  g.gradSinks.strides[0] = 2;
  EXPECT_EQ(check(), "dsinks must be contiguous in its last dimension "
                     "(stride 1), got stride 2");
  g.gradSinks = sinksOf(8, 31);
  g.gradSinks.strides[0] = int64_t(1) << 62; // spans past 64-bit indexing
  g.gradSinks.sizes[0] = 8;
  EXPECT_EQ(check(), "dsinks must be contiguous in its last dimension "
                     "(stride 1), got stride 4611686018427387904");
  g.gradSinks = sinksOf(8, 31);
  g.sinks.data = g.gradQuery.data;
  EXPECT_EQ(check(), "dq overlaps sinks in memory (gradients must not alias "
                     "the inputs)");
  g.sinks = sinksOf(8, 30);
  g.gradSinks = sinksOf(7, 31);
  EXPECT_EQ(check(), "dsinks holds one f32 logit per query head: size 7 does "
                     "not match the 8 query heads");
  g.gradSinks = sinksOf(8, 31);
  g.gradSinks.data = g.sinks.data;
  EXPECT_EQ(check(), "dsinks overlaps sinks in memory (gradients must not "
                     "alias the inputs)");
  g.gradSinks = sinksOf(8, 31);
  g.gradSinks.data = g.gradQuery.data;
  EXPECT_EQ(check(), "dsinks overlaps dq in memory");
  g.gradSinks = sinksOf(8, 31);
  g.gradSinks.data = g.k.data;
  EXPECT_EQ(check(), "dsinks overlaps k in memory (gradients must not alias "
                     "the inputs)");
}

/// A varlen batch: one packed batch entry, B + 1 offsets each (int32,
/// contiguous, apart from the outputs), maxima within the packed rows; the
/// grid's query tiles count the longest sequence's rows.
TEST(ArgumentChecks, Varlen) {
  fa::KernelSpec spec = smallSpec();
  spec.varlen = true;
  fa::AttentionArgs a = validArgs();
  auto check = [&] { return fa::checkAttentionArgs(spec, a).message; };
  EXPECT_EQ(check(), "a varlen batch packs its sequences into one batch "
                     "entry: q batch must be 1, got 2");
  for (fa::TensorArg *t : {&a.q, &a.k, &a.v, &a.o, &a.lse})
    t->sizes[0] = 1;
  auto offsets = [](int64_t n, uintptr_t at) {
    fa::TensorArg t;
    t.data = reinterpret_cast<const void *>((uintptr_t(1) << 40) * at);
    t.sizes[0] = n;
    t.strides[0] = 1;
    return t;
  };
  a.cuSeqlensQ = offsets(0, 20);
  a.cuSeqlensK = offsets(4, 21);
  EXPECT_EQ(check(), "cu_seqlens_q holds B + 1 offsets (at least 1), got 0");
  a.cuSeqlensQ = offsets(3, 20);
  EXPECT_EQ(check(), "cu_seqlens_q (3 offsets) and cu_seqlens_k (4) must "
                     "both hold B + 1 offsets");
  a.cuSeqlensQ = offsets(4, 20);
  a.cuSeqlensK.strides[0] = 2;
  EXPECT_EQ(check(), "cu_seqlens_k must be contiguous in its last dimension "
                     "(stride 1), got stride 2");
  a.cuSeqlensK = offsets(4, 21);
  a.maxSeqlenQ = 101;
  a.maxSeqlenK = 70;
  EXPECT_EQ(check(), "max_seqlen_q must be in [0, 100] (the packed rows), "
                     "got 101");
  a.maxSeqlenQ = 60;
  a.maxSeqlenK = -1;
  EXPECT_EQ(check(), "max_seqlen_k must be in [0, 70] (the packed rows), "
                     "got -1");
  a.maxSeqlenK = 70;
  EXPECT_EQ(check(), "");
  a.cuSeqlensK.data = a.o.data;
  EXPECT_EQ(check(), "o overlaps cu_seqlens_k in memory (outputs must not "
                     "alias the inputs)");
  a.cuSeqlensK = offsets(4, 21);
  a.cuSeqlensQ = offsets(70000, 20);
  a.cuSeqlensK = offsets(70000, 21);
  EXPECT_EQ(check(), "a varlen batch of 69999 sequences exceeds the grid "
                     "limit 65535");
  // The plan's operands: the offsets after the sinks, before a block mask.
  fa::LaunchPlan plan = fa::LaunchPlan::forwardAttention(
      "f", 64, 128, 0, /*sinks=*/true, /*blockMask=*/false, /*varlen=*/true);
  std::vector<fa::LaunchPlan::Operand> want = {
      fa::LaunchPlan::Operand::query,      fa::LaunchPlan::Operand::key,
      fa::LaunchPlan::Operand::value,      fa::LaunchPlan::Operand::output,
      fa::LaunchPlan::Operand::lse,        fa::LaunchPlan::Operand::sinks,
      fa::LaunchPlan::Operand::cuSeqlensQ, fa::LaunchPlan::Operand::cuSeqlensK};
  EXPECT_EQ(plan.params, want);
  EXPECT_EQ(plan.paramRank(fa::LaunchPlan::Operand::cuSeqlensK), 1);
}

/// A varlen spec is a kernel of its own; the deterministic backward takes
/// it, the wgmma backward refuses it, and auto gives its backward to mma.
TEST(KernelSpecVarlen, NameKeyAndLimits) {
  fa::KernelSpec spec = smallSpec();
  fa::KernelSpec varlen = spec;
  varlen.varlen = true;
  EXPECT_NE(canonicalText(spec), canonicalText(varlen));
  EXPECT_NE(kernelName(varlen).find("_varlen"), std::string::npos);
  EXPECT_EQ(validateSpec(varlen), "");
  varlen.backward = true;
  EXPECT_EQ(validateSpec(varlen), "");
  varlen.deterministic = true;
  EXPECT_EQ(validateSpec(varlen), "");
  EXPECT_NE(kernelName(varlen).find("_det_varlen"), std::string::npos)
      << kernelName(varlen);
  varlen.deterministic = false;
  varlen.dtype = fa::ElementType::bf16;
  varlen.headDim = 128;
  varlen.arch = "sm_90a";
  varlen.strategy = fa::Strategy::wgmma;
  EXPECT_EQ(validateSpec(varlen), "");
  // The 16-bit varlen backward on sm_90a is wgmma's by default, mma's on
  // sm_80.
  varlen.strategy = fa::Strategy::automatic;
  EXPECT_EQ(resolveStrategy(varlen), fa::Strategy::wgmma);
  varlen.arch = "sm_80";
  EXPECT_EQ(resolveStrategy(varlen), fa::Strategy::mma);
  varlen.arch = "sm_90a";
  // The backward's operands: the offsets last before the captures.
  std::vector<fa::LaunchPlan::Operand> params =
      fa::LaunchPlan::backwardParams(false, false, false, /*varlen=*/true);
  ASSERT_GE(params.size(), 2u);
  EXPECT_EQ(params[params.size() - 2], fa::LaunchPlan::Operand::cuSeqlensQ);
  EXPECT_EQ(params.back(), fa::LaunchPlan::Operand::cuSeqlensK);
}

/// A KV cache's entries by index (cache_batch_idx) with its lengths: the
/// 16-bit forward takes wgmma by default on sm_90a (its TMA boxes take the
/// entry as their batch coordinate), mma on sm_80. A paged cache and
/// split-KV take wgmma too, but not row-by-row pages or a varlen batch.
TEST(KernelSpecKvCache, CacheBatchIndexRunsOnWgmma) {
  fa::KernelSpec spec;
  spec.headDim = 128;
  spec.dtype = fa::ElementType::bf16;
  spec.kvLens = true;
  spec.cacheBatchIndex = true;
  spec.causal = true;
  spec.arch = "sm_90a";
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::wgmma);
  spec.strategy = fa::Strategy::wgmma;
  EXPECT_EQ(validateSpec(spec), "");
  spec.strategy = fa::Strategy::automatic;
  spec.arch = "sm_80";
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma);
  spec.arch = "sm_90a";
  spec.cacheBatchIndex = false;
  spec.pagedKv = true;
  spec.blockN = 0; // left to the defaults
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::wgmma);
  spec.splitKv = true;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::wgmma);
  spec.pageGather = true;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma);
  spec.pageGather = false;
  // Pages of 32 keys (fitToPages' block-n): not measured on wgmma.
  spec.blockN = 32;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma);
  spec.blockN = 64;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::wgmma);
  spec.blockN = 0;
  spec.varlen = true;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma);
  spec.pagedKv = false;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma) << "split varlen";
  spec.varlen = false;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::wgmma) << "split";
  spec.cacheBatchIndex = true;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma) << "split by index";
}

/// A paged cache on wgmma (asked for by name here; auto takes it too):
/// tiles a page holds whole, read by TMA boxes at the producer's own page
/// lookup; row-by-row pages are refused by name.
TEST(KernelSpecKvCache, PagedCacheRunsOnWgmmaByName) {
  fa::KernelSpec spec;
  spec.headDim = 128;
  spec.dtype = fa::ElementType::bf16;
  spec.kvLens = true;
  spec.pagedKv = true;
  spec.arch = "sm_90a";
  spec.strategy = fa::Strategy::wgmma;
  EXPECT_EQ(validateSpec(spec), "");
  auto runtime = makeRuntime("", /*diskCache=*/false);
  fa::KernelInfo info;
  // Pages of 64 or more take 64-key tiles (as the runtime's fitToPages).
  spec.blockN = 64;
  spec.blockM = spec.numWarps = spec.stages = 0;
  fa::Result r = runtime->prepare(spec, &info);
  ASSERT_TRUE(bool(r)) << r.message;
  EXPECT_NE(info.name.find("_kvlens_paged_"), std::string::npos) << info.name;
  EXPECT_NE(info.name.find("_wgmma"), std::string::npos) << info.name;
  EXPECT_EQ(info.ptxas.spills(), false) << info.name;
  spec.pageGather = true;
  EXPECT_EQ(validateSpec(spec),
            "the wgmma forward reads a paged KV cache a tile per page "
            "(block-n dividing the page size), not row by row (page_gather: "
            "use the mma or simt strategy)");
}

/// kv_lens: one length per batch entry (per sequence with varlen),
/// contiguous, apart from the outputs; a kernel of its own.
TEST(ArgumentChecks, KvLens) {
  fa::KernelSpec spec = smallSpec();
  spec.kvLens = true;
  fa::AttentionArgs a = validArgs();
  auto check = [&] { return fa::checkAttentionArgs(spec, a).message; };
  a.kvLens.data = reinterpret_cast<const void *>(uintptr_t(1) << 45);
  a.kvLens.sizes[0] = 3;
  a.kvLens.strides[0] = 1;
  EXPECT_EQ(check(), "kv_lens holds 3 lengths; it needs one per batch entry "
                     "(2)");
  a.kvLens.sizes[0] = 2;
  a.kvLens.strides[0] = 2;
  EXPECT_EQ(check(), "kv_lens must be contiguous in its last dimension "
                     "(stride 1), got stride 2");
  a.kvLens.strides[0] = 1;
  EXPECT_EQ(check(), "");
  a.kvLens.data = a.lse.data;
  EXPECT_EQ(check(), "lse overlaps kv_lens in memory (outputs must not alias "
                     "the inputs)");
  fa::KernelSpec plain = smallSpec();
  EXPECT_NE(canonicalText(plain), canonicalText(spec));
  EXPECT_NE(kernelName(spec).find("_kvlens"), std::string::npos);
  spec.backward = true;
  EXPECT_EQ(validateSpec(spec),
            "the backward does not take kv_lens (a KV cache's lengths)");
  spec.backward = false;
  spec.blockMask = true;
  spec.maskMod = fa::variants::slidingWindow(16, 0);
  EXPECT_EQ(validateSpec(spec),
            "a block mask does not take kv_lens (a KV cache's lengths) yet");
  fa::LaunchPlan plan = fa::LaunchPlan::forwardAttention(
      "f", 64, 128, 0, false, false, /*varlen=*/false, /*kvLens=*/true);
  EXPECT_EQ(plan.params.back(), fa::LaunchPlan::Operand::kvLens);
}

/// A decode step of grouped heads runs as G rows of each K/V head: the
/// same bytes re-strided, not causal, sinks per row; anything else that
/// reads a query head or row keeps its shape.
TEST(PackQueryGroups, DecodeOfGroupedHeads) {
  fa::AttentionArgs a = validArgs(64); // q [2, 8, 100, 64], k [2, 2, 70, 64]
  // One row: q, o [2, 8, 1, 64], lse [2, 8, 1], contiguous.
  for (fa::TensorArg *t : {&a.q, &a.o}) {
    t->sizes[2] = 1;
    t->strides[0] = 8 * 64;
    t->strides[1] = t->strides[2] = 64;
  }
  a.lse.sizes[2] = 1;
  a.lse.strides[0] = 8;
  a.lse.strides[1] = a.lse.strides[2] = 1;
  fa::KernelSpec spec = smallSpec();
  spec.headDim = 64;
  spec.causal = true;
  fa::AttentionArgs packed = a;
  fa::KernelSpec packedSpec = spec;
  ASSERT_TRUE(fa::packQueryGroups(packedSpec, packed));
  EXPECT_FALSE(packedSpec.causal);
  for (auto [t, from] : {std::pair<fa::TensorArg *, fa::TensorArg *>{
                             &packed.q, &a.q},
                         {&packed.o, &a.o},
                         {&packed.lse, &a.lse}}) {
    EXPECT_EQ(t->data, from->data);
    EXPECT_EQ(t->sizes[0], 2);
    EXPECT_EQ(t->sizes[1], 2); // the K/V heads
    EXPECT_EQ(t->sizes[2], 4); // G = 4 rows
    EXPECT_EQ(t->strides[0], from->strides[0]);
    EXPECT_EQ(t->strides[1], 4 * from->strides[1]);
    EXPECT_EQ(t->strides[2], from->strides[1]);
  }
  EXPECT_EQ(packed.q.sizes[3], 64);
  EXPECT_EQ(fa::checkAttentionArgs(packedSpec, packed).message, "");
  EXPECT_FALSE(packedSpec.sinksPerRow);
  // With sinks (where asked for), each row joins its own query head's: the
  // [Hq] logits read as [Hkv, G] (sinks per row), checked against the G x
  // Hkv rows.
  fa::KernelSpec sinks = spec;
  sinks.sinks = true;
  fa::AttentionArgs withSinks = a;
  withSinks.sinks.data =
      reinterpret_cast<const void *>((uintptr_t(1) << 40) * 30);
  withSinks.sinks.sizes[0] = 8;
  withSinks.sinks.strides[0] = 1;
  {
    fa::KernelSpec unpacked = sinks;
    fa::AttentionArgs before = withSinks;
    EXPECT_FALSE(fa::packQueryGroups(unpacked, before));
  }
  ASSERT_TRUE(fa::packQueryGroups(sinks, withSinks, /*withSinks=*/true));
  EXPECT_TRUE(sinks.sinksPerRow);
  EXPECT_EQ(withSinks.q.sizes[1], 2);
  EXPECT_EQ(fa::checkAttentionArgs(sinks, withSinks).message, "");
  withSinks.sinks.sizes[0] = 2; // one per K/V head: not the query heads'
  EXPECT_NE(fa::checkAttentionArgs(sinks, withSinks)
                .message.find("size 2 does not match the 8"),
            std::string::npos);
  // Left alone: a variant, two rows, one head per K/V head.
  auto untouched = [&](fa::KernelSpec s, fa::AttentionArgs args) {
    fa::AttentionArgs before = args;
    bool changed = fa::packQueryGroups(s, args);
    return !changed && std::memcmp(args.q.sizes, before.q.sizes,
                                   sizeof(args.q.sizes)) == 0;
  };
  fa::KernelSpec variant = spec;
  variant.maskMod = fa::variants::slidingWindow(16, 0);
  EXPECT_TRUE(untouched(variant, a));
  fa::AttentionArgs twoRows = validArgs(64);
  EXPECT_TRUE(untouched(spec, twoRows));
  fa::AttentionArgs mha = a;
  mha.k.sizes[1] = mha.v.sizes[1] = 8;
  EXPECT_TRUE(untouched(spec, mha));
  fa::AttentionArgs spreadLse = a;
  spreadLse.lse.strides[1] = 2;
  EXPECT_TRUE(untouched(spec, spreadLse));
}

/// Interval masks compare keys in 32 bits: with a mask_mod the key length
/// is bounded (and named), without one it is not.
TEST(ArgumentChecks, MaskModKeyLength) {
  fa::KernelSpec spec = smallSpec();
  spec.maskMod = fa::variants::slidingWindow(16, 0);
  fa::AttentionArgs a = validArgs();
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message, "");
  for (fa::TensorArg *t : {&a.k, &a.v}) {
    t->sizes[2] = fa::kMaxMaskModKeyLength + 1;
    t->strides[1] = t->sizes[2] * 32;
    t->strides[0] = t->strides[1] * 2;
  }
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "key length 1073737729 exceeds 1073737728, the longest a kernel "
            "with a mask_mod takes (its window bounds are 32-bit)");
  EXPECT_EQ(fa::checkAttentionArgs(smallSpec(), a).message, "");
}

/// The C ABI's extras decide spec.sinks, and what does not fit is named.
/// (Python's ctypes mirror asserts the same layout: test_sinks.py.)
static_assert(sizeof(void *) != 8 ||
                  (offsetof(fa_kernel_config, struct_size) == 0 &&
                   offsetof(fa_kernel_config, sinks) == 88 &&
                   offsetof(fa_kernel_config, block_mask) == 92 &&
                   offsetof(fa_kernel_config, varlen) == 96 &&
                   offsetof(fa_kernel_config, kv_lens) == 100 &&
                   sizeof(fa_kernel_config) == 104 &&
                   offsetof(fa_attention_extras, struct_size) == 0 &&
                   sizeof(fa_attention_extras) == 112 &&
                   offsetof(fa_attention_extras, captures) == 24 &&
                   offsetof(fa_attention_extras, num_captures) == 32 &&
                   offsetof(fa_attention_extras, key_ranges) == 40 &&
                   offsetof(fa_attention_extras, query_ranges) == 48 &&
                   offsetof(fa_attention_extras, kv_splits) == 56 &&
                   offsetof(fa_attention_extras, block_table) == 64 &&
                   offsetof(fa_attention_extras, cache_batch_idx) == 72 &&
                   offsetof(fa_attention_extras, q_descale) == 80 &&
                   offsetof(fa_attention_extras, k_descale) == 88 &&
                   offsetof(fa_attention_extras, v_descale) == 96 &&
                   offsetof(fa_attention_extras, out_dtype) == 104 &&
                   offsetof(fa_kernel_info, struct_size) == 0 &&
                   offsetof(fa_kernel_info, name) == 8 &&
                   offsetof(fa_kernel_info, assembler) == 304 &&
                   offsetof(fa_kernel_info, assemble_seconds) == 384 &&
                   sizeof(fa_kernel_info) == 392 && sizeof(fa_capture) == 80 &&
                   offsetof(fa_capture, dtype) == 72 &&
                   offsetof(fa_capture, rank) == 76),
              "fa_kernel_config / fa_attention_extras / fa_kernel_info / "
              "fa_capture changed: update python/fa/_abi.py's _Config / "
              "_Extras / _Info / _Capture and their test");
/// A plan's captures (their types and ranks) survive the cache's JSON; a
/// capture parameter without its listed type, or a bad type or rank, is
/// not a plan.
TEST(LaunchPlan, CapturesRoundTrip) {
  fa::LaunchPlan plan = fa::LaunchPlan::forwardAttention("k", 64, 128, 0);
  plan.addCaptures({{fa::ScalarType::i32, 2}, {fa::ScalarType::f16, 3}});
  ASSERT_EQ(plan.params.size(), 7u);
  EXPECT_EQ(plan.params[5], fa::LaunchPlan::Operand::capture0);
  EXPECT_EQ(plan.paramRank(plan.params[5]), 2);
  EXPECT_EQ(plan.paramRank(plan.params[6]), 3);
  EXPECT_EQ(plan.paramRank(fa::LaunchPlan::Operand::lse), 3);
  std::optional<fa::LaunchPlan> back = fa::LaunchPlan::fromJson(plan.toJson());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->toJson(), plan.toJson());
  ASSERT_EQ(back->captures.size(), 2u);
  EXPECT_TRUE(back->captures[1] == (fa::CaptureType{fa::ScalarType::f16, 3}));
  llvm::json::Value json = plan.toJson();
  json.getAsObject()->getArray("captures")->pop_back();
  EXPECT_FALSE(fa::LaunchPlan::fromJson(json).has_value());
  for (llvm::json::Object bad :
       {llvm::json::Object{{"type", "u16"}, {"rank", 1}},
        llvm::json::Object{{"type", "f32"}, {"rank", 5}}}) {
    llvm::json::Value badJson = plan.toJson();
    (*badJson.getAsObject()->getArray("captures"))[0] = std::move(bad);
    EXPECT_FALSE(fa::LaunchPlan::fromJson(badJson).has_value());
  }
}

/// The runtime's checks of the captured tensors name what does not fit.
TEST(ArgumentChecks, Captures) {
  std::vector<fa::CaptureType> expected = {{fa::ScalarType::i32, 2}};
  static int32_t ids[6];
  fa::CaptureArg doc;
  doc.type = fa::ScalarType::i32;
  doc.rank = 2;
  doc.tensor.data = ids;
  doc.tensor.sizes[0] = 2;
  doc.tensor.sizes[1] = 3;
  doc.tensor.strides[0] = 3;
  doc.tensor.strides[1] = 1;
  EXPECT_EQ(fa::checkCaptures(expected, {doc}), "");
  EXPECT_EQ(fa::checkCaptures(expected, {}),
            "the variant reads 1 captured tensors (the score_mod's, then the "
            "mask_mod's); the call gives 0");
  fa::CaptureArg wrong = doc;
  wrong.type = fa::ScalarType::i64;
  EXPECT_EQ(fa::checkCaptures(expected, {wrong}),
            "captured tensor 0 is i64 of rank 2; the variant reads i32 of "
            "rank 2");
  wrong = doc;
  wrong.tensor.strides[0] = 4; // a padded row
  EXPECT_EQ(fa::checkCaptures(expected, {wrong}),
            "captured tensor 0 must be contiguous (row-major): stride 4 in "
            "dimension 0, expected 3");
  wrong = doc;
  wrong.tensor.data = nullptr;
  EXPECT_EQ(fa::checkCaptures(expected, {wrong}),
            "captured tensor 0 is a null pointer");
  wrong = doc;
  wrong.tensor.data = reinterpret_cast<const char *>(ids) + 2;
  EXPECT_EQ(fa::checkCaptures(expected, {wrong}),
            "captured tensor 0 is not aligned to its 4-byte elements");
}

/// A call's captures are checked with its tensors: an empty capture (a
/// region reads its elements) and one an output overlaps are refused.
TEST(ArgumentChecks, CapturesWithTheTensors) {
  fa::KernelSpec spec = smallSpec();
  fa::AttentionArgs a = validArgs();
  static int32_t ids[64];
  fa::CaptureArg doc;
  doc.type = fa::ScalarType::i32;
  doc.rank = 1;
  doc.tensor.data = ids;
  doc.tensor.sizes[0] = 64;
  doc.tensor.strides[0] = 1;
  a.captures = {doc};
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message, "");
  a.captures[0].tensor.sizes[0] = 0;
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "captured tensor 0 is empty ([0]): a region reads its elements");
  a.captures[0].tensor = a.o; // the output's first bytes, as i32
  a.captures[0].tensor.sizes[0] = 4;
  a.captures[0].tensor.strides[0] = 1;
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "o overlaps captured tensor 0 in memory (outputs must not alias "
            "the inputs)");
}

/// The C ABI's captures: dtype and rank codes are checked by value.
TEST(ArgumentChecks, CapturesFromC) {
  fa_capture capture{};
  capture.dtype = FA_I32;
  capture.rank = 2;
  fa_attention_extras extras = cExtras();
  extras.captures = &capture;
  extras.num_captures = 1;
  std::vector<fa::CaptureArg> captures;
  EXPECT_EQ(fa::capturesFromC(&extras, captures), "");
  ASSERT_EQ(captures.size(), 1u);
  EXPECT_EQ(captures[0].type, fa::ScalarType::i32);
  EXPECT_EQ(fa::capturesFromC(nullptr, captures), "");
  EXPECT_TRUE(captures.empty());
  capture.dtype = 9;
  EXPECT_EQ(fa::capturesFromC(&extras, captures),
            "extras->captures[0].dtype must be an fa_dtype (0-5), got 9");
  capture.dtype = FA_I8;
  capture.rank = 0;
  EXPECT_EQ(fa::capturesFromC(&extras, captures),
            "extras->captures[0].rank must be in [1, 4], got 0");
  extras.num_captures = 9;
  EXPECT_EQ(fa::capturesFromC(&extras, captures),
            "extras->num_captures must be in [0, 8], got 9");
  extras.num_captures = 1;
  extras.captures = nullptr;
  EXPECT_EQ(fa::capturesFromC(&extras, captures),
            "extras->captures is NULL but extras->num_captures is 1");
}

TEST(Sinks, CExtras) {
  fa_tensor logits{}, grad{};
  fa::KernelSpec spec;
  EXPECT_EQ(fa::sinksFromC(nullptr, false, spec), "");
  EXPECT_FALSE(spec.sinks);
  fa_attention_extras extras{sizeof(fa_attention_extras), &logits, nullptr};
  EXPECT_EQ(fa::sinksFromC(&extras, false, spec), "");
  EXPECT_TRUE(spec.sinks);
  spec = {};
  EXPECT_EQ(fa::sinksFromC(&extras, true, spec),
            "the backward with sinks writes their gradient: "
            "extras->grad_sinks is NULL");
  extras = {sizeof(fa_attention_extras), &logits, &grad};
  EXPECT_EQ(fa::sinksFromC(&extras, true, spec), "");
  EXPECT_TRUE(spec.sinks);
  EXPECT_EQ(fa::sinksFromC(&extras, false, spec),
            "extras->grad_sinks is the backward's: the forward takes only "
            "extras->sinks");
  extras = {sizeof(fa_attention_extras), nullptr, &grad};
  spec = {};
  EXPECT_EQ(fa::sinksFromC(&extras, true, spec),
            "extras->grad_sinks is given without extras->sinks");
  // fa_kernel_config.sinks = 1 (what fa_prepare_kernel reads) needs the
  // logits in a call.
  fa_kernel_config config = cConfig();
  config.sinks = 1;
  spec = {};
  EXPECT_EQ(fa::specFromC(32, FA_F32, 0, 0.0, &config, spec), "");
  EXPECT_TRUE(spec.sinks);
  EXPECT_EQ(fa::sinksFromC(nullptr, false, spec),
            "config->sinks is 1 but extras->sinks is NULL (the kernel takes "
            "the sink logits)");
  config.sinks = 2;
  EXPECT_EQ(fa::specFromC(32, FA_F32, 0, 0.0, &config, spec),
            "sinks must be 0 or 1, got 2");
}

//===----------------------------------------------------------------------===//
// Block masks
//===----------------------------------------------------------------------===//

/// A block mask's table for validArgs()' problem (B = 2, Hq = 8, Sq = 100,
/// Sk = 70): [2, heads, ceil(length / 16), 4] i32 at its own fake address.
fa::TensorArg rangeTable(int64_t heads, int64_t length, uintptr_t slot) {
  fa::TensorArg t;
  t.data = reinterpret_cast<const void *>((uintptr_t(1) << 40) * slot);
  int64_t groups = (length + 15) / 16;
  int64_t sizes[4] = {2, heads, groups, 4};
  int64_t strides[4] = {heads * groups * 4, groups * 4, 4, 1};
  std::copy(sizes, sizes + 4, t.sizes);
  std::copy(strides, strides + 4, t.strides);
  return t;
}

/// The forward's key ranges and the backward's query ranges: shape (one
/// head or Hq), layout and overlap, each named.
TEST(ArgumentChecks, BlockMaskTables) {
  fa::KernelSpec spec = smallSpec();
  spec.maskMod = fa::variants::document();
  spec.blockMask = true;
  fa::AttentionArgs a = validArgs();
  a.keyRanges = rangeTable(1, 100, 40);
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message, "");
  a.keyRanges = rangeTable(8, 100, 40);
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message, "");
  a.keyRanges = rangeTable(3, 100, 40);
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "key_ranges is [2, 3, 7, 4]; a block mask's table is [2, 1 or 8, "
            "7, 4]: batch, heads (1 when every head has the same mask), the "
            "query length / 16 rounded up, and [first, end, whole_first, "
            "whole_end)");
  a.keyRanges = rangeTable(1, 100, 40);
  a.keyRanges.sizes[3] = 2; // the ranges without the whole ranges
  a.keyRanges.strides[2] = 2;
  a.keyRanges.strides[1] = a.keyRanges.strides[0] = 14;
  EXPECT_NE(fa::checkAttentionArgs(spec, a).message.find(
                "key_ranges is [2, 1, 7, 2]; a block mask's table is "),
            std::string::npos);
  a.keyRanges = rangeTable(1, 70, 40); // the keys' groups, not the rows'
  EXPECT_NE(fa::checkAttentionArgs(spec, a).message.find("[2, 1, 5, 4]"),
            std::string::npos);
  a.keyRanges = rangeTable(8, 100, 40);
  a.keyRanges.strides[2] = 8; // every other entry
  a.keyRanges.strides[1] = 56;
  a.keyRanges.strides[0] = 448;
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "key_ranges must be contiguous (row-major): stride 8 in dimension "
            "2, expected 4");
  a.keyRanges = rangeTable(1, 100, 40);
  a.keyRanges.data = a.o.data; // the output's bytes
  EXPECT_EQ(fa::checkAttentionArgs(spec, a).message,
            "o overlaps key_ranges in memory (outputs must not alias the "
            "inputs)");

  fa::AttentionBackwardArgs b = validBackwardArgs();
  b.queryRanges = rangeTable(1, 70, 41);
  EXPECT_EQ(fa::checkAttentionBackwardArgs(spec, b).message, "");
  b.queryRanges = rangeTable(1, 100, 41);
  EXPECT_NE(fa::checkAttentionBackwardArgs(spec, b)
                .message.find("query_ranges is [2, 1, 7, 4]"),
            std::string::npos);
  // The deterministic backward reads the key ranges too: checked as the
  // forward's, with the query ranges' heads.
  spec.deterministic = true;
  b.queryRanges = rangeTable(1, 70, 41);
  b.keyRanges = rangeTable(1, 70, 40); // the keys' groups, not the rows'
  EXPECT_NE(fa::checkAttentionBackwardArgs(spec, b)
                .message.find("key_ranges is [2, 1, 5, 4]"),
            std::string::npos)
      << fa::checkAttentionBackwardArgs(spec, b).message;
  b.keyRanges = rangeTable(1, 100, 40);
  EXPECT_EQ(fa::checkAttentionBackwardArgs(spec, b).message, "");
  b.keyRanges = rangeTable(8, 100, 40);
  EXPECT_EQ(fa::checkAttentionBackwardArgs(spec, b).message,
            "key_ranges has 8 heads and query_ranges 1: one block mask has "
            "one head count (1 or Hq)");
  b.keyRanges = rangeTable(1, 100, 40);
  b.keyRanges.data = b.gradQuery.data; // dQ's bytes
  EXPECT_EQ(fa::checkAttentionBackwardArgs(spec, b).message,
            "dq overlaps key_ranges in memory (gradients must not alias the "
            "inputs)");
  spec.deterministic = false;
}

/// fa_compute_block_mask's checks: the two tables of one head count, apart
/// from each other and from the captures.
TEST(ArgumentChecks, BlockMaskProgram) {
  fa::AttentionArgs f = validArgs();
  fa::BlockMaskArgs a;
  a.q = f.q;
  a.k = f.k;
  a.keyRanges = rangeTable(1, 100, 40);
  a.queryRanges = rangeTable(1, 70, 41);
  EXPECT_EQ(fa::checkBlockMaskArgs(a).message, "");
  a.queryRanges = rangeTable(8, 70, 41);
  EXPECT_EQ(fa::checkBlockMaskArgs(a).message,
            "key_ranges has 1 heads and query_ranges 8: one block mask has "
            "one head count (1 or Hq)");
  a.queryRanges = rangeTable(1, 70, 40);
  EXPECT_EQ(fa::checkBlockMaskArgs(a).message,
            "key_ranges overlaps query_ranges in memory");
  a.queryRanges = rangeTable(1, 70, 41);
  fa::CaptureArg doc;
  doc.type = fa::ScalarType::i32;
  doc.rank = 2;
  doc.tensor = a.queryRanges;
  doc.tensor.sizes[0] = 2;
  doc.tensor.sizes[1] = 10;
  doc.tensor.strides[0] = 10;
  doc.tensor.strides[1] = 1;
  a.captures = {doc};
  EXPECT_EQ(fa::checkBlockMaskArgs(a).message,
            "query_ranges overlaps captured tensor 0 in memory (outputs must "
            "not alias the inputs)");
  a.captures.clear();
  a.k.sizes[0] = 3;
  EXPECT_EQ(fa::checkBlockMaskArgs(a).message,
            "k batch 3 does not match q batch 2");
  // The tables hold indices in 32 bits (a length past the limit is
  // refused before the tables' shapes are read).
  a.k.sizes[0] = 2;
  a.k.sizes[2] = fa::kMaxMaskModKeyLength + 1;
  EXPECT_EQ(fa::checkBlockMaskArgs(a).message,
            "key length " + std::to_string(fa::kMaxMaskModKeyLength + 1) +
                " exceeds " + std::to_string(fa::kMaxMaskModKeyLength) +
                ", the longest a block mask takes (its ranges are 32-bit)");
}

/// fa_compute_block_mask refuses what it cannot use before any launch (no
/// driver needed): tensors in extras other than captures, no mask_mod.
TEST(CApi, ComputeBlockMaskRefusesBadRequests) {
  TempDir dir;
  fa_runtime *runtime = nullptr;
  ASSERT_EQ(fa_runtime_create(dir.str().c_str(), 0, &runtime), FA_OK)
      << fa_last_error();
  fa_tensor t = {nullptr, {2, 8, 100, 64}, {51200, 6400, 64, 1}};
  fa_kernel_config config = cConfig();
  config.mask_mod = nullptr;
  EXPECT_EQ(fa_compute_block_mask(runtime, &t, &t, &t, &t, nullptr, 1,
                                  &config, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(),
               "fa_compute_block_mask computes a mask_mod's tables: "
               "config->mask_mod is NULL or empty");
  std::string mask = fa::variants::document();
  config.mask_mod = mask.c_str();
  fa_attention_extras extras = cExtras();
  extras.sinks = &t;
  EXPECT_EQ(fa_compute_block_mask(runtime, &t, &t, &t, &t, &extras, 1,
                                  &config, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(),
               "fa_compute_block_mask takes the mask_mod's captured tensors "
               "from extras: its other fields must be NULL");
  EXPECT_EQ(fa_compute_block_mask(nullptr, &t, &t, &t, &t, nullptr, 1,
                                  &config, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(fa_last_error(), "runtime is a null pointer");
  fa_runtime_destroy(runtime);
}

/// The C ABI: extras' tables decide spec.blockMask, in the direction that
/// takes each.
TEST(ArgumentChecks, BlockMaskFromC) {
  fa_tensor table{};
  fa_attention_extras extras = cExtras();
  fa::KernelSpec spec;
  EXPECT_EQ(fa::blockMaskFromC(nullptr, false, spec), "");
  EXPECT_FALSE(spec.blockMask);
  extras.key_ranges = &table;
  EXPECT_EQ(fa::blockMaskFromC(&extras, false, spec), "");
  EXPECT_TRUE(spec.blockMask);
  EXPECT_EQ(fa::blockMaskFromC(&extras, true, spec),
            "extras->key_ranges is the forward's: the backward takes "
            "extras->query_ranges (and key_ranges with them when "
            "config->deterministic = 1)");
  // The deterministic backward takes both tables, and refuses one alone.
  fa_tensor queryTable{};
  spec = {};
  spec.deterministic = true;
  extras.query_ranges = &queryTable;
  EXPECT_EQ(fa::blockMaskFromC(&extras, true, spec), "");
  EXPECT_TRUE(spec.blockMask);
  extras.key_ranges = nullptr;
  EXPECT_EQ(fa::blockMaskFromC(&extras, true, spec),
            "the deterministic backward (config->deterministic = 1) with a "
            "block mask takes extras->key_ranges with extras->query_ranges: "
            "its turns at a query tile are those of the K/V tiles its key "
            "ranges give it");
  extras.query_ranges = nullptr;
  spec = {};
  extras.key_ranges = nullptr;
  extras.query_ranges = &table;
  EXPECT_EQ(fa::blockMaskFromC(&extras, false, spec),
            "extras->query_ranges is the backward's: the forward takes "
            "extras->key_ranges");
  spec = {};
  EXPECT_EQ(fa::blockMaskFromC(&extras, true, spec), "");
  EXPECT_TRUE(spec.blockMask);
  spec.blockMask = true; // fa_kernel_config.block_mask = 1
  EXPECT_EQ(fa::blockMaskFromC(nullptr, true, spec),
            "config->block_mask is 1 but extras->query_ranges is NULL (the "
            "kernel takes the table)");
}

/// Compiled kernels take the table as the parameter before the captures;
/// the block mask program is three launches over (group, head, batch).
TEST(CompiledKernels, BlockMaskParameters) {
  fa::KernelSpec spec = smallSpec();
  spec.maskMod = fa::variants::document();
  spec.blockMask = true;
  llvm::Expected<mlir::fa::CompiledKernel> forward =
      mlir::fa::compileKernel(spec, /*assemble=*/false);
  ASSERT_TRUE(bool(forward)) << llvm::toString(forward.takeError());
  ASSERT_EQ(forward->launches.size(), 1u);
  const std::vector<fa::LaunchPlan::Operand> &params =
      forward->launches[0].params;
  ASSERT_EQ(params.size(), 7u);
  EXPECT_EQ(params[5], fa::LaunchPlan::Operand::keyRanges);
  EXPECT_EQ(params[6], fa::LaunchPlan::Operand::capture0);
  spec.backward = true;
  llvm::Expected<mlir::fa::CompiledKernel> backward =
      mlir::fa::compileKernel(spec, /*assemble=*/false);
  ASSERT_TRUE(bool(backward)) << llvm::toString(backward.takeError());
  for (const fa::LaunchPlan &plan : backward->launches) {
    ASSERT_GE(plan.params.size(), 2u);
    EXPECT_EQ(plan.params[plan.params.size() - 2],
              fa::LaunchPlan::Operand::queryRanges);
  }
  // Deterministic: the key ranges follow (they order the turns).
  spec.deterministic = true;
  llvm::Expected<mlir::fa::CompiledKernel> deterministic =
      mlir::fa::compileKernel(spec, /*assemble=*/false);
  ASSERT_TRUE(bool(deterministic)) << llvm::toString(deterministic.takeError());
  for (const fa::LaunchPlan &plan : deterministic->launches) {
    ASSERT_GE(plan.params.size(), 3u);
    EXPECT_EQ(plan.params[plan.params.size() - 3],
              fa::LaunchPlan::Operand::queryRanges);
    EXPECT_EQ(plan.params[plan.params.size() - 2],
              fa::LaunchPlan::Operand::keyRanges);
  }
  spec.dqChains = 2;
  EXPECT_NE(validateSpec(spec).find("dq_chains must be 1"), std::string::npos)
      << validateSpec(spec);
  spec.dqChains = 0;
  spec.deterministic = false;
  fa::KernelSpec program;
  program.maskMod = fa::variants::document();
  program.causal = true;
  program.blockMaskProgram = true;
  EXPECT_EQ(validateSpec(program), "");
  EXPECT_FALSE(program.needsDefaults());
  llvm::Expected<mlir::fa::CompiledKernel> compiled =
      mlir::fa::compileKernel(program, /*assemble=*/false);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  ASSERT_EQ(compiled->launches.size(), 5u);
  EXPECT_EQ(compiled->launches[2].function, kernelName(program) + "_ranges");
  EXPECT_EQ(compiled->launches[3].function,
            kernelName(program) + "_whole_keys");
  EXPECT_EQ(compiled->launches[4].function,
            kernelName(program) + "_whole_queries");
  fa::ProblemExtents problem{2, 1, 100, 2, 70};
  EXPECT_EQ(compiled->launches[0].blocks(0, problem), 1); // 7 entries
  EXPECT_EQ(compiled->launches[2].blocks(0, problem), 7); // 7 groups
  EXPECT_EQ(compiled->launches[2].blocks(1, problem), 1); // the table's head
  EXPECT_EQ(compiled->launches[3].blocks(0, problem), 7); // 7 row groups
  EXPECT_EQ(compiled->launches[4].blocks(0, problem), 5); // 5 key groups
  for (const fa::LaunchPlan &launch : compiled->launches)
    EXPECT_EQ(launch.params.back(), fa::LaunchPlan::Operand::capture0)
        << launch.function;
  EXPECT_EQ(compiled->launches[2].params.back(),
            fa::LaunchPlan::Operand::capture0);
  // Only the mask, the causal flag and the arch make the program.
  fa::KernelSpec other = program;
  other.headDim = 128;
  other.dtype = fa::ElementType::bf16;
  other.blockM = 64;
  EXPECT_EQ(canonicalText(other), canonicalText(program));
  other.causal = false;
  EXPECT_NE(canonicalText(other), canonicalText(program));
}
