"""The debug adapter: one handler per DAP request, over a runtime in a worker process.

Like vscode-mock-debug's ``mockDebug.ts``: each ``<command>_request`` converts the
arguments, calls the runtime (through :class:`WorkerClient`), and returns the response
body; :meth:`DebugAdapter.dispatch` is the one place where errors become ``success:
false``. The handlers are grouped by area in mixins (``session_handlers``,
``run_handlers``, ``inspect_handlers``, ``breakpoint_handlers``, ``custom_handlers``);
this module puts them together and reads requests. A program launch is handed to the
session its ``programs`` start (mixed mode, which is built on this adapter); the
transports that serve it are :mod:`.transports`.
"""

from __future__ import annotations

import asyncio
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from graph_dap.adapter.access import AUTH_TIMEOUT, TOKEN_KEY, WrongToken
from graph_dap.adapter.breakpoint_handlers import BreakpointRequests
from graph_dap.adapter.core import Deferred
from graph_dap.adapter.custom_handlers import CUSTOM_REQUESTS, CustomRequests
from graph_dap.adapter.inspect_handlers import InspectionRequests
from graph_dap.adapter.protocol import FramingError, Malformed, Message, MessageType
from graph_dap.adapter.requests import InvalidRequest, Request, RequestError
from graph_dap.adapter.run_handlers import RunRequests
from graph_dap.adapter.session_handlers import CAPABILITIES, SessionRequests
from graph_dap.errors import GraphDapError, WorkerDied

__all__ = ["CAPABILITIES", "DebugAdapter"]

Handler = Callable[[Request], Awaitable[Any]]


class DebugAdapter(SessionRequests, RunRequests, InspectionRequests, BreakpointRequests, CustomRequests):
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
                elif message.get("type") == MessageType.REQUEST:
                    await self.dispatch(Request(message["seq"], message["command"], message.get("arguments") or {}))
                elif message.get("type") == MessageType.RESPONSE and self.program is not None:
                    self.program.client_response(message)  # to a reverse request of a mixed session's debugpy
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
        handler = self._handler(request.command)
        self._after = []
        try:
            if not self.gate.open:
                self.gate.admit(request)
                if self.gate.open:
                    await self.turn.take()
            if handler is None:
                raise InvalidRequest(f"unknown command '{request.command}'")
            body = await handler(request)
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

    def _handler(self, command: str) -> Handler | None:
        """This session's handler of ``command``; after a program launch, the program's session answers all but initialize."""
        if self.program is not None and command != "initialize":
            return self.program.handle
        custom = CUSTOM_REQUESTS.get(command)
        handler: Handler | None = getattr(self, custom if custom else f"{command}_request", None)
        return handler

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
