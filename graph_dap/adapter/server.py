"""The debug adapter: one handler per DAP request, over a runtime in a worker process.

Like vscode-mock-debug's ``mockDebug.ts``: each ``<command>_request`` converts the
arguments, calls the runtime (through :class:`WorkerClient`), and returns the response
body; :meth:`DebugAdapter.dispatch` is the one place where errors become ``success:
false``. Runs go to the worker in the background, so the adapter keeps answering
(``pause``, ``threads``, ``setBreakpoints``) while the model computes.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from graph_dap.adapter.access import AUTH_TIMEOUT, TOKEN_KEY, WrongToken
from graph_dap.adapter.breakpoint_handlers import BreakpointRequests
from graph_dap.adapter.core import EXCEPTION_FILTERS, EXCEPTION_NAMES, PROGRESS_DELAY, RESUMABLE, THREAD_ID
from graph_dap.adapter.custom_handlers import CUSTOM_REQUESTS, CustomRequests
from graph_dap.adapter.inspect_handlers import InspectionRequests
from graph_dap.adapter.listing import ListingSource, ensure_listing, holds
from graph_dap.adapter.protocol import Channel, FramingError, Malformed, Message, SocketStream, StdioStream
from graph_dap.adapter.requests import CantHandle, InvalidRequest, Request, RequestError, UserError, checked, items_of
from graph_dap.errors import GraphDapError
from graph_dap.worker.client import StopInfo, WorkerClient, WorkerDied

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


class DebugAdapter(InspectionRequests, BreakpointRequests, CustomRequests):
    """One DAP session on one channel: the request loop, its lifecycle and its runs."""

    # -- the loop and the one place errors become responses -----------------------------

    async def serve(self) -> None:
        """Read and answer requests until ``disconnect`` or the end of the stream."""
        deadline = asyncio.get_running_loop().time() + AUTH_TIMEOUT
        try:
            if self.gate.open:
                await self._take_turn()
            while not self._done:
                try:
                    message = await self._receive(deadline)
                except FramingError as error:
                    print(f"graph-dap: closing the connection: {error}", file=sys.stderr)
                    self._output(f"graph-dap: closing the connection: {error}\n", "stderr")
                    break
                if message is None:
                    break
                if isinstance(message, Malformed):
                    self._malformed(message)
                elif message.get("type") == "request":
                    await self.dispatch(Request(message["seq"], message["command"], message.get("arguments") or {}))
                # responses (to reverse requests we never send) and events are ignored
        finally:
            await self._shutdown()
            await self.channel.close()
            if self._has_turn and self._turn is not None:
                self._turn.release()

    async def _receive(self, deadline: float) -> Message | Malformed | None:
        """The next message; a client that has not shown the token by ``deadline`` gets None (closed)."""
        if self.gate.open:
            return await self.channel.receive()
        try:
            return await asyncio.wait_for(self.channel.receive(), max(0.0, deadline - asyncio.get_running_loop().time()))
        except asyncio.TimeoutError:
            print(f"graph-dap: closing a connection that showed no {TOKEN_KEY} in {AUTH_TIMEOUT:.0f} s", file=sys.stderr)
            return None

    async def _take_turn(self) -> None:
        """Wait for the sessions before this one to end (TCP clients are served one after another)."""
        if self._turn is not None and not self._has_turn:
            await self._turn.acquire()
            self._has_turn = True

    def _malformed(self, message: Malformed) -> None:
        if message.seq is not None:
            self.channel.error(message.seq, message.command or "", f"malformed request: {message.reason}")
        else:
            print(f"graph-dap: ignored a malformed message: {message.reason}", file=sys.stderr)
            self._output(f"graph-dap: ignored a malformed message: {message.reason}\n", "stderr")

    async def dispatch(self, request: Request) -> None:
        """Run the handler for one request and send its response (then what it deferred)."""
        custom = CUSTOM_REQUESTS.get(request.command)
        handler = getattr(type(self), custom if custom else f"{request.command}_request", None)
        self._after = []
        try:
            if not self.gate.open:
                self.gate.admit(request)
                if self.gate.open:
                    await self._take_turn()
            if handler is None:
                raise InvalidRequest(f"unknown command '{request.command}'")
            body = await handler(self, request)
        except RequestError as error:
            self.channel.error(request.seq, request.command, str(error), show=error.show_user)
            self._done = self._done or isinstance(error, WrongToken)
            return
        except WorkerDied as error:
            self.channel.error(request.seq, request.command, f"the runtime worker is gone: {error}")
            return
        except GraphDapError as error:
            self.channel.error(request.seq, request.command, str(error))
            return
        except Exception as error:  # noqa: BLE001 - a bug answers this request, not the session
            traceback.print_exc(file=sys.stderr)
            self.channel.error(request.seq, request.command, f"internal error in graph-dap: {error!r}")
            return
        self.channel.response(request.seq, request.command, body)
        for action in self._after:
            action()

    # -- starting ---------------------------------------------------------------------

    async def initialize_request(self, request: Request) -> dict[str, Any]:
        if self.state != "new" or self.client:
            raise InvalidRequest("already initialized")
        self.client = dict(request.arguments)
        self.client.setdefault("adapterID", request.arg("adapterID", str, "graph-dap"))
        # Start the local worker now: importing onnxruntime overlaps the client's setup
        # (not for a client yet to show the token: it starts nothing).
        if self.gate.open:
            self._spawning = asyncio.ensure_future(self._spawn_worker())
        return dict(CAPABILITIES)

    async def launch_request(self, request: Request) -> None:
        if not self.client:
            raise InvalidRequest("initialize first")
        if self.graph is not None:
            raise InvalidRequest("already launched")
        self.launch_args = self._launch_args(request)
        self.worker = await self._connect_worker(self.launch_args)
        await self._load()
        self.state = "configuring"
        self._later(lambda: self.channel.event("initialized"))

    async def attach_request(self, request: Request) -> None:
        raise CantHandle("graph-dap starts the model itself: use launch (with 'worker' and 'token' for a remote worker)")

    def _launch_args(self, request: Request) -> dict[str, Any]:
        args: dict[str, Any] = {
            "model": request.arg("model", str),
            "stopOnEntry": request.arg("stopOnEntry", bool, False),
            "noDebug": request.arg("noDebug", bool, False),
            "skipConstants": request.arg("skipConstants", bool, True),
            "providers": self._providers(request.arguments.get("providers")),
            "dims": request.arg("dims", dict, {}),
            "memoryBudgetMB": request.arg("memoryBudgetMB", float, None),
            "worker": request.arg("worker", str, None),
            "token": request.arg("token", str, None),
            "cwd": request.arg("cwd", str, None),
            "python": request.arg("python", str, None),
            "listingPath": request.arg("listingPath", str, None) or None,
            "iterations": request.arg("iterations", int, None),
        }
        inputs = request.arguments.get("inputs")
        if inputs is not None and not isinstance(inputs, (str, dict)):
            raise InvalidRequest("'arguments.inputs' must be a path or an object of input name -> value")
        args["inputs"] = inputs
        reference = request.arguments.get("reference")
        if reference is not None and not isinstance(reference, (str, dict)):
            raise InvalidRequest(
                "'arguments.reference' must be a string: a dump (.npz), provider:NAME, opt_level:LEVEL or model:OTHER.onnx"
            )
        args["reference"] = reference or None
        args["tolerance"] = self._tolerance(request.arguments.get("tolerance"))
        if args["tolerance"] is not None and args["reference"] is None:
            raise UserError("'tolerance' needs a 'reference' to compare with")
        if args["iterations"] is not None and args["iterations"] < 1:
            raise UserError("iterations must be at least 1")
        for key, value in args["dims"].items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise UserError(f"dims: '{key}' must be an integer, got {value!r}")
        args["breakOn"] = items_of(request.arg("breakOn", list, []), str, "breakOn")
        args["infExclude"] = items_of(request.arg("infExclude", list, []), str, "infExclude")
        known = [f["filter"] for f in EXCEPTION_FILTERS]
        for f in args["breakOn"]:
            if f not in known:
                raise UserError(f"breakOn: unknown filter '{f}'; expected any of {', '.join(known)}")
        if "mismatch" in args["breakOn"] and args["reference"] is None:
            raise UserError("breakOn: the mismatch filter needs a 'reference' to compare with")
        if args["worker"] and not args["token"]:
            raise UserError("'worker' needs the 'token' the worker was started with")
        if args["memoryBudgetMB"] is not None and args["memoryBudgetMB"] <= 0:
            raise UserError("memoryBudgetMB must be positive")
        return args

    @staticmethod
    def _providers(given: Any) -> list[str]:
        """A list of execution providers (a lone string is one provider)."""
        if given is None or given == []:
            return ["CPUExecutionProvider"]
        if isinstance(given, str):
            return [given]
        if not isinstance(given, list):
            raise InvalidRequest(f"'arguments.providers' must be an array, got {type(given).__name__}")
        return items_of(given, str, "providers")

    @staticmethod
    def _tolerance(given: Any) -> dict[str, Any] | None:
        """``{atol, rtol}`` (and ``failIf``), or a list of fail-if conditions (``cosine<0.999``)."""
        if given is None:
            return None
        if isinstance(given, list):
            return {"fail_if": items_of(given, str, "tolerance")}
        if not isinstance(given, dict):
            raise InvalidRequest("'arguments.tolerance' must be {atol, rtol} or a list of conditions like 'cosine<0.999'")
        tolerance = {
            "atol": checked(given, "atol", float, None, "tolerance"),
            "rtol": checked(given, "rtol", float, None, "tolerance"),
            "fail_if": items_of(checked(given, "failIf", list, [], "tolerance"), str, "tolerance.failIf"),
        }
        for key in ("atol", "rtol"):
            if tolerance[key] is not None and tolerance[key] < 0:
                raise UserError(f"tolerance: {key} must not be negative")
        return tolerance

    async def _connect_worker(self, args: dict[str, Any]) -> WorkerClient:
        """The worker for this launch: remote, a local one on another Python, or the one started at initialize."""
        if args["worker"]:
            self._drop_spawned()
            try:
                worker = await WorkerClient.connect(args["worker"], args["token"])
            except GraphDapError as error:
                raise UserError(str(error)) from None
        else:
            if args["python"]:
                self._drop_spawned()
                python = args["python"]
                self._spawning = asyncio.ensure_future(WorkerClient.spawn(python))
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

    def _drop_spawned(self) -> None:
        """Close the worker started at initialize, once it is up (this launch wants another)."""
        spawning, self._spawning = self._spawning, None
        if spawning is None:
            return

        def close(done: asyncio.Future[WorkerClient]) -> None:
            if not done.cancelled() and done.exception() is None:
                asyncio.ensure_future(done.result().close())

        spawning.add_done_callback(close)

    async def _load(self) -> None:
        assert self.worker is not None
        args = self.launch_args
        listing_path = args["listingPath"]
        if listing_path and not os.path.isabs(listing_path):
            listing_path = os.path.join(args["cwd"] or os.getcwd(), listing_path)
        progress = self._progress_start(f"Loading {os.path.basename(args['model'])}")
        try:
            graph = await self.worker.load(
                model=args["model"],
                inputs=args["inputs"],
                dims=args["dims"],
                providers=args["providers"],
                skip_constants=args["skipConstants"],
                memory_budget_mb=args["memoryBudgetMB"],
                base_dir=args["cwd"] or os.getcwd(),
                **self._reference_args(),
                write_listing=not listing_path,
            )
            await self.worker.call("set_break_on", filters=self._worker_filters(), inf_exclude=self._worker_inf_exclude())
        except WorkerDied as error:
            raise UserError(f"the runtime worker died while loading the model: {error}") from None
        except GraphDapError as error:
            raise UserError(str(error)) from None
        finally:
            self._progress_end(progress)
        self.graph = graph
        self._source_refs += 1
        self.listing = self._listing_source(graph, listing_path)

    def _reference_args(self) -> dict[str, Any]:
        args = self.launch_args
        if args["reference"] is None:
            return {}
        return {"reference": args["reference"], "tolerance": args["tolerance"]}

    def _listing_source(self, graph: Any, listing_path: str | None) -> ListingSource:
        """The listing, by path when a file holds it: ``listingPath`` (written here if need be), or the one beside the model."""
        if listing_path:
            path = listing_path if ensure_listing(listing_path, graph.listing) else None
            return ListingSource(graph, self._source_refs, path, (listing_path,))
        beside = graph.listing_path
        path = beside if beside and holds(beside, graph.listing) else None
        return ListingSource(graph, self._source_refs, path, (beside,) if beside else ())

    async def configurationDone_request(self, request: Request) -> None:
        if self.state != "configuring":
            raise InvalidRequest("configurationDone comes once, after launch")
        self._later(lambda: self._start_run(self._first_run()))

    def _first_run(self) -> str:
        """How a launch (or a restart) starts: to the end (noDebug), at entry, or to the first stop."""
        if self.launch_args["noDebug"]:
            return "to_end"
        return "start" if self.launch_args["stopOnEntry"] else "resume"

    # -- running ----------------------------------------------------------------------

    def _start_run(self, command: str, target: str | None = None) -> None:
        """Start a run in the background; its stop comes as a ``stopped`` event."""
        self.state = "running"
        self.stop = None
        self._values = None
        self.handles.reset()
        self.memory.reset()
        self._settable.clear()
        self._run_command = command
        if self.client.get("supportsProgressReporting") and command in RESUMABLE:
            self._progress_timer = asyncio.get_running_loop().call_later(PROGRESS_DELAY, self._run_progress_start)
        self._run_task = asyncio.ensure_future(self._run(command, target))

    async def _run(self, command: str, target: str | None) -> None:
        assert self.worker is not None
        worker = self.worker
        try:
            iterations = (self.launch_args.get("iterations") or 1) if command == "to_end" else 1
            stop = await (worker.start() if command == "start" else worker.run(command, target, iterations))
            while True:
                await self._apply_updates()
                if self._interrupting and stop.reason == "pause" and not self._user_paused:
                    self._interrupting = False
                    stop = await worker.run(RESUMABLE[command])
                    continue
                break
        except WorkerDied:
            await self._apply_updates()  # each fails with WorkerDied, for the request waiting on it
            return  # _worker_died tells the user and ends the session
        except GraphDapError as error:
            self._output(f"graph-dap: {error}\n", "stderr")
            await self._apply_updates()
            try:
                where = StopInfo.from_wire(await worker.call("where"))
            except GraphDapError:
                return
            stop = StopInfo("error", where.pc, where.pc, where.last_node, None, str(error), {})
        finally:
            self._interrupting = False
            self._user_paused = False
            self._progress_stop()
        self._stopped(stop)

    async def _apply_updates(self) -> None:
        """Make the changes that requests queued while the run went on; each gets its result."""
        while self._updates:
            change, future = self._updates.pop(0)
            try:
                future.set_result(await change())
            except Exception as error:  # noqa: BLE001 - handed to the request waiting on it
                future.set_exception(error)

    def _stopped(self, stop: StopInfo) -> None:
        """Turn a runtime stop into a ``stopped`` event (or the end of the session)."""
        if stop.reason in ("end", "failed"):
            asyncio.ensure_future(self._end(stop))
            return
        self.stop = stop
        self.state = "stopped"
        body: dict[str, Any] = {"reason": stop.reason, "threadId": THREAD_ID, "allThreadsStopped": True}
        if stop.reason == "breakpoint":
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
        self.state = "ended"
        self.stop = None
        failed = stop.reason == "failed"
        if failed:
            self._output(f"graph-dap: {stop.message}\n", "stderr")
        elif self.worker is not None:
            try:
                outputs = await self.worker.call("outputs")
                lines = "".join(f"  {o['name']}: {o['text']}\n" for o in outputs)
                self._output(f"the run reached the end of the graph; outputs:\n{lines}")
            except GraphDapError as error:
                self._output(f"graph-dap: cannot read the outputs: {error}\n", "stderr")
        repeat = stop.details.get("repeat")
        if isinstance(repeat, dict) and repeat.get("times_ms"):
            self._output(f"{repeat['text']}\n")
        comparison = stop.details.get("comparison")
        if isinstance(comparison, list) and comparison:
            self._output("".join(f"{line}\n" for line in comparison))
        self.channel.event("exited", {"exitCode": 1 if failed else 0})
        self.channel.event("terminated")

    def _begin(self, request: Request, command: str, target: str | None = None) -> None:
        self._thread(request)
        self._need_stopped()
        self._later(lambda: self._start_run(command, target))

    async def continue_request(self, request: Request) -> dict[str, Any]:
        self._begin(request, "continue")
        return {"allThreadsContinued": True}

    async def next_request(self, request: Request) -> None:
        self._begin(request, "step")

    async def stepIn_request(self, request: Request) -> None:
        self._begin(request, "step_in")

    async def stepOut_request(self, request: Request) -> None:
        self._begin(request, "step_out")

    async def stepBack_request(self, request: Request) -> None:
        self._begin(request, "step_back")

    async def reverseContinue_request(self, request: Request) -> None:
        self._begin(request, "reverse_continue")

    async def gotoTargets_request(self, request: Request) -> dict[str, Any]:
        source = request.arg("source", dict)
        line = self._line_in(request.arg("line", int))
        if self.listing is None or not self.listing.matches(source):
            return {"targets": []}
        node = self.listing.node_at_or_after(line, stoppable_only=True)
        if node is None:
            return {"targets": []}
        target_id = node.index + 1
        self._goto_targets[target_id] = node.id
        return {"targets": [{"id": target_id, "label": node.label, "line": self._line_out(node.line)}]}

    async def goto_request(self, request: Request) -> None:
        target = request.arg("targetId", int)
        node = self._goto_targets.get(target)
        if node is None:
            raise InvalidRequest(f"unknown goto target {target}: ask gotoTargets first")
        self._begin(request, "goto", node)

    async def run_to_custom(self, request: Request) -> dict[str, Any]:
        """``graphDap/runTo {"node": ID}``: run until that node is next (as "Run to Cursor" on its line); ``stopped`` follows."""
        node = request.arg("node", str)
        if self.listing is None or node not in self.listing.nodes:
            raise InvalidRequest(f"no node '{node}' in the model")
        self._need_stopped()
        self._later(lambda: self._start_run("run_to", node))
        return {}

    async def pause_request(self, request: Request) -> None:
        self._thread(request)
        worker = self._need_worker()
        if self.state == "running":
            self._user_paused = True
            await worker.pause()

    async def cancel_request(self, request: Request) -> None:
        progress = request.arg("progressId", str, None)
        if progress is not None and progress == self._progress_id and self.state == "running" and self.worker:
            self._user_paused = True
            await self.worker.pause()

    async def restart_request(self, request: Request) -> None:
        self._need_worker()
        if self.state == "running":
            raise CantHandle("the model is running: pause it first")
        new = request.arguments.get("arguments")
        if isinstance(new, dict) and new.get("model"):
            args = self._launch_args(Request(request.seq, "launch", new))
            keys = ("model", "inputs", "dims", "providers", "skipConstants", "cwd", "reference", "tolerance", "listingPath")
            reload = any(args[k] != self.launch_args.get(k) for k in keys)
            self.launch_args.update({k: v for k, v in args.items() if k not in ("worker", "token")})
            if reload:
                await self._load()
                await self._apply_breakpoints()
                self._later(lambda: self._start_run(self._first_run()))
                return
        assert self.worker is not None
        worker = self.worker
        stop = await worker.run("restart")
        if stop.reason != "entry" or (self.launch_args["stopOnEntry"] and not self.launch_args["noDebug"]):
            self._later(lambda: self._stopped(stop))
        else:
            self._later(lambda: self._start_run(self._first_run()))

    async def terminate_request(self, request: Request) -> None:
        if self.state in ("new", "ended"):
            return
        if self.state == "running" and self.worker is not None:
            self._user_paused = True
            await self.worker.pause()
            if self._run_task is not None:
                await asyncio.wait([self._run_task], timeout=5)
        self.state = "ended"

        def ended() -> None:
            self.channel.event("exited", {"exitCode": 0})
            self.channel.event("terminated")

        self._later(ended)

    async def disconnect_request(self, request: Request) -> None:
        self._done = True
        self._later(lambda: None)

    # -- the worker -------------------------------------------------------------------

    def _worker_event(self, event: str, body: Any) -> None:
        if event == "log" and isinstance(body, dict):
            self._output(str(body.get("text", "")) + "\n", "console")
        elif event == "progress" and isinstance(body, dict):
            done, total = int(body.get("done", 0)), max(int(body.get("total", 1)), 1)
            self._progress_nodes = f"{done}/{total} nodes, "
            if self._progress_id is not None:
                self.channel.event(
                    "progressUpdate",
                    {"progressId": self._progress_id, "message": f"{done}/{total} nodes", "percentage": 100.0 * done / total},
                )

    def _worker_died(self, message: str) -> None:
        self._output(f"graph-dap: {message}\n", "stderr")
        self.channel.event(
            "output", {"category": "important", "output": "graph-dap: the runtime worker died; the session ends.\n"}
        )
        if self.state != "ended":
            self.state = "ended"
            self.stop = None
            self._progress_stop()
            self.channel.event("exited", {"exitCode": 1})
            self.channel.event("terminated")

    # -- ending -----------------------------------------------------------------------

    async def _shutdown(self) -> None:
        if self._spawning is not None:
            spawning = self._spawning
            self._spawning = None
            try:
                worker = await spawning
                await worker.close()
            except (OSError, GraphDapError):
                pass
        if self._run_task is not None and not self._run_task.done() and self.worker is not None:
            self.worker.kill()
        if self.worker is not None:
            await self.worker.close()
        if self._run_task is not None:
            self._run_task.cancel()


# -- transports ---------------------------------------------------------------------------


async def serve_stdio_async() -> None:
    """One session over this process's stdin and stdout."""
    await DebugAdapter(Channel(StdioStream())).serve()


def serve_stdio() -> None:
    asyncio.run(serve_stdio_async())


async def serve_tcp_async(host: str, port: int, ready: Callable[[int], None] | None = None, token: str | None = None) -> None:
    """Serve clients over TCP, one session after another; with ``token``, only clients that show it.

    A client yet to show the token waits for no one: it is answered (``initialize``) or
    refused while another session runs, and takes its turn once admitted.
    """
    turn = asyncio.Lock()

    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await DebugAdapter(Channel(SocketStream(reader, writer)), token=token, turn=turn).serve()

    server = await asyncio.start_server(session, host, port)
    if ready is not None:
        ready(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def serve_tcp(host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> None:
    """``graph-dap adapter --port N``: serve DAP clients on ``host:port`` one after another.

    ``port`` 0 picks a free port; the port is printed on stdout either way. With ``token``,
    a client must give it as the launch argument ``adapterToken`` (see :mod:`.access`).
    """

    def ready(bound: int) -> None:
        print(f"graph-dap adapter listening on {host}:{bound}", flush=True)

    try:
        asyncio.run(serve_tcp_async(host, port, ready, token))
    except KeyboardInterrupt:
        pass
