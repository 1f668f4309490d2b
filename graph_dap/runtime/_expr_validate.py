"""The whitelist of graph-dap's tensor expressions, and the pass that enforces it.

Everything here runs at compile time, before any value is resolved: backtick names
become placeholder identifiers, the text is parsed with ``ast.parse(mode="eval")``,
and one walk over the tree refuses whatever is not on the lists below while
collecting the value names the expression reads. :mod:`graph_dap.runtime.expr`
evaluates what passes.
"""

from __future__ import annotations

import ast
import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graph_dap.runtime.errors import ExpressionError

MAX_TEXT_LENGTH = 10_000
MAX_STRING_LENGTH = 4_096
MAX_DEPTH = 100
MAX_TOLIST = 100_000
MAX_DIFF_ORDER = 100

_PLACEHOLDER = "_gd_bt"  # backtick names become _gd_bt0_, _gd_bt1_...; users may not type it
_NP_MODULES = frozenset({"np", "numpy"})
CONSTANTS: dict[str, float] = {"nan": math.nan, "inf": math.inf, "pi": math.pi, "e": math.e}
DTYPE_NAMES = frozenset({
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
})  # fmt: skip
NP_ATTRS: dict[str, Any] = {**CONSTANTS, "newaxis": None}
NP_ATTRS.update({name: np.dtype(name) for name in DTYPE_NAMES})
PROPERTIES = frozenset({"shape", "dtype", "T", "ndim", "size", "real", "imag"})

_Check = Callable[[list[Any], dict[str, Any]], int]


@dataclass(frozen=True, slots=True)
class Func:
    """One callable: its implementation and what a call to it may pass."""

    impl: Callable[..., Any]
    max_args: int = 1
    kwargs: frozenset[str] = frozenset()
    min_args: int = 1
    strings: Mapping[int | str, str] = field(default_factory=dict)  # where a string may go
    check: _Check | None = None  # the result's size, known before computing


def shape_size(shape: tuple[int, ...]) -> int:
    """The number of elements of an array of this shape."""
    return math.prod(int(d) for d in shape)


def count_elements(value: Any) -> int:
    """Elements in a result: an array's size, summed over lists and tuples, else 1."""
    if isinstance(value, np.ndarray):
        return int(value.size)
    if isinstance(value, (list, tuple)):
        return sum(count_elements(v) for v in value)
    return 1


def broadcast_size(args: list[Any], kwargs: dict[str, Any]) -> int:
    """The size of the broadcast of ``args``, without computing it."""
    return shape_size(np.broadcast_shapes(*(np.shape(a) for a in args)))


def _total_size(args: list[Any], kwargs: dict[str, Any]) -> int:
    return count_elements(args[0])


def _percentile_size(args: list[Any], kwargs: dict[str, Any]) -> int:
    shape = np.shape(args[0])
    axis = args[2] if len(args) > 2 else kwargs.get("axis")
    if axis is None:
        return int(np.size(args[1]))
    axes = {int(a) % max(len(shape), 1) for a in np.atleast_1d(axis)}
    kept = [d for i, d in enumerate(shape) if i not in axes]
    return int(np.size(args[1])) * shape_size(tuple(kept))


def as_dtype(value: Any) -> np.dtype[Any]:
    """The dtype a name or dtype stands for, if it is a numeric or bool one (else refused)."""
    if isinstance(value, np.dtype):
        name = value.name
    elif isinstance(value, str):
        name = value
    else:
        raise ExpressionError(f"expected a dtype name such as 'float32', got {type(value).__name__}")
    if name not in DTYPE_NAMES:
        raise ExpressionError(f"dtype {name!r} is not allowed; use one of {', '.join(sorted(DTYPE_NAMES))}")
    return np.dtype(name)


def _power(a: Any, b: Any) -> Any:
    ints = np.asarray(a).dtype.kind in "biu" and np.asarray(b).dtype.kind in "iu"
    if ints and np.any(np.asarray(b) < 0):
        return np.float_power(a, b)
    return np.power(a, b)


def _reshape(a: Any, *shape: Any) -> Any:
    return np.reshape(a, shape[0] if len(shape) == 1 else shape)


def _transpose(a: Any, *axes: Any) -> Any:
    return np.transpose(a, None if not axes else axes[0] if len(axes) == 1 else axes)


def _tolist(a: Any) -> Any:
    arr = np.asarray(a)
    if arr.size > MAX_TOLIST:
        raise ExpressionError(f"tolist() of {arr.size:,} elements is refused (limit {MAX_TOLIST:,})")
    return arr.tolist()


def _diff(a: Any, n: Any = 1, axis: Any = -1) -> Any:
    if not isinstance(n, (int, np.integer)) or not 0 <= n <= MAX_DIFF_ORDER:
        raise ExpressionError(f"diff() order n must be an integer from 0 to {MAX_DIFF_ORDER}")
    return np.diff(a, n=int(n), axis=axis)


def _fn(
    impl: Callable[..., Any],
    max_args: int = 1,
    kwargs: str = "",
    *,
    min_args: int = 1,
    strings: Mapping[int | str, str] | None = None,
    check: _Check | None = None,
) -> Func:
    names = frozenset(kwargs.split())
    kinds: dict[int | str, str] = {"dtype": "dtype"} if "dtype" in names else {}
    return Func(impl, max_args, names, min_args, {**kinds, **(strings or {})}, check)


_REDUCE = "axis keepdims"
_MANY = 65  # numpy's limit on dimensions, for reshape(2, 3, ...) style calls
_EW = broadcast_size
FUNCS: dict[str, Func] = {
    "abs": _fn(np.abs, check=_EW),
    "min": _fn(np.min, 2, _REDUCE),
    "max": _fn(np.max, 2, _REDUCE),
    "mean": _fn(np.mean, 2, _REDUCE + " dtype"),
    "std": _fn(np.std, 2, _REDUCE + " ddof dtype"),
    "var": _fn(np.var, 2, _REDUCE + " ddof dtype"),
    "sum": _fn(np.sum, 2, _REDUCE + " dtype"),
    "prod": _fn(np.prod, 2, _REDUCE + " dtype"),
    "any": _fn(np.any, 2, _REDUCE),
    "all": _fn(np.all, 2, _REDUCE),
    "argmax": _fn(np.argmax, 2, _REDUCE),
    "argmin": _fn(np.argmin, 2, _REDUCE),
    "where": _fn(np.where, 3, check=_EW),
    "allclose": _fn(np.allclose, 5, "rtol atol equal_nan", min_args=2, check=_EW),
    "isclose": _fn(np.isclose, 5, "rtol atol equal_nan", min_args=2, check=_EW),
    "array_equal": _fn(np.array_equal, 3, "equal_nan", min_args=2),
    "clip": _fn(np.clip, 3, min_args=2, check=_EW),
    "sigmoid": _fn(lambda x: 1.0 / (1.0 + np.exp(np.negative(x))), check=_EW),
    "round": _fn(np.round, 2, "decimals", check=_EW),
    "maximum": _fn(np.maximum, 2, min_args=2, check=_EW),
    "minimum": _fn(np.minimum, 2, min_args=2, check=_EW),
    "reshape": _fn(_reshape, _MANY, min_args=2),
    "transpose": _fn(_transpose, _MANY),
    "squeeze": _fn(np.squeeze, 2, "axis"),
    "expand_dims": _fn(np.expand_dims, 2, "axis", min_args=2),
    "concatenate": _fn(np.concatenate, 2, "axis", check=_total_size),
    "stack": _fn(np.stack, 2, "axis", check=_total_size),
    "flatten": _fn(np.ravel, check=_EW),
    "ravel": _fn(np.ravel, check=_EW),
    "zeros_like": _fn(np.zeros_like, 1, "dtype", check=_EW),
    "ones_like": _fn(np.ones_like, 1, "dtype", check=_EW),
    "full_like": _fn(np.full_like, 2, "dtype", min_args=2, check=_EW),
    "nan_to_num": _fn(np.nan_to_num, 1, "nan posinf neginf", check=_EW),
    "count_nonzero": _fn(np.count_nonzero, 2, _REDUCE),
    "unique": _fn(np.unique, 1, "return_counts return_index return_inverse axis"),
    "sort": _fn(np.sort, 2, "axis", check=_EW),
    "median": _fn(np.median, 2, _REDUCE),
    "percentile": _fn(np.percentile, 3, _REDUCE, min_args=2, check=_percentile_size),
    "astype": _fn(lambda a, d: np.asarray(a).astype(as_dtype(d)), 2, min_args=2, strings={1: "dtype"}, check=_EW),
    "float": _fn(lambda a: float(np.asarray(a).item())),
    "int": _fn(lambda a: int(np.asarray(a).item())),
    "bool": _fn(lambda a: bool(np.asarray(a).item())),
    "len": _fn(len),
    "shape": _fn(lambda a: tuple(np.shape(a))),
    "norm": _fn(np.linalg.norm, 3, "ord axis keepdims", strings={1: "ord", "ord": "ord"}),
    "cumsum": _fn(np.cumsum, 2, "axis dtype", check=_EW),
    "diff": _fn(_diff, 3, "n axis"),
    "load": _fn(lambda *a: None, 2, strings={0: "path", 1: "key"}),  # run by the evaluator
}
_UFUNCS = "isnan isinf isfinite isposinf isneginf exp log log2 log10 sqrt sin cos tanh floor ceil sign"
for _name in _UFUNCS.split(" "):
    FUNCS[_name] = _fn(getattr(np, _name), check=_EW)

METHODS: dict[str, Func] = {
    name: FUNCS[name]
    for name in (
        "min max mean std var sum prod any all argmax argmin reshape transpose squeeze flatten ravel astype round cumsum"
    ).split(" ")
}
METHODS["clip"] = _fn(np.clip, 3, min_args=2, check=_EW)  # x.clip(lo) is fine as a method
METHODS["item"] = _fn(lambda a, *i: np.asarray(a).item(*i), _MANY)
METHODS["tolist"] = _fn(_tolist)
METHODS["copy"] = _fn(lambda a: np.array(a, copy=True), check=_EW)

FUNCTIONS: tuple[str, ...] = tuple(sorted(FUNCS))
ATTRIBUTES: tuple[str, ...] = tuple(sorted(PROPERTIES | set(METHODS)))

BINOPS: dict[type[ast.operator], tuple[str, Callable[..., Any]]] = {
    ast.Add: ("+", np.add), ast.Sub: ("-", np.subtract), ast.Mult: ("*", np.multiply),
    ast.Div: ("/", np.true_divide), ast.FloorDiv: ("//", np.floor_divide),
    ast.Mod: ("%", np.remainder), ast.Pow: ("**", _power), ast.MatMult: ("@", np.matmul),
    ast.BitAnd: ("&", np.bitwise_and), ast.BitOr: ("|", np.bitwise_or),
    ast.BitXor: ("^", np.bitwise_xor),
}  # fmt: skip
UNARY: dict[type[ast.unaryop], tuple[str, Callable[..., Any]]] = {
    ast.USub: ("-", np.negative), ast.UAdd: ("+", np.positive),
    ast.Invert: ("~", np.invert), ast.Not: ("not", np.logical_not),
}  # fmt: skip
COMPARE: dict[type[ast.cmpop], tuple[str, Callable[..., Any]]] = {
    ast.Eq: ("==", np.equal), ast.NotEq: ("!=", np.not_equal), ast.Lt: ("<", np.less),
    ast.LtE: ("<=", np.less_equal), ast.Gt: (">", np.greater), ast.GtE: (">=", np.greater_equal),
}  # fmt: skip
_REFUSED_OPS = {ast.LShift: "<<", ast.RShift: ">>", ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
_REFUSED_NODES: dict[type[ast.AST], str] = {
    ast.Lambda: "lambda expressions are", ast.ListComp: "comprehensions are",
    ast.SetComp: "comprehensions are", ast.DictComp: "comprehensions are",
    ast.GeneratorExp: "generator expressions are", ast.JoinedStr: "f-strings are",
    ast.NamedExpr: "assignment expressions (:=) are", ast.Starred: "starred expressions (*x) are",
    ast.Dict: "dict literals are", ast.Set: "set literals are", ast.Await: "await is",
    ast.Yield: "yield is", ast.YieldFrom: "yield is", ast.Slice: "slices outside [...] are",
}  # fmt: skip


def is_np(node: ast.expr) -> bool:
    """Whether ``node`` is the bare name ``np`` or ``numpy`` (the module, not a value)."""
    return isinstance(node, ast.Name) and node.id in _NP_MODULES


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def skip_string(text: str, i: int) -> int:
    """Index just past the string literal that starts at ``text[i]`` (a quote)."""
    quote = text[i] * 3 if text.startswith(text[i] * 3, i) else text[i]
    j = i + len(quote)
    while j < len(text) and not text.startswith(quote, j):
        j += 2 if text[j] == "\\" else 1
    return min(j + len(quote), len(text))


def _substitute_backticks(text: str) -> tuple[str, dict[str, str], list[int]]:
    """Replace each `name` by a placeholder; also map each new index to the old one."""
    out: list[str] = []
    origin: list[int] = []
    code: list[str] = []
    quoted: dict[str, str] = {}
    i = 0
    while i < len(text):
        if text[i] in "'\"":
            j = skip_string(text, i)
            out.append(text[i:j])
            origin.extend(range(i, j))
        elif text[i] == "`":
            j = text.find("`", i + 1)
            name = text[i + 1 : j] if j > 0 else ""
            if j < 0 or not name or "\n" in name:
                raise ExpressionError(f"unterminated or empty backtick name at column {i + 1}")
            placeholder = next((p for p, n in quoted.items() if n == name), f"{_PLACEHOLDER}{len(quoted)}_")
            quoted[placeholder] = name
            out.append(placeholder)
            origin.extend([i] * len(placeholder))
            j += 1
        else:
            j = i + 1
            out.append(text[i])
            code.append(text[i])
            origin.append(i)
        i = j
    if _PLACEHOLDER in unicodedata.normalize("NFKC", "".join(code)):
        raise ExpressionError(f"identifiers starting with {_PLACEHOLDER!r} are reserved")
    origin.append(len(text))
    return "".join(out), quoted, origin


def _syntax_error(text: str, substituted: str, origin: list[int], exc: SyntaxError) -> ExpressionError:
    if re.match(r"\s*(import|from)\s", text):
        return ExpressionError("import statements are not allowed: write a single expression")
    lines = substituted.split("\n")
    line = min(max(exc.lineno or 1, 1), len(lines))
    flat = sum(len(x) + 1 for x in lines[: line - 1]) + max((exc.offset or 1) - 1, 0)
    pos = origin[min(flat, len(origin) - 1)]
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    where = f"line {line}, column {column}" if "\n" in text else f"column {column}"
    return ExpressionError(f"syntax error at {where}: {exc.msg}")


def callee(func: ast.expr) -> tuple[str, Func, ast.expr | None]:
    """The name, spec and receiver (for methods) of a call's function part."""
    if isinstance(func, ast.Name):
        if _is_dunder(func.id):
            raise ExpressionError(f"names like {func.id!r} (starting and ending with '__') are not allowed")
        if func.id not in FUNCS:
            raise ExpressionError(f"unknown function {func.id!r}")
        return func.id, FUNCS[func.id], None
    if isinstance(func, ast.Attribute):
        base, attr = func.value, func.attr
        if is_np(base):
            if attr not in FUNCS:
                raise ExpressionError(f"np.{attr} is not an allowed function")
            return f"np.{attr}", FUNCS[attr], None
        if isinstance(base, ast.Attribute) and is_np(base.value):
            if base.attr == "linalg" and attr == "norm":
                return "np.linalg.norm", FUNCS["norm"], None
            raise ExpressionError(f"np.{base.attr}.{attr} is not an allowed function")
        if attr in METHODS:
            return f".{attr}", METHODS[attr], base
        if attr in PROPERTIES:
            raise ExpressionError(f"'{attr}' is an attribute, not a method: write .{attr} without ()")
        raise ExpressionError(f"method {attr!r} is not allowed")
    raise ExpressionError("only named functions and tensor methods can be called")


class Validator:
    """Walks a parsed tree once, refusing anything off the whitelist and collecting names."""

    def __init__(self, quoted: Mapping[str, str]) -> None:
        self.quoted = quoted
        self.names: set[str] = set()

    def check(self, node: ast.AST, depth: int = 0, string: str | None = None) -> None:
        """Refuse ``node`` or anything under it that is off the list; ``string`` says what a string here is."""
        if depth > MAX_DEPTH:
            raise ExpressionError(f"expression is nested too deeply (more than {MAX_DEPTH} levels)")
        d = depth + 1
        match node:
            case ast.Constant(value=str() as s):
                if string is None:
                    raise ExpressionError("a string is only allowed as an argument that takes one (a path, a dtype)")
                if len(s) > MAX_STRING_LENGTH:
                    raise ExpressionError(f"string literal longer than {MAX_STRING_LENGTH} characters")
                if string == "dtype":
                    as_dtype(s)
            case ast.Constant(value=int() as v) if not isinstance(v, bool) and abs(v) >= 2**64:
                raise ExpressionError("integer literal too large (limit 2**64)")
            case ast.Constant(value=v):
                if not (v is None or v is Ellipsis or isinstance(v, (int, float, complex))):
                    raise ExpressionError(f"{type(v).__name__} literals are not allowed")
            case ast.Name(id=ident):
                if _is_dunder(ident):
                    raise ExpressionError(f"names like {ident!r} (starting and ending with '__') are not allowed")
                self.names.add(self.quoted.get(ident, ident))
            case ast.BinOp(left=left, op=op, right=right) | ast.Compare(left=left, ops=[op], comparators=[right]):
                self._check_op(op)
                strings = "dtype" if isinstance(op, (ast.Eq, ast.NotEq)) else None
                self.check(left, d, strings)
                self.check(right, d, strings)
            case ast.Compare(left=left, ops=ops, comparators=rest):
                for op in ops:
                    self._check_op(op)
                for operand in (left, *rest):
                    self.check(operand, d)
            case ast.UnaryOp(op=op, operand=operand):
                self._check_op(op)
                self.check(operand, d)
            case ast.BoolOp(values=values) | ast.Tuple(elts=values) | ast.List(elts=values):
                for value in values:
                    self.check(value, d)
            case ast.IfExp(test=test, body=body, orelse=orelse):
                for part in (test, body, orelse):
                    self.check(part, d)
            case ast.Subscript(value=value, slice=index):
                self.check(value, d)
                for item in index.elts if isinstance(index, ast.Tuple) else [index]:
                    parts: list[ast.expr | None] = (
                        [item.lower, item.upper, item.step] if isinstance(item, ast.Slice) else [item]
                    )
                    for bound in parts:
                        if bound is not None:
                            self.check(bound, d + 1)
            case ast.Attribute(value=value, attr=attr):
                if is_np(value):
                    if attr not in NP_ATTRS:
                        raise ExpressionError(f"np.{attr} is not allowed")
                elif attr in METHODS:
                    raise ExpressionError(f"method '{attr}' must be called: write .{attr}()")
                elif attr not in PROPERTIES:
                    raise ExpressionError(f"attribute {attr!r} is not allowed")
                else:
                    self.check(value, d)
            case ast.Call(func=func, args=args, keywords=keywords):
                self._check_call(func, args, keywords, d)
            case _:
                what = _REFUSED_NODES.get(type(node), f"{type(node).__name__} expressions are")
                raise ExpressionError(f"{what} not allowed")

    def _check_op(self, op: ast.AST) -> None:
        if type(op) in _REFUSED_OPS:
            raise ExpressionError(f"operator '{_REFUSED_OPS[type(op)]}' is not allowed")

    def _check_call(self, func: ast.expr, args: list[ast.expr], keywords: list[ast.keyword], d: int) -> None:
        name, spec, receiver = callee(func)
        if receiver is not None:
            self.check(receiver, d)
        offset = int(receiver is not None)
        count = len(args) + offset
        if not spec.min_args <= count <= spec.max_args:
            low, high = spec.min_args - offset, spec.max_args - offset
            raise ExpressionError(f"{name}() takes {low} to {high} positional arguments, got {len(args)}")
        for i, arg in enumerate(args):
            self.check(arg, d, spec.strings.get(i + offset))
        for kw in keywords:
            if kw.arg is None:
                raise ExpressionError("**keyword arguments are not allowed")
            if kw.arg not in spec.kwargs:
                allowed = ", ".join(sorted(spec.kwargs)) or "none"
                raise ExpressionError(f"{name}() does not accept keyword {kw.arg!r} (allowed: {allowed})")
            self.check(kw.value, d, spec.strings.get(kw.arg))


def parse(text: str) -> tuple[ast.Expression, dict[str, str], frozenset[str]]:
    """Parse and validate ``text``: the tree, its backtick placeholders and its value names."""
    if len(text) > MAX_TEXT_LENGTH:
        raise ExpressionError(f"expression longer than {MAX_TEXT_LENGTH} characters")
    if not text.strip():
        raise ExpressionError("empty expression")
    substituted, quoted, origin = _substitute_backticks(text)
    lead = len(substituted) - len(substituted.lstrip())
    try:
        tree = ast.parse(substituted[lead:], mode="eval")
    except SyntaxError as exc:
        raise _syntax_error(text, substituted[lead:], origin[lead:], exc) from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise ExpressionError(f"expression cannot be parsed: {exc}") from None
    validator = Validator(quoted)
    validator.check(tree.body)
    return tree, quoted, frozenset(validator.names)
