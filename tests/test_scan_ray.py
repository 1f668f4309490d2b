"""graph-dap scan on Ray: a local Ray gives the local pool's results, a killed worker's shard runs again, a resumed scan.

One Ray cluster (``ray start --head``, loopback only) serves the module; one scan starts
its own local Ray (``--ray`` without an address). Kept few: Ray takes seconds to start.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from scan_inputs import clean_x, fault_chain_model, poisoned

pytest.importorskip("ray")

TESTS = Path(__file__).resolve().parent
RAY = Path(sys.executable).with_name("ray")
_TIMING = ("seconds", "worker", "replay", "failing_file")  # what may differ between two scans of the same inputs
_TOKEN = secrets.token_hex(16)  # the clusters' authentication token (nothing written to ~/.ray)


def _env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p),
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # the cluster's servers listen on loopback only
        "RAY_AUTH_MODE": "token",  # a driver joining by address uses the token only when told to
        "RAY_AUTH_TOKEN": _TOKEN,
        **extra,
    }


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A one-node Ray cluster on 127.0.0.1 (2 CPUs); its address. The tests that use it are one xdist group
    (``ray_cluster``), so that one worker starts it: spread over two, each started one (8 s, side by side)."""
    temp = tempfile.mkdtemp(prefix="gdray", dir="/tmp")  # short: Ray's socket paths live under it
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [str(RAY), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=2", "--include-dashboard=false",
           "--disable-usage-stats", f"--temp-dir={temp}", "--block"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), start_new_session=True)
    watchdog = threading.Timer(180, lambda: os.killpg(proc.pid, signal.SIGKILL))
    watchdog.start()
    seen = []
    for line in proc.stdout:  # type: ignore[union-attr]
        seen.append(line)
        if "Ray runtime started" in line:
            break
    watchdog.cancel()
    if proc.poll() is not None:
        pytest.fail("ray start failed:\n" + "".join(seen[-30:]))
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # a test cluster: no graceful stop (SIGTERM takes ray start 30 s)
        proc.wait(timeout=30)
        _kill_leftovers(temp)
        shutil.rmtree(temp, ignore_errors=True)


def _kill_leftovers(temp: str) -> None:
    """Ray processes of this cluster that outlived its group (they name its temp folder), by pid."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if temp in args:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def scan(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, list[dict[str, Any]], str]:
    run = subprocess.run([sys.executable, "-m", "graph_dap", "scan", *args, "--json"], capture_output=True, text=True,
                         env=env or _env(), cwd=cwd, timeout=300)
    # every line of stdout is one of scan's JSON objects (Ray's own lines, "(raylet) A worker died...", go to stderr)
    return run.returncode, [json.loads(line) for line in run.stdout.splitlines()], run.stderr


def results(out: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in json.loads((out / "scan.json").read_text())["results"]}


def test_a_local_ray_finds_what_the_local_pool_finds(tmp_path):
    onnx.save(fault_chain_model(), tmp_path / "chain.onnx")
    data = tmp_path / "data"
    data.mkdir()
    for i in range(8):
        np.savez(data / f"in_{i}.npz", x=poisoned(("nan", "inf", "ninf")[i % 3], i) if i in (2, 5, 6) else clean_x(i))
    np.savez(data / "wrong.npz", x=clean_x(0)[:, :2].astype(np.int32))
    local = scan(str(tmp_path / "chain.onnx"), "--inputs", str(data), "--out", str(tmp_path / "local"), "--workers", "2")
    ray = scan(str(tmp_path / "chain.onnx"), "--inputs", str(data), "--out", str(tmp_path / "ray"), "--ray", "--ship", "--shard-size", "3")
    assert local[0] == ray[0] == 1, ray[2][-2000:]
    assert ray[1][-1]["backend"]["backend"] == "ray" and ray[1][-1]["backend"]["ship"] is True
    a, b = results(tmp_path / "local"), results(tmp_path / "ray")
    assert sorted(a) == sorted(b) and len(a) == 9
    for k in a:
        assert {f: v for f, v in a[k].items() if f not in _TIMING} == {f: v for f, v in b[k].items() if f not in _TIMING}, k
    assert {k: r["status"] for k, r in b.items() if r["status"] != "clean"} == {"in_2": "inf", "in_5": "inf", "in_6": "nan", "wrong": "invalid"}
    assert (tmp_path / "ray" / "failing" / "in_6.npz").is_file()


@pytest.mark.xdist_group("ray_cluster")
def test_a_dead_ray_worker_has_its_shard_run_again_and_an_input_that_kills_workers_is_reported(cluster, tmp_path):
    onnx.save(fault_chain_model(), tmp_path / "chain.onnx")
    env = _env(SCAN_MARKER=str(tmp_path / "died-once"))
    code, events, err = scan(str(tmp_path / "chain.onnx"), "--inputs-from", "scan_inputs:killers", "--out", str(tmp_path / "o"),
                             "--ray", cluster, "--workers", "2", "--shard-size", "4", env=env, cwd=tmp_path)
    assert code == 1, err[-3000:]
    got = results(tmp_path / "o")
    assert len(got) == 10
    assert {k: r["status"] for k, r in got.items() if r["status"] != "clean"} == {"item_000007": "crash"}
    assert got["item_000003"]["attempts"] == 2 and got["item_000003"]["outputs"]["y"]["shape"] == [2, 2]
    assert "alone, twice" in got["item_000007"]["message"]
    # Results in flight when a worker dies are lost with it: the inputs not reported then run again, each alone.
    incidents = [e["message"] for e in events if e["event"] == "incident"]
    assert len(incidents) >= 3 and all(m.startswith("worker ") and " died " in m for m in incidents)
    assert sum("item_000007 again: reported as a crash" in m for m in incidents) == 1


@pytest.mark.xdist_group("ray_cluster")
def test_an_interrupted_ray_scan_resumes(cluster, tmp_path):
    onnx.save(fault_chain_model(), tmp_path / "chain.onnx")
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    cmd = [sys.executable, "-m", "graph_dap", "scan", str(tmp_path / "chain.onnx"), "--inputs-from", "scan_inputs:gated",
           "--out", str(tmp_path / "o"), "--ray", cluster, "--json"]
    env = _env(SCAN_GATE=str(gate))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=tmp_path)
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            event = json.loads(line)
            if event["event"] == "saved" and event["done"] >= 1:
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    before = results(tmp_path / "o")
    assert 1 <= len(before) <= 3
    env.pop("SCAN_GATE")
    code, events, err = scan(*cmd[4:-1], "--resume", env=env, cwd=tmp_path)
    assert code == 0, err[-3000:]
    end = events[-1]
    assert (end["resumed"], end["ran"], end["done"]) == (len(before), 10 - len(before), 10)
    after = results(tmp_path / "o")
    assert sorted(after) == [f"item_{i:06d}" for i in range(10)] and all(after[k] == v for k, v in before.items())
