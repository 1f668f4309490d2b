"""The host's connection to the adapter (:mod:`graph_dap.host.protocol`): blocking calls from the program's
threads, one reading thread that the Python debugger never shows or traces.

A call (:meth:`Link.call`) waits for its result; a debugged run (:meth:`Link.start`)
returns a :class:`Pending` that also receives the ``suspend`` pushes meant for it. When the
connection is lost (the debug session ended), every call gets ``None`` and the config
goes back to "nothing applies": the program runs on at full speed.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import msgpack

from graph_dap.errors import GraphDapError, ProtocolError
from graph_dap.host import protocol as hp

R = TypeVar("R")
_READ_SIZE = 1 << 16


class LinkError(GraphDapError):
    """The adapter cannot be reached, refused the host, or went away."""


class Pending:
    """A call in flight: its result (or None when the link is lost), and for a run the ``suspend`` pushes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.result: Any = None
        self.lost = False
        self.suspend_asked = threading.Event()
        self.on_finish: Callable[[], None] | None = None  # called (under ``lock``) when the result comes

    def finish(self, result: Any, lost: bool = False) -> None:
        with self.lock:
            self.result, self.lost = result, lost
            self.done.set()
            self.suspend_asked.set()  # wakes a waiter that waits for either
            if self.on_finish is not None:
                self.on_finish()


def hide_from_debugger(thread: threading.Thread) -> None:
    """Make pydevd (debugpy) neither list nor trace ``thread``, as debugpy does with its own threads."""
    thread.pydev_do_not_trace = True  # type: ignore[attr-defined]
    thread.is_pydev_daemon_thread = True  # type: ignore[attr-defined]


class Link:
    """One connection to the adapter; ``on_config`` gets each Config it pushes (the first before ``connect`` returns)."""

    def __init__(self, sock: socket.socket, on_config: Callable[[hp.Config], None]) -> None:
        self._sock = sock
        self._on_config = on_config
        self._packer = msgpack.Packer(use_bin_type=True)
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[Pending, Any]] = {}
        self._next = 0
        self._closed = False
        self._first_config = threading.Event()
        reader = threading.Thread(target=self._read_loop, name="graph-dap-host-link", daemon=True)
        hide_from_debugger(reader)
        reader.start()

    @classmethod
    def connect(cls, address: str, token: str, on_config: Callable[[hp.Config], None], timeout: float = 30.0) -> Link:
        """Connect to the adapter at ``HOST:PORT``, show the token, and wait for the first config."""
        host, _, port = address.rpartition(":")
        try:
            sock = socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout)
        except (OSError, ValueError) as error:
            raise LinkError(f"cannot reach the graph-dap adapter at {address}: {error}") from None
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link = cls(sock, on_config)
        link._send({"hello": hp.encode(hp.Hello(token, hp.HOST_VERSION, os.getpid(), sys.executable))})
        if not link._first_config.wait(timeout):
            link.close()
            raise LinkError(f"the graph-dap adapter at {address} did not answer the host in {timeout:g} s")
        if link._closed:
            raise LinkError(f"the graph-dap adapter at {address} refused the host (wrong token or version)")
        return link

    # -- calls ------------------------------------------------------------------------------

    def start(self, kind: hp.CallName, args: Any, result: type[R]) -> Pending:
        """Send a call; its result (decoded as ``result``) arrives on the returned :class:`Pending`."""
        pending = Pending()
        with self._lock:
            if self._closed:
                pending.finish(None, lost=True)
                return pending
            self._next += 1
            request = self._next
            self._pending[request] = (pending, result)
        self._send({"id": request, "call": kind, "args": hp.encode(args)})
        return pending

    def call(self, kind: hp.CallName, args: Any, result: type[R], timeout: float | None = None) -> R | None:
        """Send a call and wait for its result (None when the link is lost or ``timeout`` passes)."""
        pending = self.start(kind, args, result)
        pending.done.wait(timeout)
        return pending.result  # type: ignore[no-any-return]

    def _send(self, message: dict[str, Any]) -> None:
        data = self._packer.pack(message)
        with self._send_lock:
            try:
                self._sock.sendall(data)
            except OSError:
                self._lost()

    # -- reading ----------------------------------------------------------------------------

    def _read_loop(self) -> None:
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=1 << 24)
        try:
            while True:
                data = self._sock.recv(_READ_SIZE)
                if not data:
                    break
                unpacker.feed(data)
                for message in unpacker:
                    self._dispatch(message)
        except (OSError, ValueError, msgpack.UnpackException, ProtocolError):
            pass
        self._lost()

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict):
            raise ProtocolError("a message from the adapter is not a map")
        push = message.get("push")
        if push == hp.Push.CONFIG:
            self._on_config(hp.decode(hp.Config, message.get("body"), "config"))
            self._first_config.set()
        elif push == hp.Push.SUSPEND:
            suspend = hp.decode(hp.Suspend, message.get("body"), "suspend")
            with self._lock:
                entry = self._pending.get(suspend.request)
            if entry is not None:
                entry[0].suspend_asked.set()
        elif "id" in message:
            with self._lock:
                entry = self._pending.pop(message["id"], None)
            if entry is not None:
                pending, kind = entry
                pending.finish(hp.decode(kind, message.get("result"), f"the result of call {message['id']}"))

    def _lost(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending, self._pending = self._pending, {}
        self._first_config.set()
        self._on_config(hp.Config())
        for p, _ in pending.values():
            p.finish(None, lost=True)
        try:
            self._sock.close()
        except OSError:
            pass

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._lost()
