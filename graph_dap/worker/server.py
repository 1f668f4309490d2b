"""The worker: a :class:`DebugSession` behind a msgpack boundary, in its own process.

``python -m graph_dap.worker`` serves one client over stdin/stdout (stderr
stays free for crash messages); ``graph-dap worker --listen HOST:PORT --token TOKEN``
serves clients over TCP one after another, each with a fresh session, and closes any
connection whose first message does not carry the token. The messages are defined in
:mod:`graph_dap.worker.protocol`.

This module is the transport: framing, the reading thread and the listeners. Calls run
one at a time on the main thread (:class:`~graph_dap.worker.service.WorkerService`);
``pause`` is answered by the reading thread at once, so a pause reaches a ``continue``
that is still running. What values look like on the wire is :mod:`.wire`.
"""

from __future__ import annotations

import argparse
import hmac
import os
import queue
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import msgpack

from graph_dap.errors import AddressError
from graph_dap.runtime.engine.options import one_malloc_arena
from graph_dap.stdio import take_over_stdout, write_all
from graph_dap.worker import protocol as p
from graph_dap.worker.service import IDLE_S, WorkerService
from graph_dap.worker.wire import plain

_READ_SIZE = 1 << 16


def serve(read: Callable[[int], bytes], write: Callable[[bytes], None], on_eof: Callable[[], None] | None = None) -> None:
    """Answer requests from ``read`` on ``write`` until the stream ends or ``shutdown``."""
    packer_lock = threading.Lock()
    packer = msgpack.Packer(use_bin_type=True, default=plain)

    def send(message: dict[str, Any]) -> None:
        with packer_lock:
            try:
                data = packer.pack(message)
            except (OverflowError, TypeError, ValueError) as e:  # a result msgpack cannot carry: a bug, answered
                print(f"graph-dap worker: cannot encode an answer: {e!r}", file=sys.stderr)
                if "id" not in message:
                    return
                data = packer.pack(p.error_message(message["id"], "InternalError", f"the worker's answer cannot be encoded: {e}"))
            try:
                write(data)
            except (BrokenPipeError, ConnectionError, OSError):
                pass

    service = WorkerService(send)
    inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def reader() -> None:
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=1 << 26)
        try:
            while True:
                data = read(_READ_SIZE)
                if not data:
                    break
                unpacker.feed(data)
                for message in unpacker:
                    if not isinstance(message, dict):
                        continue
                    if message.get("method") == p.PAUSE.name:
                        send(service.handle(message))
                    else:
                        service.received(message)
                        inbox.put(message)
        except (OSError, ValueError, msgpack.UnpackException) as e:
            print(f"graph-dap worker: bad input from the client: {e}", file=sys.stderr)
        service.pause()
        if on_eof is not None:
            service.close()
            on_eof()
        inbox.put(None)

    threading.Thread(target=reader, name="worker-reader", daemon=True).start()
    while True:
        if service.values.has_idle_work():  # what a quick page left, as soon as no call waits
            try:
                message = inbox.get_nowait()
            except queue.Empty:
                service.values.work_idle()
                continue
        else:
            try:
                message = inbox.get(timeout=IDLE_S)
            except queue.Empty:
                if service.values.pages_due():  # its client asks for the page again when told: idle after that
                    continue
                service.idle()  # (then wait as long as it takes)
                message = inbox.get()
        if message is None:
            break
        send(service.handle(message))
        if message.get("method") == p.SHUTDOWN.name:
            break
    service.close()


def _serve_stdio() -> int:
    proto_in = sys.stdin.fileno()
    proto_out = take_over_stdout()
    serve(lambda n: os.read(proto_in, n), lambda data: write_all(proto_out, data), on_eof=lambda: os._exit(0))
    return 0


def serve_tcp(host: str, port: int, token: str, ready: Callable[[int], None] | None = None, once: bool = False) -> None:
    """Serve adapters over TCP one after another; a connection without ``token`` gets nothing."""
    listener = socket.create_server((host, port))
    bound = listener.getsockname()[1]
    if ready is not None:
        ready(bound)
    expected = token.encode()
    while True:
        conn, _ = listener.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not _handshake(conn, expected):
                continue
            conn.sendall(msgpack.packb(p.encode(p.Hello(p.HELLO, p.PROTOCOL_VERSION, os.getpid()))))

            def read(n: int, c: socket.socket = conn) -> bytes:
                try:
                    return c.recv(n)
                except OSError:
                    return b""

            serve(read, conn.sendall)
        if once:
            break


def _handshake(conn: socket.socket, expected: bytes, timeout: float = 5.0) -> bool:
    conn.settimeout(timeout)
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=4096)
    try:
        while True:
            data = conn.recv(4096)
            if not data:
                return False
            unpacker.feed(data)
            for hello in unpacker:
                token = hello.get("token") if isinstance(hello, dict) else None
                conn.settimeout(None)
                return isinstance(token, str) and hmac.compare_digest(token.encode(), expected)
    except (OSError, ValueError, msgpack.UnpackException):
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """``graph-dap worker [--listen HOST:PORT --token TOKEN]``; without --listen, serve stdio."""
    parser = argparse.ArgumentParser(prog="graph-dap worker", description="Run a graph-dap runtime worker.")
    parser.add_argument("--listen", metavar="HOST:PORT", help="serve adapters over TCP (default host 127.0.0.1)")
    parser.add_argument("--token", help="secret that adapters must present (or set GRAPH_DAP_WORKER_TOKEN)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    one_malloc_arena()  # before the reading thread allocates: see its docstring
    if not args.listen:
        return _serve_stdio()
    token = args.token or os.environ.get("GRAPH_DAP_WORKER_TOKEN")
    if not token:
        print("graph-dap worker: --listen needs --token (or GRAPH_DAP_WORKER_TOKEN)", file=sys.stderr)
        return 2
    try:
        host, port = p.parse_address(args.listen)
    except AddressError as e:
        print(f"graph-dap worker: {e}", file=sys.stderr)
        return 2

    def ready(bound: int) -> None:
        print(f"graph-dap worker listening on {host}:{bound}", flush=True)

    try:
        serve_tcp(host, port, token, ready)
    except KeyboardInterrupt:
        return 130
    except OSError as e:
        print(f"graph-dap worker: cannot listen on {args.listen}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
