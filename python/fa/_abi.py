"""fa's binding to the C ABI (runtime/fa_runtime.h): the library, its
structures, the per-device runtimes, status codes as FaError, and the
descriptors of tensors and configs. Part of the fa package (imported into
it)."""

import ctypes
import numbers
import os
import threading

_F32, _F16, _BF16 = 0, 1, 2
_E4M3 = 6  # fa_dtype FA_E4M3: float8_e4m3fn q, k, v (the forward)
_STATUS = {1: "invalid argument", 2: "no CUDA driver", 3: "CUDA error",
           4: "compile error", 5: "cache error"}


class FaError(RuntimeError):
    """A failure reported by the fa runtime; .status is the fa_status code."""

    def __init__(self, status, message):
        label = _STATUS.get(status, status)
        # Messages that already start with their status ("no CUDA driver:
        # cannot load ...") are not prefixed twice.
        text = str(message)
        if not (text == str(label) or text.startswith(f"{label}:")):
            text = f"{label}: {text}"
        super().__init__(f"fa: {text}")
        self.status = status


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("sizes", ctypes.c_int64 * 4),
                ("strides", ctypes.c_int64 * 4)]


class _Versioned(ctypes.Structure):
    """A struct of fa_runtime.h that begins with struct_size: set here to
    the struct's size; positional arguments fill the fields after it."""

    def __init__(self, *args, **kwargs):
        super().__init__(ctypes.sizeof(type(self)), *args, **kwargs)


class _Config(_Versioned):
    _fields_ = [("struct_size", ctypes.c_int64),
                ("block_m", ctypes.c_int64), ("block_n", ctypes.c_int64),
                ("num_warps", ctypes.c_int64), ("arch", ctypes.c_char_p),
                ("stages", ctypes.c_int64), ("strategy", ctypes.c_int32),
                ("backward", ctypes.c_int32),
                ("deterministic", ctypes.c_int32),
                ("sequence_length", ctypes.c_int64),
                ("score_mod", ctypes.c_char_p), ("mask_mod", ctypes.c_char_p),
                ("sinks", ctypes.c_int32), ("block_mask", ctypes.c_int32),
                ("varlen", ctypes.c_int32),
                ("kv_lens", ctypes.c_int32)]


class _Capture(ctypes.Structure):
    """fa_capture: a tensor a score_mod / mask_mod reads (rank 1..4,
    contiguous row-major; sizes/strides[0..rank) used), its fa_dtype."""
    _fields_ = [("tensor", _Tensor), ("dtype", ctypes.c_int32),
                ("rank", ctypes.c_int32)]


class _Extras(_Versioned):
    """fa_attention_extras: the tensors beyond Q, K, V, O and LSE (NULL:
    none); captures: the score_mod's captured tensors, then the
    mask_mod's (NULL when num_captures = 0); key_ranges / query_ranges: a
    block mask's tables (the forward's, the backward's); kv_splits: the
    forwards' split-KV parts (0: the runtime's choice, 1: no split);
    block_table: a paged cache's page table, cache_batch_idx: each batch
    entry's cache entry (both the kvcache call's)."""
    _fields_ = [("struct_size", ctypes.c_int64),
                ("sinks", ctypes.POINTER(_Tensor)),
                ("grad_sinks", ctypes.POINTER(_Tensor)),
                ("captures", ctypes.POINTER(_Capture)),
                ("num_captures", ctypes.c_int64),
                ("key_ranges", ctypes.POINTER(_Tensor)),
                ("query_ranges", ctypes.POINTER(_Tensor)),
                ("kv_splits", ctypes.c_int64),
                ("block_table", ctypes.POINTER(_Tensor)),
                ("cache_batch_idx", ctypes.POINTER(_Tensor)),
                ("q_descale", ctypes.POINTER(_Tensor)),
                ("k_descale", ctypes.POINTER(_Tensor)),
                ("v_descale", ctypes.POINTER(_Tensor)),
                ("out_dtype", ctypes.c_int32)]


class _Info(_Versioned):
    _fields_ = [("struct_size", ctypes.c_int64),
                ("name", ctypes.c_char * 128), ("key", ctypes.c_char * 65),
                ("num_threads", ctypes.c_int64),
                ("shared_memory_bytes", ctypes.c_int64),
                ("registers", ctypes.c_int64),
                ("spill_store_bytes", ctypes.c_int64),
                ("spill_load_bytes", ctypes.c_int64),
                ("source", ctypes.c_int32), ("compile_seconds", ctypes.c_double),
                ("strategy", ctypes.c_int32), ("block_m", ctypes.c_int64),
                ("block_n", ctypes.c_int64), ("num_warps", ctypes.c_int64),
                ("stages", ctypes.c_int64), ("assembler", ctypes.c_char * 64),
                ("lower_seconds", ctypes.c_double),
                ("codegen_seconds", ctypes.c_double),
                ("assemble_seconds", ctypes.c_double)]

_strategy_codes = None


def _strategies():
    """The fa_strategy codes of the C ABI by name ("auto" first), as the
    runtime's strategy registry lists them."""
    global _strategy_codes
    if _strategy_codes is None:
        lib, codes = _library(), {}
        while (name := lib.fa_strategy_name(len(codes))) is not None:
            codes[name.decode()] = len(codes)
        _strategy_codes = codes
    return _strategy_codes


_lock = threading.Lock()
_lib = None
_runtimes = {}  # device index -> fa_runtime*


def _library():
    global _lib
    if _lib is not None:
        return _lib
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    chosen = os.environ.get("FA_RUNTIME_LIB")
    if chosen and not os.path.isfile(chosen):
        raise FaError(0, f"FA_RUNTIME_LIB={chosen!r} is not a file")
    # Without FA_RUNTIME_LIB: the most recently built of the checkout's
    # builds (an older one would run old code).
    built = [p for p in (os.path.join(root, build, "lib", "libfa_runtime.so")
                         for build in ("build", "build-static"))
             if os.path.exists(p)]
    path = chosen or max(built, key=os.path.getmtime, default=None)
    if path is None:
        raise FaError(0, "libfa_runtime.so not found; build the project or "
                         "set FA_RUNTIME_LIB")
    lib = ctypes.CDLL(path)
    lib.fa_last_error.restype = ctypes.c_char_p
    lib.fa_strategy_name.restype = ctypes.c_char_p
    lib.fa_strategy_name.argtypes = [ctypes.c_int32]
    lib.fa_runtime_create.argtypes = [ctypes.c_char_p, ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_void_p)]
    lib.fa_runtime_has_driver.argtypes = [ctypes.c_void_p]
    tensor = ctypes.POINTER(_Tensor)
    lib.fa_attention_forward.argtypes = [
        ctypes.c_void_p, tensor, tensor, tensor, tensor, tensor, ctypes.c_int,
        ctypes.c_int, ctypes.c_double, ctypes.POINTER(_Config), ctypes.c_void_p]
    lib.fa_attention_backward.argtypes = [
        ctypes.c_void_p, tensor, tensor, tensor, tensor, tensor, tensor,
        tensor, tensor, tensor, ctypes.c_int, ctypes.c_int, ctypes.c_double,
        ctypes.POINTER(_Config), ctypes.c_void_p]
    if hasattr(lib, "fa_attention_forward_ex"):  # attention sinks
        extras = ctypes.POINTER(_Extras)
        lib.fa_attention_forward_ex.argtypes = [
            ctypes.c_void_p, tensor, tensor, tensor, tensor, tensor, extras,
            ctypes.c_int, ctypes.c_int, ctypes.c_double,
            ctypes.POINTER(_Config), ctypes.c_void_p]
        lib.fa_attention_backward_ex.argtypes = [
            ctypes.c_void_p, tensor, tensor, tensor, tensor, tensor, tensor,
            tensor, tensor, tensor, extras, ctypes.c_int, ctypes.c_int,
            ctypes.c_double, ctypes.POINTER(_Config), ctypes.c_void_p]
    if hasattr(lib, "fa_attention_varlen_forward"):
        lib.fa_attention_varlen_forward.argtypes = [
            ctypes.c_void_p, tensor, tensor, tensor, tensor, tensor, tensor,
            tensor, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(_Extras),
            ctypes.c_int, ctypes.c_int, ctypes.c_double,
            ctypes.POINTER(_Config), ctypes.c_void_p]
    if hasattr(lib, "fa_attention_varlen_backward"):
        lib.fa_attention_varlen_backward.argtypes = [
            ctypes.c_void_p, tensor, tensor, tensor, tensor, tensor, tensor,
            tensor, tensor, tensor, tensor, tensor, ctypes.c_int64,
            ctypes.c_int64, ctypes.POINTER(_Extras), ctypes.c_int,
            ctypes.c_int, ctypes.c_double, ctypes.POINTER(_Config),
            ctypes.c_void_p]
    if hasattr(lib, "fa_attention_varlen_kvcache_forward"):
        lib.fa_attention_varlen_kvcache_forward.argtypes = [
            ctypes.c_void_p, tensor, tensor, tensor, tensor, tensor, tensor,
            tensor, ctypes.c_int64, ctypes.c_int64, tensor,
            ctypes.POINTER(_Extras), ctypes.c_int, ctypes.c_int,
            ctypes.c_double, ctypes.POINTER(_Config), ctypes.c_void_p]
        lib.fa_attention_varlen_kvcache_forward.restype = ctypes.c_int
    if hasattr(lib, "fa_attention_kvcache_forward"):
        lib.fa_attention_kvcache_forward.argtypes = [
            ctypes.c_void_p, tensor, tensor, tensor, tensor, tensor, tensor,
            ctypes.POINTER(_Extras), ctypes.c_int, ctypes.c_int,
            ctypes.c_double, ctypes.POINTER(_Config), ctypes.c_void_p]
    if hasattr(lib, "fa_compute_block_mask"):
        lib.fa_compute_block_mask.argtypes = [
            ctypes.c_void_p, tensor, tensor, tensor, tensor,
            ctypes.POINTER(_Extras), ctypes.c_int, ctypes.POINTER(_Config),
            ctypes.c_void_p]
    lib.fa_prepare_kernel.argtypes = [
        ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_int,
        ctypes.c_double, ctypes.POINTER(_Config), ctypes.POINTER(_Info)]
    _lib = lib
    return lib


def _check(status):
    if status != 0:
        # A message with bytes that are not UTF-8 (a path, say) must not
        # turn into a second exception.
        message = _library().fa_last_error().decode(errors="replace")
        raise FaError(status, message)


def _runtime(device):
    with _lock:
        if device not in _runtimes:
            handle = ctypes.c_void_p()
            _check(_library().fa_runtime_create(None, device,
                                                ctypes.byref(handle)))
            _runtimes[device] = handle
        return _runtimes[device]


def _integer(name, value, bits=64):
    """value as a C integer of `bits` bits; a clear error instead of
    ctypes' silent wrap."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"fa: {name} must be an int, got {value!r}")
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ValueError(f"fa: {name} must fit in {bits} bits, got {value}")
    return value


def _flag(name, value):
    """A flag: a bool (or the ints 0 and 1), never a truncated int."""
    if isinstance(value, (bool, numbers.Integral)) and value in (0, 1):
        return int(value)
    raise TypeError(f"fa: {name} must be a bool, got {value!r}")


def _choice(where, name, value, choices):
    """value, one of the string keys of `choices`."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{where}: {name} must be one of "
                         f"{', '.join(choices)}, got {value!r}")
    return value


def _config(block_m, block_n, num_warps, stages=0, strategy="auto",
            backward=False, deterministic=False, sequence_length=0,
            variant=None, sinks=False, block_mask=False, varlen=False,
            kv_lens=False):
    """The fa_kernel_config, or None for all defaults. variant: None or the
    (score_mod, mask_mod) MLIR texts of a traced variant (either may be
    None). sinks: the kernel takes attention sinks; block_mask: a block
    mask's table."""
    block_m = _integer("block_m", block_m)
    block_n = _integer("block_n", block_n)
    num_warps = _integer("num_warps", num_warps)
    stages = _integer("stages", stages)
    sequence_length = _integer("sequence_length", sequence_length)
    strategy = _choice("fa", "strategy", strategy, _strategies())
    score_mod, mask_mod = variant or (None, None)
    if not (block_m or block_n or num_warps or stages or strategy != "auto"
            or backward or deterministic or sequence_length or score_mod
            or mask_mod or sinks or block_mask or varlen or kv_lens):
        return None
    return ctypes.byref(_Config(
        block_m, block_n, num_warps, None, stages, _strategies()[strategy],
        int(backward), int(deterministic), sequence_length,
        score_mod.encode() if score_mod else None,
        mask_mod.encode() if mask_mod else None, int(sinks),
        int(block_mask), int(varlen), int(kv_lens)))


_Int64x4 = ctypes.c_int64 * 4


def _describe(t):
    # One constructor call per tensor: this runs on every launch. A 1-d
    # tensor (the sinks, [Hq]) gives sizes [Hq, 0, 0, 0] and strides
    # [stride, 0, 0, 0].
    return _Tensor(t.data_ptr(), _Int64x4(*t.shape), _Int64x4(*t.stride()))


def _describe_capture(t):
    """The fa_capture of a captured tensor: its sizes, its strides as torch
    has them (the runtime refuses a layout that is not row-major, which
    _check_captures avoids with .contiguous(); a custom op's caller may
    not), fa_dtype and rank."""
    from . import variants

    sizes = tuple(t.shape)
    code = variants._CAPTURE_TYPES[variants._dtype_name(t.dtype)][1]
    return _Capture(_Tensor(t.data_ptr(), _Int64x4(*sizes),
                            _Int64x4(*t.stride())), code, len(sizes))
