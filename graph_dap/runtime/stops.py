"""What a run returns: why it stopped and where."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from graph_dap.runtime.graph import Node


class StopReason(enum.Enum):
    """Why a run stopped."""

    ENTRY = "entry"
    BREAKPOINT = "breakpoint"
    NAN = "nan"
    INF = "inf"
    ERROR = "error"
    STEP = "step"
    GOTO = "goto"
    PAUSE = "pause"
    END = "end"
    FAILED = "failed"  # a node failed with the error filter off: the run ended there, not at the end


@dataclass(frozen=True, slots=True)
class PathStep:
    """One enclosing level of a position: the control-flow node, which of its graphs, and the iteration."""

    node: str  # id of the If/Loop/Scan node or of the call of a model-local function
    attribute: str  # "then_branch", "else_branch", "body", or the function's name
    iteration: int | None = None  # Loop and Scan: which iteration

    def text(self) -> str:
        at = f" iteration {self.iteration}" if self.iteration is not None else ""
        return f"{self.node} > {self.attribute}{at}"


@dataclass(frozen=True, slots=True)
class Stop:
    """Where and why a run stopped.

    ``node`` is the node the stop is about: the next to run for entry, breakpoint,
    step, goto and pause; the node that failed for ``error``; the node whose output
    holds the NaN or Inf for ``nan``/``inf`` (it has run; ``DebugSession.pc`` is past it).
    """

    reason: StopReason
    node: Node | None
    message: str = ""
    tensor: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    breakpoint_ids: tuple[int, ...] = ()
    path: tuple[PathStep, ...] = ()  # the levels the node is nested in, outermost first; () in the main graph

    def to_dict(self) -> dict[str, Any]:
        n = self.node
        return {
            "reason": self.reason.value,
            "node": None if n is None else {"name": n.id, "op_type": n.op_type, "index": n.index},
            "message": self.message,
            "tensor": self.tensor,
            "details": self.details,
            "breakpoint_ids": list(self.breakpoint_ids),
        }
