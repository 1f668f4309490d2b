"""The adapter's transports: one session on stdio, or TCP clients one after another.

Each session is a plain :class:`~graph_dap.adapter.server.DebugAdapter` that hands a
program launch to mixed mode (:class:`~graph_dap.adapter.mixed.door.MixedDoor`): the one
module that knows both, so that mixed mode builds on the plain adapter and never the
other way round.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable

from graph_dap.adapter.mixed.door import MixedDoor
from graph_dap.adapter.protocol import Channel, SocketStream, StdioStream
from graph_dap.adapter.server import DebugAdapter
from graph_dap.worker.client import WorkerAhead

__all__ = ["serve_stdio", "serve_stdio_async", "serve_tcp", "serve_tcp_async"]


async def serve_stdio_async(ahead: WorkerAhead) -> None:
    """One session over this process's stdin and stdout; ``ahead``: its worker, when started already."""
    await DebugAdapter(Channel(StdioStream()), spawn_worker=ahead.worker, programs=MixedDoor()).serve()


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
            adapter = DebugAdapter(Channel(SocketStream(reader, writer)), token=token, turn=turn, spawn_worker=spare.worker, programs=MixedDoor())
            await adapter.serve()
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
