"""Code actions and code lenses on a node's line: "Run to here" and "Break on every <op>".

They are commands for the editor (the server runs nothing): ``graphDap.runToNode`` with
``{"model", "node", "uri", "line"}`` and ``graphDap.breakOnOpType`` with ``{"opType"}``;
the VS Code extension forwards them to the active debug session (the custom request
``graphDap/runTo``, a function breakpoint ``op:TYPE``).
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from graph_dap.lsp.analysis import Analysis
from graph_dap.runtime.graph import Node

RUN_TO_NODE = "graphDap.runToNode"
BREAK_ON_OP_TYPE = "graphDap.breakOnOpType"


def _commands(a: Analysis, uri: str, node: Node, line: int) -> list[types.Command]:
    run: dict[str, Any] = {"model": str(a.version.path), "node": node.id, "uri": uri, "line": line - 1}
    cmds = []
    if not node.is_constant:
        cmds.append(types.Command(title=f"Run to {node.id}", command=RUN_TO_NODE, arguments=[run]))
    cmds.append(types.Command(title=f"Break on every {node.op_type}", command=BREAK_ON_OP_TYPE, arguments=[{"opType": node.op_type}]))
    return cmds


def code_actions(a: Analysis, uri: str, first: int, last: int) -> list[types.Command]:
    """The actions of the node lines in ``first..last`` (1-based listing lines), as plain commands."""
    out = []
    for line in range(first, last + 1):
        node = a.index.node_on(line)
        if node is not None:
            out += _commands(a, uri, node, line)
    return out


def code_lenses(a: Analysis, uri: str) -> list[types.CodeLens]:
    """A lens per command above every node line."""
    out = []
    for node in a.graph.nodes:
        line = a.listing.line_of(node.id)
        if line is None:
            continue
        rng = types.Range(types.Position(line - 1, 0), types.Position(line - 1, 0))
        titles = {RUN_TO_NODE: "▶ Run to here", BREAK_ON_OP_TYPE: f"Break on every {node.op_type}"}
        for cmd in _commands(a, uri, node, line):
            out.append(types.CodeLens(range=rng, command=types.Command(title=titles[cmd.command], command=cmd.command, arguments=cmd.arguments)))
    return out
