//===- CudaToolkit.cpp - Finding and running ptxas ------------------*- C++ -*-===//
#include "lib/CudaToolkit.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"

#include <nvJitLink.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>

namespace fa {

/// Trial compiles run ptxas on several threads at once, which
/// llvm::sys::ExecuteAndWait's timeout does not allow: it arms the
/// process-wide alarm() and swaps SIGALRM's handler, so concurrent calls
/// cancel each other's timeouts and leave a handler behind. Here each call
/// waits for its own child, and a watchdog thread of its own kills it at
/// the deadline.
int runWithTimeout(llvm::StringRef program,
                   llvm::ArrayRef<llvm::StringRef> args,
                   llvm::ArrayRef<std::optional<llvm::StringRef>> redirects,
                   unsigned seconds, std::string *error) {
  std::string message;
  llvm::sys::ProcessInfo child = llvm::sys::ExecuteNoWait(
      program, args, std::nullopt, redirects, 0, &message);
  if (child.Pid == llvm::sys::ProcessInfo::InvalidPid) {
    if (error)
      *error = message;
    return -1;
  }
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false, killed = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mutex);
    if (!finished.wait_for(lock, std::chrono::seconds(seconds),
                           [&] { return done; })) {
      ::kill(child.Pid, SIGKILL);
      killed = true;
    }
  });
  llvm::sys::ProcessInfo result =
      llvm::sys::Wait(child, /*SecondsToWait=*/std::nullopt, &message);
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
  }
  finished.notify_all();
  watchdog.join();
  if (killed) {
    if (error)
      *error =
          (program + " ran past " + llvm::Twine(seconds) + " s and was killed")
              .str();
    return -1;
  }
  if (result.ReturnCode != 0 && error)
    *error = message;
  return result.ReturnCode;
}

llvm::Expected<std::string> findPtxas() {
  if (auto onPath = llvm::sys::findProgramByName("ptxas"))
    return *onPath;
  std::vector<std::string> roots;
  if (const char *root = std::getenv("CUDA_ROOT"))
    roots.push_back(root);
  roots.push_back("/usr/local/cuda");
  for (const std::string &root : roots) {
    llvm::SmallString<256> path(root);
    llvm::sys::path::append(path, "bin", "ptxas");
    if (llvm::sys::fs::can_execute(path))
      return std::string(path);
  }
  return llvm::createStringError(
      "ptxas not found: looked on PATH, in $CUDA_ROOT/bin and in "
      "/usr/local/cuda/bin (install the CUDA toolkit or set CUDA_ROOT)");
}

std::vector<KernelResources> parsePtxasReport(const std::string &text) {
  std::vector<KernelResources> kernels;
  llvm::Regex properties("Function properties for ([A-Za-z0-9_$]+)");
  llvm::Regex frame("([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, "
                    "([0-9]+) bytes spill loads");
  llvm::Regex used("Used ([0-9]+) registers");
  llvm::Regex barriers("used ([0-9]+) barriers");
  llvm::Regex smem("([0-9]+) bytes smem");
  auto toInt = [](llvm::StringRef s) {
    int64_t v = 0;
    s.getAsInteger(10, v);
    return v;
  };
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(text).split(lines, '\n');
  for (llvm::StringRef line : lines) {
    llvm::SmallVector<llvm::StringRef> m;
    if (properties.match(line, &m)) {
      kernels.push_back({});
      kernels.back().name = m[1].str();
      continue;
    }
    if (kernels.empty())
      continue;
    KernelResources &k = kernels.back();
    if (frame.match(line, &m)) {
      k.stackFrameBytes = toInt(m[1]);
      k.spillStoreBytes = toInt(m[2]);
      k.spillLoadBytes = toInt(m[3]);
    }
    if (used.match(line, &m))
      k.registers = toInt(m[1]);
    if (barriers.match(line, &m))
      k.barriers = toInt(m[1]);
    if (smem.match(line, &m))
      k.staticSharedBytes = toInt(m[1]);
  }
  return kernels;
}

namespace {
/// A temporary file removed when it goes out of scope.
struct TempFile {
  llvm::SmallString<128> path;
  ~TempFile() {
    if (!path.empty())
      llvm::sys::fs::remove(path);
  }
};

llvm::Error makeTemp(const char *suffix, TempFile &file) {
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("fa-kernel", suffix, file.path))
    return llvm::createStringError(ec, "cannot create a temporary file");
  return llvm::Error::success();
}

llvm::Expected<std::string> readFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buffer)
    return llvm::createStringError(buffer.getError(),
                                   "cannot read " + path.str());
  return (*buffer)->getBuffer().str();
}
} // namespace

size_t countEntryPoints(llvm::StringRef ptx) {
  size_t count = 0;
  llvm::SmallVector<llvm::StringRef> lines;
  ptx.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.ltrim();
    line.consume_front(".visible ");
    line.consume_front(".weak ");
    count += line.starts_with(".entry ");
  }
  return count;
}

/// Whether `ptxas` takes --split-compile (its --help lists it), asked once
/// per ptxas path.
static bool ptxasSplitsCompiles(const std::string &ptxas) {
  static std::mutex mutex;
  static llvm::StringMap<bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(ptxas); it != known.end())
    return it->second;
  bool splits = false;
  TempFile help;
  if (llvm::Error e = makeTemp("log", help))
    llvm::consumeError(std::move(e));
  else {
    llvm::SmallVector<llvm::StringRef> args = {ptxas, "--help"};
    std::optional<llvm::StringRef> redirects[] = {std::nullopt, help.path.str(),
                                                  help.path.str()};
    if (runWithTimeout(ptxas, args, redirects, 30) == 0) {
      if (auto text = readFile(help.path))
        splits = llvm::StringRef(*text).contains("--split-compile");
      else
        llvm::consumeError(text.takeError());
    }
  }
  known[ptxas] = splits;
  return splits;
}

llvm::Expected<PtxasResult> runPtxas(const std::string &ptx,
                                     const std::string &arch) {
  auto ptxas = findPtxas();
  if (!ptxas)
    return ptxas.takeError();
  TempFile input, output, log;
  for (auto [suffix, file] : {std::pair<const char *, TempFile *>{"ptx", &input},
                              {"cubin", &output},
                              {"log", &log}})
    if (llvm::Error e = makeTemp(suffix, *file))
      return std::move(e);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(input.path, ec);
    if (ec)
      return llvm::createStringError(ec, "cannot write " + input.path.str());
    os << ptx;
  }
  std::string archFlag = "-arch=" + arch;
  llvm::SmallVector<llvm::StringRef> args = {*ptxas, archFlag, "-O3", "-v"};
  // A module of several kernels (the backward's three, split-KV's forward
  // and combine) is assembled a kernel per thread where this ptxas can: the
  // same code and report (checked on the backward: identical .text and
  // -v lines), less wall time.
  std::string splitFlag;
  if (size_t kernels = countEntryPoints(ptx);
      kernels > 1 && ptxasSplitsCompiles(*ptxas)) {
    splitFlag = "--split-compile=" + std::to_string(kernels);
    args.push_back(splitFlag);
  }
  args.append({input.path, "-o", output.path});
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.path.str(),
                                                log.path.str()};
  std::string errorMessage;
  int rc =
      runWithTimeout(*ptxas, args, redirects, /*seconds=*/120, &errorMessage);
  auto logText = readFile(log.path);
  if (!logText)
    return logText.takeError();
  if (rc != 0)
    return llvm::createStringError(
        "ptxas failed" +
        (errorMessage.empty() ? std::string() : " (" + errorMessage + ")") +
        ":\n" + *logText);
  auto cubin = readFile(output.path);
  if (!cubin)
    return cubin.takeError();
  PtxasResult result;
  result.cubin.assign(cubin->begin(), cubin->end());
  result.log = *logText;
  result.kernels = parsePtxasReport(*logText);
  return result;
}

llvm::Expected<std::string> ptxasVersion() {
  auto ptxas = findPtxas();
  if (!ptxas)
    return ptxas.takeError();
  TempFile log;
  if (llvm::Error e = makeTemp("log", log))
    return std::move(e);
  llvm::SmallVector<llvm::StringRef> args = {*ptxas, "--version"};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.path.str(),
                                                log.path.str()};
  if (runWithTimeout(*ptxas, args, redirects, 30) != 0)
    return llvm::createStringError("ptxas --version failed");
  auto text = readFile(log.path);
  if (!text)
    return text.takeError();
  llvm::SmallVector<llvm::StringRef> m;
  if (llvm::Regex("V([0-9]+\\.[0-9]+\\.[0-9]+)").match(*text, &m))
    return m[1].str();
  return llvm::createStringError("cannot read the ptxas version from: " +
                                 *text);
}

namespace {

/// The entry points of libnvJitLink, loaded once.
struct NvJitLink {
  decltype(&::nvJitLinkCreate) create = nullptr;
  decltype(&::nvJitLinkAddData) addData = nullptr;
  decltype(&::nvJitLinkComplete) complete = nullptr;
  decltype(&::nvJitLinkGetLinkedCubinSize) cubinSize = nullptr;
  decltype(&::nvJitLinkGetLinkedCubin) cubin = nullptr;
  decltype(&::nvJitLinkGetInfoLogSize) infoLogSize = nullptr;
  decltype(&::nvJitLinkGetInfoLog) infoLog = nullptr;
  decltype(&::nvJitLinkGetErrorLogSize) errorLogSize = nullptr;
  decltype(&::nvJitLinkGetErrorLog) errorLog = nullptr;
  decltype(&::nvJitLinkDestroy) destroy = nullptr;
  decltype(&::nvJitLinkVersion) version = nullptr;
  std::string error; // why it is not usable, or ""

  static const NvJitLink &get() {
    static const NvJitLink instance;
    return instance;
  }

private:
  NvJitLink() {
    std::vector<std::string> candidates = {"libnvJitLink.so.13"};
    if (const char *root = std::getenv("CUDA_ROOT"))
      candidates.push_back(std::string(root) + "/lib64/libnvJitLink.so.13");
    candidates.push_back("/usr/local/cuda/lib64/libnvJitLink.so.13");
    llvm::sys::DynamicLibrary library;
    for (const std::string &name : candidates) {
      library = llvm::sys::DynamicLibrary::getPermanentLibrary(name.c_str());
      if (library.isValid())
        break;
    }
    if (!library.isValid()) {
      error = "libnvJitLink.so.13 not found: looked on the library path, in "
              "$CUDA_ROOT/lib64 and in /usr/local/cuda/lib64";
      return;
    }
    auto load = [&](auto &pointer, const char *name) {
      pointer = reinterpret_cast<std::remove_reference_t<decltype(pointer)>>(
          library.getAddressOfSymbol(name));
      if (!pointer && error.empty())
        error = std::string("libnvJitLink lacks ") + name;
    };
    load(create, "nvJitLinkCreate");
    load(addData, "nvJitLinkAddData");
    load(complete, "nvJitLinkComplete");
    load(cubinSize, "nvJitLinkGetLinkedCubinSize");
    load(cubin, "nvJitLinkGetLinkedCubin");
    load(infoLogSize, "nvJitLinkGetInfoLogSize");
    load(infoLog, "nvJitLinkGetInfoLog");
    load(errorLogSize, "nvJitLinkGetErrorLogSize");
    load(errorLog, "nvJitLinkGetErrorLog");
    load(destroy, "nvJitLinkDestroy");
    load(version, "nvJitLinkVersion");
  }
};

} // namespace

llvm::Expected<std::string> nvJitLinkVersion() {
  const NvJitLink &lib = NvJitLink::get();
  if (!lib.error.empty())
    return llvm::createStringError(lib.error);
  unsigned major = 0, minor = 0;
  if (lib.version(&major, &minor) != NVJITLINK_SUCCESS)
    return llvm::createStringError("nvJitLinkVersion failed");
  return std::to_string(major) + "." + std::to_string(minor);
}

llvm::Expected<PtxasResult> runNvJitLink(const std::string &ptx,
                                         const std::string &arch) {
  const NvJitLink &lib = NvJitLink::get();
  if (!lib.error.empty())
    return llvm::createStringError(lib.error);
  std::string archOption = "-arch=" + arch;
  const char *options[] = {archOption.c_str(), "-O3", "-verbose"};
  nvJitLinkHandle handle = nullptr;
  if (lib.create(&handle, 3, options) != NVJITLINK_SUCCESS)
    return llvm::createStringError("nvJitLinkCreate failed for " + archOption);
  auto log = [&](auto sizeOf, auto read) {
    size_t size = 0;
    std::string text;
    if (sizeOf(handle, &size) == NVJITLINK_SUCCESS && size > 1) {
      text.resize(size);
      read(handle, text.data());
      text.resize(size - 1);
    }
    return text;
  };
  PtxasResult result;
  nvJitLinkResult status =
      lib.addData(handle, NVJITLINK_INPUT_PTX, ptx.c_str(), ptx.size() + 1,
                  "fa.ptx");
  if (status == NVJITLINK_SUCCESS)
    status = lib.complete(handle);
  size_t size = 0;
  if (status == NVJITLINK_SUCCESS)
    status = lib.cubinSize(handle, &size);
  if (status == NVJITLINK_SUCCESS) {
    result.cubin.resize(size);
    status = lib.cubin(handle, result.cubin.data());
  }
  if (status != NVJITLINK_SUCCESS) {
    std::string errors = log(lib.errorLogSize, lib.errorLog);
    lib.destroy(&handle);
    return llvm::createStringError("nvJitLink failed (status " +
                                   std::to_string(int(status)) + "): " + errors);
  }
  // The ptxas part of the log, which parsePtxasReport reads (nvJitLink adds
  // its own summary lines in another format).
  std::string info = log(lib.infoLogSize, lib.infoLog);
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(info).split(lines, '\n');
  for (llvm::StringRef line : lines)
    if (line.starts_with("ptxas"))
      result.log += line.str() + "\n";
  result.kernels = parsePtxasReport(result.log);
  lib.destroy(&handle);
  return result;
}

} // namespace fa
