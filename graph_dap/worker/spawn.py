"""Starting a local worker process (``python -m graph_dap.worker``), with nothing heavy imported.

The adapter on stdio starts its worker first thing (:func:`start`), before it imports asyncio and its own
modules, so that the worker's imports (numpy, onnx, onnxruntime: about a quarter of a second) run beside
the adapter's instead of after its ``initialize``; :meth:`.client.WorkerClient.adopt` then talks to it.
"""

from __future__ import annotations

import subprocess
import sys

from graph_dap.paths import child_environment


def command(python: str = sys.executable) -> list[str]:
    return [python, "-m", "graph_dap.worker"]


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with graph-dap importable and the worker's output unbuffered."""
    out = child_environment(env)
    out.setdefault("PYTHONUNBUFFERED", "1")
    return out


def start(python: str = sys.executable) -> subprocess.Popen[bytes]:
    """The worker process, with pipes to talk to it; OSError when it cannot be started."""
    return subprocess.Popen(
        command(python), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment()
    )
