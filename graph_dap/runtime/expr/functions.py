"""The whitelist of graph-dap's tensor expressions: functions, methods, operators, constants.

Each callable comes with what a call may pass and, where it can be known before
computing, the size of its result. :mod:`.validate` refuses what is not here;
:mod:`.evaluate` runs what is.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graph_dap.errors import ExpressionError
from graph_dap.runtime.dtypes import EXTRA, dtype_of
from graph_dap.runtime.tensor import numel

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
    "float16", "float32", "float64", "complex64", "complex128", *EXTRA,
})  # fmt: skip
NP_ATTRS: dict[str, Any] = {**CONSTANTS, "newaxis": None}
NP_ATTRS.update({name: dtype_of(name) for name in DTYPE_NAMES})
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


def count_elements(value: Any) -> int:
    """Elements in a result: an array's size, summed over lists and tuples, else 1."""
    if isinstance(value, np.ndarray):
        return int(value.size)
    if isinstance(value, (list, tuple)):
        return sum(count_elements(v) for v in value)
    return 1


def broadcast_size(args: list[Any], kwargs: dict[str, Any]) -> int:
    """The size of the broadcast of ``args``, without computing it."""
    return numel(np.broadcast_shapes(*(np.shape(a) for a in args)))


def _total_size(args: list[Any], kwargs: dict[str, Any]) -> int:
    return count_elements(args[0])


def _percentile_size(args: list[Any], kwargs: dict[str, Any]) -> int:
    shape = np.shape(args[0])
    axis = args[2] if len(args) > 2 else kwargs.get("axis")
    if axis is None:
        return int(np.size(args[1]))
    axes = {int(a) % max(len(shape), 1) for a in np.atleast_1d(axis)}
    kept = [d for i, d in enumerate(shape) if i not in axes]
    return int(np.size(args[1])) * numel(tuple(kept))


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
    return dtype_of(name)


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

