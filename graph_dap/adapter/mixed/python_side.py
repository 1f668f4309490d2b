"""The Python side of a mixed session: debugpy's own adapter in a child process, spoken to in DAP over its stdio.

graph-dap's adapter is its client (:attr:`PythonSide.peer`): it forwards the requests that belong
to Python (with their ids remapped, :mod:`.ids`), gets the responses back, and passes its events
and reverse requests (``runInTerminal``) on through the callbacks. The child
is :mod:`.debugpy_shim` (debugpy's adapter with TCP_NODELAY on its sockets). The wire is
graph-dap's own DAP framing (capped, :mod:`graph_dap.adapter.protocol`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable

from graph_dap.adapter.peer import DapPeer
from graph_dap.adapter.protocol import Channel, FramingError, Malformed, Message
from graph_dap.adapter.requests import CantHandle
from graph_dap.paths import child_environment

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
    """debugpy's adapter: a :class:`~graph_dap.adapter.peer.DapPeer` over its stdio, read until it ends."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        on_event: Callable[[Message], None],
        on_request: Callable[[Message], None],
        on_exit: Callable[[], None],
    ) -> None:
        self.process = process
        self.channel = Channel(ProcessStream(process))
        self.peer = DapPeer(self.channel.send, "the Python debugger (debugpy)", on_event, on_request)
        self._on_exit = on_exit
        self._reader = asyncio.ensure_future(self._read_loop())

    @classmethod
    async def start(
        cls,
        on_event: Callable[[Message], None],
        on_request: Callable[[Message], None],
        on_exit: Callable[[], None],
    ) -> PythonSide:
        """Start debugpy's adapter (through the shim) on this interpreter (the program may run on another)."""
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "graph_dap.adapter.mixed.debugpy_shim",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                env=child_environment(os.environ),
                limit=_READ_SIZE,
            )
        except OSError as error:
            raise CantHandle(f"cannot start debugpy's adapter: {error}") from None
        return cls(process, on_event, on_request, on_exit)

    @property
    def gone(self) -> bool:
        """Whether debugpy's adapter has ended."""
        return self.peer.gone is not None

    async def _read_loop(self) -> None:
        try:
            while True:
                try:
                    message = await self.channel.receive()
                except FramingError:
                    break
                if message is None:
                    break
                if not isinstance(message, Malformed):
                    self.peer.received(message)
        finally:
            self.peer.end("the Python debugger (debugpy) has ended")
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
