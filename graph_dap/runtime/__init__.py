"""graph-dap's engine: load a model, run it node by node through onnxruntime, stop, inspect.

Usable on its own from Python; it knows nothing of DAP. Names are imported on first
use, so that a light module of the package (the worker's client, used by the adapter)
does not pay for numpy, onnx and onnxruntime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Breakpoint": ".breakpoints",
    "BreakpointSpec": ".breakpoints",
    "BreakpointError": ".errors",
    "ExpressionError": ".errors",
    "GraphDapError": ".errors",
    "InputError": ".errors",
    "ModelError": ".errors",
    "NodeExecutionError": ".errors",
    "ValueNotFoundError": ".errors",
    "Graph": ".graph",
    "Node": ".graph",
    "ValueInfo": ".graph",
    "load_graph": ".graph",
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
    from .session import DebugSession
    from .stops import Stop, StopReason
    from .tensor import TensorSummary, summarize


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
