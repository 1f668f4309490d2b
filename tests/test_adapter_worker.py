"""The runtime worker: its death mid-run, a remote worker with a token, and the msgpack boundary."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
from dap_client import TIMEOUT, DapClient, DapError
from models import chain_files, reference, running_model
from processes import ROOT, children, listening


@pytest.mark.parametrize(("sig", "words"), [(signal.SIGKILL, "killed by SIGKILL"), (signal.SIGSEGV, "segmentation fault")])
def test_a_worker_that_dies_mid_run_ends_the_session(dap: DapClient, tmp_path: Path, sig: int, words: str) -> None:
    model = running_model(tmp_path)
    dap.start(str(model), stopOnEntry=True)
    dap.wait_for_stop("entry")
    assert dap.process is not None
    (worker,) = children(dap.process.pid)
    dap.request("continue", threadId=1)
    dap.wait_for_event("progressStart", where=lambda b: b["title"] == "Running the model")
    os.kill(worker, sig)
    said = dap.wait_for_event("output", where=lambda b: "worker" in b["output"] and b["category"] == "stderr")
    assert words in said["output"] and f"pid {worker}" in said["output"]
    assert dap.wait_for_event("exited")["exitCode"] == 1
    dap.wait_for_end()
    assert dap.events_named("output") and any(e["category"] == "important" for e in dap.events_named("output"))
    # the adapter stays up and says why it cannot go on
    assert dap.request("threads")["threads"][0]["id"] == 1
    with pytest.raises(DapError, match="worker is gone|not stopped"):
        dap.request("next", threadId=1)
    assert dap.process.poll() is None


@pytest.fixture
def remote_worker() -> Iterator[tuple[str, str]]:
    token = "s3cret-token"
    args = ["-m", "graph_dap.worker", "--listen", "127.0.0.1:0", "--token", token]
    with listening(args, "graph-dap worker listening on 127.0.0.1:", stop="kill") as address:
        yield address, token


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    return sock


def _wait_closed(sock: socket.socket) -> bytes:
    got = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            return got
        got += chunk


def test_without_the_token_a_connection_gets_nothing(remote_worker: tuple[str, str]) -> None:
    address, _ = remote_worker
    for hello in [{"token": "wrong"}, {"nothing": 1}, "garbage", {"token": 12}]:
        sock = _connect(address)
        sock.sendall(msgpack.packb(hello) + msgpack.packb({"id": 1, "method": "load", "args": {"model": "/etc/passwd"}}))
        assert _wait_closed(sock) == b""
        sock.close()
    # and it still serves the right token afterwards
    sock = _connect(address)
    sock.sendall(msgpack.packb({"token": remote_worker[1]}))
    hello = msgpack.unpackb(sock.recv(4096))
    assert hello["hello"] == "graph-dap-worker"
    sock.close()


def test_launch_on_a_remote_worker(dap: DapClient, remote_worker: tuple[str, str], tmp_path: Path) -> None:
    address, token = remote_worker
    model, inputs, feeds = chain_files(tmp_path)
    ref = reference(model, feeds)
    dap.initialize()
    with pytest.raises(DapError, match="refused the connection"):
        dap.launch(str(model), worker=address, token="not it")
    with pytest.raises(DapError, match="needs the 'token'"):
        dap.launch(str(model), worker=address)
    dap.launch(str(model), inputs=str(inputs), stopOnEntry=True, worker=address, token=token)
    dap.wait_for_stop("entry")
    dap.step()
    result = dap.evaluate("c.min()")
    assert float(result["result"]) == pytest.approx(float(ref["c"].min()), rel=1e-6)
    dap.request("continue", threadId=1)
    dap.wait_for_end()


def test_a_remote_worker_serves_one_adapter_after_another(remote_worker: tuple[str, str], tmp_path: Path) -> None:
    address, token = remote_worker
    model, inputs, _ = chain_files(tmp_path)
    for _ in range(2):
        client = DapClient.stdio()
        client.start(str(model), inputs=str(inputs), stopOnEntry=True, worker=address, token=token)
        client.wait_for_stop("entry")
        assert client.top_frame()["name"] == "conv (Conv)"
        client.disconnect()


def test_listen_without_a_token_is_refused() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GRAPH_DAP_WORKER_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-m", "graph_dap.worker", "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2 and "needs --token" in done.stderr


def test_worker_stderr_reaches_the_debug_console(dap: DapClient, tmp_path: Path) -> None:
    # A Python for the worker that first writes what onnxruntime writes on stderr.
    wrapper = tmp_path / "python-that-warns"
    wrapper.write_text(
        f'#!/bin/sh\necho "[W:onnxruntime:, graph.cc:1] a warning from onnxruntime" >&2\nexec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    model, inputs, _ = chain_files(tmp_path)
    dap.initialize()
    with pytest.raises(DapError, match="cannot start the runtime worker"):
        dap.launch(str(model), python=str(tmp_path / "no-such-python"))
    dap.launch(str(model), inputs=str(inputs), stopOnEntry=True, python=str(wrapper))
    dap.wait_for_stop("entry")
    out = dap.wait_for_event("output", where=lambda b: "a warning from onnxruntime" in b["output"])
    assert out["category"] == "stderr"


def test_disconnect_during_a_run_ends_the_worker(tmp_path: Path) -> None:
    client = DapClient.stdio()
    client.start(str(running_model(tmp_path)), stopOnEntry=True)
    client.wait_for_stop("entry")
    assert client.process is not None
    (worker,) = children(client.process.pid)
    client.request("continue", threadId=1)
    client.wait_for_event("progressStart", where=lambda b: b["title"] == "Running the model")
    client.request("disconnect", terminateDebuggee=True)
    client.close()
    assert client.process.returncode == 0
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)
    client.check()
    assert "Traceback" not in client.stderr_text()


def _first_child(pid: int) -> int:
    deadline = time.monotonic() + TIMEOUT
    while not (started := children(pid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    (child,) = started
    return child


def _command_line(pid: int) -> list[bytes]:
    """The arguments ``pid`` runs with, once it has exec'd (a child just forked shows none, or its parent's)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        if b"graph_dap.worker" in args or time.monotonic() > deadline:
            return args
        time.sleep(0.02)


def test_on_stdio_the_worker_starts_with_the_adapter_and_serves_the_launch(tmp_path: Path) -> None:
    client = DapClient.stdio()
    assert client.process is not None
    try:
        worker = _first_child(client.process.pid)  # before any message: its imports overlap the adapter's
        assert _command_line(worker)[1:3] == [b"-m", b"graph_dap.worker"]
        model, inputs, _ = chain_files(tmp_path)
        client.start(str(model), inputs=str(inputs), stopOnEntry=True)
        client.wait_for_stop("entry")
        assert children(client.process.pid) == [worker]
        client.request("continue", threadId=1)
        client.wait_for_event("terminated")
        client.request("disconnect")
    finally:
        client.close()
    assert client.process.returncode == 0
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)
    client.check()


def test_a_client_that_leaves_before_launching_leaves_no_worker_behind() -> None:
    client = DapClient.stdio()
    assert client.process is not None
    worker = _first_child(client.process.pid)
    client.initialize()
    client.close()  # the stream ends: no launch, no disconnect
    assert client.process.returncode == 0
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)
    assert "Traceback" not in client.stderr_text()
