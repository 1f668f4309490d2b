"""Processes in the tests: the checkout they import graph-dap from, a server's children, a server that prints its address."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (those its main thread started), from /proc."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


@contextlib.contextmanager
def listening(
    args: list[str], banner: str, env: dict[str, str] | None = None, stop: str = "terminate", started: list[int] | None = None
) -> Iterator[str]:
    """Run ``python ARGS`` (a server that prints ``BANNER HOST:PORT``) and yield ``HOST:PORT``.

    On exit the server is stopped (``terminate`` or ``kill``) and must not have printed a traceback.
    ``started``: gets the server's pid.
    """
    proc = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env if env is not None else dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.stdout is not None
    if started is not None:
        started.append(proc.pid)
    try:
        line = proc.stdout.readline()
        assert line.startswith(banner), line
        yield line.split()[-1]
    finally:
        getattr(proc, stop)()
        proc.wait()
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
