"""Hover text (Markdown): of a value, of an op type, of an attribute, of a node.

- A value: its type (from shape inference), what makes it, what reads it; for an
  initializer its statistics; while a debug session is stopped, its live summary.
- An op type: its schema for the model's opset (:mod:`.schemas`).
- A node (its id, or anywhere else on its line): its id, op, attributes in full, and
  for models exported with source information its Python source line.
"""

from __future__ import annotations

import enum
from typing import Any

from graph_dap.lsp import schemas
from graph_dap.lsp.analysis import Analysis
from graph_dap.lsp.hazards import Sign
from graph_dap.lsp.index import ValueRef
from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.graph.source import SourceFrame
from graph_dap.runtime.listing import Token, TokenKind

_MAX_LISTED = 12  # consumers named in a hover
_SIGN_WORDS = {Sign.POSITIVE: "> 0", Sign.NONNEGATIVE: ">= 0", Sign.NONZERO: "!= 0"}


def value_markdown(a: Analysis, ref: ValueRef, live: str | None = None) -> str:
    """The hover of a value."""
    g = a.graph
    lines: list[str] = []
    if ref.top_level:
        info = g.value_info(ref.name)
        kind = _kind(a, ref.name)
        lines.append(f"**{ref.name}**: `{info.type_text() if (info.dtype or info.shape is not None) else 'type unknown'}` — {kind}")
        stats = a.version.initializers.get(ref.name)
        if stats is not None:
            s = stats.summary
            lines.append("")
            lines.append(f"{s.size} elements: {s.text()}" + (f" std={s.std:.4g}" if s.std is not None else ""))
            extras = [f"zeros={s.zeros}"] if s.zeros else []
            if stats.values is not None:
                extras.append(f"values={list(stats.values)}")
            if extras:
                lines.append(" ".join(extras))
        producer = g.producer(ref.name)
        lines.append("")
        if producer is not None:
            lines.append(f"made by {_node_ref(a, producer)}")
        consumers = g.consumers(ref.name)
        if consumers:
            named = ", ".join(_node_ref(a, c) for c in consumers[:_MAX_LISTED])
            more = f" and {len(consumers) - _MAX_LISTED} more" if len(consumers) > _MAX_LISTED else ""
            lines.append(f"read by {named}{more}")
        elif ref.name not in g.output_names:
            lines.append("read by no node")
        sign = a.signs.get(ref.name)
        if sign in _SIGN_WORDS:
            lines.append(f"provably {_SIGN_WORDS[sign]}")
    else:
        lines.append(f"**{ref.name}** — a value of the subgraph `{ref.scope}`")
        span = a.index.definition(ref)
        if span is not None:
            lines.append("")
            lines.append(f"made on line {span.line}")
        uses = a.index.uses(ref)
        if uses:
            lines.append(f"read on line{'s' if len(uses) > 1 else ''} {', '.join(str(u.line) for u in uses[:_MAX_LISTED])}")
    if live:
        lines += ["", f"**live**: `{live}`"]
    return "\n\n".join(line for line in lines if line)  # one paragraph a line


def _kind(a: Analysis, name: str) -> str:
    g = a.graph
    if name in g.input_names:
        return "graph input"
    if name in a.version.initializers:
        return "initializer"
    if name in g.output_names:
        return "graph output"
    return "value"


def _node_ref(a: Analysis, node: Node) -> str:
    line = a.listing.line_of(node.id)
    return f"`{node.id}` ({node.op_type}, line {line})" if line else f"`{node.id}` ({node.op_type})"


def op_markdown(a: Analysis, op_token: Token, node: Node | None, inner_op: str | None = None) -> str:
    """The hover of an op type: its schema for the model's opset."""
    op_type = node.op_type if node else (inner_op or op_token.text.rsplit(".", 1)[-1])
    domain = node.domain if node else (op_token.text.rsplit(".", 1)[0] if "." in op_token.text else "")
    opset = schemas.opset_of(a.graph.opsets, domain)
    text = schemas.schema_markdown(op_type, domain, opset)
    if node is not None:
        text = f"node `{node.id}`\n\n---\n\n{text}"
    return text


def attribute_markdown(a: Analysis, token: Token, node: Node | None) -> str | None:
    """The hover of an attribute name: its whole value and the schema's words on it."""
    if node is None:
        return None
    opset = schemas.opset_of(a.graph.opsets, node.domain)
    value = node.attributes.get(token.text)
    doc = schemas.attribute_markdown(node.op_type, node.domain, opset, token.text) or f"`{token.text}`"
    return f"{doc}\n\nvalue: `{_full(value)}`"


def node_markdown(a: Analysis, node: Node) -> str:
    """The hover of a node: id, op, attributes, outputs, source line."""
    op = node.op_type if not node.domain or node.domain == "ai.onnx" else f"{node.domain}.{node.op_type}"
    lines = [f"**{node.id}**: `{op}`" + (" (constant: computed once at load)" if node.is_constant else "")]
    if node.proto.name and node.proto.name != node.id:
        lines.append(f"name in the model: `{node.proto.name}`")
    lines.append(f"position {node.index} in the file, {node.order} in run order")
    if node.attributes:
        lines.append("")
        lines.append("**Attributes**")
        lines += [f"- `{k}` = `{_full(v)}`" for k, v in node.attributes.items()]
    frame = source_of(a.graph, node)
    if frame is not None:
        path, line, func = frame.path, frame.line, frame.qualname
        lines += ["", f"**Source**: [{path}:{line}]({_file_uri(path)}#L{line})" + (f" in `{func}`" if func else "")]
        if frame.code:
            lines += ["", "```python", frame.code, "```"]
    source = a.graph.sources.of(node)
    module = source.module if source is not None else None
    if module is not None and not source.derived:  # type: ignore[union-attr]
        lines.append(f"module: `{module.text()}`")
    return "\n".join(lines)


def source_of(graph: Graph, node: Node) -> SourceFrame | None:
    """The user's source line of a node, from its exporter's metadata (the innermost frame outside torch)."""
    source = graph.sources.of(node)
    return source.user_frame if source is not None else None


def module_path(graph: Graph, node: Node) -> tuple[str, ...]:
    """The module scope of a node, outermost first: from the exporter's metadata, else from its name's ``/`` parts.

    ``: m.Net/h.0: m.Block/h.0.attn: m.Attn/softmax: aten.softmax.int`` -> ``("h.0", "h.0.attn")``;
    a node named ``/h.0/attn/Where`` -> ``("h.0", "attn")``; ``stem/conv`` -> ``("stem",)``.
    """
    source = graph.sources.of(node)
    if source is None:
        return ()
    paths = [m.path for m in source.modules if m.path]
    if not source.derived:
        return tuple(paths)
    return tuple(path[len(parent) + 1 :] if parent else path for parent, path in zip(["", *paths], paths))


def _full(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 2000 else text[:1997] + "..."


def _file_uri(path: str) -> str:
    from pathlib import Path

    try:
        return Path(path).resolve().as_uri()
    except ValueError:
        return path


class HoverKind(enum.StrEnum):
    """What a hover shows."""

    VALUE = "value"
    OP = "op"
    ATTRIBUTE = "attribute"
    NODE = "node"


def hover_token(a: Analysis, line: int, token: Token | None) -> HoverKind | None:
    """Which hover a position asks for (None: none)."""
    node = a.index.node_on(line)
    if token is None:
        return HoverKind.NODE if node is not None else None
    if token.kind in (TokenKind.VALUE, TokenKind.TYPE):
        return HoverKind.VALUE
    if token.kind is TokenKind.OP:
        return HoverKind.OP
    if token.kind is TokenKind.ATTRIBUTE:
        return HoverKind.ATTRIBUTE
    if token.kind is TokenKind.NODE_ID and node is not None:
        return HoverKind.NODE
    return None
