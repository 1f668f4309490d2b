"""Live values while a debug session is stopped: what the editor tells the server, and asks back.

The server never runs the model. The editor (the VS Code extension) sends the
notification ``graphDap/debugState`` ``{"model": PATH, "state": "stopped" | "running" | "ended"}``
whenever a graph-dap debug session of that model stops, runs on or ends. While one is
stopped, the server asks the editor with the request ``graphDap/liveSummaries``
``{"model": PATH, "names": [...]}``, and the editor answers with the adapter's own summaries
(its custom request ``graphDap/summaries``): ``{"summaries": [{"name", "text", "available"}]}``.
Answers are kept until the session moves on (each stop is a new epoch).
"""

from __future__ import annotations

import asyncio
import enum
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from graph_dap import log as _log

_logger = _log.get_logger(__name__)

DEBUG_STATE = "graphDap/debugState"
LIVE_SUMMARIES = "graphDap/liveSummaries"
_TIMEOUT = 2.0  # seconds the server waits for the editor's answer


class DebugState(enum.StrEnum):
    """Where the debug session of a model is (``graphDap/debugState``'s ``state``)."""

    STOPPED = "stopped"
    RUNNING = "running"
    ENDED = "ended"


@dataclass(slots=True)
class _Session:
    stopped: bool = False
    epoch: int = 0
    summaries: dict[str, str | None] = field(default_factory=dict)  # name -> text; None: not computed


Ask = Callable[[str, dict[str, Any]], Awaitable[Any]]


class LiveValues:
    """The debug state of each model and the live summaries asked so far in its current stop."""

    def __init__(self, ask: Ask) -> None:
        """``ask(method, params)``: send a request to the editor and await its result."""
        self._ask = ask
        self._sessions: dict[str, _Session] = {}

    @staticmethod
    def key(path: str | os.PathLike[str]) -> str:
        return os.path.normcase(os.path.realpath(os.fspath(path)))

    def set_state(self, model: str, state: DebugState) -> None:
        s = self._sessions.setdefault(self.key(model), _Session())
        s.stopped = state is DebugState.STOPPED
        s.epoch += 1
        s.summaries = {}

    def stopped(self, model: str | os.PathLike[str]) -> bool:
        s = self._sessions.get(self.key(model))
        return bool(s and s.stopped)

    async def summaries(self, model: str | os.PathLike[str], names: list[str]) -> dict[str, str]:
        """The live summaries of ``names`` (those computed so far); empty when no session is stopped."""
        key = self.key(model)
        s = self._sessions.get(key)
        if s is None or not s.stopped:
            return {}
        missing = [n for n in dict.fromkeys(names) if n not in s.summaries]
        if missing:
            epoch = s.epoch
            try:
                answer = await asyncio.wait_for(self._ask(LIVE_SUMMARIES, {"model": str(model), "names": missing}), _TIMEOUT)
            except Exception as error:  # noqa: BLE001 - the editor could not answer (no session, a timeout): no live values this time
                _logger.info("no live summaries of %s: %s: %s", model, type(error).__name__, error)
                return {}
            if s.epoch != epoch:
                return {}
            for item in _items(answer):
                name = _get(item, "name")
                if isinstance(name, str):
                    text = _get(item, "text")
                    available = _get(item, "available")
                    s.summaries[name] = text if isinstance(text, str) and available is not False else None
            for n in missing:
                s.summaries.setdefault(n, None)
        return {n: t for n in names if (t := s.summaries.get(n)) is not None}


def _items(answer: Any) -> list[Any]:
    summaries = _get(answer, "summaries")
    return list(summaries) if isinstance(summaries, (list, tuple)) else []


def _get(obj: Any, key: str) -> Any:
    """A field of a reply: pygls hands custom results over as namedtuples (or dicts)."""
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)
