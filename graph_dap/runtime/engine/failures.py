"""Where inside a control-flow node onnxruntime failed, read from its message.

onnxruntime reports a failure inside an If, Loop or Scan body as a chain, outermost first:
``Non-zero status code returned while running If node. Name:'outer' Status Message: ... running
Pad node. Name:'bad_pad' Status Message: Pad reflect: ...``. A debugger that runs the body's
nodes itself finds the failing node by stepping in: worth doing when the chain names a node
inside the one that failed.
"""

from __future__ import annotations

import re

from graph_dap.runtime.graph import Graph, Node

_NAMED = re.compile(r"running \S+ node\. Name:'([^']*)'")


def names_in(message: str) -> list[str]:
    """The node names onnxruntime's message gives, outermost first."""
    return _NAMED.findall(message)


def failed_inside(graph: Graph, node: Node, message: str) -> bool:
    """Whether ``message`` (onnxruntime's, for ``node`` run whole) names a node inside ``node``'s bodies, at any depth."""
    if not node.enterable:
        return False
    named = set(names_in(message)) - {node.name}
    if not named:
        return False
    return any(inner.name in named and any(step.node == node.id for step in inner.path) for inner in graph.all_nodes())
