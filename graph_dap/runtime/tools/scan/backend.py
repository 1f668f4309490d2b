"""What a scan's backends (the local pool, Ray) have in common: their events, and what a dead worker means.

A backend takes work items lazily and yields events as they happen: an
:class:`Outcome` per input, an :class:`Incident` when a worker dies. An input that
was running when its worker died runs again, alone, on another worker; if that one
dies too, the input itself is the cause: it is reported with the status ``crash``.
"""

from __future__ import annotations

import enum
import queue
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from graph_dap.errors import GraphDapError
from graph_dap.runtime.tools.scan.results import InputResult, ScanStatus
from graph_dap.runtime.tools.scan.sources import WorkItem


class BackendKind(enum.StrEnum):
    """Where a scan's workers run (``describe()``'s ``backend``)."""

    LOCAL = "local"  # processes of this machine (pool.py)
    RAY = "ray"  # Ray actors (ray_backend.py)

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
    """Inputs whose worker died with them: each runs again alone; an input whose lone run dies twice is a ``crash``.

    A worker that dies with several inputs of a shard unreported (results still in
    flight are lost with it) leaves no way to tell which one it was running: each of
    them then runs alone, where a death names its input.
    """

    def __init__(self) -> None:
        self._died: dict[int, str] = {}  # input -> how its worker died the first time it ran alone
        self._lost: dict[int, int] = {}  # input -> runs lost with their worker

    def lost(self, unreported: list[WorkItem], worker: str, how: str) -> tuple[list[Event], list[WorkItem]]:
        """``worker`` died (``how``) before reporting ``unreported``: what to tell, and the inputs to run again alone."""
        for item in unreported:
            self._lost[item.index] = self._lost.get(item.index, 0) + 1
        if len(unreported) > 1:
            ids = ", ".join(i.id for i in unreported)
            message = f"worker {worker} {how} while running one of {ids} (their results were lost with it); each runs again alone"
            return [Incident(message, worker)], list(unreported)
        item = unreported[0]
        first = self._died.get(item.index)
        if first is None:
            self._died[item.index] = how
            return [Incident(f"worker {worker} {how} while running {item.id}; it runs again on another worker", worker, item.id)], [item]
        message = f"the worker died while running this input alone, twice ({first}; then {how}): the input itself kills it"
        crash = InputResult(item.index, item.id, item.label, ScanStatus.CRASH, message=message, worker=worker, attempts=self.attempts(item))
        incident = Incident(f"worker {worker} {how} while running {item.id} again: reported as a crash", worker, item.id)
        return [incident, Outcome(crash, item=item)], []

    def __contains__(self, index: int) -> bool:
        return index in self._lost

    def attempts(self, item: WorkItem) -> int:
        """How many times ``item`` was sent out: once, plus once per run lost with its worker."""
        return 1 + self._lost.get(item.index, 0)


class Prefetch:
    """A source's items read ahead in a thread, so that a slow source (a user's loader) never holds up results.

    :meth:`take` returns what has been read, without waiting; an exception the source
    raised comes out of :meth:`take` in the caller's thread.
    """

    _END = object()

    def __init__(self, items: Iterator[WorkItem], ahead: int) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, ahead))
        self.exhausted = False
        self._thread = threading.Thread(target=self._fill, args=(items,), name="graph-dap-scan-source", daemon=True)
        self._thread.start()

    def _fill(self, items: Iterator[WorkItem]) -> None:
        try:
            for item in items:
                self._queue.put(item)
        except BaseException as e:  # noqa: BLE001 - handed over to the scan's thread, raised there
            self._queue.put(e)
        self._queue.put(self._END)

    def take(self, n: int, wait: float = 0.0) -> list[WorkItem]:
        """Up to ``n`` items read so far (waiting up to ``wait`` seconds for the first)."""
        out: list[WorkItem] = []
        while len(out) < n and not self.exhausted:
            try:
                got = self._queue.get(timeout=wait) if wait > 0 and not out else self._queue.get_nowait()
            except queue.Empty:
                break
            if got is self._END:
                self.exhausted = True
            elif isinstance(got, BaseException):
                self.exhausted = True
                raise got
            else:
                out.append(got)
        return out
