"""Requests that move the run: continue, next, stepIn, stepOut, stepBack, reverseContinue, goto, pause, cancel,
and graph-dap's own ``graphDap/runTo``.

Each answers at once and starts the run after its response (:class:`RunControl`); the
stop comes later as a ``stopped`` event. ``pause`` and ``cancel`` reach a run that
is still computing.
"""

from __future__ import annotations

from typing import Any

from graph_dap.adapter.requests import InvalidRequest, Request
from graph_dap.adapter.running import RunControl
from graph_dap.worker.protocol import RunCommand


class RunRequests(RunControl):
    """The handlers that step and continue the model run (thread 1)."""

    async def continue_request(self, request: Request) -> dict[str, Any]:
        self._begin(request, RunCommand.CONTINUE)
        return {"allThreadsContinued": True}

    async def next_request(self, request: Request) -> None:
        self._begin(request, RunCommand.STEP)

    async def stepIn_request(self, request: Request) -> None:
        self._begin(request, RunCommand.STEP_IN)

    async def stepOut_request(self, request: Request) -> None:
        self._begin(request, RunCommand.STEP_OUT)

    async def stepBack_request(self, request: Request) -> None:
        self._begin(request, RunCommand.STEP_BACK)

    async def reverseContinue_request(self, request: Request) -> None:
        self._begin(request, RunCommand.REVERSE_CONTINUE)

    async def gotoTargets_request(self, request: Request) -> dict[str, Any]:
        source = request.arg("source", dict)
        line = self._line_in(request.arg("line", int))
        if self.listing is None or not self.listing.matches(source):
            return {"targets": []}
        node = self.listing.node_at_or_after(line, stoppable_only=True)
        here = self._frame_node(0) if self.run.stop is not None else None
        if node is None or (here is not None and node.path != here.path):
            return {"targets": []}  # goto moves within the current level (a branch, an iteration, the main graph)
        target_id = node.index + 1
        self._goto_targets[target_id] = node.id
        return {"targets": [{"id": target_id, "label": node.label, "line": self._line_out(node.line)}]}

    async def goto_request(self, request: Request) -> None:
        target = request.arg("targetId", int)
        node = self._goto_targets.get(target)
        if node is None:
            raise InvalidRequest(f"unknown goto target {target}: ask gotoTargets first")
        self._begin(request, RunCommand.GOTO, node)

    async def run_to_custom(self, request: Request) -> dict[str, Any]:
        """``graphDap/runTo {"node": ID}``: run until that node is next (as "Run to Cursor" on its line); ``stopped`` follows."""
        node = request.arg("node", str)
        if self.listing is None or node not in self.listing.nodes:
            raise InvalidRequest(f"no node '{node}' in the model")
        self._need_stopped()
        self._later(lambda: self._start_run(RunCommand.RUN_TO, node))
        return {}

    async def pause_request(self, request: Request) -> None:
        self._thread(request)
        worker = self._need_worker()
        if self.run.running:
            self.run.user_paused = True
            await worker.pause()

    async def cancel_request(self, request: Request) -> None:
        progress = request.arg("progressId", str, None)
        if progress is not None and progress == self.progress.run_id and self.run.running and self.worker:
            self.run.user_paused = True
            await self.worker.pause()
