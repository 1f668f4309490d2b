"""What a run returns: why it stopped and where; and how a node is named in reports.

:meth:`Stop.to_dict` is the one serialization of a stop (the CLI's ``run --json``
report and the worker's stop message are made from it); :func:`node_ref` the one
way a report names a node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graph_dap.kinds import StopReason
from graph_dap.runtime.graph import Node

__all__ = ["PathStep", "Stop", "StopReason", "node_ref", "path_text"]


@dataclass(frozen=True, slots=True)
class PathStep:
    """One enclosing level of a position: the control-flow node, which of its graphs, and the iteration."""

    node: str  # id of the If/Loop/Scan node or of the call of a model-local function
    attribute: str  # "then_branch", "else_branch", "body", or the function's name
    iteration: int | None = None  # Loop and Scan: which iteration


def node_ref(node: Node, path: tuple[PathStep, ...] | None = None) -> dict[str, Any]:
    """A node as JSON reports name it: ``{id, name, op_type, index, path}``.

    ``name`` is its own name in the model ('' when it has none), ``index`` its place in its
    graph's node list, ``path`` the levels it is nested in, outermost first (``[]`` in the
    main graph), each ``{node, attribute, iteration}``: ``path`` when given (a stop's, with
    its iterations), else the node's own with no iterations. The CLI's reports, ``compare``
    and ``dump`` write it; a stop carries it to the adapter as
    ``graph_dap.worker.protocol.NodeRef``, which must have the same keys.
    """
    steps = path if path is not None else tuple(PathStep(s.node, s.attribute) for s in node.path)
    return {
        "id": node.id,
        "name": node.name,
        "op_type": node.op_type,
        "index": node.index,
        "path": [{"node": s.node, "attribute": s.attribute, "iteration": s.iteration} for s in steps],
    }


def path_text(path: tuple[PathStep, ...]) -> str:
    """``If_0 > then_branch > Loop_3 > body (iteration 5)``: where a node is, for people."""
    parts = []
    for s in path:
        parts.append(f"{s.node} > {s.attribute}" + (f" (iteration {s.iteration})" if s.iteration is not None else ""))
    return " > ".join(parts)


@dataclass(frozen=True, slots=True)
class Stop:
    """Where and why a run stopped.

    ``node`` is the node the stop is about: the next to run for entry, breakpoint,
    step, goto and pause; the node that failed for ``error``; the node whose output
    holds the NaN or Inf for ``nan``/``inf``, or breaks the tolerance for ``mismatch``
    (it has run; ``DebugSession.current`` is past it).
    """

    reason: StopReason
    node: Node | None
    message: str = ""
    value: str | None = None  # the value the stop is about (nan/inf/mismatch: the output that holds it)
    details: dict[str, Any] = field(default_factory=dict)
    breakpoint_ids: tuple[int, ...] = ()
    path: tuple[PathStep, ...] = ()  # the levels the node is nested in, outermost first; () in the main graph

    @property
    def completed(self) -> bool:
        """Whether the run reached the end of the graph (one that ``FAILED`` on the way ended without completing)."""
        return self.reason is StopReason.END

    def to_dict(self) -> dict[str, Any]:
        """``{reason, node, message, tensor, details, breakpoint_ids}``, ``node`` as :func:`node_ref` makes it."""
        return {
            "reason": self.reason.value,
            "node": None if self.node is None else node_ref(self.node, self.path),
            "message": self.message,
            "tensor": self.value,  # the report's key, which users read, stays "tensor"
            "details": self.details,
            "breakpoint_ids": list(self.breakpoint_ids),
        }
