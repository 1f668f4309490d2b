"""Which side a mixed session's request goes to, by the ids it carries: debugpy, or the graph run that issued them.

A thread, frame, variables, source or target id says its side (:mod:`.ids`); requests
without one go by what they name: a listing file's breakpoints and the graph filters
are the graphs', function breakpoints (node specs) too; every other source's
breakpoints and every other request are Python's. Breakpoints and filters are kept here
for the graph runs to come (and sent to the runs going on); the host hears what applies.
"""

from __future__ import annotations

import contextlib
from typing import Any

from graph_dap.adapter.breakpoints import inf_exclusions
from graph_dap.adapter.mixed import schema
from graph_dap.adapter.mixed.catalog import FunctionBreakpoint, LineBreakpoint
from graph_dap.adapter.mixed.graph_run import GraphRun
from graph_dap.adapter.mixed.ids import PYTHON, IdKind, rename_ids, to_client, to_side
from graph_dap.adapter.mixed.session import GRAPH_FILTERS, MixedSession
from graph_dap.adapter.requests import CantHandle, InvalidRequest, Request, RequestError, checked, items_of
from graph_dap.kinds import BreakFilter

#: Requests that name a thread, a frame, a variables reference: they go to the side it belongs to.
BY_THREAD = {"stackTrace": "threadId", "continue": "threadId", "next": "threadId", "stepIn": "threadId", "stepOut": "threadId",
             "stepBack": "threadId", "reverseContinue": "threadId", "pause": "threadId", "exceptionInfo": "threadId"}  # fmt: skip
BY_FRAME = {"scopes": "frameId", "evaluate": "frameId", "setExpression": "frameId", "completions": "frameId",
            "stepInTargets": "frameId", "restartFrame": "frameId"}  # fmt: skip
BY_VARIABLES = {"variables": "variablesReference", "setVariable": "variablesReference"}
#: Requests that make debugpy's threads run (its answer says all of them, the graph threads included).
RESUMING = frozenset({"continue", "next", "stepIn", "stepOut", "goto"})
KINDS = {"threadId": IdKind.THREAD, "frameId": IdKind.FRAME, "variablesReference": IdKind.VARIABLES}
#: Requests answered here rather than forwarded by the ids they carry.
OWN = frozenset(
    {
        "threads", "goto", "gotoTargets", "source", "readMemory", "dataBreakpointInfo", "setDataBreakpoints", "restart",
        "configurationDone", "terminate", "disconnect", "setBreakpoints", "setFunctionBreakpoints", "setExceptionBreakpoints",
        "cancel",
    }
)  # fmt: skip


class Router:
    """The requests of one mixed session."""

    def __init__(self, session: MixedSession) -> None:
        self.s = session

    async def handle(self, request: Request) -> dict[str, Any] | None:
        """Answer one request (its body), from the side it belongs to."""
        command, args = request.command, request.arguments
        if command in OWN:
            body: dict[str, Any] | None = await getattr(self, f"_{command}")(request)
            return body
        if command in ("launch", "attach"):
            raise InvalidRequest("already launched")
        key = BY_THREAD.get(command) or BY_FRAME.get(command) or BY_VARIABLES.get(command)
        if key is not None and key in args:
            run = self._run_of(KINDS[key], args[key])
            if run is not None:
                return await self.graph(run, request)
        if command.startswith("graphDap/"):
            return await self.graph(self._stopped_run(args), request)
        return await self.python(request)

    # -- the two sides ------------------------------------------------------------------------

    def _run_of(self, kind: IdKind, ours: Any) -> GraphRun | None:
        """The graph run an id of ``kind`` belongs to (None: Python's, or unknown)."""
        side = self.s.ids.side_of(kind, ours)
        if side is None or side[0] == PYTHON:
            return None
        run = self.s.runs.get(side[0])
        if run is None:
            raise InvalidRequest(f"unknown {kind} id {ours}: its graph run has ended")
        return run

    def _stopped_run(self, args: dict[str, Any]) -> GraphRun:
        """The graph run a request without a thread means: its frame's, else the one that stopped last."""
        frame = args.get("frameId")
        run = self._run_of(IdKind.FRAME, frame) if frame is not None else None
        if run is None:
            stopped = [r for r in self.s.runs.values() if r.stopped]
            if not stopped:
                raise CantHandle("no graph is stopped")
            run = stopped[-1]
        return run

    async def python(self, request: Request) -> dict[str, Any] | None:
        """Forward a request to debugpy, ids made its own, and its answer made the client's."""
        python = self.s.python
        if python is None or python.gone:
            raise CantHandle("the Python debugger has ended")
        if request.command in RESUMING:
            self.s.resuming = True
        try:
            answer = await python.peer.request(request.command, to_side(self.s.ids, PYTHON, request.arguments))
        finally:
            if request.command in RESUMING:
                self.s.resuming = False
        body = schema.response_body(request.command, to_client(self.s.ids, PYTHON, answer))
        body = self._rename(request.command, PYTHON, body)
        if request.command == "stackTrace":
            self._label_waiting(request.arguments.get("threadId"), body)
        if request.command in RESUMING and body.get("allThreadsContinued", True):
            self.s.later(self.s.restate_graph_stops)
        return body

    async def graph(self, run: GraphRun, request: Request) -> dict[str, Any] | None:
        """Forward a request to a graph run's session, ids made its own, and its answer made the client's."""
        arguments = to_side(self.s.ids, run.number, request.arguments)
        if "memoryReference" in arguments:
            arguments["memoryReference"] = str(arguments["memoryReference"]).split(".", 1)[-1]
        body = to_client(self.s.ids, run.number, await run.request(request.command, arguments))
        body = self._rename(request.command, run.number, body)
        _prefix_memory(body, f"g{run.number}.")
        if request.command in ("continue", "next", "stepIn", "stepOut", "stepBack", "reverseContinue", "goto"):
            run.stopped = False
            if request.command == "continue":
                body["allThreadsContinued"] = False
                run.continued_from_error = run.last_error
        return body

    def _rename(self, command: str, side: int, body: dict[str, Any]) -> dict[str, Any]:
        """The ``id`` of the objects a response lists, made the client's."""
        ids = self.s.ids
        if command == "threads":
            body["threads"] = rename_ids(ids, side, body.get("threads"), IdKind.THREAD)
        elif command == "stackTrace":
            body["stackFrames"] = rename_ids(ids, side, body.get("stackFrames"), IdKind.FRAME)
        elif command in ("setBreakpoints", "setFunctionBreakpoints", "setDataBreakpoints", "setInstructionBreakpoints"):
            body["breakpoints"] = rename_ids(ids, side, body.get("breakpoints"), IdKind.BREAKPOINT)
        elif command in ("gotoTargets", "stepInTargets"):
            body["targets"] = rename_ids(ids, side, body.get("targets"), IdKind.TARGET)
        return body

    def _label_waiting(self, thread: Any, body: dict[str, Any]) -> None:
        """A Python thread stopped in a debugged run call: its top frame says so."""
        side = self.s.ids.side_of(IdKind.THREAD, thread)
        run = self.s.parked.get(side[1]) if side is not None and side[0] == PYTHON else None
        frames = body.get("stackFrames") or []
        if run is not None and frames and int(body.get("totalFrames", 1) or 1) >= 1:
            frames[0] = dict(frames[0], name=f"{frames[0].get('name', '')}  [InferenceSession.run: {run.name}]")

    # -- requests with a side of their own ---------------------------------------------------

    async def _cancel(self, request: Request) -> dict[str, Any]:
        """A hint, answered here: a request's cancel is not forwarded (debugpy knows its requests by the
        adapter's seq, not the client's: forwarded, it cancelled the wrong one and the session hung), and
        the request is answered as usual; a progress's cancel pauses the graph runs that are running."""
        if request.arg("progressId", str, None) is not None:
            for run in list(self.s.runs.values()):
                if not run.stopped:
                    with contextlib.suppress(RequestError):
                        await self.graph(run, request)
        return {}

    async def _threads(self, request: Request) -> dict[str, Any]:
        threads: list[dict[str, Any]] = []
        python = self.s.python
        if python is not None and not python.gone:
            threads = list((await self.python(request) or {}).get("threads", []))
        threads += [{"id": r.thread_id, "name": r.name} for r in self.s.runs.values() if r.shown and not r.ended]
        return {"threads": threads}

    async def _goto(self, request: Request) -> dict[str, Any] | None:
        target = request.arguments.get("targetId")
        side = self.s.ids.side_of(IdKind.TARGET, target)
        if side is not None and side[0] != PYTHON:
            run = self._run_of(IdKind.TARGET, target)
            assert run is not None
            return await self.graph(run, request)
        return await self.python(request)

    async def _gotoTargets(self, request: Request) -> dict[str, Any] | None:
        source = request.arg("source", dict)
        run = self._listing_run(source)
        if run is not None:
            return await self.graph(run, request)
        if self._is_listing(source):
            return {"targets": []}
        return await self.python(request)

    async def _source(self, request: Request) -> dict[str, Any] | None:
        ref = request.arguments.get("sourceReference") or (request.arguments.get("source") or {}).get("sourceReference")
        side = self.s.ids.side_of(IdKind.SOURCE, ref)
        if side is not None and side[0] != PYTHON:
            run = self._run_of(IdKind.SOURCE, ref)
            assert run is not None
            return await self.graph(run, request)
        path = (request.arguments.get("source") or {}).get("path")
        entry = self.s.catalog.listing_entry(path) if isinstance(path, str) else None
        if entry is not None and entry.listing is not None:
            return {"content": entry.listing.text, "mimeType": "text/plain"}
        return await self.python(request)

    async def _readMemory(self, request: Request) -> dict[str, Any] | None:
        reference = request.arg("memoryReference", str)
        prefix, _, _ = reference.partition(".")
        run = self.s.runs.get(int(prefix[1:])) if prefix[:1] == "g" and prefix[1:].isdigit() else None
        if run is None:
            raise InvalidRequest(f"unknown memoryReference {reference!r}")
        return await self.graph(run, request)

    async def _dataBreakpointInfo(self, request: Request) -> dict[str, Any] | None:
        reference = request.arguments.get("variablesReference")
        run = self._run_of(IdKind.VARIABLES, reference) if reference else None
        if run is None:
            stopped = [r for r in self.s.runs.values() if r.stopped]
            if not stopped:
                return {"dataId": None, "description": "data breakpoints are on the tensors of a stopped graph"}
            run = stopped[-1]
        return await self.graph(run, request)

    async def _setDataBreakpoints(self, request: Request) -> dict[str, Any] | None:
        stopped = [r for r in self.s.runs.values() if r.stopped]
        if not stopped:
            wanted = items_of(request.arg("breakpoints", list), dict, "breakpoints")
            return {"breakpoints": [{"verified": False, "message": "data breakpoints are on the tensors of a stopped graph"} for _ in wanted]}
        return await self.graph(stopped[-1], request)

    async def _restart(self, request: Request) -> None:
        raise CantHandle("a program launch cannot restart in place: stop it and start it again")

    async def _configurationDone(self, request: Request) -> dict[str, Any] | None:
        return await self.python(request)

    async def _terminate(self, request: Request) -> dict[str, Any] | None:
        for run in list(self.s.runs.values()):
            await self.s._drop_run(run, None)
        python = self.s.python
        if python is None or python.gone:
            return None
        return await self.python(request)

    async def _disconnect(self, request: Request) -> None:
        self.s.end()
        for run in list(self.s.runs.values()):
            await self.s._drop_run(run, None)
        python = self.s.python
        if python is not None and not python.gone:
            with contextlib.suppress(RequestError):  # refused, or debugpy gone meanwhile
                await python.peer.request("disconnect", dict(request.arguments, terminateDebuggee=request.arguments.get("terminateDebuggee", True)))

    # -- breakpoints and filters --------------------------------------------------------------

    def _is_listing(self, source: dict[str, Any]) -> bool:
        path = source.get("path")
        if not isinstance(path, str):
            return False
        return path.endswith(".onnxtxt") or self.s.catalog.listing_entry(path) is not None

    def _listing_run(self, source: dict[str, Any]) -> GraphRun | None:
        """The stopped graph run whose model's listing ``source`` is."""
        path = source.get("path")
        entry = self.s.catalog.listing_entry(path) if isinstance(path, str) else None
        if entry is None:
            return None
        return next((r for r in reversed(list(self.s.runs.values())) if r.stopped and r.call.key == entry.loaded.key), None)

    async def _setBreakpoints(self, request: Request) -> dict[str, Any] | None:
        source = request.arg("source", dict)
        if not self._is_listing(source):
            return await self.python(request)
        path = str(source["path"])
        wanted = items_of(request.arg("breakpoints", list, []), dict, "breakpoints")
        line_in = 0 if self.s.client.lines_start_at1 else 1
        bps = [
            LineBreakpoint(
                self.s.new_breakpoint_id(),
                checked(bp, "line", int, where=f"breakpoints[{i}]") + line_in,
                checked(bp, "condition", str, None) or None,
                checked(bp, "hitCondition", str, None) or None,
                checked(bp, "logMessage", str, None) or None,
            )
            for i, bp in enumerate(wanted)
        ]
        catalog = self.s.catalog
        catalog.set_lines(path, bps)
        entry = catalog.listing_entry(path)
        listing = entry.listing if entry is not None else None
        bodies = [self.s.line_body(bp, listing.source() if listing else None, bp.nodes.get(entry.loaded.key) if entry else None) for bp in bps]
        await self._changed(lambda run: entry is not None and run.call.key == entry.loaded.key)
        return {"breakpoints": bodies}

    async def _setFunctionBreakpoints(self, request: Request) -> dict[str, Any]:
        bps: list[FunctionBreakpoint] = []
        for i, given in enumerate(items_of(request.arg("breakpoints", list), dict, "breakpoints")):
            where = f"breakpoints[{i}]"
            bps.append(
                FunctionBreakpoint(
                    self.s.new_breakpoint_id(),
                    checked(given, "name", str, where=where),
                    checked(given, "condition", str, None, where) or None,
                    checked(given, "hitCondition", str, None, where) or None,
                    checked(given, "logMessage", str, None, where) or None,
                )
            )
        self.s.catalog.set_functions(bps)
        await self._changed(lambda run: True)
        bodies: list[dict[str, Any]] = []
        for bp in bps:
            if bp.models:
                bodies.append({"id": bp.id, "verified": True})
            else:
                loaded = len(self.s.catalog.models)
                why = f"no node of the {loaded} model(s) loaded so far matches '{bp.name}'" if loaded else "no model is loaded yet"
                bodies.append({"id": bp.id, "verified": False, "message": why})
        return {"breakpoints": bodies}

    async def _setExceptionBreakpoints(self, request: Request) -> dict[str, Any]:
        filters = items_of(request.arg("filters", list), str, "filters")
        options = items_of(request.arg("filterOptions", list, []), dict, "filterOptions")
        ours = [f for f in filters if f in GRAPH_FILTERS]
        our_options = [o for o in options if o.get("filterId") in GRAPH_FILTERS]
        answers: list[dict[str, Any]] = []
        enabled = [BreakFilter(f) for f in ours]
        exclude: list[str] = []
        nan_exclude: list[str] = []
        for o in our_options:
            fid = BreakFilter(str(o.get("filterId")))
            enabled.append(fid)
            condition = str(o.get("condition") or "")
            if fid is BreakFilter.INF:
                exclude += inf_exclusions(condition)
            elif fid is BreakFilter.NAN:
                nan_exclude += inf_exclusions(condition)  # (the same list of node patterns)
        theirs: list[dict[str, Any]] = []
        python = self.s.python
        py_args = dict(request.arguments)
        py_args["filters"] = [f for f in filters if f not in GRAPH_FILTERS]
        py_args["filterOptions"] = [o for o in options if o.get("filterId") not in GRAPH_FILTERS]
        if python is not None and not python.gone:
            body = await self.python(Request(request.seq, request.command, py_args)) or {}
            theirs = list(body.get("breakpoints") or [])
        mismatch = "the mismatch filter needs a reference: give the launch argument 'reference'"
        for item in [*filters, *(o.get("filterId") for o in options)]:
            if item in GRAPH_FILTERS:
                bad = item == BreakFilter.MISMATCH and self.s.launch.reference is None
                answers.append({"verified": False, "message": mismatch} if bad else {"verified": True})
            else:
                answers.append(theirs.pop(0) if theirs else {"verified": True})
        self.s.graph_filters = list(dict.fromkeys(enabled))
        self.s.inf_exclude = exclude
        self.s.nan_exclude = nan_exclude
        await self._changed(lambda run: True)
        return {"breakpoints": answers}

    async def _changed(self, applies: Any) -> None:
        """The graph breakpoints or filters changed: the host hears what applies now, the runs going on get them."""
        self.s.push_config()
        for run in list(self.s.runs.values()):
            if applies(run) and not run.ended:
                try:
                    await self.s.configure_run(run)
                except RequestError as error:
                    self.s.output(f"graph-dap: {run.name}: {error}\n", "stderr")


def _prefix_memory(body: Any, prefix: str) -> None:
    """A graph run's memory references, made the client's (``g3.m5``)."""
    if isinstance(body, dict):
        for key, value in body.items():
            if key == "memoryReference" and isinstance(value, str):
                body[key] = prefix + value
            else:
                _prefix_memory(value, prefix)
    elif isinstance(body, list):
        for item in body:
            _prefix_memory(item, prefix)
