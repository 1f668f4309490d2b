"""The graph model: nodes in run order, their ids, values, producers and consumers.

A :class:`Graph` is built once from an ONNX model and never changes; everything a
debugger needs to name (a node, a value, its producer) is looked up here. Names
follow onnx_ir: ``node.op_type``, ``node.inputs``, ``graph.producer(value)``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

from graph_dap.errors import ModelError, NodeNotFoundError
from graph_dap.runtime.tensor import numel

CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan"})
#: Nodes whose output must not be folded once: they differ on every run.
_NONDETERMINISTIC_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)

_DTYPE_NAMES: dict[int, str] = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.INT16: "int16",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.UINT8: "uint8",
    onnx.TensorProto.UINT16: "uint16",
    onnx.TensorProto.UINT32: "uint32",
    onnx.TensorProto.UINT64: "uint64",
    onnx.TensorProto.BOOL: "bool",
    onnx.TensorProto.STRING: "string",
    onnx.TensorProto.COMPLEX64: "complex64",
    onnx.TensorProto.COMPLEX128: "complex128",
}

Dim = int | str | None


@dataclass(frozen=True, slots=True)
class ValueInfo:
    """What the model declares (or shape inference found) about one value."""

    name: str
    dtype: str | None = None  # numpy-style name ("float32"), None when unknown
    shape: tuple[Dim, ...] | None = None  # None: rank unknown; str: symbolic dim
    kind: str = "tensor"  # "tensor", "sequence", "map", "optional" or "unknown"

    @property
    def numel(self) -> int | None:
        """Elements of a tensor of this type; None when the rank or a dimension is unknown."""
        if self.kind != "tensor" or self.shape is None or not all(isinstance(d, int) for d in self.shape):
            return None
        return numel(self.shape)  # type: ignore[arg-type]

    @property
    def nbytes(self) -> int | None:
        """Bytes of a tensor of this type; None when its dtype or a dimension is unknown."""
        n = self.numel
        if n is None or self.dtype in (None, "string"):
            return None
        return n * (2 if self.dtype == "bfloat16" else np.dtype(self.dtype).itemsize)

    def type_text(self) -> str:
        """``float32[1,3,H,W]``-style text; ``?`` for what is unknown."""
        dtype = self.dtype or "?"
        if self.kind == "sequence":
            return f"seq({dtype})"
        if self.shape is None:
            return dtype
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{dtype}[{dims}]"


@dataclass(frozen=True, slots=True)
class Node:
    """One node of the top-level graph, in run order."""

    id: str
    index: int  # position in the file's graph.node list (0-based)
    order: int  # position in run (topological) order
    op_type: str
    domain: str
    inputs: tuple[str, ...]  # '' marks an omitted optional input
    outputs: tuple[str, ...]
    implicit_inputs: tuple[str, ...]  # outer-scope values read by subgraphs
    attributes: dict[str, Any] = field(compare=False, hash=False)
    proto: onnx.NodeProto = field(compare=False, hash=False, repr=False)
    is_static: bool = False
    metadata: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def all_inputs(self) -> tuple[str, ...]:
        """Explicit inputs, then outer-scope values read by subgraphs; no empty names."""
        return tuple(dict.fromkeys([n for n in self.inputs if n] + list(self.implicit_inputs)))

    @property
    def has_subgraphs(self) -> bool:
        return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in self.proto.attribute)

    @property
    def label(self) -> str:
        return f"{self.id} ({self.op_type})"

    @property
    def is_constant_op(self) -> bool:
        """An ONNX ``Constant`` node (onnxruntime turns its output into an initializer at load)."""
        return self.op_type == "Constant" and self.domain in ("", "ai.onnx")


class Graph:
    """An ONNX model's top-level graph, ready to be stepped through."""

    def __init__(
        self,
        model: onnx.ModelProto,
        path: Path | None = None,
        inferred: dict[str, ValueInfo] | None = None,
        notes: tuple[str, ...] = (),
    ) -> None:
        """The IR of ``model``; ``inferred``: what shape inference found (see :mod:`.loading`)."""
        self.model = model
        self.path = path
        self.notes = notes  # what went wrong while loading but did not stop it (shown in the listing)
        g = model.graph
        self.name = g.name
        self.opsets: dict[str, int] = {o.domain or "ai.onnx": o.version for o in model.opset_import}
        self.initializer_names: tuple[str, ...] = tuple(t.name for t in g.initializer)
        inits = set(self.initializer_names)
        self.inputs: tuple[ValueInfo, ...] = tuple(_value_info(v) for v in g.input if v.name not in inits)
        self.outputs: tuple[ValueInfo, ...] = tuple(_value_info(v) for v in g.output)
        self._infos: dict[str, ValueInfo] = {}
        for v in list(g.input) + list(g.output) + list(g.value_info):
            self._infos[v.name] = _value_info(v)
        for t in g.initializer:
            self._infos[t.name] = ValueInfo(t.name, _DTYPE_NAMES.get(t.data_type), tuple(t.dims))
        for name, info in (inferred or {}).items():
            if name not in self._infos or self._infos[name].shape is None:
                self._infos[name] = info

        self.nodes: tuple[Node, ...] = self._order_nodes(g)
        self._by_id = {n.id: n for n in self.nodes}
        self._producer: dict[str, Node] = {}
        self._consumers: dict[str, list[Node]] = {}
        for n in self.nodes:
            for o in n.outputs:
                if o:
                    self._producer[o] = n
            for i in dict.fromkeys(n.all_inputs):
                self._consumers.setdefault(i, []).append(n)

    # -- building ------------------------------------------------------------------

    def _order_nodes(self, g: onnx.GraphProto) -> tuple[Node, ...]:
        protos = list(g.node)
        ids = _node_ids(protos)
        available = {v.name for v in g.input} | set(self.initializer_names)
        implicit = [tuple(sorted(_outer_scope_reads(p))) for p in protos]
        producer_index: dict[str, int] = {}
        for i, p in enumerate(protos):
            for o in p.output:
                if o:
                    if o in producer_index or o in available:
                        raise ModelError(f"value '{o}' is produced twice (again by node {ids[i]}); a graph must assign each value once")
                    producer_index[o] = i
        deps: list[set[int]] = []
        for i, p in enumerate(protos):
            d: set[int] = set()
            for name in [n for n in p.input if n] + list(implicit[i]):
                if name in producer_index:
                    d.add(producer_index[name])
                elif name not in available:
                    raise ModelError(f"node {ids[i]} ({p.op_type}) reads '{name}', which no node, graph input or initializer provides")
            deps.append(d)
        # Kahn's algorithm, taking the lowest file index first so a sorted file keeps its order.
        users: list[list[int]] = [[] for _ in protos]
        missing = [len(d) for d in deps]
        for i, d in enumerate(deps):
            for j in d:
                users[j].append(i)
        ready = [i for i, m in enumerate(missing) if m == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for u in users[i]:
                missing[u] -= 1
                if missing[u] == 0:
                    heapq.heappush(ready, u)
        if len(order) != len(protos):
            stuck = min(i for i, m in enumerate(missing) if m > 0)
            raise ModelError(f"the graph has a cycle through node {ids[stuck]} ({protos[stuck].op_type})")

        static_values: set[str] = set(self.initializer_names)
        nodes: list[Node] = []
        for pos, i in enumerate(order):
            p = protos[i]
            reads = [n for n in p.input if n] + list(implicit[i])
            static = p.op_type not in _NONDETERMINISTIC_OPS and all(r in static_values for r in reads)
            if static:
                static_values.update(o for o in p.output if o)
            nodes.append(
                Node(
                    id=ids[i],
                    index=i,
                    order=pos,
                    op_type=p.op_type,
                    domain=p.domain,
                    inputs=tuple(p.input),
                    outputs=tuple(p.output),
                    implicit_inputs=implicit[i],
                    attributes={a.name: _attribute_value(a) for a in p.attribute},
                    proto=p,
                    is_static=static,
                    metadata={m.key: m.value for m in p.metadata_props},
                )
            )
        return tuple(nodes)

    # -- lookups -------------------------------------------------------------------

    def node(self, node_id: str) -> Node:
        try:
            return self._by_id[node_id]
        except KeyError:
            raise NodeNotFoundError(f"no node '{node_id}' in the graph") from None

    def has_node(self, node_id: str) -> bool:
        return node_id in self._by_id

    def producer(self, value: str) -> Node | None:
        """The node that computes ``value``; None for graph inputs and initializers."""
        return self._producer.get(value)

    def consumers(self, value: str) -> list[Node]:
        return list(self._consumers.get(value, ()))

    def has_value(self, name: str) -> bool:
        return name in self._producer or name in self._infos

    def value_names(self) -> list[str]:
        """Every value: graph inputs, initializers, then node outputs in run order."""
        names = [v.name for v in self.inputs] + list(self.initializer_names)
        names += [o for n in self.nodes for o in n.outputs if o]
        return list(dict.fromkeys(names))

    def value_info(self, name: str) -> ValueInfo:
        return self._infos.get(name) or ValueInfo(name)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.outputs)

    def downstream(self, names: Iterable[str]) -> list[Node]:
        """Every node that depends, directly or not, on any of ``names``; in run order."""
        seen: set[str] = set()
        frontier = list(names)
        hit: dict[int, Node] = {}
        while frontier:
            v = frontier.pop()
            if v in seen:
                continue
            seen.add(v)
            for c in self._consumers.get(v, ()):
                if c.order not in hit:
                    hit[c.order] = c
                    frontier.extend(o for o in c.outputs if o)
        return [hit[k] for k in sorted(hit)]


def _node_ids(protos: list[onnx.NodeProto]) -> list[str]:
    """``node.name`` where non-empty and unique, else ``{op_type}_{index}``, made unique."""
    counts: dict[str, int] = {}
    for p in protos:
        if p.name:
            counts[p.name] = counts.get(p.name, 0) + 1
    taken = {name for name, c in counts.items() if c == 1}
    ids: list[str] = []
    for i, p in enumerate(protos):
        if p.name and counts[p.name] == 1:
            ids.append(p.name)
            continue
        base = f"{p.op_type}_{i}"
        candidate, k = base, 1
        while candidate in taken:
            candidate = f"{base}_{k}"
            k += 1
        taken.add(candidate)
        ids.append(candidate)
    return ids


def _outer_scope_reads(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs read from enclosing scopes."""
    reads: set[str] = set()
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        for sub in graphs:
            reads |= _free_names(sub)
    return reads


def _free_names(g: onnx.GraphProto) -> set[str]:
    defined = {v.name for v in g.input} | {t.name for t in g.initializer} | {t.name for t in g.sparse_initializer}
    free: set[str] = set()
    for n in g.node:
        for i in n.input:
            if i and i not in defined:
                free.add(i)
        for inner in _outer_scope_reads(n):
            if inner not in defined:
                free.add(inner)
        defined.update(n.output)
    for o in g.output:
        if o.name not in defined:
            free.add(o.name)
    return free


def _attribute_value(a: onnx.AttributeProto) -> Any:
    if a.type == onnx.AttributeProto.GRAPH:
        return f"<graph {a.g.name or a.name}: {len(a.g.node)} nodes>"
    if a.type == onnx.AttributeProto.GRAPHS:
        return [f"<graph {g.name}: {len(g.node)} nodes>" for g in a.graphs]
    if a.type == onnx.AttributeProto.TENSOR:
        t = a.t
        return f"<tensor {_DTYPE_NAMES.get(t.data_type, '?')}[{','.join(map(str, t.dims))}]>"
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list):
        return [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v]
    return v


def _value_info(v: onnx.ValueInfoProto) -> ValueInfo:
    t = v.type
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        tt = t.tensor_type
        shape: tuple[Dim, ...] | None = None
        if tt.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim
            )
        return ValueInfo(v.name, _DTYPE_NAMES.get(tt.elem_type), shape)
    if kind == "sequence_type":
        elem = t.sequence_type.elem_type
        dtype = _DTYPE_NAMES.get(elem.tensor_type.elem_type) if elem.HasField("tensor_type") else None
        return ValueInfo(v.name, dtype, None, "sequence")
    if kind in ("map_type", "optional_type"):
        return ValueInfo(v.name, None, None, kind.split("_")[0])
    return ValueInfo(v.name, None, None, "unknown")


def dtype_name(elem_type: int) -> str | None:
    """numpy-style name of an ONNX element type."""
    return _DTYPE_NAMES.get(elem_type)
