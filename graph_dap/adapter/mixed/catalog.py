"""The models a mixed session's program has loaded, their listings, and the graph breakpoints that apply to each.

When the program creates an ``InferenceSession``, the model is loaded once in a worker
of the catalog's own: that writes its listing (``<model>.onnxtxt`` beside it, or in the
session's folder when that folder is not writable) and gives the nodes and their lines.
Line breakpoints are kept by listing file, function breakpoints (node specs) for every
model; a model is *armed* when some breakpoint lands on one of its nodes, and then each
of its runs is debugged. A breakpoint set on a listing before its model is loaded waits
(unverified) and is verified by a ``breakpoint`` event once the model comes.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

from graph_dap.adapter.listing import ListingSource, ensure_listing
from graph_dap.host import protocol as hp
from graph_dap.module_paths import MODULE, in_module
from graph_dap.worker import protocol as wp
from graph_dap.worker.client import WorkerClient

_GLOB = set("*?[")


@dataclass(slots=True)
class ModelEntry:
    """One model the program loaded."""

    loaded: hp.ModelLoaded
    graph: wp.GraphInfo | None = None
    listing: ListingSource | None = None
    message: str = ""  # why it cannot be debugged, when it cannot

    @property
    def debuggable(self) -> bool:
        return self.graph is not None


@dataclass(slots=True)
class LineBreakpoint:
    """A client breakpoint on a listing line: its id, and where it landed (per model, by key)."""

    id: int
    line: int
    condition: str | None = None
    hit_condition: str | None = None
    log_message: str | None = None
    nodes: dict[str, wp.NodeInfo] = field(default_factory=dict)

    def spec(self, node: wp.NodeInfo) -> dict[str, Any]:
        """The graph session's ``SourceBreakpoint`` for it, on its node's line."""
        bp: dict[str, Any] = {"line": node.line}
        for key, value in (("condition", self.condition), ("hitCondition", self.hit_condition), ("logMessage", self.log_message)):
            if value:
                bp[key] = value
        return bp


@dataclass(slots=True)
class FunctionBreakpoint:
    """A function breakpoint (a node spec: id, value name, op:TYPE or glob), for every model."""

    id: int
    name: str
    condition: str | None = None
    hit_condition: str | None = None
    log_message: str | None = None
    models: set[str] = field(default_factory=set)  # the keys of the models it lands in

    def spec(self) -> dict[str, Any]:
        bp: dict[str, Any] = {"name": self.name}
        for key, value in (("condition", self.condition), ("hitCondition", self.hit_condition), ("logMessage", self.log_message)):
            if value:
                bp[key] = value
        return bp


def spec_nodes(graph: wp.GraphInfo, spec: str) -> list[wp.NodeInfo]:
    """The stoppable nodes a function breakpoint's spec names in ``graph`` (as the runtime resolves it)."""
    text = spec.strip()
    nodes = [n for n in graph.nodes if not n.constant]
    by_id = [n for n in nodes if n.id == text]
    if by_id:
        return by_id
    if text.startswith("op:"):
        op = text[3:].strip()
        return [n for n in nodes if n.op_type == op or f"{n.domain}.{n.op_type}" == op]
    if text.startswith(MODULE):
        return [n for n in nodes if in_module(n.modules, text[len(MODULE) :])]
    producers = [n for n in nodes if text in n.outputs]
    if producers:
        return producers
    if _GLOB & set(text):
        by_glob = [n for n in nodes if fnmatch.fnmatchcase(n.id, text)]
        if by_glob:
            return by_glob
    return [n for n in nodes if in_module(n.modules, text)]  # a module path given without module:


class Catalog:
    """The program's models and the graph breakpoints; ``folder``: where listings go that cannot go beside a model."""

    def __init__(self, folder: str, spawn_worker: Any) -> None:
        self.folder = folder
        self._spawn_worker = spawn_worker
        self._worker: WorkerClient | None = None
        self.models: dict[str, ModelEntry] = {}
        self.lines: dict[str, list[LineBreakpoint]] = {}  # by listing path as the client gave it
        self.functions: list[FunctionBreakpoint] = []

    async def add(self, loaded: hp.ModelLoaded) -> tuple[ModelEntry, list[LineBreakpoint]]:
        """Load a model the program created a session for; returns it and the line breakpoints it verified."""
        entry = self.models.get(loaded.key)
        if entry is not None:
            return entry, []
        entry = ModelEntry(loaded)
        self.models[loaded.key] = entry
        try:
            if self._worker is None or self._worker.dead is not None:
                self._worker = await self._spawn_worker()
            graph = await self._worker.load(wp.LoadArgs(loaded.path, write_listing=True))
        except Exception as error:  # noqa: BLE001 - a model graph-dap cannot load runs undebugged, and says why
            entry.message = f"{loaded.name} cannot be debugged: {error}"
            return entry, []
        entry.graph = graph
        entry.listing = self._listing(graph, loaded)
        for fb in self.functions:
            if spec_nodes(graph, fb.name):
                fb.models.add(loaded.key)
        verified: list[LineBreakpoint] = []
        for path, bps in self.lines.items():
            if entry.listing.matches({"path": path}):
                verified += [bp for bp in bps if self._land(bp, entry)]
        return entry, verified

    def _listing(self, graph: wp.GraphInfo, loaded: hp.ModelLoaded) -> ListingSource:
        """The listing file: beside the model when the worker could write it there, else in the session's folder."""
        if graph.listing_path:
            return ListingSource(graph, 0, graph.listing_path)
        stem = os.path.splitext(os.path.basename(loaded.path))[0]
        digest = hashlib.sha256(loaded.key.encode()).hexdigest()[:8]
        path = os.path.join(self.folder, f"{stem}-{digest}.onnxtxt")
        return ListingSource(graph, 0, path if ensure_listing(path, graph.listing) else None)

    @staticmethod
    def _land(bp: LineBreakpoint, entry: ModelEntry) -> bool:
        assert entry.listing is not None
        node = entry.listing.node_at_or_after(bp.line)
        if node is None:
            bp.nodes.pop(entry.loaded.key, None)
            return False
        bp.nodes[entry.loaded.key] = node
        return True

    def listing_entry(self, path: str) -> ModelEntry | None:
        """The model whose listing is the file at ``path``."""
        for entry in self.models.values():
            if entry.listing is not None and entry.listing.path and entry.listing.matches({"path": path}):
                return entry
        return None

    def set_lines(self, path: str, bps: list[LineBreakpoint]) -> None:
        """Replace the breakpoints of one listing file, and land them on its model's nodes."""
        self.lines[path] = bps
        for entry in self.models.values():
            if entry.listing is not None and entry.listing.matches({"path": path}):
                for bp in bps:
                    self._land(bp, entry)

    def set_functions(self, bps: list[FunctionBreakpoint]) -> None:
        """Replace the function breakpoints, and find the models each lands in."""
        self.functions = bps
        for bp in bps:
            bp.models = {k for k, e in self.models.items() if e.graph is not None and spec_nodes(e.graph, bp.name)}

    def armed(self) -> tuple[str, ...]:
        """The models some breakpoint lands in."""
        keys = {k for bps in self.lines.values() for bp in bps for k in bp.nodes}
        keys |= {k for bp in self.functions for k in bp.models}
        return tuple(sorted(keys))

    def conditions(self, key: str) -> list[str | None]:
        """The conditions of the graph breakpoints (logpoints too) that land in model ``key`` (None: unconditional)."""
        out: list[str | None] = [bp.condition for bps in self.lines.values() for bp in bps if key in bp.nodes]
        return out + [bp.condition for bp in self.functions if key in bp.models]

    def line_specs(self, key: str) -> tuple[str | None, list[tuple[LineBreakpoint, dict[str, Any]]]]:
        """The listing path of model ``key`` and the line breakpoints on it, each with its graph-session spec."""
        entry = self.models.get(key)
        if entry is None or entry.listing is None:
            return None, []
        out = [(bp, bp.spec(bp.nodes[key])) for bps in self.lines.values() for bp in bps if key in bp.nodes]
        return entry.listing.path, out

    async def close(self) -> None:
        if self._worker is not None:
            await self._worker.close()
