"""The ids a mixed session hands out: each side's thread, frame, variable, source... ids remapped into disjoint ranges.

debugpy numbers its threads, frames and variable references from 1, and so does each
graph run's session. The client sees ids of its own: Python's in ``[1, GRAPH_BASE)``,
the graphs' in ``[GRAPH_BASE, 2**31)``, so that an id alone says which side and which
run it belongs to. :func:`to_client` and :func:`to_side` rewrite the id-bearing
properties of a message body (``threadId``, ``frameId``, ``variablesReference``...);
the ``id`` of threads, frames and breakpoints is rewritten where those objects are.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

GRAPH_BASE = 1 << 30
PYTHON = 0  # the side key of debugpy; a graph run's is its number (from 1)


class IdKind(enum.StrEnum):
    """The kinds of id a mixed session remaps, each an :class:`Ids` field of the same name."""

    THREAD = "thread"
    FRAME = "frame"
    VARIABLES = "variables"
    SOURCE = "source"
    BREAKPOINT = "breakpoint"
    TARGET = "target"  # goto and stepIn targets


#: Properties that hold an id of a kind, wherever they are in a body.
KEYS = {
    "threadId": IdKind.THREAD,
    "frameId": IdKind.FRAME,
    "stackFrameId": IdKind.FRAME,
    "variablesReference": IdKind.VARIABLES,
    "sourceReference": IdKind.SOURCE,
}


@dataclass(slots=True)
class IdSpace:
    """One kind of id: (side, their id) <-> ours; Python's ids below :data:`GRAPH_BASE`, the graphs' above."""

    _ours: dict[tuple[int, int], int] = field(default_factory=dict)
    _theirs: dict[int, tuple[int, int]] = field(default_factory=dict)
    _next_python: int = 1
    _next_graph: int = GRAPH_BASE

    zero_is_none: bool = False  # variables and source references: 0 means "none" and stays 0

    def ours(self, side: int, theirs: int) -> int:
        """The client's id for ``theirs`` of ``side``."""
        if not isinstance(theirs, int) or isinstance(theirs, bool) or (theirs == 0 and self.zero_is_none):
            return theirs
        key = (side, theirs)
        found = self._ours.get(key)
        if found is None:
            if side == PYTHON:
                found, self._next_python = self._next_python, self._next_python + 1
            else:
                found, self._next_graph = self._next_graph, self._next_graph + 1
            self._ours[key] = found
            self._theirs[found] = key
        return found

    def theirs(self, ours: int) -> tuple[int, int] | None:
        """The side and its id behind one of ours (None for an id never handed out)."""
        return self._theirs.get(ours)

    def forget(self, side: int) -> None:
        """A graph run has ended: its ids are gone."""
        for key in [k for k in self._ours if k[0] == side]:
            del self._theirs[self._ours.pop(key)]


@dataclass(slots=True)
class Ids:
    """Every kind of id of a mixed session."""

    thread: IdSpace = field(default_factory=IdSpace)
    frame: IdSpace = field(default_factory=IdSpace)
    variables: IdSpace = field(default_factory=lambda: IdSpace(zero_is_none=True))
    source: IdSpace = field(default_factory=lambda: IdSpace(zero_is_none=True))
    breakpoint: IdSpace = field(default_factory=IdSpace)
    target: IdSpace = field(default_factory=IdSpace)  # goto and stepIn targets

    def space(self, kind: IdKind) -> IdSpace:
        space: IdSpace = getattr(self, kind)
        return space

    def side_of(self, kind: IdKind, ours: Any) -> tuple[int, int] | None:
        """Which side an id of ``kind`` belongs to, and its id there."""
        if not isinstance(ours, int) or isinstance(ours, bool):
            return None
        return self.space(kind).theirs(ours)

    def forget(self, side: int) -> None:
        for kind in IdKind:
            self.space(kind).forget(side)


def to_client(ids: Ids, side: int, body: Any) -> Any:
    """``body`` from ``side`` with every id property made the client's (a new object; the input is left as it is)."""
    if isinstance(body, dict):
        out: dict[str, Any] = {}
        for key, value in body.items():
            kind = KEYS.get(key)
            if kind is not None and isinstance(value, int):
                out[key] = ids.space(kind).ours(side, value)
            elif key == "hitBreakpointIds" and isinstance(value, list):
                out[key] = [ids.breakpoint.ours(side, v) for v in value]
            else:
                out[key] = to_client(ids, side, value)
        return out
    if isinstance(body, list):
        return [to_client(ids, side, v) for v in body]
    return body


def to_side(ids: Ids, side: int, body: Any) -> Any:
    """A request's arguments with the client's ids made ``side``'s (ids of another side are left for it to reject)."""
    if isinstance(body, dict):
        out: dict[str, Any] = {}
        for key, value in body.items():
            kind = KEYS.get(key)
            if kind is not None and isinstance(value, int):
                found = ids.space(kind).theirs(value)
                out[key] = found[1] if found is not None and found[0] == side else value
            else:
                out[key] = to_side(ids, side, value)
        return out
    if isinstance(body, list):
        return [to_side(ids, side, v) for v in body]
    return body


def rename_ids(ids: Ids, side: int, items: Any, kind: IdKind) -> Any:
    """Objects (threads, stack frames, breakpoints, targets) whose own ``id`` is of ``kind``, made the client's."""
    if not isinstance(items, list):
        return items
    out = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("id"), int):
            item = dict(item, id=ids.space(kind).ours(side, item["id"]))
        out.append(item)
    return out
