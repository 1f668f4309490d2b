"""The debug adapter: one handler per DAP request, over a runtime in a worker process.

Like vscode-mock-debug's ``mockDebug.ts``: each ``<command>_request`` converts the
arguments, calls the runtime (through :class:`WorkerClient`), and returns the response
body; :meth:`DebugAdapter.dispatch` is the one place where errors become ``success:
false``. The handlers are grouped by area in mixins (``session_handlers``,
``run_handlers``, ``inspect_handlers``, ``breakpoint_handlers``, ``custom_handlers``);
this module puts them together, reads requests and serves the transports.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import traceback
from collections.abc import Callable

from graph_dap.adapter.access import AUTH_TIMEOUT, TOKEN_KEY, WrongToken
from graph_dap.adapter.breakpoint_handlers import BreakpointRequests
from graph_dap.adapter.core import Deferred
from graph_dap.adapter.custom_handlers import CUSTOM_REQUESTS, CustomRequests
from graph_dap.adapter.inspect_handlers import InspectionRequests
from graph_dap.adapter.mixed.requests import MixedRequests
from graph_dap.adapter.protocol import Channel, FramingError, Malformed, Message, SocketStream, StdioStream
from graph_dap.adapter.requests import InvalidRequest, Request, RequestError
from graph_dap.adapter.run_handlers import RunRequests
from graph_dap.adapter.session_handlers import CAPABILITIES, SessionRequests
from graph_dap.errors import GraphDapError, WorkerDied
from graph_dap.worker.client import WorkerAhead

__all__ = ["CAPABILITIES", "DebugAdapter", "serve_stdio", "serve_tcp", "serve_tcp_async"]


class DebugAdapter(MixedRequests, SessionRequests, RunRequests, InspectionRequests, BreakpointRequests, CustomRequests):
    """One DAP session on one channel: the request loop, its lifecycle and its runs."""

    # -- the loop and the one place errors become responses -----------------------------

    async def serve(self) -> None:
        """Read and answer requests until ``disconnect`` or the end of the stream."""
        deadline = asyncio.get_running_loop().time() + AUTH_TIMEOUT
        try:
            if self.gate.open:
                await self.turn.take()
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
                elif message.get("type") == "response":
                    self.client_response(message)  # to a reverse request of a mixed session's debugpy
                # events from the client are ignored
        finally:
            await self._shutdown()
            await self.channel.close()
            self.turn.release()

    async def _receive(self, deadline: float) -> Message | Malformed | None:
        """The next message; a client that has not shown the token by ``deadline`` gets None (closed)."""
        if self.gate.open:
            return await self.channel.receive()
        try:
            return await asyncio.wait_for(self.channel.receive(), max(0.0, deadline - asyncio.get_running_loop().time()))
        except TimeoutError:
            print(f"graph-dap: closing a connection that showed no {TOKEN_KEY} in {AUTH_TIMEOUT:.0f} s", file=sys.stderr)
            return None

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
        if self.mixed is not None and request.command != "initialize":
            handler = type(self).mixed_request  # a program launch: every request goes to its side (graph or Python)
        self._after = []
        try:
            if not self.gate.open:
                self.gate.admit(request)
                if self.gate.open:
                    await self.turn.take()
            if handler is None:
                raise InvalidRequest(f"unknown command '{request.command}'")
            body = await handler(self, request)
        except Exception as error:  # noqa: BLE001 - sorted out in _refuse; a bug answers this request, not the session
            self._refuse(request, error)
            return
        if isinstance(body, Deferred):
            self._busy_with = body.what
            self.busy = asyncio.ensure_future(self._answer_later(request, body))
            return
        self.channel.response(request.seq, request.command, body)
        for action in self._after:
            action()

    def _refuse(self, request: Request, error: Exception) -> None:
        """The ``success: false`` answer for a request whose handler raised ``error``."""
        if isinstance(error, RequestError):
            self.channel.error(request.seq, request.command, str(error), show=error.show_user)
            self._done = self._done or isinstance(error, WrongToken)
        elif isinstance(error, WorkerDied):
            self.channel.error(request.seq, request.command, f"the runtime worker is gone: {error}")
        elif isinstance(error, GraphDapError):
            self.channel.error(request.seq, request.command, str(error))
        else:
            traceback.print_exception(error, file=sys.stderr)
            self.channel.error(request.seq, request.command, f"internal error in graph-dap: {error!r}")

    async def _answer_later(self, request: Request, deferred: Deferred) -> None:
        try:
            body = await deferred.work
        except asyncio.CancelledError:
            self.channel.error(request.seq, request.command, "cancelled: the session ended")
            raise
        except Exception as error:  # noqa: BLE001 - answered like any request (see dispatch)
            self._refuse(request, error)
            return
        self.channel.response(request.seq, request.command, body)


# -- transports ---------------------------------------------------------------------------


async def serve_stdio_async(ahead: WorkerAhead) -> None:
    """One session over this process's stdin and stdout; ``ahead``: its worker, when started already."""
    await DebugAdapter(Channel(StdioStream()), spawn_worker=ahead.worker).serve()


def serve_stdio(worker: subprocess.Popen[bytes] | None = None) -> None:
    ahead = WorkerAhead(worker)
    try:
        asyncio.run(serve_stdio_async(ahead))
    finally:
        ahead.close()  # never adopted (a launch on another Python, or no launch at all)


async def serve_tcp_async(host: str, port: int, ready: Callable[[int], None] | None = None, token: str | None = None) -> None:
    """Serve clients over TCP, one session after another; with ``token``, only clients that show it.

    A client yet to show the token waits for no one: it is answered (``initialize``) or
    refused while another session runs, and takes its turn once admitted. The next session's
    worker is started ahead: when the server starts and when a session ends (not beside a session:
    they would share the cores).
    """
    turn = asyncio.Lock()
    spare = WorkerAhead()

    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await DebugAdapter(Channel(SocketStream(reader, writer)), token=token, turn=turn, spawn_worker=spare.worker).serve()
        finally:
            spare.fill()

    server = await asyncio.start_server(session, host, port)
    spare.fill()
    if ready is not None:
        ready(server.sockets[0].getsockname()[1])
    try:
        async with server:
            await server.serve_forever()
    finally:
        spare.close()


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
