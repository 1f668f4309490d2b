"""graph-dap's engine: load a model, run it node by node through onnxruntime, stop, inspect.

Usable on its own from Python; it knows nothing of DAP. Names are imported on first
use, so that a command that needs few of them (``graph-dap --help``) does not pay for
numpy, onnx and onnxruntime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Breakpoint": ".breakpoints",
    "BreakpointSpec": ".breakpoints",
    "BreakpointError": "graph_dap.errors",
    "ExpressionError": "graph_dap.errors",
    "GraphDapError": "graph_dap.errors",
    "InputError": "graph_dap.errors",
    "ModelError": "graph_dap.errors",
    "NodeNotFoundError": "graph_dap.errors",
    "NodeExecutionError": "graph_dap.errors",
    "ValueNotFoundError": "graph_dap.errors",
    "Graph": ".graph",
    "Node": ".graph",
    "ValueInfo": ".graph",
    "load_graph": ".loading",
    "resolve_inputs": ".inputs",
    "Listing": ".listing",
    "render_listing": ".listing",
    "DebugSession": ".session",
    "Stop": ".stops",
    "StopReason": ".stops",
    "TensorSummary": ".tensor",
    "summarize": ".tensor",
}

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
    "NodeNotFoundError",
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

if TYPE_CHECKING:
    from graph_dap.errors import (
        BreakpointError,
        ExpressionError,
        GraphDapError,
        InputError,
        ModelError,
        NodeExecutionError,
        ValueNotFoundError,
    )
    from graph_dap.runtime.breakpoints import Breakpoint, BreakpointSpec
    from graph_dap.runtime.graph import Graph, Node, ValueInfo
    from graph_dap.runtime.inputs import resolve_inputs
    from graph_dap.runtime.listing import Listing, render_listing
    from graph_dap.runtime.loading import load_graph
    from graph_dap.runtime.session import DebugSession
    from graph_dap.runtime.stops import Stop, StopReason
    from graph_dap.runtime.tensor import TensorSummary, summarize


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
