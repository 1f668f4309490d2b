"""The watch must not change what the optimized graph computes.

A watched tensor is one more consumer of it: where onnxruntime would have fused its producer with its
consumers (a DequantizeLinear -> Conv -> QuantizeLinear group into one QLinearConv, a decomposed
LayerNormalization or Gelu into one kernel), the sum keeps the tensor alive and the fusion undone, and the
watched run computes something else than the user's (for a QDQ model: a float simulation instead of int8
kernels). So a watched segment that may fuse so is checked against the graph onnxruntime makes of it
without the watch: when the nodes its own outputs need differ, the watched tensors that the plain optimized
graph does not compute are left to the nearest watched tensor downstream, as tensors a consumer's sum
guards (a fault the user's run makes shows there, and the exact check looks at them in run order).

Convolutional graphs whose watch the bounds keep fused (see :mod:`.bounds`) are not checked: only segments
with a node of :data:`FUSING`. onnxruntime's blocked layout renames the tensors between its NCHWc nodes,
so a tensor missing from the optimized graph is not proof of a fusion: the comparison of the nodes is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import onnx

from graph_dap.runtime.engine.watch import WatchPlan
from graph_dap.runtime.graph import Lookup, Node

#: Ops whose presence makes a segment's watch worth checking: quantization (Q/DQ groups fuse into integer
#: kernels) and the pieces of the normalizations, activations and attention onnxruntime fuses whole.
FUSING = frozenset(
    {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ReduceMean", "Erf", "Tanh", "Pow", "Sqrt", "Softmax", "MatMul", "Gemm"}
)
WATCH_PREFIX = "__g"  # every tensor the watch adds is named so (see .segments)
_QUANTIZE = frozenset({"QuantizeLinear", "DynamicQuantizeLinear"})


def may_fuse(nodes: Iterable[Node]) -> bool:
    """Whether a segment of ``nodes`` holds an op whose fusion a watch can undo."""
    return any(n.op_type in FUSING and n.domain in ("", "ai.onnx") for n in nodes)


def own_nodes(optimized: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The nodes of an optimized segment that its own outputs need (not the watch's, whatever onnxruntime named them)."""
    nodes = list(optimized.graph.node)
    producer = {o: k for k, n in enumerate(nodes) for o in n.output}
    needed: set[int] = set()
    frontier = [o.name for o in optimized.graph.output if not o.name.startswith(WATCH_PREFIX)]
    while frontier:
        k = producer.get(frontier.pop())
        if k is not None and k not in needed:
            needed.add(k)
            frontier.extend(nodes[k].input)
    return [nodes[k] for k in sorted(needed)]


def same_kernels(watched: onnx.ModelProto, plain: onnx.ModelProto) -> bool:
    """Whether the watched segment's optimized graph runs the plain one's kernels (the same ops, in order)."""
    return [(n.domain, n.op_type) for n in own_nodes(watched)] == [(n.domain, n.op_type) for n in plain.graph.node]


def computed(optimized: onnx.ModelProto) -> set[str]:
    """The tensors an optimized graph computes or is fed, by name."""
    return {o for n in optimized.graph.node for o in n.output if o} | {v.name for v in optimized.graph.input}


def regard(graph: Lookup, nodes: Sequence[Node], plan: WatchPlan, present: set[str]) -> WatchPlan:
    """``plan`` with the watched tensors that the plain optimized graph does not compute (``present``: what it
    does) left to the first watched tensor downstream that it computes; when none is, not watched if every
    reader quantizes it (inside an integer kernel the user's run holds no such tensor, and no fault), else
    still watched (a fused float kernel whose output could hide the fault: its activation runs apart)."""
    keep = [w for w in plan.watched if w in present or w in plan.inner]
    gone = set(plan.watched) - set(keep)
    if not gone or any(home in gone or any(y in gone for y, _ in check.terms) for home, check in plan.scales.items()):
        return plan  # (a bound's check reads a tensor that would go: its bounded tensors would be left unchecked)
    in_segment = {n.id for n in nodes}
    order = {o: n.order for n in nodes for o in n.outputs if o}
    kept = set(keep)
    guards = dict(plan.guards)
    for w in plan.watched:
        if w in kept:
            continue
        guard = _downstream(graph, w, kept, in_segment, order)
        if guard is not None:
            guards[w] = guard
        elif not all(c.op_type in _QUANTIZE for c in graph.consumers(w)):
            keep.append(w)  # a float kernel that would hide its fault (a Gemm fused with its Tanh): watched, unfused
            kept.add(w)
        # else quantized by every reader: inside the integer kernel the user's run has no such tensor, nor a fault
    for t, g in list(guards.items()):  # a tensor guarded by one no longer watched: by that one's guard
        while g not in kept and g in guards:
            g = guards[g]
        guards[t] = g
    watched = [w for w in plan.watched if w in kept]
    if watched == plan.watched:
        return plan
    kept_set = frozenset(watched)
    return WatchPlan(
        watched, guards, plan.inner, plan.rewrites, plan.to_float & kept_set, plan.bounded, plan.scales, plan.scaled & kept_set, plan.quiet_nan & kept_set
    )


def _downstream(graph: Lookup, name: str, watched: set[str], in_segment: set[str], order: dict[str, int]) -> str | None:
    """The watched tensor first in run order among those made from ``name`` in the segment."""
    seen: set[str] = set()
    frontier = [name]
    found: list[str] = []
    while frontier:
        v = frontier.pop()
        for c in graph.consumers(v):
            if c.id not in in_segment:
                continue
            for o in c.outputs:
                if o and o not in seen:
                    seen.add(o)
                    if o in watched:
                        found.append(o)
                    else:
                        frontier.append(o)
    return min(found, key=order.__getitem__) if found else None
