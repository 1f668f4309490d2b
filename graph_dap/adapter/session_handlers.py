"""The session's life: initialize, launch (the worker, the model), configurationDone, restart, terminate, disconnect.

The local worker is started at ``initialize``, so that importing onnxruntime overlaps
the client's setup; a launch may ask for a remote worker or another Python instead.
The worker's events (logpoints, progress) and its death arrive here too.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from graph_dap.adapter.core import EXCEPTION_FILTERS, FRAME_ID, Handover
from graph_dap.adapter.launch import LaunchArgs, is_program_launch
from graph_dap.adapter.listing import ListingSource, ensure_listing, holds
from graph_dap.adapter.requests import CantHandle, InvalidRequest, Request, UserError
from graph_dap.adapter.running import RunControl
from graph_dap.adapter.state import ClientInfo, Phase
from graph_dap.errors import GraphDapError, WorkerDied
from graph_dap.kinds import StopReason
from graph_dap.tasks import background
from graph_dap.worker import protocol as p
from graph_dap.worker.client import WorkerClient

CAPABILITIES: dict[str, Any] = {
    "supportsConfigurationDoneRequest": True,
    "supportsFunctionBreakpoints": True,
    "supportsConditionalBreakpoints": True,
    "supportsHitConditionalBreakpoints": True,
    "supportsLogPoints": True,
    "supportsEvaluateForHovers": True,
    "supportsSetVariable": True,
    "supportsSetExpression": True,
    "supportsStepBack": True,
    "supportsGotoTargetsRequest": True,
    "supportsRestartRequest": True,
    "supportsTerminateRequest": True,
    "supportsExceptionInfoRequest": True,
    "supportsExceptionFilterOptions": True,
    "supportsCompletionsRequest": True,
    "completionTriggerCharacters": ["`", "."],
    "supportsDataBreakpoints": True,
    "supportsReadMemoryRequest": True,
    "supportsValueFormattingOptions": True,
    "supportsDelayedStackTraceLoading": True,
    "supportsCancelRequest": True,
    "supportsClipboardContext": True,
    "exceptionBreakpointFilters": EXCEPTION_FILTERS,
}


class SessionRequests(RunControl):
    """The lifecycle handlers, and the worker behind the session."""

    async def initialize_request(self, request: Request) -> dict[str, Any]:
        if self.run.phase is not Phase.NEW or self.client is not None:
            raise InvalidRequest("already initialized")
        request.arg("adapterID", str, "graph-dap")
        self.client = ClientInfo.of(request.arguments)
        self.initialize_arguments = dict(request.arguments)
        self.progress.enabled = self.client.progress
        # Start the local worker now: importing onnxruntime overlaps the client's setup
        # (not for a client yet to show the token: it starts nothing).
        if self.gate.open:
            self._spawning = asyncio.ensure_future(self._spawn_worker())
        body = dict(CAPABILITIES)
        if self.programs is not None:
            self.programs.initialize(body)
        return body

    async def launch_request(self, request: Request) -> None:
        if self.client is None:
            raise InvalidRequest("initialize first")
        if self.graph is not None or self.program is not None:
            raise InvalidRequest("already launched")
        if self.programs is not None and is_program_launch(request.arguments):
            handover = Handover(
                self.channel, self.client, self.initialize_arguments, self._spawn_worker, self._later, self._finish, self._drop_spawned
            )
            self.program = await self.programs.launch(request, handover)
            return
        launch = self.launch = LaunchArgs.parse(request)
        self.worker = await self._connect_worker(launch)
        try:
            await self._load()
        except BaseException:
            await self._drop_failed_launch(launch)
            raise
        self.run.phase = Phase.CONFIGURING
        self._later(lambda: self.channel.event("initialized"))

    async def attach_request(self, request: Request) -> None:
        raise CantHandle("graph-dap starts the model itself: use launch (with 'worker' and 'token' for a remote worker)")

    async def configurationDone_request(self, request: Request) -> None:
        if self.run.phase is not Phase.CONFIGURING or self.launch is None:
            raise InvalidRequest("configurationDone comes once, after launch")
        first = self.launch.first_run
        self._later(lambda: self._start_run(first))

    async def restart_request(self, request: Request) -> None:
        worker = self._need_worker()
        if self.run.running:
            raise CantHandle("the model is running: pause it first")
        assert self.launch is not None
        new = request.arguments.get("arguments")
        if isinstance(new, dict) and new.get("model"):
            self.launch, reload = self.launch.restarted_with(LaunchArgs.parse(Request(request.seq, "launch", new)))
            if reload:
                await self._load()
                await self._apply_breakpoints()
                first = self.launch.first_run
                self._later(lambda: self._start_run(first))
                return
        stop = await worker.run(p.RunArgs(p.RunCommand.RESTART))
        launch = self.launch
        if stop.reason is not StopReason.ENTRY or (launch.stop_on_entry and not launch.no_debug):
            self._later(lambda: self._stopped(stop))
        else:
            self._later(lambda: self._start_run(launch.first_run))

    async def terminate_request(self, request: Request) -> None:
        if self.run.phase in (Phase.NEW, Phase.ENDED):
            return
        if self.run.running and self.worker is not None:
            self.run.user_paused = True
            await self.worker.pause()
            if self.run.task is not None:
                await asyncio.wait([self.run.task], timeout=5)
        self.run.phase = Phase.ENDED
        self._later(lambda: self._ended(0))

    async def disconnect_request(self, request: Request) -> None:
        self._done = True
        self._later(lambda: None)

    # -- the worker and the model -----------------------------------------------------

    async def _connect_worker(self, launch: LaunchArgs) -> WorkerClient:
        """The worker for this launch: remote, a local one on another Python, or the one started at initialize."""
        if launch.worker:
            self._drop_spawned()
            try:
                worker = await WorkerClient.connect(launch.worker, launch.token or "")
            except GraphDapError as error:
                raise UserError(str(error)) from None
        else:
            if launch.python:
                self._drop_spawned()
                self._spawning = asyncio.ensure_future(WorkerClient.spawn(launch.python))
            elif self._spawning is None:
                self._spawning = asyncio.ensure_future(self._spawn_worker())
            try:
                worker = await self._spawning
            except OSError as error:
                raise UserError(f"cannot start the runtime worker: {error}") from None
            finally:
                self._spawning = None
        worker.attach(self._worker_event, lambda line: self._output(line + "\n", "stderr"), self._worker_died)
        return worker

    async def _drop_failed_launch(self, launch: LaunchArgs) -> None:
        """After a launch that failed to load: no worker stays behind. The local one waits for the next launch."""
        worker, self.worker, self.launch = self.worker, None, None
        if worker is None:
            return
        if not launch.worker and not launch.python and worker.dead is None and self._spawning is None:
            kept: asyncio.Future[WorkerClient] = asyncio.get_running_loop().create_future()
            kept.set_result(worker)
            self._spawning = kept
            worker.attach(lambda event: None, lambda line: self._output(line + "\n", "stderr"), lambda message: None)
            return
        await worker.close()

    def _drop_spawned(self) -> None:
        """Close the worker started at initialize, once it is up (this launch wants another)."""
        spawning, self._spawning = self._spawning, None
        if spawning is None:
            return

        def close(done: asyncio.Future[WorkerClient]) -> None:
            if not done.cancelled() and done.exception() is None:
                unused = done.result()
                unused.kill()  # still importing, never given anything: asking it to shut down would wait for its imports
                background(unused.close())

        spawning.add_done_callback(close)

    async def _load(self) -> None:
        """Load the launch's model in the worker, with the exception filters; the listing becomes a source."""
        assert self.worker is not None and self.launch is not None
        launch = self.launch
        progress = self.progress.start(f"Loading {os.path.basename(launch.model)}")
        try:
            graph = await self.worker.load(launch.load_args())
            await self.worker.set_break_on(self.break_on_args())
        except WorkerDied as error:
            raise UserError(f"the runtime worker died while loading the model: {error}") from None
        except GraphDapError as error:
            raise UserError(str(error)) from None
        finally:
            self.progress.end(progress)
        self.graph = graph
        self._source_refs += 1
        self.listing = self._listing_source(graph, launch.listing_file)

    def _listing_source(self, graph: p.GraphInfo, listing_path: str | None) -> ListingSource:
        """The listing, by path when a file holds it: ``listingPath`` (written here if need be), or the one beside the model."""
        if listing_path:
            path = listing_path if ensure_listing(listing_path, graph.listing) else None
            return ListingSource(graph, self._source_refs, path, (listing_path,))
        beside = graph.listing_path
        path = beside if beside and holds(beside, graph.listing) else None
        return ListingSource(graph, self._source_refs, path, (beside,) if beside else ())

    def _worker_event(self, event: p.Event) -> None:
        if isinstance(event, p.LogEvent):
            self._output(event.text + "\n", "console")
        elif isinstance(event, p.SummarizedEvent):
            # weights a page showed shape only at this stop are summarized: the client asks for the page again
            if self.variables.summarized(event.level, event.names):
                self.channel.event("invalidated", {"areas": ["variables"], "stackFrameId": FRAME_ID + event.level})
        else:
            self.progress.nodes(event.done, event.total)

    def _worker_died(self, message: str) -> None:
        self._output(f"graph-dap: {message}\n", "stderr")
        self.channel.event(
            "output", {"category": "important", "output": "graph-dap: the runtime worker died; the session ends.\n"}
        )
        if self.run.phase is not Phase.ENDED:
            self.progress.run_ended()
            self._ended(1)

    async def _shutdown(self) -> None:
        """At the end of the session: the program's session or the workers closed (killed when a run is stuck in native code)."""
        if self.program is not None:
            program, self.program = self.program, None
            await program.close()
        if self._spawning is not None:
            spawning = self._spawning
            self._spawning = None
            try:
                worker = await spawning
                await worker.close()
            except (OSError, GraphDapError):
                pass
        task = self.run.task
        busy = self.busy
        stuck = any(t is not None and not t.done() for t in (task, busy))
        if stuck and self.worker is not None:
            self.worker.kill()  # a run or a profile in native code: it would not see the shutdown
        if self.worker is not None:
            await self.worker.close()
        for pending in (task, busy):
            if pending is not None:
                pending.cancel()
