//===- CudaToolkit.cpp - Finding and running ptxas ------------------*- C++ -*-===//
#include "lib/CudaToolkit.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"

#include <cstdlib>
#include <optional>

namespace fa {

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
  llvm::SmallVector<llvm::StringRef> args = {*ptxas, archFlag, "-O3", "-v",
                                             input.path, "-o", output.path};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.path.str(),
                                                log.path.str()};
  std::string errorMessage;
  int rc = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects,
                                     /*SecondsToWait=*/120, 0, &errorMessage);
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
  if (llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects, 30) != 0)
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

} // namespace fa
