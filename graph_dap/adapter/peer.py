"""The other end of a DAP conversation in which graph-dap is the client: requests out, each response back on its future.

Like debugpy's ``messaging.JsonMessageChannel`` (``channel.request``, ``channel.delegate``):
a request is numbered by the channel that sends it, its response is found by that ``seq``;
a ``success: false`` response becomes one error (:class:`Refused`, the peer's ``message``
and whether to show it to the user); once the peer is gone, every request waiting and
every later one fails with :class:`~graph_dap.adapter.requests.CantHandle`. Events and
reverse requests go to the callbacks. Mixed mode speaks to debugpy's adapter
(:mod:`.mixed.python_side`) and to each graph run's in-memory session (:mod:`.mixed.graph_run`)
through one of these.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from graph_dap.adapter.protocol import Message, MessageType
from graph_dap.adapter.requests import CantHandle, RequestError

__all__ = ["DapPeer", "Refused"]


class Refused(RequestError):
    """The peer answered a request with ``success: false``: its message, and whether it asked to show it to the user."""


def _ignore(message: Message) -> None:
    pass


class DapPeer:
    """Requests to a DAP peer over ``send`` (which numbers each message's ``seq``); what it says comes in through :meth:`received`."""

    def __init__(
        self,
        send: Callable[[Message], None],
        name: str,
        on_event: Callable[[Message], None] = _ignore,
        on_request: Callable[[Message], None] = _ignore,
    ) -> None:
        self._send = send
        self.name = name  # how an error names the peer: "the Python debugger (debugpy)"
        self._on_event = on_event
        self._on_request = on_request
        self._pending: dict[int, asyncio.Future[Message]] = {}
        self.gone: str | None = None  # why the peer is gone, once it is

    def send(self, command: str, arguments: dict[str, Any] | None = None) -> asyncio.Future[Message]:
        """Send a request; the future holds its whole response (``success`` true or false), or CantHandle once the peer is gone."""
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        if self.gone is not None:
            future.set_exception(CantHandle(self.gone))
            return future
        message: Message = {"type": MessageType.REQUEST, "command": command}
        if arguments is not None:
            message["arguments"] = arguments
        self._send(message)
        self._pending[message["seq"]] = future
        return future

    async def request(self, command: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request; its response's body, or :class:`Refused` when it failed (CantHandle once the peer is gone)."""
        response = await self.send(command, arguments)
        if not response.get("success"):
            error = Refused(response.get("message") or f"{command} failed")
            error.show_user = bool(((response.get("body") or {}).get("error") or {}).get("showUser"))
            raise error
        body: dict[str, Any] = response.get("body") or {}
        return body

    def respond(self, request_seq: int, command: str, success: bool, body: Any = None, text: str = "") -> None:
        """Answer one of the peer's reverse requests (``runInTerminal``)."""
        message: Message = {"type": MessageType.RESPONSE, "request_seq": request_seq, "command": command, "success": success}
        if body is not None:
            message["body"] = body
        if not success:
            message["message"] = text or "refused"
        self._send(message)

    def received(self, message: Message) -> None:
        """One message from the peer: a response to its request's future, an event or a reverse request to the callbacks."""
        kind = message.get("type")
        if kind == MessageType.RESPONSE:
            future = self._pending.pop(message.get("request_seq", -1), None)
            if future is not None and not future.done():
                future.set_result(message)
        elif kind == MessageType.EVENT:
            self._on_event(message)
        elif kind == MessageType.REQUEST:
            self._on_request(message)

    def end(self, why: str) -> None:
        """The peer is gone (``why``): the requests waiting fail with CantHandle, as every later one does."""
        if self.gone is None:
            self.gone = why
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(CantHandle(why))
