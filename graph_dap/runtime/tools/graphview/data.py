"""The graph as data for the graph view: every node, value, scope and module scope, as one JSON document.

The same document feeds the VS Code graph view (``graph-dap graph MODEL --json``) and the page
``graph-dap graph MODEL --out graph.html`` writes; its renderer is ``vscode-ext/src/graphview``.
Node ids are the debugger's and the listing's (``Graph.node``), and each node carries its line in
the listing (``graph-dap listing MODEL``), so the view, the listing and the debugger name the same
node the same way.

Rows are arrays, not objects, to stay small on 10,000-node models (the renderer reads them by
position, see :data:`NODE_COLUMNS` and :data:`VALUE_COLUMNS`):

- ``scopes``: ``[owner, attribute, inputs, outputs]``: the main graph first (``owner`` -1), then
  each If/Loop/Scan body and each call of a model-local function (``owner`` the node's index in
  ``nodes``, ``attribute`` ``then_branch``, ``body`` or the function's name); ``inputs`` and
  ``outputs`` are value indices.
- ``modules``: ``[path, class, parent, scope]``: the module scopes graph-dap derives
  (:mod:`graph_dap.runtime.graph.source`: PyTorch's metadata, else node names), one row per module and
  scope it has nodes in; ``parent`` the enclosing module's row, -1 at the top.
- ``values``: ``[name, type, producer, flags]``: ``type`` as the listing writes it
  (``float32[1,3,?,?]``), ``producer`` a node index or -1, ``flags`` 1 for an initializer.
- ``nodes``: ``[id, op, scope, module, line, inputs, outputs, flags, text]``: ``module`` a module
  row or -1, ``line`` the node's listing line, ``inputs``/``outputs`` value indices (outer-scope
  values a body reads are inputs of the node that holds it, as the listing says), ``flags`` 1 constant (computed from constants alone),
  2 enterable (a debugger steps into it), ``text`` what else the node's listing line says: its
  attributes as the listing writes them (``<kernel_shape=[3,3], pads=[1,1,1,1]>``) and the Python
  source line (``# model.py:25``); the renderer writes the rest of the line from the other columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graph_dap.runtime.graph import Graph, Node, Scope
from graph_dap.runtime.graph.model import ScopePath
from graph_dap.runtime.listing import Listing, TokenKind, render_listing

FORMAT = "graph-dap-graph"
VERSION = 1
NODE_COLUMNS = ("id", "op", "scope", "module", "line", "inputs", "outputs", "flags", "text")
VALUE_COLUMNS = ("name", "type", "producer", "flags")
SCOPE_COLUMNS = ("owner", "attribute", "inputs", "outputs")
MODULE_COLUMNS = ("path", "class", "parent", "scope")
NODE_CONSTANT, NODE_ENTERABLE = 1, 2
VALUE_INITIALIZER = 1
_MAX_TEXT = 240  # a node's listing line, cut: attributes can be long


class _Builder:
    """Numbers scopes, modules and values as they are first met."""

    def __init__(self, graph: Graph, listing: Listing) -> None:
        self.graph = graph
        self.listing = listing
        self.lines = listing.text.splitlines()
        self.scope_index: dict[ScopePath, int] = {}
        self.scopes: list[list[Any]] = []
        self.node_index: dict[str, int] = {}
        self.nodes: list[list[Any]] = []
        self.values: list[list[Any]] = []
        self.value_index: dict[tuple[int, str], int] = {}
        self.modules: list[list[Any]] = []
        self.module_index: dict[tuple[int, str], int] = {}
        self.initializers: dict[int, frozenset[str]] = {}

    def build(self) -> None:
        order = list(self.graph.all_nodes())
        for path in self._scope_paths(order):
            self.scope_index[path] = len(self.scope_index)
        for i, node in enumerate(order):
            self.node_index[node.id] = i
        for path, k in self.scope_index.items():
            scope = self.graph.scopes[path]
            owner = self.node_index[scope.owner.id] if scope.owner is not None else -1
            self.scopes.append([owner, path[-1].attribute if path else "", [], []])
            self.scopes[k][2] = [self._value(k, scope, v.name) for v in scope.inputs]
        for node in order:
            self.nodes.append(self._node(node))
        for path, k in self.scope_index.items():
            scope = self.graph.scopes[path]
            self.scopes[k][3] = [self._value(k, scope, name) for name in scope.output_names if name]

    def _scope_paths(self, order: list[Node]) -> list[ScopePath]:
        paths: list[ScopePath] = [()]
        for node in order:
            paths += [s.path for s in self.graph.subscopes(node)]
        return paths

    def _defining(self, k: int, scope: Scope, name: str) -> tuple[int, Scope]:
        """The scope that defines ``name`` as seen from ``scope`` (itself, else an enclosing one)."""
        at: Scope | None = scope
        while at is not None:
            if at.defines(name):
                return self.scope_index[at.path], at
            at = at.enclosing
        return k, scope

    def _value(self, k: int, scope: Scope, name: str) -> int:
        k, scope = self._defining(k, scope, name)
        key = (k, name)
        found = self.value_index.get(key)
        if found is not None:
            return found
        producer = scope.producer(name)
        inits = self.initializers.get(k)
        if inits is None:
            inits = self.initializers[k] = frozenset(scope.initializer_names)
        flags = VALUE_INITIALIZER if name in inits else 0
        self.value_index[key] = len(self.values)
        self.values.append([name, scope.value_info(name).type_text(), self.node_index[producer.id] if producer is not None else -1, flags])
        return self.value_index[key]

    def _module(self, k: int, node: Node) -> int:
        source = self.graph.sources.of(node)
        parent = -1
        if source is None:
            return parent
        for m in source.modules:
            if not m.path:
                continue  # the model itself
            key = (k, m.path)
            found = self.module_index.get(key)
            if found is None:
                found = self.module_index[key] = len(self.modules)
                self.modules.append([m.path, m.cls, parent, k])
            parent = found
        return parent

    def _extra(self, line: int) -> str:
        """The attributes and the source comment of a node's listing line."""
        if not 0 < line <= len(self.lines):
            return ""
        text = self.lines[line - 1]
        tokens = self.listing.tokens_at(line)
        attrs = [t for t in tokens if t.kind is TokenKind.ATTRIBUTE]
        op = next((t for t in tokens if t.kind is TokenKind.OP), None)
        out = ""
        if attrs and op is not None:
            end = text.find(">(", attrs[-1].end)
            out = text[op.end : end + 1] if end >= 0 else ""
        ident = next((t for t in tokens if t.kind is TokenKind.NODE_ID), None)
        source = [t.text for t in tokens if t.kind is TokenKind.COMMENT and ident is not None and t.start > ident.end and t.text.startswith("# ")]
        return out + (f"  {source[-1]}" if source else "")

    def _node(self, node: Node) -> list[Any]:
        k = self.scope_index[node.path]
        scope = self.graph.scope_of(node)
        line = self.listing.line_of(node.id) or 0
        text = self._extra(line)
        flags = (NODE_CONSTANT if node.is_constant else 0) | (NODE_ENTERABLE if node.enterable else 0)
        return [
            node.id,
            node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}",
            k,
            self._module(k, node),
            line,
            [self._value(k, scope, name) for name in node.all_inputs],
            [self._value(k, scope, name) for name in node.outputs if name],
            flags,
            text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…",
        ]


def graph_data(graph: Graph, listing: Listing | None = None) -> dict[str, Any]:
    """The graph view's document of ``graph`` (see the module's docstring); ``listing``: its listing, if made already."""
    b = _Builder(graph, listing if listing is not None else render_listing(graph))
    b.build()
    path = graph.path
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": Path(path).name if path is not None else (graph.name or "model"),
        "path": str(path) if path is not None else None,
        "columns": {"nodes": NODE_COLUMNS, "values": VALUE_COLUMNS, "scopes": SCOPE_COLUMNS, "modules": MODULE_COLUMNS},
        "scopes": b.scopes,
        "modules": b.modules,
        "values": b.values,
        "nodes": b.nodes,
    }
