"""The adapter over TCP: ``--port 0`` prints the port, clients are served one after another, each with a
worker started ahead, TCP_NODELAY."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dap_client import DapClient
from models import chain_files
from processes import children, listening

from graph_dap.adapter.protocol import SocketStream


@pytest.fixture
def adapter_port() -> Iterator[int]:
    with listening(["-m", "graph_dap.adapter", "--port", "0"], "graph-dap adapter listening on 127.0.0.1:") as address:
        yield int(address.rsplit(":", 1)[1])


def test_clients_one_after_another_over_tcp(adapter_port: int, tmp_path: Path) -> None:
    model, inputs, _ = chain_files(tmp_path)
    for _ in range(2):
        client = DapClient.tcp("127.0.0.1", adapter_port)
        client.start(str(model), inputs=str(inputs), breakpoints=["add"])
        client.wait_for_stop("function breakpoint")
        assert client.top_frame()["name"] == "add (Add)"
        client.request("continue", threadId=1)
        client.wait_for_end()
        client.disconnect()


def _workers_of(pid: int) -> list[int]:
    """The graph-dap worker processes ``pid`` started (once they have exec'd: a child just forked shows its parent's command)."""
    found = []
    for child in children(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        if b"graph_dap.worker" in argv:
            found.append(child)
    return found


def _one_worker_of(pid: int, other_than: int | None = None, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = _workers_of(pid)
        if len(workers) == 1 and workers[0] != other_than:
            return workers[0]
        time.sleep(0.05)
    raise AssertionError(f"the adapter {pid} has workers {_workers_of(pid)}, expected one other than {other_than}")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_each_client_gets_a_worker_started_before_it_connected(tmp_path: Path) -> None:
    model, inputs, _ = chain_files(tmp_path)
    started: list[int] = []
    with listening(["-m", "graph_dap.adapter", "--port", "0"], "graph-dap adapter listening on 127.0.0.1:", started=started) as address:
        adapter = started[0]
        ahead = _one_worker_of(adapter)  # waiting before any client came
        for _ in range(2):
            client = DapClient.tcp("127.0.0.1", int(address.rsplit(":", 1)[1]))
            client.start(str(model), inputs=str(inputs), stopOnEntry=True)
            client.wait_for_stop("entry")
            assert _workers_of(adapter) == [ahead]  # the session runs on it; no other is started beside it
            client.request("continue", threadId=1)
            client.wait_for_end()
            client.disconnect()
            ahead = _one_worker_of(adapter, other_than=ahead)  # the next client's, started once this one is done


def test_a_client_that_vanishes_frees_the_adapter(adapter_port: int, tmp_path: Path) -> None:
    model, inputs, _ = chain_files(tmp_path)
    first = DapClient.tcp("127.0.0.1", adapter_port)
    first.start(str(model), inputs=str(inputs), stopOnEntry=True)
    first.wait_for_stop("entry")
    first.close()  # no disconnect request
    first.check()
    second = DapClient.tcp("127.0.0.1", adapter_port)
    second.start(str(model), inputs=str(inputs), stopOnEntry=True)
    second.wait_for_stop("entry")
    second.disconnect()


def test_sockets_have_tcp_nodelay() -> None:
    seen: list[int] = []

    async def scenario() -> None:
        accepted = asyncio.Event()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            SocketStream(reader, writer)
            seen.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()
            accepted.set()

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        await accepted.wait()
        writer.close()
        server.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert seen == [1]
