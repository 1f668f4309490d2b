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
