"""Runs in the background: a run command goes to the worker, its stop comes back as a ``stopped`` event.

The adapter keeps answering while the model computes (``pause``, ``threads``,
``setBreakpoints``); a configuration change made meanwhile pauses the run, is applied,
and the run resumes (:meth:`AdapterCore._configure`). At the end of the graph the
console gets the outputs, then ``exited`` and ``terminated``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from graph_dap.adapter.core import EXCEPTION_NAMES, RESUMABLE, THREAD_ID, AdapterCore
from graph_dap.adapter.requests import Request
from graph_dap.adapter.state import Phase
from graph_dap.errors import GraphDapError, WorkerDied
from graph_dap.kinds import OptLevel, StopReason
from graph_dap.tasks import background
from graph_dap.worker.protocol import RunArgs, RunCommand, StopInfo


class RunControl(AdapterCore):
    """Starting runs, waiting for their stops, and turning those into events."""

    def _begin(self, request: Request, command: RunCommand, target: str | None = None) -> None:
        """A request that moves a stopped run: answered first, then the run starts."""
        self._thread(request)
        self._need_stopped()
        self._later(lambda: self._start_run(command, target))

    def _start_run(self, command: RunCommand, target: str | None = None) -> None:
        """Start a run in the background; its stop comes as a ``stopped`` event."""
        run = self.run
        run.phase = Phase.RUNNING
        run.stop = None
        run.command = command
        self.variables.reset()
        if command in RESUMABLE:
            self.progress.run_started(lambda: self.run.running)
        run.task = asyncio.ensure_future(self._run(command, target))

    async def _run(self, command: RunCommand, target: str | None) -> None:
        assert self.worker is not None and self.launch is not None
        worker = self.worker
        run = self.run
        try:
            iterations = (self.launch.iterations or 1) if command is RunCommand.TO_END else 1
            stop = await worker.run(RunArgs(command, target, iterations))
            while True:
                await self._apply_updates()
                if run.interrupting and stop.reason is StopReason.PAUSE and not run.user_paused:
                    run.interrupting = False
                    stop = await worker.run(RunArgs(RESUMABLE[command]))
                    continue
                break
        except WorkerDied:
            await self._apply_updates()  # each fails with WorkerDied, for the request waiting on it
            return  # _worker_died tells the user and ends the session
        except GraphDapError as error:
            self._output(f"graph-dap: {error}\n", "stderr")
            await self._apply_updates()
            try:
                where = await worker.where()
            except GraphDapError:
                return
            stop = dataclasses.replace(where, reason=StopReason.ERROR, value=None, message=str(error), details={})
        finally:
            run.interrupting = False
            run.user_paused = False
            self.progress.run_ended()
        self._stopped(stop)

    async def _apply_updates(self) -> None:
        """Make the changes that requests queued while the run went on; each gets its result."""
        updates = self.run.updates
        while updates:
            change, future = updates.pop(0)
            try:
                future.set_result(await change())
            except Exception as error:  # noqa: BLE001 - handed to the request waiting on it, answered by dispatch
                future.set_exception(error)

    def _stopped(self, stop: StopInfo) -> None:
        """Turn a runtime stop into a ``stopped`` event (or the end of the session)."""
        if stop.reason in (StopReason.END, StopReason.FAILED):
            background(self._end(stop))
            return
        self.run.stop = stop
        self.run.phase = Phase.STOPPED
        body: dict[str, Any] = {"reason": stop.reason, "threadId": THREAD_ID, "allThreadsStopped": True}
        if stop.reason is StopReason.BREAKPOINT:
            reason, ids = self.breakpoints.hit(stop.breakpoint_ids)
            body["reason"] = reason
            if ids:
                body["hitBreakpointIds"] = ids
        elif stop.reason in EXCEPTION_NAMES:
            body["reason"] = "exception"
            body["text"] = EXCEPTION_NAMES[stop.reason]
        if stop.message:
            body["description"] = stop.message
        self.channel.event("stopped", body)

    async def _end(self, stop: StopInfo) -> None:
        """At the end of the run: the outputs in the console, then ``exited`` and ``terminated``."""
        self.run.phase = Phase.ENDED
        self.run.stop = None
        failed = stop.reason is StopReason.FAILED
        if failed:
            self._output(f"graph-dap: {stop.message}\n", "stderr")
        elif self.worker is not None:
            # As the run left them (the user's own run's values, at the launch's optimization level).
            level = stop.details.get("opt_level") or {"asked": self.launch.opt_level if self.launch is not None else OptLevel.NONE}
            how = "" if level["asked"] == OptLevel.NONE else f" (as the run computed them, at optimization level {level['asked']})"
            notes = level.get("unoptimized") or []
            if notes:  # a stretch ran without the level asked: said where the user reads the outputs
                how = f" (as the run computed them; not all at optimization level {level['asked']}: {'; '.join(notes)})"
            try:
                outputs = await self.worker.outputs()
                lines = "".join(f"  {o.name}: {o.text}\n" for o in outputs)
                self._output(f"the run reached the end of the graph; outputs{how}:\n{lines}")
            except GraphDapError as error:
                self._output(f"graph-dap: cannot read the outputs: {error}\n", "stderr")
        if stop.repeat is not None and stop.repeat.times_ms:
            self._output(f"{stop.repeat.text}\n")
        if stop.comparison:
            self._output("".join(f"{line}\n" for line in stop.comparison))
        self.channel.event("exited", {"exitCode": 1 if failed else 0})
        self.channel.event("terminated")

    def _ended(self, exit_code: int) -> None:
        """The session is over: ``exited`` and ``terminated``."""
        self.run.phase = Phase.ENDED
        self.run.stop = None
        self.channel.event("exited", {"exitCode": exit_code})
        self.channel.event("terminated")
