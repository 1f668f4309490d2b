"""Where graph-dap's code is, and the environment of a child process that must import it.

A leaf: every process graph-dap starts (a worker, debugpy's adapter, a program under the
host, ``graph-dap run`` from ``run-script``) gets this checkout first on its ``PYTHONPATH``,
so that it runs the same graph-dap as its parent, installed or not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: The folder that holds the ``graph_dap`` package (the checkout, or site-packages).
ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
#: The ``graph_dap`` package's own folder, with a trailing separator (to tell its files from the user's).
PACKAGE = os.path.join(ROOT, "graph_dap") + os.sep


def python_path(env: Mapping[str, str | None], *first: str) -> str:
    """``env``'s ``PYTHONPATH`` with ``first`` and then graph-dap's :data:`ROOT` in front."""
    return os.pathsep.join(p for p in (*first, ROOT, env.get("PYTHONPATH") or "") if p)


def child_environment(env: Mapping[str, str] | None = None, *first: str) -> dict[str, str]:
    """``env`` (default: this process's) with graph-dap importable: :func:`python_path` as its ``PYTHONPATH``."""
    out = dict(os.environ if env is None else env)
    out["PYTHONPATH"] = python_path(out, *first)
    return out
