"""Nodes, scopes and the graph: built once from a model, then only looked up (see the package)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from graph_dap.errors import ModelError, NodeNotFoundError
from graph_dap.runtime.graph.order import MAX_CALL_DEPTH, bind_attributes, name_counts, outer_scope_reads, topological_order
from graph_dap.runtime.graph.types import ValueInfo, attribute_value, dtype_name, value_info
from graph_dap.runtime.graph.wire import ModelWire
from graph_dap.runtime.weights import Weights

if TYPE_CHECKING:
    from graph_dap.runtime.graph.source import SourceMap

CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan"})
#: Nodes whose output must not be folded once: they differ on every run.
_NONDETERMINISTIC_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)


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
    is_constant: bool = False
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
            self._infos[t.name] = ValueInfo(t.name, dtype_name(t.data_type), tuple(t.dims))
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
        self._wire: ModelWire | None = None
        self.scopes: dict[ScopePath, Scope] = {}
        self._by_id: dict[str, Node] = {}
        self._names = name_counts(g, self.functions)
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
            from graph_dap.runtime.graph.source import SourceMap

            self._sources = SourceMap(self)
        return self._sources

    @property
    def wire(self) -> ModelWire:
        """The model's variants as bytes for onnxruntime (its weights serialized once); made on first use."""
        if self._wire is None:
            self._wire = ModelWire(self.model)
        return self._wire

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
        outer_constants: frozenset[str],
    ) -> Scope:
        """The scope of graph ``g``; ``proto_path``: where it sits in the model (None inside a function body)."""
        infos: dict[str, ValueInfo] = {}
        for v in list(g.input) + list(g.output) + list(g.value_info):
            infos[v.name] = value_info(v)
        inferred = self._inferred.get(proto_path, {}) if proto_path is not None else {}
        for name, info in inferred.items():
            if name not in infos or infos[name].shape is None:
                infos[name] = info
        inputs = [value_info(v) for v in g.input]
        outputs = [value_info(v) for v in g.output]
        scope = Scope(path, owner, inputs, outputs, list(g.initializer), infos, self.opsets)
        if owner is not None:
            scope.enclosing = self.scopes.get(owner.path)
        self.scopes[path] = scope
        defined = {v.name for v in g.input} | set(scope.initializer_names) | {t.values.name for t in g.sparse_initializer}
        self._fill(scope, list(g.node), proto_path, defined, visible, outer_constants | set(scope.initializer_names))
        return scope

    def _build_function_scope(self, call: Node, function: onnx.FunctionProto, depth: int) -> Scope:
        if depth > MAX_CALL_DEPTH:
            raise ModelError(f"model-local functions nest more than {MAX_CALL_DEPTH} calls deep at node {call.id}")
        path = (*call.path, ScopeStep(call.id, function.name))
        opsets = dict(self.opsets)
        opsets.update({o.domain or "ai.onnx": o.version for o in function.opset_import})
        infos = {v.name: value_info(v) for v in getattr(function, "value_info", ())}
        inputs = [infos.get(n) or ValueInfo(n) for n in function.input]
        outputs = [infos.get(n) or ValueInfo(n) for n in function.output]
        scope = Scope(path, call, inputs, outputs, [], infos, opsets)
        self.scopes[path] = scope
        protos = [bind_attributes(p, call.proto, function) for p in function.node]
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
        constant_values: frozenset[str],
        depth: int = 0,
    ) -> None:
        """Order ``protos`` into ``scope``'s nodes and build the scopes they hold."""
        ids = [self._node_id(p, i, scope.path) for i, p in enumerate(protos)]
        implicit = [tuple(sorted(outer_scope_reads(p))) for p in protos]
        order = topological_order(protos, ids, implicit, defined, visible, f" in {scope.label}" if scope.path else "")
        constants = set(constant_values)
        here_defined = set(defined) | {o for p in protos for o in p.output if o}
        nodes: list[Node] = []
        outer_reads: list[str] = []
        for pos, i in enumerate(order):
            p = protos[i]
            reads = [n for n in p.input if n] + list(implicit[i])
            outer_reads += [r for r in reads if r not in here_defined]
            is_constant = p.op_type not in _NONDETERMINISTIC_OPS and all(r in constants for r in reads)
            if is_constant:
                constants.update(o for o in p.output if o)
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
                is_constant=is_constant,
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
                self._build_graph_scope(a.g, sub_path, node, sub_proto_path, inner_visible, frozenset(constants))

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


#: Where values are looked up: a scope, or a graph (its main scope).
Lookup = Graph | Scope
