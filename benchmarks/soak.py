"""Soak: launch / continue / stepBack / disconnect cycles against one TCP adapter, clients one after another.

    python benchmarks/soak.py --cycles 1000 [--json out.json]

Each cycle is a new client: initialize, launch a small model with a breakpoint, continue
(to the breakpoint), stepBack, disconnect. The adapter's RSS and open file descriptors are
read from /proc after a warm-up (10 cycles) and at the end, with the processes it left
(there must be none once the last client is gone). Targets (issue 15): RSS growth at most
20 MB, no fd growth, no orphans. ``tests/test_faults.py`` runs a short version.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from dap_client import DapClient  # noqa: E402
from models import chain_files as chain_model  # noqa: E402

WARM_UP = 10


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (zombies not counted: they are reaped by their parent)."""
    out: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except FileNotFoundError:
            continue
        for k in kids:
            try:
                with open(f"/proc/{k}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                continue
            if state != "Z":
                out.append(k)
                stack.append(k)
    return out


def start_adapter() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "graph_dap.adapter", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("graph-dap adapter listening on"):
        raise RuntimeError(f"the adapter did not start: {line!r}")
    return proc, int(line.rsplit(":", 1)[1])


def cycle(port: int, model: Path, inputs: Path, timeout: float) -> None:
    client = DapClient.tcp("127.0.0.1", port, timeout)
    try:
        client.initialize()
        seq = client.send("launch", {"model": str(model), "inputs": str(inputs)})
        if not client.response(seq, timeout)["success"]:
            raise RuntimeError("the launch failed")
        client.wait_for_event("initialized", timeout)
        client.request("setFunctionBreakpoints", breakpoints=[{"name": "add1"}], timeout=timeout)
        client.request("configurationDone", timeout=timeout)
        client.wait_for_stop("function breakpoint", timeout)
        client.request("stepBack", threadId=1)
        client.wait_for_stop("step", timeout)
    finally:
        client.disconnect()


def wait_for_no_descendants(pid: int, timeout: float) -> list[int]:
    """The adapter closes a worker after its client leaves: wait (bounded) until none is left, else say which are."""
    deadline = time.monotonic() + timeout
    while True:
        left = descendants(pid)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def soak(cycles: int, timeout: float = 60.0) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="graph-dap-soak-"))
    model, inputs, _ = chain_model(folder)
    proc, port = start_adapter()
    try:
        started = time.monotonic()
        before: dict[str, int] = {}
        slowest = 0.0
        for i in range(cycles):
            began = time.monotonic()
            cycle(port, model, inputs, timeout)
            slowest = max(slowest, time.monotonic() - began)
            if i + 1 == min(WARM_UP, cycles):
                wait_for_no_descendants(proc.pid, timeout)
                before = {"rss_kb": rss_kb(proc.pid), "fds": fds(proc.pid)}
            if (i + 1) % 50 == 0:
                now = {"cycle": i + 1, "seconds": round(time.monotonic() - started), "rss_kb": rss_kb(proc.pid), "fds": fds(proc.pid)}
                print(json.dumps({**now, "rss_growth_mb": round((now["rss_kb"] - before["rss_kb"]) / 1024, 1)}), file=sys.stderr, flush=True)
        orphans = wait_for_no_descendants(proc.pid, timeout)
        after = {"rss_kb": rss_kb(proc.pid), "fds": fds(proc.pid)}
        seconds = time.monotonic() - started
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=timeout)
    return {
        "cycles": cycles,
        "seconds": round(seconds, 1),
        "slowest_cycle_s": round(slowest, 2),
        "rss_mb_after_warm_up": round(before["rss_kb"] / 1024, 1),
        "rss_mb_at_end": round(after["rss_kb"] / 1024, 1),
        "rss_growth_mb": round((after["rss_kb"] - before["rss_kb"]) / 1024, 1),
        "fds_after_warm_up": before["fds"],
        "fds_at_end": after["fds"],
        "orphans": len(orphans),
        "tracebacks": stderr.count("Traceback"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--json", help="write the figures to this file too")
    args = parser.parse_args()
    result = soak(args.cycles)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    ok = result["rss_growth_mb"] <= 20 and result["fds_at_end"] <= result["fds_after_warm_up"] and not result["orphans"]
    return 0 if ok and not result["tracebacks"] else 1


if __name__ == "__main__":
    sys.exit(main())
