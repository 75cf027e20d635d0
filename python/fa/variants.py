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

The built-ins: sliding_window(left, right), softcap(cap), alibi(slopes),
prefix_lm(n), chunked(size); and_masks / or_masks combine masks.
"""

import functools
import inspect
import math
import struct
import weakref

__all__ = ["where", "tanh", "exp", "exp2", "log", "log2", "sqrt", "minimum",
           "maximum", "sliding_window", "softcap", "alibi", "prefix_lm",
           "chunked", "and_masks", "or_masks", "trace_score_mod",
           "trace_mask_mod", "TraceError"]


class TraceError(TypeError):
    """Python that a score_mod / mask_mod trace cannot represent."""


class _Trace:
    """The ops of one traced function, as MLIR lines."""

    def __init__(self):
        self.lines = []
        self.count = 0
        self.constants = {}

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


def _trace(fn, score, result_type, what):
    trace = _Trace()
    indices = [_Value(trace, n, "index")
               for n in ("%b", "%h", "%q_idx", "%kv_idx", "%q_len",
                         "%kv_len")]
    if score:
        arity = _arity(fn, (5, 7), what)
        args = [_Value(trace, "%score", "f32")] + indices[:arity - 1]
    else:
        arity = _arity(fn, (4, 6), what)
        args = indices[:arity]
    result = fn(*args)
    if result_type == "f32":
        result = _to_float(_lift(trace, result, "f32"))
    else:
        result = _lift(trace, result, "i1")
        if result._type != "i1":
            raise TraceError("a mask_mod returns a condition (a comparison "
                             f"or a bool), {fn!r} returned a number")
    signature = ("%score: f32, " if score else "") + _INDEX_ARGS
    name = "score_mod" if score else "mask_mod"
    body = "\n".join(trace.lines)
    return (f"func.func @{name}({signature}) -> {result_type} {{\n"
            f"{body + chr(10) if body else ''}"
            f"  return {result._name} : {result_type}\n}}\n")


# Each function object is traced once: fa.attention asks on every call.
# Weak keys, so that a traced function can still be freed.
_TRACED = {True: weakref.WeakKeyDictionary(),
           False: weakref.WeakKeyDictionary()}


def _trace_once(fn, score):
    try:
        return _TRACED[score][fn]
    except KeyError:
        pass
    except TypeError:  # not weak-referenceable: traced every time
        return _trace(fn, score, "f32" if score else "i1",
                      "score_mod" if score else "mask_mod")
    text = _trace(fn, score, "f32" if score else "i1",
                  "score_mod" if score else "mask_mod")
    _TRACED[score][fn] = text
    return text


def trace_score_mod(fn):
    """The MLIR text of score_mod `fn` (score, b, h, q_idx, kv_idx[, q_len,
    kv_len]) -> score; traced once per function object."""
    return _trace_once(fn, True)


def trace_mask_mod(fn):
    """The MLIR text of mask_mod `fn` (b, h, q_idx, kv_idx[, q_len,
    kv_len]) -> bool; traced once per function object."""
    return _trace_once(fn, False)


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
    """score - slopes[h] * |i + Sk - Sq - j| (ALiBi). slopes: one number
    per query head (a list, or a tensor read once on the host)."""
    if hasattr(slopes, "tolist"):
        slopes = slopes.tolist()
    return _alibi(tuple(float(s) for s in slopes))


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
