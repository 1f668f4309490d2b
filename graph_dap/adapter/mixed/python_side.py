"""The Python side of a mixed session: debugpy's own adapter in a child process, spoken to in DAP over its stdio.

graph-dap's adapter is its client: it forwards the requests that belong to Python
(with their ids remapped, :mod:`.ids`), gets the responses back as values, and passes
its events and reverse requests (``runInTerminal``) on through the callbacks. The child
is :mod:`.debugpy_shim` (debugpy's adapter with TCP_NODELAY on its sockets). The wire is
graph-dap's own DAP framing (capped, :mod:`graph_dap.adapter.protocol`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graph_dap.adapter.protocol import Channel, FramingError, Malformed, Message
from graph_dap.adapter.requests import CantHandle

_READ_SIZE = 1 << 16


class ProcessStream:
    """A child process's stdin and stdout as a :class:`~graph_dap.adapter.protocol.ByteStream`."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._in = process.stdout
        self._out = process.stdin

    async def read(self) -> bytes:
        try:
            return await self._in.read(_READ_SIZE)
        except (ConnectionError, OSError):
            return b""

    def write(self, data: bytes) -> None:
        if not self._out.is_closing():
            try:
                self._out.write(data)
            except (ConnectionError, RuntimeError):
                pass

    async def close(self) -> None:
        try:
            self._out.close()
        except (ConnectionError, RuntimeError):
            pass


class PythonSide:
    """debugpy's adapter: requests out, responses back; events and reverse requests to the callbacks."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        on_event: Callable[[Message], None],
        on_request: Callable[[Message], None],
        on_exit: Callable[[], None],
    ) -> None:
        self.process = process
        self.channel = Channel(ProcessStream(process))
        self._on_event = on_event
        self._on_request = on_request
        self._on_exit = on_exit
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self.gone = False
        self._reader = asyncio.ensure_future(self._read_loop())

    @classmethod
    async def start(
        cls,
        on_event: Callable[[Message], None],
        on_request: Callable[[Message], None],
        on_exit: Callable[[], None],
    ) -> PythonSide:
        """Start debugpy's adapter (through the shim) on this interpreter (the program may run on another)."""
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "graph_dap.adapter.mixed.debugpy_shim",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                env=env,
                limit=_READ_SIZE,
            )
        except OSError as error:
            raise CantHandle(f"cannot start debugpy's adapter: {error}") from None
        return cls(process, on_event, on_request, on_exit)

    async def request(self, command: str, arguments: dict[str, Any] | None = None) -> Message:
        """Send a request; its whole response (``success`` true or false), or CantHandle once debugpy is gone."""
        if self.gone:
            raise CantHandle("the Python debugger (debugpy) has ended")
        message: Message = {"type": "request", "command": command}
        if arguments is not None:
            message["arguments"] = arguments
        self.channel.send(message)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[message["seq"]] = future
        return await future

    def respond(self, request_seq: int, command: str, success: bool, body: Any = None, text: str = "") -> None:
        """Answer one of debugpy's reverse requests (``runInTerminal``)."""
        message: Message = {"type": "response", "request_seq": request_seq, "command": command, "success": success}
        if body is not None:
            message["body"] = body
        if not success:
            message["message"] = text or "refused"
        self.channel.send(message)

    async def _read_loop(self) -> None:
        try:
            while True:
                try:
                    message = await self.channel.receive()
                except FramingError:
                    break
                if message is None:
                    break
                if isinstance(message, Malformed):
                    continue
                kind = message.get("type")
                if kind == "response":
                    future = self._pending.pop(message.get("request_seq", -1), None)
                    if future is not None and not future.done():
                        future.set_result(message)
                elif kind == "event":
                    self._on_event(message)
                elif kind == "request":
                    self._on_request(message)
        finally:
            self.gone = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(CantHandle("the Python debugger (debugpy) has ended"))
            self._pending.clear()
            self._on_exit()

    async def close(self, timeout: float = 5.0) -> None:
        """Close its stdin, and make sure the process ends (killed after ``timeout``)."""
        await self.channel.close()
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            try:
                self.process.kill()
            except ProcessLookupError:
                pass
            await self.process.wait()
        if not self._reader.done():
            self._reader.cancel()
