"""Which run calls a graph breakpoint can stop in, when its condition reads the call's number alone.

In a program launch, a graph breakpoint's condition may name ``call``, the run call's number for its
model (from 1; a generation loop's decode step: ``call == 12``, ``call >= 40 and call % 10 == 0``). The
graph session of each call evaluates it like any condition; but a call whose every breakpoint has such
a condition, false for its number, need not become a graph session at all: the adapter answers it
``plain`` at once, and the program's own onnxruntime runs it. Evaluated here with Python's ``ast`` over
integers (the adapter loads no numpy); anything else is left to the graph session.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable
from typing import Any

CALL = "call"

_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
}  # fmt: skip
_BINARY: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}  # fmt: skip


class _NotHere(Exception):
    """The condition reads more than the call's number (or cannot be evaluated without numpy)."""


def _eval(node: ast.AST, call: int) -> Any:
    match node:
        case ast.Expression(body=body):
            return _eval(body, call)
        case ast.Name(id=name) if name == CALL:
            return call
        case ast.Constant(value=value) if isinstance(value, int):
            return value
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            return not _eval(operand, call)
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_eval(operand, call)
        case ast.BoolOp(op=op, values=values):
            results = [bool(_eval(v, call)) for v in values]
            return all(results) if isinstance(op, ast.And) else any(results)
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
            b = _eval(right, call)
            if isinstance(op, ast.FloorDiv | ast.Mod) and b == 0:
                raise _NotHere  # (the graph session says what is wrong with it)
            return _BINARY[type(op)](_eval(left, call), b)
        case ast.Compare(left=left, ops=ops, comparators=rest):
            a = _eval(left, call)
            for cmp, item in zip(ops, rest):
                b = _eval(item, call)
                test = _COMPARE.get(type(cmp))
                if test is None:
                    raise _NotHere
                if not test(a, b):
                    return False
                a = b
            return True
    raise _NotHere


def holds(condition: str, call: int) -> bool | None:
    """Whether ``condition`` holds at run call ``call``; None when it reads anything but ``call`` and integers."""
    try:
        return bool(_eval(ast.parse(condition.strip(), mode="eval"), call))
    except (_NotHere, SyntaxError, ValueError, RecursionError):
        return None


def can_skip(conditions: Iterable[str | None], call: int) -> bool:
    """Whether none of the breakpoints (their conditions; None: unconditional) can stop in run call ``call``."""
    found = list(conditions)
    return bool(found) and all(c is not None and holds(c, call) is False for c in found)
