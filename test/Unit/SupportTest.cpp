//===- SupportTest.cpp - Kernel spec and ptxas report parsing -------*- C++ -*-===//
#include "lib/CudaToolkit.h"
#include "lib/GpuTarget.h"
#include "lib/KernelSpec.h"

#include "gtest/gtest.h"

#include <cmath>

namespace {

// Verbatim shape of `ptxas -v` output (CUDA 13), two kernels, one spilling.
constexpr const char *kReport = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'fa_fwd_d128_f32_full_8x32_w8' for 'sm_90a'
ptxas info    : Function properties for fa_fwd_d128_f32_full_8x32_w8
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1 bytes smem
ptxas info    : Compile time = 48.909 ms
ptxas info    : Compiling entry function 'fa_fwd_d128_f32_full_64x32_w1' for 'sm_90a'
ptxas info    : Function properties for fa_fwd_d128_f32_full_64x32_w1
    1984 bytes stack frame, 4328 bytes spill stores, 4196 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 1984 bytes cumulative stack size, 1 bytes smem
)";

TEST(PtxasReport, ParsesEveryKernel) {
  std::vector<fa::KernelResources> kernels = fa::parsePtxasReport(kReport);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].name, "fa_fwd_d128_f32_full_8x32_w8");
  EXPECT_EQ(kernels[0].registers, 40);
  EXPECT_EQ(kernels[0].barriers, 1);
  EXPECT_EQ(kernels[0].staticSharedBytes, 1);
  EXPECT_FALSE(kernels[0].spills());
  EXPECT_EQ(kernels[1].name, "fa_fwd_d128_f32_full_64x32_w1");
  EXPECT_EQ(kernels[1].registers, 255);
  EXPECT_EQ(kernels[1].stackFrameBytes, 1984);
  EXPECT_EQ(kernels[1].spillStoreBytes, 4328);
  EXPECT_EQ(kernels[1].spillLoadBytes, 4196);
  EXPECT_TRUE(kernels[1].spills());
}

TEST(PtxasReport, IgnoresTextWithoutKernels) {
  EXPECT_TRUE(fa::parsePtxasReport("").empty());
  EXPECT_TRUE(fa::parsePtxasReport("ptxas info : 0 bytes gmem\n").empty());
}

TEST(KernelSpec, DefaultIsTheLectureKernel) {
  fa::KernelSpec spec;
  EXPECT_EQ(spec.validate(), "");
  EXPECT_EQ(spec.kernelName(), "fa_fwd_d128_f32_full_8x32_w8");
  EXPECT_DOUBLE_EQ(spec.effectiveScale(), 1.0 / std::sqrt(128.0));
  spec.causal = true;
  spec.dtype = fa::ElementType::bf16;
  EXPECT_EQ(spec.kernelName(), "fa_fwd_d128_bf16_causal_8x32_w8");
}

TEST(KernelSpec, RejectsOutOfRangeValuesNamingTheLimit) {
  fa::KernelSpec spec;
  spec.headDim = 1000;
  EXPECT_EQ(spec.validate(), "head-dim must be in [1, 512], got 1000");
  spec = {};
  spec.blockM = 0;
  EXPECT_EQ(spec.validate(), "block-m must be in [1, 1024], got 0");
  spec = {};
  spec.numWarps = 64;
  EXPECT_EQ(spec.validate(), "num-warps must be in [1, 32], got 64");
  spec = {};
  spec.arch = "sm_75";
  EXPECT_EQ(spec.validate(), "unsupported arch 'sm_75'; expected one of "
                             "sm_80, sm_86, sm_89, sm_90, sm_90a");
}

TEST(KernelSpec, ParsesElementTypes) {
  fa::ElementType type;
  ASSERT_TRUE(fa::parseElementType("f16", type));
  EXPECT_EQ(type, fa::ElementType::f16);
  EXPECT_FALSE(fa::parseElementType("fp8", type));
}

TEST(GpuTarget, KnowsSharedMemoryLimits) {
  EXPECT_EQ(fa::lookupGpuArch("sm_90a")->maxSharedMemoryPerBlock, 232448);
  EXPECT_EQ(fa::lookupGpuArch("sm_80")->maxSharedMemoryPerBlock, 166912);
  EXPECT_FALSE(fa::lookupGpuArch("sm_70").has_value());
}

} // namespace
