//===- fa-sweep.cpp - Schedules and their resource limits -----------*- C++ -*-===//
//
// Compiles every schedule of a grid (block-m x block-n x warps x stages) for
// one head dim, dtype, mask and strategy, and reports what each needs:
// registers and spills (ptxas), shared memory and threads (the placement),
// blocks per SM (occupancy on the arch) — or why the resource model or the
// compiler rejects it. A table on the terminal, JSON and CSV on request.
// With --time (a GPU), each schedule that compiled is also checked once
// against the float64 reference and timed on a stated problem
// (DeviceTiming.h).
//
//   fa-sweep --head-dim=128                       # the lecture's SIMT grid
//   fa-sweep --dtype=f16 --strategy=mma --head-dim=128 --json sweep.json
//   fa-sweep --head-dim=128 --time --time-shape=4,16,16,4096,4096
//
//===----------------------------------------------------------------------===//

#include "compiler/KernelCompiler.h"
#include "lib/CudaToolkit.h"
#include "lib/GpuTarget.h"
#include "lib/IOModel.h"
#include "lib/KernelSpec.h"
#include "lib/SplitKv.h"
#include "lib/Strategy/Registry.h"
#include "lib/Strategy/SpecRules.h"
#include "tools/fa-sweep/DeviceTiming.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "mlir/Support/FileUtilities.h"

#include <cmath>
#include <tuple>
#include <memory>
#include <string>
#include <vector>

namespace cl = llvm::cl;

static cl::OptionCategory category("fa-sweep options");
static cl::opt<int64_t> headDim("head-dim", cl::desc("head dimension D"),
                                cl::init(128), cl::cat(category));
static cl::opt<std::string> dtype("dtype", cl::desc("f32 | f16 | bf16 | e4m3"),
                                  cl::init("f32"), cl::cat(category));
static cl::opt<bool> causal("causal", cl::desc("causal mask"), cl::init(false),
                            cl::cat(category));
static cl::opt<std::string> strategy("strategy",
                                     cl::desc("simt | mma | wgmma"),
                                     cl::init("simt"), cl::cat(category));
static cl::opt<std::string> arch("arch", cl::desc("target arch"),
                                 cl::init("sm_90a"), cl::cat(category));
static cl::list<int64_t> blockMs(
    "block-m", cl::desc("query rows per tile (default simt: 4,8,16; "
                        "mma/wgmma: 64,128)"),
    cl::CommaSeparated, cl::cat(category));
static cl::list<int64_t> blockNs(
    "block-n", cl::desc("key/value rows per tile (default simt: 16,32,64; "
                        "mma/wgmma: 32,64,128)"),
    cl::CommaSeparated, cl::cat(category));
static cl::list<int64_t> warpCounts(
    "num-warps", cl::desc("warps per block (default simt: 4; mma: 4,8; "
                          "wgmma: 4,8)"),
    cl::CommaSeparated, cl::cat(category));
static cl::list<int64_t> stageCounts(
    "stages", cl::desc("K/V tiles in flight (default simt: 1; mma/wgmma: "
                       "1,2)"),
    cl::CommaSeparated, cl::cat(category));
static cl::opt<std::string> jsonFile("json", cl::desc("write the rows as JSON"),
                                     cl::value_desc("FILE"), cl::init(""),
                                     cl::cat(category));
static cl::opt<std::string> csvFile("csv", cl::desc("write the rows as CSV"),
                                    cl::value_desc("FILE"), cl::init(""),
                                    cl::cat(category));
static cl::opt<bool> timeOnDevice(
    "time", cl::desc("also check each schedule against the float64 reference "
                     "and time it on the GPU (needs a CUDA driver)"),
    cl::init(false), cl::cat(category));
static cl::opt<std::string> timeShape(
    "time-shape",
    cl::desc("B,Hq,Hkv,Sq,Sk of the timed problem (default: "
             "FlashAttention's benchmark shape, B=4, H=2048/D, S=4096)"),
    cl::init(""), cl::cat(category));
static cl::list<int64_t> kvSplitCounts(
    "kv-splits",
    cl::desc("with --time: time each schedule with its keys split into each "
             "of these parts (split-KV: 0 = the runtime's choice, 1 = no "
             "split, up to 128; default 0)"),
    cl::CommaSeparated, cl::cat(category));
static cl::opt<int> timeRuns("time-runs",
                             cl::desc("timed runs per schedule (median)"),
                             cl::init(10), cl::cat(category));
/// The most schedules one run compiles (and with --time runs).
static constexpr size_t kMaxSchedules = 512;

static cl::opt<bool> quiet("quiet", cl::desc("no progress line"),
                           cl::init(false), cl::cat(category));

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "fa-sweep") << message << "\n";
  return 1;
}

/// One schedule and what it needs, or why it was rejected.
struct Row {
  int64_t blockM, blockN, warps, stages;
  int64_t kvSplits = 0; // the timed runs' split-KV parts (0: the runtime's)
  std::string status; // "ok", "spills" or "rejected"
  std::string reason; // why rejected
  int64_t registers = 0, spillStores = 0, spillLoads = 0;
  int64_t sharedBytes = 0, threads = 0, blocksPerSM = 0;
  std::string occupancyLimit;
  double hbmBytes = 0; // the IO model's tiled forward, FA benchmark shape
  bool timed = false;   // --time measured it
  fa::TimedSchedule measured;

  llvm::json::Object toJson() const {
    llvm::json::Object o{{"block_m", blockM}, {"block_n", blockN},
                         {"num_warps", warps}, {"stages", stages},
                         {"status", status}};
    if (status == "rejected") {
      o["reason"] = reason;
      return o;
    }
    o["registers"] = registers;
    o["spill_store_bytes"] = spillStores;
    o["spill_load_bytes"] = spillLoads;
    o["shared_bytes"] = sharedBytes;
    o["threads"] = threads;
    o["blocks_per_sm"] = blocksPerSM;
    o["occupancy_limited_by"] = occupancyLimit;
    o["model_hbm_bytes"] = hbmBytes;
    if (timed) {
      o["kv_splits"] = kvSplits;
      o["check"] = measured.check;
      o["check_max_error"] = measured.maxError;
      o["check_bound"] = measured.bound;
      o["milliseconds"] = measured.milliseconds;
      o["tflops"] = measured.tflops;
    }
    return o;
  }
};

static std::string csvField(std::string text) {
  if (text.find_first_of(",\"\n") == std::string::npos)
    return text;
  std::string quoted = "\"";
  for (char c : text)
    quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

static bool writeFile(llvm::StringRef path, llvm::StringRef contents,
                      std::string &error) {
  auto file = mlir::openOutputFile(path, &error);
  if (!file)
    return false;
  file->os() << contents;
  file->keep();
  return true;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv, "fa-sweep: schedules of an attention kernel and their "
                  "resource limits\n");

  fa::KernelSpec base;
  base.headDim = headDim;
  base.causal = causal;
  base.arch = arch;
  if (!fa::parseElementType(dtype, base.dtype))
    return fail("unknown --dtype '" + dtype +
                "'; expected f32, f16, bf16 or e4m3");
  if (!fa::parseStrategy(strategy, base.strategy) ||
      base.strategy == fa::Strategy::automatic)
    return fail("unknown --strategy '" + strategy + "'; expected one of " +
                fa::strategyNames(/*withAuto=*/false));
  std::optional<fa::GpuArch> target = fa::lookupGpuArch(arch);
  if (!target)
    return fail(fa::unsupportedArchMessage(arch, "--arch"));
  // The strategy's default grid (lib/Strategy), dimension by dimension
  // where the command line gives none.
  const fa::TileGrid &grid = fa::strategyModel(base.strategy).sweepGrid;
  auto orDefault = [](const cl::list<int64_t> &given,
                      const std::vector<int64_t> &defaults) {
    return given.empty() ? defaults
                         : std::vector<int64_t>(given.begin(), given.end());
  };
  std::vector<int64_t> ms = orDefault(blockMs, grid.blockM);
  std::vector<int64_t> ns = orDefault(blockNs, grid.blockN);
  std::vector<int64_t> ws = orDefault(warpCounts, grid.numWarps);
  std::vector<int64_t> ss = orDefault(stageCounts, grid.stages);
  // Each value as KernelSpec::validate bounds it (the IO model divides by
  // the tile sizes: 0 must not reach it).
  for (auto [name, values, highest] :
       {std::tuple<const char *, const std::vector<int64_t> &, int64_t>{
            "--block-m", ms, 1024},
        {"--block-n", ns, 1024},
        {"--num-warps", ws, 32},
        {"--stages", ss, 4}})
    for (int64_t value : values)
      if (value < 1 || value > highest)
        return fail(llvm::Twine(name) + " values must be in [1, " +
                    llvm::Twine(highest) + "], got " + llvm::Twine(value));
  std::vector<int64_t> splits(kvSplitCounts.begin(), kvSplitCounts.end());
  if (splits.empty())
    splits.push_back(0);
  for (int64_t parts : splits)
    if (std::string why = fa::checkKvParts(parts); !why.empty())
      return fail("--kv-splits: " + why);
  if (!kvSplitCounts.empty() && !timeOnDevice)
    return fail("--kv-splits sets the timed runs' parts: it needs --time");
  // Each schedule is a compile (and with --time a run): the grid is
  // bounded, so that a long list fails at once instead of running for hours.
  size_t total = ms.size() * ns.size() * ws.size() * ss.size();
  if (total > kMaxSchedules)
    return fail("the grid has " + llvm::Twine(uint64_t(total)) +
                " schedules (block-m x block-n x warps x stages: " +
                llvm::Twine(uint64_t(ms.size())) + " x " +
                llvm::Twine(uint64_t(ns.size())) + " x " +
                llvm::Twine(uint64_t(ws.size())) + " x " +
                llvm::Twine(uint64_t(ss.size())) + "), over the limit of " +
                llvm::Twine(uint64_t(kMaxSchedules)) + ": give shorter lists");
  if (llvm::Expected<std::string> ptxas = fa::ptxasVersion(); !ptxas)
    return fail("fa-sweep needs ptxas for registers and spills: " +
                llvm::toString(ptxas.takeError()));

  // The IO model's problem: FlashAttention's benchmark shape.
  fa::AttentionProblem io;
  io.batch = 4;
  io.qHeads = io.kvHeads = std::max<int64_t>(1, 2048 / std::max<int64_t>(1, headDim));
  io.qLen = io.kvLen = 4096;
  io.headDim = headDim;
  io.causal = causal;
  int64_t elementBytes = fa::elementBytes(base.dtype);

  // The timed problem: FlashAttention's benchmark shape unless stated.
  fa::AttentionProblem timedProblem = io;
  timedProblem.scale = 1.0 / std::sqrt(double(headDim));
  std::unique_ptr<fa::DeviceTiming> device;
  if (timeOnDevice) {
    if (!timeShape.empty()) {
      llvm::SmallVector<llvm::StringRef> parts;
      llvm::StringRef(timeShape).split(parts, ',');
      int64_t values[5];
      bool good = parts.size() == 5;
      for (size_t i = 0; good && i < 5; ++i)
        good = !parts[i].trim().getAsInteger(10, values[i]) && values[i] > 0 &&
               values[i] <= (int64_t(1) << 24);
      if (!good || values[1] % values[2] != 0)
        return fail("--time-shape must be B,Hq,Hkv,Sq,Sk: five positive "
                    "integers up to 2^24 with Hq a multiple of Hkv, got '" +
                    timeShape + "'");
      timedProblem.batch = values[0];
      timedProblem.qHeads = values[1];
      timedProblem.kvHeads = values[2];
      timedProblem.qLen = values[3];
      timedProblem.kvLen = values[4];
    }
    if (timeRuns < 1 || timeRuns > 1000)
      return fail("--time-runs must be in [1, 1000], got " +
                  llvm::Twine(int(timeRuns)));
    if (std::string why =
            fa::DeviceTiming::create(timedProblem, timeRuns, device);
        !why.empty())
      return fail("--time needs a CUDA driver and device: " + why);
  }

  // The table's header first, then each row as its schedule is done: a run
  // that is stopped keeps what it measured.
  llvm::raw_ostream &os = llvm::outs();
  os << "fa-sweep: D=" << headDim << " " << dtype << (causal ? " causal" : "")
     << " " << strategy << " on " << arch << "; model HBM bytes on B="
     << io.batch << " H=" << io.qHeads << " S=" << io.qLen << "\n";
  if (device)
    os << "timed on B=" << timedProblem.batch << " Hq=" << timedProblem.qHeads
       << " Hkv=" << timedProblem.kvHeads << " Sq=" << timedProblem.qLen
       << " Sk=" << timedProblem.kvLen << " (median of " << int(timeRuns)
       << " runs after 2 warm-up runs); checked on B=1 Hq=4 Hkv=2 Sq=300 "
          "Sk=333 against float64\n";
  os << llvm::format("%7s %7s %5s %6s | %-8s %4s %8s %8s %9s %7s %6s %-13s %9s",
                     "block_m", "block_n", "warps", "stages", "status", "regs",
                     "spill_st", "spill_ld", "shared", "threads", "blk/SM",
                     "limited by", "model HBM");
  if (device)
    os << llvm::format(" | %6s %-6s %9s %8s", "splits", "check", "ms",
                       "TFLOP/s");
  os << "\n";
  os.flush();
  auto printRow = [&](const Row &row) {
    if (!quiet) // the progress line (stderr) makes room for the row
      llvm::errs() << "\r" << std::string(72, ' ') << "\r";
    os << llvm::format("%7lld %7lld %5lld %6lld | ", (long long)row.blockM,
                       (long long)row.blockN, (long long)row.warps,
                       (long long)row.stages);
    if (row.status == "rejected") {
      os << "rejected: " << row.reason << "\n";
      os.flush();
      return;
    }
    os << llvm::format("%-8s %4lld %8lld %8lld %9lld %7lld %6lld %-13s %9s",
                       row.status.c_str(), (long long)row.registers,
                       (long long)row.spillStores, (long long)row.spillLoads,
                       (long long)row.sharedBytes, (long long)row.threads,
                       (long long)row.blocksPerSM, row.occupancyLimit.c_str(),
                       fa::formatBytes(row.hbmBytes).c_str());
    if (row.timed) {
      bool checked = row.measured.check == "ok" || row.measured.check == "wrong";
      os << llvm::format(" | %6lld %-6s %9.3f %8.1f", (long long)row.kvSplits,
                         checked ? row.measured.check.c_str() : "error",
                         row.measured.milliseconds, row.measured.tflops);
      if (row.measured.check == "wrong")
        os << llvm::format(" (max error %.3g > %.3g)", row.measured.maxError,
                           row.measured.bound);
      else if (!checked)
        os << " (" << row.measured.check << ")";
    }
    os << "\n";
    os.flush();
  };

  std::vector<Row> rows;
  size_t done = 0;
  for (int64_t m : ms)
    for (int64_t n : ns)
      for (int64_t w : ws)
        for (int64_t st : ss) {
          Row row;
          row.blockM = m;
          row.blockN = n;
          row.warps = w;
          row.stages = st;
          if (!quiet)
            llvm::errs() << llvm::format("\r[%zu/%zu] block-m=%lld block-n=%lld "
                                         "warps=%lld stages=%lld   ",
                                         ++done, total, (long long)m,
                                         (long long)n, (long long)w,
                                         (long long)st);
          fa::KernelSpec spec = base;
          spec.blockM = m;
          spec.blockN = n;
          spec.numWarps = w;
          spec.stages = st;
          std::string error = validateSpec(spec);
          llvm::Expected<mlir::fa::CompiledKernel> kernel =
              error.empty() ? mlir::fa::compileKernel(spec, /*assemble=*/true)
                            : llvm::Expected<mlir::fa::CompiledKernel>(
                                  llvm::createStringError(error));
          if (!kernel) {
            row.status = "rejected";
            row.reason = llvm::toString(kernel.takeError());
            // One line: the first diagnostic without the kernel's name.
            row.reason = row.reason.substr(0, row.reason.find('\n'));
            rows.push_back(row);
            printRow(row);
            continue;
          }
          const mlir::fa::CompiledKernel &k = *kernel;
          const fa::KernelResources &r = k.resources.front();
          row.registers = r.registers;
          row.spillStores = r.spillStoreBytes;
          row.spillLoads = r.spillLoadBytes;
          row.sharedBytes = k.launches.front().sharedBytes;
          row.threads = k.launches.front().threads;
          fa::Occupancy occ =
              fa::occupancy(*target, row.threads, row.registers,
                            row.sharedBytes + r.staticSharedBytes);
          row.blocksPerSM = occ.blocksPerSM;
          row.occupancyLimit = occ.limitedBy;
          row.status = r.spills() ? "spills" : "ok";
          row.hbmBytes = fa::tiledForwardIO(io, elementBytes, m, n).bytes();
          if (!device) {
            rows.push_back(row);
            printRow(row);
            continue;
          }
          row.timed = true;
          for (int64_t parts : splits) {
            row.kvSplits = parts;
            row.measured = device->measure(spec, parts);
            rows.push_back(row);
            printRow(row);
          }
        }
  if (!quiet)
    llvm::errs() << "\n";

  std::string error;
  if (!jsonFile.empty()) {
    llvm::json::Array array;
    for (const Row &row : rows)
      array.push_back(row.toJson());
    llvm::json::Object doc{{"head_dim", int64_t(headDim)},
                           {"dtype", std::string(dtype)},
                           {"causal", bool(causal)},
                           {"strategy", std::string(strategy)},
                           {"arch", std::string(arch)},
                           {"rows", std::move(array)}};
    std::string text;
    llvm::raw_string_ostream json(text);
    json << llvm::formatv("{0:2}", llvm::json::Value(std::move(doc))) << "\n";
    if (!writeFile(jsonFile, text, error))
      return fail(error);
  }
  if (!csvFile.empty()) {
    std::string text = "block_m,block_n,num_warps,stages,status,reason,"
                       "registers,spill_store_bytes,spill_load_bytes,"
                       "shared_bytes,threads,blocks_per_sm,"
                       "occupancy_limited_by,model_hbm_bytes,kv_splits,"
                       "check,milliseconds,tflops\n";
    for (const Row &row : rows) {
      text += llvm::formatv("{0},{1},{2},{3},{4},{5},", row.blockM,
                            row.blockN, row.warps, row.stages, row.status,
                            csvField(row.reason))
                  .str();
      if (row.status == "rejected") {
        text += ",,,,,,,,,,,\n";
        continue;
      }
      text += llvm::formatv("{0},{1},{2},{3},{4},{5},{6},{7},", row.registers,
                            row.spillStores, row.spillLoads, row.sharedBytes,
                            row.threads, row.blocksPerSM, row.occupancyLimit,
                            int64_t(row.hbmBytes))
                  .str();
      if (row.timed)
        text += llvm::formatv("{0},{1},{2},{3}\n", row.kvSplits,
                              csvField(row.measured.check),
                              row.measured.milliseconds, row.measured.tflops)
                    .str();
      else
        text += ",,,\n";
    }
    if (!writeFile(csvFile, text, error))
      return fail(error);
  }
  return 0;
}
