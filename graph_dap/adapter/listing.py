"""The graph listing as a DAP source: its ``Source`` object and the map from lines to nodes.

The worker renders the listing (``graph_dap.runtime.listing``) and writes it beside the
model as ``<model>.onnxtxt`` when it can; the adapter serves it by ``sourceReference``
either way, and takes breakpoints set on the file or on the served text.
"""

from __future__ import annotations

import bisect
import os
from typing import Any

from graph_dap.runtime.worker_client import GraphInfo, NodeInfo


class ListingSource:
    """One session's listing: what a frame points at, where a line breakpoint lands."""

    def __init__(self, graph: GraphInfo, reference: int) -> None:
        self.graph = graph
        self.reference = reference
        self.text = graph.listing
        self.nodes = {n.id: n for n in graph.nodes}
        by_line = sorted((n.line, n.id) for n in graph.nodes if n.line > 0)
        self._lines = [line for line, _ in by_line]
        self._ids = [nid for _, nid in by_line]
        base = os.path.splitext(os.path.basename(graph.model_path))[0]
        self.name = os.path.basename(graph.listing_path) if graph.listing_path else f"{base}.onnxtxt"

    def source(self) -> dict[str, Any]:
        """The DAP ``Source``: served by reference, with the written file's path when there is one."""
        src: dict[str, Any] = {"name": self.name, "sourceReference": self.reference}
        if self.graph.listing_path:
            src["path"] = self.graph.listing_path
        src["presentationHint"] = "normal"
        src["origin"] = f"graph listing of {os.path.basename(self.graph.model_path)}"
        return src

    def matches(self, source: dict[str, Any]) -> bool:
        """Whether a client's ``Source`` is this listing (by reference or by path)."""
        ref = source.get("sourceReference")
        if isinstance(ref, int) and ref > 0:
            return ref == self.reference
        path = source.get("path")
        if not isinstance(path, str) or not self.graph.listing_path:
            return False
        return _same_file(path, self.graph.listing_path)

    def node(self, node_id: str) -> NodeInfo:
        return self.nodes[node_id]

    def node_at_or_after(self, line: int, stoppable_only: bool = False) -> NodeInfo | None:
        """The node on ``line`` or the first node line below it."""
        i = bisect.bisect_left(self._lines, line)
        while i < len(self._ids):
            node = self.nodes[self._ids[i]]
            if not (stoppable_only and node.static):
                return node
            i += 1
        return None


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))
