"""What every group of request handlers shares: the session's state and small helpers.

The handlers themselves live in ``server.py`` (lifecycle and runs),
``breakpoint_handlers.py`` and ``inspect_handlers.py``; each is a mixin over
:class:`AdapterCore`, and :class:`~graph_dap.adapter.server.DebugAdapter` puts them together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from graph_dap.adapter.access import TokenGate
from graph_dap.adapter.breakpoints import BreakpointBook
from graph_dap.adapter.listing import ListingSource
from graph_dap.adapter.protocol import Channel
from graph_dap.adapter.requests import CantHandle, InvalidRequest, Request
from graph_dap.adapter.variables import Handles
from graph_dap.worker.client import GraphInfo, NodeInfo, StopInfo, WorkerClient

T = TypeVar("T")

THREAD_ID = 1
FRAME_ID = 1
EXCEPTION_FILTERS: list[dict[str, Any]] = [
    {"filter": "nan", "label": "NaN", "description": "Break when a node's output holds NaN.", "default": False},
    {
        "filter": "inf",
        "label": "Inf",
        "description": "Break when a node's output holds +Inf or -Inf.",
        "default": False,
        "supportsCondition": True,
        "conditionDescription": "Nodes whose Inf is expected, comma-separated: op:Where, *mask*",
    },
    {"filter": "error", "label": "Node errors", "description": "Break when onnxruntime fails on a node.", "default": True},
    {
        "filter": "mismatch",
        "label": "Mismatch with reference",
        "description": "Break at the first divergence from the launch's 'reference': the node whose outputs break the "
        "tolerance while its inputs are within it. Needs 'reference'; with one, runs go node by node (slower).",
        "default": False,
    },
]
EXCEPTION_NAMES = {"nan": "NaN", "inf": "Inf", "error": "NodeExecutionError", "mismatch": "Mismatch"}
#: Stops about a node that has run (its outputs are the problem): the frame shows that node.
AFTER_NODE = ("nan", "inf", "mismatch")
#: Runs that a configuration change may interrupt (pause, apply, resume): all may take long.
RESUMABLE = {
    "continue": "resume",
    "resume": "resume",
    "step_out": "resume",
    "reverse_continue": "reverse_continue",
    "to_end": "to_end",
}
PROGRESS_DELAY = 0.5  # seconds a run goes before it shows progress
WorkerFactory = Callable[[], Awaitable[WorkerClient]]


class AdapterCore:
    """One DAP session's state; ends at ``disconnect`` or when the stream ends."""

    def __init__(
        self,
        channel: Channel,
        spawn_worker: WorkerFactory = WorkerClient.spawn,
        token: str | None = None,
        turn: asyncio.Lock | None = None,
    ) -> None:
        """A session on ``channel``; ``token``: what its client must show (``adapterToken``) first.

        ``turn``: a lock held while the session runs, from when its client is admitted (one at a time).
        """
        self.channel = channel
        self.gate = TokenGate(token)
        self._turn = turn
        self._has_turn = False
        self._spawn_worker = spawn_worker
        self._spawning: asyncio.Future[WorkerClient] | None = None
        self.worker: WorkerClient | None = None
        self.client: dict[str, Any] = {}
        self.launch_args: dict[str, Any] = {}
        self.graph: GraphInfo | None = None
        self.listing: ListingSource | None = None
        self._source_refs = 0
        self.state = "new"  # new, configuring, running, stopped, ended
        self.stop: StopInfo | None = None
        self.breakpoints = BreakpointBook()
        self._filters: list[str] = ["error"]
        self._inf_exclude: list[str] = []
        self.handles: Handles[Any] = Handles()
        self.memory: Handles[Any] = Handles()
        self._settable: dict[str, tuple[str, tuple[int, ...]]] = {}  # evaluateName -> value, index
        self._values: list[str] | None = None  # computed values at this stop
        self._goto_targets: dict[int, str] = {}
        self._after: list[Callable[[], None]] = []
        self._run_task: asyncio.Task[None] | None = None
        self._run_command = ""
        self._updates: list[tuple[Callable[[], Awaitable[Any]], asyncio.Future[Any]]] = []
        self._interrupting = False
        self._user_paused = False
        self._progress_id: str | None = None
        self._progress_timer: asyncio.TimerHandle | None = None
        self._progress_count = 0
        self._progress_began = 0.0
        self._progress_nodes = ""
        self._done = False

    def _later(self, action: Callable[[], None]) -> None:
        """Do ``action`` right after this request's response is sent."""
        self._after.append(action)

    # -- small helpers ----------------------------------------------------------------

    def _output(self, text: str, category: str = "console") -> None:
        self.channel.event("output", {"category": category, "output": text})

    def _line_out(self, line: int) -> int:
        return line if self.client.get("linesStartAt1", True) else line - 1

    def _line_in(self, line: int) -> int:
        return line if self.client.get("linesStartAt1", True) else line + 1

    def _need_worker(self) -> WorkerClient:
        if self.worker is None or self.graph is None:
            raise CantHandle("no model is loaded: launch first")
        if self.worker.dead is not None:
            raise CantHandle(f"the runtime worker is gone: {self.worker.dead}")
        return self.worker

    def _need_idle(self) -> WorkerClient:
        """The worker, for a request that needs a model loaded and not running."""
        worker = self._need_worker()
        if self.state == "running":
            raise CantHandle("the model is running: pause it first")
        return worker

    def _need_stopped(self) -> WorkerClient:
        worker = self._need_idle()
        if self.state != "stopped" or self.stop is None:
            raise CantHandle("the model is not stopped" + (" (the run has ended)" if self.state == "ended" else ""))
        return worker

    def _thread(self, request: Request) -> None:
        thread = request.arg("threadId", int)
        if thread != THREAD_ID:
            raise InvalidRequest(f"unknown thread {thread}: the model run is thread {THREAD_ID}")

    def _worker_filters(self) -> list[str]:
        """The enabled filters the worker can honour (mismatch only with a reference): the client's and the launch's ``breakOn``."""
        enabled = dict.fromkeys([*self._filters, *self.launch_args.get("breakOn", [])])
        return [f for f in enabled if f != "mismatch" or self.launch_args.get("reference")]

    def _worker_inf_exclude(self) -> list[str]:
        """Nodes whose Inf is expected: the inf filter's condition and the launch's ``infExclude``."""
        return list(dict.fromkeys([*self._inf_exclude, *self.launch_args.get("infExclude", [])]))

    def _frame_node(self) -> NodeInfo | None:
        """The node the top frame shows: the one a nan/inf/mismatch came from, else the next to run."""
        assert self.listing is not None and self.stop is not None
        nid = self.stop.node if self.stop.reason in AFTER_NODE else self.stop.pc
        return self.listing.nodes.get(nid) if nid else None

    async def _configure(self, change: Callable[[], Awaitable[T]]) -> T:
        """Make a change now, or, while a run goes on, between a pause and its resumption."""
        if self._run_task is None or self._run_task.done():
            return await change()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._updates.append((change, future))
        if self._run_command in RESUMABLE and not self._interrupting:
            self._interrupting = True
            assert self.worker is not None
            await self.worker.pause()
        return await future

    # -- progress ---------------------------------------------------------------------

    def _progress_start(self, title: str, cancellable: bool = False) -> str | None:
        if not self.client.get("supportsProgressReporting"):
            return None
        self._progress_count += 1
        progress = f"graph-dap-{self._progress_count}"
        self.channel.event("progressStart", {"progressId": progress, "title": title, "cancellable": cancellable})
        return progress

    def _progress_end(self, progress: str | None) -> None:
        if progress is not None:
            self.channel.event("progressEnd", {"progressId": progress})

    def _run_progress_start(self) -> None:
        self._progress_timer = None
        if self.state == "running":
            self._progress_id = self._progress_start("Running the model", cancellable=True)
            self._progress_began = asyncio.get_running_loop().time() - PROGRESS_DELAY
            self._progress_tick()

    def _progress_tick(self) -> None:
        """Say how long the run has gone on, every second (segments report no nodes meanwhile)."""
        if self._progress_id is None:
            return
        loop = asyncio.get_running_loop()
        elapsed = loop.time() - self._progress_began
        message = f"{self._progress_nodes}running for {elapsed:.0f} s"
        self.channel.event("progressUpdate", {"progressId": self._progress_id, "message": message})
        self._progress_timer = loop.call_later(1.0, self._progress_tick)

    def _progress_stop(self) -> None:
        self._progress_nodes = ""
        if self._progress_timer is not None:
            self._progress_timer.cancel()
            self._progress_timer = None
        self._progress_end(self._progress_id)
        self._progress_id = None
