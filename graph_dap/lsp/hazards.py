"""Numerical hazards: ``Sqrt``, ``Log``, ``Reciprocal``, ``Div`` and ``Pow`` on inputs not provably safe.

A forward pass over the graph gives each value what can be proved of its sign:
positive (> 0), non-negative (>= 0), non-zero, or nothing. Initializers and
``Constant`` nodes are known from their data; ``Relu``, ``Abs``, ``Exp``,
``Softmax``, squares and the like make values of a known sign; shape-keeping ops
pass it on; sums and products combine it. A hazard is an op whose input is not
proved safe: ``Sqrt(Sub(var, eps))`` is one, ``Sqrt(Add(var, eps))`` is not.
Underflow (``Exp`` of a large negative number is 0 in float32) is not modelled.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import numpy_helper

from graph_dap import log as _log
from graph_dap.lsp.versions import InitializerStats
from graph_dap.runtime.graph import Graph, Node

_logger = _log.get_logger(__name__)


class Sign(enum.IntFlag):
    """What is proved of every element of a value: bits for >= 0 and != 0."""

    UNKNOWN = 0
    NONNEGATIVE = 1
    NONZERO = 2
    POSITIVE = 3


@dataclass(frozen=True, slots=True)
class Hazard:
    """One op that can make NaN or Inf here, with its diagnostic code and message."""

    node: Node
    code: str
    message: str
    input_index: int  # the input the hazard is about


#: Ops whose output is elements of their first input, moved or picked: they keep its sign.
_KEEPS_SIGN = frozenset(
    {
        "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Tile", "Slice", "Gather",
        "GatherElements", "GatherND", "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin", "DepthToSpace",
        "SpaceToDepth", "Split", "Compress", "TopK", "Sort", "Tanh", "Upsample",
    }
)
#: Ops that average or add up their first input, or may bring in zeros: only its >= 0 (and > 0 for averages) survives.
_AVERAGES = frozenset({"ReduceMean", "ReduceSum", "GlobalAveragePool", "AveragePool", "CumSum", "Resize"})
_ZERO_MAKERS = frozenset({"Pad", "Dropout", "Trilu"})
_NONNEGATIVE_OPS = frozenset({"ReduceSumSquare", "ReduceL1", "ReduceL2", "Shape", "Size", "HardSigmoid", "NonZero"})
_POSITIVE_OPS = frozenset({"Exp", "Softmax", "Sigmoid", "Softplus"})
_FLOAT_TYPES = frozenset({1, 10, 11, 16})  # float, float16, double, bfloat16


def signs(graph: Graph, initializers: dict[str, InitializerStats]) -> dict[str, Sign]:
    """What is proved of the sign of every value of ``graph`` (absent: nothing)."""
    known: dict[str, Sign] = {}
    for name, stats in initializers.items():
        known[name] = _sign_of_stats(stats.positive, stats.nonnegative, stats.nonzero)
    for node in graph.nodes:
        sign = _node_sign(node, known)
        if sign:
            for o in node.outputs[:1]:
                if o:
                    known[o] = sign
    return known


def hazards(graph: Graph, initializers: dict[str, InitializerStats], known: dict[str, Sign] | None = None) -> list[Hazard]:
    """The hazardous ops of ``graph``, in run order."""
    known = signs(graph, initializers) if known is None else known
    out: list[Hazard] = []
    for node in graph.nodes:
        if node.domain not in ("", "ai.onnx") or not node.inputs:
            continue
        x = node.inputs[0]
        s = known.get(x, Sign.UNKNOWN)
        origin = _origin(graph, x)
        if node.op_type == "Sqrt" and not s & Sign.NONNEGATIVE:
            out.append(Hazard(node, "nan-sqrt", f"Sqrt of {origin}, which is not provably >= 0: NaN where it is negative{_eps_hint(graph, x, initializers)}", 0))
        elif node.op_type == "Log" and s != Sign.POSITIVE:
            what = "-inf where it is 0" if s & Sign.NONNEGATIVE else "NaN where it is negative, -inf where it is 0"
            out.append(Hazard(node, "inf-log", f"Log of {origin}, which is not provably > 0: {what}{_eps_hint(graph, x, initializers)}", 0))
        elif node.op_type == "Reciprocal" and not s & Sign.NONZERO:
            out.append(Hazard(node, "inf-reciprocal", f"Reciprocal of {origin}, which is not provably non-zero: Inf where it is 0", 0))
        elif node.op_type == "Div" and len(node.inputs) > 1 and node.inputs[1]:
            d = node.inputs[1]
            if not known.get(d, Sign.UNKNOWN) & Sign.NONZERO:
                out.append(
                    Hazard(
                        node,
                        "inf-div",
                        f"Div by {_origin(graph, d)}, which is not provably non-zero: Inf or NaN where it is 0{_eps_hint(graph, d, initializers)}",
                        1,
                    )
                )
        elif node.op_type == "Pow" and len(node.inputs) > 1 and node.inputs[1]:
            hazard = _pow_hazard(graph, node, s, initializers.get(node.inputs[1]))
            if hazard:
                out.append(hazard)
    return out


def _sign_of_stats(positive: bool, nonnegative: bool, nonzero: bool) -> Sign:
    return (Sign.NONNEGATIVE if nonnegative or positive else Sign.UNKNOWN) | (Sign.NONZERO if nonzero or positive else Sign.UNKNOWN)


def _constant_sign(node: Node) -> Sign:
    t = node.proto.attribute[0] if node.proto.attribute else None
    if t is None:
        return Sign.UNKNOWN
    try:
        if t.name == "value":
            a = numpy_helper.to_array(t.t)
        elif t.name in ("value_float", "value_int"):
            a = np.array(t.f if t.name == "value_float" else t.i)
        elif t.name in ("value_floats", "value_ints"):
            a = np.array(list(t.floats if t.name == "value_floats" else t.ints))
        else:
            return Sign.UNKNOWN
    except Exception as error:  # noqa: BLE001 - a constant onnx cannot decode has no known sign (the hazard checks skip it)
        _logger.info("the sign of constant %s is unknown: %s: %s", node.id, type(error).__name__, error)
        return Sign.UNKNOWN
    return _array_sign(a)


def _array_sign(a: Any) -> Sign:
    a = np.asarray(a)
    if a.size == 0 or a.dtype.kind not in "biuf" or (a.dtype.kind == "f" and not np.all(np.isfinite(a))):
        return Sign.UNKNOWN
    return _sign_of_stats(bool(np.all(a > 0)), bool(np.all(a >= 0)), bool(np.all(a != 0)))


def _node_sign(node: Node, known: dict[str, Sign]) -> Sign:
    op = node.op_type
    if node.domain not in ("", "ai.onnx"):
        return Sign.UNKNOWN
    ins = [known.get(i, Sign.UNKNOWN) if i else Sign.UNKNOWN for i in node.inputs]
    first = ins[0] if ins else Sign.UNKNOWN
    if op == "Constant":
        return _constant_sign(node)
    if op == "ConstantOfShape":
        value = next((a for a in node.proto.attribute if a.name == "value"), None)
        return _array_sign(numpy_helper.to_array(value.t)) if value is not None else Sign.UNKNOWN
    if op in _POSITIVE_OPS:
        return Sign.POSITIVE
    if op in _NONNEGATIVE_OPS:
        return Sign.NONNEGATIVE
    if op in ("Relu", "Abs"):
        return Sign.NONNEGATIVE | (first & Sign.NONZERO if op == "Abs" else first)
    if op == "Neg":
        return first & Sign.NONZERO
    if op in _KEEPS_SIGN:
        return first
    if op in _AVERAGES:
        return first if first & Sign.NONNEGATIVE else Sign.UNKNOWN
    if op in _ZERO_MAKERS:
        return first & Sign.NONNEGATIVE
    if op == "Cast":
        to = next((a.i for a in node.proto.attribute if a.name == "to"), 0)
        return first if to in _FLOAT_TYPES else first & Sign.NONNEGATIVE
    if op == "Sqrt":
        return first if first & Sign.NONNEGATIVE else Sign.UNKNOWN
    if op == "Mul":
        if len(node.inputs) == 2 and node.inputs[0] == node.inputs[1]:
            return Sign.NONNEGATIVE | (first & Sign.NONZERO)
        return _all(ins, Sign.NONNEGATIVE) | _all(ins, Sign.NONZERO)
    if op in ("Div", "Concat", "Min"):
        return _all(ins, Sign.NONNEGATIVE) | _all(ins, Sign.NONZERO)
    if op in ("Add", "Sum", "Mean"):
        if not _all(ins, Sign.NONNEGATIVE):
            return Sign.UNKNOWN
        return Sign.POSITIVE if any(s == Sign.POSITIVE for s in ins) else Sign.NONNEGATIVE
    if op == "Max":
        if any(s == Sign.POSITIVE for s in ins):
            return Sign.POSITIVE
        return (Sign.NONNEGATIVE if any(s & Sign.NONNEGATIVE for s in ins) else Sign.UNKNOWN) | _all(ins, Sign.NONZERO)
    if op == "Clip":
        lower = ins[1] if len(ins) > 1 else Sign.UNKNOWN
        lower_attr = next((a.f for a in node.proto.attribute if a.name == "min"), None)
        if lower_attr is not None:
            lower = _array_sign(np.array(lower_attr))
        if lower == Sign.POSITIVE or (lower & Sign.NONNEGATIVE and first == Sign.POSITIVE):
            return Sign.POSITIVE
        return Sign.NONNEGATIVE if lower & Sign.NONNEGATIVE else Sign.UNKNOWN
    if op == "Reciprocal":
        return first if first & Sign.NONZERO else Sign.UNKNOWN
    if op == "Pow":
        return Sign.POSITIVE if first == Sign.POSITIVE else Sign.UNKNOWN
    if op == "Where":
        return _all(ins[1:], Sign.NONNEGATIVE) | _all(ins[1:], Sign.NONZERO)
    return Sign.UNKNOWN


def _all(signs_: list[Sign], bit: Sign) -> Sign:
    return bit if signs_ and all(s & bit for s in signs_) else Sign.UNKNOWN


def _origin(graph: Graph, value: str) -> str:
    """``norm_var_eps = Sub(norm_var, norm.eps)``: a value with what makes it."""
    p = graph.producer(value)
    if p is None:
        return f"'{value}'"
    args = ", ".join(i or "_" for i in p.inputs)
    return f"'{value}' = {p.op_type}({args})"


def _eps_hint(graph: Graph, value: str, initializers: dict[str, InitializerStats]) -> str:
    """For ``Sub(x, c)`` with a small positive constant ``c``: most likely an epsilon meant to be added."""
    p = graph.producer(value)
    if p is None or p.op_type != "Sub" or len(p.inputs) < 2:
        return ""
    c = initializers.get(p.inputs[1])
    if c is None or not c.positive or c.summary.max is None or c.summary.max > 1:
        return ""
    return f" (it subtracts the small constant '{p.inputs[1]}' = {c.summary.max:g}: an epsilon is usually added)"


def _pow_hazard(graph: Graph, node: Node, base: Sign, exponent: InitializerStats | None) -> Hazard | None:
    origin = _origin(graph, node.inputs[0])
    if exponent is not None and exponent.summary.min is not None:
        integral = exponent.integral
        negative = exponent.summary.min < 0
    else:
        integral, negative = False, True
    if not integral and not base & Sign.NONNEGATIVE:
        return Hazard(node, "nan-pow", f"Pow of {origin} to a power not known to be whole: NaN where the base is negative", 0)
    if negative and not base & Sign.NONZERO:
        return Hazard(node, "inf-pow", f"Pow of {origin} to a power that may be negative: Inf where the base is 0", 0)
    return None
