"""The outline of a listing: document symbols, folding ranges, and workspace symbols.

Document symbols: the graph, then its nodes in run order, nested in the module scopes
that their names (``block/conv``) or their exporter's metadata give, and a node's
subgraphs under it with their own nodes. A scope groups a run of consecutive nodes
(a scope that comes back later opens again), so that every range holds its children.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lsprotocol import types

from graph_dap.lsp.analysis import Analysis
from graph_dap.lsp.hover import module_path
from graph_dap.lsp.index import Span
from graph_dap.runtime.graph import CONTROL_FLOW_OPS, Node
from graph_dap.runtime.listing import Block, TokenKind

_ELEMENTWISE = frozenset(
    {"Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Sqrt", "Exp", "Log", "Reciprocal", "Max", "Min", "Sum", "Mean",
     "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Not", "Xor", "Where", "Mod", "Sign"}
)  # fmt: skip
_MAX_WORKSPACE_SYMBOLS = 500


def node_kind(op_type: str) -> types.SymbolKind:
    """The symbol kind of a node: constants, control flow, arithmetic, and the rest (functions)."""
    if op_type in ("Constant", "ConstantOfShape"):
        return types.SymbolKind.Constant
    if op_type in CONTROL_FLOW_OPS:
        return types.SymbolKind.Struct
    if op_type in _ELEMENTWISE:
        return types.SymbolKind.Operator
    return types.SymbolKind.Function


@dataclass(slots=True)
class _Open:
    """A module scope whose run of nodes goes on."""

    name: str
    symbol: types.DocumentSymbol
    children: list[types.DocumentSymbol]  # the symbol's own list, filled as the run goes


def document_symbols(a: Analysis) -> list[types.DocumentSymbol]:
    """The outline tree of the listing."""
    whole = types.Range(types.Position(0, 0), a.line_range(a.line_count).end)
    title = a.graph.name or a.version.path.stem
    top: list[types.DocumentSymbol] = []
    root = types.DocumentSymbol(
        name=title,
        kind=types.SymbolKind.Module,
        range=whole,
        selection_range=types.Range(types.Position(0, 0), types.Position(0, 0)),
        detail=f"{len(a.graph.nodes)} nodes",
        children=top,
    )
    stack: list[_Open] = []
    blocks_of: dict[str, list[Block]] = {}
    for b in a.listing.blocks:
        blocks_of.setdefault(b.node, []).append(b)
    for node in a.graph.nodes:
        line = a.listing.line_of(node.id)
        if line is None:
            continue
        path = module_path(a.graph, node)
        depth = 0
        while depth < len(stack) and depth < len(path) and stack[depth].name == path[depth]:
            depth += 1
        del stack[depth:]
        for part in path[depth:]:
            pos = types.Position(line - 1, 0)
            kids: list[types.DocumentSymbol] = []
            scope = types.DocumentSymbol(
                name=part, kind=types.SymbolKind.Namespace, range=types.Range(pos, pos), selection_range=types.Range(pos, pos), children=kids
            )
            (stack[-1].children if stack else top).append(scope)
            stack.append(_Open(part, scope, kids))
        symbol = _node_symbol(a, node, line, blocks_of.get(node.id, []))
        (stack[-1].children if stack else top).append(symbol)
        for s in stack:
            s.symbol.range = types.Range(s.symbol.range.start, symbol.range.end)
    return [root]


def _node_symbol(a: Analysis, node: Node, line: int, blocks: list[Block]) -> types.DocumentSymbol:
    outs = [a.graph.value_info(o).type_text() for o in node.outputs if o]
    rng = a.line_range(line)
    last = max([b.end for b in blocks], default=line)
    end = a.line_range(last).end
    children = [_block_symbol(a, b) for b in blocks if a.index.parent_scope(b.scope) == ""]
    return types.DocumentSymbol(
        name=node.id,
        kind=node_kind(node.op_type),
        range=types.Range(rng.start, end),
        selection_range=_id_range(a, line) or rng,
        detail=f"{node.op_type} -> {', '.join(outs)}" if outs else node.op_type,
        children=children or None,
    )


def _block_symbol(a: Analysis, block: Block) -> types.DocumentSymbol:
    children = []
    for line in range(block.start + 1, block.end):
        inner = a.index.inner_nodes.get(line)
        if inner is None or a.listing.block_at(line) is not block:
            continue
        rng = a.line_range(line)
        children.append(
            types.DocumentSymbol(
                name=inner.name or ", ".join(inner.outputs) or inner.op_type,
                kind=node_kind(inner.op_type),
                range=rng,
                selection_range=rng,
                detail=inner.op_type,
            )
        )
    children += [_block_symbol(a, b) for b in a.listing.blocks if a.index.parent_scope(b.scope) == block.scope]
    children.sort(key=lambda s: s.range.start.line)
    start = types.Position(block.start - 1, 0)
    return types.DocumentSymbol(
        name=block.scope.rsplit("/", 1)[-1],
        kind=types.SymbolKind.Object,
        range=types.Range(start, a.line_range(block.end).end),
        selection_range=types.Range(start, start),
        detail="subgraph",
        children=children or None,
    )


def _id_range(a: Analysis, line: int) -> types.Range | None:
    t = next((t for t in a.listing.tokens_at(line) if t.kind is TokenKind.NODE_ID), None)
    return a.range(Span(line, t.start, t.end)) if t else None


def folding_ranges(a: Analysis) -> list[types.FoldingRange]:
    """Subgraphs, runs of nodes in one module scope, and the header's declarations."""
    out: list[types.FoldingRange] = []
    decl = sorted(a.listing.declarations.values())
    if len(decl) > 1:
        out.append(types.FoldingRange(start_line=decl[0] - 1, end_line=decl[-1] - 1, kind=types.FoldingRangeKind.Comment))
    for b in a.listing.blocks:
        out.append(types.FoldingRange(start_line=b.start - 1, end_line=b.end - 1, kind=types.FoldingRangeKind.Region))
    for m in a.listing.modules:
        out.append(types.FoldingRange(start_line=m.start - 1, end_line=m.end - 1, kind=types.FoldingRangeKind.Region, collapsed_text=m.label))
    out.sort(key=lambda r: (r.start_line, -r.end_line))
    return out


def workspace_symbols(analyses: Iterable[tuple[str, Analysis]], query: str) -> list[types.WorkspaceSymbol]:
    """Nodes and values whose name holds ``query`` (case-insensitive), across the open listings."""
    q = query.lower()
    out: list[types.WorkspaceSymbol] = []
    for uri, a in analyses:
        container = a.version.path.name
        for node in a.graph.nodes:
            if q in node.id.lower():
                line = a.listing.line_of(node.id)
                if line is not None:
                    rng = _id_range(a, line) or a.line_range(line)
                    out.append(types.WorkspaceSymbol(name=node.id, kind=node_kind(node.op_type), location=types.Location(uri=uri, range=rng), container_name=container))
            if len(out) >= _MAX_WORKSPACE_SYMBOLS:
                return out
        for name in a.graph.value_names():
            if q in name.lower():
                span = a.index.definition(a.index.resolve(name, ""))
                if span is not None:
                    kind = types.SymbolKind.Constant if name in a.version.initializers else types.SymbolKind.Variable
                    out.append(types.WorkspaceSymbol(name=name, kind=kind, location=types.Location(uri=uri, range=a.range(span)), container_name=container))
            if len(out) >= _MAX_WORKSPACE_SYMBOLS:
                return out
    return out


def highlights(a: Analysis, line: int, column: int) -> list[types.DocumentHighlight]:
    """The value under the cursor where it is made (write) and read (read)."""
    hit = a.index.value_at(line, column)
    if hit is None:
        return []
    _, ref = hit
    out = []
    d = a.index.definition(ref)
    if d is not None:
        out.append(types.DocumentHighlight(range=a.range(d), kind=types.DocumentHighlightKind.Write))
    out += [types.DocumentHighlight(range=a.range(s), kind=types.DocumentHighlightKind.Read) for s in a.index.uses(ref)]
    return out



