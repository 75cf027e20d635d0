//===- SupportTest.cpp - Kernel spec and ptxas report parsing -------*- C++ -*-===//
#include "lib/Assembler.h"
#include "lib/CudaToolkit.h"
#include "lib/Exp2Polynomial.h"
#include "lib/GpuTarget.h"
#include "lib/IOModel.h"
#include "lib/KernelSpec.h"
#include "lib/Strategy/MmaModel.h"
#include "lib/Strategy/Registry.h"
#include "lib/Strategy/SpecRules.h"
#include "lib/Strategy/WgmmaModel.h"
#include "lib/TextNesting.h"
#include "lib/Variants.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Program.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>

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

/// ptxas assembles a module of several kernels a kernel per thread
/// (--split-compile): the count comes from the module's .entry lines only.
TEST(PtxasReport, CountsTheModulesKernels) {
  EXPECT_EQ(fa::countEntryPoints(""), 0u);
  EXPECT_EQ(fa::countEntryPoints(".version 8.1\n.target sm_90a\n"
                                 ".visible .entry fa_fwd(\n.param .u64 a\n)\n"
                                 "{\n\tret;\n}\n"),
            1u);
  // The backward: three entry points, one of them not .visible; a comment
  // and a call target that merely mention ".entry" do not count.
  EXPECT_EQ(fa::countEntryPoints("\t// .globl\tfa_bwd_delta\n"
                                 ".visible .entry fa_bwd_delta()\n{ ret; }\n"
                                 "  .entry fa_bwd_dkdv()\n{ ret; }\n"
                                 ".weak .entry fa_bwd_dq()\n{ ret; }\n"
                                 "// .entry in a comment\n"
                                 ".func helper_entry()\n{ ret; }\n"),
            3u);
}

TEST(KernelSpec, DefaultIsTheLectureKernel) {
  fa::KernelSpec spec;
  EXPECT_EQ(validateSpec(spec), "");
  EXPECT_EQ(kernelName(spec), "fa_fwd_d128_f32_full_8x32_w8");
  EXPECT_DOUBLE_EQ(spec.effectiveScale(), 1.0 / std::sqrt(128.0));
  spec.causal = true;
  spec.dtype = fa::ElementType::bf16;
  spec.strategy = fa::Strategy::simt;
  EXPECT_EQ(kernelName(spec), "fa_fwd_d128_bf16_causal_8x32_w8");
  spec.strategy = fa::Strategy::mma;
  spec.stages = 2;
  EXPECT_EQ(kernelName(spec), "fa_fwd_d128_bf16_causal_8x32_w8_s2_mma");
}

/// A variant's texts: bounded in size, the deterministic backward's with
/// a mask_mod and a block mask (one dQ chain), part of the kernel's name
/// and canonical text.
TEST(KernelSpec, VariantRules) {
  fa::KernelSpec spec;
  spec.maskMod = "func.func @mask_mod";
  spec.backward = spec.deterministic = true;
  EXPECT_EQ(validateSpec(spec), "");
  spec.blockMask = true;
  EXPECT_EQ(validateSpec(spec), "");
  spec.dqChains = 2;
  EXPECT_EQ(validateSpec(spec),
            "dq_chains = 2 counts the deterministic turns one by one; a "
            "block mask's turns skip the K/V tiles its tables leave out: "
            "dq_chains must be 1");
  spec.dqChains = 0;
  spec.blockMask = spec.deterministic = false;
  EXPECT_EQ(validateSpec(spec), "");
  spec.scoreMod = std::string(fa::kMaxVariantTextBytes + 1, ' ');
  EXPECT_EQ(validateSpec(spec), "score_mod text must be at most 65536 bytes, "
                                "got 65537");
  // Nesting that would overflow MLIR's recursive parser (every API that
  // takes a variant: the C ABI, Python, fa-compile's --score-mod).
  spec.scoreMod = std::string(300, '(');
  EXPECT_EQ(validateSpec(spec),
            "score_mod text nests brackets more than 256 deep (at line 1, "
            "column 257); the limit is 256");
  // A dense array of index elements would crash MLIR's parser.
  spec.scoreMod = "func.func @s() attributes {a = array<index: 1>} {}";
  EXPECT_EQ(validateSpec(spec).rfind("score_mod text has a dense array of "
                                     "index elements",
                                     0),
            0u);
  spec.scoreMod = "";
  fa::KernelSpec plain, window = plain, wider = plain;
  window.maskMod = "a\nb";
  wider.maskMod = "a\nc";
  EXPECT_EQ(kernelName(plain).find("_mod"), std::string::npos);
  EXPECT_NE(kernelName(window), kernelName(wider));
  EXPECT_NE(kernelName(window).find("_mod"), std::string::npos);
  // One line: the newline is escaped.
  EXPECT_NE(canonicalText(window).find(";mask_mod=a\\nb"), std::string::npos);
  EXPECT_EQ(canonicalText(plain).find("mod="), std::string::npos);
}

/// The deterministic backward's dQ chains: in [0, 8], only with
/// deterministic; more than one is in the kernel's name and canonical text
/// (one is not: the one-chain kernels keep their names and cache keys);
/// wgmma resolves 0 to its model's default.
TEST(KernelSpec, DqChainsRules) {
  fa::KernelSpec spec;
  spec.backward = true;
  spec.dqChains = 2;
  EXPECT_EQ(validateSpec(spec),
            "dq_chains = 2 splits the deterministic backward's dQ turns: it "
            "needs deterministic");
  spec.deterministic = true;
  EXPECT_EQ(validateSpec(spec), "");
  spec.dqChains = 9;
  EXPECT_EQ(validateSpec(spec),
            "dq_chains must be in [0, 8] (0: the strategy's default), got 9");
  spec.dqChains = -1;
  EXPECT_NE(validateSpec(spec), "");
  fa::KernelSpec one = spec, three = spec;
  one.dqChains = 1;
  three.dqChains = 3;
  fa::KernelSpec unset = spec;
  unset.dqChains = 0;
  EXPECT_EQ(kernelName(one), kernelName(unset));
  EXPECT_EQ(canonicalText(one), canonicalText(unset));
  EXPECT_EQ(canonicalText(one).find("dq_chains"), std::string::npos);
  EXPECT_NE(kernelName(three).find("_det_c3"), std::string::npos);
  EXPECT_NE(canonicalText(three).find(";dq_chains=3"), std::string::npos);
  // A kernel that is not deterministic has one chain whatever the field.
  EXPECT_EQ(three.dqChainsOrOne(), 3);
  three.deterministic = false;
  EXPECT_EQ(three.dqChainsOrOne(), 1);

  fa::KernelSpec wgmma;
  wgmma.backward = wgmma.deterministic = true;
  wgmma.dtype = fa::ElementType::bf16;
  wgmma.headDim = 64;
  wgmma.strategy = fa::Strategy::wgmma;
  wgmma.blockM = wgmma.blockN = wgmma.numWarps = wgmma.stages = 0;
  EXPECT_EQ(withDefaults(wgmma).dqChains, fa::wgmma::kDeterministicDqChains);
  wgmma.dqChains = 4;
  EXPECT_EQ(withDefaults(wgmma).dqChains, 4);
}

/// A block mask program is one for both directions.
TEST(KernelSpec, BlockMaskProgramIsNotABackward) {
  fa::KernelSpec program;
  program.maskMod = fa::variants::document();
  program.blockMaskProgram = true;
  EXPECT_EQ(validateSpec(program), "");
  program.backward = true;
  EXPECT_EQ(validateSpec(program),
            "a block mask program serves the forward and the backward "
            "alike: it is not a backward");
}

TEST(KernelSpec, AutomaticStrategyByDtypeAndHeadDim) {
  fa::KernelSpec spec;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::simt); // f32
  spec.dtype = fa::ElementType::f16;
  // sm_90a (the default arch): warpgroup MMA for whole 64-column blocks.
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::wgmma);
  spec.headDim = 72;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma);
  spec.headDim = 128;
  spec.arch = "sm_80";
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma);
  spec.arch = "sm_90";
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma);
  spec.arch = "sm_90a";
  spec.headDim = 36; // not a multiple of 8: the tensor-core tiles cannot
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::simt);
  spec.headDim = 512; // over mma's 256
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::simt);
  spec.headDim = 64;
  spec.strategy = fa::Strategy::simt;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::simt);
  fa::Strategy parsed;
  ASSERT_TRUE(fa::parseStrategy("mma", parsed));
  EXPECT_EQ(parsed, fa::Strategy::mma);
  EXPECT_FALSE(fa::parseStrategy("tcgen05", parsed));
}

TEST(KernelSpec, StrategyRulesNameValueAndLimit) {
  fa::KernelSpec spec;
  spec.strategy = fa::Strategy::mma;
  spec.stages = 2;
  EXPECT_EQ(validateSpec(spec), "the mma strategy computes on f16 or bf16 "
                                "inputs, got f32 (use the simt strategy)");
  spec.dtype = fa::ElementType::bf16;
  EXPECT_EQ(validateSpec(spec), "");
  spec.headDim = 36;
  EXPECT_EQ(validateSpec(spec), "the mma strategy needs a head dim that is a "
                                "multiple of 8 and at most 256, got 36");
  spec.headDim = 64;
  spec.stages = 5;
  EXPECT_EQ(validateSpec(spec), "stages must be in [1, 4] for the mma strategy "
                                "(0 = default), got 5");
  spec.strategy = fa::Strategy::simt;
  spec.stages = 2;
  EXPECT_EQ(validateSpec(spec), "stages must be in [1, 1], got 2 (the simt "
                                "strategy has no K/V pipeline)");
}

/// The mma resource model: fragment divisibility, shared memory per arch,
/// the shared layout and the register estimate, with reasons.
// Strategies are found by name through one registry; names parse and
// print through it, and an unknown name is refused.
TEST(StrategyRegistry, NamesAndLookup) {
  std::vector<std::string> names;
  for (const fa::StrategyModel *model : fa::registeredStrategies()) {
    names.push_back(model->name);
    EXPECT_EQ(fa::lookupStrategy(model->name), model);
    EXPECT_EQ(&fa::strategyModel(model->kind), model);
    EXPECT_STREQ(fa::toString(model->kind), model->name);
    fa::Strategy parsed = fa::Strategy::automatic;
    ASSERT_TRUE(fa::parseStrategy(model->name, parsed));
    EXPECT_EQ(parsed, model->kind);
  }
  // The order auto prefers: warpgroup MMA, mma.sync, then simt (any problem).
  EXPECT_EQ(names, (std::vector<std::string>{"wgmma", "mma", "simt"}));
  EXPECT_EQ(fa::strategyNames(), "auto, wgmma, mma, simt");
  EXPECT_EQ(fa::strategyNames(/*withAuto=*/false), "wgmma, mma, simt");
  fa::Strategy unchanged = fa::Strategy::mma;
  for (const char *bad : {"", "Mma", "wmma", "simt ", "automatic"}) {
    EXPECT_FALSE(fa::parseStrategy(bad, unchanged)) << bad;
    EXPECT_EQ(fa::lookupStrategy(bad), nullptr) << bad;
  }
  EXPECT_EQ(unchanged, fa::Strategy::mma);
  fa::Strategy automatic = fa::Strategy::mma;
  ASSERT_TRUE(fa::parseStrategy("auto", automatic));
  EXPECT_EQ(automatic, fa::Strategy::automatic);
}

/// Each strategy names the tiles fa-sweep measures by default: every
/// dimension non-empty, and each tile a spec the strategy accepts
/// (simt's grid surrounds the lecture's 8 x 32 tile).
TEST(StrategyRegistry, SweepGrids) {
  for (const fa::StrategyModel *model : fa::registeredStrategies()) {
    const fa::TileGrid &grid = model->sweepGrid;
    ASSERT_FALSE(grid.blockM.empty() || grid.blockN.empty() ||
                 grid.numWarps.empty() || grid.stages.empty())
        << model->name;
    fa::KernelSpec spec;
    spec.strategy = model->kind;
    spec.dtype = model->kind == fa::Strategy::simt ? fa::ElementType::f32
                                                   : fa::ElementType::f16;
    spec.arch = "sm_90a";
    for (int64_t m : grid.blockM)
      for (int64_t n : grid.blockN)
        for (int64_t w : grid.numWarps)
          for (int64_t st : grid.stages) {
            spec.blockM = m, spec.blockN = n, spec.numWarps = w,
            spec.stages = st;
            EXPECT_EQ(model->checkSpec(spec), "")
                << model->name << " " << m << "x" << n << " w" << w << " s"
                << st;
          }
  }
  const fa::TileGrid &simt = fa::strategyModel(fa::Strategy::simt).sweepGrid;
  EXPECT_TRUE(llvm::is_contained(simt.blockM, 8));
  EXPECT_TRUE(llvm::is_contained(simt.blockN, 32));
}

TEST(StrategyRegistry, ReferenceTilesFillWhatIsLeftOut) {
  const fa::StrategyModel &simt = fa::strategyModel(fa::Strategy::simt);
  ASSERT_NE(simt.referenceTiles, nullptr);
  fa::KernelSpec spec;
  spec.strategy = fa::Strategy::simt;
  spec.blockM = spec.blockN = spec.numWarps = 0;
  spec.headDim = 128; // 32 thread columns: the lecture's grid fits
  std::optional<fa::TileConfig> tiles = simt.referenceTiles(spec);
  ASSERT_TRUE(tiles);
  EXPECT_EQ(tiles->blockM, 8);
  EXPECT_EQ(tiles->blockN, 32);
  EXPECT_EQ(tiles->numWarps, 8);
  // A head dim the grid does not fit: the defaults serve, unless a tile
  // field is given (the others then come from the lecture's kernel).
  spec.headDim = 40;
  EXPECT_FALSE(simt.referenceTiles(spec));
  spec.blockM = 16;
  EXPECT_TRUE(simt.referenceTiles(spec));
  // The backward has no reference kernel.
  spec.backward = true;
  EXPECT_FALSE(simt.referenceTiles(spec));
  // The tensor-core strategies take their defaults.
  EXPECT_EQ(fa::strategyModel(fa::Strategy::mma).referenceTiles, nullptr);
  EXPECT_EQ(fa::strategyModel(fa::Strategy::wgmma).referenceTiles, nullptr);
}

TEST(StrategyRegistry, BackwardAndKernelNames) {
  EXPECT_EQ(fa::checkLowersBackward(fa::strategyModel(fa::Strategy::simt)), "");
  EXPECT_EQ(fa::checkLowersBackward(fa::strategyModel(fa::Strategy::mma)), "");
  EXPECT_EQ(fa::checkLowersBackward(fa::strategyModel(fa::Strategy::wgmma)),
            "");
  // Pipelined strategies name their stages and themselves; simt neither.
  fa::KernelSpec spec;
  EXPECT_EQ(kernelName(spec), "fa_fwd_d128_f32_full_8x32_w8");
  spec.dtype = fa::ElementType::f16;
  spec.strategy = fa::Strategy::mma;
  spec.blockM = 128;
  spec.blockN = 64;
  spec.numWarps = 4;
  spec.stages = 2;
  EXPECT_EQ(kernelName(spec), "fa_fwd_d128_f16_full_128x64_w4_s2_mma");
  spec.strategy = fa::Strategy::wgmma;
  EXPECT_EQ(kernelName(spec), "fa_fwd_d128_f16_full_128x64_w4_s2_wgmma");
  // The simt strategy has no K/V pipeline: stages other than 0 and 1 are
  // refused with the value and the limit.
  fa::KernelSpec simt;
  simt.stages = 2;
  EXPECT_EQ(validateSpec(simt), "stages must be in [1, 1], got 2 (the simt "
                                "strategy has no K/V pipeline)");
}

TEST(MmaModel, FitsAndWhyNot) {
  const fa::GpuArch sm90 = *fa::lookupGpuArch("sm_90a");
  const fa::GpuArch sm86 = *fa::lookupGpuArch("sm_86");
  fa::mma::Config c{128, 128, 64, 4, 2, 2};
  EXPECT_EQ(fa::mma::checkFits(c, sm90), "");
  // Rows padded to an odd number of 16-byte chunks: 128 + 8 elements.
  fa::mma::SharedLayout layout = fa::mma::sharedLayout(c);
  EXPECT_EQ(layout.rowPitch, 136);
  EXPECT_EQ(layout.kOffset, 128 * 136 * 2);
  EXPECT_EQ(layout.vOffset, layout.kOffset + 2 * 64 * 136 * 2);
  EXPECT_EQ(layout.totalBytes, (128 + 4 * 64) * 136 * 2);
  EXPECT_EQ((layout.rowPitch * 2 / 16) % 2, 1);
  // Odd multiples of 8 are padded to k16 inside the kernel.
  EXPECT_EQ(fa::mma::contractionWidth(40), 48);
  EXPECT_EQ(fa::mma::sharedLayout({40, 64, 64, 4, 2, 2}).rowPitch, 56);
  fa::mma::Config rows = c;
  rows.numWarps = 16;
  EXPECT_NE(fa::mma::checkFits(rows, sm90)
                .find("block-m 128 is not a multiple of 16 x num-warps = 256"),
            std::string::npos);
  fa::mma::Config cols = c;
  cols.blockN = 24;
  EXPECT_NE(fa::mma::checkFits(cols, sm90)
                .find("block-n 24 is not a multiple of 16"),
            std::string::npos);
  fa::mma::Config big{256, 128, 128, 8, 4, 2};
  EXPECT_NE(fa::mma::checkFits(big, sm90).find("bytes of shared memory per "
                                               "block, over the 232432 bytes "
                                               "available on sm_90a"),
            std::string::npos);
  EXPECT_NE(fa::mma::checkFits(c, sm86).find("over the 101360 bytes available "
                                             "on sm_86"),
            std::string::npos);
  // Q stays in registers where it fits (D = 64 on 4 warps x 32 rows), and
  // is read again from shared memory where it would not (D = 128).
  EXPECT_TRUE(fa::mma::keepQInRegisters({64, 128, 64, 4, 2, 2}));
  EXPECT_FALSE(fa::mma::keepQInRegisters(c));
  EXPECT_LE(fa::mma::estimateRegisters(c), 255);
}

/// Every default candidate fits its arch and the register estimate; the
/// fields a caller set are kept; each head dim the strategy takes gets one.
TEST(MmaModel, DefaultsFitAndKeepWhatIsSet) {
  for (const char *arch : {"sm_80", "sm_86", "sm_90a"})
    for (int64_t d = 8; d <= 256; d += 8) {
      fa::KernelSpec spec;
      spec.headDim = d;
      spec.dtype = fa::ElementType::f16;
      spec.strategy = fa::Strategy::mma;
      spec.arch = arch;
      spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
      std::vector<fa::KernelSpec> candidates = defaultCandidates(spec);
      ASSERT_FALSE(candidates.empty());
      for (const fa::KernelSpec &c : candidates) {
        EXPECT_EQ(resolveStrategy(c), fa::Strategy::mma);
        EXPECT_EQ(validateSpec(c), "");
        fa::mma::Config config{d, c.blockM, c.blockN, c.numWarps, c.stages, 2};
        EXPECT_EQ(fa::mma::checkFits(config, *fa::lookupGpuArch(arch)), "")
            << kernelName(c);
        EXPECT_LE(fa::mma::estimateRegisters(config),
                  fa::maxRegistersPerThread(32 * c.numWarps));
      }
      spec.blockN = 32;
      spec.stages = 3;
      fa::KernelSpec withN = withDefaults(spec);
      EXPECT_EQ(withN.blockN, 32);
      EXPECT_EQ(withN.stages, 3);
    }
}

/// The mma backward's dkdv model: fragments of both S (query rows) and dK/dV
/// (key rows) per warp, its shared layout, and the defaults.
TEST(MmaModel, BackwardFitsAndWhyNot) {
  const fa::GpuArch sm90 = *fa::lookupGpuArch("sm_90a");
  const fa::GpuArch sm80 = *fa::lookupGpuArch("sm_80");
  fa::mma::Config c{128, 64, 64, 4, 2, 2};
  EXPECT_EQ(fa::mma::checkBackwardFits(c, sm90), "");
  // K, V, two Q and two dO slots of 64 x 136 elements; one staging tile
  // (P, then dS) and one for P's rounding residual, each 64 x (64 + 8):
  // 122880 bytes, one block per H200 SM (two with one-slot rings).
  fa::mma::BackwardSharedLayout layout = fa::mma::backwardSharedLayout(c);
  EXPECT_EQ(layout.vOffset, 64 * 136 * 2);
  EXPECT_EQ(layout.qOffset, 2 * 64 * 136 * 2);
  EXPECT_EQ(layout.gradOutputOffset, 4 * 64 * 136 * 2);
  EXPECT_EQ(layout.stagedOffset, 6 * 64 * 136 * 2);
  EXPECT_EQ(layout.residualOffset, 6 * 64 * 136 * 2 + 64 * 72 * 2);
  EXPECT_EQ(layout.totalBytes, 6 * 64 * 136 * 2 + 2 * 64 * 72 * 2);
  EXPECT_GT(2 * (layout.totalBytes + fa::kStaticSharedMemoryReserve),
            sm90.maxSharedMemoryPerSM);
  fa::mma::Config oneSlot = c;
  oneSlot.stages = 1;
  EXPECT_LE(2 * (fa::mma::backwardSharedLayout(oneSlot).totalBytes +
                 fa::kStaticSharedMemoryReserve),
            sm90.maxSharedMemoryPerSM);
  EXPECT_LE(fa::mma::estimateBackwardRegisters(c), 255);
  fa::mma::Config keys = c;
  keys.blockN = 32;
  EXPECT_NE(fa::mma::checkBackwardFits(keys, sm90)
                .find("block-n 32 is not a multiple of 16 x num-warps = 64 "
                      "(each warp owns whole m16 fragments of dK and dV)"),
            std::string::npos);
  fa::mma::Config queries = c;
  queries.blockM = 96;
  EXPECT_NE(fa::mma::checkBackwardFits(queries, sm90)
                .find("block-m 96 is not a multiple of 16 x num-warps = 64"),
            std::string::npos);
  fa::mma::Config big{64, 128, 128, 8, 3, 2}; // 217088 bytes
  EXPECT_EQ(fa::mma::checkBackwardFits(big, sm90), "");
  EXPECT_NE(fa::mma::checkBackwardFits(big, sm80).find(
                "needs 217088 bytes of shared memory per block, over the "
                "166896 bytes available on sm_80"),
            std::string::npos);
  // D = 256: a warp's 16 rows of dK and dV alone take 256 registers.
  EXPECT_GT(fa::mma::estimateBackwardRegisters({256, 64, 64, 4, 1, 2}), 255);
}

/// At head dim 128 the causal forward starts at 128 x 32: 128 x 64 (the
/// non-causal first) spills with the causal mask on sm_80 and sm_90a, so
/// ranking it first cost every cold causal default a trial compile.
TEST(MmaModel, CausalHeadDim128StartsWhereItDoesNotSpill) {
  fa::KernelSpec spec;
  spec.headDim = 128;
  spec.dtype = fa::ElementType::bf16;
  spec.strategy = fa::Strategy::mma;
  spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
  for (const char *arch : {"sm_80", "sm_90a"}) {
    spec.arch = arch;
    spec.causal = false;
    fa::KernelSpec first = defaultCandidates(spec).front();
    EXPECT_EQ(kernelName(first), "fa_fwd_d128_bf16_full_128x64_w4_s2_mma");
    spec.causal = true;
    first = defaultCandidates(spec).front();
    EXPECT_EQ(kernelName(first), "fa_fwd_d128_bf16_causal_128x32_w4_s2_mma");
  }
  // Head dims 64 and 256 keep their lists.
  spec.headDim = 64;
  EXPECT_EQ(kernelName(defaultCandidates(spec).front()),
            "fa_fwd_d64_bf16_causal_128x128_w4_s2_mma");
}

TEST(MmaModel, BackwardStrategyAndDefaults) {
  fa::KernelSpec spec;
  spec.backward = true;
  spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::simt); // f32
  spec.dtype = fa::ElementType::bf16;
  spec.arch = "sm_80"; // (sm_90a: wgmma at 64 and 128, WgmmaModel's test)
  for (int64_t d : {8, 64, 72, 128}) {
    spec.headDim = d;
    EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma) << d;
  }
  // Past 128: mma where the 8-warp grid's 64 x 64 tiles fit the shared
  // memory (sm_80, sm_90 up to 256); past 144 the 99 KB of sm_86/sm_89 leave
  // it to simt (the 32-row mma tiles that fit there spill 132-332 bytes
  // with ptxas 13.0).
  for (int64_t d : {144, 192, 256}) {
    spec.headDim = d;
    for (const char *arch : {"sm_80", "sm_90", "sm_90a"}) {
      spec.arch = arch;
      EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma) << arch << " " << d;
    }
    // 64 x 64 tiles on 8 warps fit the 99 KB of sm_86/sm_89 up to head dim
    // 144 (96 KB; 242-244 registers there, no spills).
    for (const char *arch : {"sm_86", "sm_89"}) {
      spec.arch = arch;
      EXPECT_EQ(resolveStrategy(spec),
                d <= 144 ? fa::Strategy::mma : fa::Strategy::simt)
          << arch << " " << d;
    }
  }
  spec.arch = "sm_80";
  // Head dims that do not split into two 16-column halves have no 8-warp
  // grid; and past the mma strategy's largest head dim.
  for (int64_t d : {136, 248, 264}) {
    spec.headDim = d;
    EXPECT_EQ(resolveStrategy(spec), fa::Strategy::simt) << d;
  }
  spec.headDim = 256;
  spec.strategy = fa::Strategy::wgmma;
  spec.arch = "sm_90a";
  EXPECT_EQ(validateSpec(spec),
            "the wgmma backward needs a head dim of 64 or 128, got 256 (dK and "
            "dV of a warpgroup's 64 rows take head-dim registers each per "
            "thread; use the mma or simt strategy)");
  spec.strategy = fa::Strategy::automatic;
  for (const char *arch : {"sm_80", "sm_86", "sm_90a"})
    for (int64_t d = 8; d <= 128; d += 8) {
      spec.headDim = d;
      spec.arch = arch;
      std::vector<fa::KernelSpec> candidates = defaultCandidates(spec);
      ASSERT_FALSE(candidates.empty());
      if (std::string(arch) == "sm_90a" && (d == 64 || d == 128)) {
        EXPECT_EQ(resolveStrategy(spec), fa::Strategy::wgmma) << d;
        continue;
      }
      for (const fa::KernelSpec &c : candidates) {
        EXPECT_EQ(resolveStrategy(c), fa::Strategy::mma);
        EXPECT_EQ(validateSpec(c), "");
        fa::mma::Config config{d, c.blockM, c.blockN, c.numWarps, c.stages, 2};
        EXPECT_EQ(fa::mma::checkBackwardFits(config, *fa::lookupGpuArch(arch)),
                  "")
            << kernelName(c);
        EXPECT_LE(fa::mma::estimateBackwardRegisters(config),
                  fa::maxRegistersPerThread(32 * c.numWarps));
      }
    }
  // The fields a caller sets are kept.
  spec.headDim = 64;
  spec.numWarps = 4;
  fa::KernelSpec chosen = withDefaults(spec);
  EXPECT_EQ(chosen.numWarps, 4);
  EXPECT_EQ(chosen.blockN % 64, 0);
}

/// 8-bit programs add transposed V tiles after the V ring: at least the
/// producer's ring of kTransposedValueRingSlots, and one per consumer
/// warpgroup where each transposes its own; 16-bit programs none.
TEST(WgmmaModel, Float8LayoutHoldsTheTransposedValueRing) {
  for (int64_t warps : {4, 8}) {
    fa::wgmma::Config c{256, 16 * warps, 128, warps, 2, /*elementBytes=*/1};
    fa::wgmma::SharedLayout layout = fa::wgmma::sharedLayout(c);
    EXPECT_EQ(layout.transposedValueOffset,
              layout.vOffset + 2 * layout.kvSlotBytes);
    EXPECT_EQ(
        layout.transposedValueSlots,
        std::max<int64_t>(fa::wgmma::kTransposedValueRingSlots, warps / 4));
    EXPECT_EQ(layout.transposedValueOffset % 1024, 0);
    EXPECT_EQ(layout.totalBytes,
              layout.transposedValueOffset +
                  layout.transposedValueSlots * layout.kvSlotBytes + 1024);
  }
  fa::wgmma::SharedLayout sixteen =
      fa::wgmma::sharedLayout({128, 128, 128, 8, 2, 2});
  EXPECT_EQ(sixteen.transposedValueSlots, 0);
  EXPECT_EQ(sixteen.transposedValueOffset, 0);
}

TEST(WgmmaModel, FitsAndWhyNot) {
  const fa::GpuArch sm90a = *fa::lookupGpuArch("sm_90a");
  const fa::GpuArch sm90 = *fa::lookupGpuArch("sm_90");
  fa::wgmma::Config c{128, 128, 128, 8, 2, 2};
  EXPECT_EQ(fa::wgmma::checkFits(c, sm90a), "");
  // Unpadded swizzled tiles on 1024-byte boundaries, plus the slack that
  // aligns the base.
  fa::wgmma::SharedLayout layout = fa::wgmma::sharedLayout(c);
  EXPECT_EQ(layout.kOffset, 128 * 128 * 2);
  EXPECT_EQ(layout.vOffset, layout.kOffset + 2 * 128 * 128 * 2);
  EXPECT_EQ(layout.totalBytes, (128 + 4 * 128) * 128 * 2 + 1024);
  EXPECT_EQ(layout.kOffset % 1024, 0);
  EXPECT_EQ(layout.kvSlotBytes % 1024, 0);
  EXPECT_EQ(fa::wgmma::checkFits(c, sm90),
            "the wgmma strategy needs arch sm_90a, got sm_90");
  fa::wgmma::Config rows = c;
  rows.blockM = 64;
  EXPECT_NE(fa::wgmma::checkFits(rows, sm90a)
                .find("block-m must be 64 x warpgroups = 128"),
            std::string::npos);
  fa::wgmma::Config warps = c;
  warps.numWarps = 6;
  EXPECT_NE(fa::wgmma::checkFits(warps, sm90a)
                .find("num-warps must be 4, 8, 12 or 16"),
            std::string::npos);
  fa::wgmma::Config cols = c;
  cols.blockN = 24;
  EXPECT_NE(fa::wgmma::checkFits(cols, sm90a)
                .find("block-n must be a multiple of 16 up to 256"),
            std::string::npos);
  fa::wgmma::Config dim = c;
  dim.headDim = 96;
  EXPECT_NE(fa::wgmma::checkFits(dim, sm90a)
                .find("the head dim must be a multiple of 64 up to 256"),
            std::string::npos);
  fa::wgmma::Config big{256, 128, 128, 8, 2, 2};
  EXPECT_NE(fa::wgmma::checkFits(big, sm90a)
                .find("over the 232432 bytes available on sm_90a"),
            std::string::npos);
  // The spec rules: 16-bit, head dims in 64-column blocks, sm_90a.
  fa::KernelSpec spec;
  spec.strategy = fa::Strategy::wgmma;
  spec.dtype = fa::ElementType::f16;
  spec.headDim = 128;
  spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
  EXPECT_EQ(validateSpec(spec), "");
  EXPECT_EQ(kernelName(withDefaults(spec)),
            "fa_fwd_d128_f16_full_128x128_w8_s2_wgmma");
  spec.arch = "sm_80";
  EXPECT_EQ(validateSpec(spec), "the wgmma strategy needs arch sm_90a (wgmma "
                                "exists only there), got sm_80");
  spec.arch = "sm_90a";
  spec.headDim = 72;
  EXPECT_NE(validateSpec(spec).find("multiple of 64 and at most 256, got 72"),
            std::string::npos);
  spec.headDim = 64;
  spec.dtype = fa::ElementType::f32;
  EXPECT_NE(validateSpec(spec).find("f16 or bf16 inputs, got f32"),
            std::string::npos);
  fa::Strategy parsed;
  ASSERT_TRUE(fa::parseStrategy("wgmma", parsed));
  EXPECT_EQ(parsed, fa::Strategy::wgmma);
}

/// setmaxnreg moves registers only within a block's allocation: what the
/// consumers take (above their entry registers) must not exceed what the
/// producer gives back, or their setmaxnreg.inc waits forever. Checked for
/// every block shape, per-tile and persistent.
TEST(WgmmaModel, ConsumersTakeOnlyWhatTheProducerGivesBack) {
  for (bool persistent : {false, true})
    for (bool transposes : {false, true})
      for (bool writer : {false, true})
        for (int64_t warps : {4, 8, 12, 16}) {
          int64_t consumerThreads = 32 * warps;
          int64_t entry = fa::wgmma::entryRegisters(consumerThreads + 128);
          int64_t producer =
              fa::wgmma::producerRegisters(persistent, transposes, writer);
          int64_t consumer = fa::wgmma::consumerRegisters(warps, persistent,
                                                          transposes, writer);
          EXPECT_LE((consumer - entry) * consumerThreads,
                    (entry - producer) * 128)
              << warps << " warps, persistent " << persistent << ", transposes "
              << transposes << ", writer warp " << writer;
          EXPECT_EQ(consumer % 8, 0);
          EXPECT_LE(consumer, 240);
        }
  // Two consumer warpgroups: 168 at entry; all 240 per tile (the producer
  // keeps 24), 232 persistent (it keeps 40), 224 with the producer
  // transposing 8-bit V (it keeps 56). Three: 160 per tile.
  EXPECT_EQ(fa::wgmma::entryRegisters(384), 168);
  EXPECT_EQ(fa::wgmma::consumerRegisters(8, false, false), 240);
  EXPECT_EQ(fa::wgmma::consumerRegisters(8, true, false), 232);
  EXPECT_EQ(fa::wgmma::consumerRegisters(8, false, true), 224);
  EXPECT_EQ(fa::wgmma::consumerRegisters(8, true, true), 224);
  EXPECT_EQ(fa::wgmma::consumerRegisters(12, false, false), 160);
  EXPECT_EQ(fa::wgmma::consumerRegisters(16, false, false), 112);
  // A dQ writer warp in the producer warpgroup: it keeps 32, the two
  // consumer warpgroups take 232.
  EXPECT_EQ(fa::wgmma::producerRegisters(false, false, true), 32);
  EXPECT_EQ(fa::wgmma::consumerRegisters(8, false, false, true), 232);
}

/// fa-warp-specialize's writer-warp names which dkdv programs get a writer
/// warp; another name is refused (nullopt), never read as "none".
TEST(WgmmaModel, WriterWarpModes) {
  EXPECT_EQ(fa::wgmma::takesWriterWarp("none", true), false);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("deterministic", true), true);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("deterministic", false), false);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("every", false), true);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("all", false, /*ragged=*/true,
                                       /*readsTables=*/true),
            true);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("always", false), std::nullopt);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("Deterministic", true), std::nullopt);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("", false), std::nullopt);
  // Varlen and block-mask programs: as kWriterWarpForRagged and
  // kWriterWarpForTables say (the default mode's).
  EXPECT_EQ(fa::wgmma::takesWriterWarp("every", false, /*ragged=*/true),
            fa::wgmma::kWriterWarpForRagged);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("every", false, /*ragged=*/false,
                                       /*readsTables=*/true),
            fa::wgmma::kWriterWarpForTables);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("every", false, true, true),
            fa::wgmma::kWriterWarpForRagged && fa::wgmma::kWriterWarpForTables);
  // Deterministic block-mask programs: kWriterWarpForDeterministicTables
  // (their turn code's loops go to the writer).
  EXPECT_EQ(fa::wgmma::takesWriterWarp("every", true, /*ragged=*/false,
                                       /*readsTables=*/true),
            fa::wgmma::kWriterWarpForDeterministicTables);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("deterministic", true, false, true),
            fa::wgmma::kWriterWarpForDeterministicTables);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("deterministic", false, false, true),
            false);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("none", true, true), false);
  EXPECT_EQ(fa::wgmma::takesWriterWarp("bad", true, true), std::nullopt);
  // The shipped default is a valid mode.
  EXPECT_TRUE(
      fa::wgmma::takesWriterWarp(fa::wgmma::kWriterWarp, true).has_value());
}

TEST(WgmmaModel, DefaultsFitAndKeepWhatIsSet) {
  for (int64_t d : {64, 128, 192, 256}) {
    fa::KernelSpec spec;
    spec.headDim = d;
    spec.dtype = fa::ElementType::bf16;
    spec.strategy = fa::Strategy::wgmma;
    spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
    std::vector<fa::KernelSpec> candidates = defaultCandidates(spec);
    ASSERT_FALSE(candidates.empty());
    for (const fa::KernelSpec &c : candidates) {
      EXPECT_EQ(resolveStrategy(c), fa::Strategy::wgmma);
      EXPECT_EQ(validateSpec(c), "");
      fa::wgmma::Config config{d, c.blockM, c.blockN, c.numWarps, c.stages, 2};
      EXPECT_EQ(fa::wgmma::checkFits(config, *fa::lookupGpuArch("sm_90a")), "")
          << kernelName(c);
      EXPECT_LE(fa::wgmma::estimateRegisters(config),
                fa::wgmma::consumerRegisters(
                    c.numWarps, fa::wgmma::runsPersistent(d, c.numWarps),
                    /*transposesValue=*/false));
    }
    spec.blockN = 64;
    spec.stages = 1;
    fa::KernelSpec withN = withDefaults(spec);
    EXPECT_EQ(withN.blockN, 64);
    EXPECT_EQ(withN.stages, 1);
    EXPECT_EQ(withN.blockM, 16 * withN.numWarps);
  }
}

/// At D = 64 sequences up to 1k rank the two-warpgroup (persistent) tiles
/// first, longer or unknown lengths the three-warpgroup ones; other head
/// dims and other strategies do not rank by length.
/// The backward's dkdv program on wgmma: 64 K/V rows per warpgroup, one
/// m64 of query rows, D 64 or 128; its shared layout and its budget.
TEST(WgmmaModel, BackwardFitsAndWhyNot) {
  const fa::GpuArch sm90a = *fa::lookupGpuArch("sm_90a");
  fa::wgmma::Config c{128, 64, 128, 8, 2, 2};
  EXPECT_EQ(fa::wgmma::checkBackwardFits(c, sm90a), "");
  fa::wgmma::BackwardSharedLayout layout = fa::wgmma::backwardSharedLayout(c);
  // K, V (32 KiB each), two slots of Q and of dO (16 KiB each), staged P
  // and dS (16 KiB each), the staged f32 dQ part (32 KiB), the 1024-byte
  // alignment slack.
  EXPECT_EQ(layout.vOffset, 32768);
  EXPECT_EQ(layout.qOffset, 65536);
  EXPECT_EQ(layout.gradOutputOffset, 98304);
  EXPECT_EQ(layout.probsOffset, 131072);
  EXPECT_EQ(layout.gradScoresOffset, 147456);
  EXPECT_EQ(layout.gradQueryOffset, 163840);
  EXPECT_EQ(layout.totalBytes, 197632);
  // Tiles start on 1024-byte boundaries (the swizzle atom).
  for (int64_t offset : {layout.vOffset, layout.qOffset,
                         layout.gradOutputOffset, layout.probsOffset,
                         layout.gradScoresOffset, layout.gradQueryOffset})
    EXPECT_EQ(offset % fa::wgmma::kSwizzleAtomBytes, 0) << offset;
  // dK, dV (128 each at D = 128), P and dP (32 each), within what the
  // consumers take next to the producer warpgroup (240).
  EXPECT_EQ(fa::wgmma::consumerRegisters(c.numWarps, /*persistent=*/false,
                                         /*transposesValue=*/false),
            240);
  EXPECT_LE(fa::wgmma::estimateBackwardRegisters(c), 240);
  EXPECT_GT(fa::wgmma::estimateBackwardRegisters(c), 2 * 64 + 2 * 32);

  fa::wgmma::Config keys = c;
  keys.blockN = 64;
  EXPECT_NE(fa::wgmma::checkBackwardFits(keys, sm90a)
                .find("block-n must be 64 x warpgroups = 128"),
            std::string::npos);
  fa::wgmma::Config queries = c;
  queries.blockM = 128;
  EXPECT_NE(fa::wgmma::checkBackwardFits(queries, sm90a)
                .find("block-m must be 64"),
            std::string::npos);
  fa::wgmma::Config wide = c;
  wide.headDim = 256;
  EXPECT_NE(fa::wgmma::checkBackwardFits(wide, sm90a)
                .find("the head dim must be 64 or 128"),
            std::string::npos);
  fa::wgmma::Config threeGroups = c;
  threeGroups.numWarps = 12;
  threeGroups.blockN = 192;
  EXPECT_NE(fa::wgmma::checkBackwardFits(threeGroups, sm90a)
                .find("num-warps must be 4 or 8"),
            std::string::npos);
  // LSE and D one query tile ahead where registers are left: at head dim
  // 64 (dK and dV take 64 registers each) both; at 128 (128 each; ptxas
  // spilled with both) LSE alone in a plain program, nothing otherwise.
  using fa::wgmma::RowValuePrefetch;
  fa::wgmma::Config narrow = c;
  narrow.headDim = 64;
  EXPECT_EQ(fa::wgmma::prefetchedRowValues(narrow, true),
            RowValuePrefetch::both);
  EXPECT_EQ(fa::wgmma::prefetchedRowValues(narrow, false),
            RowValuePrefetch::both);
  EXPECT_EQ(fa::wgmma::prefetchedRowValues(c, true),
            RowValuePrefetch::logSumExp);
  EXPECT_EQ(fa::wgmma::prefetchedRowValues(c, false), RowValuePrefetch::none);
  // Three Q/dO slots fit with the dQ staging (230400 bytes of the 232448),
  // four do not (the deterministic mode stages dQ too).
  fa::wgmma::Config deep = c;
  deep.stages = 3;
  EXPECT_EQ(fa::wgmma::backwardSharedLayout(deep).totalBytes, 230400);
  EXPECT_EQ(fa::wgmma::checkBackwardFits(deep, sm90a), "");
  deep.stages = 4;
  EXPECT_NE(fa::wgmma::checkBackwardFits(deep, sm90a)
                .find("needs 263168 bytes of shared memory per block"),
            std::string::npos);
  deep.stages = 5;
  EXPECT_NE(fa::wgmma::checkBackwardFits(deep, sm90a).find("stages must be"),
            std::string::npos);
  EXPECT_NE(fa::wgmma::checkBackwardFits(c, *fa::lookupGpuArch("sm_90"))
                .find("needs arch sm_90a"),
            std::string::npos);
}

/// The producer warpgroup transposes 8-bit V where it was measured faster:
/// head dim 128 with two or more stages (one stage would wait on itself),
/// never for 16-bit programs, whose wgmma reads V as it is.
TEST(WgmmaModel, ProducerTransposesValueWhereMeasured) {
  auto config = [](int64_t headDim, int64_t stages, int64_t bytes) {
    return fa::wgmma::Config{headDim, 128, 128, 8, stages, bytes};
  };
  EXPECT_EQ(fa::wgmma::producerTransposesValue(config(128, 2, 1)),
            fa::wgmma::kProducerTransposesValue);
  EXPECT_FALSE(fa::wgmma::producerTransposesValue(config(128, 1, 1)));
  EXPECT_FALSE(fa::wgmma::producerTransposesValue(config(64, 2, 1)));
  EXPECT_FALSE(fa::wgmma::producerTransposesValue(config(256, 2, 1)));
  EXPECT_FALSE(fa::wgmma::producerTransposesValue(config(128, 2, 2)));
}

/// The dkdv program's rotating stagings: a second buffer each where it fits
/// beside the stages (and the layout moves what follows it), never at the
/// cost of the shared memory the stages need; an unknown mode is refused.
TEST(WgmmaModel, RotatedStagingFitsBesideTheStages) {
  const int64_t available =
      fa::lookupGpuArch("sm_90a")->maxSharedMemoryPerBlock -
      fa::kStaticSharedMemoryReserve;
  fa::wgmma::Config d64{64, 64, 128, 8, 3, 2};
  auto gradScores =
      fa::wgmma::backwardStagingBuffers(d64, "grad-scores", available);
  ASSERT_TRUE(gradScores.has_value());
  EXPECT_EQ(gradScores->probs, 1);
  EXPECT_EQ(gradScores->gradScores, 2);
  fa::wgmma::BackwardSharedLayout one = fa::wgmma::backwardSharedLayout(d64);
  fa::wgmma::BackwardSharedLayout two =
      fa::wgmma::backwardSharedLayout(d64, *gradScores);
  EXPECT_EQ(two.gradScoresOffset, one.gradScoresOffset);
  EXPECT_EQ(two.gradQueryOffset, one.gradQueryOffset + 64 * 128 * 2);
  EXPECT_EQ(two.totalBytes, one.totalBytes + 64 * 128 * 2);
  auto both = fa::wgmma::backwardStagingBuffers(d64, "both", available);
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->probs, 2);
  EXPECT_EQ(both->gradScores, 2);
  // D 128 with three stages takes 230400 bytes: no room for either.
  fa::wgmma::Config d128{128, 64, 128, 8, 3, 2};
  auto full = fa::wgmma::backwardStagingBuffers(d128, "both", available);
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(full->probs, 1);
  EXPECT_EQ(full->gradScores, 1);
  EXPECT_LE(fa::wgmma::backwardSharedLayout(d128, *full).totalBytes,
            available);
  // With less room than both need, dS (the all-consumer barrier) first.
  auto some = fa::wgmma::backwardStagingBuffers(
      d64, "both", fa::wgmma::backwardSharedLayout(d64, *gradScores).totalBytes);
  ASSERT_TRUE(some.has_value());
  EXPECT_EQ(some->probs, 1);
  EXPECT_EQ(some->gradScores, 2);
  EXPECT_EQ(fa::wgmma::backwardStagingBuffers(d64, "dS", available),
            std::nullopt);
  EXPECT_EQ(fa::wgmma::backwardStagingBuffers(d64, "model", available),
            std::nullopt);
  // The model's choice: where measured (head dim 64), the shipped mode,
  // itself a valid one.
  EXPECT_EQ(fa::wgmma::rotatedStaging(d64), fa::wgmma::kRotatedStaging);
  EXPECT_EQ(fa::wgmma::rotatedStaging(d128), "none");
  EXPECT_TRUE(fa::wgmma::backwardStagingBuffers(
                  d64, fa::wgmma::kRotatedStaging, available)
                  .has_value());
}

/// Staged row values (LSE, D) take a ring of the stages each after the dQ
/// staging, where they fit beside the stages and the rotations asked for
/// (both fit at head dims 64 and 128 with three stages); with less room
/// the rotations go first, then the row values; transposed scores keep
/// them in registers.
TEST(WgmmaModel, StagedRowValuesFitBesideTheStages) {
  const int64_t available =
      fa::lookupGpuArch("sm_90a")->maxSharedMemoryPerBlock -
      fa::kStaticSharedMemoryReserve;
  fa::wgmma::Config d64{64, 64, 128, 8, 3, 2};
  fa::wgmma::Config d128{128, 64, 128, 8, 3, 2};
  EXPECT_EQ(fa::wgmma::stagesRowValues(d64), fa::wgmma::kStagedRowValues);
  EXPECT_FALSE(fa::wgmma::stagesRowValues(d64, /*transposedScores=*/true));
  EXPECT_FALSE(fa::wgmma::stagesRowValues(d64, false, /*readsTables=*/true));
  // The copying warps' loops take 40 producer registers, which leaves the
  // consumers of two warpgroups the 232 the writer warp leaves them.
  EXPECT_EQ(fa::wgmma::producerRegisters(false, false, true, true), 40);
  EXPECT_EQ(fa::wgmma::producerRegisters(false, false, false, true), 40);
  EXPECT_EQ(fa::wgmma::consumerRegisters(8, false, false, true, true),
            fa::wgmma::consumerRegisters(8, false, false, true));
  for (const fa::wgmma::Config &c : {d64, d128}) {
    auto buffers = fa::wgmma::backwardStagingBuffers(
        c, fa::wgmma::rotatedStaging(c), available, /*rowValues=*/true);
    ASSERT_TRUE(buffers.has_value());
    EXPECT_TRUE(buffers->rowValues);
    fa::wgmma::StagingBuffers without = *buffers;
    without.rowValues = false;
    fa::wgmma::BackwardSharedLayout plain =
        fa::wgmma::backwardSharedLayout(c, without);
    fa::wgmma::BackwardSharedLayout staged =
        fa::wgmma::backwardSharedLayout(c, *buffers);
    EXPECT_EQ(plain.logSumExpOffset, -1);
    EXPECT_EQ(plain.deltaOffset, -1);
    EXPECT_EQ(staged.gradQueryOffset, plain.gradQueryOffset);
    EXPECT_EQ(staged.logSumExpOffset,
              plain.gradQueryOffset + c.blockM * c.headDim * 4);
    EXPECT_EQ(staged.deltaOffset, staged.logSumExpOffset + 3 * 64 * 4);
    EXPECT_EQ(staged.totalBytes, plain.totalBytes + 2 * 3 * 64 * 4);
    EXPECT_LE(staged.totalBytes, available);
  }
  EXPECT_EQ(fa::wgmma::backwardSharedLayout(d128, {1, 1, /*rowValues=*/true})
                .totalBytes,
            230400 + 1536);
  // Room for the rotation or the row values: the rotation goes first.
  fa::wgmma::StagingBuffers rowsOnly{1, 1, true};
  auto tight = fa::wgmma::backwardStagingBuffers(
      d64, "grad-scores",
      fa::wgmma::backwardSharedLayout(d64, rowsOnly).totalBytes, true);
  ASSERT_TRUE(tight.has_value());
  EXPECT_EQ(tight->gradScores, 1);
  EXPECT_TRUE(tight->rowValues);
  // No room for them either: registers.
  auto none = fa::wgmma::backwardStagingBuffers(
      d64, "grad-scores", fa::wgmma::backwardSharedLayout(d64).totalBytes,
      true);
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->rowValues);
}

TEST(WgmmaModel, BackwardDefaultsAndStrategy) {
  fa::KernelSpec spec;
  spec.backward = true;
  spec.dtype = fa::ElementType::bf16;
  spec.arch = "sm_90a";
  spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
  // auto: wgmma's backward at head dims 64 and 128 on sm_90a (measured
  // faster than mma's on every row), mma's elsewhere.
  for (int64_t d : {64, 128}) {
    spec.headDim = d;
    EXPECT_EQ(resolveStrategy(spec), fa::Strategy::wgmma) << d;
  }
  for (int64_t d : {32, 72, 96}) {
    spec.headDim = d;
    EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma) << d;
  }
  spec.headDim = 128;
  spec.arch = "sm_90";
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::mma);
  spec.arch = "sm_90a";
  spec.dtype = fa::ElementType::f32;
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::simt);
  spec.dtype = fa::ElementType::bf16;
  spec.strategy = fa::Strategy::wgmma;
  EXPECT_EQ(validateSpec(spec), "");
  // Three Q/dO stages first, then two and one; never one warpgroup.
  fa::KernelSpec defaults = withDefaults(spec);
  EXPECT_EQ(kernelName(defaults), "fa_bwd_d128_bf16_full_64x128_w8_s3_wgmma");
  spec.headDim = 64;
  std::vector<std::string> names;
  for (const fa::KernelSpec &c : defaultCandidates(spec, 0))
    names.push_back(kernelName(c));
  EXPECT_EQ(names, (std::vector<std::string>{
                       "fa_bwd_d64_bf16_full_64x128_w8_s3_wgmma",
                       "fa_bwd_d64_bf16_full_64x128_w8_s2_wgmma",
                       "fa_bwd_d64_bf16_full_64x128_w8_s1_wgmma"}));
  // A varlen batch at head dim 64 (with the writer warp, three stages
  // spill): two stages first, so that a cold compile assembles one.
  spec.varlen = true;
  names.clear();
  for (const fa::KernelSpec &c : defaultCandidates(spec, 0))
    names.push_back(kernelName(c));
  if (fa::wgmma::kWriterWarpForRagged)
    EXPECT_EQ(names, (std::vector<std::string>{
                         "fa_bwd_d64_bf16_full_64x128_w8_varlen_s2_wgmma",
                         "fa_bwd_d64_bf16_full_64x128_w8_varlen_s3_wgmma",
                         "fa_bwd_d64_bf16_full_64x128_w8_varlen_s1_wgmma"}));
  spec.headDim = 128;
  EXPECT_EQ(kernelName(defaultCandidates(spec, 0).front()),
            "fa_bwd_d128_bf16_full_64x128_w8_varlen_s3_wgmma");
  spec.varlen = false;
  spec.headDim = 96;
  EXPECT_NE(validateSpec(spec).find("multiple of 64"), std::string::npos)
      << validateSpec(spec);
}

/// Bracket nesting is counted as MLIR's parser would descend: strings,
/// comments, `->` and `>=` do not count; unbalanced closers do not go below
/// zero.
TEST(TextNesting, CountsBracketsOnly) {
  EXPECT_EQ(fa::checkTextNesting("", "x", 2), "");
  EXPECT_EQ(fa::checkTextNesting("f(a<b>[{c}])", "x", 3), "");
  EXPECT_EQ(fa::checkTextNesting("f(a<b>[{c}])", "x", 2),
            "x nests brackets more than 2 deep (at line 1, column 8); the "
            "limit is 2");
  // A string or a comment full of brackets, arrows and comparisons.
  EXPECT_EQ(fa::checkTextNesting("\"((((\\\"((\" // <<<<\n(x) -> y >= z",
                                 "x", 1),
            "");
  // `->` and `>=` close nothing: a type after an arrow still counts.
  EXPECT_EQ(fa::checkTextNesting("(a) -> (b<(c)>)", "x", 2),
            "x nests brackets more than 2 deep (at line 1, column 11); the "
            "limit is 2");
  // Unbalanced closers do not hide later nesting.
  EXPECT_EQ(fa::checkTextNesting(")))))\n(((", "t", 2),
            "t nests brackets more than 2 deep (at line 2, column 3); the "
            "limit is 2");
  std::string deep = std::string(fa::kMaxTextNesting, '<') +
                     std::string(fa::kMaxTextNesting, '>');
  EXPECT_EQ(fa::checkTextNesting(deep, "x"), "");
  EXPECT_NE(fa::checkTextNesting("<" + deep, "x"), "");
}

/// Dense arrays of index elements crash MLIR 22's parser: they are refused
/// (written out or through an alias), wherever they stand and however they
/// are spaced; other element types, strings, comments and longer names that
/// end in "array" are not.
TEST(TextNesting, RefusesDenseArraysOfIndex) {
  EXPECT_EQ(fa::checkDenseArrayElements("{a = array<index: 1, 0>}", "t"),
            "t has a dense array of index elements (array<index ...>, at "
            "line 1, column 6), which MLIR's parser cannot read; use i64 "
            "elements");
  EXPECT_NE(fa::checkDenseArrayElements("x\n(array\n<\tindex>)", "t"), "");
  EXPECT_NE(fa::checkDenseArrayElements("array<index>", "t"), "");
  EXPECT_EQ(fa::checkDenseArrayElements("{a = array<!t: 1>}", "t"),
            "t has a dense array whose element type is a type alias "
            "(array<!...>, at line 1, column 6); write the element type out "
            "(an alias may name index, which MLIR's parser cannot read in a "
            "dense array)");
  for (const char *fine :
       {"array<i64: 1>", "array<indexed: 1>", "myarray<index>",
        "#fa.array<index>", "x_array<index>", "\"array<index>\"",
        "// array<index>\n", "array", "array<", "array<index_t>",
        "tensor<2xindex>"})
    EXPECT_EQ(fa::checkDenseArrayElements(fine, "t"), "") << fine;
  // The combined check runs both, nesting first.
  EXPECT_NE(fa::checkTextBeforeParsing("array<index>", "t"), "");
  EXPECT_EQ(
      fa::checkTextBeforeParsing(std::string(300, '(') + "array<index>", "t")
          .find("nests brackets"),
      2u);
}

TEST(WgmmaModel, ShortSequencesRankTwoWarpgroupsFirstAtD64) {
  fa::KernelSpec spec;
  spec.headDim = 64;
  spec.dtype = fa::ElementType::f16;
  spec.blockM = spec.blockN = spec.numWarps = spec.stages = 0;
  auto first = [&](int64_t length) {
    fa::KernelSpec c = withDefaults(spec, length);
    return std::to_string(c.blockM) + "x" + std::to_string(c.blockN) + " w" +
           std::to_string(c.numWarps);
  };
  EXPECT_EQ(resolveStrategy(spec), fa::Strategy::wgmma);
  EXPECT_EQ(first(0), "192x128 w12");
  EXPECT_EQ(first(512), "128x128 w8");
  EXPECT_EQ(first(fa::wgmma::kShortLength), "128x128 w8");
  EXPECT_EQ(first(2 * fa::wgmma::kShortLength), "192x128 w12");
  // The same candidates, in another order.
  std::vector<std::string> shortNames, longNames;
  for (const fa::KernelSpec &c : defaultCandidates(spec, 1024))
    shortNames.push_back(kernelName(c));
  for (const fa::KernelSpec &c : defaultCandidates(spec, 0))
    longNames.push_back(kernelName(c));
  std::sort(shortNames.begin(), shortNames.end());
  std::sort(longNames.begin(), longNames.end());
  EXPECT_EQ(shortNames, longNames);
  // An explicit warp count still wins over the length's ranking.
  spec.numWarps = 12;
  EXPECT_EQ(first(512), "192x128 w12");
  spec.numWarps = 0;
  spec.headDim = 128;
  EXPECT_EQ(kernelName(withDefaults(spec, 512)),
            kernelName(withDefaults(spec, 0)));
  spec.headDim = 64;
  spec.strategy = fa::Strategy::mma;
  EXPECT_EQ(kernelName(withDefaults(spec, 512)),
            kernelName(withDefaults(spec, 0)));
}

/// Each target's oldest driver matches its PTX ISA: ISA 8.N for N <= 5 came
/// with CUDA 12.N (a target on a newer ISA must state its driver here).
TEST(GpuTarget, MinimumDriverFollowsThePtxIsa) {
  std::string list = fa::supportedGpuArchs();
  llvm::SmallVector<llvm::StringRef> names;
  llvm::StringRef(list).split(names, ", ");
  ASSERT_FALSE(names.empty());
  for (llvm::StringRef name : names) {
    std::optional<fa::GpuArch> arch = fa::lookupGpuArch(name.str());
    ASSERT_TRUE(arch) << name.str();
    llvm::StringRef isa(arch->ptxFeatures.data(), arch->ptxFeatures.size());
    ASSERT_TRUE(isa.consume_front("+ptx")) << name.str();
    ASSERT_EQ(isa.size(), 2u) << name.str();
    int major = isa[0] - '0', minor = isa[1] - '0';
    ASSERT_TRUE(major == 8 && minor <= 5)
        << name.str() << ": PTX ISA " << major << "." << minor
        << " needs its driver version stated in this test";
    EXPECT_EQ(arch->minimumDriverVersion, 12000 + 10 * minor) << name.str();
  }
}

/// ptxas where the toolkit is installed, else the driver's JIT where it reads
/// the PTX, else libnvJitLink; FA_ASSEMBLER forces one; what is missing is
/// named.
TEST(Assembler, SelectionOrderAndErrors) {
  auto choose = [](const char *forced, bool ptxas, bool driver,
                   bool nvjitlink = false, int driverVersion = 0,
                   int driverVersionNeeded = 0) {
    fa::AssemblerAvailability have;
    have.driverVersion = driverVersion;
    have.driverVersionNeeded = driverVersionNeeded;
    have.ptxas = ptxas;
    have.ptxasWhyNot = ptxas ? "" : "ptxas not found in PATH, $CUDA_ROOT/bin";
    have.nvjitlink = nvjitlink;
    have.nvjitlinkWhyNot = nvjitlink ? "" : "libnvJitLink.so.13 not found";
    have.driver = driver;
    have.driverWhyNot = driver ? "" : "libcuda.so.1 not found";
    llvm::Expected<fa::Assembler> chosen = fa::chooseAssembler(forced, have);
    if (!chosen)
      return "error: " + llvm::toString(chosen.takeError());
    return std::string(fa::toString(*chosen));
  };
  EXPECT_EQ(choose(nullptr, true, true), "ptxas");
  EXPECT_EQ(choose("", true, false), "ptxas");
  EXPECT_EQ(choose(nullptr, false, true), "driver");
  EXPECT_EQ(choose(nullptr, false, false),
            "error: no PTX assembler: ptxas not found in PATH, $CUDA_ROOT/bin; "
            "libnvJitLink.so.13 not found; and the CUDA driver's JIT is not "
            "usable: libcuda.so.1 not found");
  // The driver's JIT (a whole program, as ptxas) comes before libnvJitLink
  // (relocatable code, where the warp-specialized kernels spill) ...
  EXPECT_EQ(choose(nullptr, true, true, true), "ptxas");
  EXPECT_EQ(choose(nullptr, false, true, true), "driver");
  EXPECT_EQ(choose(nullptr, false, true, true, 13000, 12010), "driver");
  EXPECT_EQ(choose(nullptr, false, true, true, 12010, 12010), "driver");
  EXPECT_EQ(choose(nullptr, false, false, true), "nvjitlink");
  // ... unless the driver is older than the PTX's ISA (PTX 8.1: CUDA 12.1).
  EXPECT_EQ(choose(nullptr, false, true, true, 12000, 12010), "nvjitlink");
  EXPECT_EQ(choose(nullptr, true, true, false, 12000, 12010), "ptxas");
  EXPECT_EQ(choose(nullptr, false, true, false, 12000, 12010),
            "error: no PTX assembler: ptxas not found in PATH, "
            "$CUDA_ROOT/bin; libnvJitLink.so.13 not found; and the CUDA "
            "driver's JIT cannot read the kernels' PTX: the CUDA driver's "
            "version 12.0 is older than the 12.1 whose JIT reads the "
            "kernels' PTX ISA");
  EXPECT_EQ(choose("driver", true, true, true, 11080, 12000),
            "error: FA_ASSEMBLER=driver, but the CUDA driver's version 11.8 "
            "is older than the 12.0 whose JIT reads the kernels' PTX ISA");
  EXPECT_EQ(choose("nvjitlink", true, true, true), "nvjitlink");
  EXPECT_EQ(choose("nvjitlink", true, true, false),
            "error: FA_ASSEMBLER=nvjitlink, but libnvJitLink.so.13 not found");
  EXPECT_EQ(choose("driver", true, true), "driver");
  EXPECT_EQ(choose("ptxas", false, true),
            "error: FA_ASSEMBLER=ptxas, but ptxas not found in PATH, "
            "$CUDA_ROOT/bin");
  EXPECT_EQ(choose("driver", true, false),
            "error: FA_ASSEMBLER=driver, but the CUDA driver is not usable: "
            "libcuda.so.1 not found");
  EXPECT_EQ(choose("nvcc", true, true),
            "error: FA_ASSEMBLER must be ptxas, nvjitlink or driver, got "
            "'nvcc'");
  // The assembler is part of the cache key: a cubin from one is never taken
  // for the other's.
  fa::KernelSpec spec;
  EXPECT_NE(fa::cacheKey(spec, "v", "ptxas 13.0.88"),
            fa::cacheKey(spec, "v", "driver 13000"));
}

/// The defaults' rule: the first candidate that compiles without spills,
/// else the one that spills the fewest bytes (the first of equals);
/// candidates past the choice stay unbuilt.
TEST(KernelSpec, DefaultCandidateIsTheFirstWithoutSpills) {
  std::vector<fa::KernelSpec> candidates(4);
  for (size_t i = 0; i < candidates.size(); ++i)
    candidates[i].blockM = int64_t(i + 1);
  auto choose = [&](std::vector<std::optional<int64_t>> outcome,
                    size_t *built = nullptr) {
    size_t calls = 0;
    std::optional<size_t> chosen = fa::chooseDefaultCandidate(
        candidates, [&](const fa::KernelSpec &c) {
          ++calls;
          return outcome[size_t(c.blockM - 1)];
        });
    if (built)
      *built = calls;
    return chosen;
  };
  size_t built = 0;
  // Compile error, spills, clean, clean: the first clean one, and stop.
  EXPECT_EQ(choose({std::nullopt, 8, 0, 0}, &built), std::optional<size_t>(2));
  EXPECT_EQ(built, 3u);
  // Everything that compiles spills: the fewest bytes, not the first (a
  // varlen causal backward at head dim 128: three stages 184 bytes, two
  // 64), the first of equals.
  EXPECT_EQ(choose({184, 64, 76, std::nullopt}, &built),
            std::optional<size_t>(1));
  EXPECT_EQ(built, 4u);
  EXPECT_EQ(choose({std::nullopt, 40, 40, 96}), std::optional<size_t>(1));
  // Nothing compiles.
  EXPECT_EQ(choose({std::nullopt, std::nullopt, std::nullopt, std::nullopt}),
            std::nullopt);
}

/// A wgmma request with the documents' mask_mod and every tile left to
/// the defaults (bf16, D 128, sm_90a).
fa::KernelSpec wgmmaDocumentsRequest() {
  fa::KernelSpec request;
  request.strategy = fa::Strategy::wgmma;
  request.arch = "sm_90a";
  request.dtype = fa::ElementType::bf16;
  request.headDim = 128;
  request.maskMod = fa::variants::document();
  request.blockM = request.blockN = request.numWarps = request.stages = 0;
  return request;
}

/// Capture loads indexed by the key (VariantTraits) put first the tiles
/// the wide ones' spills left the runtime with: 128 x 64 at D 128, 128 x
/// 128 at D 64 (not three warpgroups); a block mask keeps its own ranking,
/// and so does a forward without the trait.
TEST(WgmmaModel, KeyIndexedCapturesRankNarrowTilesFirst) {
  fa::KernelSpec request = wgmmaDocumentsRequest();
  fa::VariantTraits keyCaptures;
  keyCaptures.keyIndexedCaptures = true;
  auto firstTile = [&](const fa::VariantTraits &traits) {
    fa::KernelSpec first = fa::defaultCandidates(request, 0, traits).front();
    return std::make_tuple(first.blockM, first.blockN, first.numWarps,
                           first.stages);
  };
  using Tile = std::tuple<int64_t, int64_t, int64_t, int64_t>;
  request.headDim = 128;
  EXPECT_EQ(firstTile(keyCaptures), Tile(128, 64, 8, 2));
  EXPECT_EQ(firstTile({}), Tile(128, 128, 8, 2));
  EXPECT_EQ(fa::withDefaults(request, 0, keyCaptures).blockN, 64);
  request.headDim = 64;
  EXPECT_EQ(firstTile(keyCaptures), Tile(128, 128, 8, 2));
  EXPECT_EQ(firstTile({}), Tile(192, 128, 12, 2));
  request.blockMask = true;
  EXPECT_EQ(firstTile(keyCaptures), Tile(192, 64, 12, 2));
  // Every candidate of the plain ranking stays a candidate.
  request.blockMask = false;
  request.headDim = 128;
  auto tiles = [&](const fa::VariantTraits &traits) {
    std::vector<Tile> all;
    for (const fa::KernelSpec &c : fa::defaultCandidates(request, 0, traits))
      all.emplace_back(c.blockM, c.blockN, c.numWarps, c.stages);
    llvm::sort(all);
    return all;
  };
  EXPECT_EQ(tiles(keyCaptures), tiles({}));
}

/// A candidate its strategy was measured faster with, spills and all
/// (wgmma's 16-bit block-mask forward at D 128 on 192 x 64 tiles), is taken
/// with up to its tolerated bytes and not with more; every other candidate
/// still needs none.
TEST(KernelSpec, DefaultCandidateWithinItsToleratedSpills) {
  fa::KernelSpec request = wgmmaDocumentsRequest();
  request.blockMask = true;
  std::vector<fa::KernelSpec> candidates = fa::defaultCandidates(request);
  ASSERT_EQ(fa::validateSpec(request), "");
  ASSERT_GE(candidates.size(), 2u);
  const fa::KernelSpec &first = candidates[0];
  EXPECT_EQ(
      std::make_tuple(first.blockM, first.blockN, first.numWarps, first.stages),
      std::make_tuple(int64_t(192), int64_t(64), int64_t(12), int64_t(2)));
  int64_t tolerated = fa::toleratedSpillBytes(first);
  EXPECT_GT(tolerated, 0);
  EXPECT_EQ(fa::toleratedSpillBytes(candidates[1]), 0);
  auto choose = [&](std::optional<int64_t> firstSpills) {
    return fa::chooseDefaultCandidate(
        candidates, [&](const fa::KernelSpec &c) -> std::optional<int64_t> {
          return &c == &candidates[0] ? firstSpills : 0;
        });
  };
  EXPECT_EQ(choose(tolerated), std::optional<size_t>(0));
  EXPECT_EQ(choose(tolerated + 1), std::optional<size_t>(1));
  // Not for the backward, another head dim or 8-bit inputs.
  fa::KernelSpec other = first;
  other.backward = true;
  EXPECT_EQ(fa::toleratedSpillBytes(other), 0);
  other = first;
  other.headDim = 64;
  EXPECT_EQ(fa::toleratedSpillBytes(other), 0);
  other = first;
  other.dtype = fa::ElementType::e4m3;
  EXPECT_EQ(fa::toleratedSpillBytes(other), 0);
  // Nor without a resolved strategy.
  other = first;
  other.strategy = fa::Strategy::automatic;
  EXPECT_EQ(fa::toleratedSpillBytes(other), 0);
}

/// After the first candidate spills, the next ones are handed to
/// compileAhead a wave at a time before they are judged; the rule is
/// unchanged, and no wave starts past the choice.
TEST(KernelSpec, CandidatesAfterASpillAreCompiledAheadInWaves) {
  std::vector<fa::KernelSpec> candidates(6);
  for (size_t i = 0; i < candidates.size(); ++i)
    candidates[i].blockM = int64_t(i + 1);
  std::vector<std::optional<int64_t>> outcome = {8, 8, 8, 0, 0, std::nullopt};
  std::vector<std::pair<size_t, size_t>> waves;
  std::vector<size_t> judged;
  std::optional<size_t> chosen = fa::chooseDefaultCandidate(
      candidates,
      [&](const fa::KernelSpec &c) {
        judged.push_back(size_t(c.blockM - 1));
        return outcome[size_t(c.blockM - 1)];
      },
      [&](size_t first, size_t last) {
        waves.push_back({first, last});
      },
      /*wave=*/2);
  EXPECT_EQ(chosen, std::optional<size_t>(3));
  EXPECT_EQ(judged, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(waves, (std::vector<std::pair<size_t, size_t>>{{1, 3}, {3, 5}}));
  // A first candidate without spills: no wave at all.
  waves.clear();
  outcome[0] = 0;
  EXPECT_EQ(fa::chooseDefaultCandidate(
                candidates,
                [&](const fa::KernelSpec &c) {
                  return outcome[size_t(c.blockM - 1)];
                },
                [&](size_t first, size_t last) {
                  waves.push_back({first, last});
                },
                /*wave=*/4),
            std::optional<size_t>(0));
  EXPECT_TRUE(waves.empty());
}

/// Where a trial is expected (firstWave > 1) the first wave starts with
/// the first candidate; the waves after it and the rule are as before.
TEST(KernelSpec, ExpectedTrialsCompileTheFirstWaveAtOnce) {
  std::vector<fa::KernelSpec> candidates(5);
  for (size_t i = 0; i < candidates.size(); ++i)
    candidates[i].blockM = int64_t(i + 1);
  std::vector<std::optional<int64_t>> outcome = {40, 44, 100, 0, 0};
  std::vector<std::pair<size_t, size_t>> waves;
  auto choose = [&](size_t firstWave) {
    waves.clear();
    return fa::chooseDefaultCandidate(
        candidates,
        [&](const fa::KernelSpec &c) { return outcome[size_t(c.blockM - 1)]; },
        [&](size_t first, size_t last) {
          waves.push_back({first, last});
        },
        /*wave=*/3, firstWave);
  };
  EXPECT_EQ(choose(3), std::optional<size_t>(3));
  EXPECT_EQ(waves, (std::vector<std::pair<size_t, size_t>>{{0, 3}, {3, 5}}));
  // Every candidate spills: the fewest bytes, as with firstWave 1.
  outcome[3] = outcome[4] = 60;
  EXPECT_EQ(choose(3), std::optional<size_t>(0));
  EXPECT_EQ(choose(1), std::optional<size_t>(0));
  EXPECT_EQ(waves, (std::vector<std::pair<size_t, size_t>>{{1, 4}, {4, 5}}));
  // A wave wider than the candidates stops at the last.
  EXPECT_EQ(choose(8), std::optional<size_t>(0));
  EXPECT_EQ(waves, (std::vector<std::pair<size_t, size_t>>{{0, 5}}));
}

/// wgmma expects trials for the 16-bit D 128 backward with a capture load
/// indexed by the key (every stage count spills there); not for the
/// forward, D 64, another variant or another strategy.
TEST(WgmmaModel, ExpectsTrialsOfTheKeyCaptureBackward) {
  fa::KernelSpec request = wgmmaDocumentsRequest();
  request.backward = true;
  fa::VariantTraits keyCaptures;
  keyCaptures.keyIndexedCaptures = true;
  EXPECT_EQ(fa::firstTrialWave(request, keyCaptures, 4), 4u);
  EXPECT_EQ(fa::firstTrialWave(request, {}, 4), 1u);
  fa::KernelSpec other = request;
  other.headDim = 64;
  EXPECT_EQ(fa::firstTrialWave(other, keyCaptures, 4), 1u);
  other = request;
  other.backward = false;
  EXPECT_EQ(fa::firstTrialWave(other, keyCaptures, 4), 1u);
  other = request;
  other.strategy = fa::Strategy::mma;
  EXPECT_EQ(fa::firstTrialWave(other, keyCaptures, 4), 1u);
  // An invalid request is left to validateSpec.
  other = request;
  other.headDim = 0;
  EXPECT_EQ(fa::firstTrialWave(other, keyCaptures, 4), 1u);
}

/// runConcurrently runs every item once, all at the same time: each item
/// waits until all have started (one at a time, the first would wait out
/// the bound).
TEST(KernelSpec, RunConcurrentlyRunsTheItemsAtOnce) {
  std::mutex mutex;
  std::condition_variable allStarted;
  size_t started = 0;
  std::vector<int> runs(5, 0);
  std::vector<char> sawAll(5, 0);
  fa::runConcurrently(1, 5, [&](size_t i) {
    std::unique_lock<std::mutex> lock(mutex);
    ++runs[i];
    ++started;
    allStarted.notify_all();
    sawAll[i] = allStarted.wait_for(lock, std::chrono::seconds(60),
                                    [&] { return started == 4; });
  });
  EXPECT_EQ(runs, (std::vector<int>{0, 1, 1, 1, 1}));
  EXPECT_EQ(sawAll, (std::vector<char>{0, 1, 1, 1, 1}));
  fa::runConcurrently(3, 3, [&](size_t) { ADD_FAILURE() << "no items"; });
}

/// runWithTimeout: the child's exit code; a child past its deadline is
/// killed (-1, named); several at once on threads each wait for their own.
TEST(CudaToolkit, RunWithTimeoutKillsLateChildrenOnAnyThread) {
  auto sh = llvm::sys::findProgramByName("sh");
  if (!sh)
    GTEST_SKIP() << "no sh";
  std::optional<llvm::StringRef> inherit[] = {std::nullopt, std::nullopt,
                                              std::nullopt};
  auto run = [&](const std::string &script, unsigned seconds,
                 std::string *error = nullptr) {
    llvm::StringRef args[] = {*sh, "-c", script};
    return fa::runWithTimeout(*sh, args, inherit, seconds, error);
  };
  EXPECT_EQ(run("exit 0", 10), 0);
  EXPECT_EQ(run("exit 3", 10), 3);
  std::string error;
  auto start = std::chrono::steady_clock::now();
  // (exec: the killed child is sleep itself, not a shell leaving it
  // running with the test's output open.)
  EXPECT_EQ(run("exec sleep 30", 1, &error), -1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_NE(error.find("ran past 1 s and was killed"), std::string::npos)
      << error;
  // Four at once, each with its own exit code.
  std::vector<int> codes(4, -7);
  fa::runConcurrently(0, 4, [&](size_t i) {
    codes[i] = run("sleep 0.2; exit " + std::to_string(i), 10);
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 1, 2, 3}));
}

TEST(KernelSpec, RejectsOutOfRangeValuesNamingTheLimit) {
  fa::KernelSpec spec;
  spec.headDim = 1000;
  EXPECT_EQ(validateSpec(spec), "head-dim must be in [1, 512], got 1000");
  spec = {};
  spec.blockM = -1;
  EXPECT_EQ(validateSpec(spec), "block-m must be in [1, 1024], got -1");
  spec.blockM = 0; // the default
  EXPECT_EQ(validateSpec(spec), "");
  spec = {};
  spec.numWarps = 64;
  EXPECT_EQ(validateSpec(spec), "num-warps must be in [1, 32], got 64");
  spec = {};
  spec.arch = "sm_75";
  EXPECT_EQ(validateSpec(spec), "unsupported arch 'sm_75'; expected one of "
                                "sm_80, sm_86, sm_89, sm_90, sm_90a");
  // Whatever the caller passes is quoted in part, not echoed in full.
  spec.arch = std::string(1 << 20, 'x');
  EXPECT_EQ(validateSpec(spec), "unsupported arch '" + std::string(32, 'x') +
                                    "'... (1048576 bytes); expected one of "
                                    "sm_80, sm_86, sm_89, sm_90, sm_90a");
}

/// Defaults are derived only from a valid spec: an out-of-range field (here
/// one whose thread arithmetic would overflow) comes back unchanged for
/// validate() to name, instead of crashing the default search.
TEST(KernelSpec, DefaultsLeaveInvalidSpecsAlone) {
  fa::KernelSpec spec;
  spec.blockM = spec.blockN = 0;
  spec.numWarps = int64_t(1) << 59;
  fa::KernelSpec resolved = withDefaults(spec);
  EXPECT_EQ(resolved.numWarps, spec.numWarps);
  EXPECT_EQ(validateSpec(resolved),
            "num-warps must be in [1, 32], got 576460752303423488");
  spec.numWarps = 0;
  spec.dtype = fa::ElementType::f16;
  spec.stages = int64_t(1) << 40;
  EXPECT_EQ(defaultCandidates(spec).size(), 1u);
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


//===----------------------------------------------------------------------===//
// The IO model, against values counted by hand.
//===----------------------------------------------------------------------===//

TEST(IOModel, StandardAttentionMaterializesSAndP) {
  // Sq = Sk = 4, D = 2, 16-bit: Q, K, V, O 8 elements each, S and P 16.
  fa::AttentionProblem p;
  p.qLen = p.kvLen = 4;
  p.headDim = 2;
  fa::IOEstimate io = fa::standardAttentionIO(p, 2);
  // read Q, K (32) + S (32) + P, V (48); write S (32) + P (32) + O (16)
  EXPECT_EQ(io.bytesRead, 112);
  EXPECT_EQ(io.bytesWritten, 80);
  EXPECT_EQ(io.flops, 4 * 16 * 2);
  // The causal mask is one more pass over S.
  p.causal = true;
  io = fa::standardAttentionIO(p, 2);
  EXPECT_EQ(io.bytesRead, 144);
  EXPECT_EQ(io.bytesWritten, 112);
}

TEST(IOModel, TiledForwardReadsKVOncePerQueryTile) {
  // 2 query heads on 1 K/V head, Sq = Sk = 8, D = 4, f32, 4 x 4 tiles.
  fa::AttentionProblem p;
  p.qHeads = 2;
  p.qLen = p.kvLen = 8;
  p.headDim = 4;
  // Full: each of 2 query tiles reads all 8 K and V rows.
  fa::IOEstimate io = fa::tiledForwardIO(p, 4, 4, 4);
  EXPECT_EQ(io.bytesRead, 2 * 4 * (8 * 4 + 2 * 16 * 4));
  EXPECT_EQ(io.bytesWritten, 2 * (4 * 8 * 4 + 4 * 8));
  EXPECT_EQ(io.flops, 2 * 4 * 8 * 8 * 4);
  // Causal: query tile 0 visits one K/V tile, tile 1 both.
  p.causal = true;
  EXPECT_EQ(fa::visitedKVTiles(p, 4, 4, 0), 1);
  EXPECT_EQ(fa::visitedKVTiles(p, 4, 4, 1), 2);
  io = fa::tiledForwardIO(p, 4, 4, 4);
  EXPECT_EQ(io.bytesRead, 2 * 4 * (8 * 4 + 2 * 12 * 4));
  EXPECT_EQ(io.flops, 2 * 4 * (4 * 4 + 4 * 8) * 4);
  // Sq > Sk: the first query tile's rows see no key.
  p.kvLen = 4;
  EXPECT_EQ(fa::visitedKVTiles(p, 4, 4, 0), 0);
  EXPECT_EQ(fa::visitedKVTiles(p, 4, 4, 1), 1);
  // Length 4096, D = 128, 16-bit: standard attention moves S and P four
  // times (4 x 4096^2 x 2 B = 134 MB); the tiled kernel reads K and V once
  // per 128-row query tile (32 x 2 x 4096 x 128 x 2 B = 67 MB): half, by
  // the algorithm alone (caches shrink the tiled kernel's share further).
  fa::AttentionProblem big;
  big.qLen = big.kvLen = 4096;
  big.headDim = 128;
  double tiled = fa::tiledForwardIO(big, 2, 128, 128).bytes();
  double standard = fa::standardAttentionIO(big, 2).bytes();
  EXPECT_NEAR(tiled / standard, 0.5, 0.02);
  // Larger query tiles read K/V fewer times.
  EXPECT_LT(fa::tiledForwardIO(big, 2, 256, 128).bytes(), tiled);
}

TEST(IOModel, CompulsoryForwardMovesEachTensorOnce) {
  // 2 query heads on 1 K/V head, Sq = 8, Sk = 4, D = 4, 16-bit.
  fa::AttentionProblem p;
  p.qHeads = 2;
  p.qLen = 8;
  p.kvLen = 4;
  p.headDim = 4;
  fa::IOEstimate io = fa::compulsoryForwardIO(p, 2);
  // Q (2 x 8 x 4) and K, V (1 x 4 x 4 each), 2 bytes each.
  EXPECT_EQ(io.bytesRead, 2 * (64 + 2 * 16));
  // O (64 elements, 2 bytes) and LSE (16 rows, f32).
  EXPECT_EQ(io.bytesWritten, 2 * 64 + 4 * 16);
  EXPECT_EQ(io.flops, 2 * 4 * 8 * 4 * 4);
  // Causal, bottom-right: rows 0..3 see no key, rows 4..7 see 1..4 keys.
  p.causal = true;
  EXPECT_EQ(fa::compulsoryForwardIO(p, 2).flops, 2 * 4 * (1 + 2 + 3 + 4) * 4);
  // The tiled kernel's model never goes below it, and reaches it with one
  // query tile.
  p.causal = false;
  EXPECT_GT(fa::tiledForwardIO(p, 2, 4, 4).bytesRead, io.bytesRead);
  p.qHeads = 1;
  EXPECT_EQ(fa::tiledForwardIO(p, 2, 8, 4).bytes(),
            fa::compulsoryForwardIO(p, 2).bytes());
}

TEST(IOModel, TiledBackward) {
  // Sq = Sk = 4, D = 2, 16-bit, one 4 x 4 tile pair.
  fa::AttentionProblem p;
  p.qLen = p.kvLen = 4;
  p.headDim = 2;
  fa::IOEstimate io = fa::tiledBackwardIO(p, 2, 4, 4);
  // delta: O, dO (32) | D, accumulator zeroed (48)
  // dkdv: K, V (32) + Q, dO, LSE, D, accumulator (96) | accumulator (32),
  //       dK, dV (32)
  // dq: accumulator (32) | dQ (16)
  EXPECT_EQ(io.bytesRead, 32 + 32 + 96 + 32);
  EXPECT_EQ(io.bytesWritten, 48 + 32 + 32 + 16);
  // 2.5x the forward's FLOPs.
  EXPECT_EQ(io.flops, 2.5 * 4 * 16 * 2);
  // Three dQ chains: two more accumulators zeroed (32 each) and read.
  fa::IOEstimate chained = fa::tiledBackwardIO(p, 2, 4, 4, {}, 3);
  EXPECT_EQ(chained.bytesRead, io.bytesRead + 2 * 32);
  EXPECT_EQ(chained.bytesWritten, io.bytesWritten + 2 * 32);
  EXPECT_EQ(chained.flops, io.flops);
}

TEST(IOModel, FormatsBytes) {
  EXPECT_EQ(fa::formatBytes(12), "12 B");
  EXPECT_EQ(fa::formatBytes(7800), "7.8 kB");
  EXPECT_EQ(fa::formatBytes(12.3e9), "12.3 GB");
}

} // namespace

/// The exponentials the online softmax may compute on the FMA pipe
/// (fa.exp2_on_fma): the GPU sequence on the host stays within the bound
/// the header states of std::exp2 from 2^-126 up, is exact at the
/// integers (2^0 = 1: a row's maximum gets p = 1 exactly), rises with x
/// across each integer (the cubic meets 2^0 and 2^1 there), and gives 0
/// below 2^-126 (a masked score's -inf) and NaN for NaN (the GPU scales by
/// an FMUL, which keeps it).
TEST(Exp2Polynomial, WithinItsBoundOfExp2) {
  namespace poly = fa::exp2poly;
  double worst = 0;
  for (int64_t i = 0; i <= 190 * 4096; ++i) {
    float x = poly::kLowest + float(i) / 4096.0f;
    double exact = std::exp2(double(x));
    double error = std::fabs(double(poly::exp2Reference(x)) - exact) / exact;
    worst = std::max(worst, error);
  }
  EXPECT_LE(worst, poly::kMaxRelativeError);
  EXPECT_GT(worst, 1e-4) << "a cubic cannot be this close: the test would "
                            "not see a wrong constant";
  // The cubic meets 2^1 at f = 1 (c1 + c2 + c3 = 1 in f32 arithmetic).
  EXPECT_EQ(
      std::fma(std::fma(std::fma(poly::kC3, 1.0f, poly::kC2), 1.0f, poly::kC1),
               1.0f, 1.0f),
      2.0f);
  for (int j = -126; j <= 64; ++j) {
    EXPECT_EQ(poly::exp2Reference(float(j)), std::exp2(float(j))) << j;
    float below = std::nextafter(float(j), -INFINITY);
    if (j > -126)
      EXPECT_LE(poly::exp2Reference(below), poly::exp2Reference(float(j))) << j;
  }
  EXPECT_EQ(poly::exp2Reference(-INFINITY), 0.0f);
  EXPECT_EQ(poly::exp2Reference(-126.5f), 0.0f);
  EXPECT_TRUE(std::isnan(poly::exp2Reference(NAN)));
}
