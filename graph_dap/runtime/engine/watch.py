"""The NaN/Inf watch plan: which tensors a segment sums in-graph, and which it can leave out.

A tensor need not be watched when a consumer in the same segment always carries a
NaN or Inf in it on to a watched output (Add, MatMul, Conv whose windows cover every
input position...): the consumer's sum shows the fault, and the exact check then
traces it back to the first producer. Nor, watching for both NaN and Inf, when its
producer cannot make either from finite values (Relu, Tanh, a Reshape...) and reads a
watched tensor: it can never hold the first fault.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graph_dap.runtime.dtypes import EXTRA_FLOATS
from graph_dap.runtime.engine.bounds import LIMIT, MARGIN, Bound, Bounds, Check, Within
from graph_dap.runtime.engine.masks import SCALE
from graph_dap.runtime.graph import Lookup, Node, ValueInfo

#: Element types the watch sums in-graph. onnxruntime's CPU provider sums neither bfloat16
#: nor float8: those are cast to float32 first (exact, and NaN and Inf stay what they are).
WATCHABLE = {"float32", "float64", "float16"} | EXTRA_FLOATS

# Ops that carry a NaN or Inf in the given input positions on to their output
# (None: every input). A tensor whose consumer is such an op, with its output
# watched, need not be watched itself: the consumer's sum shows the fault.
_PROPAGATES: dict[str, tuple[int, ...] | None] = {
    "Add": None,
    "Sum": None,  # (a residual connection, in older exports)
    "Sub": None,
    "Mul": None,
    "Div": (0,),
    "MatMul": None,
    "Gemm": (0, 1),  # C only when beta != 0: checked below
    "BatchNormalization": (0,),
    "LayerNormalization": (0,),
    "Reshape": (0,),
    "Flatten": (0,),
    "Squeeze": (0,),
    "Unsqueeze": (0,),
    "Identity": (0,),
    "Transpose": (0,),
    "Concat": None,
    "GlobalAveragePool": (0,),
    "AveragePool": (0,),  # when its windows cover every input position
    "Conv": (0,),  # likewise
}


# Elementwise ops, on their first input, measured in onnxruntime (tests/test_fast_engine.py holds each):
# NaN in -> NaN out for all of them; those in _BOTH also turn +Inf and -Inf into a non-finite value
# (Relu(-inf) is 0, Sigmoid(+inf) is 1: those keep only NaN). A chain Conv -> BatchNormalization ->
# activation is then watched at its end alone, and onnxruntime can fuse it.
_UNARY_NAN = frozenset(
    {"Relu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "Tanh", "Softplus", "Exp", "Erf", "Reciprocal", "Sign", "Atan", "Softmax"}
)
_UNARY_BOTH = frozenset(
    {"LeakyRelu", "PRelu", "HardSwish", "Softsign", "Log", "Sqrt", "Abs", "Neg", "Gelu", "Sin", "Cos", "Floor", "Ceil", "Round",
     "Mish", "Dropout", "Asinh", "Sinh", "Cosh", "ReduceSum", "ReduceMean"}
)  # fmt: skip


# Ops whose output is finite whenever their first input is (measured in onnxruntime, down to
# +-FLT_MAX and denormals: tests/test_fast_engine.py). Not Exp, Selu, LeakyRelu (scaling can
# overflow) nor Sin and Cos with the nan filter alone (they make NaN of an unwatched Inf).
_KEEPS_FINITE = frozenset(
    {"Relu", "Tanh", "Sigmoid", "HardSigmoid", "Erf", "Atan", "Sign", "Abs", "Neg", "Floor", "Ceil", "Round", "Softsign",
     "Sin", "Cos", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose"}
)  # fmt: skip


def propagates(graph: Lookup, consumer: Node, value: str, nan: bool = True, inf: bool = True) -> bool:
    """True when a NaN (with ``nan``) or an Inf (with ``inf``) anywhere in ``value`` always makes
    ``consumer``'s first output non-finite."""
    if consumer.domain not in ("", "ai.onnx"):
        return False
    op = consumer.op_type
    if op in _UNARY_BOTH or (op in _UNARY_NAN and not inf):
        where = [i for i, name in enumerate(consumer.inputs) if name == value]
        out = consumer.outputs[0] if consumer.outputs else ""
        return where == [0] and bool(out) and graph.value_info(out).numel != 0
    if op not in _PROPAGATES:
        return False
    positions = _PROPAGATES[consumer.op_type]
    where = [i for i, name in enumerate(consumer.inputs) if name == value]
    if not where:
        return False  # read by a subgraph only
    if positions is not None and not all(i in positions for i in where):
        return False
    out = consumer.outputs[0] if consumer.outputs else ""
    if not out or graph.value_info(out).numel == 0:
        return False
    if op == "Gemm":
        if consumer.attributes.get("alpha", 1.0) == 0.0:
            return False
        if 2 in where and consumer.attributes.get("beta", 1.0) == 0.0:
            return False
    if op == "MatMul" or op == "Gemm":
        return _no_zero_dims(graph, consumer.inputs[:2])
    if op in ("AveragePool", "Conv"):
        return _windows_cover(graph, consumer)
    return True


def _no_zero_dims(graph: Lookup, names: Sequence[str]) -> bool:
    for name in names:
        shape = graph.value_info(name).shape
        if shape is None or not all(isinstance(d, int) and d > 0 for d in shape):
            return False
    return True


def _windows_cover(graph: Lookup, node: Node) -> bool:
    """True when every spatial input position falls in at least one window."""
    x = graph.value_info(node.inputs[0]).shape
    if x is None or not all(isinstance(d, int) and d > 0 for d in x) or len(x) < 3:
        return False
    a = node.attributes
    spatial = x[2:]
    if node.op_type == "Conv":
        w = graph.value_info(node.inputs[1]).shape
        if w is None or not all(isinstance(d, int) and d > 0 for d in w):
            return False
        kernel = list(a.get("kernel_shape") or w[2:])
    else:
        kernel = list(a.get("kernel_shape") or [])
    n = len(spatial)
    if len(kernel) != n:
        return False
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return False
    strides = list(a.get("strides") or [1] * n)
    dilations = list(a.get("dilations") or [1] * n)
    pads = list(a.get("pads") or [0] * (2 * n))
    if a.get("auto_pad") == "VALID":
        pads = [0] * (2 * n)
    for i in range(n):
        k, s, d, length = kernel[i], strides[i], dilations[i], spatial[i]
        begin, end = pads[i], pads[i + n]
        if d != 1 or k < s:
            return False
        padded = length + begin + end
        if padded < k:
            return False
        windows = (padded - k) // s + 1
        last_end = (windows - 1) * s + k  # in padded coordinates
        if last_end < begin + length:  # trailing input positions dropped
            return False
    return True


_INTEGER_RANGE = 2.0**32  # the widest (x - zero point) an integer tensor a DequantizeLinear reads can give
_F32_MAX = 3.4028234663852886e38


def never_faults(node: Node, constants: Mapping[str, Any], dtypes: Mapping[str, str]) -> bool:
    """Whether ``node`` cannot make a NaN or an Inf: a DequantizeLinear of an integer tensor whose scale is a constant
    too small to overflow (``(x - zero_point) * scale`` is then finite). Summed, its output would keep onnxruntime from
    fusing it with the quantized node that reads it (a Q/DQ group into a QLinearMatMul: the run would no longer be
    the user's), and it cannot hold the first fault."""
    if node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx", "com.microsoft") or len(node.inputs) < 2:
        return False
    if not str(dtypes.get(node.inputs[0], "")).startswith(("int", "uint")):
        return False
    scale = constants.get(node.inputs[1])
    if scale is None:
        return False
    a = np.asarray(scale, dtype=np.float64)
    return bool(a.size) and bool(np.isfinite(a).all()) and float(np.abs(a).max()) * _INTEGER_RANGE < _F32_MAX


def pooled_first(info: ValueInfo) -> bool:
    """Whether a watched tensor is summed through ``GlobalAveragePool`` first: a float32 image
    (N, C, H, W) of known H and W, more than one pixel (a mean over nothing would read NaN). NaN and Inf
    carry through the mean as through a sum, and onnxruntime runs it on its blocked NCHWc layout
    where a ReduceSum would first reorder the whole tensor back (resnet50, watched for nan and inf:
    1.19x the plain run instead of 1.40x)."""
    shape = info.shape
    if info.dtype != "float32" or shape is None or len(shape) != 4:
        return False
    h, w = shape[2], shape[3]
    return isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0 and h * w > 1  # (one pixel: nothing to pool)


@dataclass(frozen=True, slots=True)
class WatchPlan:
    """The tensors summed in-graph, and for each pruned tensor the watched one that shows its fault.

    ``inner``: the flags of control-flow nodes watched inside (see :mod:`.instrument`), each with
    its node; ``rewrites``: those nodes as the segment runs them, by node id; ``to_float``: the
    watched tensors cast to float32 before they are summed (bfloat16, float8); ``bounded``: a Relu's
    input left unwatched (and the tensors it is made from within its bound) -> the watched tensor whose
    check (``scales``, see :mod:`.bounds`: its sum scaled, plus the scaled sums of the bound's other
    sources) rules out a -Inf in it; a check that fires has the exact check look at them all.
    """

    watched: list[str]
    guards: dict[str, str]
    inner: dict[str, Node] = field(default_factory=dict)
    rewrites: dict[str, Any] = field(default_factory=dict)
    to_float: frozenset[str] = frozenset()
    bounded: dict[str, str] = field(default_factory=dict)
    scales: dict[str, Check] = field(default_factory=dict)
    scaled: frozenset[str] = frozenset()  # large by construction (see .masks): summed times masks.SCALE, not to overflow
    quiet_nan: frozenset[str] = frozenset()  # watched tensors whose NaN is expected (their NaN sums fire nothing)

    @property
    def checked(self) -> set[str]:
        """The tensors whose sums the checks read: watched ones, and values the segment is fed (the sum of ``|x|``)."""
        return set(self.scales) | {y for c in self.scales.values() for y, _ in c.terms}


def watch_plan(
    graph: Lookup,
    nodes: Sequence[Node],
    dtypes: Mapping[str, str],
    never_prune: Callable[[Node], bool],
    nan: bool = True,
    inf: bool = True,
    bounds: Bounds | None = None,
    faultless: Callable[[Node], bool] | None = None,
    large: Collection[str] = (),
    nan_expected: Callable[[Node], bool] | None = None,
) -> WatchPlan:
    """Tensors to watch among ``nodes``' outputs, pruned where a watched consumer shows the fault.

    ``nan``/``inf``: the faults watched for (an activation that keeps NaN only guards for NaN).
    A node whose Inf is excluded (``never_prune``) neither is pruned nor guards another.
    ``bounds`` (watching both, for an optimized segment): the input of an activation that keeps NaN but
    may hide an Inf (a Relu's, a Sigmoid's) is left to its output and to a bound (see :mod:`.bounds`),
    so that onnxruntime can fuse the activation (or need not reorder the input to sum it).
    ``large``: values that hold numbers near the end of the float range by construction (an attention mask's
    ``finfo.min``, see :mod:`.masks`), summed scaled down; ``nan_expected``: nodes whose NaN is no fault.
    """
    candidates: list[str] = []
    for n in nodes:
        if faultless is not None and faultless(n):
            continue  # (see never_faults)
        for o in n.outputs:
            if o and dtypes.get(o) in WATCHABLE:
                candidates.append(o)
    in_segment = {n.id for n in nodes}
    produced = set(candidates)
    outputs = {o for n in nodes for o in n.outputs if o}
    reads = {i for n in nodes for i in n.inputs if i and i not in outputs}
    order = {o: n.order for n in nodes for o in n.outputs if o}
    watched: set[str] = set()
    guards: dict[str, str] = {}
    bounded: dict[str, str] = {}
    scales: dict[str, Check] = {}
    sources: set[str] = set()  # the tensors whose sums the checks read
    covered: set[str] = set()  # inside a bound: any NaN or Inf in them fires its check (see .bounds)

    def made(x: str) -> bool:  # (not an excluded node's output: its Inf would not fire a check)
        p = graph.producer(x)
        return x in produced and dtypes.get(x) == "float32" and p is not None and not never_prune(p)

    def fed(x: str) -> bool:  # (not a constant the segment computes: its sum would come before it; IsNaN: opset 9)
        p = graph.producer(x)
        constant = p is not None and p.is_constant
        return x in reads and dtypes.get(x) == "float32" and not constant and graph.opsets.get("ai.onnx", 0) >= 9

    within = Within(made, fed)

    def bound_at(name: str, c: Node, out: str) -> tuple[Bound, str] | None:
        """The bound that lets ``c``, an activation that keeps NaN but may hide an Inf, guard ``name`` (with ``out``, its
        output, watched or guarded), and the watched tensor whose check covers it."""
        if bounds is None or not (nan and inf) or c.op_type not in _UNARY_NAN or c.domain not in ("", "ai.onnx") or c.inputs[0] != name:
            return None
        bound = bounds.of(name, within, below=c.op_type == "Relu")  # (a Relu hides -Inf alone)
        if bound is None or not all(MARGIN * v <= LIMIT for v in (bound.offset, *(a for _, a in bound.terms))):
            return None
        # One check for the whole bound, at its source last in the run (it reads the others' sums), or at the
        # watched tensor that shows c's faults when the segment is fed every source (it comes after them all)
        made_here = [x for x, _ in bound.terms if x in produced]
        home = max(made_here, key=order.__getitem__) if made_here else (out if out in watched else guards[out])
        if not made_here and not bounds.non_negative(home, made):
            return None  # (its own sum, of any sign, could cancel the others')
        return bound, home

    # Decide from the last tensor back, so a consumer's own status is known first.
    for name in reversed(candidates):
        producer = graph.producer(name)
        assert producer is not None
        if name in sources:  # a check reads its sum (it comes before what it bounds: known by now)
            watched.add(name)
            continue
        if name in covered and not never_prune(producer) and name not in graph.output_names:
            continue
        if not never_prune(producer) and name not in graph.output_names:
            for c in graph.consumers(name):
                out = c.outputs[0] if c.outputs else ""
                guarded_by = out in watched or out in guards
                if not (c.id in in_segment and guarded_by and not never_prune(c)):
                    continue
                placed = None
                if not propagates(graph, c, name, nan, inf):
                    placed = bound_at(name, c, out)
                    if placed is None:
                        continue
                guards[name] = out if out in watched else guards[out]
                if placed is not None:  # its NaN (a Relu's +Inf too) reaches c's output; an Inf c hides needs an overflow
                    bound, home = placed
                    bounded.update(dict.fromkeys(bound.chain, home))
                    covered.update(t for t in bound.chain if t != name)
                    scales[home] = scales.get(home, Check(0.0, 0.0)).covering(bound, home)
                    sources.update(x for x, _ in bound.terms if x in produced)
                break
        if name not in guards:
            watched.add(name)
    if nan and inf:
        # Forwards: a tensor made, without a fault of its own, from one that is fully watched.
        implied: set[str] = set()
        for name in candidates:
            producer = graph.producer(name)
            assert producer is not None
            data = producer.inputs[0] if producer.inputs else ""
            source = graph.producer(data) if data else None
            if (
                name in watched
                and name not in sources
                and name not in scales
                and producer.op_type in _KEEPS_FINITE
                and producer.domain in ("", "ai.onnx")
                and producer.outputs[0] == name
                and source is not None
                and source.id in in_segment
                and (data in watched or data in implied)
                and not never_prune(producer)
                and not never_prune(source)
            ):
                watched.discard(name)
                implied.add(name)
    kept = [c for c in candidates if c in watched]
    big = set(large)
    # (float16: summed as float32, where its range cannot overflow; float32: scaled, as a Cast would cost as much)
    to_float = frozenset(c for c in kept if dtypes.get(c) in EXTRA_FLOATS or (c in big and dtypes.get(c) == "float16"))
    scaled = frozenset(c for c in kept if c in big and dtypes.get(c) == "float32" and c not in sources and c not in scales)
    quiet = frozenset(c for c in kept if nan_expected is not None and nan_expected(graph.producer(c)))  # type: ignore[arg-type]
    return WatchPlan(kept, guards, to_float=to_float, bounded=bounded, scales=scales, scaled=scaled, quiet_nan=quiet)


def summed(value: str, plan: WatchPlan, dtype: str, keep: Keep | None, tag: str) -> tuple[list[onnx.NodeProto], str]:
    """The nodes that make what the watch sums of ``value`` (named from ``tag``), and its name: as float32 where the CPU
    cannot sum it (``plan.to_float``), only its NaNs (``Keep.NAN``: its Inf is expected) or only its infinities
    (``Keep.INF``: its NaN is expected), and scaled down where it is large by construction (``plan.scaled``)."""
    nodes: list[onnx.NodeProto] = []
    source = value
    kind = dtype
    if value in plan.to_float:
        nodes.append(helper.make_node("Cast", [source], [f"{tag}_f32"], to=TensorProto.FLOAT))
        source, kind = f"{tag}_f32", "float32"
    if keep is not None:
        zero = numpy_helper.from_array(np.zeros((), _NUMPY.get(kind, np.float32)), f"{tag}_zero_t")
        nodes.append(helper.make_node("IsNaN", [source], [f"{tag}_isnan"]))
        nodes.append(helper.make_node("Constant", [], [f"{tag}_zero"], value=zero))
        pair = [source, f"{tag}_zero"] if keep is Keep.NAN else [f"{tag}_zero", source]
        nodes.append(helper.make_node("Where", [f"{tag}_isnan", *pair], [f"{tag}_kept"]))
        source = f"{tag}_kept"
    if value in plan.scaled:
        scale = numpy_helper.from_array(np.asarray(SCALE, np.float32), f"{tag}_scale_t")
        nodes.append(helper.make_node("Constant", [], [f"{tag}_scale"], value=scale))
        nodes.append(helper.make_node("Mul", [source, f"{tag}_scale"], [f"{tag}_scaled"]))
        source = f"{tag}_scaled"
    return nodes, source


_NUMPY = {"float32": np.float32, "float64": np.float64, "float16": np.float16}


class Keep(enum.StrEnum):
    """Which faults the sum of a node's output keeps (:func:`keeps`); None: both."""

    NAN = "nan"  # its NaNs only: its Inf is expected
    INF = "inf"  # its infinities only: its NaN is expected
    NONE = "none"  # neither counts: it is not summed


class Exclusions(Protocol):
    """What :func:`keeps` reads of a fault filter (:class:`.faults.FaultFilter`)."""

    @property
    def nan(self) -> bool: ...

    @property
    def inf(self) -> bool: ...

    def inf_excluded(self, node: Node) -> bool: ...

    def nan_excluded(self, node: Node) -> bool: ...


def keeps(filt: Exclusions, node: Node) -> Keep | None:
    """What the sum of a tensor ``node`` makes keeps for :func:`summed` (None: both)."""
    no_inf = not filt.inf or filt.inf_excluded(node)
    no_nan = not filt.nan or filt.nan_excluded(node)
    if no_inf and no_nan:
        return Keep.NONE
    return Keep.NAN if no_inf and filt.inf else Keep.INF if no_nan and filt.nan else None
