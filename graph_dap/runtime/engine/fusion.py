"""What onnxruntime's optimizer made of a model: each optimized node with the original nodes it came from.

:func:`derive_fused` reads the origins off the data flow (and the names onnxruntime gives the nodes it makes);
:class:`Fusions` answers, for a session, where a value the run did not keep is computed at its level (inside
which optimized node), so that a recomputed value can say so.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import onnxruntime as ort

from graph_dap import log as _log
from graph_dap.kinds import OptLevel
from graph_dap.runtime.engine import cache
from graph_dap.runtime.engine.options import ORT_ERRORS, session_options
from graph_dap.runtime.graph import Graph, Node

SMALL_BYTES = 64 << 20  # larger models are not optimized a second time only to say where values went
_logger = _log.get_logger(__name__)


def named_by_id(graph: Graph) -> onnx.ModelProto:
    """A copy of the model whose nodes are named by their graph-dap ids (the graph's own protos stay as they are)."""
    model = onnx.ModelProto()
    model.CopyFrom(graph.model)
    ids = {n.index: n.id for n in graph.nodes}
    for index, proto in enumerate(model.graph.node):
        proto.name = ids[index]
    return model


@dataclass(frozen=True, slots=True)
class FusedNode:
    """A node of the optimized graph and the original nodes it came from (run order; empty: not derivable)."""

    name: str
    op_type: str
    domain: str
    origin: tuple[str, ...]
    index: int | None  # the original node's index when this node is the model's own, unchanged

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "op_type": self.op_type, "domain": self.domain, "from": list(self.origin), "index": self.index}


@dataclass(frozen=True, slots=True)
class FusedGraph:
    """What onnxruntime's optimizer turned the model into."""

    opt_level: str
    nodes: tuple[FusedNode, ...]
    removed: tuple[str, ...]  # original nodes found in no optimized node's origin (folded into initializers, ...)
    original_nodes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "opt_level": self.opt_level,
            "nodes": [n.to_dict() for n in self.nodes],
            "removed": list(self.removed),
            "original_nodes": self.original_nodes,
        }

    def by_name(self) -> dict[str, FusedNode]:
        return {n.name: n for n in self.nodes}

    def text(self) -> str:
        lines = [
            f"# onnxruntime's optimized graph at level '{self.opt_level}': {len(self.nodes)} nodes from {self.original_nodes}"
        ]
        for n in self.nodes:
            op = f"{n.domain}.{n.op_type}" if n.domain else n.op_type
            lines.append(f"{n.name} ({op})  <- {origin_text(n.origin)}")
        if self.removed:
            lines.append(
                f"# {len(self.removed)} original nodes appear in no optimized node (folded into initializers or eliminated): "
                + ", ".join(self.removed[:20])
                + (" ..." if len(self.removed) > 20 else "")
            )
        return "\n".join(lines)


def origin_text(origin: Sequence[str], limit: int = 6) -> str:
    if not origin:
        return "(not derivable: inserted by the optimizer)"
    shown = ", ".join(origin[:limit])
    return shown + (f" and {len(origin) - limit} more" if len(origin) > limit else "")


_HINT_SUFFIXES = re.compile(r"(_nchwc|_token_\d+|/[A-Za-z]+Fusion[A-Za-z]*|_fused.*|_Fused.*)$")


def derive_fused(graph: Graph, optimized: onnx.ModelProto, opt_level: str) -> FusedGraph:
    """Which original nodes each optimized node came from, read off the data flow.

    a node's origin is the original nodes between the original values it produces
    (or its name points at) and the original values available to it, leaving out
    constant-foldable nodes (their results are initializers of the optimized graph).
    Each original node goes to the first optimized node (in the optimized graph's
    order) that reaches it, so the origins do not overlap.
    """
    orig_outputs = {o for n in graph.nodes for o in n.outputs if o}
    opt_nodes = list(optimized.graph.node)
    present = {t.name for t in optimized.graph.initializer} | {v.name for v in optimized.graph.input}
    for p in opt_nodes:
        present.update(o for o in p.output if o)

    def hint(p: onnx.NodeProto) -> list[str]:
        """Original values that an optimized node's name points at."""
        for cand in (p.name, _HINT_SUFFIXES.sub("", p.name)):
            if cand and graph.has_node(cand):
                return [o for o in graph.node(cand).outputs if o]
            if cand in orig_outputs:
                return [cand]
        return []

    anchors: list[list[str]] = []
    for p in opt_nodes:
        own = [o for o in p.output if o in orig_outputs]
        anchors.append(list(dict.fromkeys(own + hint(p))))
    stop = {v for v in present if v in orig_outputs} | set(graph.input_names) | set(graph.initializer_names)
    for a in anchors:
        stop.update(a)

    fused: list[FusedNode] = []
    covered: set[str] = set()
    for p, anchor in zip(opt_nodes, anchors):
        seen: dict[int, Node] = {}
        frontier = [graph.producer(v) for v in anchor]
        while frontier:
            n = frontier.pop()
            if n is None or n.order in seen:
                continue
            seen[n.order] = n
            for i in n.all_inputs:
                if i not in stop:
                    frontier.append(graph.producer(i))
        # Constant-foldable nodes became initializers: the node uses their values, it does not compute them.
        # An original node already claimed by an earlier optimized node stays with that one.
        origin = tuple(seen[k].id for k in sorted(seen) if not seen[k].is_constant and seen[k].id not in covered)
        covered.update(origin)
        index = None
        if len(origin) == 1 and graph.has_node(p.name) and graph.node(p.name).op_type == p.op_type and p.name == origin[0]:
            index = graph.node(p.name).index
        fused.append(FusedNode(p.name, p.op_type, p.domain, origin, index))
    removed = tuple(n.id for n in graph.nodes if n.id not in covered)
    return FusedGraph(opt_level, tuple(fused), removed, len(graph.nodes))


class Fusions:
    """Where each original value is computed in onnxruntime's optimized graph of the whole model."""

    def __init__(self, graph: Graph, fused: FusedGraph, optimized: onnx.ModelProto) -> None:
        self.opt_level = fused.opt_level
        self.present = {o for p in optimized.graph.node for o in p.output if o}
        # Origins are sure where the optimized node writes an original value (a fusion writes its last node's
        # output); a node of the blocked layout writes renamed tensors, and its origin is read off its name.
        named = {p.name for p in optimized.graph.node if any(graph.has_value(o) and graph.producer(o) is not None for o in p.output)}
        self._into = {nid: n for n in fused.nodes if n.name in named for nid in n.origin}

    def absent(self, value: str) -> bool:
        """Whether the optimized graph has no tensor of that name (fused into a kernel, or in the blocked layout)."""
        return value not in self.present

    def fused_into(self, node: Node, value: str) -> FusedNode | None:
        """The optimized node that ``value`` (made by ``node``) is fused into, when the optimized graph has no tensor of
        that name and the optimized node that computes it is known for sure; else None."""
        return self._into.get(node.id) if value not in self.present else None


def whole_model_fusions(graph: Graph, opt_level: str, providers: list[str]) -> Fusions | None:
    """:class:`Fusions` of the whole model at ``opt_level`` (its optimized graph kept on disk as segments' are);
    None for a model with external data or over :data:`SMALL_BYTES`, or one onnxruntime cannot optimize."""
    if opt_level == OptLevel.NONE or graph.weights.has_external or graph.model.ByteSize() > SMALL_BYTES:
        return None
    data = named_by_id(graph).SerializeToString()
    entry = cache.key(data, opt_level, providers)
    path = cache.lookup(entry)
    with tempfile.TemporaryDirectory(prefix="graph-dap-whole-") as tmp:
        if path is None:
            saving = cache.target(entry)
            target = saving[0] if saving is not None else Path(tmp) / "optimized.onnx"
            so = session_options(opt_level)
            so.optimized_model_filepath = str(target)
            try:
                ort.InferenceSession(data, so, providers=providers)
            except ORT_ERRORS as e:
                _logger.info("the whole model could not be optimized to say where its values went: %s", e)
                return None
            if saving is not None:
                cache.commit(*saving)
                path = saving[1] if saving[1].is_file() else target
            else:
                path = target
        if not path.is_file():
            return None
        optimized = onnx.load(str(path), load_external_data=False)
    return Fusions(graph, derive_fused(graph, optimized, opt_level), optimized)
