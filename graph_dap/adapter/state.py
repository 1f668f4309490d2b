"""The state of one DAP session, in small parts: what the client said it can do, and where the run is."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from graph_dap.worker.protocol import RunCommand, StopInfo


class Phase(enum.Enum):
    """Where a session is in its life."""

    NEW = "new"  # before launch
    CONFIGURING = "configuring"  # launched, before configurationDone
    RUNNING = "running"
    STOPPED = "stopped"
    ENDED = "ended"


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """What the client said in ``initialize``."""

    lines_start_at1: bool = True
    columns_start_at1: bool = True
    progress: bool = False  # supportsProgressReporting
    memory_references: bool = False  # supportsMemoryReferences
    invalidated: bool = False  # supportsInvalidatedEvent

    @classmethod
    def of(cls, arguments: dict[str, Any]) -> ClientInfo:
        """From ``initialize``'s arguments (a key of the wrong type counts as absent)."""

        def flag(key: str, default: bool) -> bool:
            value = arguments.get(key)
            return value if isinstance(value, bool) else default

        return cls(
            lines_start_at1=flag("linesStartAt1", True),
            columns_start_at1=flag("columnsStartAt1", True),
            progress=flag("supportsProgressReporting", False),
            memory_references=flag("supportsMemoryReferences", False),
            invalidated=flag("supportsInvalidatedEvent", False),
        )


Update = tuple[Callable[[], Awaitable[Any]], "asyncio.Future[Any]"]


@dataclass(slots=True)
class RunState:
    """Where the run is: the session's phase, the last stop, and the run going on in the background.

    Requests that change the configuration while a run goes on (breakpoints, filters)
    are queued as ``updates``: the run is paused (``interrupting``), they are made, and
    the run resumes, unless the user paused it meanwhile (``user_paused``).
    """

    phase: Phase = Phase.NEW
    stop: StopInfo | None = None  # while stopped
    task: asyncio.Task[None] | None = None  # the run in the background
    command: RunCommand | None = None  # what that run does
    updates: list[Update] = field(default_factory=list)
    interrupting: bool = False
    user_paused: bool = False

    @property
    def running(self) -> bool:
        return self.phase is Phase.RUNNING

    @property
    def in_flight(self) -> bool:
        """Whether a run's task is still going (it may be applying updates after its stop)."""
        return self.task is not None and not self.task.done()
