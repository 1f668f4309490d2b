"""Paths: where graph-dap's code is, the environment of a child process that must import it, and the
paths that stack traces name.

A leaf. Every process graph-dap starts (a worker, debugpy's adapter, a program under the
host, ``graph-dap run`` from ``run-script``) gets this checkout first on its ``PYTHONPATH``,
so that it runs the same graph-dap as its parent, installed or not. The paths of a model's
stack traces are the exporting machine's (maybe another OS): the runtime reads them
(:mod:`graph_dap.runtime.graph.source`) and the adapter finds them here
(:mod:`graph_dap.adapter.sources`) with the same helpers.
"""

from __future__ import annotations

import os
import re
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


# -- the paths of stack traces -------------------------------------------------------------

#: The package whose files are library code in a stack trace (the exporter's own frames).
LIBRARY = "torch"


def split_path(path: str) -> list[str]:
    """A path's components, for ``/`` and ``\\`` alike (stack traces may come from another OS)."""
    return [p for p in re.split(r"[\\/]+", path) if p]


def is_library(path: str) -> bool:
    """Whether a frame's file is torch's own code: inside a ``torch/`` package folder."""
    return LIBRARY in split_path(path)[:-1]


def tail_length(a: str, b: str) -> int:
    """How many trailing path components ``a`` and ``b`` share (``x/model.py`` and ``y/model.py``: 1)."""
    pa, pb = split_path(a), split_path(b)
    n = 0
    while n < min(len(pa), len(pb)) and pa[-1 - n] == pb[-1 - n]:
        n += 1
    return n


def same_file(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one file (compared as resolved paths when one cannot be read)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))
