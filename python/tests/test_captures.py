"""Captured tensors: score_mod / mask_mod functions that read device tensors
by index (document ids, ALiBi slopes, a relative-bias table).

Without torch or a GPU: the tracer's text (the trailing memref arguments,
the loads and their casts, the order of the captures, the score_mod's
before the mask_mod's), its caching (a closure variable rebound to another
tensor of the same dtype and rank keeps the text and gives the new tensor;
another dtype or rank changes the text), every error, and the C layouts of
fa_capture / fa_attention_extras; tensors are stood in for by a small
duck-typed fake and fa.variants.captured placeholders. With the library:
the kernels compile (fa.prepare_kernel). With torch (no GPU needed): the
argument checks and the custom ops' fake implementations and autograd on
meta tensors. With a GPU: document masks, a relative-bias table and ALiBi
from a tensor, forward and backward on the mma strategy (and wgmma on
sm_90), float16 and bfloat16, against float64 references with the masks
and biases materialised in torch, with FlashAttention's criterion; and a
mutation check (other ids give another output from the same kernel).
Run: python3 python/tests/test_captures.py.
"""

import ctypes
import os
import sys
import tempfile
import types
import unittest

_CACHE = tempfile.TemporaryDirectory(prefix="fa-captures-test-")
os.environ["FA_CACHE_DIR"] = _CACHE.name

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fa  # noqa: E402
from fa import variants as V  # noqa: E402

try:
    import torch
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    torch = None
    HAVE_CUDA = False

try:
    fa._library()
    HAVE_LIBRARY = True
except fa.FaError:  # pragma: no cover
    HAVE_LIBRARY = False


class Fake:
    """A stand-in for a torch tensor (no torch needed): a dtype (its name),
    a shape, a data_ptr() and a CUDA device."""

    device = types.SimpleNamespace(type="cuda", index=0)

    def __init__(self, dtype, *shape, pointer=4096, strides=None):
        self.dtype, self.shape, self.pointer = dtype, tuple(shape), pointer
        if strides is None:  # row-major
            strides, step = [0] * len(shape), 1
            for d in range(len(shape) - 1, -1, -1):
                strides[d] = step
                step *= shape[d]
        self.strides = tuple(strides)

    def data_ptr(self):
        return self.pointer

    def stride(self):
        return self.strides

    def dim(self):
        return len(self.shape)

    def __repr__(self):
        return f"Fake({self.dtype}, {self.shape})"


INDEX_ARGS = ("%b: index, %h: index, %q_idx: index, %kv_idx: index, "
              "%q_len: index, %kv_len: index")


def document_mask(doc):
    """The user's document mask over a closure variable (a cell)."""
    return lambda b, h, q_idx, kv_idx: doc[b, q_idx] == doc[b, kv_idx]


class TraceTest(unittest.TestCase):
    def test_document_mask_text(self):
        text = V.trace_mask_mod(document_mask(Fake("int32", 2, 64)))
        self.assertEqual(text, (
            f"func.func @mask_mod({INDEX_ARGS}, %c0: memref<?x?xi32>) -> i1 "
            "{\n"
            "  %v1 = memref.load %c0[%b, %q_idx] : memref<?x?xi32>\n"
            "  %v2 = arith.index_cast %v1 : i32 to index\n"
            "  %v3 = memref.load %c0[%b, %kv_idx] : memref<?x?xi32>\n"
            "  %v4 = arith.index_cast %v3 : i32 to index\n"
            "  %v5 = arith.cmpi eq, %v2, %v4 : index\n"
            "  return %v5 : i1\n"
            "}\n"))

    def test_score_mod_signature(self):
        def make(table):
            return lambda s, b, h, q, kv: s + table[h, q - kv + 15]
        text = V.trace_score_mod(make(Fake("float32", 4, 31)))
        self.assertTrue(text.startswith(
            f"func.func @score_mod(%score: f32, {INDEX_ARGS}, "
            "%c0: memref<?x?xf32>) -> f32 {\n"))
        # The index arithmetic: subi, a constant, addi, then the load.
        self.assertIn("%v1 = arith.subi %q_idx, %kv_idx : index", text)
        self.assertIn("%v2 = arith.constant 15 : index", text)
        self.assertIn("%v3 = arith.addi %v1, %v2 : index", text)
        self.assertIn("%v4 = memref.load %c0[%h, %v3] : memref<?x?xf32>",
                      text)
        self.assertIn("%v5 = arith.addf %score, %v4 : f32", text)
        self.assertNotIn("extf", text)  # float32: read as it is

    def test_element_types_and_casts(self):
        cases = {
            "int32": ("memref<?xi32>", "arith.index_cast %v1 : i32 to index"),
            "int64": ("memref<?xi64>", "arith.index_cast %v1 : i64 to index"),
            "int8": ("memref<?xi8>", "arith.index_cast %v1 : i8 to index"),
            "float16": ("memref<?xf16>", "arith.extf %v1 : f16 to f32"),
            "bfloat16": ("memref<?xbf16>", "arith.extf %v1 : bf16 to f32"),
        }
        for dtype, (memref, cast) in cases.items():
            with self.subTest(dtype=dtype):
                t = Fake(dtype, 8)
                text = V.trace_score_mod(lambda s, b, h, q, kv: s + t[kv])
                self.assertIn(f"%c0: {memref}) -> f32", text)
                self.assertIn(f"%v1 = memref.load %c0[%kv_idx] : {memref}",
                              text)
                self.assertIn(cast, text)

    def test_bool_tensor_is_a_condition(self):
        keep = Fake("bool", 2, 64)
        text = V.trace_mask_mod(lambda b, h, q, kv: keep[b, kv] & (kv <= q))
        self.assertIn("%c0: memref<?x?xi8>) -> i1", text)
        self.assertIn("%v1 = memref.load %c0[%b, %kv_idx] : memref<?x?xi8>",
                      text)
        self.assertIn("%v2 = arith.constant 0 : i8", text)
        self.assertIn("%v3 = arith.cmpi ne, %v1, %v2 : i8", text)
        self.assertIn("arith.andi %v3, %v4 : i1", text)

    def test_ranks_one_to_four(self):
        for rank in range(1, 5):
            t = Fake("float32", *([3] * rank))
            indices = ("b", "h", "q", "kv")[:rank]

            def score(s, b, h, q, kv):
                args = {"b": b, "h": h, "q": q, "kv": kv}
                return s + t[tuple(args[i] for i in indices)]
            text = V.trace_score_mod(score)
            memref = f"memref<{'?x' * rank}f32>"
            names = {"b": "%b", "h": "%h", "q": "%q_idx", "kv": "%kv_idx"}
            operands = ", ".join(names[i] for i in indices)
            self.assertIn(f"%c0: {memref}", text)
            self.assertIn(f"memref.load %c0[{operands}] : {memref}", text)

    def test_capture_order_and_one_argument_per_tensor(self):
        first, second = Fake("int32", 64), Fake("float16", 4)

        def score(s, b, h, q, kv):
            # `second` read first: it is %c0; `first` read twice: one
            # argument.
            return s * second[h] + first[q] - first[kv]
        text = V.trace_score_mod(score)
        self.assertIn(f"{INDEX_ARGS}, %c0: memref<?xf16>, "
                      "%c1: memref<?xi32>) -> f32", text)
        self.assertEqual(text.count("memref.load %c1["), 2)
        _, tensors = V.trace_with_captures(score, "score_mod")
        self.assertEqual(len(tensors), 2)
        self.assertIs(tensors[0], second)
        self.assertIs(tensors[1], first)

    def test_score_mod_captures_then_mask_mods(self):
        table, doc = Fake("float32", 4, 31), Fake("int64", 2, 64)
        captures = []
        texts = fa._variant(
            "test", lambda s, b, h, q, kv: s + table[h, q - kv + 15],
            document_mask(doc), captures)
        self.assertIn("%c0: memref<?x?xf32>", texts[0])
        self.assertIn("%c0: memref<?x?xi64>", texts[1])
        self.assertEqual([t for _, t, _ in captures], [table, doc])
        self.assertEqual(captures[0][0],
                         "the score_mod's captured tensor `table`")
        self.assertEqual(captures[1][0],
                         "the mask_mod's captured tensor `doc`")
        # Both functions may read one tensor: it is passed twice.
        captures = []
        fa._variant("test", lambda s, b, h, q, kv: s + doc[b, kv],
                    document_mask(doc), captures)
        self.assertEqual([t for _, t, _ in captures], [doc, doc])

    def test_rebound_cell_same_dtype_and_rank(self):
        calls = []
        doc = Fake("int32", 2, 64, pointer=1)

        def mask(b, h, q, kv):
            calls.append(1)
            return doc[b, q] == doc[b, kv]
        text, tensors = V.trace_with_captures(mask, "mask_mod")
        self.assertIs(tensors[0], doc)
        # Another tensor of the same dtype and rank (another size too):
        # the same text, the new tensor, no second trace.
        doc = Fake("int32", 3, 100, pointer=2)
        again, tensors = V.trace_with_captures(mask, "mask_mod")
        self.assertEqual(again, text)
        self.assertIs(tensors[0], doc)
        self.assertEqual(len(calls), 1)
        # Another dtype: traced again, another text.
        doc = Fake("int64", 2, 64, pointer=3)
        other, tensors = V.trace_with_captures(mask, "mask_mod")
        self.assertNotEqual(other, text)
        self.assertIn("memref<?x?xi64>", other)
        self.assertIs(tensors[0], doc)
        self.assertEqual(len(calls), 2)
        # Another rank: the function's indexing no longer fits.
        doc = Fake("int64", 64, pointer=4)
        with self.assertRaisesRegex(V.TraceError, "captured tensor `doc` "
                                                  "has rank 1: index it "
                                                  "with exactly 1"):
            V.trace_with_captures(mask, "mask_mod")

    def test_rebound_cell_other_rank_changes_the_text(self):
        slopes = Fake("float32", 4)

        def score(s, b, h, q, kv):
            index = (h,) if slopes.dim() == 1 else (b, h)
            return s - slopes[index] * abs(q - kv)
        one = V.trace_score_mod(score)
        slopes = Fake("float32", 2, 4)
        two = V.trace_score_mod(score)
        self.assertIn("memref<?xf32>", one)
        self.assertIn("memref<?x?xf32>", two)
        self.assertIn("memref.load %c0[%b, %h]", two)

    def test_same_text_for_other_functions_and_data(self):
        # The cache key holds no data: two functions over different ids of
        # one dtype and rank give one text.
        a = V.trace_mask_mod(document_mask(Fake("int32", 2, 64, pointer=1)))
        b = V.trace_mask_mod(document_mask(Fake("int32", 8, 9, pointer=2)))
        self.assertEqual(a, b)
        self.assertNotEqual(a, V.trace_mask_mod(document_mask(
            Fake("int8", 2, 64))))

    def test_nested_closures(self):
        # and_masks holds the user's function in a tuple; its tensor is
        # found (and found again) through both closures.
        doc = Fake("int32", 2, 64, pointer=1)
        window = V.sliding_window(16, 0)
        mask = V.and_masks(lambda b, h, q, kv: doc[b, q] == doc[b, kv],
                           window)
        text, tensors = V.trace_with_captures(mask, "mask_mod")
        self.assertIn("%c0: memref<?x?xi32>", text)
        self.assertIs(tensors[0], doc)
        doc = Fake("int32", 2, 64, pointer=2)
        again, tensors = V.trace_with_captures(mask, "mask_mod")
        self.assertEqual(again, text)
        self.assertIs(tensors[0], doc)

    def test_captured_wrapper_in_a_global(self):
        # A global is read through fa.variants.captured: not found through
        # a closure, so the function is traced at each call (and so sees
        # the global rebound).
        space = {"V": V, "DOC": V.captured(Fake("int32", 2, 64, pointer=1))}
        exec("def mask(b, h, q, kv):\n"
             "    return DOC[b, q] == DOC[b, kv]\n", space)
        text, tensors = V.trace_with_captures(space["mask"], "mask_mod")
        self.assertIn("%c0: memref<?x?xi32>", text)
        self.assertEqual(tensors[0].pointer, 1)
        space["DOC"] = V.captured(Fake("int32", 2, 64, pointer=2))
        again, tensors = V.trace_with_captures(space["mask"], "mask_mod")
        self.assertEqual(again, text)
        self.assertEqual(tensors[0].pointer, 2)

    def test_placeholder(self):
        doc = V.captured(dtype="int32", rank=2)
        self.assertEqual(repr(doc), "fa.variants.captured(t: placeholder of "
                                    "int32, rank 2)")
        text, tensors = V.trace_with_captures(document_mask(doc), "mask_mod")
        self.assertEqual(text, V.trace_mask_mod(document_mask(
            Fake("int32", 2, 64))))
        self.assertEqual(tensors, [None])

    def test_traced_sizes(self):
        table = Fake("float32", 4, 31)

        def score(s, b, h, q, kv):
            center = table.shape[1] // 2
            return s + table[h, q - kv + center] + table.size(0)
        text = V.trace_score_mod(score)
        self.assertIn("%v1 = arith.constant 1 : index", text)
        self.assertIn("%v2 = memref.dim %c0, %v1 : memref<?x?xf32>", text)
        self.assertIn("%v3 = arith.constant 2 : index", text)
        self.assertIn("arith.floordivsi %v2, %v3 : index", text)
        self.assertIn("memref.dim %c0, %v", text)
        self.assertEqual(table.shape, (4, 31))  # the fake itself untouched

    def test_loaded_index_indexes_another_tensor(self):
        doc, offsets = Fake("int32", 64), Fake("int64", 8)
        text = V.trace_mask_mod(
            lambda b, h, q, kv: kv >= offsets[doc[q]])
        self.assertIn("%v1 = memref.load %c0[%q_idx] : memref<?xi32>", text)
        self.assertIn("%v2 = arith.index_cast %v1 : i32 to index", text)
        self.assertIn("%v3 = memref.load %c1[%v2] : memref<?xi64>", text)

    def test_constant_indices(self):
        t = Fake("float32", 4, 4)
        text = V.trace_score_mod(lambda s, b, h, q, kv: s + t[0, 3])
        self.assertIn("%v1 = arith.constant 0 : index", text)
        self.assertIn("%v2 = arith.constant 3 : index", text)
        self.assertIn("memref.load %c0[%v1, %v2]", text)

    def test_document_builtin(self):
        text, tensors = V.trace_with_captures(
            V.document(Fake("int32", 2, 64)), "mask_mod")
        self.assertIn("%c0: memref<?x?xi32>) -> i1", text)
        # Query row i at key position i + Sk - Sq (clamped to 0 for the
        # load; rows before the first key keep nothing).
        self.assertIn("%v1 = arith.subi %kv_len, %q_len : index", text)
        self.assertIn("%v2 = arith.addi %q_idx, %v1 : index", text)
        self.assertIn("memref.load %c0[%b, %v5]", text)
        self.assertIn("memref.load %c0[%b, %kv_idx]", text)
        self.assertIn("arith.cmpi sge, %v2, %v3 : index", text)
        one = V.trace_mask_mod(V.document(Fake("int64", 64)))
        self.assertIn("memref.load %c0[%v5] : memref<?xi64>", one)
        # One text for any ids of a dtype and rank (shared trace).
        self.assertEqual(text,
                         V.trace_mask_mod(V.document(Fake("int32", 4, 9))))
        # Composed: the ids found through and_masks's tuple.
        doc = Fake("int32", 2, 64)
        _, tensors = V.trace_with_captures(
            V.and_masks(V.document(doc), V.sliding_window(8)), "mask_mod")
        self.assertEqual(tensors, [doc])

    def test_alibi_tensor_builtin(self):
        slopes = Fake("float32", 4)
        text, tensors = V.trace_with_captures(V.alibi(slopes), "score_mod")
        self.assertIn("%c0: memref<?xf32>) -> f32", text)
        self.assertIn("%v1 = memref.load %c0[%h] : memref<?xf32>", text)
        self.assertIs(tensors[0], slopes)
        per_row = V.trace_score_mod(V.alibi(Fake("float32", 2, 4)))
        self.assertIn("memref.load %c0[%b, %h] : memref<?x?xf32>", per_row)
        # The list form is unchanged: constants, no arguments.
        constant = V.trace_score_mod(V.alibi([0.5, 0.25]))
        self.assertNotIn("memref", constant)
        self.assertIn("arith.cmpi eq, %h", constant)
        # The same arithmetic after the slope: the tensor's slope in place
        # of the select of constants.
        self.assertEqual(text.split("memref.load")[1].count("mulf"), 1)

    def test_flash_attn_func_tensor_slopes(self):
        # The pair of functions flash_attn_func makes per call for a CUDA
        # tensor of slopes: one trace shared by the calls, each call's
        # tensor.
        first, second = Fake("float32", 2, 4), Fake("float32", 2, 4)
        score_a, mask_a = fa._flash_tensor_variant(50, 0, 5.0, first)
        score_b, _ = fa._flash_tensor_variant(50, 0, 5.0, second)
        text_a, tensors_a = V.trace_with_captures(score_a, "score_mod")
        text_b, tensors_b = V.trace_with_captures(score_b, "score_mod")
        self.assertEqual(text_a, text_b)
        self.assertEqual((tensors_a, tensors_b), ([first], [second]))
        self.assertIn("math.tanh", text_a)
        self.assertIn("memref.load %c0[%b, %h]", text_a)
        self.assertEqual(V.trace_mask_mod(mask_a),
                         V.trace_mask_mod(V.sliding_window(50, 0)))
        without_cap, _ = fa._flash_tensor_variant(-1, -1, 0.0, first)
        self.assertNotIn("math.tanh", V.trace_score_mod(without_cap))

    def test_functions_without_captures_are_unchanged(self):
        text = V.trace_score_mod(V.softcap(30.0))
        self.assertNotIn("memref", text)
        self.assertIn(f"{INDEX_ARGS}) -> f32", text)

    def test_eager_call_outside_a_trace(self):
        # Outside a trace a captured() wrapper is its tensor (a function
        # may be run eagerly to build a reference).
        table = [[1, 2], [3, 4]]

        class Rows:
            dtype, shape = "int32", (2, 2)

            def data_ptr(self):
                return 0

            def __getitem__(self, index):
                return table[index[0]][index[1]]
        wrapped = V.captured(Rows())
        self.assertEqual(wrapped[1, 0], 3)
        self.assertEqual(wrapped.shape, (2, 2))


class CaptureErrorTest(unittest.TestCase):
    def check(self, message, fn, kind="mask_mod", error=V.TraceError):
        with self.assertRaisesRegex(error, message):
            V.trace_with_captures(fn, kind)

    def test_wrong_number_of_indices(self):
        doc = Fake("int32", 2, 64)
        self.check(r"the captured tensor `doc` has rank 2: index it with "
                   r"exactly 2 indices \(doc\[i, j\]\), got 1",
                   lambda b, h, q, kv: doc[q] == doc[kv])
        self.check("got 3", lambda b, h, q, kv: doc[b, h, q] == 0)

    def test_slices_and_friends(self):
        doc = Fake("int32", 2, 64)
        for index, shown in ((slice(None), "slice"), (Ellipsis, "Ellipsis"),
                             (None, "None")):
            with self.subTest(index=shown):
                self.check(rf"`doc`'s index 1 is {shown}.*slices, \.\.\. and "
                           "None are not traced",
                           lambda b, h, q, kv: doc[b, index] == 0)

    def test_float_and_condition_indices(self):
        t = Fake("float32", 64)
        self.check(r"`t`'s index 0 is a float \(1.5\)",
                   lambda s, b, h, q, kv: s + t[1.5], "score_mod")
        self.check("`t`'s index 0 is a float: indices are integers",
                   lambda s, b, h, q, kv: s + t[s], "score_mod")
        self.check("`t`'s index 0 is a float: indices are integers",
                   lambda s, b, h, q, kv: s + t[q / 2], "score_mod")
        self.check("`t`'s index 0 is a condition",
                   lambda s, b, h, q, kv: s + t[q < kv], "score_mod")
        self.check(r"`t`'s index 0 is a bool \(True\)",
                   lambda s, b, h, q, kv: s + t[True], "score_mod")

    def test_negative_index(self):
        t = Fake("float32", 64)
        self.check(r"`t`'s index 0 is -1: captured tensors are not indexed "
                   r"from the end; write t.shape\[0\] - 1",
                   lambda s, b, h, q, kv: s + t[-1], "score_mod")

    def test_tensor_as_index(self):
        t, u = Fake("float32", 64), Fake("int32", 64)
        self.check("`t`'s index 0 is a tensor",
                   lambda s, b, h, q, kv: s + t[u], "score_mod")

    def test_unsupported_dtypes(self):
        for dtype in ("float64", "uint8", "int16", "complex64"):
            with self.subTest(dtype=dtype):
                t = Fake(dtype, 64)
                self.check(f"the captured tensor `t`: dtype {dtype} cannot "
                           "be captured",
                           lambda s, b, h, q, kv: s + t[kv], "score_mod")

    def test_unsupported_ranks(self):
        scalar = Fake("float32")
        self.check(r"`scalar`: a 0-d tensor \(use reshape\(1\) and index "
                   r"\[0\]\) cannot be captured",
                   lambda s, b, h, q, kv: s + scalar[0], "score_mod")
        big = Fake("float32", 2, 2, 2, 2, 2)
        self.check("`big`: rank 5 cannot be captured: captured tensors "
                   "have rank 1 to 4",
                   lambda s, b, h, q, kv: s + big[b, h, q, kv, 0],
                   "score_mod")

    def test_unused_unsupported_tensor_is_no_error(self):
        # A closure tensor the function does not index is no capture.
        doubles = Fake("float64", 3)
        text, tensors = V.trace_with_captures(
            lambda s, b, h, q, kv: s if doubles is not None else s,
            "score_mod")
        self.assertEqual(tensors, [])
        self.assertNotIn("memref", text)

    def test_global_tensor(self):
        space = {"DOC": Fake("int32", 2, 64)}
        exec("def mask(b, h, q, kv):\n"
             "    return DOC[b, q] == DOC[b, kv]\n", space)
        self.check(r"the tensor `DOC` \(a global\) is indexed with traced "
                   r"values but is not captured.*fa.variants.captured\(DOC\)",
                   space["mask"])

    def test_whole_tensor_uses(self):
        t = Fake("float32", 4)
        for fn, what in (
                (lambda s, b, h, q, kv: s + t, "arithmetic on the whole"),
                (lambda s, b, h, q, kv: s + len(t), r"len\(\)"),
                (lambda s, b, h, q, kv: s + float(t), r"float\(\)"),
                (lambda s, b, h, q, kv: s + t.item(), r"\.item"),
                (lambda s, b, h, q, kv: s + sum(t), "iterating")):
            with self.subTest(what=what):
                self.check(f"the captured tensor `t` is read by indexing "
                           f"it .*; {what}", fn, "score_mod")

    def test_dimension_out_of_range(self):
        t = Fake("float32", 4)
        self.check("has rank 1: dimension 1 does not exist",
                   lambda s, b, h, q, kv: s + t.size(1), "score_mod")

    def test_placeholder_outside_a_trace(self):
        with self.assertRaisesRegex(TypeError, "placeholder without a "
                                               "tensor"):
            V.captured(dtype="int32", rank=1)[0]

    def test_captured_arguments(self):
        with self.assertRaisesRegex(TypeError, "without a tensor, give "
                                               "dtype= and rank="):
            V.captured(dtype="int32")
        with self.assertRaisesRegex(TypeError, r"captured takes a tensor, "
                                               r"got list \(\[1, 2\]\)"):
            V.captured([1, 2])
        with self.assertRaisesRegex(TypeError, "the placeholder: dtype "
                                               "float64 cannot be captured"):
            V.captured(dtype="float64", rank=1)
        with self.assertRaisesRegex(ValueError, r"a tensor of shape "
                                                r"\(1, 1, 1, 1, 1\): rank 5"):
            V.captured(Fake("int32", 1, 1, 1, 1, 1))
        with self.assertRaisesRegex(TypeError, "the tensor is int32, dtype= "
                                               "says int64"):
            V.captured(Fake("int32", 4), dtype="int64")
        with self.assertRaisesRegex(ValueError, "rank 1, rank= says 2"):
            V.captured(Fake("int32", 4), rank=2)
        with self.assertRaisesRegex(TypeError, "rank must be an int"):
            V.captured(dtype="int32", rank=2.0)
        wrapped = V.captured(Fake("int32", 4))
        self.assertIs(V.captured(wrapped), wrapped)

    def test_builtin_arguments(self):
        with self.assertRaisesRegex(TypeError, "doc_ids is float32; "
                                               "document ids are integers"):
            V.document(Fake("float32", 2, 64))
        with self.assertRaisesRegex(TypeError, "doc_ids is bool"):
            V.document(Fake("bool", 64))
        with self.assertRaisesRegex(ValueError, r"doc_ids must be \[B, S\] "
                                                r"or \[S\], got rank 3"):
            V.document(Fake("int32", 2, 2, 64))
        with self.assertRaisesRegex(TypeError, "slopes is int32; ALiBi "
                                               "slopes are float32"):
            V.alibi(Fake("int32", 4))
        with self.assertRaisesRegex(ValueError, r"slopes must be \[Hq\] or "
                                                r"\[B, Hq\], got rank 3"):
            V.alibi(Fake("float32", 1, 2, 4))

    def test_at_most_eight_captures(self):
        # kMaxCaptures: the score_mod's and the mask_mod's together.
        with self.assertRaisesRegex(ValueError, "fa.attention: the variant "
                                                "reads 9 captured tensors.*"
                                                "at most 8"):
            fa._check_captures("fa.attention", [("t", None, None)] * 9,
                               None, None)

    def test_bad_kind(self):
        with self.assertRaisesRegex(ValueError, "kind must be 'score_mod' or "
                                                "'mask_mod'"):
            V.trace_with_captures(lambda b, h, q, kv: q >= kv, "mask")


class DescriptorTest(unittest.TestCase):
    """fa_capture and fa_attention_extras as ctypes lays them out (pinned
    against the C header's)."""

    def test_layouts(self):
        if ctypes.sizeof(ctypes.c_void_p) != 8:
            self.skipTest("64-bit layouts")
        self.assertEqual(ctypes.sizeof(fa._Tensor), 72)
        self.assertEqual(ctypes.sizeof(fa._Capture), 80)
        self.assertEqual(fa._Capture.tensor.offset, 0)
        self.assertEqual(fa._Capture.dtype.offset, 72)
        self.assertEqual(fa._Capture.rank.offset, 76)
        self.assertEqual(ctypes.sizeof(fa._Extras), 112)
        self.assertEqual([(name, getattr(fa._Extras, name).offset)
                          for name, _ in fa._Extras._fields_],
                         [("struct_size", 0), ("sinks", 8),
                          ("grad_sinks", 16), ("captures", 24),
                          ("num_captures", 32), ("key_ranges", 40),
                          ("query_ranges", 48), ("kv_splits", 56),
                          ("block_table", 64), ("cache_batch_idx", 72),
                          ("q_descale", 80), ("k_descale", 88),
                          ("v_descale", 96), ("out_dtype", 104)])
        empty = fa._Extras()
        self.assertEqual(empty.struct_size, 112)  # fa_runtime.h's sizeof
        self.assertFalse(empty.captures)  # NULL
        self.assertEqual(empty.num_captures, 0)
        self.assertEqual(empty.kv_splits, 0)  # the runtime's choice

    def test_dtype_codes(self):
        # fa_dtype: FA_F32 0, FA_F16 1, FA_BF16 2, FA_I32 3, FA_I64 4,
        # FA_I8 5 (torch.bool is stored as bytes: FA_I8).
        self.assertEqual({name: code for name, (_, code)
                          in V._CAPTURE_TYPES.items()},
                         {"float32": 0, "float16": 1, "bfloat16": 2,
                          "int32": 3, "int64": 4, "int8": 5, "bool": 5})

    def test_capture_descriptor(self):
        c = fa._describe_capture(Fake("int64", 2, 3, 5, pointer=8192))
        self.assertEqual(c.tensor.data, 8192)
        self.assertEqual(list(c.tensor.sizes), [2, 3, 5, 0])
        self.assertEqual(list(c.tensor.strides), [15, 5, 1, 0])
        self.assertEqual((c.dtype, c.rank), (4, 3))
        c = fa._describe_capture(Fake("bool", 7))
        self.assertEqual(list(c.tensor.strides), [1, 0, 0, 0])
        self.assertEqual((c.dtype, c.rank), (5, 1))
        # The tensor's own strides, not row-major ones made up from the
        # sizes: the runtime then refuses a broadcast view a custom op's
        # caller passes (stride 0 where the size is 2).
        c = fa._describe_capture(Fake("int32", 2, 64, strides=(0, 1)))
        self.assertEqual(list(c.tensor.strides), [0, 1, 0, 0])

    @unittest.skipUnless(HAVE_LIBRARY, "needs libfa_runtime.so")
    def test_extras_with_captures(self):
        first, second = Fake("int32", 2, 64, pointer=1024), \
            Fake("float32", 4, pointer=2048)
        extras = fa._extras(captures=[first, second])
        self.assertFalse(extras.sinks)
        self.assertFalse(extras.grad_sinks)
        self.assertEqual(extras.num_captures, 2)
        self.assertEqual(extras.captures[0].tensor.data, 1024)
        self.assertEqual(extras.captures[0].rank, 2)
        self.assertEqual(extras.captures[1].tensor.data, 2048)
        self.assertEqual(extras.captures[1].dtype, 0)
        self.assertEqual(fa._extras().num_captures, 0)


@unittest.skipUnless(HAVE_LIBRARY, "needs libfa_runtime.so")
class CompileTest(unittest.TestCase):
    """Kernels that read captured tensors compile (no GPU: fa.prepare_kernel
    with placeholders; the text holds only the dtypes and ranks)."""

    def test_builtins_compile(self):
        doc = V.captured(dtype="int32", rank=2)
        table = V.captured(dtype="float32", rank=2)
        cases = [
            {"mask_mod": V.document(doc)},
            {"mask_mod": V.document(V.captured(dtype="int64", rank=1)),
             "causal": True},
            {"score_mod": V.alibi(V.captured(dtype="float32", rank=1))},
            {"score_mod": lambda s, b, h, q, kv: s + table[h, q - kv + 127],
             "mask_mod": V.document(doc)},
        ]
        for kwargs in cases:
            for strategy, head_dim in (("mma", 64), ("wgmma", 128)):
                for backward in (False, True):
                    with self.subTest(kwargs=sorted(kwargs),
                                      strategy=strategy, backward=backward):
                        info = fa.prepare_kernel(head_dim, dtype="float16",
                                                 strategy=strategy,
                                                 backward=backward, **kwargs)
                        self.assertIn("_mod", info["name"])

    def test_block_mask_kernels_compile(self):
        # The kernels that take a block mask's table: the forward's key
        # ranges, the backward's query ranges; another kernel than without.
        doc = V.captured(dtype="int32", rank=2)
        for strategy, head_dim in (("mma", 64), ("wgmma", 128)):
            for backward in (False, True):
                with self.subTest(strategy=strategy, backward=backward):
                    plain = fa.prepare_kernel(
                        head_dim, dtype="float16", strategy=strategy,
                        backward=backward, causal=True,
                        mask_mod=V.document(doc))
                    masked = fa.prepare_kernel(
                        head_dim, dtype="float16", strategy=strategy,
                        backward=backward, causal=True,
                        mask_mod=V.document(doc), block_mask=True)
                    self.assertIn("_blockmask", masked["name"])
                    self.assertNotEqual(masked["key"], plain["key"])
        with self.assertRaisesRegex(fa.FaError, "give a mask_mod with it"):
            fa.prepare_kernel(64, dtype="float16", block_mask=True)

    def test_one_kernel_per_dtype_and_rank(self):
        def key(doc):
            return fa.prepare_kernel(64, dtype="bfloat16", strategy="mma",
                                     mask_mod=V.document(doc))
        first = key(V.captured(dtype="int32", rank=2))
        again = key(V.captured(dtype="int32", rank=2))
        self.assertEqual(again["key"], first["key"])
        self.assertEqual(again["source"], "memory")
        self.assertNotEqual(key(V.captured(dtype="int64", rank=2))["key"],
                            first["key"])
        self.assertNotEqual(key(V.captured(dtype="int32", rank=1))["key"],
                            first["key"])


@unittest.skipUnless(torch is not None, "needs torch")
class ArgumentTest(unittest.TestCase):
    """The captures' checks at a call (CPU tensors: dtype and shape are
    checked before the device)."""

    def setUp(self):
        self.q = torch.zeros(2, 4, 8, 64)   # B = 2, Hq = 4, Sq = 8
        self.k = torch.zeros(2, 2, 16, 64)  # Sk = 16

    def check(self, error, message, mask_mod=None, score_mod=None):
        captures = []
        fa._variant("fa.attention", score_mod, mask_mod, captures)
        with self.assertRaisesRegex(error, message):
            fa._check_captures("fa.attention", captures, self.q, self.k)

    def test_placeholder_cannot_run(self):
        self.check(ValueError, "fa.attention: the mask_mod's captured tensor "
                               "`doc_ids` is a placeholder",
                   V.document(V.captured(dtype="int32", rank=2)))

    def test_not_a_torch_tensor(self):
        self.check(TypeError, "the mask_mod's captured tensor `doc` must be "
                              "a torch.Tensor, got Fake",
                   document_mask(Fake("int32", 2, 16)))

    def test_document_shapes(self):
        self.check(ValueError, r"`doc_ids`: doc_ids \[B, S\] must have B = 2 "
                               r"rows \(q's batch\), got \[3, 16\]",
                   V.document(torch.zeros(3, 16, dtype=torch.int32)))
        self.check(ValueError, r"doc_ids must cover the Sk = 16 key "
                               r"positions .*got \[2, 15\]",
                   V.document(torch.zeros(2, 15, dtype=torch.int32)))
        self.check(ValueError, r"got \[8\]",
                   V.document(torch.zeros(8, dtype=torch.int64)))

    def test_alibi_shapes(self):
        self.check(ValueError, r"ALiBi slopes must be \[Hq\] = \[4\] .*got "
                               r"\[3\]",
                   score_mod=V.alibi(V.captured(torch.zeros(3))))
        self.check(ValueError, r"\[B, Hq\] = \[2, 4\] .*got \[4, 2\]",
                   score_mod=V.alibi(V.captured(torch.zeros(4, 2))))

    def test_empty(self):
        t = torch.zeros(0, dtype=torch.int32)
        self.check(ValueError, r"captured tensor `t` is empty \(\[0\]\)",
                   lambda b, h, q, kv: t[kv] == 0)

    def test_cpu_tensor(self):
        self.check(ValueError, "`doc_ids` must be a CUDA tensor",
                   V.document(torch.zeros(2, 16, dtype=torch.int32)))

    def test_requires_grad(self):
        table = torch.zeros(4, 31, requires_grad=True)
        captures = []
        fa._variant("fa.attention", lambda s, b, h, q, kv:
                    s + table[h, q - kv + 15], None, captures)
        # Dtype and shape pass; the device check comes first on CPU.
        with self.assertRaisesRegex(ValueError, "must be a CUDA tensor"):
            fa._check_captures("fa.attention", captures, self.q, self.k)

    def test_torch_tensor_in_a_global(self):
        space = {"DOC": torch.zeros(2, 16, dtype=torch.int32)}
        exec("def mask(b, h, q, kv):\n"
             "    return DOC[b, q] == DOC[b, kv]\n", space)
        with self.assertRaisesRegex(V.TraceError, "the tensor `DOC` \\(a "
                                                  "global\\) is indexed"):
            V.trace_mask_mod(space["mask"])

    def test_torch_functions_on_traced_values(self):
        with self.assertRaisesRegex(V.TraceError, "torch.tanh cannot compute "
                                                  "on a traced value"):
            V.trace_score_mod(lambda s, b, h, q, kv: torch.tanh(s))

    def test_torch_closure_tensors(self):
        # The production path: real torch tensors in closures (CPU is fine
        # for tracing).
        doc = torch.zeros(2, 16, dtype=torch.int32)
        flags = torch.zeros(16, dtype=torch.bool)
        table = torch.zeros(4, 31, dtype=torch.bfloat16)

        def mask(b, h, q, kv):
            return (doc[b, q] == doc[b, kv]) & flags[kv]
        text, tensors = V.trace_with_captures(mask, "mask_mod")
        self.assertIn("%c0: memref<?x?xi32>, %c1: memref<?xi8>", text)
        self.assertIs(tensors[0], doc)
        self.assertIs(tensors[1], flags)
        text = V.trace_score_mod(
            lambda s, b, h, q, kv: s + table[h, q - kv + 15])
        self.assertIn("arith.extf %v4 : bf16 to f32", text)
        doc = torch.ones(2, 16, dtype=torch.int32)
        _, tensors = V.trace_with_captures(mask, "mask_mod")
        self.assertIs(tensors[0], doc)
        for bad, message in ((torch.zeros(4, dtype=torch.float64),
                              "dtype float64 cannot be captured"),
                             (torch.zeros(4, dtype=torch.uint8),
                              "dtype uint8 cannot be captured"),
                             (torch.zeros(()), "a 0-d tensor")):
            with self.subTest(dtype=bad.dtype, shape=bad.shape):
                with self.assertRaisesRegex(V.TraceError, message):
                    V.trace_score_mod(lambda s, b, h, q, kv: s + bad[0])


def _meta(*shape, dtype=None, grad=False):
    dtype = dtype or torch.float16
    if not dtype.is_floating_point:
        return torch.zeros(*shape, device="meta", dtype=dtype)
    return torch.randn(*shape, device="meta", dtype=dtype,
                       requires_grad=grad)


@unittest.skipUnless(torch is not None, "needs torch")
class FakeOpTest(unittest.TestCase):
    """The custom ops take the captures (Tensor[]?, last): their fake
    implementations and the autograd formula, on meta tensors."""

    ARGS = (True, 0.0, 0, 0, 0, "auto", 0, False)

    def test_schemas(self):
        for op in (torch.ops.fa.attention_forward,
                   torch.ops.fa.attention_backward):
            schema = str(op.default._schema)
            self.assertIn("Tensor? sinks=None, Tensor[]? captures=None, "
                          "Tensor[]? block_mask=None)", schema)

    def test_forward_and_backward_take_captures(self):
        q, k, v = _meta(2, 8, 16, 64), _meta(2, 2, 24, 64), _meta(2, 2, 24, 64)
        doc = _meta(2, 24, dtype=torch.int32)
        for extra in ((), ("", "", None, [doc]),
                      ("", "", _meta(8, dtype=torch.float32), [doc, doc])):
            o, lse = torch.ops.fa.attention_forward(q, k, v, *self.ARGS,
                                                    *extra)
            self.assertEqual(o.shape, q.shape)
            self.assertEqual(lse.shape, (2, 8, 16))
            grads = torch.ops.fa.attention_backward(
                torch.empty_like(o), q, k, v, o, lse, True, 0.0, False, 0, 0,
                0, "auto", 0, *extra)
            self.assertEqual(grads[0].shape, q.shape)

    def test_autograd_saves_the_captures(self):
        q = _meta(2, 8, 16, 64, grad=True)
        k, v = _meta(2, 2, 24, 64, grad=True), _meta(2, 2, 24, 64, grad=True)
        doc = _meta(2, 24, dtype=torch.int32)
        table = _meta(8, 47, dtype=torch.float32)
        o, _ = torch.ops.fa.attention_forward(q, k, v, *self.ARGS, "", "",
                                              None, [table, doc])
        # q, k, v, O, LSE, the sinks (None), then the captures.
        saved = o.grad_fn.saved_tensors
        self.assertEqual(len(saved), 8)
        self.assertIsNone(saved[5])
        self.assertIs(saved[6], table)
        self.assertIs(saved[7], doc)
        o.sum().backward()
        for t in (q, k, v):
            self.assertEqual(t.grad.shape, t.shape)
        # A capture that requires grad gets none.
        table = _meta(8, 47, dtype=torch.float32, grad=True)
        o, _ = torch.ops.fa.attention_forward(q, k, v, *self.ARGS, "", "",
                                              None, [table])
        o.sum().backward()
        self.assertIsNone(table.grad)

    def test_autograd_saves_the_block_mask(self):
        # The block mask's two tables follow the captures (None or a list)
        # among the saved tensors and reach the backward op.
        q = _meta(2, 8, 16, 64, grad=True)
        k, v = _meta(2, 2, 24, 64, grad=True), _meta(2, 2, 24, 64, grad=True)
        doc = _meta(2, 24, dtype=torch.int32)
        tables = [_meta(2, 1, 1, 4, dtype=torch.int32),
                  _meta(2, 1, 2, 4, dtype=torch.int32)]
        for captures, count in (([doc], 1), (None, 0)):
            o, _ = torch.ops.fa.attention_forward(q, k, v, *self.ARGS, "",
                                                  "", None, captures, tables)
            saved = o.grad_fn.saved_tensors
            self.assertEqual(len(saved), 6 + count + 2)
            self.assertIs(saved[6 + count], tables[0])
            self.assertIs(saved[7 + count], tables[1])
            o.sum().backward()
            for t in (q, k, v):
                self.assertEqual(t.grad.shape, t.shape)
                t.grad = None

    def test_autograd_without_captures_is_unchanged(self):
        for extra in ((), ("", ""), ("", "", None)):
            q = _meta(1, 4, 16, 64, grad=True)
            k, v = _meta(1, 4, 16, 64, grad=True), _meta(1, 4, 16, 64)
            o, _ = torch.ops.fa.attention_forward(q, k, v, *self.ARGS, *extra)
            o.sum().backward()
            self.assertEqual(q.grad.shape, q.shape)
            self.assertIsNone(v.grad)


# --- on the GPU --------------------------------------------------------------

def _strategies():
    """The tensor-core strategies this device runs: mma (sm_80+), and wgmma
    on sm_90 (Hopper)."""
    found = ["mma"]
    if torch.cuda.get_device_capability() == (9, 0):
        found.append("wgmma")
    return found


def _max_error(got, want):
    return (got.double() - want.double()).abs().max().item()


def _bound(torch_err, want):
    """FlashAttention's criterion (test_sinks.py's): 2x torch's own error at
    the inputs' precision, plus a floor for values torch gets exact to the
    last bits (float32 rounding of sums of the value's size)."""
    return 2 * torch_err + 1e-5 * max(1.0, want.abs().max().item()) + 1e-6


def _reference(q, k, v, scale, causal=False, bias=None, keep=None,
               dtype=None):
    """Attention in torch ops, differentiable, in `dtype` (float64 for the
    reference): the scaled scores plus `bias` (broadcast to [B, H, Sq,
    Sk]), the scores `keep` (broadcast likewise) or the bottom-right causal
    mask drops set to -inf, softmax, times V. Rows that keep no key give 0
    (and zero gradients, not NaN)."""
    dtype = dtype or torch.float64
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if bias is not None:
        s = s + bias.to(dtype)
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(sk, device=q.device)[None, :]
    kept = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if causal:
        kept = kept & (j <= i + (sk - sq))
    if keep is not None:
        kept = kept & keep
    kept = kept.expand_as(s)
    has_key = kept.any(dim=-1, keepdim=True)
    s = torch.where(kept, s, torch.full_like(s, float("-inf")))
    s = torch.where(has_key, s, torch.zeros_like(s))
    p = torch.softmax(s, dim=-1) * has_key
    return torch.matmul(p, v)


def _document_ids(batch, length, seed, dtype=None):
    """[batch, length] document ids, documents of random lengths with
    several of length 1 (ids increasing along a row)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([1, 1, 1, 2, 3, 7, 16, 33, 64, 100])
    rows = []
    for _ in range(batch):
        ids, doc = [], 0
        while len(ids) < length:
            n = int(lengths[torch.randint(len(lengths), (1,),
                                          generator=gen)])
            ids += [doc] * n
            doc += 1
        rows.append(ids[:length])
    return torch.tensor(rows, dtype=dtype or torch.int32, device="cuda")


def _document_keep(doc, sq, sk):
    """The document mask, materialised: [B, 1, Sq, Sk] (doc [B, S] or [S]);
    query row i at key position i + Sk - Sq; rows before the first key
    keep nothing."""
    doc = doc.long()
    if doc.dim() == 1:
        doc = doc[None]
    position = torch.arange(sq, device=doc.device) + (sk - sq)
    query_doc = doc[:, position.clamp(min=0)]            # [B, Sq]
    key_doc = doc[:, :sk]                                # [B, Sk]
    keep = query_doc[:, :, None] == key_doc[:, None, :]
    keep = keep & (position >= 0)[None, :, None]
    return keep[:, None]


def _ranges(keep, rows):
    """The exact block mask tables of a materialised mask keep [B, 1, Sq,
    Sk] (bool): per 16 rows (rows=True: the keys kept, [Sk, 0) when none)
    or per 16 keys (the rows that keep one, [Sq, 0)), then the range of the
    16 x 16 squares kept whole (emptied to [first, 0) when they are not
    consecutive), as int32 [B, 1, groups, 4]."""
    keep = keep[:, 0]
    if not rows:
        keep = keep.transpose(1, 2)
    batch, length, other = keep.shape
    groups = (length + 15) // 16
    squares = (other + 15) // 16
    padded = torch.zeros(batch, groups * 16, other, dtype=torch.bool,
                         device=keep.device)
    padded[:, :length] = keep
    any_kept = padded.view(batch, groups, 16, other).any(dim=2)
    index = torch.arange(other, device=keep.device)
    first = torch.where(any_kept, index, other).min(dim=-1).values
    end = torch.where(any_kept, index + 1, 0).max(dim=-1).values
    # Whole squares: every score inside Sq x Sk kept (padding counts as
    # kept).
    full = torch.ones(batch, groups * 16, squares * 16, dtype=torch.bool,
                      device=keep.device)
    full[:, :length, :other] = keep
    whole = full.view(batch, groups, 16, squares, 16).all(dim=4).all(dim=2)
    start = torch.arange(squares, device=keep.device) * 16
    whole_first = torch.where(whole, start, other).min(dim=-1).values
    whole_end = torch.where(whole, (start + 16).clamp(max=other),
                            0).max(dim=-1).values
    spanned = (whole_end + 15) // 16 - whole_first // 16
    count = whole.sum(dim=-1)
    whole_end = torch.where((count > 0) & (spanned != count), 0, whole_end)
    return torch.stack([first, end, whole_first, whole_end],
                       dim=-1)[:, None].to(torch.int32)


@unittest.skipUnless(HAVE_CUDA and HAVE_LIBRARY,
                     "needs torch with CUDA and libfa_runtime.so")
class GpuBlockMaskTest(unittest.TestCase):
    """fa.block_mask: its tables against ones computed here from the
    materialised mask, and attention that skips tiles by them (forward and
    backward, the functions and the autograd op) against float64."""

    SHAPES = [(2, 4, 2, 300, 700, 64),     # Sq < Sk
              (1, 4, 1, 700, 300, 64),     # Sq > Sk: rows before keys
              (1, 4, 4, 1024, 1024, 128)]

    def test_tables(self):
        for index, (b, hq, _, sq, sk, _) in enumerate(self.SHAPES):
            doc = _document_ids(b, sk, seed=index)
            keep = _document_keep(doc, sq, sk)
            for causal in (False, True):
                kept = keep
                if causal:
                    i = torch.arange(sq, device="cuda")[:, None]
                    j = torch.arange(sk, device="cuda")[None, :]
                    kept = keep & (j <= i + (sk - sq))
                for heads in (None, hq):
                    with self.subTest(shape=(b, sq, sk), causal=causal,
                                      heads=heads):
                        bm = fa.block_mask(V.document(doc), b, heads, sq, sk,
                                           causal=causal)
                        repeat = 1 if heads is None else hq
                        self.assertTrue(torch.equal(
                            bm.key_ranges,
                            _ranges(kept, True).expand(b, repeat, -1, -1)))
                        self.assertTrue(torch.equal(
                            bm.query_ranges,
                            _ranges(kept, False).expand(b, repeat, -1, -1)))

    def test_document_attention(self):
        for strategy in _strategies():
            for dtype in (torch.float16, torch.bfloat16):
                for index, shape in enumerate(self.SHAPES):
                    for causal in (False, True):
                        b, hq, hkv, sq, sk, d = shape
                        doc = _document_ids(b, sk, seed=index)
                        keep = _document_keep(doc, sq, sk)
                        bm = fa.block_mask(V.document(doc), b, None, sq, sk,
                                           causal=causal)
                        name = (f"{strategy} {dtype} {shape} "
                                f"{'causal' if causal else 'full'}")
                        with self.subTest(name=name):
                            torch.manual_seed(index)
                            q = torch.randn(b, hq, sq, d, device="cuda",
                                            dtype=dtype)
                            k = torch.randn(b, hkv, sk, d, device="cuda",
                                            dtype=dtype)
                            v = torch.randn_like(k)
                            # The mask_mod comes with the block mask.
                            out, lse = fa.attention(
                                q, k, v, causal=causal, block_mask=bm,
                                strategy=strategy, return_lse=True)
                            grad = torch.randn_like(out)
                            dq, dk, dv = fa.attention_backward(
                                grad, q, k, v, out, lse, causal=causal,
                                block_mask=bm, strategy=strategy)
                            leaves = [t.double().requires_grad_()
                                      for t in (q, k, v)]
                            want = _reference(*leaves, d ** -0.5, causal,
                                              keep=keep)
                            exact = (want,) + torch.autograd.grad(
                                want, leaves, grad.double())
                            low = [t.clone().requires_grad_()
                                   for t in (q, k, v)]
                            theirs = _reference(*low, d ** -0.5, causal,
                                                keep=keep, dtype=dtype)
                            own = (theirs,) + torch.autograd.grad(
                                theirs, low, grad)
                            GpuCaptureTest.check(self, name,
                                                 (out, dq, dk, dv), exact,
                                                 own)

    def test_through_autograd(self):
        # The custom op path: the tables travel with the captures and the
        # backward reads the query ranges.
        b, hq, hkv, sq, sk, d = 2, 4, 2, 256, 256, 64
        doc = _document_ids(b, sk, seed=5)
        bm = fa.block_mask(V.document(doc), b, None, sq, sk, causal=True)
        torch.manual_seed(5)
        q, k, v = (torch.randn(b, h, s, d, device="cuda",
                               dtype=torch.bfloat16, requires_grad=True)
                   for h, s in ((hq, sq), (hkv, sk), (hkv, sk)))
        out = fa.attention(q, k, v, causal=True,
                           mask_mod=V.document(doc), block_mask=bm)
        grad = torch.randn_like(out)
        out.backward(grad)
        plain = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        want = fa.attention(*plain, causal=True, mask_mod=V.document(doc))
        want.backward(grad)
        for got, expected in zip((out, q.grad, k.grad, v.grad),
                                 (want, *(t.grad for t in plain))):
            self.assertLessEqual(_max_error(got, expected), 2e-2)

    def test_deterministic_backward(self):
        # deterministic=True reads both tables: dQ has the same bits in
        # every run (and with the key ranges widened to every key, which
        # adds only exact zeros), and matches float64 as the other mode.
        for strategy in _strategies():
            for causal in (False, True):
                b, hq, hkv, sq, sk, d = 1, 4, 2, 1024, 1024, 128
                doc = _document_ids(b, sk, seed=7)
                keep = _document_keep(doc, sq, sk)
                bm = fa.block_mask(V.document(doc), b, None, sq, sk,
                                   causal=causal)
                dtype = torch.bfloat16
                name = f"{strategy} {'causal' if causal else 'full'}"
                with self.subTest(name=name):
                    torch.manual_seed(7)
                    q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype)
                    k = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype)
                    v = torch.randn_like(k)
                    out, lse = fa.attention(q, k, v, causal=causal,
                                            block_mask=bm, strategy=strategy,
                                            return_lse=True)
                    grad = torch.randn_like(out)
                    runs = [fa.attention_backward(
                        grad, q, k, v, out, lse, causal=causal,
                        block_mask=bm, strategy=strategy, deterministic=True)
                        for _ in range(3)]
                    for again in runs[1:]:
                        for got, first in zip(again, runs[0]):
                            self.assertTrue(torch.equal(got, first), name)
                    wide = fa.BlockMask(bm.mask_mod, bm.text, bm.causal,
                                        bm.key_ranges.clone(),
                                        bm.query_ranges, bm.shape)
                    wide.key_ranges[..., 0] = 0
                    wide.key_ranges[..., 1] = sk
                    widened = fa.attention_backward(
                        grad, q, k, v, out, lse, causal=causal,
                        block_mask=wide, strategy=strategy,
                        deterministic=True)
                    self.assertTrue(torch.equal(widened[0], runs[0][0]),
                                    name + ": the key ranges widened")
                    leaves = [t.double().requires_grad_() for t in (q, k, v)]
                    want = _reference(*leaves, d ** -0.5, causal, keep=keep)
                    exact = (want,) + torch.autograd.grad(
                        want, leaves, grad.double())
                    low = [t.clone().requires_grad_() for t in (q, k, v)]
                    theirs = _reference(*low, d ** -0.5, causal, keep=keep,
                                        dtype=dtype)
                    own = (theirs,) + torch.autograd.grad(theirs, low, grad)
                    GpuCaptureTest.check(self, name, (out, *runs[0]), exact,
                                         own)

    def test_errors(self):
        b, sq, sk = 1, 64, 64
        doc = _document_ids(b, sk, seed=1)
        bm = fa.block_mask(V.document(doc), b, None, sq, sk, causal=True)
        q = torch.randn(b, 2, sq, 64, device="cuda", dtype=torch.float16)
        with self.assertRaisesRegex(ValueError, "causal=True, the call has "
                                                "causal=False"):
            fa.attention(q, q, q, block_mask=bm)
        with self.assertRaisesRegex(ValueError, "another mask_mod"):
            fa.attention(q, q, q, causal=True, block_mask=bm,
                         mask_mod=V.sliding_window(8))
        longer = torch.randn(b, 2, 80, 64, device="cuda", dtype=torch.float16)
        with self.assertRaisesRegex(ValueError, "Q_LEN=64, KV_LEN=64; the "
                                                "call has .*Q_LEN=80"):
            fa.attention(longer, longer, longer, causal=True, block_mask=bm)
        with self.assertRaisesRegex(TypeError, "must be an fa.BlockMask"):
            fa.attention(q, q, q, block_mask=bm.key_ranges)
        with self.assertRaisesRegex(ValueError, "give the mask_mod"):
            fa.block_mask(None, b, None, sq, sk)


@unittest.skipUnless(HAVE_CUDA and HAVE_LIBRARY,
                     "needs torch with CUDA and libfa_runtime.so")
class GpuCaptureTest(unittest.TestCase):
    """Forward and backward with captured tensors against float64."""

    def run_case(self, dtype, strategy, shape, causal, score_mod=None,
                 mask_mod=None, bias=None, keep=None, seed=0):
        """(ours, exact, torch's own) for O, dQ, dK, dV: the forward and the
        backward on `strategy` (fa.attention, fa.attention_backward)."""
        torch.manual_seed(seed)
        b, hq, hkv, sq, sk, d = shape
        q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype)
        k = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype)
        v = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype)
        scale = d ** -0.5
        out, lse = fa.attention(q, k, v, causal=causal, score_mod=score_mod,
                                mask_mod=mask_mod, strategy=strategy,
                                return_lse=True)
        grad = torch.randn_like(out)
        dq, dk, dv = fa.attention_backward(
            grad, q, k, v, out, lse, causal=causal, score_mod=score_mod,
            mask_mod=mask_mod, strategy=strategy)
        ours = (out, dq, dk, dv)
        leaves = [t.double().requires_grad_() for t in (q, k, v)]
        want = _reference(*leaves, scale, causal, bias, keep)
        exact = (want,) + torch.autograd.grad(want, leaves, grad.double())
        low = [t.clone().requires_grad_() for t in (q, k, v)]
        theirs = _reference(*low, scale, causal, bias, keep, dtype=dtype)
        own = (theirs,) + torch.autograd.grad(theirs, low, grad)
        return ours, exact, own

    def check(self, name, ours, exact, own):
        for label, got, want, torch_got in zip(("O", "dQ", "dK", "dV"), ours,
                                               exact, own):
            self.assertEqual(got.shape, want.shape, f"{name} {label}")
            self.assertFalse(torch.isnan(got).any().item(), f"{name} {label}")
            err = _max_error(got, want)
            bound = _bound(_max_error(torch_got, want), want)
            self.assertLessEqual(err, bound, f"{name} {label}: {err:.3e} > "
                                             f"{bound:.3e}")

    def test_document_mask(self):
        shapes = [(2, 4, 2, 300, 300, 64),    # Sq == Sk
                  (2, 4, 4, 257, 257, 128),   # Sq == Sk, D = 128
                  (2, 4, 2, 100, 300, 64),    # Sq < Sk (a KV cache)
                  (2, 4, 1, 300, 200, 64)]    # Sq > Sk: rows before keys
        for strategy in _strategies():
            for dtype in (torch.float16, torch.bfloat16):
                for index, shape in enumerate(shapes):
                    for causal in (False, True):
                        doc = _document_ids(shape[0], shape[4], seed=index)
                        name = (f"{strategy} {dtype} {shape} "
                                f"{'causal' if causal else 'full'}")
                        with self.subTest(name=name):
                            self.check(name, *self.run_case(
                                dtype, strategy, shape, causal,
                                mask_mod=V.document(doc),
                                keep=_document_keep(doc, shape[3],
                                                    shape[4])))

    def test_document_ids_of_other_types_and_ranks(self):
        shape = (2, 4, 2, 200, 200, 64)
        doc = _document_ids(2, 200, seed=7, dtype=torch.int64)
        shared = _document_ids(1, 200, seed=8)[0]  # [S]: every batch row
        for strategy in _strategies():
            for ids in (doc, shared, doc.to(torch.int8)):
                name = f"{strategy} {ids.dtype} {list(ids.shape)}"
                with self.subTest(name=name):
                    self.check(name, *self.run_case(
                        torch.bfloat16, strategy, shape, True,
                        mask_mod=V.document(ids),
                        keep=_document_keep(ids, 200, 200)))

    def test_user_document_mask_and_window(self):
        # The user's own closure, combined with a window by and_masks.
        doc = _document_ids(2, 256, seed=3)
        mask = V.and_masks(lambda b, h, q_idx, kv_idx:
                           doc[b, q_idx] == doc[b, kv_idx],
                           V.sliding_window(64, 0))
        i = torch.arange(256, device="cuda")[:, None]
        j = torch.arange(256, device="cuda")[None, :]
        keep = _document_keep(doc, 256, 256) & (j >= i - 64) & (j <= i)
        for strategy in _strategies():
            with self.subTest(strategy=strategy):
                self.check(strategy, *self.run_case(
                    torch.float16, strategy, (2, 4, 2, 256, 256, 64), False,
                    mask_mod=mask, keep=keep))

    def test_relative_bias_table(self):
        for strategy in _strategies():
            for dtype in (torch.float16, torch.bfloat16):
                for s, d in ((300, 64), (128, 128)):
                    for causal in (False, True):
                        heads = 4
                        gen = torch.Generator(device="cuda").manual_seed(s)
                        table = torch.randn(heads, 2 * s - 1, device="cuda",
                                            generator=gen)

                        def score_mod(score, b, h, q_idx, kv_idx):
                            return score + table[h, q_idx - kv_idx + (s - 1)]
                        i = torch.arange(s, device="cuda")[:, None]
                        j = torch.arange(s, device="cuda")[None, :]
                        bias = table[:, i - j + (s - 1)][None]  # [1,H,S,S]
                        name = f"{strategy} {dtype} S={s} D={d} {causal}"
                        with self.subTest(name=name):
                            self.check(name, *self.run_case(
                                dtype, strategy, (2, heads, 2, s, s, d),
                                causal, score_mod=score_mod, bias=bias))

    def test_score_mod_and_mask_mod_together(self):
        # The kernel takes the score_mod's captures, then the mask_mod's:
        # a bias table (float32) and document ids (int32) in one call.
        s, heads = 200, 4
        doc = _document_ids(2, s, seed=12)
        table = torch.randn(heads, 2 * s - 1, device="cuda")

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + table[h, q_idx - kv_idx + (s - 1)]
        i = torch.arange(s, device="cuda")[:, None]
        j = torch.arange(s, device="cuda")[None, :]
        bias = table[:, i - j + (s - 1)][None]
        for strategy in _strategies():
            for causal in (False, True):
                name = f"{strategy} {'causal' if causal else 'full'}"
                with self.subTest(name=name):
                    self.check(name, *self.run_case(
                        torch.bfloat16, strategy, (2, heads, 2, s, s, 64),
                        causal, score_mod=score_mod,
                        mask_mod=V.document(doc), bias=bias,
                        keep=_document_keep(doc, s, s)))

    def test_alibi_tensor_matches_the_list(self):
        slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625], device="cuda")
        for strategy in _strategies():
            for dtype in (torch.float16, torch.bfloat16):
                torch.manual_seed(5)
                q, k, v = (torch.randn(2, 4, 200, 64, device="cuda",
                                       dtype=dtype) for _ in range(3))
                grad = torch.randn_like(q)
                results = []
                for mod in (V.alibi(slopes), V.alibi(slopes.tolist())):
                    out, lse = fa.attention(q, k, v, causal=True,
                                            score_mod=mod, strategy=strategy,
                                            return_lse=True)
                    results.append((out, lse) + fa.attention_backward(
                        grad, q, k, v, out, lse, causal=True, score_mod=mod,
                        strategy=strategy))
                for label, a, b in zip(("O", "LSE", "dQ", "dK", "dV"),
                                       *results):
                    # The same arithmetic (the slope from memory instead of
                    # a select of constants): equal up to the last bits (dQ
                    # is added in any order).
                    unit = 2.5e-6 if a.dtype == torch.float32 else \
                        torch.finfo(a.dtype).eps
                    tolerance = 4 * unit * max(1.0, b.abs().max().item())
                    self.assertLessEqual(_max_error(a, b), tolerance,
                                         f"{strategy} {dtype} {label}")

    def test_alibi_slopes_per_batch_row(self):
        # [B, Hq] slopes, different per row (FlashAttention's alibi_slopes),
        # through flash_attn_func ([B, S, H, D]) and autograd.
        slopes = torch.tensor([[0.5, 0.25, 0.125, 0.0625],
                               [1.0, 0.3, 0.05, 0.01]], device="cuda")
        torch.manual_seed(6)
        q, k, v = (torch.randn(2, 150, 4, 64, device="cuda",
                               dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        out = fa.flash_attn_func(q, k, v, causal=True, alibi_slopes=slopes)
        grad = torch.randn_like(out)
        ours = (out,) + torch.autograd.grad(out, (q, k, v), grad)
        i = torch.arange(150, device="cuda")[:, None]
        j = torch.arange(150, device="cuda")[None, :]
        bias = -slopes[:, :, None, None] * (i - j).abs()   # [B, H, S, S]
        runs = []
        for dtype in (torch.float64, torch.bfloat16):
            leaves = [t.detach().to(dtype).transpose(1, 2).requires_grad_()
                      for t in (q, k, v)]
            o = _reference(*leaves, 64 ** -0.5, True, bias, dtype=dtype)
            g = grad.to(dtype).transpose(1, 2)
            runs.append((o.transpose(1, 2),) + tuple(
                x.transpose(1, 2) for x in torch.autograd.grad(o, leaves, g)))
        self.check("flash_attn_func [B, H] slopes", ours, *runs)

    def test_autograd_saves_the_captures(self):
        doc = _document_ids(2, 200, seed=9)
        torch.manual_seed(2)
        q, k, v = (torch.randn(2, 4, 200, 64, device="cuda",
                               dtype=torch.float16, requires_grad=True)
                   for _ in range(3))
        out = fa.attention(q, k, v, causal=True, mask_mod=V.document(doc))
        grad = torch.randn_like(out)
        ours = (out,) + torch.autograd.grad(out, (q, k, v), grad,
                                            retain_graph=True)
        keep = _document_keep(doc, 200, 200)
        leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
        want = _reference(*leaves, 64 ** -0.5, True, keep=keep)
        exact = (want,) + torch.autograd.grad(want, leaves, grad.double())
        low = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        theirs = _reference(*low, 64 ** -0.5, True, keep=keep,
                            dtype=torch.float16)
        own = (theirs,) + torch.autograd.grad(theirs, low, grad)
        self.check("autograd", ours, exact, own)
        # The backward reads the forward's ids: changing them in place
        # between the two is autograd's error, not a wrong gradient.
        doc[0, 0] += 100
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace "
                                                  "operation"):
            torch.autograd.grad(out, (q,), grad)

    def test_mutation(self):
        """Other ids give another output from the same kernel; the
        criterion catches the wrong ids; a rebound closure variable and a
        tensor changed in place are read at the next call."""
        shape = (2, 4, 2, 256, 256, 64)
        doc = _document_ids(2, 256, seed=11)
        # One more document boundary in row 1: inside a document.
        split = next(i for i in range(100, 256)
                     if doc[1, i].item() == doc[1, i - 1].item())
        other = doc.clone()
        other[1, split:] += 1
        for strategy in _strategies():
            infos = [fa.prepare_kernel(64, dtype="float16",
                                       strategy=strategy,
                                       mask_mod=V.document(ids))
                     for ids in (doc, other)]
            self.assertEqual(infos[0]["name"], infos[1]["name"])
            self.assertEqual(infos[0]["key"], infos[1]["key"])
            self.assertEqual(infos[1]["source"], "memory")
            ours, exact, own = self.run_case(
                torch.float16, strategy, shape, False,
                mask_mod=V.document(other),
                keep=_document_keep(other, 256, 256))
            self.check(f"{strategy} other ids", ours, exact, own)
            wrong, _, _ = self.run_case(
                torch.float16, strategy, shape, False,
                mask_mod=V.document(doc), keep=_document_keep(doc, 256, 256))
            self.assertFalse(torch.equal(wrong[0], ours[0]))
            for label, got, want, torch_got in zip(("O", "dQ"), wrong, exact,
                                                   own):
                self.assertGreater(_max_error(got, want),
                                   _bound(_max_error(torch_got, want), want),
                                   f"{strategy} wrong ids {label}")

        q, k, v = (torch.randn(2, 4, 256, 64, device="cuda",
                               dtype=torch.float16) for _ in range(3))
        ids = doc

        def mask(b, h, q_idx, kv_idx):
            return ids[b, q_idx] == ids[b, kv_idx]
        first = fa.attention(q, k, v, mask_mod=mask)
        ids = other  # the closure's cell, rebound
        second = fa.attention(q, k, v, mask_mod=mask)
        fresh = fa.attention(q, k, v, mask_mod=lambda b, h, qi, ki:
                             other[b, qi] == other[b, ki])
        self.assertFalse(torch.equal(first, second))
        self.assertTrue(torch.equal(second, fresh))
        ids = doc.clone()
        ids.copy_(other)  # the same ids in another tensor
        self.assertTrue(torch.equal(fa.attention(q, k, v, mask_mod=mask),
                                    fresh))
        ids[1, split:] -= 1  # changed in place: doc's ids again
        self.assertTrue(torch.equal(fa.attention(q, k, v, mask_mod=mask),
                                    first))

    def test_arguments_on_the_gpu(self):
        q = torch.randn(2, 4, 64, 64, device="cuda", dtype=torch.float16)
        doc = _document_ids(2, 64, seed=1)
        with self.assertRaisesRegex(ValueError,
                                    "fa.attention: the mask_mod's captured "
                                    "tensor `doc_ids` must be a CUDA "
                                    "tensor"):
            fa.attention(q, q, q, mask_mod=V.document(doc.cpu()))
        with self.assertRaisesRegex(ValueError, "doc_ids must cover the Sk = "
                                                "64 key positions"):
            fa.attention(q, q, q, mask_mod=V.document(doc[:, :63]))
        table = torch.zeros(4, 127, device="cuda", requires_grad=True)
        with self.assertRaisesRegex(ValueError, "`table` requires grad, but "
                                                "captured tensors get no "
                                                "gradient"):
            fa.attention(q, q, q, score_mod=lambda s, b, h, qi, ki:
                         s + table[h, qi - ki + 63])
        with torch.no_grad():  # no gradient wanted: fine
            fa.attention(q, q, q, score_mod=lambda s, b, h, qi, ki:
                         s + table[h, qi - ki + 63])
        # Any layout: a transposed table is passed contiguous.
        transposed = torch.randn(127, 4, device="cuda").t()
        self.assertFalse(transposed.is_contiguous())
        copied = transposed.contiguous()
        out = fa.attention(q, q, q, score_mod=lambda s, b, h, qi, ki:
                           s + transposed[h, qi - ki + 63])
        same = fa.attention(q, q, q, score_mod=lambda s, b, h, qi, ki:
                            s + copied[h, qi - ki + 63])
        self.assertTrue(torch.equal(out, same))


if __name__ == "__main__":
    unittest.main(verbosity=2)
