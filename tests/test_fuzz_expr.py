"""Fuzzing the tensor expression language with random Python syntax trees.

Attribute chains, calls, subscripts, comprehensions, lambdas, f-strings, walrus, starred,
dunders: each tree is written out (``ast.unparse``) and evaluated over a few tensors.
None executes anything outside the whitelist (an audit hook watches for code execution,
processes, sockets, writes and imports), every result stays within the size cap, and each
refusal is one line naming what was refused.
"""

from __future__ import annotations

import ast
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dap_fuzz import EXAMPLES, fuzz_settings
from hypothesis import assume, given
from hypothesis import strategies as st

from graph_dap.errors import GraphDapError, UnknownNameError
from graph_dap.runtime.expr import DEFAULT_SIZE_CAP, evaluate

_VALUES = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "w": np.ones((3, 3), np.float32), "k": np.array(2.0, np.float32)}
_NAMES = ["x", "w", "k", "np", "numpy", "nan", "inf", "pi", "open", "eval", "exec", "__import__", "__builtins__", "globals",
          "getattr", "type", "os", "sys", "load", "abs", "max", "sum", "len", "print", "compile", "breakpoint", "vars", "ghost"]  # fmt: skip
_ATTRS = ["__class__", "__bases__", "__subclasses__", "__globals__", "__dict__", "__code__", "__init__", "__reduce__",
          "shape", "dtype", "T", "max", "min", "mean", "sum", "tolist", "astype", "reshape", "item", "tofile", "dump",
          "ctypes", "base", "flat", "linalg", "norm", "lib", "load", "save", "fromfile", "frombuffer", "system", "f_globals"]  # fmt: skip

_watching = False
_seen: list[str] = []
#: Audit events that would mean an expression reached past the whitelist.
_FORBIDDEN = ("exec", "os.system", "os.exec", "os.spawn", "os.fork", "os.posix_spawn", "subprocess.Popen", "ctypes.",
              "socket.", "os.remove", "os.rename", "os.unlink", "shutil.", "os.chmod", "import", "code.__new__", "pty.")  # fmt: skip


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _watching:
        return
    if event.startswith(_FORBIDDEN) or (event == "open" and len(args) > 1 and isinstance(args[1], str) and set(args[1]) & set("wax+")):
        _seen.append(f"{event}{args!r:.200}")


sys.addaudithook(_audit)


def _leaf() -> st.SearchStrategy[ast.expr]:
    return st.one_of(
        st.sampled_from(_NAMES).map(lambda n: ast.Name(n, ast.Load())),
        st.one_of(st.integers(-3, 10), st.sampled_from([2**40, 2**64, 2**70])).map(ast.Constant),
        st.one_of(st.floats(allow_nan=False, width=32), st.none(), st.just(...)).map(ast.Constant),
        st.sampled_from(["x.npy", "/etc/passwd", "float32", "int64", "__class__", "%s", "a" * 5000]).map(ast.Constant),
        st.binary(max_size=4).map(ast.Constant),
    )


def _extend(inner: st.SearchStrategy[ast.expr]) -> st.SearchStrategy[ast.expr]:
    name = st.sampled_from(["i", "x", "y"])
    comp = st.builds(lambda t, i: [ast.comprehension(ast.Name(t, ast.Store()), i, [], 0)], name, inner)
    args = st.lists(st.one_of(inner, inner.map(lambda v: ast.Starred(v, ast.Load()))), max_size=3)
    keywords = st.lists(st.builds(ast.keyword, st.sampled_from(["axis", "dtype", "keepdims", "n", None]), inner), max_size=2)
    ops = st.sampled_from([ast.Add(), ast.Sub(), ast.Mult(), ast.Div(), ast.Pow(), ast.MatMult(), ast.Mod(), ast.FloorDiv(), ast.LShift(), ast.BitAnd()])
    return st.one_of(
        st.builds(lambda v, a: ast.Attribute(v, a, ast.Load()), inner, st.sampled_from(_ATTRS)),
        st.builds(lambda f, a, k: ast.Call(f, a, k), inner, args, keywords),
        st.builds(lambda v, i: ast.Subscript(v, i, ast.Load()), inner, st.one_of(inner, st.builds(ast.Slice, inner, inner, st.none()))),
        st.builds(ast.BinOp, inner, ops, inner),
        st.builds(ast.UnaryOp, st.sampled_from([ast.USub(), ast.Not(), ast.Invert()]), inner),
        st.builds(lambda a, b: ast.Compare(a, [ast.Lt()], [b]), inner, inner),
        st.builds(lambda a, b: ast.BoolOp(ast.And(), [a, b]), inner, inner),
        st.builds(ast.IfExp, inner, inner, inner),
        st.builds(lambda e, c: ast.ListComp(e, c), inner, comp),
        st.builds(lambda e, c: ast.GeneratorExp(e, c), inner, comp),
        st.builds(lambda b: ast.Lambda(ast.arguments([], [ast.arg("y")], None, [], [], None, []), b), inner),
        st.builds(lambda v: ast.JoinedStr([ast.Constant("v="), ast.FormattedValue(v, -1, None)]), inner),
        st.builds(lambda t, v: ast.NamedExpr(ast.Name(t, ast.Store()), v), name, inner),
        st.builds(lambda k, v: ast.Dict([k], [v]), inner, inner),
        st.builds(lambda v: ast.Set([v]), inner),
        st.lists(inner, max_size=3).map(lambda e: ast.Tuple(e, ast.Load())),
        st.lists(inner, max_size=3).map(lambda e: ast.List(e, ast.Load())),
    )


_TREES = st.recursive(_leaf(), _extend, max_leaves=12)


def _source(tree: ast.expr) -> str:
    try:
        return ast.unparse(ast.fix_missing_locations(ast.Expression(tree)))
    except ValueError:  # a tree no source text has (an f-string part that needs a backslash)
        assume(False)
        raise


def _resolve(name: str) -> Any:
    if name in _VALUES:
        return _VALUES[name]
    raise UnknownNameError(name)


#: Words by which a refusal can name a construct rather than a name of the text.
_CONSTRUCTS = ("lambda", "comprehension", "generator", "f-string", "assignment", "starred", "dict", "set", "slice", "operator",
               "literal", "string", "syntax", "nested", "call", "keyword", "argument", "index", "element", "limit", "axis",
               "dtype", "shape", "broadcast", "boolean", "number", "tensor", "value", "integer", "float", "array", "result",
               "expression", "method", "attribute", "function", "name", "empty", "reserved", "divide", "power", "kind")  # fmt: skip


def _names_what(message: str, text: str) -> bool:
    names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    operators = set(re.findall(r"[^\sA-Za-z0-9_'\"()\[\],]+", text))
    return (
        any(t in message for t in names if len(t) > 1)
        or any(f"'{t}'" in message or t in message for t in operators if len(t) > 1)
        or any(f"'{t}'" in message for t in operators)
        or any(f"'{part}'" in message for t in operators for part in re.findall(r"[^.]+", t))  # '~' of '~...'
        or any(w in message.lower() for w in _CONSTRUCTS)
    )


SLOWEST: list[tuple[float, str]] = []


@pytest.fixture(scope="module", autouse=True)
def _report_slowest() -> Iterator[None]:
    yield
    for seconds, text in SLOWEST:
        print(f"slowest expression: {seconds * 1000:.1f} ms: {text[:120]}")


@fuzz_settings(examples=max(EXAMPLES * 10, 300))
@given(tree=_TREES)
def test_random_syntax_trees_stay_inside_the_whitelist(tree: ast.expr) -> None:
    global _watching
    text = _source(tree)
    _seen.clear()
    _watching = True
    began = time.perf_counter()
    try:
        result = evaluate(text, _resolve, base_dir=Path(__file__).parent / "data")
    except GraphDapError as error:
        message = str(error)
        assert message and "\n" not in message and "Traceback" not in message, (text, message)
        assert _names_what(message, text), (text, message)
        result = None
    finally:
        _watching = False
        SLOWEST.append((time.perf_counter() - began, text))  # a figure for RELIABILITY.md (printed with -s), not a check
        SLOWEST.sort(reverse=True)
        del SLOWEST[3:]
    assert not _seen, (text, _seen)
    if isinstance(result, np.ndarray):
        assert result.size <= DEFAULT_SIZE_CAP
    assert not callable(result) and not isinstance(result, type), (text, result)  # no function or class escapes
