"""Ground truth inside If branches: a model's Ifs replaced by the branches its inputs take.

:func:`inline_ifs` asks onnxruntime for each If's condition (the model up to it, every value an
output), splices the taken branch's nodes in place of the If (its outputs renamed to the If's
through Identity), and repeats until no If is left: nested Ifs come out flat. Every value the
debugger computes inside a branch is then a plain value of the flat model, which
:func:`models.ort_values` makes a graph output: onnxruntime's own value of every tensor, with
optimizations off, the control flow inlined.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from models import ort_values
from onnx import helper


def _branch(node: onnx.NodeProto, taken: bool) -> onnx.GraphProto:
    name = "then_branch" if taken else "else_branch"
    return next(a.g for a in node.attribute if a.name == name)


def _graph_body(g: onnx.GraphProto) -> list[onnx.NodeProto]:
    """A branch's nodes, its initializers as Constant nodes (a branch can hold its own)."""
    consts = [helper.make_node("Constant", [], [t.name], value=t) for t in g.initializer]
    return consts + list(g.node)


def inline_ifs(model: onnx.ModelProto, feeds: dict[str, Any]) -> onnx.ModelProto:
    """``model`` with every If (at any depth) replaced by the branch ``feeds`` take."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    while True:
        nodes = list(m.graph.node)
        at = next((k for k, n in enumerate(nodes) if n.op_type == "If" and n.domain in ("", "ai.onnx")), None)
        if at is None:
            return m
        node = nodes[at]
        prefix = onnx.ModelProto()
        prefix.CopyFrom(m)
        del prefix.graph.node[:]
        prefix.graph.node.extend(nodes[:at])
        del prefix.graph.output[:]
        cond = node.input[0]
        known = dict(feeds)
        if cond not in known:
            known.update(ort_values(prefix, feeds, [cond]))
        branch = _branch(node, bool(np.asarray(known[cond]).reshape(-1)[0]))
        spliced = _graph_body(branch) + [
            helper.make_node("Identity", [inner.name], [outer], name=f"{node.name or 'if'}/out{k}")
            for k, (inner, outer) in enumerate(zip(branch.output, node.output))
            if outer
        ]
        del m.graph.node[:]
        m.graph.node.extend(nodes[:at] + spliced + nodes[at + 1 :])
