"""The adapter's end of the host link (:mod:`graph_dap.host.protocol`): a listener on 127.0.0.1 for the program's host.

One connection is taken: the first that shows the token (any other is closed). Its
``model`` calls go to ``on_model`` (answered with its :class:`ModelAck`), its ``run``
calls to ``on_run`` (answered later, with :meth:`HostLink.answer`); the adapter pushes
the config and ``suspend`` (:meth:`HostLink.push_config`, :meth:`HostLink.push_suspend`).
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import msgpack

from graph_dap.errors import ProtocolError
from graph_dap.host import protocol as hp
from graph_dap.tasks import background

_READ_SIZE = 1 << 16


class HostLink:
    """The listener and, once the program's host has connected, its connection."""

    def __init__(
        self,
        on_model: Callable[[hp.ModelLoaded], Awaitable[hp.ModelAck]],
        on_run: Callable[[int, hp.RunCall], None],
        on_lost: Callable[[], None],
        config: Callable[[], hp.Config],
    ) -> None:
        self.token = secrets.token_hex(16)
        self._on_model = on_model
        self._on_run = on_run
        self._on_lost = on_lost
        self._config = config
        self._server: asyncio.Server | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._packer = msgpack.Packer(use_bin_type=True)
        self.address = ""
        self.pid: int | None = None
        self.connected = asyncio.Event()

    async def listen(self) -> str:
        """Listen on a free port of 127.0.0.1; returns ``HOST:PORT`` for the host's command line."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self.address

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._writer is not None:
            writer.close()  # the program's host is connected already
            return
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=1 << 24)
        try:
            hello = await asyncio.wait_for(self._first(reader, unpacker), 30)
        except (TimeoutError, ProtocolError, ValueError, msgpack.UnpackException, ConnectionError, OSError):
            writer.close()
            return
        if hello is None or hello.version != hp.HOST_VERSION or not hmac.compare_digest(hello.token.encode(), self.token.encode()):
            writer.close()
            return
        self._writer = writer
        self.pid = hello.pid
        self.push_config()
        self.connected.set()
        try:
            while True:
                for message in unpacker:
                    self._dispatch(message)
                data = await reader.read(_READ_SIZE)
                if not data:
                    break
                unpacker.feed(data)
        except (ProtocolError, ValueError, msgpack.UnpackException, ConnectionError, OSError) as error:
            print(f"graph-dap: the program's host link broke: {error}", file=sys.stderr)
        finally:
            self._writer = None
            writer.close()
            self._on_lost()

    @staticmethod
    async def _first(reader: asyncio.StreamReader, unpacker: msgpack.Unpacker) -> hp.Hello | None:
        while True:
            for message in unpacker:
                if not isinstance(message, dict) or "hello" not in message:
                    return None
                hello: hp.Hello = hp.decode(hp.Hello, message["hello"], "hello")
                return hello
            data = await reader.read(_READ_SIZE)
            if not data:
                return None
            unpacker.feed(data)

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict) or not isinstance(message.get("id"), int):
            raise ProtocolError("a message from the program's host is not a call")
        request, kind = message["id"], message.get("call")
        if kind == hp.CallName.MODEL:
            loaded = hp.decode(hp.ModelLoaded, message.get("args"), "model")
            background(self._model(request, loaded))
        elif kind == hp.CallName.RUN:
            self._on_run(request, hp.decode(hp.RunCall, message.get("args"), "run"))
        else:
            raise ProtocolError(f"unknown call {kind!r} from the program's host")

    async def _model(self, request: int, loaded: hp.ModelLoaded) -> None:
        try:
            ack = await self._on_model(loaded)
        except Exception as error:  # noqa: BLE001 - the program must hear back, whatever failed here
            ack = hp.ModelAck(False, f"graph-dap could not take the model: {error}")
        self.answer(request, ack)

    # -- to the host ------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(self._packer.pack(message))

    def answer(self, request: int, result: hp.ModelAck | hp.RunResult) -> None:
        self._send({"id": request, "result": hp.encode(result)})

    def push_config(self) -> None:
        self._send({"push": hp.Push.CONFIG, "body": hp.encode(self._config())})

    def push_suspend(self, request: int) -> None:
        self._send({"push": hp.Push.SUSPEND, "body": hp.encode(hp.Suspend(request))})

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._server is not None:
            self._server.close()
