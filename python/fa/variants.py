"""Attention variants: score_mod and mask_mod as Python functions.

A score_mod ``(score, b, h, q_idx, kv_idx) -> score`` rewrites each scaled
score before the softmax; a mask_mod ``(b, h, q_idx, kv_idx) -> bool`` keeps
a score (True) or drops it. Both may take two more arguments, ``q_len`` and
``kv_len`` (Sq and Sk), for masks aligned to the bottom right as the causal
mask is (query row i sits at key position i + kv_len - q_len).

fa.attention(q, k, v, score_mod=..., mask_mod=...) traces the functions once
with proxy values into the compiler's IR (the text of an MLIR function,
part of the kernel's cache key): arithmetic (+ - * / // %), comparisons,
& | ~ on conditions, abs(), and the functions below (where, tanh, exp, exp2,
log, log2, sqrt, minimum, maximum). Python that tracing cannot represent
(``if`` on a traced value, ``and``/``or``, numpy, int()) is an error naming
it. The compiler derives which K/V tiles a query tile needs from masks that
compare sums of the indices, the lengths and constants; a sliding window
then costs time in proportion to the window.

Captured tensors: a score_mod or mask_mod may read device tensors by index,
``lambda b, h, q_idx, kv_idx: doc[b, q_idx] == doc[b, kv_idx]`` with ``doc``
an int CUDA tensor the function closes over (document ids, per-head slopes,
a relative-bias table). Each such tensor becomes one more argument of the
traced function (a memref the kernel reads with its element type and rank;
the text, and so the kernel, does not depend on the tensor's values or
sizes), and fa.attention passes the tensors the function captures at each
call. A tensor reached any other way (a global, an attribute) is wrapped
with ``captured(t)``. Captured tensors get no gradient.

The built-ins: sliding_window(left, right), softcap(cap), alibi(slopes),
prefix_lm(n), chunked(size), document(doc_ids); and_masks / or_masks
combine masks.
"""

import functools
import inspect
import math
import struct
import sys
import threading
import types
import weakref

__all__ = ["where", "tanh", "exp", "exp2", "log", "log2", "sqrt", "minimum",
           "maximum", "sliding_window", "softcap", "alibi", "prefix_lm",
           "chunked", "document", "and_masks", "or_masks", "captured",
           "Captured", "trace_score_mod", "trace_mask_mod",
           "trace_with_captures", "TraceError"]


class TraceError(TypeError):
    """Python that a score_mod / mask_mod trace cannot represent."""


class _Trace:
    """The ops of one traced function, as MLIR lines, and the tensors it
    captures (its trailing memref arguments, in order of first use)."""

    def __init__(self, fn=None):
        self.lines = []
        self.count = 0
        self.constants = {}
        self.fn = fn           # the function traced (for error messages)
        self.captures = []     # Captured wrappers, one per argument
        self.arguments = {}    # id(wrapper) -> its argument's name

    def capture(self, wrapper):
        """The argument (%c0, %c1, ...) that holds `wrapper`'s tensor."""
        name = self.arguments.get(id(wrapper))
        if name is None:
            name = f"%c{len(self.captures)}"
            self.captures.append(wrapper)
            self.arguments[id(wrapper)] = name
        return name

    def fresh(self):
        self.count += 1
        return f"%v{self.count}"

    def emit(self, text, type_):
        name = self.fresh()
        self.lines.append(f"  {name} = {text}")
        return _Value(self, name, type_)

    def constant(self, value, type_):
        key = (repr(value), type_)
        if key not in self.constants:
            if type_ == "f32":
                # The float32 bits: exact, and one spelling per value.
                bits = struct.unpack("<I", struct.pack("<f", value))[0]
                text = f"arith.constant 0x{bits:08X} : f32"
            elif type_ == "i1":
                text = f"arith.constant {'true' if value else 'false'}"
            elif type_ == "i8":  # a loaded torch.bool's zero
                text = f"arith.constant {int(value)} : i8"
            else:
                text = f"arith.constant {int(value)} : index"
            self.constants[key] = self.emit(text, type_)
        return self.constants[key]


_CMP_INDEX = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq",
              "!=": "ne"}
_CMP_FLOAT = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq",
              "!=": "une"}


class _Value:
    """A traced value: an index (the indices, the lengths), an f32 (the
    score) or an i1 (a condition)."""

    def __init__(self, trace, name, type_):
        self._trace, self._name, self._type = trace, name, type_

    # --- what tracing cannot represent ---------------------------------
    def __bool__(self):
        raise TraceError(
            "a traced score_mod/mask_mod cannot branch on a traced value "
            "(an `if`, `and`, `or`, `not` or a chained comparison such as "
            "a < b < c): use fa.variants.where(cond, x, y), & | ~, and one "
            "comparison at a time")

    def __index__(self):
        raise TraceError("a traced value cannot be used as a Python integer "
                         "(int(), range(), indexing a list or numpy array)")

    def __float__(self):
        raise TraceError("a traced value cannot be converted to a Python "
                         "float (float(), math.*, numpy): use the functions "
                         "of fa.variants")

    __int__ = __index__

    def __array__(self, *args, **kwargs):
        raise TraceError("numpy cannot compute on a traced value: use the "
                         "functions of fa.variants")

    def __iter__(self):
        raise TraceError("a traced value is a scalar; it cannot be iterated")

    @classmethod
    def __torch_function__(cls, func, types_, args=(), kwargs=None):
        # torch calls this for any torch function given a traced value,
        # Tensor.__getitem__ included (t[b, q_idx] on a tensor the tracer
        # did not capture).
        if getattr(func, "__name__", "") == "__getitem__":
            raise TraceError(_uncaptured_message(args[0] if args else None))
        name = getattr(func, "__name__", repr(func))
        raise TraceError(f"torch.{name} cannot compute on a traced value: "
                         "use the functions of fa.variants (where, exp, "
                         "tanh, ...); to read a tensor, index it")

    # --- arithmetic ------------------------------------------------------
    def _binary(self, other, op, reverse=False):
        a, b = _promote(self, other)
        if reverse:
            a, b = b, a
        if a._type == "i1":
            raise TraceError(f"'{op}' on conditions: use & | ~ for "
                             "conditions, arithmetic on numbers")
        if a._type == "f32":
            name = {"+": "addf", "-": "subf", "*": "mulf", "/": "divf",
                    "%": "remf"}.get(op)
            if name is None:
                raise TraceError(f"'{op}' on a float: use '/' and "
                                 "fa.variants functions")
            return self._trace.emit(f"arith.{name} {a._name}, {b._name} : f32",
                                    "f32")
        if op == "/":
            a, b = _to_float(a), _to_float(b)
            return self._trace.emit(f"arith.divf {a._name}, {b._name} : f32",
                                    "f32")
        name = {"+": "addi", "-": "subi", "*": "muli", "//": "floordivsi",
                "%": "remsi"}[op]
        return self._trace.emit(f"arith.{name} {a._name}, {b._name} : index",
                                "index")

    def __add__(self, o): return self._binary(o, "+")
    def __radd__(self, o): return self._binary(o, "+", True)
    def __sub__(self, o): return self._binary(o, "-")
    def __rsub__(self, o): return self._binary(o, "-", True)
    def __mul__(self, o): return self._binary(o, "*")
    def __rmul__(self, o): return self._binary(o, "*", True)
    def __truediv__(self, o): return self._binary(o, "/")
    def __rtruediv__(self, o): return self._binary(o, "/", True)
    def __floordiv__(self, o): return self._binary(o, "//")
    def __rfloordiv__(self, o): return self._binary(o, "//", True)
    def __mod__(self, o): return self._binary(o, "%")
    def __rmod__(self, o): return self._binary(o, "%", True)

    def __neg__(self):
        return self._trace.constant(0, self._type)._binary(self, "-") \
            if self._type == "index" else \
            self._trace.emit(f"arith.negf {self._name} : f32", "f32")

    def __pos__(self):
        return self

    def __abs__(self):
        if self._type == "f32":
            return self._trace.emit(f"math.absf {self._name} : f32", "f32")
        return where(self < 0, -self, self)

    # --- comparisons -----------------------------------------------------
    def _compare(self, other, op):
        a, b = _promote(self, other)
        if a._type == "i1":
            raise TraceError("conditions are not compared: combine them "
                             "with & | ~")
        if a._type == "f32":
            text = f"arith.cmpf {_CMP_FLOAT[op]}, {a._name}, {b._name} : f32"
        else:
            text = (f"arith.cmpi {_CMP_INDEX[op]}, {a._name}, {b._name} "
                    ": index")
        return self._trace.emit(text, "i1")

    def __lt__(self, o): return self._compare(o, "<")
    def __le__(self, o): return self._compare(o, "<=")
    def __gt__(self, o): return self._compare(o, ">")
    def __ge__(self, o): return self._compare(o, ">=")
    def __eq__(self, o): return self._compare(o, "==")
    def __ne__(self, o): return self._compare(o, "!=")
    __hash__ = None

    # --- conditions ------------------------------------------------------
    def _logic(self, other, name):
        a, b = _promote(self, other)
        if a._type != "i1":
            raise TraceError(f"'{'&' if name == 'andi' else '|'}' combines "
                             "conditions (comparisons), not numbers")
        return self._trace.emit(f"arith.{name} {a._name}, {b._name} : i1",
                                "i1")

    def __and__(self, o): return self._logic(o, "andi")
    def __rand__(self, o): return self._logic(o, "andi")
    def __or__(self, o): return self._logic(o, "ori")
    def __ror__(self, o): return self._logic(o, "ori")

    def __invert__(self):
        if self._type != "i1":
            raise TraceError("'~' negates a condition (a comparison)")
        true = self._trace.constant(True, "i1")
        return self._trace.emit(f"arith.xori {self._name}, {true._name} : i1",
                                "i1")


def _trace_of(*values):
    for v in values:
        if isinstance(v, _Value):
            return v._trace
    raise TraceError("fa.variants functions take at least one traced value")


def _lift(trace, value, like):
    """A Python number (or bool) as a constant of the type `like` needs."""
    if isinstance(value, _Value):
        return value
    if isinstance(value, Captured):
        value._refuse("arithmetic on the whole tensor")
    if _is_tensor(value):
        raise TraceError("a torch tensor cannot be combined with traced "
                         "values: index it with traced indices to read an "
                         "element (t[b, q_idx]); a tensor the function "
                         "closes over is captured, one reached any other "
                         "way must be wrapped with fa.variants.captured(t)")
    if isinstance(value, bool):
        return trace.constant(value, "i1")
    if isinstance(value, int) and like != "f32":
        return trace.constant(value, "index")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise TraceError(f"the constant {value!r} is not finite")
        return trace.constant(float(value), "f32")
    raise TraceError(f"cannot trace a {type(value).__name__} ({value!r}): "
                     "only numbers, bools and traced values")


def _to_float(v):
    if v._type == "f32":
        return v
    if v._type == "i1":
        raise TraceError("a condition is not a number: use "
                         "fa.variants.where(cond, 1.0, 0.0)")
    i64 = v._trace.emit(f"arith.index_cast {v._name} : index to i64", "i64")
    return v._trace.emit(f"arith.sitofp {i64._name} : i64 to f32", "f32")


def _promote(a, b):
    """Both operands as traced values of one type (indices meet floats as
    floats)."""
    trace = _trace_of(a, b)
    like = next(v._type for v in (a, b) if isinstance(v, _Value))
    a, b = _lift(trace, a, like), _lift(trace, b, like)
    if a._type != b._type:
        if "i1" in (a._type, b._type):
            raise TraceError("a condition and a number cannot be combined: "
                             "use fa.variants.where")
        a, b = _to_float(a), _to_float(b)
    return a, b


def where(cond, x, y):
    """x where cond holds, else y (a traced select)."""
    trace = _trace_of(cond, x, y)
    cond = _lift(trace, cond, "i1")
    if cond._type != "i1":
        raise TraceError("where's condition must be a comparison")
    like = next((v._type for v in (x, y) if isinstance(v, _Value)), None)
    if like is None:
        like = "f32" if isinstance(x, float) or isinstance(y, float) \
            else "index"
    x, y = _lift(trace, x, like), _lift(trace, y, like)
    if x._type != y._type:
        x, y = _to_float(x), _to_float(y)
    return trace.emit(f"arith.select {cond._name}, {x._name}, {y._name} : "
                      f"{x._type}", x._type)


def _math(name):
    def function(x):
        if not isinstance(x, _Value):
            return getattr(math, name)(x)
        x = _to_float(x)
        return x._trace.emit(f"math.{name} {x._name} : f32", "f32")
    function.__name__ = name
    function.__doc__ = f"{name}(x) of a traced value (f32)."
    return function


tanh = _math("tanh")
exp = _math("exp")
exp2 = _math("exp2")
log = _math("log")
log2 = _math("log2")
sqrt = _math("sqrt")


def minimum(x, y):
    """The smaller of x and y."""
    return where(x <= y, x, y) if isinstance(x, _Value) or \
        isinstance(y, _Value) else min(x, y)


def maximum(x, y):
    """The larger of x and y."""
    return where(x >= y, x, y) if isinstance(x, _Value) or \
        isinstance(y, _Value) else max(x, y)


#===------------------------------------------------------------------------===#
# Captured tensors
#===------------------------------------------------------------------------===#

# The dtypes a score_mod / mask_mod may read: name -> (element type in the
# traced text, fa_dtype code of the C ABI). A torch.bool tensor is stored
# as bytes: read as i8 and compared with 0.
_CAPTURE_TYPES = {"float32": ("f32", 0), "float16": ("f16", 1),
                  "bfloat16": ("bf16", 2), "int32": ("i32", 3),
                  "int64": ("i64", 4), "int8": ("i8", 5), "bool": ("i8", 5)}

_MAX_RANK = 4

# The trace being recorded on this thread (None outside a trace).
_STATE = threading.local()


def _active_trace():
    return getattr(_STATE, "trace", None)


def _dtype_name(dtype):
    """A dtype's name without torch's prefix: torch.int32 -> "int32"; a
    string is taken as it is."""
    name = str(dtype)
    return name[len("torch."):] if name.startswith("torch.") else name


def _is_tensor(value):
    """A torch.Tensor; or, for tests without torch, a duck-typed stand-in
    (a type with data_ptr() and values with .dtype and .shape)."""
    if isinstance(value, (type, Captured, _Value)):
        return False
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return True
    return (callable(getattr(type(value), "data_ptr", None))
            and hasattr(value, "dtype") and hasattr(value, "shape"))


def _kind_problem(dtype, rank):
    """Why a tensor of `dtype` and `rank` cannot be captured, or None."""
    if dtype not in _CAPTURE_TYPES:
        return (f"dtype {dtype} cannot be captured (supported: "
                f"{', '.join(_CAPTURE_TYPES)}; convert it, e.g. "
                ".to(torch.int32))")
    if not 1 <= rank <= _MAX_RANK:
        what = "a 0-d tensor (use reshape(1) and index [0])" if rank == 0 \
            else f"rank {rank}"
        return (f"{what} cannot be captured: captured tensors have rank 1 "
                f"to {_MAX_RANK}")
    return None


def _uncaptured_message(tensor):
    """The TraceError for a torch tensor indexed with traced values that
    the tracer did not capture (a global, an attribute, a default)."""
    fn = getattr(_active_trace(), "fn", None)
    space = getattr(fn, "__globals__", None) or {}
    name = next((key for key, value in space.items() if value is tensor),
                None)
    what = f"the tensor `{name}` (a global)" if name else "a torch tensor"
    return (f"{what} is indexed with traced values but is not captured: "
            "a score_mod/mask_mod reads a tensor that it closes over (a "
            "variable of an enclosing function), or one wrapped with "
            "fa.variants.captured(t); wrap it (e.g. "
            f"{name or 't'} = fa.variants.captured({name or 't'})) or close "
            "over it")


class Captured:
    """A tensor a score_mod / mask_mod reads by index (fa.variants.captured).

    Inside a traced function, ``t[i, j]`` (exactly one index per dimension:
    the index arguments, index arithmetic, loaded integers or Python ints
    >= 0) reads one element: an integer tensor gives an index, a floating
    one a float (float32), a bool tensor a condition. ``t.shape[d]`` and
    ``t.size(d)`` are traced sizes (the text does not depend on them);
    ``t.dim()``, ``t.ndim`` and ``t.dtype`` are Python values. Outside a
    trace, indexing reads the tensor itself."""

    __slots__ = ("_tensor", "_dtype", "_rank", "_name", "_source",
                 "_require", "_problem")

    def __init__(self, tensor, dtype, rank, name=None, source=None,
                 require=None, problem=None):
        self._tensor = tensor      # the tensor, or None (a placeholder)
        self._dtype = dtype        # its dtype's name ("int32")
        self._rank = rank
        self._name = name or "t"
        self._source = source      # where a trace finds it again (a path)
        self._require = require    # require(t, q, k) -> None or a problem
        self._problem = problem    # why it cannot be captured, or None

    # --- what it is ------------------------------------------------------
    @property
    def tensor(self):
        """The tensor (None for a placeholder)."""
        return self._tensor

    @property
    def dtype(self):
        """The tensor's dtype (its name for a placeholder)."""
        return self._tensor.dtype if self._tensor is not None \
            else self._dtype

    @property
    def ndim(self):
        return self._rank

    def dim(self):
        return self._rank

    def _label(self):
        return f"the captured tensor `{self._name}`"

    def __repr__(self):
        what = "placeholder" if self._tensor is None else "tensor"
        return (f"fa.variants.captured({self._name}: {what} of "
                f"{self._dtype}, rank {self._rank})")

    def _check(self):
        if self._problem is not None:
            raise TraceError(f"{self._label()}: {self._problem}")

    def _trace(self, values):
        """The active trace (the one the traced `values` belong to)."""
        trace = _active_trace()
        for v in values:
            if isinstance(v, _Value) and v._trace is not trace:
                raise TraceError(f"{self._label()} is indexed with a value "
                                 "of another trace")
        return trace

    # --- reading it ------------------------------------------------------
    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        trace = self._trace(index)
        if trace is None:
            # Outside a trace: the tensor itself (the function run eagerly,
            # e.g. to build a reference).
            if self._tensor is None:
                raise TypeError(f"{self._label()} is a placeholder without "
                                "a tensor")
            return self._tensor[index if len(index) != 1 else index[0]]
        self._check()
        name = self._name
        if len(index) != self._rank:
            letters = ", ".join("ijkl"[:self._rank])
            raise TraceError(
                f"{self._label()} has rank {self._rank}: index it with "
                f"exactly {self._rank} indices ({name}[{letters}]), got "
                f"{len(index)}")
        operands = []
        for position, i in enumerate(index):
            operands.append(self._index(trace, position, i)._name)
        memref = self._memref()
        element, _ = _CAPTURE_TYPES[self._dtype]
        loaded = trace.emit(f"memref.load {trace.capture(self)}"
                            f"[{', '.join(operands)}] : {memref}", element)
        if self._dtype == "bool":
            zero = trace.constant(0, "i8")
            return trace.emit(f"arith.cmpi ne, {loaded._name}, {zero._name} "
                              ": i8", "i1")
        if element in ("i32", "i64", "i8"):
            return trace.emit(f"arith.index_cast {loaded._name} : "
                              f"{element} to index", "index")
        if element in ("f16", "bf16"):
            return trace.emit(f"arith.extf {loaded._name} : {element} to "
                              "f32", "f32")
        return loaded

    def _index(self, trace, position, i):
        """Index operand `position` of a load as a traced index."""
        where = f"{self._label()}'s index {position}"
        if isinstance(i, _Value):
            if i._type == "index":
                return i
            what = "a float" if i._type == "f32" else "a condition"
            raise TraceError(f"{where} is {what}: indices are integers (the "
                             "index arguments, sums of them, loaded "
                             "integers, Python ints)")
        if isinstance(i, bool):
            raise TraceError(f"{where} is a bool ({i!r}): index with "
                             "integers")
        if isinstance(i, int):
            if i < 0:
                raise TraceError(
                    f"{where} is {i}: captured tensors are not indexed from "
                    f"the end; write {self._name}.shape[{position}] - "
                    f"{-i}")
            return trace.constant(i, "index")
        if isinstance(i, slice) or i is Ellipsis or i is None:
            raise TraceError(f"{where} is {i!r}: slices, ... and None are "
                             "not traced; read one element with one index "
                             "per dimension")
        if isinstance(i, Captured) or _is_tensor(i):
            raise TraceError(f"{where} is a tensor: index with one "
                             "element of it (t[i]) instead")
        raise TraceError(f"{where} is a {type(i).__name__} ({i!r}): index "
                         "with traced indices or Python ints")

    def _memref(self):
        element, _ = _CAPTURE_TYPES[self._dtype]
        return f"memref<{'?x' * self._rank}{element}>"

    def size(self, dim=None):
        """The size of dimension `dim` (traced inside a trace); without
        `dim`, the shape."""
        if dim is None:
            return self.shape
        trace = _active_trace()
        if trace is None:
            return self._tensor.shape[dim]
        self._check()
        if isinstance(dim, bool) or not isinstance(dim, int) or \
                not -self._rank <= dim < self._rank:
            raise TraceError(f"{self._label()} has rank {self._rank}: "
                             f"dimension {dim!r} does not exist")
        dim %= self._rank
        constant = trace.constant(dim, "index")
        return trace.emit(f"memref.dim {trace.capture(self)}, "
                          f"{constant._name} : {self._memref()}", "index")

    @property
    def shape(self):
        """The sizes (traced inside a trace: memref.dim)."""
        if _active_trace() is None:
            return self._tensor.shape
        self._check()
        return _Shape(self)

    # --- what tracing cannot represent ---------------------------------
    # Inside a trace these are errors; outside one they are the tensor's.
    def _refuse(self, what):
        raise TraceError(
            f"{self._label()} is read by indexing it ({self._name}[i, j]) or "
            f"sized with .shape / .size(d) inside a traced function; {what} "
            "is not traced (compute it outside the function and close over "
            "the number)")

    def _outside(self, what):
        """The tensor, outside a trace; the TraceError inside one."""
        if _active_trace() is not None:
            self._refuse(what)
        if self._tensor is None:
            raise TypeError(f"{self._label()} is a placeholder without a "
                            "tensor")
        return self._tensor

    def __len__(self):
        return len(self._outside("len() (a Python int; use .shape[0])"))

    def __iter__(self):
        return iter(self._outside("iterating over it"))

    def __bool__(self):
        return bool(self._outside("its truth value"))

    def __float__(self):
        return float(self._outside("float()"))

    def __int__(self):
        return int(self._outside("int()"))

    def __index__(self):
        return self._outside("using it as a Python int").__index__()

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._outside(f".{name}"), name)

    @classmethod
    def __torch_function__(cls, func, types_, args=(), kwargs=None):
        name = getattr(func, "__name__", repr(func))
        raise TraceError(f"torch.{name} cannot take a captured tensor: "
                         "index it (t[i, j]) inside a traced function, or "
                         "pass .tensor outside one")

    def _binary(self, *args):
        self._refuse("arithmetic on the whole tensor")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _binary
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = _binary
    __mod__ = __rmod__ = __neg__ = __abs__ = _binary
    __lt__ = __le__ = __gt__ = __ge__ = _binary


class _Shape:
    """A captured tensor's shape inside a trace: shape[d] is memref.dim."""

    def __init__(self, wrapper):
        self._wrapper = wrapper

    def __len__(self):
        return self._wrapper._rank

    def __getitem__(self, dim):
        if isinstance(dim, slice):
            return tuple(self[d] for d in range(len(self))[dim])
        return self._wrapper.size(dim)

    def __iter__(self):
        return (self[d] for d in range(len(self)))


def captured(tensor=None, *, dtype=None, rank=None):
    """`tensor` as a score_mod / mask_mod reads it: a wrapper whose
    ``[i, j]`` records a load in the trace (the tensor becomes an argument
    of the traced function). Needed for tensors the function reaches
    through a global or an attribute; a tensor the function closes over is
    captured without it.

    tensor: a torch.Tensor of rank 1 to 4 and dtype float32, float16,
    bfloat16, int32, int64, int8 or bool (on q's device when fa.attention
    runs; any layout, it passes .contiguous()). Without a tensor, dtype (a
    torch dtype or its name, "int32") and rank declare a placeholder: it
    traces (fa.prepare_kernel compiles the kernel) but cannot run. The
    traced text holds the dtype and rank, never the values or sizes: one
    kernel serves every tensor of that dtype and rank. Captured tensors get
    no gradient."""
    if isinstance(tensor, Captured):
        return tensor
    if tensor is None:
        if dtype is None or rank is None:
            raise TypeError("fa.variants.captured: without a tensor, give "
                            "dtype= and rank= (a placeholder)")
        name = _dtype_name(dtype)
    elif _is_tensor(tensor):
        name = _dtype_name(tensor.dtype)
        if dtype is not None and _dtype_name(dtype) != name:
            raise TypeError(f"fa.variants.captured: the tensor is {name}, "
                            f"dtype= says {_dtype_name(dtype)}")
        if rank is not None and rank != len(tensor.shape):
            raise ValueError(f"fa.variants.captured: the tensor has rank "
                             f"{len(tensor.shape)}, rank= says {rank}")
        rank = len(tensor.shape)
    else:
        raise TypeError(f"fa.variants.captured takes a tensor, got "
                        f"{type(tensor).__name__} ({tensor!r})")
    if isinstance(rank, bool) or not isinstance(rank, int):
        raise TypeError(f"fa.variants.captured: rank must be an int, got "
                        f"{rank!r}")
    problem = _kind_problem(name, rank)
    if problem is not None:
        what = f"a tensor of shape {tuple(tensor.shape)}" \
            if tensor is not None else "the placeholder"
        error = TypeError if name not in _CAPTURE_TYPES else ValueError
        raise error(f"fa.variants.captured: {what}: {problem}")
    return Captured(tensor, name, rank)


def _recording(value, name, source):
    """The wrapper a trace reads `value` (a tensor or a Captured, found
    in a closure) through, knowing where to find it again."""
    if isinstance(value, Captured):
        wrapper = Captured(value._tensor, value._dtype, value._rank,
                           name=name if value._name == "t" else value._name,
                           source=source, require=value._require,
                           problem=value._problem)
        return wrapper
    dtype, rank = _dtype_name(value.dtype), len(value.shape)
    return Captured(value, dtype, rank, name=name, source=source,
                    problem=_kind_problem(dtype, rank))


_MAX_DEPTH = 16


def _substitute(value, name, path, active, depth=0):
    """`value` with the tensors reachable through closures replaced by
    recording wrappers: a function is copied with new cells (its code,
    globals and defaults shared), a tuple or list rebuilt; anything else,
    and anything without tensors, is returned as it is."""
    if isinstance(value, Captured) or _is_tensor(value):
        return _recording(value, name, path)
    if depth >= _MAX_DEPTH or id(value) in active:
        return value
    if isinstance(value, types.FunctionType) and value.__closure__:
        active.add(id(value))
        try:
            cells, changed = [], False
            for i, cell in enumerate(value.__closure__):
                try:
                    content = cell.cell_contents
                except ValueError:  # an empty cell
                    cells.append(cell)
                    continue
                new = _substitute(content, value.__code__.co_freevars[i],
                                  path + (("cell", i),), active, depth + 1)
                if new is content:
                    cells.append(cell)
                else:
                    cells.append(types.CellType(new))
                    changed = True
        finally:
            active.discard(id(value))
        if not changed:
            return value
        copy = types.FunctionType(value.__code__, value.__globals__,
                                  value.__name__, value.__defaults__,
                                  tuple(cells))
        copy.__kwdefaults__ = value.__kwdefaults__
        copy.__qualname__ = value.__qualname__
        copy.__dict__.update(value.__dict__)
        return copy
    if type(value) in (tuple, list) and value:
        active.add(id(value))
        try:
            items = [_substitute(item, f"{name}[{j}]",
                                 path + (("item", j),), active, depth + 1)
                     for j, item in enumerate(value)]
        finally:
            active.discard(id(value))
        if all(new is old for new, old in zip(items, value)):
            return value
        return type(value)(items)
    return value


def _follow(fn, path):
    """What `path` (from _substitute) reaches from `fn` now."""
    value = fn
    for step, i in path:
        if step == "cell":
            value = value.__closure__[i].cell_contents
        else:
            value = value[i]
    return value


class _Traced:
    """A traced function: its text and, for each capture argument, where
    the tensor is found (a path through closures, None when it is not in
    one), its name and its (dtype, rank)."""

    __slots__ = ("text", "sources", "names", "kinds")

    def __init__(self, text, wrappers):
        # Not the wrappers: a cached trace keeps no tensor alive.
        self.text = text
        self.sources = tuple(w._source for w in wrappers)
        self.names = tuple(w._name for w in wrappers)
        self.kinds = tuple((w._dtype, w._rank) for w in wrappers)

    @property
    def reusable(self):
        """Whether later calls may find the tensors again through the
        paths (every capture came through a closure)."""
        return all(source is not None for source in self.sources)

    def resolve(self, fn):
        """The captures `fn` holds now, or None when they no longer match
        the text (a different dtype or rank, something else there)."""
        found = []
        for source, name, kind in zip(self.sources, self.names, self.kinds):
            try:
                value = _follow(fn, source)
            except (AttributeError, IndexError, KeyError, TypeError,
                    ValueError):
                return None
            if isinstance(value, Captured):
                if (value._dtype, value._rank) != kind:
                    return None
                found.append((name, value._tensor, value._require))
            elif _is_tensor(value):
                if (_dtype_name(value.dtype), len(value.shape)) != kind:
                    return None
                found.append((name, value, None))
            else:
                return None
        return found


#===------------------------------------------------------------------------===#
# Tracing
#===------------------------------------------------------------------------===#

def _arity(fn, allowed, what):
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return allowed[-1]
    positional = [p for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return allowed[-1]
    if len(positional) not in allowed:
        raise TypeError(f"a {what} takes {' or '.join(map(str, allowed))} "
                        f"arguments, {fn!r} takes {len(positional)}")
    return len(positional)


_INDEX_ARGS = ("%b: index, %h: index, %q_idx: index, %kv_idx: index, "
               "%q_len: index, %kv_len: index")


def _trace(fn, score):
    """(_Traced, captures) of `fn`, the captures as (name, tensor,
    require): a copy of `fn` whose closures hold recording wrappers in
    place of tensors runs on proxy values."""
    what = "score_mod" if score else "mask_mod"
    result_type = "f32" if score else "i1"
    trace = _Trace(fn)
    indices = [_Value(trace, n, "index")
               for n in ("%b", "%h", "%q_idx", "%kv_idx", "%q_len",
                         "%kv_len")]
    if score:
        arity = _arity(fn, (5, 7), what)
        args = [_Value(trace, "%score", "f32")] + indices[:arity - 1]
    else:
        arity = _arity(fn, (4, 6), what)
        args = indices[:arity]
    traced = _substitute(fn, "t", (), set())
    previous = _active_trace()
    _STATE.trace = trace
    try:
        try:
            result = traced(*args)
        except TraceError:
            raise
        except Exception as error:
            # A tensor in the function's globals, indexed with traced
            # values: said as such (torch says it through
            # _Value.__torch_function__).
            for name in getattr(getattr(fn, "__code__", None), "co_names",
                                ()):
                if _is_tensor(getattr(fn, "__globals__", {}).get(name)):
                    raise TraceError(_uncaptured_message(
                        fn.__globals__[name])) from error
            raise
        if result_type == "f32":
            result = _to_float(_lift(trace, result, "f32"))
        else:
            result = _lift(trace, result, "i1")
            if result._type != "i1":
                raise TraceError("a mask_mod returns a condition (a "
                                 f"comparison or a bool), {fn!r} returned "
                                 "a number")
    finally:
        _STATE.trace = previous
    signature = ("%score: f32, " if score else "") + _INDEX_ARGS + "".join(
        f", {trace.capture(w)}: {w._memref()}" for w in trace.captures)
    body = "\n".join(trace.lines)
    text = (f"func.func @{what}({signature}) -> {result_type} {{\n"
            f"{body + chr(10) if body else ''}"
            f"  return {result._name} : {result_type}\n}}\n")
    return (_Traced(text, trace.captures),
            [(w._name, w._tensor, w._require) for w in trace.captures])


# Each function object is traced once (fa.attention asks on every call);
# its captured tensors are found again at each call through the closures'
# paths. Weak keys, so that a traced function can still be freed.
_TRACED = {True: weakref.WeakKeyDictionary(),
           False: weakref.WeakKeyDictionary()}
# The built-ins that make a function per tensor (document, alibi with a
# tensor) share a trace: key (fn._fa_trace_key, score) -> _Traced.
_TEMPLATES = {}


def _traced(fn, score):
    """(text, captures) of score_mod (score=True) or mask_mod `fn`, the
    captures as (name, tensor, require) in argument order, the tensors
    those `fn` holds now. A function whose tensors changed dtype or rank
    (or whose capture is not in a closure) is traced again."""
    cache = _TRACED[score]
    try:
        entry = cache.get(fn)
    except TypeError:  # not weak-referenceable (or unhashable)
        cache = entry = None
    if entry is not None:
        found = entry.resolve(fn)
        if found is not None:
            return entry.text, found
    key = getattr(fn, "_fa_trace_key", None)
    if key is not None:
        entry = _TEMPLATES.get((key, score))
        found = entry.resolve(fn) if entry is not None else None
        if found is not None:
            if cache is not None:
                cache[fn] = entry
            return entry.text, found
    entry, captures = _trace(fn, score)
    if entry.reusable:
        if cache is not None:
            cache[fn] = entry
        if key is not None:
            _TEMPLATES[(key, score)] = entry
    return entry.text, captures


def trace_score_mod(fn):
    """The MLIR text of score_mod `fn` (score, b, h, q_idx, kv_idx[, q_len,
    kv_len]) -> score; traced once per function object."""
    return _traced(fn, True)[0]


def trace_mask_mod(fn):
    """The MLIR text of mask_mod `fn` (b, h, q_idx, kv_idx[, q_len,
    kv_len]) -> bool; traced once per function object."""
    return _traced(fn, False)[0]


def trace_with_captures(fn, kind):
    """(text, tensors) of `fn`, a "score_mod" or a "mask_mod" (kind): the
    MLIR text of one func.func whose trailing memref arguments are the
    tensors `fn` captures, and those tensors as `fn` holds them now, in
    argument order (None for a placeholder). The text is traced once per
    function object; the tensors are read again at each call (a closure
    variable rebound to another tensor of the same dtype and rank gives the
    same text and the new tensor; another dtype or rank traces again)."""
    if kind not in ("score_mod", "mask_mod"):
        raise ValueError(f"fa.variants.trace_with_captures: kind must be "
                         f"'score_mod' or 'mask_mod', got {kind!r}")
    text, captures = _traced(fn, kind == "score_mod")
    return text, [tensor for _, tensor, _ in captures]


#===------------------------------------------------------------------------===#
# Built-in variants
#===------------------------------------------------------------------------===#

@functools.lru_cache(maxsize=None)
def sliding_window(left, right=0):
    """Keys j with i' - left <= j <= i' + right where i' = i + Sk - Sq is
    the query's position among the keys (FlashAttention's window_size =
    (left, right); -1 = unbounded on that side)."""
    left, right = int(left), int(right)

    def mask_mod(b, h, q_idx, kv_idx, q_len, kv_len):
        diagonal = q_idx + (kv_len - q_len)
        keep = True
        if left >= 0:
            keep = kv_idx >= diagonal - left
        if right >= 0:
            upper = kv_idx <= diagonal + right
            keep = upper if keep is True else keep & upper
        return keep
    return mask_mod


@functools.lru_cache(maxsize=None)
def softcap(cap):
    """cap * tanh(score / cap) (Gemma 2's logit softcapping)."""
    cap = float(cap)
    if not cap > 0:
        raise ValueError(f"softcap must be positive, got {cap}")

    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * tanh(score / cap)
    return score_mod


def alibi(slopes):
    """score - slope * |i + Sk - Sq - j| (ALiBi), slope = slopes[h].

    slopes: a list or tuple of numbers, one per query head (constants in
    the kernel: one kernel per set of slopes; a CPU tensor is read once on
    the host as such a list); or a CUDA tensor [Hq] or [B, Hq] (slope
    slopes[b, h]) of float32 (float16 and bfloat16 are read too) that the
    kernel reads: one kernel for any slope values, FlashAttention's
    alibi_slopes. The tensor's shape is checked against q's at each call;
    it gets no gradient."""
    if isinstance(slopes, Captured) or (
            _is_tensor(slopes) and
            getattr(getattr(slopes, "device", None), "type", None) == "cuda"):
        return _alibi_tensor(slopes)
    if hasattr(slopes, "tolist"):
        slopes = slopes.tolist()
    return _alibi(tuple(float(s) for s in slopes))


def _require_slopes(t, q, k):
    batch, heads = q.shape[0], q.shape[1]
    want = (heads,) if t.dim() == 1 else (batch, heads)
    if tuple(t.shape) != want:
        form = "[Hq]" if len(want) == 1 else "[B, Hq]"
        return (f"ALiBi slopes must be {form} = {list(want)} (q is "
                f"[B, Hq, S, D] = {list(q.shape)}), got {list(t.shape)}")
    return None


def _alibi_tensor(slopes):
    """ALiBi with the slopes read from a tensor [Hq] or [B, Hq]."""
    given = captured(slopes)
    if given._dtype not in ("float32", "float16", "bfloat16"):
        raise TypeError(f"fa.variants.alibi: slopes is {given._dtype}; "
                        "ALiBi slopes are float32 (float16, bfloat16)")
    rank = given._rank
    if rank not in (1, 2):
        raise ValueError(f"fa.variants.alibi: slopes must be [Hq] or "
                         f"[B, Hq], got rank {rank}")
    table = Captured(given._tensor, given._dtype, rank, name="slopes",
                     require=_require_slopes)

    def score_mod(score, b, h, q_idx, kv_idx, q_len, kv_len):
        slope = table[h] if rank == 1 else table[b, h]
        distance = abs(q_idx + (kv_len - q_len) - kv_idx)
        return score - slope * distance
    # One trace for every tensor of this dtype and rank.
    score_mod._fa_trace_key = ("alibi", given._dtype, rank)
    return score_mod


@functools.lru_cache(maxsize=None)
def _alibi(slopes):
    if not slopes:
        raise ValueError("alibi needs one slope per query head")

    def score_mod(score, b, h, q_idx, kv_idx, q_len, kv_len):
        slope = slopes[-1]
        for head in range(len(slopes) - 2, -1, -1):
            slope = where(h == head, slopes[head], slope)
        distance = abs(q_idx + (kv_len - q_len) - kv_idx)
        return score - slope * distance
    return score_mod


@functools.lru_cache(maxsize=None)
def prefix_lm(prefix):
    """The first `prefix` keys for every query, and the causal keys after
    them."""
    prefix = int(prefix)

    def mask_mod(b, h, q_idx, kv_idx, q_len, kv_len):
        return (kv_idx < prefix) | (kv_idx <= q_idx + (kv_len - q_len))
    return mask_mod


@functools.lru_cache(maxsize=None)
def chunked(size):
    """Keys in the query's chunk of `size` positions (chunked local
    attention)."""
    size = int(size)

    def mask_mod(b, h, q_idx, kv_idx, q_len, kv_len):
        return (q_idx + (kv_len - q_len)) // size == kv_idx // size
    return mask_mod


_DOCUMENT_TYPES = ("int32", "int64", "int8")


def _require_documents(t, q, k):
    batch, keys = q.shape[0], k.shape[2]
    if t.dim() == 2 and t.shape[0] != batch:
        return (f"doc_ids [B, S] must have B = {batch} rows (q's batch), "
                f"got {list(t.shape)}")
    if t.shape[-1] < keys:
        return (f"doc_ids must cover the Sk = {keys} key positions (query "
                f"row i sits at position i + Sk - Sq), got {list(t.shape)}")
    return None


def document(doc_ids):
    """The scores whose query and key are in the same document (sequences
    packed into one row; FlexAttention's document mask).

    doc_ids: an integer tensor (int32, int64 or int8) [B, S], or [S] for
    every batch row: the document id of each key position. Query row i
    sits at key position i + Sk - Sq (aligned bottom-right, as the causal
    mask and the other built-ins; with Sq == Sk, position i), so S must be
    at least Sk (checked at each call); with Sq > Sk the first Sq - Sk rows
    precede every key and keep none. The kernel reads the ids: one kernel
    for any ids (and any S) of that dtype and rank. Add causal=True for
    causal packing."""
    given = captured(doc_ids)
    if given._dtype not in _DOCUMENT_TYPES:
        raise TypeError(f"fa.variants.document: doc_ids is {given._dtype}; "
                        "document ids are integers (int32, int64, int8)")
    rank = given._rank
    if rank not in (1, 2):
        raise ValueError(f"fa.variants.document: doc_ids must be [B, S] or "
                         f"[S], got rank {rank}")
    ids = Captured(given._tensor, given._dtype, rank, name="doc_ids",
                   require=_require_documents)

    def mask_mod(b, h, q_idx, kv_idx, q_len, kv_len):
        position = q_idx + (kv_len - q_len)
        # Rows before the first key (Sq > Sk) read position 0, and keep
        # nothing.
        row = maximum(position, 0)
        if rank == 2:
            same = ids[b, row] == ids[b, kv_idx]
        else:
            same = ids[row] == ids[kv_idx]
        return same & (position >= 0)
    mask_mod._fa_trace_key = ("document", given._dtype, rank)
    return mask_mod


def _combine(masks, combine):
    def mask_mod(b, h, q_idx, kv_idx, q_len, kv_len):
        result = None
        for mask in masks:
            args = (b, h, q_idx, kv_idx, q_len, kv_len)
            keep = mask(*args[:_arity(mask, (4, 6), "mask_mod")])
            result = keep if result is None else combine(result, keep)
        return result
    return mask_mod


def and_masks(*masks):
    """A mask keeping what every one of `masks` keeps."""
    return _combine(masks, lambda a, b: a & b)


def or_masks(*masks):
    """A mask keeping what any one of `masks` keeps."""
    return _combine(masks, lambda a, b: a | b)
