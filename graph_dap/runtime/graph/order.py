"""How a graph's nodes are read from the protobuf: their run order, the names they share, what their
subgraphs read from outside, a function body's attributes bound at its call."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

import onnx

from graph_dap.errors import ModelError

MAX_CALL_DEPTH = 64  # nested calls of model-local functions


def name_counts(g: onnx.GraphProto, functions: Mapping[tuple[str, str], onnx.FunctionProto]) -> dict[str, int]:
    """How often each node name occurs in the model, each call of a function counting its body once."""
    counts: dict[str, int] = {}

    def walk(nodes: Iterable[onnx.NodeProto], depth: int) -> None:
        if depth > MAX_CALL_DEPTH:
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


def topological_order(
    protos: list[onnx.NodeProto],
    ids: list[str],
    implicit: list[tuple[str, ...]],
    defined: set[str],
    visible: frozenset[str],
    where: str,
) -> list[int]:
    """Kahn's algorithm over one graph's nodes, the lowest file index first (a sorted file keeps its order).
    ``where``: the scope, as error messages name it (" in ..."; empty for the main graph)."""
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


def bind_attributes(p: onnx.NodeProto, call: onnx.NodeProto, function: onnx.FunctionProto) -> onnx.NodeProto:
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


def outer_scope_reads(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs read from enclosing scopes."""
    reads: set[str] = set()
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        for sub in graphs:
            reads |= free_names(sub)
    return reads


def free_names(g: onnx.GraphProto) -> set[str]:
    defined = {v.name for v in g.input} | {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    free: set[str] = set()
    for n in g.node:
        for i in n.input:
            if i and i not in defined:
                free.add(i)
        for inner in outer_scope_reads(n):
            if inner not in defined:
                free.add(inner)
        defined.update(n.output)
    for o in g.output:
        if o.name not in defined:
            free.add(o.name)
    return free
