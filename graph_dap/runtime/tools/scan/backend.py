"""What a scan's backends (the local pool, Ray) have in common: their events, and what a dead worker means.

A backend takes work items lazily and yields events as they happen: an
:class:`Outcome` per input, an :class:`Incident` when a worker dies. An input that
was running when its worker died runs again, alone, on another worker; if that one
dies too, the input itself is the cause: it is reported with the status ``crash``.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from graph_dap.errors import GraphDapError
from graph_dap.runtime.tools.scan.results import InputResult
from graph_dap.runtime.tools.scan.sources import WorkItem

#: Workers that die before they are ready, in a row, before a scan gives up.
START_DEATHS = 3


class ScanError(GraphDapError):
    """A scan cannot go on: its workers cannot start, a backend is missing, its results file is foreign."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """One input done: its result, and its feeds when it failed (the driver keeps them)."""

    result: InputResult
    feeds: dict[str, Any] | None = None
    item: WorkItem | None = None  # for a crash: the item, so that the driver can keep its input


@dataclass(frozen=True, slots=True)
class Incident:
    """A worker died (and what became of the input it was running)."""

    message: str
    worker: str
    input_id: str | None = None


Event = Outcome | Incident


class Backend(Protocol):
    """Runs work items on workers; yields an event per input done and per worker lost."""

    def describe(self) -> dict[str, Any]: ...

    def run(self, items: Iterator[WorkItem]) -> Iterator[Event]: ...

    def close(self) -> None: ...


def death_text(exitcode: int | None) -> str:
    """``killed by signal 9 (SIGKILL)`` or ``exited with status 3``."""
    if exitcode is None:
        return "died"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "?"
        return f"killed by signal {-exitcode} ({name})"
    return f"exited with status {exitcode}"


class Suspects:
    """Inputs that were running when a worker died: each runs once more, alone; a second death is its own."""

    def __init__(self) -> None:
        self._died: dict[int, str] = {}

    def lost(self, item: WorkItem, worker: str, how: str) -> tuple[Incident, Outcome | None]:
        """``item``'s worker died (``how``): the incident, and a ``crash`` outcome when it had died on it before."""
        first = self._died.get(item.index)
        if first is None:
            self._died[item.index] = how
            return Incident(f"worker {worker} {how} while running {item.id}; it runs again on another worker", worker, item.id), None
        message = f"the worker died while running this input, twice ({first}; then {how}): the input itself kills it"
        crash = InputResult(item.index, item.id, item.label, "crash", message=message, worker=worker, attempts=2)
        return Incident(f"worker {worker} {how} while running {item.id} again: reported as a crash", worker, item.id), Outcome(crash, item=item)

    def __contains__(self, index: int) -> bool:
        return index in self._died

    def attempts(self, item: WorkItem) -> int:
        return 2 if item.index in self._died else 1
