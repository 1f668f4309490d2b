"""The adapter's side of the worker boundary: msgpack calls to a runtime in another process.

The runtime (a :class:`~graph_dap.runtime.session.DebugSession`) runs in a worker
process, started here over pipes (``python -m graph_dap.worker``) or reached
over TCP with a token (``graph-dap worker --listen``). Tensors never cross in full:
the worker sends summaries, the slices asked for, and raw bytes as msgpack ``bin``.

Wire format, one msgpack object each:

- request ``{"id": int, "method": str, "args": {...}}``
- response ``{"id": int, "result": ...}`` or ``{"id": int, "error": {"type": str, "message": str}}``
- event ``{"event": str, "body": ...}`` (logpoint output, progress)
- over TCP the client first sends ``{"token": str}``; a wrong token gets the
  connection closed with nothing sent back.

This module imports neither numpy nor onnxruntime, so the adapter starts fast.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from graph_dap.errors import GraphDapError

PROTOCOL_VERSION = 1
_READ_SIZE = 1 << 16
_MAX_MESSAGE = 1 << 31


class WorkerError(GraphDapError):
    """The worker answered a call with an error; ``kind`` is the runtime's exception class."""

    def __init__(self, message: str, kind: str = "GraphDapError") -> None:
        super().__init__(message)
        self.kind = kind


class WorkerDied(GraphDapError):
    """The worker process ended or its connection was lost while calls were pending."""


# -- what crosses the boundary ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node of the graph as the adapter sees it (attributes already rendered as text)."""

    id: str
    index: int
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: tuple[tuple[str, str], ...]
    line: int  # 1-based line in the listing
    has_subgraphs: bool = False
    static: bool = False  # a constant node, computed at load and skipped by the run

    @property
    def label(self) -> str:
        return f"{self.id} ({self.op_type})"

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> NodeInfo:
        return cls(
            d["id"],
            d["index"],
            d["op_type"],
            d["domain"],
            tuple(d["inputs"]),
            tuple(d["outputs"]),
            tuple((k, v) for k, v in d["attributes"]),
            d["line"],
            d.get("has_subgraphs", False),
            d.get("static", False),
        )


@dataclass(frozen=True, slots=True)
class GraphInfo:
    """The loaded model: its nodes in run order, its named values, and its listing."""

    name: str
    model_path: str
    nodes: tuple[NodeInfo, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    initializers: tuple[str, ...]
    listing: str
    listing_path: str | None  # where the listing was written beside the model, if it was
    value_names: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()  # of the expression language, for completions

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> GraphInfo:
        return cls(
            d["name"],
            d["model_path"],
            tuple(NodeInfo.from_wire(n) for n in d["nodes"]),
            tuple(d["inputs"]),
            tuple(d["outputs"]),
            tuple(d["initializers"]),
            d["listing"],
            d.get("listing_path"),
            tuple(d.get("value_names", ())),
            tuple(d.get("functions", ())),
        )


@dataclass(frozen=True, slots=True)
class StopInfo:
    """Why and where the run stopped.

    ``node`` is what the stop is about (for nan/inf/mismatch the node that produced it,
    which has run); ``pc`` is the node to run next (None at the end).
    """

    reason: str  # entry, breakpoint, nan, inf, error, mismatch, step, pause, goto, end
    node: str | None
    pc: str | None
    last_node: str | None
    tensor: str | None = None
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    breakpoint_ids: tuple[int, ...] = ()

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> StopInfo:
        return cls(
            d["reason"],
            d.get("node"),
            d.get("pc"),
            d.get("last_node"),
            d.get("tensor"),
            d.get("message", ""),
            dict(d.get("details") or {}),
            tuple(d.get("breakpoint_ids") or ()),
        )


@dataclass(frozen=True, slots=True)
class Summary:
    """A value's one-line summary and statistics, as the worker computed them."""

    name: str
    text: str
    type: str  # "tensor(float)"
    dtype: str
    shape: tuple[int, ...]
    size: int
    stats: tuple[tuple[str, str], ...] = ()  # ("min", "-3.2"), ... for the statistics children
    stale: bool = False
    available: bool = True  # False: not computed yet
    kind: str = "tensor"
    scalar: str | None = None  # the element itself when there is one

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Summary:
        return cls(
            d["name"],
            d["text"],
            d["type"],
            d["dtype"],
            tuple(d["shape"]),
            d["size"],
            tuple((k, v) for k, v in d.get("stats", ())),
            d.get("stale", False),
            d.get("available", True),
            d.get("kind", "tensor"),
            d.get("scalar"),
        )


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """The runtime's answer for one breakpoint spec."""

    id: int
    verified: bool
    message: str = ""
    nodes: tuple[str, ...] = ()

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Breakpoint:
        return cls(d["id"], d["verified"], d.get("message", ""), tuple(d.get("nodes", ())))


# -- the connection -----------------------------------------------------------------------

EventHandler = Callable[[str, Any], None]


class WorkerClient:
    """Calls into one worker; events and stderr lines go to the callbacks given."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        process: asyncio.subprocess.Process | None = None,
        where: str = "the worker",
        unpacker: msgpack.Unpacker | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.process = process
        self.where = where
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._packer = msgpack.Packer(use_bin_type=True)
        self._closing = False
        self._backlog: list[str] = []  # stderr lines from before attach()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self.on_event: EventHandler = lambda event, body: None
        self.on_stderr: Callable[[str], None] = self._backlog.append
        self.on_death: Callable[[str], None] = lambda message: None
        self.dead: str | None = None  # why the worker is gone, once it is
        self._unpacker = unpacker or msgpack.Unpacker(raw=False, max_buffer_size=_MAX_MESSAGE)
        self._tasks = [asyncio.ensure_future(self._read_loop())]
        if process is not None and process.stderr is not None:
            self._tasks.append(asyncio.ensure_future(self._stderr_loop(process.stderr)))

    def attach(self, on_event: EventHandler, on_stderr: Callable[[str], None], on_death: Callable[[str], None]) -> None:
        """Take the worker's events; stderr lines written before now are passed on first."""
        self.on_event, self.on_stderr, self.on_death = on_event, on_stderr, on_death
        backlog, self._backlog = self._backlog, []
        for line in backlog:
            on_stderr(line)
        if self.dead is not None:
            on_death(self.dead)

    # -- starting ------------------------------------------------------------------------

    @classmethod
    async def spawn(cls, python: str = sys.executable, env: dict[str, str] | None = None) -> WorkerClient:
        """Start ``python -m graph_dap.worker`` with pipes to talk to it."""
        environment = dict(os.environ if env is None else env)
        root = str(Path(__file__).resolve().parents[2])
        environment["PYTHONPATH"] = os.pathsep.join(p for p in (root, environment.get("PYTHONPATH", "")) if p)
        environment.setdefault("PYTHONUNBUFFERED", "1")
        process = await asyncio.create_subprocess_exec(
            python,
            "-m",
            "graph_dap.worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment,
            limit=_READ_SIZE,
        )
        assert process.stdin is not None and process.stdout is not None
        return cls(process.stdout, process.stdin, process, where=f"the worker process (pid {process.pid})")

    @classmethod
    async def connect(cls, address: str, token: str, timeout: float = 10.0) -> WorkerClient:
        """Reach a worker started with ``graph-dap worker --listen HOST:PORT --token TOKEN``."""
        host, port = parse_address(address)
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (TimeoutError, OSError) as error:
            raise WorkerDied(f"cannot reach the worker at {address}: {error or 'timed out'}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        writer.write(msgpack.packb({"token": token, "version": PROTOCOL_VERSION}, use_bin_type=True))
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=_MAX_MESSAGE)
        try:
            while True:
                data = await asyncio.wait_for(reader.read(_READ_SIZE), timeout)
                if not data:
                    raise WorkerDied(f"the worker at {address} refused the connection (wrong token?)")
                unpacker.feed(data)
                for hello in unpacker:
                    if not (isinstance(hello, dict) and hello.get("hello") == "graph-dap-worker"):
                        raise WorkerDied(f"{address} is not a graph-dap worker")
                    # Bytes that came with the hello stay in the unpacker for the read loop.
                    return cls(reader, writer, None, f"the worker at {address}", unpacker)
        except TimeoutError:
            writer.close()
            raise WorkerDied(f"the worker at {address} did not answer in {timeout:g} s") from None
        except WorkerDied:
            writer.close()
            raise

    # -- calling -------------------------------------------------------------------------

    async def call(self, method: str, **args: Any) -> Any:
        """Send one request and wait for its result; raises WorkerError or WorkerDied."""
        if self.dead is not None:
            raise WorkerDied(self.dead)
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._writer.write(self._packer.pack({"id": request_id, "method": method, "args": args}))
        except (ConnectionError, RuntimeError) as error:
            self._pending.pop(request_id, None)
            raise WorkerDied(f"{self.where} is gone: {error}") from None
        try:
            return await future
        finally:
            self._pending.pop(request_id, None)

    # Typed calls, one per worker method that returns more than plain data.

    async def load(self, **args: Any) -> GraphInfo:
        return GraphInfo.from_wire(await self.call("load", **args))

    async def start(self) -> StopInfo:
        return StopInfo.from_wire(await self.call("start"))

    async def run(self, command: str, target: str | None = None, iterations: int = 1) -> StopInfo:
        args: dict[str, Any] = {"command": command, "target": target}
        if iterations != 1:
            args["iterations"] = iterations
        return StopInfo.from_wire(await self.call("run", **args))

    async def pause(self) -> bool:
        return bool((await self.call("pause"))["paused"])

    async def set_breakpoints(self, specs: list[dict[str, Any]]) -> list[Breakpoint]:
        return [Breakpoint.from_wire(b) for b in await self.call("set_breakpoints", specs=specs)]

    async def summaries(self, names: list[str], hex: bool = False) -> list[Summary]:
        return [Summary.from_wire(s) for s in await self.call("summaries", names=names, hex=hex)]

    async def _read_loop(self) -> None:
        unpacker = self._unpacker
        try:
            while True:
                for message in unpacker:
                    self._dispatch(message)
                data = await self._reader.read(_READ_SIZE)
                if not data:
                    break
                unpacker.feed(data)
        except (ConnectionError, OSError, ValueError, msgpack.UnpackException) as error:
            self.stderr_tail.append(f"(connection error: {error})")
        await self._lost()

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        if "event" in message:
            self.on_event(message["event"], message.get("body"))
            return
        future = self._pending.get(message.get("id", -1))
        if future is None or future.done():
            return
        error = message.get("error")
        if error is not None:
            future.set_exception(WorkerError(error.get("message", "worker error"), error.get("type", "")))
        else:
            future.set_result(message.get("result"))

    async def _stderr_loop(self, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await stream.readline()
            except (ValueError, OSError):  # a line longer than the limit, or a closed pipe
                continue
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip("\n")
            self.stderr_tail.append(text)
            self.on_stderr(text)

    async def _lost(self) -> None:
        if self._closing:
            message = f"{self.where} was closed"
        else:
            message = await self._death_message()
        self.dead = message
        for future in self._pending.values():
            if not future.done():
                future.set_exception(WorkerDied(message))
        if not self._closing:
            self.on_death(message)

    async def _death_message(self) -> str:
        if self.process is None:
            return f"the connection to {self.where} was lost"
        try:
            code = await asyncio.wait_for(self.process.wait(), 2.0)
        except TimeoutError:
            return f"{self.where} stopped answering"
        if len(self._tasks) > 1:  # let the last stderr lines arrive
            try:
                await asyncio.wait_for(asyncio.shield(self._tasks[1]), 1.0)
            except TimeoutError:
                pass
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how = f"was killed by {name}"
            if -code == signal.SIGKILL:
                how += " (out of memory, or killed from outside)"
            elif -code == signal.SIGSEGV:
                how += " (a segmentation fault)"
        else:
            how = f"exited with code {code}"
        tail = [line for line in self.stderr_tail if line.strip()][-5:]
        return f"{self.where} {how}" + ("; its last words:\n" + "\n".join(tail) if tail else "")

    # -- ending --------------------------------------------------------------------------

    async def close(self, timeout: float = 2.0) -> None:
        """Ask the worker to end, then make sure it does (killed after ``timeout``)."""
        if self._closing:
            return
        self._closing = True
        if self.dead is None:
            try:
                self._writer.write(self._packer.pack({"id": 0, "method": "shutdown", "args": {}}))
            except (ConnectionError, RuntimeError):
                pass
        try:
            self._writer.close()
        except (ConnectionError, RuntimeError):
            pass
        if self.process is not None:
            try:
                await asyncio.wait_for(self.process.wait(), timeout)
            except TimeoutError:
                self.kill()
                await self.process.wait()
        for task in self._tasks:
            try:
                await asyncio.wait_for(task, timeout)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()

    def kill(self) -> None:
        """Kill a local worker at once (it may be stuck in native code)."""
        if self.process is not None and self.process.returncode is None:
            try:
                self.process.kill()
            except ProcessLookupError:
                pass


def parse_address(address: str) -> tuple[str, int]:
    """``"HOST:PORT"`` (or ``"[v6]:PORT"``, or just ``"PORT"`` for 127.0.0.1) as a pair."""
    host, sep, port = address.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", address
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise GraphDapError(f"bad worker address {address!r}: expected HOST:PORT")
    return host, int(port)
