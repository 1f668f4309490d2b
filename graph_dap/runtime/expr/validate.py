"""The pass that enforces the whitelist, before any value is resolved.

Backtick names become placeholder identifiers, the text is parsed with
``ast.parse(mode="eval")``, and one walk over the tree refuses whatever is not in
:mod:`.functions` while collecting the value names the expression reads.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from collections.abc import Mapping

from graph_dap.errors import ExpressionError
from graph_dap.runtime.expr.functions import (
    _NP_MODULES,
    _PLACEHOLDER,
    FUNCS,
    MAX_DEPTH,
    MAX_STRING_LENGTH,
    MAX_TEXT_LENGTH,
    METHODS,
    NP_ATTRS,
    PROPERTIES,
    Func,
    as_dtype,
)

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


MODULE_NAME = "module"  # (what a breakpoint's condition reads as the modules of its node: see runtime/selection.py)


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
                    raise ExpressionError("a string is only allowed as an argument that takes one (a path, a dtype) or as a map's key")
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
                if strings and any(isinstance(x, ast.Name) and x.id == MODULE_NAME for x in (left, right)):
                    strings = "module"  # a breakpoint condition's ``module == "model.layers.8"``: a module path, or a glob
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
            case ast.Subscript(value=value, slice=ast.Constant(value=str()) as key):
                self.check(value, d)
                self.check(key, d + 1, "key")  # a map's key: out[0]['cat']
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
