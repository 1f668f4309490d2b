"""Running many nodes in one onnxruntime call, optionally watched for NaN and Inf.

A *segment* is a set of nodes (a contiguous run, or the ancestors of some values)
built into one model whose inputs are the values it reads from outside and whose
outputs are exactly what the caller needs afterwards. Constants and initializers
are embedded so onnxruntime can pre-pack weights as it does for the whole model.

Watching adds, right after each watched tensor's producer, ``ReduceSum`` to a
scalar; all scalars are concatenated into one small extra output. A sum is
non-finite iff the tensor holds NaN or Inf, except that a sum of large finite
values can overflow: hits are always confirmed on the exact tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from .engine import _ort_message, _signature, _tensor_proto, session_options, type_proto_of
from .graph import Graph, Node

SENTINEL = "__graph_dap_sentinel"
_WATCHABLE = {"float32", "float64", "float16"}

# Ops that carry a NaN or Inf in the given input positions on to their output
# (None: every input). A tensor whose consumer is such an op, with its output
# watched, need not be watched itself: the consumer's sum shows the fault.
_PROPAGATES: dict[str, tuple[int, ...] | None] = {
    "Add": None,
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


def propagates(graph: Graph, consumer: Node, value: str) -> bool:
    """True when a NaN/Inf anywhere in ``value`` always makes ``consumer``'s first output non-finite."""
    if consumer.domain not in ("", "ai.onnx") or consumer.op_type not in _PROPAGATES:
        return False
    positions = _PROPAGATES[consumer.op_type]
    where = [i for i, name in enumerate(consumer.inputs) if name == value]
    if not where:
        return False  # read by a subgraph only
    if positions is not None and not all(i in positions for i in where):
        return False
    out = consumer.outputs[0] if consumer.outputs else ""
    if not out or _numel(graph.value_info(out).shape) == 0:
        return False
    op = consumer.op_type
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


def _numel(shape: tuple[Any, ...] | None) -> int | None:
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    n = 1
    for d in shape:
        n *= d
    return n


def _no_zero_dims(graph: Graph, names: Sequence[str]) -> bool:
    for name in names:
        shape = graph.value_info(name).shape
        if shape is None or not all(isinstance(d, int) and d > 0 for d in shape):
            return False
    return True


def _windows_cover(graph: Graph, node: Node) -> bool:
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


@dataclass(frozen=True, slots=True)
class WatchPlan:
    """The tensors summed in-graph, and for each pruned tensor the watched one that shows its fault."""

    watched: list[str]
    guards: dict[str, str]


def watch_plan(graph: Graph, nodes: Sequence[Node], dtypes: Mapping[str, str], never_prune: Callable[[Node], bool]) -> WatchPlan:
    """Tensors to watch among ``nodes``' outputs, pruned where a watched consumer shows the fault."""
    candidates: list[str] = []
    for n in nodes:
        for o in n.outputs:
            if o and dtypes.get(o) in _WATCHABLE:
                candidates.append(o)
    in_segment = {n.id for n in nodes}
    watched: set[str] = set()
    guards: dict[str, str] = {}
    # Decide from the last tensor back, so a consumer's own status is known first.
    for name in reversed(candidates):
        producer = graph.producer(name)
        assert producer is not None
        if not never_prune(producer) and name not in graph.output_names:
            for c in graph.consumers(name):
                out = c.outputs[0] if c.outputs else ""
                if c.id in in_segment and (out in watched or out in guards) and propagates(graph, c, name):
                    guards[name] = out if out in watched else guards[out]
                    break
        if name not in guards:
            watched.add(name)
    return WatchPlan([c for c in candidates if c in watched], guards)


@dataclass(slots=True)
class SegmentResult:
    values: dict[str, Any]
    watched: list[str]  # the watched tensors, in the order of ``sums``
    sums: np.ndarray | None  # one float32 sum per watched tensor


class SegmentRunner:
    """Builds and caches one session per (node set, outputs, watch plan, input types)."""

    def __init__(self, graph: Graph, providers: list[str], opt_level: str) -> None:
        self.graph = graph
        self.providers = providers
        self.opt_level = opt_level
        self._sessions: dict[tuple[Any, ...], tuple[ort.InferenceSession, list[str], list[str]]] = {}
        self.sessions_built = 0

    def clear(self) -> None:
        self._sessions.clear()

    def run(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outputs: Iterable[str],
        watch: WatchPlan | None = None,
        run_options: ort.RunOptions | None = None,
        version: int = 0,
    ) -> SegmentResult:
        """Run ``nodes`` (in run order); ``constants`` are embedded, ``feeds`` fed."""
        outs = list(dict.fromkeys(outputs))
        key = (
            tuple(n.order for n in nodes),
            tuple(outs),
            tuple(watch.watched) if watch else (),
            tuple((k, _signature(v)) for k, v in sorted(feeds.items())),
            version,
        )
        entry = self._sessions.get(key)
        if entry is None:
            model, watched = self.build_model(nodes, feeds, constants, outs, watch.watched if watch else ())
            try:
                sess = ort.InferenceSession(model.SerializeToString(), self._options(), providers=self.providers)
            except Exception as e:
                raise SegmentError(_ort_message(e)) from None
            fetch = outs + ([SENTINEL] if watched else [])
            entry = (sess, fetch, watched)
            self._sessions[key] = entry
            self.sessions_built += 1
        sess, fetch, watched = entry
        try:
            results = sess.run(fetch, dict(feeds), run_options)
        except Exception as e:
            raise SegmentError(_ort_message(e)) from None
        values = dict(zip(outs, results[: len(outs)]))
        return SegmentResult(values, watched, results[-1] if watched else None)

    def _options(self) -> ort.SessionOptions:
        so = session_options(self.opt_level)
        so.execution_order = ort.ExecutionOrder.PRIORITY_BASED
        return so

    def build_model(
        self,
        nodes: Sequence[Node],
        feeds: Mapping[str, Any],
        constants: Mapping[str, Any],
        outputs: Sequence[str],
        watch: Sequence[str],
    ) -> tuple[onnx.ModelProto, list[str]]:
        """The segment's model and the watched tensors in the order of its sentinel."""
        m = self.graph.model
        produced = {o for n in nodes for o in n.outputs if o}
        reads = list(dict.fromkeys(i for n in nodes for i in n.all_inputs if i not in produced))
        inputs = [helper.make_value_info(r, type_proto_of(feeds[r])) for r in reads if r in feeds]
        inits = [_tensor_proto(r, constants[r]) for r in reads if r not in feeds]
        watch_set = set(watch)
        node_protos: list[onnx.NodeProto] = []
        sums: list[str] = []
        watched: list[str] = []
        if watch:
            inits.append(numpy_helper.from_array(np.array([1], np.int64), "__graph_dap_shape1"))
        for n in nodes:
            node_protos.append(n.proto)
            for o in n.outputs:
                if o in watch_set:
                    i = len(sums)
                    s, c, r = f"__gd_sum{i}", f"__gd_cast{i}", f"__gd_r{i}"
                    node_protos.append(helper.make_node("ReduceSum", [o], [s], keepdims=0))
                    node_protos.append(helper.make_node("Cast", [s], [c], to=TensorProto.FLOAT))
                    node_protos.append(helper.make_node("Reshape", [c, "__graph_dap_shape1"], [r]))
                    sums.append(r)
                    watched.append(o)
        out_infos = [helper.make_value_info(o, onnx.TypeProto()) for o in outputs]
        if sums:
            node_protos.append(helper.make_node("Concat", sums, [SENTINEL], axis=0))
            out_infos.append(helper.make_value_info(SENTINEL, onnx.TypeProto()))
        g = helper.make_graph(node_protos, "segment", inputs, out_infos, inits)
        model = helper.make_model(g, opset_imports=list(m.opset_import), ir_version=max(m.ir_version, 4))
        model.functions.extend(m.functions)
        return model, watched


class SegmentError(Exception):
    """onnxruntime could not build or run a segment; the caller falls back to single nodes."""




