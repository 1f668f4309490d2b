"""A mixed session's life: the Python side started, the program's models and debugged runs followed, events passed on.

:class:`MixedSession` holds the parts (debugpy's adapter, the host link, the catalog of
models, the graph runs, the ids) and turns what they say into the client's events: a
graph run's first stop parks the calling Python thread in the Python debugger first
(:meth:`_graph_stopped`), so that the client sees both stopped, the graph thread last;
a run's end hands its outputs to the program (:meth:`_graph_ended`). The requests are
routed in :mod:`.routes`.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from graph_dap.adapter.core import EXCEPTION_FILTERS, WorkerFactory
from graph_dap.adapter.mixed import schema
from graph_dap.adapter.mixed.calls import can_skip
from graph_dap.adapter.mixed.catalog import Catalog
from graph_dap.adapter.mixed.graph_run import GraphRun, outputs_path
from graph_dap.adapter.mixed.host_link import HostLink
from graph_dap.adapter.mixed.ids import PYTHON, IdKind, Ids, rename_ids, to_client
from graph_dap.adapter.mixed.launch import ProgramLaunch
from graph_dap.adapter.mixed.pool import WorkerPool
from graph_dap.adapter.mixed.python_side import PythonSide
from graph_dap.adapter.peer import Refused
from graph_dap.adapter.protocol import Channel, Message, MessageType
from graph_dap.adapter.requests import UserError
from graph_dap.adapter.state import ClientInfo
from graph_dap.host import protocol as hp
from graph_dap.kinds import BreakFilter, RunAction, StopReason
from graph_dap.paths import PACKAGE
from graph_dap.tasks import background

#: The events of the DAP schema; debugpy's own (``debugpySockets``, ``debugpyAttach``) are not passed on.
DAP_EVENTS = frozenset(
    {
        "breakpoint", "capabilities", "continued", "exited", "initialized", "invalidated", "loadedSource", "memory",
        "module", "output", "process", "progressEnd", "progressStart", "progressUpdate", "stopped", "terminated", "thread",
    }
)  # fmt: skip
#: Capabilities of debugpy's that the client learns (with the schema's names) in the ``capabilities`` event.
PYTHON_CAPABILITIES = (
    "supportsModulesRequest",
    "supportsExceptionOptions",
    "supportsStepInTargetsRequest",
    "supportsLoadedSourcesRequest",
    "supportsTerminateThreadsRequest",
    "supportsSingleThreadExecutionRequests",
)
GRAPH_FILTERS = frozenset(BreakFilter.values())
#: How long a graph stop waits for the calling Python thread to show as stopped before it is shown anyway.
PARK_TIMEOUT = 5.0


class MixedSession:
    """One mixed session on the client's ``channel``; ``later`` runs an action after the current response."""

    def __init__(
        self,
        channel: Channel,
        client: ClientInfo,
        initialize: dict[str, Any],
        launch: ProgramLaunch,
        spawn_worker: WorkerFactory,
        later: Callable[[Callable[[], None]], None],
        end: Callable[[], None],
    ) -> None:
        self.channel = channel
        self.client = client
        self.initialize_args = initialize
        self.launch = launch
        self.later = later
        self._end = end
        self.ids = Ids()
        self.folder = tempfile.mkdtemp(prefix="graph-dap-mixed-")
        self.pool = WorkerPool(spawn_worker)
        self.catalog = Catalog(self.folder, self.pool.take_kept)
        self.link = HostLink(self._model_loaded, self._run_call, self._host_lost, self._config)
        self.python: PythonSide | None = None
        self.runs: dict[int, GraphRun] = {}
        self._numbers = itertools.count(1)
        self._tasks: set[asyncio.Future[Any]] = set()
        self.graph_filters: list[BreakFilter] = [BreakFilter.ERROR]
        self.inf_exclude: list[str] = []  # the inf filter's condition (the launch's own are the launch's)
        self.nan_exclude: list[str] = []  # the nan filter's condition
        self.parked: dict[int, GraphRun] = {}  # Python threads (debugpy's ids) stopped in a debugged run call
        self._parking: dict[int, asyncio.Event] = {}
        self.resuming = False  # a continue or step of the client's is on its way to debugpy
        self._launch_response: asyncio.Future[Message] | None = None
        self._reverse: dict[int, int] = {}  # our reverse request's seq -> debugpy's
        self.terminated = False
        self._bp_ids = itertools.count(1)

    # -- starting -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start debugpy's adapter and ask it to launch the program; its ``initialized`` becomes the client's.

        Nothing here waits for the launch itself: debugpy may first ask the client to run the program in a
        terminal (``runInTerminal``), whose answer must get through.
        """
        self.pool.warm()
        address = await self.link.listen()
        self.python = await PythonSide.start(self._python_event, self._python_request, self._python_gone)
        init = {k: v for k, v in self.initialize_args.items() if k != "supportsStartDebuggingRequest"}
        try:
            theirs = await self.python.peer.request("initialize", dict(init, adapterID="debugpy"))
        except Refused as error:
            raise UserError(f"debugpy refused to start: {error}") from None
        self._announce_capabilities(theirs)
        launch = self.launch.debugpy_launch(address, self.link.token, self.folder)
        self._launch_response = asyncio.ensure_future(self.python.peer.send("launch", launch))
        self._launch_response.add_done_callback(self._launched)

    def _announce_capabilities(self, theirs: dict[str, Any]) -> None:
        """What the session can do beyond a graph session's: debugpy's exception filters, its requests."""
        capabilities: dict[str, Any] = {k: True for k in PYTHON_CAPABILITIES if theirs.get(k) is True}
        filters = [f for f in theirs.get("exceptionBreakpointFilters") or [] if isinstance(f, dict) and f.get("filter") not in GRAPH_FILTERS]
        capabilities["exceptionBreakpointFilters"] = [*EXCEPTION_FILTERS, *filters]
        capabilities["supportsRestartRequest"] = False
        self.channel.event("capabilities", {"capabilities": capabilities})

    def _launched(self, future: asyncio.Future[Message]) -> None:
        """debugpy answers its launch after configurationDone (or at once when it fails): a failure ends the session."""
        if future.cancelled() or future.exception() is not None:
            return
        answer = future.result()
        if not answer.get("success"):
            self.output(f"graph-dap: debugpy could not launch {self.launch.name}: {answer.get('message')}\n", "stderr")
            if not self.terminated:
                self.terminated = True
                self.channel.event("exited", {"exitCode": 1})
                self.channel.event("terminated")

    def spawn(self, coroutine: Any) -> None:
        """Run ``coroutine`` in the background (kept until it is done)."""
        task = background(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def output(self, text: str, category: str = "console") -> None:
        self.channel.event("output", {"category": category, "output": text})

    # -- the host: models and run calls -------------------------------------------------------

    def _config(self) -> hp.Config:
        return self.launch.config(self.graph_filters, self.inf_exclude, self.catalog.armed(), self.nan_exclude)

    def push_config(self) -> None:
        self.link.push_config()

    async def _model_loaded(self, loaded: hp.ModelLoaded) -> hp.ModelAck:
        entry, verified = await self.catalog.add(loaded)
        if not entry.debuggable:
            self.output(f"graph-dap: {entry.message}\n", "stderr")
            return hp.ModelAck(False, entry.message)
        assert entry.listing is not None
        where = entry.listing.path or "(no file: its folder is not writable)"
        self.output(f"graph-dap: {loaded.name}: {len(entry.graph.nodes) if entry.graph else 0} nodes, listing {where}\n")
        for bp in verified:
            body = self.line_body(bp, entry.listing.source(), entry.listing.node_at_or_after(bp.line))
            self.channel.event("breakpoint", {"reason": "changed", "breakpoint": body})
        for fb in self.catalog.functions:
            if fb.models == {loaded.key}:  # this model is the first it lands in
                self.channel.event("breakpoint", {"reason": "changed", "breakpoint": {"id": fb.id, "verified": True}})
        self.push_config()
        return hp.ModelAck(True)

    def line_body(self, bp: Any, source: dict[str, Any] | None, node: Any) -> dict[str, Any]:
        """The client's ``Breakpoint`` for a listing line breakpoint."""
        if node is None:
            message = "the program has not loaded this listing's model yet" if source is None else f"no node on or after line {bp.line}"
            return {"id": bp.id, "verified": False, "message": message}
        line = node.line if self.client.lines_start_at1 else node.line - 1
        body: dict[str, Any] = {"id": bp.id, "verified": True, "line": line}
        if source is not None:
            body["source"] = source
        return body

    def new_breakpoint_id(self) -> int:
        """An id for a graph breakpoint (in the graphs' range, apart from debugpy's)."""
        return self.ids.breakpoint.ours(-1, next(self._bp_ids))

    def _run_call(self, request: int, call: hp.RunCall) -> None:
        entry = self.catalog.models.get(call.key)
        skip = call.why == StopReason.BREAKPOINT and can_skip(self.catalog.conditions(call.key), call.call)  # (a decode step not asked for)
        if entry is None or not entry.debuggable or self.terminated or skip:
            self.link.answer(request, hp.RunResult(RunAction.PLAIN))
            return
        number = next(self._numbers)
        run = GraphRun(number, request, call, entry.loaded.name, self._graph_event, self.pool.take)
        run.thread_id = self.ids.thread.ours(number, 1)
        self.runs[number] = run
        self.spawn(self._start_run(run, entry))

    async def _start_run(self, run: GraphRun, entry: Any) -> None:
        """Launch the run's graph session with the call's feeds and every graph breakpoint and filter; it runs."""
        init = dict(self.initialize_args, adapterID="graph-dap", supportsProgressReporting=False, supportsRunInTerminalRequest=False)
        try:
            await run.request("initialize", init)
            listing_path, _ = self.catalog.line_specs(run.call.key)
            await run.request("launch", self.launch.graph_launch(entry.loaded, run.call.feeds, listing_path, run.call.call))
            await self.configure_run(run)
            await run.request("configurationDone")
        except Exception as error:  # noqa: BLE001 - the call then runs as it is, and the user hears why
            self.output(f"graph-dap: {run.name} cannot be debugged: {error}\n", "stderr")
            await self._drop_run(run, hp.RunResult(RunAction.RAISE if run.call.why == BreakFilter.ERROR else RunAction.PLAIN))

    async def configure_run(self, run: GraphRun) -> None:
        """Send the graph breakpoints and filters to a run's session (at its start, and when they change)."""
        listing_path, lines = self.catalog.line_specs(run.call.key)
        ids: dict[int, int] = {}
        if listing_path:
            body = await run.request("setBreakpoints", {"source": {"path": listing_path}, "breakpoints": [s for _, s in lines]})
            ids.update({b["id"]: bp.id for (bp, _), b in zip(lines, body.get("breakpoints", [])) if "id" in b})
        functions = self.catalog.functions
        body = await run.request("setFunctionBreakpoints", {"breakpoints": [bp.spec() for bp in functions]})
        ids.update({b["id"]: bp.id for bp, b in zip(functions, body.get("breakpoints", [])) if "id" in b})
        run.breakpoint_ids = ids
        filters = self.launch.graph_filters(self.graph_filters)
        conditions = {BreakFilter.INF: self.inf_exclude, BreakFilter.NAN: self.nan_exclude}
        options = [{"filterId": f, "condition": ", ".join(conditions[f])} for f in filters if conditions.get(f)]
        conditioned = {o["filterId"] for o in options}
        await run.request("setExceptionBreakpoints", {"filters": [f for f in filters if f not in conditioned], "filterOptions": options})

    def _host_lost(self) -> None:
        """The program's process is gone: its runs are over."""
        for run in list(self.runs.values()):
            self.spawn(self._drop_run(run, None))

    # -- a graph run's events -----------------------------------------------------------------

    def _graph_event(self, run: GraphRun, message: Message) -> None:
        event = message.get("event")
        body = message.get("body") or {}
        if event == "stopped":
            self.spawn(self._graph_stopped(run, body))
        elif event == "exited":
            run.failed = body.get("exitCode", 0) != 0
        elif event == "terminated":
            self.spawn(self._graph_ended(run))
        elif event in ("output", "invalidated"):
            self.channel.event(event, to_client(self.ids, run.number, body))
        # initialized, breakpoint and capabilities events are the graph session's own business

    async def _graph_stopped(self, run: GraphRun, body: dict[str, Any]) -> None:
        """Show a graph stop: the calling Python thread parked first (on the first stop), then the graph thread.

        A continue from a node error that fails there again ends the run as failed: the program then gets
        onnxruntime's error, as an uncaught exception goes on when a Python debugger continues.
        """
        error = body.get("text") == "NodeExecutionError"
        if error and run.continued_from_error == body.get("description"):
            self.output(f"graph-dap: {run.name}: the node fails again; the program gets onnxruntime's error\n")
            await self._drop_run(run, hp.RunResult(RunAction.RAISE, message=str(body.get("description", ""))))
            return
        run.continued_from_error = None
        run.last_error = body.get("description") if error else None
        run.stopped = True
        if not run.shown:
            run.shown = True
            self.channel.event("thread", {"reason": "started", "threadId": run.thread_id})
        dap_thread = run.call.dap_thread
        if dap_thread and self.python is not None and not self.python.gone and dap_thread not in self.parked:
            parked = self._parking.setdefault(dap_thread, asyncio.Event())
            parked.clear()
            self.link.push_suspend(run.host_request)
            try:
                await asyncio.wait_for(parked.wait(), PARK_TIMEOUT)
            except TimeoutError:
                pass
        if run.ended or not run.stopped:
            return
        out = to_client(self.ids, run.number, body)
        out["threadId"] = run.thread_id
        out["allThreadsStopped"] = False
        hits = [run.breakpoint_ids[i] for i in body.get("hitBreakpointIds", []) if i in run.breakpoint_ids]
        out.pop("hitBreakpointIds", None)
        if hits:
            out["hitBreakpointIds"] = hits
        run.last_stop = out
        self.channel.event("stopped", out)

    def restate_graph_stops(self) -> None:
        """After debugpy said every thread continued, say again which graph threads are stopped (they are)."""
        for run in self.runs.values():
            if run.stopped and run.last_stop is not None and not run.ended:
                self.channel.event("stopped", dict(run.last_stop, preserveFocusHint=True))

    async def _graph_ended(self, run: GraphRun) -> None:
        """The graph reached its end (or failed): its outputs go back to the program, its thread goes."""
        result = hp.RunResult(RunAction.RAISE, message=f"{run.name} failed")
        worker = run.adapter.worker
        if run.failed and (worker is None or worker.dead is not None):
            result = hp.RunResult(RunAction.PLAIN)  # graph-dap's worker died, not the program's run: it runs as it is
        elif not run.failed:
            path = outputs_path(self.folder, run)
            try:
                await run.save_outputs(path)
                result = hp.RunResult(RunAction.OUTPUTS, path)
            except Exception as error:  # noqa: BLE001 - the program then gets onnxruntime's own outputs
                self.output(f"graph-dap: {run.name}: cannot hand its outputs back ({error}); the call runs as it is\n", "stderr")
                result = hp.RunResult(RunAction.PLAIN)
        worker = run.detach_worker()
        await self._drop_run(run, result)
        if worker is not None:
            await self.pool.give_back(worker)

    async def _drop_run(self, run: GraphRun, result: hp.RunResult | None) -> None:
        """End a run: the program gets ``result`` (None: it is gone), the client loses the thread."""
        if run.ended and run.number not in self.runs:
            return
        run.stopped = False
        if result is not None:
            self.link.answer(run.host_request, result)
        self.runs.pop(run.number, None)
        if run.shown:
            self.channel.event("thread", {"reason": "exited", "threadId": run.thread_id})
        await run.close()
        self.ids.forget(run.number)

    # -- debugpy's events and reverse requests ------------------------------------------------

    def _python_event(self, message: Message) -> None:
        event = message.get("event")
        body = message.get("body") or {}
        if event == "initialized":
            self.channel.event("initialized")  # the client configures both sides now
            return
        if event not in DAP_EVENTS or event in ("capabilities", "progressStart", "progressUpdate", "progressEnd"):
            return
        theirs = body.get("threadId")
        theirs = theirs if isinstance(theirs, int) else -1
        out = to_client(self.ids, PYTHON, body)
        if event == "stopped":
            run = self._waiting_run(theirs)
            if run is not None:
                self.parked[theirs] = run
                out.update(reason="pause", allThreadsStopped=False, preserveFocusHint=True)
                out["description"] = f"waiting in InferenceSession.run: {run.name}"
                event_of = self._parking.get(theirs)
                if event_of is not None:
                    event_of.set()
        elif event == "continued":
            if body.get("allThreadsContinued"):
                self.parked.clear()
                if not self.resuming:
                    out["allThreadsContinued"] = False  # the host let its own thread go: only that one runs
            else:
                self.parked.pop(theirs, None)
        elif event == "breakpoint" and isinstance(out.get("breakpoint"), dict):
            out["breakpoint"] = rename_ids(self.ids, PYTHON, [out["breakpoint"]], IdKind.BREAKPOINT)[0]
        elif event == "process":
            out["name"] = self.launch.name
        elif event == "module" and isinstance(out.get("module"), dict):
            if str(out["module"].get("path", "")).startswith(PACKAGE):
                return  # graph-dap's own host, not the program's
            out = schema.event_body("module", out)
        elif event == "terminated":
            self.terminated = True
            for run in list(self.runs.values()):
                self.spawn(self._drop_run(run, None))
        self.channel.event(str(event), out if out else None)

    def _waiting_run(self, dap_thread: Any) -> GraphRun | None:
        """The graph run whose calling thread this is, while the host parks it."""
        if not isinstance(dap_thread, int) or dap_thread not in self._parking:
            return None
        return next((r for r in self.runs.values() if r.call.dap_thread == dap_thread and not r.ended), None)

    def _python_request(self, message: Message) -> None:
        """A reverse request of debugpy's (``runInTerminal``): to the client, whose answer goes back."""
        forwarded: Message = {"type": MessageType.REQUEST, "command": message.get("command"), "arguments": message.get("arguments") or {}}
        self.channel.send(forwarded)
        self._reverse[forwarded["seq"]] = message.get("seq", 0)

    def client_response(self, message: Message) -> None:
        """The client's answer to a reverse request we passed on."""
        theirs = self._reverse.pop(message.get("request_seq", -1), None)
        if theirs is not None and self.python is not None:
            self.python.peer.respond(theirs, str(message.get("command")), bool(message.get("success")), message.get("body"), message.get("message", ""))

    def _python_gone(self) -> None:
        """debugpy's adapter ended: if it did not say the program ended, say it now."""
        if not self.terminated:
            self.terminated = True
            for run in list(self.runs.values()):
                self.spawn(self._drop_run(run, None))
            self.channel.event("exited", {"exitCode": 1})
            self.channel.event("terminated")

    # -- ending -------------------------------------------------------------------------------

    async def close(self) -> None:
        """End everything: the runs, debugpy's adapter (and with it the program), the workers, the folder."""
        for run in list(self.runs.values()):
            await self._drop_run(run, None)
        if self.python is not None:
            await self.python.close()
        await self.link.close()
        await self.catalog.close()
        await self.pool.close()
        for task in list(self._tasks):
            task.cancel()
        shutil.rmtree(self.folder, ignore_errors=True)

    def end(self) -> None:
        """The session is over: the adapter stops reading requests after this one."""
        self._end()
