"""The graph listing: the model as text a person reads, one line per node.

``y: float32[1,64,112,112] = Conv<kernel_shape=[7,7]>(x, w, b)  # conv1``

Tensor data is elided (onnx's printer writes it in full). Subgraphs are
indented under their node. The listing keeps a map from lines to node ids, so
that a breakpoint on a line is a breakpoint on its node, and, computed while it
is rendered, where each name stands on its line (:class:`Token`) and which
lines each subgraph spans (:class:`Block`): what an editor needs to colour the
text and to find a value's producer and uses without parsing it again.

The header names the model (``# model /abs/path/m.onnx``) and declares its
inputs, initializers and outputs, one a line. A node exported with a Python stack
trace ends with its user's source line (``# conv1  # model.py:25``); the runs of
nodes of one module scope are :class:`ModuleBlock` s (an editor folds them).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import onnx

from graph_dap.runtime.graph import Graph, Node, Scope, ValueInfo, attribute_value, dtype_name
from graph_dap.runtime.tensor import numel

_MAX_ATTR = 60
_TITLE = "# graph-dap listing of "
_MODEL = "# model "


class TokenKind(enum.Enum):
    """What a stretch of a listing line is."""

    VALUE = "value"  # a value's name
    OP = "op"  # an op type, with its domain when not ai.onnx
    ATTRIBUTE = "attribute"  # an attribute's name (``pads`` in ``<pads=[1,1]>``)
    TYPE = "type"  # a value's type (``float32[1,3]``)
    NODE_ID = "node_id"  # the node id after the trailing ``#``
    COMMENT = "comment"  # a header line, or a line's trailing ``#``
    KEYWORD = "keyword"  # ``return``


class Role(enum.Enum):
    """How a value token stands to its value."""

    DEF = "def"  # the value is made here: a node's output, a graph or subgraph input, an initializer
    USE = "use"  # the value is read here: a node's input, a subgraph's return, a graph output's declaration


@dataclass(frozen=True, slots=True)
class Token:
    """A stretch ``[start, end)`` of one line (0-based columns, in characters)."""

    start: int
    end: int
    kind: TokenKind
    text: str
    role: Role | None = None  # for VALUE tokens


@dataclass(frozen=True, slots=True)
class Block:
    """A subgraph's lines, from its ``attr(...) {`` to its ``}`` (1-based, inclusive)."""

    start: int
    end: int
    scope: str  # ``If_0/then_branch``: the owning node's id and the attribute, nested with ``/``
    node: str  # the id of the top-level node it belongs to


@dataclass(frozen=True, slots=True)
class ModuleBlock:
    """A run of consecutive node lines of one module scope (1-based, inclusive; a node's subgraphs included)."""

    start: int
    end: int
    module: str  # the module's path: ``blocks.0.attn``
    label: str  # ``blocks.0.attn: Attention``
    depth: int  # 0 for a module of the model itself, 1 inside one, ...


@dataclass(slots=True)
class Listing:
    """The text, the line of every node, subgraph nodes too (lines are 1-based), and where names stand."""

    text: str
    node_lines: dict[str, int] = field(default_factory=dict)
    _line_nodes: dict[int, str] = field(default_factory=dict)
    line_tokens: dict[int, tuple[Token, ...]] = field(default_factory=dict)  # line -> its tokens, left to right
    blocks: tuple[Block, ...] = ()  # subgraphs, in order of their first line
    declarations: dict[str, int] = field(default_factory=dict)  # graph input, initializer or output -> its header line
    modules: tuple[ModuleBlock, ...] = ()  # module scopes, in order of their first line (outer before inner)

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

    def tokens_at(self, line: int) -> tuple[Token, ...]:
        """The tokens of ``line`` (1-based), left to right."""
        return self.line_tokens.get(line, ())

    def token_at(self, line: int, column: int) -> Token | None:
        """The token under ``column`` (0-based; its end column counts, for a cursor just after a name)."""
        for t in self.line_tokens.get(line, ()):
            if t.start <= column <= t.end and t.kind is not TokenKind.COMMENT:
                return t
        return None

    def block_at(self, line: int) -> Block | None:
        """The innermost subgraph that holds ``line``, or None at the top level."""
        found = None
        for b in self.blocks:
            if b.start > line:
                break
            if b.end >= line:
                found = b
        return found


@dataclass(frozen=True, slots=True)
class ListingHeader:
    """What a listing's first lines say about its model."""

    title: str  # the model file's name (or the graph's)
    model_path: str | None  # absolute path of the model, when it was loaded from a file


def read_header(text: str) -> ListingHeader | None:
    """The header of a listing's ``text``; None when it is not a graph-dap listing."""
    lines = text.split("\n", 3)[:3]
    if not lines or not lines[0].startswith(_TITLE):
        return None
    path = next((ln[len(_MODEL) :].rstrip("\r") for ln in lines[1:] if ln.startswith(_MODEL)), None)
    return ListingHeader(lines[0][len(_TITLE) :].rstrip("\r"), path or None)


class _Lines:
    """The listing being written: lines of text, and the tokens of each as it is built."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.tokens: dict[int, tuple[Token, ...]] = {}
        self._parts: list[str] = []
        self._col = 0
        self._line_tokens: list[Token] = []

    @property
    def next_line(self) -> int:
        return len(self.lines) + 1

    def put(self, text: str, kind: TokenKind | None = None, role: Role | None = None, name: str | None = None) -> None:
        """Append ``text`` to the current line; a token of ``kind`` when given (``name``: its text, if not ``text``)."""
        if kind is not None:
            self._line_tokens.append(Token(self._col, self._col + len(text), kind, text if name is None else name, role))
        self._parts.append(text)
        self._col += len(text)

    def end(self) -> int:
        """Finish the current line; its number."""
        self.lines.append("".join(self._parts))
        number = len(self.lines)
        if self._line_tokens:
            self.tokens[number] = tuple(self._line_tokens)
        self._parts, self._col, self._line_tokens = [], 0, []
        return number

    def comment(self, text: str) -> int:
        self.put(text, TokenKind.COMMENT)
        return self.end()

    def typed(self, v: ValueInfo, role: Role) -> None:
        self.put(v.name, TokenKind.VALUE, role)
        if v.dtype is not None or v.shape is not None:
            self.put(": ")
            self.put(v.type_text(), TokenKind.TYPE)

    def call(self, p: onnx.NodeProto) -> None:
        op = p.op_type if not p.domain or p.domain == "ai.onnx" else f"{p.domain}.{p.op_type}"
        self.put(op, TokenKind.OP)
        attrs = [a for a in p.attribute if a.type not in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)]
        if attrs:
            self.put("<")
            for k, a in enumerate(attrs):
                self.put(", " if k else "")
                self.put(a.name, TokenKind.ATTRIBUTE)
                self.put(f"={_attr(a)}")
            self.put(">")
        self.put("(")
        for k, i in enumerate(p.input):
            self.put(", " if k else "")
            if i:
                self.put(i, TokenKind.VALUE, Role.USE)
            else:
                self.put("_")
        self.put(")")

    def trailer(self, node_id: str, constant: bool = False, source: str = "") -> None:
        self.put("  ")
        self.put("#", TokenKind.COMMENT)
        self.put(" ")
        self.put(node_id, TokenKind.NODE_ID)
        if constant:
            self.put("  (constant)", TokenKind.COMMENT)
        if source:
            self.put("  ")
            self.put(f"# {source}", TokenKind.COMMENT)


def render_listing(graph: Graph) -> Listing:
    """The listing of ``graph``'s model: a line per node of every scope, subgraphs indented under their node."""
    m = graph.model
    out = _Lines()
    title = graph.path.name if graph.path else (m.graph.name or "model")
    out.comment(f"{_TITLE}{title}")
    if graph.path is not None and "\n" not in str(graph.path):
        out.comment(f"{_MODEL}{graph.path}")
    opsets = ", ".join(f"{d} {v}" for d, v in graph.opsets.items())
    producer = f"; producer {m.producer_name} {m.producer_version}".rstrip() if m.producer_name else ""
    out.comment(f"# ir_version {m.ir_version}; opsets: {opsets}{producer}")
    inner = sum(len(sc.nodes) for sc in graph.scopes.values()) - len(graph.nodes)
    inside = f" (and {inner} inside subgraphs and functions)" if inner else ""
    out.comment(f"# {len(graph.nodes)} nodes{inside}, {len(graph.initializer_names)} initializers (data elided)")
    for note in graph.notes:
        out.comment(f"# note: {note}")
    declarations: dict[str, int] = {}
    for label, values, role in (
        ("# input  ", graph.inputs, Role.DEF),
        ("# init   ", [graph.value_info(n) for n in graph.initializer_names], Role.DEF),
        ("# output ", [graph.value_info(v.name) for v in graph.outputs], Role.USE),
    ):
        for v in values:
            out.put(label, TokenKind.COMMENT)
            out.typed(v, role)
            declarations.setdefault(v.name, out.end())
    out.end()
    node_lines: dict[str, int] = {}
    blocks: list[Block] = []
    modules: list[ModuleBlock] = []
    _scope_lines(graph, graph.main, out, node_lines, blocks, "", modules)
    blocks.sort(key=lambda b: b.start)
    modules.sort(key=lambda m: (m.start, m.depth))
    return Listing(
        "\n".join(out.lines) + "\n",
        node_lines,
        line_tokens=out.tokens,
        blocks=tuple(blocks),
        declarations=declarations,
        modules=tuple(modules),
    )


def _module_blocks(graph: Graph, nodes: list[tuple[Node, int, int]]) -> list[ModuleBlock]:
    """The runs of one scope's nodes (each with its first and last line) in each module scope.

    Nodes the model says nothing of (no metadata, no module in the name) neither open nor close a run.
    """
    out: list[ModuleBlock] = []
    open_: list[list[Any]] = []  # [module, label, first line, last line], outermost first

    def close(keep: int) -> None:
        while len(open_) > keep:
            module, label, first, last = open_.pop()
            if last > first:
                out.append(ModuleBlock(first, last, module, label, len(open_)))

    for node, first, last in nodes:
        source = graph.sources.of(node)
        if source is None or not source.modules:
            continue
        scopes = [m for m in source.modules if m.path]
        depth = 0
        while depth < min(len(open_), len(scopes)) and open_[depth][0] == scopes[depth].path:
            depth += 1
        close(depth)
        open_ += [[m.path, m.text(), first, last] for m in scopes[depth:]]
        for entry in open_:
            entry[3] = last
    close(0)
    return out


def _source_text(graph: Graph, node: Node) -> str:
    source = graph.sources.of(node)
    frame = source.user_frame if source is not None else None
    return frame.location if frame is not None else ""


def _scope_lines(
    graph: Graph, scope: Scope, out: _Lines, node_lines: dict[str, int], blocks: list[Block], indent: str, modules: list[ModuleBlock]
) -> None:
    """A line per node of ``scope`` in run order, each followed by the scopes it holds, indented."""
    extents: list[tuple[Node, int, int]] = []
    for node in scope.nodes:
        first = out.next_line
        node_lines[node.id] = first
        out.put(indent)
        for k, o in enumerate(node.outputs):
            out.put(", " if k else "")
            if o:
                out.typed(scope.value_info(o), Role.DEF)
            else:
                out.put("_")
        out.put(" = ")
        out.call(node.proto)
        out.trailer(node.id, node.is_constant, _source_text(graph, node))
        out.end()
        for sub in graph.subscopes(node):
            start = out.next_line
            out.put(f"{indent}  {sub.attribute}(")
            for k, v in enumerate(sub.inputs):
                out.put(", " if k else "")
                out.typed(v, Role.DEF)
            out.put(") {")
            out.end()
            _scope_lines(graph, sub, out, node_lines, blocks, indent + "    ", modules)
            out.put(f"{indent}    ")
            out.put("return", TokenKind.KEYWORD)
            out.put(" ")
            for k, o in enumerate(sub.output_names):
                out.put(", " if k else "")
                out.put(o, TokenKind.VALUE, Role.USE)
            out.end()
            out.put(f"{indent}  }}")
            label = "/".join(f"{s.node}/{s.attribute}" for s in sub.path)
            blocks.append(Block(start, out.end(), label, sub.path[0].node))
        extents.append((node, first, out.next_line - 1))
    modules += _module_blocks(graph, extents)


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
