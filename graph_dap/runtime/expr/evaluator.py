"""The safe tensor expression language of watch, hover, REPL, conditions and logpoints.

An expression is Python expression syntax (``ast.parse(text, mode="eval")``) checked
against a whitelist before anything runs, then evaluated by walking the tree: nothing
is ever handed to ``eval``, ``exec`` or ``compile``. Identifiers are value names,
resolved lazily through a callback; any name can be written in backticks
(`` `conv2d_53.tmp_0`.max() ``). Results and intermediate results are capped in size,
and the checks that can be made before computing (broadcasting, matmul, loads,
fancy indexing) are made before computing.
"""

from __future__ import annotations

import ast
import functools
import os
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graph_dap.errors import ExpressionError, GraphDapError, UnknownNameError, ValueNotFoundError
from graph_dap.runtime.expr.functions import (
    ATTRIBUTES,
    BINOPS,
    COMPARE,
    CONSTANTS,
    FUNCS,
    FUNCTIONS,
    NP_ATTRS,
    PROPERTIES,
    UNARY,
    as_dtype,
    broadcast_size,
    count_elements,
)
from graph_dap.runtime.expr.validate import callee, is_np, parse, skip_string
from graph_dap.runtime.selection import ModuleValue
from graph_dap.runtime.tensor import numel, type_text

__all__ = [
    "ATTRIBUTES",
    "DEFAULT_SIZE_CAP",
    "FUNCTIONS",
    "Expression",
    "compile_expression",
    "evaluate",
    "format_value",
    "interpolate",
    "is_truthy",
]

DEFAULT_SIZE_CAP = 2**26
_MATMUL_WORK_FACTOR = 16  # a matmul may do at most size_cap * this many multiply-adds
_PRINT_THRESHOLD = 20
_EVAL_ERRORS = (
    ArithmeticError, LookupError, TypeError, ValueError, AttributeError,
    MemoryError, RecursionError, OSError, EOFError, zipfile.BadZipFile,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Expression:
    """A parsed and validated expression, ready to evaluate any number of times.

    ``names`` holds every value name the expression may read (backticked or bare,
    including the constants ``nan inf pi e``, which a value of that name shadows).
    """

    text: str
    names: frozenset[str]
    _tree: ast.Expression = field(repr=False, compare=False)
    _quoted: Mapping[str, str] = field(repr=False, compare=False)  # placeholder -> name


@functools.lru_cache(maxsize=512)
def compile_expression(text: str) -> Expression:
    """Parse and validate ``text``; refuse (ExpressionError) anything not allowed.

    Results are cached by text, so conditions evaluated at every step parse once.
    """
    tree, quoted, names = parse(text)
    return Expression(text, names, tree, quoted)


def _index_size(shape: tuple[int, ...], key: Any) -> int:
    """An upper bound on the size of ``array[key]`` for an index with arrays in it."""
    items = key if isinstance(key, tuple) else (key,)
    arrays = [None if it is None or it is Ellipsis or isinstance(it, slice) else np.asarray(it) for it in items]
    used = sum(0 if a is None else a.ndim if a.dtype == bool else 1 for a in arrays)
    kept, dim, fancy = 1, 0, []
    for item, arr in zip(items, arrays, strict=True):
        if item is Ellipsis:
            span = max(len(shape) - used, 0)
            kept *= numel(shape[dim : dim + span])
            dim += span
        elif isinstance(item, slice):
            kept *= shape[dim] if dim < len(shape) else 1
            dim += 1
        elif arr is not None and arr.dtype == bool:
            fancy.append((int(np.count_nonzero(arr)),))
            dim += arr.ndim
        elif arr is not None:
            fancy.append(arr.shape)
            dim += 1
    return kept * numel(shape[dim:]) * numel(np.broadcast_shapes(*fancy))


def _matmul_size(a: Any, b: Any) -> tuple[int, int]:
    """The size of ``a @ b`` and the number of multiply-adds it takes."""
    sa, sb = np.shape(a), np.shape(b)
    if not sa or not sb:
        return 1, 1
    sa = sa if len(sa) > 1 else (1, *sa)
    sb = sb if len(sb) > 1 else (*sb, 1)
    size = numel(np.broadcast_shapes(sa[:-2], sb[:-2])) * sa[-2] * sb[-1]
    return size, size * sa[-1]


class _Evaluator:
    """Evaluates one validated tree; resolves each name at most once, when first needed."""

    def __init__(self, expr: Expression, resolve: Callable[[str], Any], base_dir: Path, size_cap: int) -> None:
        self.expr = expr
        self.resolve = resolve
        self.base_dir = base_dir
        self.size_cap = size_cap
        self.values: dict[str, Any] = {}
        self.sources: list[np.ndarray] = []  # resolved arrays: views of them cost nothing

    def limit(self, size: int) -> None:
        if size > self.size_cap:
            raise ExpressionError(f"result would have {size:,} elements, more than the limit of {self.size_cap:,}")

    def eval(self, node: ast.expr) -> Any:
        try:
            result = self._eval(node)
        except (ExpressionError, GraphDapError):
            raise
        except _EVAL_ERRORS as exc:
            raise ExpressionError(f"{self._what(node)} failed: {exc}") from exc
        size = 0 if isinstance(node, ast.Name) else count_elements(result)
        view = isinstance(result, np.ndarray) and any(np.may_share_memory(result, s) for s in self.sources)
        if size > self.size_cap and not view:
            self.limit(size)
        return result

    def _what(self, node: ast.expr) -> str:
        match node:
            case ast.Call(func=func):
                return f"{callee(func)[0]}()"
            case ast.BinOp(op=op):
                return f"'{BINOPS[type(op)][0]}'"
            case ast.UnaryOp(op=op):
                return f"'{UNARY[type(op)][0]}'"
            case ast.Subscript():
                return "indexing"
            case ast.Attribute(attr=attr):
                return f".{attr}"
        return "evaluation"

    def _eval(self, node: ast.expr) -> Any:
        match node:
            case ast.Constant(value=value):
                return value
            case ast.Name(id=ident):
                if ident in self.expr._quoted:
                    return self._value(self.expr._quoted[ident], constant=False)
                return self._value(ident, constant=ident in CONSTANTS)
            case ast.BinOp(left=left, op=op, right=right):
                a, b = self.eval(left), self.eval(right)
                if isinstance(op, ast.MatMult):
                    size, work = _matmul_size(a, b)
                    self.limit(size)
                    if work > self.size_cap * _MATMUL_WORK_FACTOR:
                        raise ExpressionError(f"matmul of {work:,} multiply-adds is refused")
                else:
                    self.limit(broadcast_size([a, b], {}))
                return BINOPS[type(op)][1](a, b)
            case ast.UnaryOp(op=op, operand=operand):
                value = self.eval(operand)
                self.limit(int(np.size(value)))
                return UNARY[type(op)][1](value)
            case ast.BoolOp(op=op, values=values):
                combine = np.logical_and if isinstance(op, ast.And) else np.logical_or
                result = self.eval(values[0])
                for value in values[1:]:
                    other = self.eval(value)
                    self.limit(broadcast_size([result, other], {}))
                    result = combine(result, other)
                return result
            case ast.Compare(left=left, ops=ops, comparators=comparators):
                return self._compare(left, ops, comparators)
            case ast.IfExp(test=test, body=body, orelse=orelse):
                return self.eval(body if is_truthy(self.eval(test)) else orelse)
            case ast.Subscript(value=value, slice=index):
                return self._subscript(self.eval(value), index)
            case ast.Tuple(elts=elts) | ast.List(elts=elts):
                items = [self.eval(e) for e in elts]
                self.limit(count_elements(items))
                return tuple(items) if isinstance(node, ast.Tuple) else items
            case ast.Attribute(value=value, attr=attr):
                if is_np(value):
                    return NP_ATTRS[attr]
                if attr not in PROPERTIES:
                    raise ExpressionError(f"attribute {attr!r} is not allowed")
                base = self.eval(value)
                return getattr(base if isinstance(base, (np.ndarray, np.generic)) else np.asarray(base), attr)
            case ast.Call(func=func, args=args, keywords=keywords):
                _, spec, receiver = callee(func)
                values = [self.eval(receiver)] if receiver is not None else []
                values += [self.eval(a) for a in args]
                kwargs = {kw.arg: self.eval(kw.value) for kw in keywords if kw.arg is not None}
                if spec is FUNCS["load"]:
                    return self._load(*values)
                if "dtype" in kwargs:
                    kwargs["dtype"] = as_dtype(kwargs["dtype"])
                if spec.check is not None:
                    self.limit(spec.check(values, kwargs))
                return spec.impl(*values, **kwargs)
        raise ExpressionError(f"{type(node).__name__} expressions are not allowed")

    def _value(self, name: str, *, constant: bool) -> Any:
        if name not in self.values:
            try:
                value = self.resolve(name)
            except (ValueNotFoundError, KeyError) as e:
                if not constant:
                    computed_later = isinstance(e, ValueNotFoundError) and "not computed yet" in str(e)
                    raise UnknownNameError(name, str(e) if computed_later else "") from None
                value = CONSTANTS[name]
            items = value if isinstance(value, (list, tuple)) else [value]
            self.sources.extend(v for v in items if isinstance(v, np.ndarray))
            self.values[name] = value
        return self.values[name]

    def _compare(self, left: ast.expr, ops: list[ast.cmpop], comparators: list[ast.expr]) -> Any:
        a = self.eval(left)
        result: Any = None
        for op, node in zip(ops, comparators, strict=True):
            b = self.eval(node)
            symbol, ufunc = COMPARE[type(op)]
            if isinstance(a, ModuleValue) or isinstance(b, ModuleValue):  # a condition's ``module == "model.layers.8"``
                if symbol not in ("==", "!="):
                    raise ExpressionError(f"module can only be compared with == or != (to a module path or glob in quotes), not {symbol}")
                modules, other = (a, b) if isinstance(a, ModuleValue) else (b, a)
                if not isinstance(other, str):
                    raise ExpressionError('module is compared with a module path in quotes: module == "model.layers.8"')
                r: Any = modules.matches(other) == (symbol == "==")
            elif isinstance(a, (str, np.dtype)) or isinstance(b, (str, np.dtype)):
                if symbol not in ("==", "!="):
                    raise ExpressionError(f"dtypes can only be compared with == or !=, not {symbol}")
                same = all(isinstance(v, (str, np.dtype)) for v in (a, b)) and as_dtype(a) == as_dtype(b)
                r = same if symbol == "==" else not same
            elif symbol in ("==", "!=") and all(_is_int_tuple(v) for v in (a, b)):
                r = (tuple(a) == tuple(b)) == (symbol == "==")
            else:
                self.limit(broadcast_size([a, b], {}))
                r = ufunc(a, b)
            if result is not None:
                self.limit(broadcast_size([result, r], {}))
            result = r if result is None else np.logical_and(result, r)
            a = b
        return result

    def _subscript(self, base: Any, index: ast.expr) -> Any:
        if isinstance(index, ast.Tuple):
            key: Any = tuple(self._index_item(e, literal=True) for e in index.elts)
        else:
            key = self._index_item(index, literal=False)
        if isinstance(base, (list, tuple)) and isinstance(key, (int, np.integer, slice)):
            return base[key]
        if isinstance(base, dict):  # a map (skl2onnx's ZipMap): its item by key
            try:
                return base[key.item() if isinstance(key, np.generic) else key]
            except (KeyError, TypeError):
                raise ExpressionError(f"the map has no key {key!r} (its keys: {', '.join(map(repr, list(base)[:10]))})") from None
        if isinstance(key, str):
            raise ExpressionError(f"a string subscript names a map's key, and this is not a map but {type_text(base)}")
        arr = np.asarray(base)
        items = key if isinstance(key, tuple) else (key,)
        if not all(it is None or it is Ellipsis or isinstance(it, (slice, int, np.integer)) for it in items):
            self.limit(_index_size(arr.shape, key))
        return arr[key]

    def _index_item(self, node: ast.expr, *, literal: bool) -> Any:
        if isinstance(node, ast.Slice):
            parts = (node.lower, node.upper, node.step)
            return slice(*(None if p is None else self.eval(p) for p in parts))
        value = self.eval(node)
        if isinstance(value, list) or (literal and isinstance(value, tuple)):
            return np.asarray(value)
        return value

    def _load(self, path: Any, key: Any = None) -> np.ndarray:
        if not isinstance(path, str) or not (key is None or isinstance(key, str)):
            raise ExpressionError("load() takes a file path and, for an .npz, an array name, both strings")
        full = self.base_dir / path
        if not full.is_file():
            raise ExpressionError(f"load(): no such file: {full}")
        try:
            if not zipfile.is_zipfile(full):
                if key is not None:
                    raise ExpressionError(f"load(): {full} is a .npy file, it has no array named {key!r}")
                with open(full, "rb") as fp:
                    self._check_header(fp, str(full))
                return np.asarray(np.load(full, allow_pickle=False))
            with np.load(full, allow_pickle=False) as archive:
                if key is None or key not in archive.files:
                    have = ", ".join(archive.files) or "none"
                    what = "name the array: load(path, 'name')" if key is None else f"no array named {key!r}"
                    raise ExpressionError(f"load(): {full} is an .npz archive; {what} (it has: {have})")
                member = key + ".npy" if key + ".npy" in archive.zip.namelist() else key
                with archive.zip.open(member) as fp:
                    self._check_header(fp, f"{full}[{key}]")
                return np.asarray(archive[key])
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise ExpressionError(f"load(): cannot read {full}: {exc}") from None

    def _check_header(self, fp: Any, what: str) -> None:
        version = np.lib.format.read_magic(fp)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(fp)
        if dtype.hasobject:
            raise ExpressionError(f"load(): {what} holds pickled Python objects, which are refused")
        self.limit(numel(shape))


def _is_int_tuple(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value
    )


def evaluate(
    expr: str | Expression,
    resolve: Callable[[str], Any],
    *,
    base_dir: str | os.PathLike[str] | None = None,
    size_cap: int = DEFAULT_SIZE_CAP,
) -> Any:
    """Evaluate an expression; ``resolve(name)`` gives a value's array (or list of arrays).

    Unknown names (the resolver raising ValueNotFoundError or KeyError), refusals and
    numpy failures raise ExpressionError; other GraphDapErrors from the resolver pass.
    The result may be a view of a resolved array: copy it before changing it.
    """
    compiled = expr if isinstance(expr, Expression) else compile_expression(expr)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    evaluator = _Evaluator(compiled, resolve, base, size_cap)
    try:
        with np.errstate(all="ignore"):
            return evaluator.eval(compiled._tree.body)
    except (RecursionError, MemoryError) as exc:
        raise ExpressionError(f"evaluation failed: {type(exc).__name__}") from None


def _describe(value: np.ndarray) -> str:
    return f"{value.dtype}[{','.join(str(d) for d in value.shape)}]"


def _format(value: Any, budget: int) -> str:
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return _format(value[()], budget)
        with np.printoptions(threshold=_PRINT_THRESHOLD, edgeitems=3, linewidth=max(budget, 75)):
            body = np.array2string(value)
        return f"{_describe(value)} {' '.join(body.split())}"
    if isinstance(value, (list, tuple)):
        parts: list[str] = []
        for item in value:
            parts.append(_format(item, budget))
            if sum(len(p) + 2 for p in parts) > budget:
                parts.append("...")
                break
        inner = ", ".join(parts) + ("," if isinstance(value, tuple) and len(value) == 1 else "")
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return str(value)


def format_value(value: Any, max_chars: int = 200) -> str:
    """Short one-line text for a result: scalars plainly, arrays as ``float32[3,4] [[...]]``."""
    text = _format(value, max_chars)
    return text if len(text) <= max_chars else text[: max(max_chars - 1, 0)] + "…"


def is_truthy(value: Any) -> bool:
    """A breakpoint condition's truth: a scalar or one-element array, nothing bigger."""
    if isinstance(value, (list, tuple)):
        try:
            value = np.asarray(value)
        except ValueError as exc:
            raise ExpressionError(f"condition must be a single boolean: {exc}") from None
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise ExpressionError(f"condition must be a single boolean, got {_describe(value)}; use any() or all()")
        value = value.reshape(-1)[0]
    try:
        return bool(value)
    except (TypeError, ValueError) as exc:
        raise ExpressionError(f"condition must be a single boolean: {exc}") from None


def _closing_brace(message: str, start: int) -> int:
    i = start
    while i < len(message):
        if message[i] in "'\"":
            i = skip_string(message, i)
            continue
        if message[i] == "`":
            end = message.find("`", i + 1)
            i = len(message) if end < 0 else end + 1
            continue
        if message[i] == "}":
            return i
        i += 1
    return -1


def interpolate(
    message: str,
    resolve: Callable[[str], Any],
    *,
    base_dir: str | os.PathLike[str] | None = None,
    size_cap: int = DEFAULT_SIZE_CAP,
) -> str:
    """Render a logpoint message: each ``{expr}`` evaluated and formatted, ``{{``/``}}`` literal.

    A failing ``{expr}`` becomes ``<error: ...>``; an unmatched ``{`` stays as text.
    """
    cache: dict[str, Any] = {}

    def cached(name: str) -> Any:
        if name not in cache:
            cache[name] = resolve(name)
        return cache[name]

    out: list[str] = []
    i = 0
    while i < len(message):
        if message.startswith(("{{", "}}"), i):
            out.append(message[i])
            i += 2
        elif message[i] == "{" and (end := _closing_brace(message, i + 1)) >= 0:
            try:
                out.append(format_value(evaluate(message[i + 1 : end], cached, base_dir=base_dir, size_cap=size_cap)))
            except GraphDapError as exc:
                out.append(f"<error: {exc}>")
            i = end + 1
        else:
            out.append(message[i])
            i += 1
    return "".join(out)
