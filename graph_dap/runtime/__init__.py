"""graph-dap's engine: load a model, run it node by node through onnxruntime, stop, inspect.

Usable on its own from Python; it knows nothing of DAP.
"""

from __future__ import annotations

from .breakpoints import Breakpoint, BreakpointSpec
from .errors import (
    BreakpointError,
    ExpressionError,
    GraphDapError,
    InputError,
    ModelError,
    NodeExecutionError,
    ValueNotFoundError,
)
from .graph import Graph, Node, ValueInfo, load_graph
from .inputs import resolve_inputs
from .listing import Listing, render_listing
from .session import DebugSession, Stop, StopReason
from .tensor import TensorSummary, summarize

__all__ = [
    "Breakpoint",
    "BreakpointError",
    "BreakpointSpec",
    "DebugSession",
    "ExpressionError",
    "Graph",
    "GraphDapError",
    "InputError",
    "Listing",
    "ModelError",
    "Node",
    "NodeExecutionError",
    "Stop",
    "StopReason",
    "TensorSummary",
    "ValueInfo",
    "ValueNotFoundError",
    "load_graph",
    "render_listing",
    "resolve_inputs",
    "summarize",
]
