"""The graph model: scopes of nodes in run order, their ids, values, producers and consumers.

A :class:`Graph` is built once from an ONNX model and never changes; everything a
debugger needs to name (a node, a value, its producer) is looked up here. Names
follow onnx_ir: ``node.op_type``, ``node.inputs``, ``graph.producer(value)``.

A model is a tree of :class:`Scope` s: the main graph, and for every If, Loop and Scan
node the graphs of its attributes (``then_branch``, ``else_branch``, ``body``), and for
every call of a model-local function its body at that call site. A node's ``path``
names the scopes it is nested in, outermost first; ``Graph`` answers for the main
scope as before and finds nodes of every scope by id.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx
from onnx import helper

from graph_dap.errors import ModelError, NodeNotFoundError
from graph_dap.runtime.dtypes import dtype_of
from graph_dap.runtime.tensor import numel
from graph_dap.runtime.weights import Weights

if TYPE_CHECKING:
    from graph_dap.runtime.source import SourceMap

CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan"})
#: Nodes whose output must not be folded once: they differ on every run.
_NONDETERMINISTIC_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)
_MAX_CALL_DEPTH = 64  # nested calls of model-local functions

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
    onnx.TensorProto.FLOAT8E4M3FN: "float8_e4m3fn",
    onnx.TensorProto.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    onnx.TensorProto.FLOAT8E5M2: "float8_e5m2",
    onnx.TensorProto.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    onnx.TensorProto.INT4: "int4",
    onnx.TensorProto.UINT4: "uint4",
}

Dim = int | str | None


@dataclass(frozen=True, slots=True)
class ValueInfo:
    """What the model declares (or shape inference found) about one value."""

    name: str
    dtype: str | None = None  # numpy-style name ("float32"), None when unknown
    shape: tuple[Dim, ...] | None = None  # None: rank unknown; str: symbolic dim; None in it: unknown dim
    kind: str = "tensor"  # "tensor", "sequence", "map", "optional" or "unknown"
    proto: onnx.TypeProto | None = field(default=None, compare=False, hash=False, repr=False)  # as the model declares it

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
        return n * dtype_of(self.dtype).itemsize

    def type_text(self) -> str:
        """``float32[1,3,H,W]``-style text; ``?`` for what is unknown."""
        dtype = self.dtype or "?"
        if self.kind == "sequence":
            return f"seq({dtype})"
        if self.kind == "optional":
            return f"optional({dtype})"
        if self.shape is None:
            return dtype
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{dtype}[{dims}]"


@dataclass(frozen=True, slots=True)
class ScopeStep:
    """One level of nesting: the node that holds a graph, and which of its graphs."""

    node: str  # id of the If/Loop/Scan node or of the call of a model-local function
    attribute: str  # "then_branch", "else_branch", "body", or the function's name


ScopePath = tuple[ScopeStep, ...]


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a scope, in run order."""

    id: str
    index: int  # position in its own graph's node list (0-based)
    order: int  # position in its scope's run (topological) order
    op_type: str
    domain: str
    inputs: tuple[str, ...]  # '' marks an omitted optional input
    outputs: tuple[str, ...]
    implicit_inputs: tuple[str, ...]  # outer-scope values read by subgraphs
    attributes: dict[str, Any] = field(compare=False, hash=False)
    proto: onnx.NodeProto = field(compare=False, hash=False, repr=False)
    is_static: bool = False
    metadata: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    name: str = ""  # the node's own name in the model ('' when it has none)
    path: ScopePath = ()  # the scopes it is nested in, outermost first; () in the main graph
    calls: str | None = None  # the name of the model-local function it calls
    enterable: bool = False  # an If, a Loop, a Scan (opset 9+) or a function call: a debugger can step into it

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

    @property
    def depth(self) -> int:
        return len(self.path)


class Scope:
    """One graph level: nodes in run order, values, producers and consumers.

    ``inputs`` are the level's formal inputs: the model's inputs for the main graph;
    for a Loop body ``iteration_num, cond, carried...``; for a Scan body ``states...,
    scan elements...``; none for an If branch; a function's formal inputs. Values of
    enclosing scopes that nodes here read are ``outer_reads``.
    """

    def __init__(
        self,
        path: ScopePath,
        owner: Node | None,
        inputs: Sequence[ValueInfo],
        outputs: Sequence[ValueInfo],
        initializers: Sequence[onnx.TensorProto],
        infos: Mapping[str, ValueInfo],
        opsets: Mapping[str, int],
    ) -> None:
        self.path = path
        self.owner = owner
        self.opsets = dict(opsets)  # domain -> version, for models built from nodes of this scope
        self.initializers = tuple(initializers)
        self.initializer_names: tuple[str, ...] = tuple(t.name for t in initializers)
        inits = set(self.initializer_names)
        self.inputs: tuple[ValueInfo, ...] = tuple(v for v in inputs if v.name not in inits)
        self.outputs: tuple[ValueInfo, ...] = tuple(outputs)
        self._infos: dict[str, ValueInfo] = dict(infos)
        for t in initializers:
            self._infos[t.name] = ValueInfo(t.name, _DTYPE_NAMES.get(t.data_type), tuple(t.dims))
        self._own = {v.name for v in inputs} | inits
        self.nodes: tuple[Node, ...] = ()
        self.outer_reads: tuple[str, ...] = ()
        self.enclosing: Scope | None = None  # the scope whose values this one sees (None: the main graph, a function)
        self._producer: dict[str, Node] = {}
        self._consumers: dict[str, list[Node]] = {}

    def _set_nodes(self, nodes: Sequence[Node], outer_reads: Iterable[str]) -> None:
        self.nodes = tuple(nodes)
        self.outer_reads = tuple(dict.fromkeys(outer_reads))
        for n in self.nodes:
            for o in n.outputs:
                if o:
                    self._producer[o] = n
            for i in dict.fromkeys(n.all_inputs):
                self._consumers.setdefault(i, []).append(n)

    @property
    def attribute(self) -> str:
        return self.path[-1].attribute if self.path else ""

    @property
    def label(self) -> str:
        """``If_0 > then_branch``; ``main graph`` for the main graph."""
        return " > ".join(f"{s.node} > {s.attribute}" for s in self.path) or "main graph"

    def producer(self, value: str) -> Node | None:
        """The node of this scope that computes ``value``; None for inputs, initializers and outer values."""
        return self._producer.get(value)

    def consumers(self, value: str) -> list[Node]:
        return list(self._consumers.get(value, ()))

    def defines(self, name: str) -> bool:
        """Whether ``name`` is an input, initializer or node output of this scope (not a value read from outside)."""
        return name in self._producer or name in self._own

    def has_value(self, name: str) -> bool:
        return name in self._producer or name in self._infos

    def value_names(self) -> list[str]:
        """Every value of this level: inputs, initializers, then node outputs in run order."""
        names = [v.name for v in self.inputs] + list(self.initializer_names)
        names += [o for n in self.nodes for o in n.outputs if o]
        return list(dict.fromkeys(names))

    def value_info(self, name: str) -> ValueInfo:
        """What is known of ``name`` here: its own, else (a value read from outside) the enclosing scope's."""
        info = self._infos.get(name)
        if info is not None:
            return info
        if self.enclosing is not None and not self.defines(name):
            return self.enclosing.value_info(name)
        return ValueInfo(name)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.outputs)

    def downstream(self, names: Iterable[str]) -> list[Node]:
        """Every node of this scope that depends, directly or not, on any of ``names``; in run order."""
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


class Graph:
    """An ONNX model as a tree of scopes, ready to be stepped through.

    The lookups of the main scope (``nodes``, ``producer``, ``value_info``...) are the
    graph's own; ``node(id)`` finds a node of any scope.
    """

    def __init__(
        self,
        model: onnx.ModelProto,
        path: Path | None = None,
        inferred: Mapping[tuple[tuple[int, str], ...], Mapping[str, ValueInfo]] | None = None,
        notes: tuple[str, ...] = (),
    ) -> None:
        """The IR of ``model``; ``inferred``: what shape inference found per graph (see :mod:`.loading`).

        ``inferred`` is keyed by where a graph sits in the model: ``()`` for the main graph, else
        the (node index, attribute name) steps down to it.
        """
        self.model = model
        self.path = path
        self.weights = Weights(model, path.parent if path is not None else None)  # external data checked here
        self.notes = notes  # what went wrong while loading but did not stop it (shown in the listing)
        g = model.graph
        self.name = g.name
        self.opsets: dict[str, int] = {o.domain or "ai.onnx": o.version for o in model.opset_import}
        self.functions: dict[tuple[str, str], onnx.FunctionProto] = {(f.domain, f.name): f for f in model.functions}
        self._inferred = inferred or {}
        self._sources: SourceMap | None = None
        self.scopes: dict[ScopePath, Scope] = {}
        self._by_id: dict[str, Node] = {}
        self._names = _name_counts(g, self.functions)
        self._taken: set[str] = {name for name, c in self._names.items() if c == 1}
        self.main = self._build_graph_scope(g, (), None, (), frozenset(), frozenset())
        m = self.main
        self.initializer_names = m.initializer_names
        self.inputs = m.inputs
        self.outputs = m.outputs
        self.nodes = m.nodes
        self.producer = m.producer
        self.consumers = m.consumers
        self.has_value = m.has_value
        self.value_names = m.value_names
        self.value_info = m.value_info
        self.downstream = m.downstream

    @property
    def input_names(self) -> tuple[str, ...]:
        return self.main.input_names

    @property
    def output_names(self) -> tuple[str, ...]:
        return self.main.output_names

    @property
    def sources(self) -> SourceMap:
        """Where each node came from in the model's own source (stack traces, module scopes); made on first use."""
        if self._sources is None:
            from graph_dap.runtime.source import SourceMap

            self._sources = SourceMap(self)
        return self._sources

    # -- lookups across scopes -------------------------------------------------------

    def node(self, node_id: str) -> Node:
        try:
            return self._by_id[node_id]
        except KeyError:
            raise NodeNotFoundError(f"no node '{node_id}' in the graph") from None

    def has_node(self, node_id: str) -> bool:
        return node_id in self._by_id

    def all_nodes(self) -> Iterator[Node]:
        """Every node of every scope: each node, then the nodes of its subgraphs, in run order."""

        def walk(scope: Scope) -> Iterator[Node]:
            for n in scope.nodes:
                yield n
                for sub in self.subscopes(n):
                    yield from walk(sub)

        return walk(self.main)

    def scope_of(self, node: Node) -> Scope:
        return self.scopes[node.path]

    def subscopes(self, node: Node) -> list[Scope]:
        """The scopes ``node`` holds: an If's two branches, a Loop's or Scan's body, a called function's body."""
        out = []
        for attribute in _scope_attributes(node):
            scope = self.scopes.get((*node.path, ScopeStep(node.id, attribute)))
            if scope is not None:
                out.append(scope)
        return out

    def subscope(self, node: Node, attribute: str) -> Scope:
        return self.scopes[(*node.path, ScopeStep(node.id, attribute))]

    def info_at(self, path: ScopePath, name: str) -> ValueInfo:
        """What is known of ``name`` as seen from the scope at ``path``: its own, else an enclosing scope's."""
        for k in range(len(path), -1, -1):
            scope = self.scopes.get(path[:k])
            if scope is not None and scope.has_value(name):
                return scope.value_info(name)
        return ValueInfo(name)

    def producers(self, value: str) -> list[Node]:
        """Every node, in any scope, that computes a value of this name (sibling branches may reuse names)."""
        return [n for n in self.all_nodes() if value in n.outputs]

    @property
    def has_subgraphs(self) -> bool:
        return len(self.scopes) > 1

    # -- building --------------------------------------------------------------------

    def _build_graph_scope(
        self,
        g: onnx.GraphProto,
        path: ScopePath,
        owner: Node | None,
        proto_path: tuple[tuple[int, str], ...] | None,
        visible: frozenset[str],
        outer_static: frozenset[str],
    ) -> Scope:
        """The scope of graph ``g``; ``proto_path``: where it sits in the model (None inside a function body)."""
        infos: dict[str, ValueInfo] = {}
        for v in list(g.input) + list(g.output) + list(g.value_info):
            infos[v.name] = _value_info(v)
        inferred = self._inferred.get(proto_path, {}) if proto_path is not None else {}
        for name, info in inferred.items():
            if name not in infos or infos[name].shape is None:
                infos[name] = info
        inputs = [_value_info(v) for v in g.input]
        outputs = [_value_info(v) for v in g.output]
        scope = Scope(path, owner, inputs, outputs, list(g.initializer), infos, self.opsets)
        if owner is not None:
            scope.enclosing = self.scopes.get(owner.path)
        self.scopes[path] = scope
        defined = {v.name for v in g.input} | set(scope.initializer_names) | {t.values.name for t in g.sparse_initializer}
        self._fill(scope, list(g.node), proto_path, defined, visible, outer_static | set(scope.initializer_names))
        return scope

    def _build_function_scope(self, call: Node, function: onnx.FunctionProto, depth: int) -> Scope:
        if depth > _MAX_CALL_DEPTH:
            raise ModelError(f"model-local functions nest more than {_MAX_CALL_DEPTH} calls deep at node {call.id}")
        path = (*call.path, ScopeStep(call.id, function.name))
        opsets = dict(self.opsets)
        opsets.update({o.domain or "ai.onnx": o.version for o in function.opset_import})
        infos = {v.name: _value_info(v) for v in getattr(function, "value_info", ())}
        inputs = [infos.get(n) or ValueInfo(n) for n in function.input]
        outputs = [infos.get(n) or ValueInfo(n) for n in function.output]
        scope = Scope(path, call, inputs, outputs, [], infos, opsets)
        self.scopes[path] = scope
        protos = [_bind_attributes(p, call.proto, function) for p in function.node]
        # A function sees no outer scope: its values are its inputs and what its nodes compute.
        self._fill(scope, protos, None, set(function.input), frozenset(), frozenset(), depth)
        return scope

    def _fill(
        self,
        scope: Scope,
        protos: list[onnx.NodeProto],
        proto_path: tuple[tuple[int, str], ...] | None,
        defined: set[str],
        visible: frozenset[str],
        static_values: frozenset[str],
        depth: int = 0,
    ) -> None:
        """Order ``protos`` into ``scope``'s nodes and build the scopes they hold."""
        ids = [self._node_id(p, i, scope.path) for i, p in enumerate(protos)]
        implicit = [tuple(sorted(_outer_scope_reads(p))) for p in protos]
        order = _topological_order(protos, ids, implicit, defined, visible, scope)
        static = set(static_values)
        here_defined = set(defined) | {o for p in protos for o in p.output if o}
        nodes: list[Node] = []
        outer_reads: list[str] = []
        for pos, i in enumerate(order):
            p = protos[i]
            reads = [n for n in p.input if n] + list(implicit[i])
            outer_reads += [r for r in reads if r not in here_defined]
            is_static = p.op_type not in _NONDETERMINISTIC_OPS and all(r in static for r in reads)
            if is_static:
                static.update(o for o in p.output if o)
            function = self.functions.get((p.domain, p.op_type))
            standard = p.domain in ("", "ai.onnx")
            enterable = function is not None or (
                standard
                and p.op_type in CONTROL_FLOW_OPS
                and any(a.type == onnx.AttributeProto.GRAPH for a in p.attribute)
                and (p.op_type != "Scan" or scope.opsets.get("ai.onnx", 0) >= 9)  # Scan-8 has a batch axis: it runs whole
            )
            node = Node(
                id=ids[i],
                index=i,
                order=pos,
                op_type=p.op_type,
                domain=p.domain,
                inputs=tuple(p.input),
                outputs=tuple(p.output),
                implicit_inputs=implicit[i],
                attributes={a.name: attribute_value(a) for a in p.attribute},
                proto=p,
                is_static=is_static,
                metadata={m.key: m.value for m in p.metadata_props},
                name=p.name,
                path=scope.path,
                calls=function.name if function is not None else None,
                enterable=enterable,
            )
            nodes.append(node)
            self._by_id[node.id] = node
        scope._set_nodes(nodes, outer_reads)
        inner_visible = frozenset(visible | here_defined)
        for node in nodes:
            if node.calls is not None:
                self._build_function_scope(node, self.functions[(node.domain, node.op_type)], depth + 1)
                continue
            for a in node.proto.attribute:
                if a.type != onnx.AttributeProto.GRAPH:
                    continue  # GRAPHS attributes (no standard op has one) run whole
                sub_path = (*scope.path, ScopeStep(node.id, a.name))
                sub_proto_path = None if proto_path is None else (*proto_path, (node.index, a.name))
                if sub_path in self.scopes:
                    raise ModelError(f"node {node.id} holds two graphs named {a.name}")
                self._build_graph_scope(a.g, sub_path, node, sub_proto_path, inner_visible, frozenset(static))

    def _node_id(self, p: onnx.NodeProto, index: int, path: ScopePath) -> str:
        """The node's name when it is non-empty and unique in the whole model, else made from where it is."""
        if p.name and self._names.get(p.name) == 1:
            return p.name
        base = f"{path[-1].node}/{path[-1].attribute}/{p.op_type}_{index}" if path else f"{p.op_type}_{index}"
        candidate, k = base, 1
        while candidate in self._taken:
            candidate = f"{base}_{k}"
            k += 1
        self._taken.add(candidate)
        return candidate


def _scope_attributes(node: Node) -> list[str]:
    if node.calls is not None:
        return [node.calls]
    return [a.name for a in node.proto.attribute if a.type == onnx.AttributeProto.GRAPH]


def _name_counts(g: onnx.GraphProto, functions: Mapping[tuple[str, str], onnx.FunctionProto]) -> dict[str, int]:
    """How often each node name occurs in the model, each call of a function counting its body once."""
    counts: dict[str, int] = {}

    def walk(nodes: Iterable[onnx.NodeProto], depth: int) -> None:
        if depth > _MAX_CALL_DEPTH:
            return
        for p in nodes:
            if p.name:
                counts[p.name] = counts.get(p.name, 0) + 1
            f = functions.get((p.domain, p.op_type))
            if f is not None:
                walk(f.node, depth + 1)
            for a in p.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g.node, depth)

    walk(g.node, 0)
    return counts


def _topological_order(
    protos: list[onnx.NodeProto],
    ids: list[str],
    implicit: list[tuple[str, ...]],
    defined: set[str],
    visible: frozenset[str],
    scope: Scope,
) -> list[int]:
    """Kahn's algorithm over one graph's nodes, the lowest file index first (a sorted file keeps its order)."""
    where = f" in {scope.label}" if scope.path else ""
    producer_index: dict[str, int] = {}
    for i, p in enumerate(protos):
        for o in p.output:
            if o:
                if o in producer_index or o in defined:
                    raise ModelError(
                        f"value '{o}' is produced twice{where} (again by node {ids[i]}); a graph must assign each value once"
                    )
                producer_index[o] = i
    deps: list[set[int]] = []
    for i, p in enumerate(protos):
        d: set[int] = set()
        for name in [n for n in p.input if n] + list(implicit[i]):
            if name in producer_index:
                d.add(producer_index[name])
            elif name not in defined and name not in visible:
                raise ModelError(
                    f"node {ids[i]} ({p.op_type}){where} reads '{name}', which no node, graph input or initializer provides"
                )
        deps.append(d)
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
        raise ModelError(f"the graph has a cycle through node {ids[stuck]} ({protos[stuck].op_type}){where}")
    return order


def _bind_attributes(p: onnx.NodeProto, call: onnx.NodeProto, function: onnx.FunctionProto) -> onnx.NodeProto:
    """A function body node with its attribute references (``ref_attr_name``) bound to the call's attributes."""
    if not any(a.ref_attr_name for a in p.attribute):
        return p
    given = {a.name: a for a in call.attribute}
    defaults = {a.name: a for a in getattr(function, "attribute_proto", ())}
    bound = onnx.NodeProto()
    bound.CopyFrom(p)
    del bound.attribute[:]
    for a in p.attribute:
        if not a.ref_attr_name:
            bound.attribute.append(a)
            continue
        source = given.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
        if source is None:
            continue  # not given and no default: the attribute is absent
        attr = onnx.AttributeProto()
        attr.CopyFrom(source)
        attr.name = a.name
        bound.attribute.append(attr)
    return bound


def _outer_scope_reads(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs read from enclosing scopes."""
    reads: set[str] = set()
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        for sub in graphs:
            reads |= _free_names(sub)
    return reads


def _free_names(g: onnx.GraphProto) -> set[str]:
    defined = {v.name for v in g.input} | {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
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


def attribute_value(a: onnx.AttributeProto) -> Any:
    """An attribute as plain Python: strings decoded, graphs and tensors as short ``<...>`` placeholders."""
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


def _dims(shape: onnx.TensorShapeProto) -> tuple[Dim, ...]:
    # paddle2onnx writes dim_value -1 for a dynamic dimension; onnxruntime accepts any size there.
    return tuple(
        (d.dim_value if d.dim_value >= 0 else None) if d.HasField("dim_value") else (d.dim_param or None) for d in shape.dim
    )


def _type_info(name: str, t: onnx.TypeProto) -> ValueInfo:
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        tt = t.tensor_type
        return ValueInfo(name, _DTYPE_NAMES.get(tt.elem_type), _dims(tt.shape) if tt.HasField("shape") else None, proto=t)
    if kind == "sequence_type":
        elem = _type_info(name, t.sequence_type.elem_type)
        return ValueInfo(name, elem.dtype, elem.shape, "sequence", proto=t)
    if kind == "optional_type":
        elem = _type_info(name, t.optional_type.elem_type)
        return ValueInfo(name, elem.dtype, elem.shape, "optional", proto=t)
    if kind == "map_type":
        return ValueInfo(name, None, None, "map", proto=t)
    return ValueInfo(name, None, None, "unknown")


def _value_info(v: onnx.ValueInfoProto) -> ValueInfo:
    return _type_info(v.name, v.type)


def dtype_name(elem_type: int) -> str | None:
    """numpy-style name of an ONNX element type."""
    return _DTYPE_NAMES.get(elem_type)


#: Where values are looked up: a scope, or a graph (its main scope).
Lookup = Graph | Scope
