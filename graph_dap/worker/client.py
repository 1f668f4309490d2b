"""The adapter's side of the worker boundary: typed calls to a runtime in another process.

The runtime (a :class:`~graph_dap.runtime.session.DebugSession`) runs in a worker
process, started here over pipes (``python -m graph_dap.worker``) or reached
over TCP with a token (``graph-dap worker --listen``). Tensors never cross in full:
the worker sends summaries, the slices asked for, and raw bytes as msgpack ``bin``.
Each call is one method here, taking the call's arguments dataclass and returning its
result dataclass (:mod:`graph_dap.worker.protocol` defines both, and the envelopes); an
error the worker answers is raised again here as the same :mod:`graph_dap.errors` class.

This module imports neither numpy nor onnxruntime, so the adapter starts fast.
"""

from __future__ import annotations

import asyncio
import collections
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgpack

from graph_dap.errors import ProtocolError, WorkerDied, error_of_kind
from graph_dap.worker import protocol as p
from graph_dap.worker import spawn

__all__ = ["WorkerAhead", "WorkerClient", "WorkerDied"]

_READ_SIZE = 1 << 16
_MAX_MESSAGE = 1 << 31
A = TypeVar("A")
R = TypeVar("R")


class _Started:
    """A :class:`subprocess.Popen` seen as the :class:`asyncio.subprocess.Process` the client uses."""

    def __init__(self, popen: subprocess.Popen[bytes], stderr: asyncio.StreamReader) -> None:
        self._popen, self.stderr, self.pid = popen, stderr, popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def kill(self) -> None:
        self._popen.kill()

    async def wait(self) -> int:
        while (code := self._popen.poll()) is None:
            await asyncio.sleep(0.01)
        return code


class WorkerAhead:
    """A local worker started before a session asks for one (its imports of numpy, onnx and onnxruntime
    done by then): the adapter on stdio starts it first thing, the TCP adapter for its next client."""

    def __init__(self, popen: subprocess.Popen[bytes] | None = None) -> None:
        self._popen = popen

    def fill(self) -> None:
        """Start one, unless one is waiting already."""
        if self._popen is None or self._popen.poll() is not None:
            try:
                self._popen = spawn.start()
            except OSError:
                self._popen = None  # the session spawns its own, and says why it cannot

    async def worker(self) -> WorkerClient:
        """The worker started ahead (when it is still up), else a new one: a session's worker factory."""
        popen, self._popen = self._popen, None
        if popen is not None and popen.poll() is None:
            return await WorkerClient.adopt(popen)
        return await WorkerClient.spawn()

    def close(self) -> None:
        """Kill and reap the one never taken."""
        popen, self._popen = self._popen, None
        if popen is not None and popen.poll() is None:
            popen.kill()
            popen.wait()


# -- the connection -----------------------------------------------------------------------

EventHandler = Callable[[p.Event], None]


class WorkerClient:
    """Calls into one worker; events and stderr lines go to the callbacks given."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        process: asyncio.subprocess.Process | None = None,
        place: str = "the worker",
        unpacker: msgpack.Unpacker | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.process = process
        self.place = place  # how messages name the worker
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._packer = msgpack.Packer(use_bin_type=True)
        self._closing = False
        self._backlog: list[str] = []  # stderr lines from before attach()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self.on_event: EventHandler = lambda event: None
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
        command = spawn.command(python)
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=spawn.environment(env),
            limit=_READ_SIZE,
        )
        assert process.stdin is not None and process.stdout is not None
        return cls(process.stdout, process.stdin, process, place=f"the worker process (pid {process.pid})")

    @classmethod
    async def adopt(cls, popen: subprocess.Popen[bytes]) -> WorkerClient:
        """Talk to a worker started before the event loop ran (:func:`.spawn.start`)."""
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        loop = asyncio.get_running_loop()
        reader, errors = asyncio.StreamReader(limit=_READ_SIZE), asyncio.StreamReader(limit=_READ_SIZE)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), popen.stdout)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(errors), popen.stderr)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, popen.stdin)
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(reader, writer, _Started(popen, errors), place=f"the worker process (pid {popen.pid})")  # type: ignore[arg-type]

    @classmethod
    async def connect(cls, address: str, token: str, timeout: float = 10.0) -> WorkerClient:
        """Reach a worker started with ``graph-dap worker --listen HOST:PORT --token TOKEN``."""
        host, port = p.parse_address(address)
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (TimeoutError, OSError) as error:
            raise WorkerDied(f"cannot reach the worker at {address}: {error or 'timed out'}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        writer.write(msgpack.packb({"token": token, "version": p.PROTOCOL_VERSION}, use_bin_type=True))
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=_MAX_MESSAGE)
        try:
            while True:
                data = await asyncio.wait_for(reader.read(_READ_SIZE), timeout)
                if not data:
                    raise WorkerDied(f"the worker at {address} refused the connection (wrong token?)")
                unpacker.feed(data)
                for hello in unpacker:
                    if not (isinstance(hello, dict) and hello.get("hello") == p.HELLO):
                        raise WorkerDied(f"{address} is not a graph-dap worker")
                    version = hello.get("version")
                    if version != p.PROTOCOL_VERSION:
                        raise WorkerDied(
                            f"the worker at {address} speaks protocol version {version}, this adapter "
                            f"{p.PROTOCOL_VERSION}: run the same graph-dap on both sides"
                        )
                    # Bytes that came with the hello stay in the unpacker for the read loop.
                    return cls(reader, writer, None, f"the worker at {address}", unpacker)
        except TimeoutError:
            writer.close()
            raise WorkerDied(f"the worker at {address} did not answer in {timeout:g} s") from None
        except WorkerDied:
            writer.close()
            raise

    # -- calling -------------------------------------------------------------------------

    async def _call(self, method: p.Method[A, R], args: A) -> R:
        """Send one request and wait for its result; raises the worker's error, ProtocolError or WorkerDied."""
        if self.dead is not None:
            raise WorkerDied(self.dead)
        self._next_id += 1
        request_id = self._next_id
        try:
            data = self._packer.pack(p.request_message(request_id, method, args))
        except (OverflowError, TypeError, ValueError) as error:  # msgpack: an integer past 64 bits, a lone surrogate
            raise ProtocolError(f"the {method.name} call cannot be sent to the worker: {error}") from None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._writer.write(data)
        except (ConnectionError, RuntimeError) as error:
            self._pending.pop(request_id, None)
            raise WorkerDied(f"{self.place} is gone: {error}") from None
        try:
            result = await future
        finally:
            self._pending.pop(request_id, None)
        decoded: R = p.decode(method.result, result, f"the result of {method.name}")
        return decoded

    # One method per call of the protocol.

    async def load(self, args: p.LoadArgs) -> p.GraphInfo:
        return await self._call(p.LOAD, args)

    async def run(self, args: p.RunArgs) -> p.StopInfo:
        return await self._call(p.RUN, args)

    async def where(self) -> p.StopInfo:
        return await self._call(p.WHERE, p.NoArgs())

    async def pause(self) -> bool:
        return (await self._call(p.PAUSE, p.NoArgs())).paused

    async def set_breakpoints(self, specs: Sequence[p.BreakpointSpec]) -> tuple[p.BreakpointResult, ...]:
        return await self._call(p.SET_BREAKPOINTS, p.BreakpointsArgs(tuple(specs)))

    async def set_break_on(self, args: p.BreakOnArgs) -> None:
        await self._call(p.SET_BREAK_ON, args)

    async def data_targets(self, args: p.NameArgs) -> p.DataTargets:
        return await self._call(p.DATA_TARGETS, args)

    async def compare_table(self) -> dict[str, Any]:
        return await self._call(p.COMPARE_TABLE, p.NoArgs())

    async def profile(self, args: p.ProfileArgs) -> dict[str, Any]:
        return await self._call(p.PROFILE, args)

    async def source(self, node: str) -> p.NodeSourceInfo:
        """Where a node came from in the model's Python source."""
        return await self._call(p.SOURCE, p.NameArgs(node))

    async def values(self, level: int = 0, warm: bool = True) -> p.ValueNames:
        return await self._call(p.VALUES, p.LevelArgs(level, warm))

    async def summaries(self, args: p.SummariesArgs) -> tuple[p.Summary, ...]:
        return await self._call(p.SUMMARIES, args)

    async def children(self, args: p.ChildrenArgs) -> p.ChildrenPage:
        return await self._call(p.CHILDREN, args)

    async def read_memory(self, args: p.ReadMemoryArgs) -> p.MemoryRead:
        return await self._call(p.READ_MEMORY, args)

    async def evaluate(self, args: p.EvaluateArgs) -> p.Evaluated:
        return await self._call(p.EVALUATE, args)

    async def set_value(self, args: p.SetValueArgs) -> p.ValueSet:
        return await self._call(p.SET_VALUE, args)

    async def outputs(self) -> tuple[p.Summary, ...]:
        return await self._call(p.OUTPUTS, p.NoArgs())

    async def tensor_view(self, args: p.TensorViewArgs) -> p.TensorView:
        return await self._call(p.TENSOR_VIEW, args)

    async def quant_forms(self, args: p.QuantFormsArgs) -> p.QuantForms:
        """A quantized value's forms: integer, dequantized, and with a reference its float tensor and the error."""
        return await self._call(p.QUANT_FORMS, args)

    async def save_outputs(self, args: p.SaveOutputsArgs) -> p.SavedOutputs:
        return await self._call(p.SAVE_OUTPUTS, args)

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
            try:
                event = p.decode_event(message)
            except ProtocolError as error:
                self.on_stderr(f"graph-dap: a bad event from {self.place}: {error}")
                return
            if event is not None:
                self.on_event(event)
            return
        future = self._pending.get(message.get("id", -1))
        if future is None or future.done():
            return
        if "error" in message:
            try:
                info = p.decode(p.ErrorInfo, message["error"], "an error")
            except ProtocolError as error:
                future.set_exception(error)
            else:
                future.set_exception(error_of_kind(info.kind, info.message))
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
            message = f"{self.place} was closed"
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
            return f"the connection to {self.place} was lost"
        try:
            code = await asyncio.wait_for(self.process.wait(), 2.0)
        except TimeoutError:
            return f"{self.place} stopped answering"
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
        return f"{self.place} {how}" + ("; its last words:\n" + "\n".join(tail) if tail else "")

    # -- ending --------------------------------------------------------------------------

    async def close(self, timeout: float = 2.0) -> None:
        """Ask the worker to end, then make sure it does (killed after ``timeout``)."""
        if self._closing:
            return
        self._closing = True
        if self.dead is None:
            try:
                self._writer.write(self._packer.pack(p.request_message(0, p.SHUTDOWN, p.NoArgs())))
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
