"""The client's progress bars: one for each load or profile, and one for a run that goes on.

Only for a client that says ``supportsProgressReporting``. A run shows its bar once it
has gone on for :data:`PROGRESS_DELAY` seconds; the bar says how many nodes ran (the
worker's progress events) and, every second, for how long (segments report no nodes
while onnxruntime computes them). Its cancel button pauses the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from graph_dap.adapter.protocol import Channel

PROGRESS_DELAY = 0.5  # seconds a run goes before it shows progress


class Progress:
    """The progress events of one session."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.enabled = False  # set at initialize, from the client's capabilities
        self.run_id: str | None = None  # the bar of the run in progress, once shown
        self._count = 0
        self._timer: asyncio.TimerHandle | None = None
        self._began = 0.0
        self._nodes = ""  # "12/40 nodes, " once the worker has said

    def start(self, title: str, cancellable: bool = False) -> str | None:
        """Show a bar; its id, for :meth:`end` (None when the client shows none)."""
        if not self.enabled:
            return None
        self._count += 1
        progress = f"graph-dap-{self._count}"
        self.channel.event("progressStart", {"progressId": progress, "title": title, "cancellable": cancellable})
        return progress

    def end(self, progress: str | None) -> None:
        if progress is not None:
            self.channel.event("progressEnd", {"progressId": progress})

    def run_started(self, still_running: Callable[[], bool]) -> None:
        """A run began: show its bar after :data:`PROGRESS_DELAY` if ``still_running()`` then."""
        if self.enabled:
            self._timer = asyncio.get_running_loop().call_later(PROGRESS_DELAY, self._show_run, still_running)

    def _show_run(self, still_running: Callable[[], bool]) -> None:
        self._timer = None
        if still_running():
            self.run_id = self.start("Running the model", cancellable=True)
            self._began = asyncio.get_running_loop().time() - PROGRESS_DELAY
            self._tick()

    def _tick(self) -> None:
        """Say how long the run has gone on, every second."""
        if self.run_id is None:
            return
        loop = asyncio.get_running_loop()
        elapsed = loop.time() - self._began
        self.channel.event("progressUpdate", {"progressId": self.run_id, "message": f"{self._nodes}running for {elapsed:.0f} s"})
        self._timer = loop.call_later(1.0, self._tick)

    def nodes(self, done: int, total: int) -> None:
        """The worker says ``done`` of ``total`` nodes ran."""
        total = max(total, 1)
        self._nodes = f"{done}/{total} nodes, "
        if self.run_id is not None:
            self.channel.event(
                "progressUpdate",
                {"progressId": self.run_id, "message": f"{done}/{total} nodes", "percentage": 100.0 * done / total},
            )

    def run_ended(self) -> None:
        """The run stopped (or the worker died): its bar goes."""
        self._nodes = ""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.end(self.run_id)
        self.run_id = None
