"""What every group of request handlers shares: the session's state, in small objects, and small helpers.

The handlers live in ``session_handlers.py`` (lifecycle: initialize, launch, restart,
terminate), ``run_handlers.py`` (continue, step, goto, pause), ``breakpoint_handlers.py``,
``inspect_handlers.py`` and ``custom_handlers.py``; each is a mixin over
:class:`AdapterCore`, and :class:`~graph_dap.adapter.server.DebugAdapter` puts them together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from graph_dap.adapter.access import TokenGate, Turn
from graph_dap.adapter.breakpoints import BreakFilters, BreakpointBook, Wanted
from graph_dap.adapter.launch import LaunchArgs
from graph_dap.adapter.listing import ListingSource
from graph_dap.adapter.progress import Progress
from graph_dap.adapter.protocol import Channel, Message
from graph_dap.adapter.requests import CantHandle, InvalidRequest, Request
from graph_dap.adapter.sources import SourceFiles
from graph_dap.adapter.state import ClientInfo, Phase, RunState
from graph_dap.adapter.variables import VariableState
from graph_dap.kinds import BreakFilter, StopReason
from graph_dap.worker.client import WorkerClient
from graph_dap.worker.protocol import BreakOnArgs, GraphInfo, NodeInfo, NodeSourceInfo, RunCommand

T = TypeVar("T")

THREAD_ID = 1
FRAME_ID = 1
#: Frame ids of the Python (or module) frames under the node: SOURCE_FRAME_ID + k, k = 0 the innermost.
SOURCE_FRAME_ID = 1 << 20
EXCEPTION_FILTERS: list[dict[str, Any]] = [
    {
        "filter": BreakFilter.NAN,
        "label": "NaN",
        "description": "Break when a node's output holds NaN.",
        "default": False,
        "supportsCondition": True,
        "conditionDescription": "Nodes whose NaN is expected, comma-separated: op:Softmax, *guarded*",
    },
    {
        "filter": BreakFilter.INF,
        "label": "Inf",
        "description": "Break when a node's output holds +Inf or -Inf.",
        "default": False,
        "supportsCondition": True,
        "conditionDescription": "Nodes whose Inf is expected, comma-separated: op:Where, *mask*",
    },
    {"filter": BreakFilter.ERROR, "label": "Node errors", "description": "Break when onnxruntime fails on a node.", "default": True},
    {
        "filter": BreakFilter.MISMATCH,
        "label": "Mismatch with reference",
        "description": "Break at the first divergence from the launch's 'reference': the node whose outputs break the "
        "tolerance while its inputs are within it. Needs 'reference'; with one, runs go node by node (slower).",
        "default": False,
    },
]
EXCEPTION_NAMES = {StopReason.NAN: "NaN", StopReason.INF: "Inf", StopReason.ERROR: "NodeExecutionError", StopReason.MISMATCH: "Mismatch"}
#: Stops about a node that has run (its outputs are the problem): the frame shows that node.
AFTER_NODE = (StopReason.NAN, StopReason.INF, StopReason.MISMATCH)
#: Runs that a configuration change may interrupt (pause, apply, resume): all may take long.
RESUMABLE = {
    RunCommand.CONTINUE: RunCommand.RESUME,
    RunCommand.RESUME: RunCommand.RESUME,
    RunCommand.STEP_OUT: RunCommand.RESUME,
    RunCommand.REVERSE_CONTINUE: RunCommand.REVERSE_CONTINUE,
    RunCommand.TO_END: RunCommand.TO_END,
}
WorkerFactory = Callable[[], Awaitable[WorkerClient]]


@dataclass(frozen=True, slots=True)
class Handover:
    """What a program launch's session takes over from the adapter that answered ``initialize``."""

    channel: Channel
    client: ClientInfo
    initialize: dict[str, Any]  # the client's initialize arguments, as it sent them
    spawn_worker: WorkerFactory
    later: Callable[[Callable[[], None]], None]  # do an action right after the current response
    end: Callable[[], None]  # the session is over: the adapter reads no more requests
    drop_worker: Callable[[], None]  # close the worker started at initialize (the program's session starts its own)


class ProgramSession(Protocol):
    """A program launch's session (mixed mode): it answers every request after the launch."""

    async def handle(self, request: Request) -> dict[str, Any] | None:
        """Answer one request: its body, or an error (a RequestError) that the adapter turns into ``success: false``."""
        ...

    def client_response(self, message: Message) -> None:
        """The client's response to a reverse request the session sent."""
        ...

    async def close(self) -> None:
        """End it all (the debuggee, its workers)."""
        ...


class Programs(Protocol):
    """Where a plain adapter hands a program launch (``program`` or ``module``): mixed mode, given by the transports.

    (An argument, not an import: mixed mode is built on the plain adapter, which knows nothing of it.)
    """

    def initialize(self, body: dict[str, Any]) -> None:
        """Add to the ``initialize`` answer what a program launch will need (debugpy's exception filters)."""
        ...

    async def launch(self, request: Request, handover: Handover) -> ProgramSession:
        """Start the program's session: it answers every later request (InvalidRequest, UserError... when it cannot)."""
        ...


class Deferred:
    """What a handler returns to be answered later: the request loop goes on, and ``work``'s result is the body."""

    def __init__(self, what: str, work: Coroutine[Any, Any, dict[str, Any] | None]) -> None:
        self.what = what  # what the worker is busy with meanwhile, for other requests' refusals
        self.work = work


class AdapterCore:
    """One DAP session's state; ends at ``disconnect`` or when the stream ends."""

    def __init__(
        self,
        channel: Channel,
        spawn_worker: WorkerFactory = WorkerClient.spawn,
        token: str | None = None,
        turn: asyncio.Lock | None = None,
        programs: Programs | None = None,
    ) -> None:
        """A session on ``channel``; ``token``: what its client must show (``adapterToken``) first.

        ``turn``: a lock held while the session runs, from when its client is admitted (one at a time).
        ``programs``: where a program launch goes (without it, every launch is a model's).
        """
        self.channel = channel
        self.gate = TokenGate(token)
        self.turn = Turn(turn)
        self._spawn_worker = spawn_worker
        self._spawning: asyncio.Future[WorkerClient] | None = None  # the local worker started at initialize
        self.worker: WorkerClient | None = None
        self.client: ClientInfo | None = None  # once initialized
        self.initialize_arguments: dict[str, Any] = {}
        self.programs = programs
        self.program: ProgramSession | None = None  # once a program is launched: it answers every request
        self.launch: LaunchArgs | None = None  # once launched
        self.graph: GraphInfo | None = None  # once loaded
        self.listing: ListingSource | None = None
        self._source_refs = 0
        self.run = RunState()
        self.breakpoints = BreakpointBook()
        self.filters = BreakFilters()
        self.variables = VariableState()
        self.progress = Progress(channel)
        self._goto_targets: dict[int, str] = {}
        self.source_files: tuple[GraphInfo, SourceFiles] | None = None  # the loaded model's Python files here
        self.node_source: tuple[object, NodeSourceInfo] | None = None  # (the stop, the source of its frame 0's node)
        self._after: list[Callable[[], None]] = []
        self._done = False
        self.busy: asyncio.Task[None] | None = None  # a request answered in the background (a profile)
        self._busy_with = ""

    def _in_background(self, what: str, work: Coroutine[Any, Any, dict[str, Any] | None]) -> Deferred:
        """Answer this request when ``work`` ends, without holding the request loop (see ``dispatch``)."""
        return Deferred(what, work)

    def _later(self, action: Callable[[], None]) -> None:
        """Do ``action`` right after this request's response is sent."""
        self._after.append(action)

    def _finish(self) -> None:
        """The session is over: no request is read after this one."""
        self._done = True

    # -- small helpers ----------------------------------------------------------------

    def _output(self, text: str, category: str = "console") -> None:
        self.channel.event("output", {"category": category, "output": text})

    @property
    def _client(self) -> ClientInfo:
        return self.client or ClientInfo()

    def _line_out(self, line: int) -> int:
        return line if self._client.lines_start_at1 else line - 1

    def _line_in(self, line: int) -> int:
        return line if self._client.lines_start_at1 else line + 1

    @property
    def has_reference(self) -> bool:
        """Whether the launch names a reference to compare with."""
        return self.launch is not None and self.launch.reference is not None

    def _need_worker(self) -> WorkerClient:
        if self.worker is None or self.graph is None:
            raise CantHandle("no model is loaded: launch first")
        if self.worker.dead is not None:
            raise CantHandle(f"the runtime worker is gone: {self.worker.dead}")
        if self.busy is not None and not self.busy.done():
            raise CantHandle(f"the runtime is busy {self._busy_with}: wait for its answer")
        return self.worker

    def _need_idle(self) -> WorkerClient:
        """The worker, for a request that needs a model loaded and not running."""
        worker = self._need_worker()
        if self.run.running:
            raise CantHandle("the model is running: pause it first")
        return worker

    def _need_stopped(self) -> WorkerClient:
        worker = self._need_idle()
        if self.run.phase is not Phase.STOPPED or self.run.stop is None:
            raise CantHandle("the model is not stopped" + (" (the run has ended)" if self.run.phase is Phase.ENDED else ""))
        return worker

    def _thread(self, request: Request) -> None:
        thread = request.arg("threadId", int)
        if thread != THREAD_ID:
            raise InvalidRequest(f"unknown thread {thread}: the model run is thread {THREAD_ID}")

    def _frame_node(self, level: int = 0) -> NodeInfo | None:
        """The node a frame shows: at level 0 the one a nan/inf/mismatch came from, else the next to run;
        at an outer level the control-flow node that level is running."""
        stop = self.run.stop
        assert self.listing is not None and stop is not None
        if level == 0:
            nid = stop.node_id if stop.reason in AFTER_NODE else stop.current
        else:
            nid = stop.frames[level].node if level < len(stop.frames) else None
        return self.listing.nodes.get(nid) if nid else None

    def _level(self, frame_id: int) -> int:
        """The level of the program counter a frame id names (frame ids are levels from ``FRAME_ID`` up)."""
        stop = self.run.stop
        levels = max(len(stop.frames), 1) if stop is not None else 1
        source = self.node_source
        if source is not None and source[0] is stop and 0 <= frame_id - SOURCE_FRAME_ID < len(source[1].frames):
            return 0  # a Python frame of the node at level 0: its values are that level's
        if not FRAME_ID <= frame_id < FRAME_ID + levels:
            raise InvalidRequest(f"unknown frameId {frame_id}")
        return frame_id - FRAME_ID

    # -- the configuration, sent to the worker ----------------------------------------

    async def _configure(self, change: Callable[[], Awaitable[T]]) -> T:
        """Make a change now, or, while a run goes on, between a pause and its resumption."""
        run = self.run
        if not run.in_flight:
            return await change()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        run.updates.append((change, future))
        if run.command in RESUMABLE and not run.interrupting:
            run.interrupting = True
            assert self.worker is not None
            await self.worker.pause()
        result: T = await future
        return result

    async def _apply_breakpoints(self) -> None:
        """Send every breakpoint to the runtime (pausing a run for it) and take its verdicts."""
        if self.worker is None or self.graph is None:
            return
        worker = self._need_worker()
        specs = self.breakpoints.specs()
        results = await self._configure(lambda: worker.set_breakpoints(specs))
        self.breakpoints.resolve(results)

    def _line_bodies(self, wanted: list[Wanted], source: dict[str, Any] | None) -> list[dict[str, Any]]:
        """The DAP ``Breakpoint`` of each line breakpoint, its line in the client's numbering."""
        bodies = []
        for w in wanted:
            body = self.breakpoints.body(w, source)
            if "line" in body:
                body["line"] = self._line_out(body["line"])
            bodies.append(body)
        return bodies

    async def _apply_filters(self) -> None:
        """Send the exception filters to the runtime (pausing a run for it)."""
        if self.worker is None or self.graph is None:
            return
        worker = self._need_worker()
        args = self.break_on_args()
        await self._configure(lambda: worker.set_break_on(args))

    def break_on_args(self) -> BreakOnArgs:
        """What the worker's filters are: the client's (setExceptionBreakpoints) and the launch's (``breakOn``, ``infExclude``, ``nanExclude``)."""
        launch = self.launch
        return self.filters.worker_args(
            self.has_reference, launch.break_on if launch else (), launch.inf_exclude if launch else (), launch.nan_exclude if launch else ()
        )
