"""The graph listing as a DAP source: its ``Source`` object and the map from lines to nodes.

The worker renders the listing (``graph_dap.runtime.listing``) and writes it beside the
model as ``<model>.onnxtxt`` when it can; a launch may name another file for it instead
(``listingPath``, where the VS Code extension wrote it). When that file holds the
listing, frames and breakpoints name it by ``path`` alone, so that a client opens the
file itself (where the user's gutter breakpoints are); only when there is no such file
is the text served by ``sourceReference``.
"""

from __future__ import annotations

import bisect
import os
from typing import Any

from graph_dap.files import write_text_atomic
from graph_dap.paths import same_file
from graph_dap.worker.protocol import GraphInfo, NodeInfo


def holds(path: str, text: str) -> bool:
    """Whether the file at ``path`` holds exactly ``text``."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read() == text
    except (OSError, UnicodeDecodeError):
        return False


def ensure_listing(path: str, text: str) -> bool:
    """Make the file at ``path`` hold ``text`` (written only when it differs); False when it cannot."""
    if holds(path, text):
        return True
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write_text_atomic(path, text)
    except OSError:
        return False
    return holds(path, text)


class ListingSource:
    """One session's listing: what a frame points at, where a line breakpoint lands."""

    def __init__(self, graph: GraphInfo, reference: int, path: str | None = None, aliases: tuple[str, ...] = ()) -> None:
        """``path``: the file that holds the listing, if any; ``aliases``: other paths that name it."""
        self.graph = graph
        self.reference = reference
        self.path = path
        self._paths = tuple(p for p in (path, *aliases) if p)
        self.text = graph.listing
        self.nodes = {n.id: n for n in graph.nodes}
        by_line = sorted((n.line, n.id) for n in graph.nodes if n.line > 0)
        self._lines = [line for line, _ in by_line]
        self._ids = [nid for _, nid in by_line]
        base = os.path.splitext(os.path.basename(graph.model_path))[0]
        self.name = os.path.basename(path) if path else f"{base}.onnxtxt"

    def source(self) -> dict[str, Any]:
        """The DAP ``Source``: the file by its path when there is one, else the text by reference."""
        if self.path:
            return {"name": self.name, "path": self.path, "presentationHint": "normal"}
        return {
            "name": self.name,
            "sourceReference": self.reference,
            "presentationHint": "normal",
            "origin": f"graph listing of {os.path.basename(self.graph.model_path)}",
        }

    def matches(self, source: dict[str, Any]) -> bool:
        """Whether a client's ``Source`` is this listing (by reference or by path)."""
        ref = source.get("sourceReference")
        if isinstance(ref, int) and ref > 0:
            return ref == self.reference
        path = source.get("path")
        return isinstance(path, str) and any(same_file(path, p) for p in self._paths)

    def node(self, node_id: str) -> NodeInfo:
        return self.nodes[node_id]

    def node_at_or_after(self, line: int, stoppable_only: bool = False) -> NodeInfo | None:
        """The node on ``line`` or the first node line below it."""
        i = bisect.bisect_left(self._lines, line)
        while i < len(self._ids):
            node = self.nodes[self._ids[i]]
            if not (stoppable_only and node.constant):
                return node
            i += 1
        return None
