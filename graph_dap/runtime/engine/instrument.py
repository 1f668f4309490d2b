"""The NaN/Inf watch inside If, Loop and Scan bodies, so a segment still runs them in one call.

:func:`instrument` rewrites a control-flow node so that it also outputs a *flag*: a
float32 ``[1]`` that is non-finite iff some watched tensor inside it (in the taken
branch, in any iteration, in nested bodies) holds a NaN or an Inf. Each branch or body
sums its watched tensors (pruned by the same propagation rules as a segment) and its
nested nodes' flags into one more output: an If's branches output it directly, a Loop
or Scan body outputs it as one more scan output, which is summed over the iterations.
The node's own outputs are untouched, so its values stay onnxruntime's. A flag that
fires only says "inside this node": the session then steps into it to find the node,
the iteration and the exact tensor.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graph_dap.kinds import ValueKind
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.watch import Keep, keeps, summed, watch_plan
from graph_dap.runtime.graph import Graph, Node, Scope

_counter = itertools.count()


@dataclass(frozen=True, slots=True)
class Instrumented:
    """A control-flow node rewritten to output a flag too."""

    protos: tuple[onnx.NodeProto, ...]  # the rewritten node, then what turns its extra output into ``flag``
    flag: str  # a float32 [1]: non-finite iff something watched inside holds NaN/Inf


def instrumentable(graph: Graph, node: Node) -> bool:
    """Whether every tensor inside ``node`` has a known type (so the watch knows what to sum) and no function call."""
    if not node.enterable or node.calls is not None:
        return False
    for scope in graph.subscopes(node):
        for inner in scope.nodes:
            if inner.calls is not None or (inner.has_subgraphs and not instrumentable(graph, inner)):
                return False
            for o in inner.outputs:
                info = scope.value_info(o) if o else None
                if info is not None and (info.kind == ValueKind.UNKNOWN or (info.kind == ValueKind.TENSOR and info.dtype is None)):
                    return False
    return True


def instrument(graph: Graph, node: Node, filt: FaultFilter) -> Instrumented:
    """``node`` (an instrumentable If, Loop or Scan) with a flag output; see the module's docstring."""
    tag = f"__gd_f{next(_counter)}"
    proto = onnx.NodeProto()
    proto.CopyFrom(node.proto)
    extra: list[onnx.NodeProto] = []
    flag = f"{tag}_flag"
    if node.op_type == "If":
        for attribute in proto.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                scope = graph.subscope(node, attribute.name)
                attribute.g.CopyFrom(_flagged_graph(graph, scope, attribute.g, filt, f"{tag}_{attribute.name}", flag))
        proto.output.append(flag)
        return Instrumented((proto,), flag)
    for attribute in proto.attribute:
        if attribute.name == "body":
            scope = graph.subscope(node, "body")
            attribute.g.CopyFrom(_flagged_graph(graph, scope, attribute.g, filt, f"{tag}_body", f"{tag}_step"))
    if node.op_type == "Scan":
        for name in ("scan_output_axes", "scan_output_directions"):
            for attribute in proto.attribute:
                if attribute.name == name:
                    attribute.ints.append(0)
    steps = f"{tag}_steps"
    proto.output.append(steps)
    total = f"{tag}_total"
    extra.append(helper.make_node("ReduceSum", [steps], [total], keepdims=0))
    extra.append(helper.make_node("Reshape", [total, _shape1(extra, tag)], [flag]))
    return Instrumented((proto, *extra), flag)


def _shape1(nodes: list[onnx.NodeProto], tag: str) -> str:
    name = f"{tag}_shape1"
    nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array([1], np.int64), name + "_t")))
    return name


def _flagged_graph(graph: Graph, scope: Scope, g: onnx.GraphProto, filt: FaultFilter, tag: str, output: str) -> onnx.GraphProto:
    """A copy of subgraph ``g`` (of ``scope``) that also outputs ``output``: the sum of its watched tensors' sums."""
    out = onnx.GraphProto()
    out.CopyFrom(g)
    del out.node[:]
    parts: list[str] = []
    tail: list[onnx.NodeProto] = []  # each watched tensor is summed right after its producer
    shape = _shape1(tail, tag)
    out.node.extend(tail)
    tail.clear()
    by_index = {n.index: n for n in scope.nodes}
    dtypes = {o: scope.value_info(o).dtype or "" for n in scope.nodes for o in n.outputs if o}
    plan = watch_plan(scope, scope.nodes, dtypes, filt.never_prune, filt.nan, filt.inf, large=filt.intent.large, nan_expected=filt.nan_excluded)
    watched = set(plan.watched)
    for index, original in enumerate(g.node):
        node = by_index[index]
        if node.enterable and node.calls is None:
            inner = instrument(graph, node, filt)
            out.node.extend(inner.protos)
            parts.append(inner.flag)
        else:
            out.node.append(original)
        out.node.extend(tail)
        tail.clear()
        for o in node.outputs:
            if o not in watched:
                continue
            keep = keeps(filt, node)
            if keep is Keep.NONE:
                continue
            made, source = summed(o, plan, dtypes[o], keep, f"{tag}_w{len(parts)}")
            tail.extend(made)
            k = len(parts)
            s, c = f"{tag}_s{k}", f"{tag}_c{k}"
            tail.append(helper.make_node("ReduceSum", [source], [s], keepdims=0))
            tail.append(helper.make_node("Cast", [s], [c], to=TensorProto.FLOAT))  # (none for float32: onnxruntime drops it)
            parts.append(c)
        out.node.extend(tail)
        tail.clear()
    if parts:
        # One Sum of the scalar sums and the nested flags: NaN or Inf in any makes it non-finite
        # (+Inf and -Inf make NaN), as a Concat and ReduceSum would, in one node.
        both = f"{tag}_all"
        tail.append(helper.make_node("Sum", parts, [both]))
        tail.append(helper.make_node("Reshape", [both, shape], [output]))
    else:
        tail.append(helper.make_node("Constant", [], [output], value=numpy_helper.from_array(np.zeros(1, np.float32), output + "_t")))
    out.node.extend(tail)
    out.output.append(helper.make_tensor_value_info(output, TensorProto.FLOAT, [1]))
    return out


class Instruments:
    """Instrumented control-flow nodes of one graph, built once per node and filter."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._done: dict[tuple[str, FaultFilter], Instrumented] = {}
        self._can: dict[str, bool] = {}

    def can(self, node: Node) -> bool:
        if node.id not in self._can:
            self._can[node.id] = instrumentable(self.graph, node)
        return self._can[node.id]

    def get(self, node: Node, filt: FaultFilter) -> Instrumented:
        key = (node.id, filt)
        if key not in self._done:
            self._done[key] = instrument(self.graph, node, filt)
        return self._done[key]

