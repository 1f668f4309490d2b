"""Groups: the nodes of each model between paired tensors, many-to-many, as debug handles group ops.

For each pair, its group holds the float nodes that compute the float tensor from other paired
tensors (or inputs, or weights) and the quantized nodes that compute its counterpart from theirs,
the Q/DQ nodes of its own tensor included. Groups that share a node on either side are merged:
a group can compute several pairs. A group's *reads* are the paired tensors it starts from, as the
quantized model reads them (a DequantizeLinear's output, an integer tensor, a graph input).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graph_dap.runtime.graph import Node
from graph_dap.runtime.graph.source import source_fields
from graph_dap.runtime.tools.quant.pairing import Pair, Pairing
from graph_dap.runtime.tools.quant.view import FORM_OPS, Form

__all__ = ["Group", "make_groups"]


@dataclass(frozen=True, slots=True)
class Group:
    """Nodes of both models between paired tensors."""

    index: int
    outputs: tuple[Pair, ...]  # the pairs it computes; first those whose value its consumers read (see Pairing.inner)
    float_nodes: tuple[Node, ...]  # run order
    quant_nodes: tuple[Node, ...]  # run order (DequantizeLinear of its weights included)
    reads: tuple[tuple[str, Pair], ...]  # (the quantized model's value it reads, the pair that value stands for)

    @property
    def inputs(self) -> tuple[Pair, ...]:
        """The pairs it reads, once each."""
        return tuple({p.float_name: p for _, p in self.reads}.values())

    @property
    def name(self) -> str:
        """The float nodes it holds (``conv1+relu1``); ``x (input)`` for a graph input's own quantization."""
        ids = [n.id for n in self.float_nodes if not n.is_constant]
        if not ids:
            return f"{self.outputs[0].float_name} (input)"
        return "+".join(ids) if len(ids) <= 3 else f"{ids[0]}+...+{ids[-1]} ({len(ids)} nodes)"

    @property
    def ops(self) -> str:
        """The float ops it holds (``Conv+Relu``); ``input`` for a graph input's own quantization."""
        ops = [n.op_type for n in self.float_nodes if not n.is_constant]
        return "+".join(dict.fromkeys(ops)) if ops else "input"

    def node_names(self) -> list[str]:
        """The float nodes' names, as ``quantize_static(nodes_to_exclude=...)`` takes them (unnamed nodes left out)."""
        return [n.name for n in self.float_nodes if n.name and not n.is_constant]

    def where(self, pairing: Pairing) -> dict[str, Any]:
        """The float nodes' source lines and module (``{source, module}``), as compare reports them."""
        graph = pairing.float_view.graph
        return source_fields(graph.sources, [n.id for n in self.float_nodes if not n.is_constant])


def _float_closure(pairing: Pairing, own: set[str]) -> set[int]:
    graph = pairing.float_view.graph
    stack = list(own)
    seen: set[str] = set()
    nodes: set[int] = set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v not in own and v in pairing.pairs:
            continue
        p = graph.producer(v)
        if p is None or p.order in nodes:
            continue
        nodes.add(p.order)
        stack.extend(p.all_inputs)
    return nodes


def _quant_closure(pairing: Pairing, own_logicals: set[str], starts: list[str]) -> tuple[set[int], dict[str, Pair]]:
    qv = pairing.quant_view
    graph = qv.graph
    stack = list(starts)
    seen: set[str] = set()
    nodes: set[int] = set()
    reads: dict[str, Pair] = {}
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        logical = qv.logical(v)
        paired = pairing.by_logical.get(logical)
        p = graph.producer(v)
        if paired is not None and (logical not in own_logicals or p is None):
            # a paired tensor read at the boundary; run-time-scaled forms (DynamicQuantizeLinear) belong to the reader
            if qv.form.get(v) is not Form.OPAQUE or p is None:
                reads[v] = pairing.pairs[paired]
                continue
        if p is None or p.order in nodes:
            continue
        nodes.add(p.order)
        stack.extend(p.all_inputs)
    return nodes, reads


def make_groups(pairing: Pairing) -> list[Group]:
    """One group per pair, merged where they share nodes; in the float model's run order."""
    fg, qg = pairing.float_view.graph, pairing.quant_view.graph
    raw: list[tuple[list[Pair], set[int], set[int], dict[str, Pair]]] = []
    for pair in pairing.ordered():
        if pair.float_name in fg.input_names and pair.quant_name == pair.float_name:
            continue  # a graph input read as it is: nothing computes it
        fnodes = _float_closure(pairing, {pair.float_name})
        qnodes, reads = _quant_closure(pairing, {pair.logical}, [pair.quant_name])
        raw.append(([pair], fnodes, qnodes, reads))
    # merge groups that share a node on either side (union-find over the groups)
    parent = list(range(len(raw)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner_f: dict[int, int] = {}
    owner_q: dict[int, int] = {}
    for i, (_, fnodes, qnodes, _) in enumerate(raw):
        for owners, nodes in ((owner_f, fnodes), (owner_q, qnodes)):
            for n in nodes:
                if not _shared_constant(fg if owners is owner_f else qg, n):
                    if n in owners:
                        parent[find(i)] = find(owners[n])
                    else:
                        owners[n] = i
    owner_l: dict[str, int] = {}  # a logical tensor paired twice (a folded op's input and output) is one group's
    for i, (pairs, _, _, _) in enumerate(raw):
        for p in pairs:
            if p.logical in owner_l:
                parent[find(i)] = find(owner_l[p.logical])
            else:
                owner_l[p.logical] = i
    merged: dict[int, list[int]] = {}
    for i in range(len(raw)):
        merged.setdefault(find(i), []).append(i)
    groups: list[tuple[int, list[Pair], set[int], set[int]]] = []
    for members in merged.values():
        pairs = sorted((p for i in members for p in raw[i][0]), key=pairing.inner)  # what consumers read first
        fnodes = set().union(*(raw[i][1] for i in members))
        qnodes = set().union(*(raw[i][2] for i in members))
        key = max((fg.nodes[k].order for k in fnodes if not fg.nodes[k].is_constant), default=-1)
        groups.append((key, pairs, fnodes, qnodes))
    groups.sort(key=lambda g: (g[0], min(qg.nodes[k].order for k in g[3]) if g[3] else -1))
    out = []
    _explain_inside(pairing, groups)
    for index, (_, pairs, fnodes, qnodes) in enumerate(groups):
        own = {p.logical for p in pairs}
        _, reads = _quant_closure(pairing, own, [p.quant_name for p in pairs])
        out.append(
            Group(
                index,
                tuple(pairs),
                tuple(fg.nodes[k] for k in sorted(fnodes)),
                tuple(qg.nodes[k] for k in sorted(qnodes)),
                tuple(sorted(reads.items())),
            )
        )
    return out


def _shared_constant(graph: Any, order: int) -> bool:
    """A static node (a weight's DequantizeLinear, a shape constant) may serve several groups without merging them."""
    return bool(graph.nodes[order].is_constant)


def _explain_inside(pairing: Pairing, groups: list[tuple[int, list[Pair], set[int], set[int]]]) -> None:
    """Say of each unpaired float tensor computed inside a group which of the other model's nodes compute it there
    (a fused Attention, an EmbedLayerNormalization: many-to-one)."""
    fg, qg = pairing.float_view.graph, pairing.quant_view.graph
    for _, pairs, fnodes, qnodes in groups:
        ops = [n for k in sorted(qnodes) if not (n := qg.nodes[k]).is_constant and n.op_type not in FORM_OPS]
        ops.sort(key=lambda n: n.op_type in _PLUMBING)  # the ops that compute first, then casts and shapes
        within = ", ".join(f"{n.op_type} {n.id}" for n in ops[:3]) + (f" and {len(ops) - 3} more" if len(ops) > 3 else "")
        for k in fnodes:
            for o in fg.nodes[k].outputs:
                if o in pairing.unpaired_float and not pairing.unpaired_float[o].startswith("folded"):
                    pairing.unpaired_float[o] = f"inside the group of {pairs[0].float_name}: the other model computes it within {within or 'no node'}"


_PLUMBING = frozenset({"Cast", "Shape", "Reshape", "Unsqueeze", "Squeeze", "Gather", "Concat", "Transpose", "Identity"})
