"""Where each value of a listing is made and read: the lookups behind hover, definition and references.

Everything comes from the listing's tokens (:class:`~graph_dap.runtime.listing.Token`,
recorded while it was rendered) and the graph's producers and consumers. A value
is named by a :class:`ValueRef`: its name and the scope that makes it, ``""`` for the
top-level graph, a subgraph's scope (``If_0/then_branch``) for the values made inside
one. Lines are the listing's (1-based); columns are characters.
"""

from __future__ import annotations

from dataclasses import dataclass

from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.listing import Block, Listing, Role, Token, TokenKind


@dataclass(frozen=True, slots=True)
class ValueRef:
    """A value: its name and the scope whose node (or input list) makes it."""

    name: str
    scope: str = ""  # "" is the top-level graph

    @property
    def top_level(self) -> bool:
        return self.scope == ""


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of one listing line: 1-based line, 0-based columns ``[start, end)``."""

    line: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class InnerNode:
    """A node inside a subgraph: its line, op type and name (the graph IR has top-level nodes only)."""

    line: int
    op_type: str
    name: str
    outputs: tuple[str, ...]


class ListingIndex:
    """Lookups over one rendered listing of one graph."""

    def __init__(self, graph: Graph, listing: Listing) -> None:
        self.graph = graph
        self.listing = listing
        # Values made inside subgraphs, and the reads of each (inner or outer) value from inside them.
        self._inner_defs: dict[ValueRef, Span] = {}
        self._inner_uses: dict[ValueRef, list[Span]] = {}
        self.inner_nodes: dict[int, InnerNode] = {}
        self._scopes: dict[str, Block] = {b.scope: b for b in listing.blocks}
        self._parent: dict[str, str] = {}
        stack: list[Block] = []
        for block in listing.blocks:  # in order of their first line: the enclosing one comes first
            while stack and stack[-1].end < block.start:
                stack.pop()
            self._parent[block.scope] = stack[-1].scope if stack else ""
            stack.append(block)
        for block in listing.blocks:
            self._index_block(block)

    # -- building --------------------------------------------------------------------

    def _index_block(self, block: Block) -> None:
        for line in range(block.start, block.end + 1):
            if self.listing.block_at(line) is not block:
                continue  # a line of a nested subgraph: indexed with that one
            tokens = self.listing.tokens_at(line)
            for t in tokens:
                if t.kind is not TokenKind.VALUE:
                    continue
                if t.role is Role.DEF:
                    self._inner_defs.setdefault(ValueRef(t.text, block.scope), Span(line, t.start, t.end))
                else:
                    ref = self.resolve(t.text, block.scope)
                    self._inner_uses.setdefault(ref, []).append(Span(line, t.start, t.end))
            op = next((t for t in tokens if t.kind is TokenKind.OP), None)
            if op is not None:
                name = next((t.text for t in tokens if t.kind is TokenKind.NODE_ID), "")
                outs = tuple(t.text for t in tokens if t.kind is TokenKind.VALUE and t.role is Role.DEF and t.end <= op.start)
                self.inner_nodes[line] = InnerNode(line, op.text.rsplit(".", 1)[-1], name, outs)

    # -- lookups ---------------------------------------------------------------------

    def scope_at(self, line: int) -> str:
        """The scope of a line: ``""`` at the top level, else its innermost subgraph's."""
        block = self.listing.block_at(line)
        return block.scope if block else ""

    def parent_scope(self, scope: str) -> str:
        """The scope that holds a subgraph's scope (``""``: the top level)."""
        return self._parent.get(scope, "")

    def block(self, scope: str) -> Block | None:
        return self._scopes.get(scope)

    def resolve(self, name: str, scope: str) -> ValueRef:
        """The value ``name`` means when read in ``scope``: the innermost scope that makes it."""
        while scope:
            ref = ValueRef(name, scope)
            if ref in self._inner_defs:
                return ref
            scope = self._parent.get(scope, "")
        return ValueRef(name)

    def value_at(self, line: int, column: int) -> tuple[Token, ValueRef] | None:
        """The value token under the cursor and the value it names."""
        t = self.listing.token_at(line, column)
        if t is None:
            return None
        if t.kind is TokenKind.TYPE:  # a type stands for the value it follows
            before = [v for v in self.listing.tokens_at(line) if v.kind is TokenKind.VALUE and v.end <= t.start]
            if not before:
                return None
            t = before[-1]
        if t.kind is not TokenKind.VALUE:
            return None
        return t, self.resolve(t.text, self.scope_at(line))

    def node_on(self, line: int) -> Node | None:
        """The top-level node of a line."""
        nid = self.listing.node_at(line)
        return self.graph.node(nid) if nid is not None else None

    def definition(self, ref: ValueRef) -> Span | None:
        """Where ``ref`` is made: its producer's output, or its declaration in the header (or subgraph inputs)."""
        if not ref.top_level:
            return self._inner_defs.get(ref)
        producer = self.graph.producer(ref.name)
        line = self.listing.line_of(producer.id) if producer else self.listing.declarations.get(ref.name)
        if line is None:
            return None
        return self._span_on(line, ref.name, Role.DEF)

    def uses(self, ref: ValueRef) -> list[Span]:
        """Every place that reads ``ref``, in line order: node inputs, subgraph reads, returns, output declarations."""
        spans: list[Span] = []
        if ref.top_level:
            seen: set[int] = set()
            decl = self.listing.declarations.get(ref.name)
            if decl is not None and ref.name in self.graph.output_names:
                seen.add(decl)
                spans += self._spans_on(decl, ref.name, Role.USE)
            for node in self.graph.consumers(ref.name):
                line = self.listing.line_of(node.id)
                if line is not None and line not in seen:
                    seen.add(line)
                    spans += self._spans_on(line, ref.name, Role.USE)
        spans += self._inner_uses.get(ref, [])
        spans.sort(key=lambda s: (s.line, s.start))
        return spans

    def _span_on(self, line: int, name: str, role: Role) -> Span | None:
        spans = self._spans_on(line, name, role)
        return spans[0] if spans else None

    def _spans_on(self, line: int, name: str, role: Role) -> list[Span]:
        return [
            Span(line, t.start, t.end)
            for t in self.listing.tokens_at(line)
            if t.kind is TokenKind.VALUE and t.role is role and t.text == name
        ]
