# -*- Python -*-
# lit configuration of the fa compiler: FileCheck tests per pass and stage.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "FA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fa_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Unit", "Gpu", "Inputs"]

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["fa-opt", "fa-compile", "fa-sweep"], [config.fa_tools_dir])
# fa-host-overhead links the shared libfa_runtime.so, which the sanitizer
# build does not make: its tests run where the tool was built.
if os.path.exists(os.path.join(config.fa_tools_dir, "fa-host-overhead")):
    llvm_config.add_tool_substitutions(["fa-host-overhead"],
                                       [config.fa_tools_dir])
    config.available_features.add("fa-host-overhead")

# ptxas assembles every generated PTX in the tests; it ships with the CUDA
# toolkit (on every machine of this project). Tests that need it say
# REQUIRES: ptxas and are reported unsupported where it is missing.
import shutil
ptxas = shutil.which("ptxas")
for root in [os.environ.get("CUDA_ROOT"), "/usr/local/cuda"]:
    if not ptxas and root and os.access(os.path.join(root, "bin", "ptxas"), os.X_OK):
        ptxas = os.path.join(root, "bin", "ptxas")
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
    config.environment["CUDA_ROOT"] = os.path.dirname(os.path.dirname(ptxas))

# The plotting scripts run under lit's own interpreter; matplotlib (Debian's
# python3-matplotlib) is a feature.
import importlib.util
import sys
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%fa_src", config.fa_src_root))
if importlib.util.find_spec("matplotlib"):
    config.available_features.add("matplotlib")

# A loadable CUDA driver (libcuda) is a feature: the tools' messages for a
# machine without one are tested where there is none.
import ctypes
try:
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass
