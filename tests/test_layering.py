"""The runtime never imports the adapter: it is usable on its own."""

from __future__ import annotations

import ast
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[1] / "graph_dap" / "runtime"


def test_runtime_does_not_import_the_adapter():
    offenders = []
    for path in RUNTIME.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")]
            for name in names:
                if "adapter" in name.split("."):
                    offenders.append(f"{path.name}: {name}")
    assert RUNTIME.is_dir() and not offenders, offenders
