"""Faults: the worker killed in the middle of a call, out of memory, a client gone mid-run, stdin closed mid-answer,
the disk full during a dump.

Each time the adapter stays up and says what happened, no process is left behind (the
adapter's descendants are counted, a process's end waited for through its pidfd), no
partial file is left under a final name, and a new launch in the same adapter works.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from dap_client import TIMEOUT, DapClient, DapError
from models import chain_files as chain_model
from models import long_model, save_model
from processes import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from soak import descendants, soak, start_adapter  # noqa: E402


def wait_gone(pid: int, timeout: float = TIMEOUT) -> None:
    """Wait for process ``pid`` (not a child of ours) to end: its pidfd becomes readable."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"process {pid} still runs after {timeout} s"
    finally:
        os.close(fd)


def _workers(adapter: int) -> list[int]:
    return descendants(adapter)


@contextlib.contextmanager
def tcp_adapter() -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc, port = start_adapter()
    try:
        yield proc, port
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=TIMEOUT)
        assert "Traceback" not in stderr, stderr[-3000:]


def _a_new_launch_works(port: int, folder: Path) -> None:
    model, inputs, _ = chain_model(folder)
    client = DapClient.tcp("127.0.0.1", port)
    try:
        client.start(str(model), inputs=str(inputs), stopOnEntry=True)
        client.wait_for_stop("entry")
        client.step()
    finally:
        client.disconnect()


@pytest.mark.parametrize("call", [pytest.param("continue", marks=pytest.mark.long), pytest.param("next", marks=pytest.mark.long), "tensorView"])
def test_the_worker_killed_in_the_middle_of_a_call(tmp_path: Path, call: str) -> None:
    model = long_model(tmp_path, count=40)
    with tcp_adapter() as (adapter, port):
        client = DapClient.tcp("127.0.0.1", port)
        client.start(str(model), stopOnEntry=True)
        client.wait_for_stop("entry")
        (worker,) = _workers(adapter.pid)
        os.kill(worker, signal.SIGSTOP)  # the call below reaches a worker that cannot answer: it is killed in the middle of it
        if call == "tensorView":
            seq = client.send("graphDap/tensorView", {"name": "`x` @ `w`"})
        else:
            client.request(call, threadId=1)
        os.kill(worker, signal.SIGKILL)
        wait_gone(worker)
        said = client.wait_for_event("output", where=lambda b: "worker" in b["output"] and b["category"] == "stderr")
        assert "killed by SIGKILL" in said["output"] and f"pid {worker}" in said["output"]
        if call == "tensorView":
            response = client.response(seq)
            assert response["success"] is False and "worker is gone" in response["message"]
        assert client.wait_for_event("exited")["exitCode"] == 1
        client.wait_for_end()
        assert client.request("threads")["threads"][0]["id"] == 1  # the adapter stays up
        with pytest.raises(DapError, match="worker is gone|not stopped|launch first"):
            client.request("next", threadId=1)
        assert _workers(adapter.pid) == []
        client.disconnect()
        _a_new_launch_works(port, tmp_path)
        for left in _workers(adapter.pid):  # the new session's worker, closing now that its client left
            wait_gone(left)


def test_the_worker_out_of_memory(tmp_path: Path) -> None:
    """Under a 1.5 GB address-space limit, a node that makes 2 GiB fails with the reason; the worker and the adapter go on."""
    from onnx import TensorProto, helper

    model = save_model(
        tmp_path / "big.onnx",
        [
            helper.make_node("Expand", ["x", "shape"], ["big"], name="expand"),
            helper.make_node("ReduceSum", ["big"], ["y"], name="sum", keepdims=0),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
        {"shape": __import__("numpy").array([512, 1024, 1024], "int64")},
    )
    python = tmp_path / "python-limited"
    python.write_text(f'#!/bin/sh\nulimit -v {1536 * 1024}\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    client = DapClient.stdio()
    try:
        client.start(str(model), python=str(python), stopOnEntry=True, exceptions=["error"])
        client.wait_for_stop("entry")
        assert client.process is not None
        (worker,) = _workers(client.process.pid)
        client.request("continue", threadId=1)
        stop = client.wait_for_stop("exception")
        assert stop["text"] == "NodeExecutionError" and "expand" in stop["description"]
        assert "alloc" in stop["description"].lower() or "memory" in stop["description"].lower(), stop["description"]
        assert client.evaluate("`x` + 1")["result"]  # the worker goes on
        assert _workers(client.process.pid) == [worker]
    finally:
        client.disconnect()
    wait_gone(worker)
    assert "Traceback" not in client.stderr_text()


@pytest.mark.long
def test_the_client_disconnecting_while_a_continue_runs(tmp_path: Path) -> None:
    model = long_model(tmp_path, count=4000)
    with tcp_adapter() as (adapter, port):
        client = DapClient.tcp("127.0.0.1", port)
        client.start(str(model), stopOnEntry=True)
        client.wait_for_stop("entry")
        (worker,) = _workers(adapter.pid)
        client.request("continue", threadId=1)
        client.wait_for_event("progressStart", where=lambda b: b["title"] == "Running the model")
        client.close()  # gone without a disconnect, in the middle of the run
        wait_gone(worker)
        assert adapter.poll() is None
        _a_new_launch_works(port, tmp_path)


def test_the_adapters_stdin_closed_in_the_middle_of_an_answer(tmp_path: Path) -> None:
    """The client goes away (both pipes) while the adapter writes a long answer: it ends cleanly, and so does its worker."""
    model = long_model(tmp_path, count=3000, size=4)  # a listing of 6,000 lines: an answer of hundreds of KB to `source`
    errors = (tmp_path / "stderr.txt").open("w+b")
    proc = subprocess.Popen(
        [sys.executable, "-m", "graph_dap.adapter"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.stdin is not None and proc.stdout is not None
    hold = threading.Event()

    def read(n: int) -> bytes:
        if hold.is_set():  # parked here, not in a read: the pipe's reading end can be closed under it
            hold.wait()
            threading.Event().wait()
        return proc.stdout.read1(n)  # type: ignore[union-attr]

    client = DapClient(read, lambda data: (proc.stdin.write(data), proc.stdin.flush()) and None, proc.stdin.close)  # type: ignore[union-attr]
    client.start(str(model), stopOnEntry=True)
    client.wait_for_stop("entry")
    (worker,) = _workers(proc.pid)
    source = client.listing_source()
    hold.set()
    client.send("source", {"source": source, "sourceReference": source.get("sourceReference") or 0})
    os.close(proc.stdout.fileno())  # nobody reads the rest of the answer
    proc.stdin.close()  # and the input ends
    assert proc.wait(TIMEOUT) == 0
    wait_gone(worker)
    errors.seek(0)
    assert b"Traceback" not in errors.read()


@contextlib.contextmanager
def small_disk(folder: Path) -> Iterator[tuple[Path, dict[str, object]]]:
    """A 1 MB tmpfs where it can be mounted, else a 1 MB file-size limit (RLIMIT_FSIZE) on the process that writes."""
    mount = folder / "small"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True).returncode == 0
    try:
        if mounted:
            yield mount, {}
        else:
            import resource

            yield mount, {"preexec_fn": lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))}
    finally:
        if mounted:
            subprocess.run(["umount", str(mount)], check=True)


def test_the_disk_filling_up_while_a_dump_is_written(tmp_path: Path) -> None:
    model = long_model(tmp_path, count=50)  # 100 values of 256 KB: 25 MB of dump
    with small_disk(tmp_path) as (disk, limit):
        run = subprocess.run(
            [sys.executable, "-m", "graph_dap", "dump", str(model), "--out", str(disk / "run.npz")],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            **limit,  # type: ignore[arg-type]
        )
        assert run.returncode == 2, run.stderr
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and "cannot write the dump" in lines[0], run.stderr
        assert "No space left" in lines[0] or "File too large" in lines[0]
        assert os.listdir(disk) == []  # no dump, no side file, no temporary file


@pytest.mark.long
def test_the_process_killed_in_the_middle_of_a_dump_leaves_nothing_under_the_final_name(tmp_path: Path) -> None:
    model = long_model(tmp_path, count=400)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "graph_dap", "dump", str(model), "--out", str(out / "run.npz")],
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT), GRAPH_DAP_LOG="runtime.tools.dump=trace"),
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # the dump is being written: its nodes are reported one by one
        if "values live" in line:
            break
    proc.kill()
    proc.wait(TIMEOUT)
    left = sorted(os.listdir(out))
    assert "run.npz" not in left and "run.npz.json" not in left, left
    assert all(name.startswith(".run.npz.") and name.endswith(".tmp") for name in left), left  # only the temporary name
    shutil.rmtree(out)


@pytest.mark.long
def test_a_short_soak_leaves_nothing_behind() -> None:
    """Ten-odd clients one after another on one TCP adapter (benchmarks/soak.py runs 1,000): no fd growth, no orphans."""
    result = soak(4)
    assert result["orphans"] == 0 and result["tracebacks"] == 0, result
    assert result["fds_at_end"] <= result["fds_after_warm_up"], result
