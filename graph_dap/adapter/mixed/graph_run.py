"""One debugged ``run`` call: a plain graph-dap session (:class:`~graph_dap.adapter.server.DebugAdapter`) in memory,
on a worker of its own.

The mixed session drives it as a client would, through :attr:`GraphRun.peer`: ``initialize``,
``launch`` (the call's model and feeds, the program's providers and optimization level), the
graph breakpoints and filters, ``configurationDone``; then it forwards the client's requests
for the run's graph thread. What the graph session sends (responses, events) comes back
through an in-memory :class:`MemoryChannel`. Its thread is always 1 in there; the client
sees :attr:`GraphRun.thread_id`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from graph_dap.adapter.core import WorkerFactory
from graph_dap.adapter.peer import DapPeer
from graph_dap.adapter.protocol import Channel, Message
from graph_dap.adapter.requests import CantHandle
from graph_dap.adapter.server import DebugAdapter
from graph_dap.host import protocol as hp
from graph_dap.worker import protocol as wp
from graph_dap.worker.client import WorkerClient


class _NoStream:
    """The byte stream a :class:`MemoryChannel` never uses."""

    async def read(self) -> bytes:
        return b""

    def write(self, data: bytes) -> None:
        pass

    async def close(self) -> None:
        pass


class MemoryChannel(Channel):
    """A channel whose messages are Python objects: requests in through :meth:`put`, everything out to ``deliver``."""

    def __init__(self, deliver: Callable[[Message], None]) -> None:
        super().__init__(_NoStream())
        self._deliver = deliver
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._in_seq = 0

    def put(self, message: Message | None) -> None:
        """A message for the session, numbered here (None: the stream ends, the session shuts down)."""
        if message is not None:
            self._in_seq += 1
            message["seq"] = self._in_seq
        self._queue.put_nowait(message)

    async def receive(self) -> Message | None:  # type: ignore[override]
        if self.closed:
            return None
        return await self._queue.get()

    def send(self, message: Message) -> None:
        if self.closed:
            return
        self._seq += 1
        message["seq"] = self._seq
        self._deliver(message)

    async def close(self) -> None:
        self.closed = True


class GraphRun:
    """The graph session of call ``call`` (host request ``request``), run ``number`` of the mixed session."""

    def __init__(
        self,
        number: int,
        request: int,
        call: hp.RunCall,
        model_name: str,
        on_event: Callable[[GraphRun, Message], None],
        spawn_worker: WorkerFactory,
    ) -> None:
        self.number = number
        self.host_request = request
        self.call = call
        self.model_name = model_name
        self.thread_id = 0  # the client's id of the graph thread (set by the mixed session)
        self.shown = False  # the client has seen it (its first stop)
        self.stopped = False
        self.last_stop: dict[str, Any] | None = None  # the client's stopped body of its last stop
        self.ended = False
        self.failed = False
        self.breakpoint_ids: dict[int, int] = {}  # the graph session's breakpoint ids -> the client's
        self.last_error: str | None = None  # the description of its last stop, when that was a node error
        self.continued_from_error: str | None = None  # that description, once the client continued from it
        self.channel = MemoryChannel(lambda message: self.peer.received(message))
        self.peer = DapPeer(self.channel.put, self.name, lambda message: on_event(self, message))
        self.adapter = DebugAdapter(self.channel, spawn_worker=spawn_worker)
        self._task = asyncio.ensure_future(self.adapter.serve())

    @property
    def name(self) -> str:
        """The graph thread's name: ``graph: model.onnx, run #12``."""
        return f"graph: {self.model_name}, run #{self.call.call}"

    async def request(self, command: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """A request to the graph session: its body, or the :class:`~graph_dap.adapter.peer.Refused` its failure says."""
        if self.ended:
            raise CantHandle(f"{self.name} has ended")
        return await self.peer.request(command, arguments or {})

    async def save_outputs(self, path: str) -> tuple[str, ...]:
        """Write the outputs the graph reached to ``path``; the names it could not (not tensors, not computed)."""
        worker = self.adapter.worker
        if worker is None or worker.dead is not None:
            raise CantHandle(f"{self.name}: the runtime worker is gone")
        saved = await worker.save_outputs(wp.SaveOutputsArgs(path))
        return saved.missing

    def detach_worker(self) -> WorkerClient | None:
        """Take the worker from a session whose run has ended (it is not closed with it), for another run."""
        worker = self.adapter.worker
        if worker is None or worker.dead is not None or self.adapter.run.in_flight:
            return None
        self.adapter.worker = None
        return worker

    async def close(self) -> None:
        """End the graph session (its worker closed, unless detached)."""
        self.ended = True
        self.channel.put(None)
        try:
            await asyncio.wait_for(self._task, 10)
        except (TimeoutError, asyncio.CancelledError):
            self._task.cancel()
        self.peer.end(f"{self.name} has ended")


def outputs_path(folder: str, run: GraphRun) -> str:
    """Where a run's outputs go for the host."""
    return os.path.join(folder, f"outputs-{run.number}.npz")
