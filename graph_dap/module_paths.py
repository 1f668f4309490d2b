"""Module paths of a model's source (``model.layers.8.mlp``) and the patterns that name them (``module:model.layers.*``).

A leaf: the runtime chooses nodes by them (:mod:`graph_dap.runtime.selection`), and the adapter resolves a
program launch's function breakpoints with them before any graph session exists (it loads no runtime).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

#: The prefix of a pattern over module paths.
MODULE = "module:"
_GLOB = re.compile(r"[*?\[]")


def in_module(paths: Sequence[str], pattern: str) -> bool:
    """Whether a node that ran in the modules ``paths`` (outermost first) is inside a module ``pattern`` names: that
    module or one in it (a glob names several; a trailing ``.*`` takes the module itself too)."""
    pattern = pattern.strip()
    if not _GLOB.search(pattern):
        return pattern in paths
    base = pattern[:-2] if pattern.endswith(".*") else None
    return any(fnmatch.fnmatchcase(p, pattern) or p == base for p in paths if p)
