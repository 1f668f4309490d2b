"""Node times per line of the model's Python source and per module scope (``profile --by line|module``).

A node's time goes to its user's line (the innermost frame outside torch) and to its innermost
module. A node of onnxruntime's optimized graph stands for the original nodes it came from
(``profile --fused``): its time is split evenly over them, each part to its own line and module.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from graph_dap.runtime.graph.source import SourceMap
from graph_dap.runtime.selection import at_depth

NO_SOURCE = "(no source)"
NO_MODULE = "(no module)"


class SourceUnit(enum.StrEnum):
    """What a row of a table by source is: a line of the model's Python source, or a module scope."""

    LINE = "line"
    MODULE = "module"


@dataclass(frozen=True, slots=True)
class SourceTime:
    """The time of one source line, or one module: the sum of its nodes' shares."""

    key: str  # "model.py:25" or a module path
    time_ms: float
    share: float
    nodes: int  # original nodes that gave it time
    path: str | None = None  # for a line: the file as the stack traces name it
    line: int | None = None
    function: str = ""
    code: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"time_ms": round(self.time_ms, 6), "share": round(self.share, 6), "nodes": self.nodes}
        if self.path is not None:
            d.update({"path": self.path, "line": self.line, "function": self.function, "code": self.code})
        else:
            d["module"] = None if self.key == NO_MODULE else self.key
        return d


def _shares(timed: Iterable[tuple[Sequence[str], float]]) -> list[tuple[str, float]]:
    """Each original node with its share of a timed node's time."""
    out = []
    for ids, ms in timed:
        if ids:
            out += [(i, ms / len(ids)) for i in ids]
    return out


def by_line(sources: SourceMap, timed: Iterable[tuple[Sequence[str], float]]) -> list[SourceTime]:
    """Times per user line, slowest first; ``timed``: (the original node ids, the time in ms) of each timed node."""
    sums: dict[str, list[Any]] = {}
    for nid, ms in _shares(timed):
        s = sources.of(nid)
        f = s.user_frame if s is not None else None
        key = f"{f.path}:{f.line}" if f is not None else NO_SOURCE
        entry = sums.setdefault(key, [0.0, set(), f])
        entry[0] += ms
        entry[1].add(nid)
    total = sum(e[0] for e in sums.values())
    out = []
    for key, (ms, nodes, f) in sums.items():
        share = ms / total if total else 0.0
        if f is None:
            out.append(SourceTime(key, ms, share, len(nodes)))
        else:
            out.append(SourceTime(f"{f.file_name}:{f.line}", ms, share, len(nodes), f.path, f.line, f.qualname, f.code))
    return sorted(out, key=lambda t: (-t.time_ms, t.key))


def by_module(sources: SourceMap, timed: Iterable[tuple[Sequence[str], float]], depth: int = 0) -> list[SourceTime]:
    """Times per innermost module scope, slowest first; ``depth`` > 0: per module cut to that many components
    (``model.layers.8.mlp`` at depth 3 counts for ``model.layers.8``: a total per layer)."""
    sums: dict[str, list[Any]] = {}
    for nid, ms in _shares(timed):
        s = sources.of(nid)
        path = s.module_path if s is not None else None
        key = NO_MODULE if path is None else at_depth(path, depth) or "(model)"
        entry = sums.setdefault(key, [0.0, set()])
        entry[0] += ms
        entry[1].add(nid)
    total = sum(e[0] for e in sums.values())
    out = [SourceTime(k, ms, ms / total if total else 0.0, len(n)) for k, (ms, n) in sums.items()]
    return sorted(out, key=lambda t: (-t.time_ms, t.key))


def table_text(rows: Sequence[SourceTime], what: SourceUnit, top: int = 25) -> str:
    """A table of :func:`by_line` or :func:`by_module`, slowest first."""
    shown = rows if top <= 0 else rows[:top]
    width = max([len(what)] + [len(r.key) for r in shown]) if shown else len(what)
    width = min(width, 48)
    lines = [f"{what:<{width}}  {'time_ms':>9}  {'share':>6}  {'nodes':>5}" + ("  code" if what is SourceUnit.LINE else "")]
    for r in shown:
        line = f"{r.key[:width]:<{width}}  {r.time_ms:>9.4f}  {r.share:>6.1%}  {r.nodes:>5}"
        if what is SourceUnit.LINE and r.code:
            line += f"  {r.function}: {r.code}"
        lines.append(line)
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more (--top 0 lists all)")
    return "\n".join(lines)
