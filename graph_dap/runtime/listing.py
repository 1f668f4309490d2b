"""The graph listing: the model as text a person reads, one line per node.

``y: float32[1,64,112,112] = Conv<kernel_shape=[7,7]>(x, w, b)  # conv1``

Tensor data is elided (onnx's printer writes it in full). Subgraphs are
indented under their node. The listing keeps a map from lines to node ids, so
that a breakpoint on a line is a breakpoint on its node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx

from graph_dap.runtime.graph import Graph, Scope, ValueInfo, attribute_value, dtype_name
from graph_dap.runtime.tensor import numel

_MAX_ATTR = 60


@dataclass(slots=True)
class Listing:
    """The text and the line of every node, subgraph nodes too (lines are 1-based)."""

    text: str
    node_lines: dict[str, int] = field(default_factory=dict)
    _line_nodes: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._line_nodes = {line: nid for nid, line in self.node_lines.items()}

    def line_of(self, node_id: str) -> int | None:
        return self.node_lines.get(node_id)

    def node_at(self, line: int) -> str | None:
        """The node on ``line``, or None."""
        return self._line_nodes.get(line)

    def node_at_or_after(self, line: int) -> str | None:
        """The node on ``line`` or on the first node line below it."""
        after = [ln for ln in self._line_nodes if ln >= line]
        return self._line_nodes[min(after)] if after else None


def render_listing(graph: Graph) -> Listing:
    """The listing of ``graph``'s model."""
    m = graph.model
    lines: list[str] = []
    title = graph.path.name if graph.path else (m.graph.name or "model")
    lines.append(f"# graph-dap listing of {title}")
    opsets = ", ".join(f"{d} {v}" for d, v in graph.opsets.items())
    producer = f"; producer {m.producer_name} {m.producer_version}".rstrip() if m.producer_name else ""
    lines.append(f"# ir_version {m.ir_version}; opsets: {opsets}{producer}")
    inner = sum(len(sc.nodes) for sc in graph.scopes.values()) - len(graph.nodes)
    inside = f" (and {inner} inside subgraphs and functions)" if inner else ""
    lines.append(f"# {len(graph.nodes)} nodes{inside}, {len(graph.initializer_names)} initializers (data elided)")
    lines += [f"# note: {note}" for note in graph.notes]
    for v in graph.inputs:
        lines.append(f"# input  {_typed(v)}")
    for v in graph.outputs:
        lines.append(f"# output {_typed(graph.value_info(v.name))}")
    lines.append("")
    node_lines: dict[str, int] = {}
    _scope_lines(graph, graph.main, lines, node_lines, "")
    return Listing("\n".join(lines) + "\n", node_lines)


def _scope_lines(graph: Graph, scope: Scope, lines: list[str], node_lines: dict[str, int], indent: str) -> None:
    """A line per node of ``scope`` in run order, each followed by the scopes it holds, indented."""
    for node in scope.nodes:
        node_lines[node.id] = len(lines) + 1
        outs = ", ".join(_typed(scope.value_info(o)) if o else "_" for o in node.outputs)
        static = "  (constant)" if node.is_static else ""
        lines.append(f"{indent}{outs} = {_call(node.proto)}  # {node.id}{static}")
        for sub in graph.subscopes(node):
            ins = ", ".join(_typed(v) for v in sub.inputs)
            lines.append(f"{indent}  {sub.attribute}({ins}) {{")
            _scope_lines(graph, sub, lines, node_lines, indent + "    ")
            lines.append(f"{indent}    return {', '.join(sub.output_names)}")
            lines.append(f"{indent}  }}")


def _typed(v: ValueInfo) -> str:
    if v.dtype is None and v.shape is None:
        return v.name
    return f"{v.name}: {v.type_text()}"


def _call(p: onnx.NodeProto) -> str:
    op = p.op_type if not p.domain or p.domain == "ai.onnx" else f"{p.domain}.{p.op_type}"
    attrs = [f"{a.name}={_attr(a)}" for a in p.attribute if a.type not in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)]
    attr_text = f"<{', '.join(attrs)}>" if attrs else ""
    args = ", ".join(i if i else "_" for i in p.input)
    return f"{op}{attr_text}({args})"


def _attr(a: onnx.AttributeProto) -> str:
    if a.type == onnx.AttributeProto.TENSOR:
        t = a.t
        if numel(t.dims) <= 8 and t.data_type in (1, 6, 7, 11):
            arr = onnx.numpy_helper.to_array(t)
            return repr(arr.tolist())
        return f"<{dtype_name(t.data_type)}[{','.join(map(str, t.dims))}]>"
    if a.type == onnx.AttributeProto.TENSORS:
        return f"<{len(a.tensors)} tensors>"
    v = attribute_value(a)
    text = repr(v) if isinstance(v, str) else str(v).replace(" ", "")
    if isinstance(v, float):
        text = f"{v:g}"
    return text if len(text) <= _MAX_ATTR else text[: _MAX_ATTR - 3] + "..."
