"""The one exception hierarchy of graph-dap's runtime.

Every error a user can cause (a bad model, bad inputs, a bad expression, a bad
breakpoint) is a :class:`GraphDapError` whose message says what is wrong and what
was expected. Only the CLI's and the adapter's top levels catch them broadly.
"""

from __future__ import annotations


class GraphDapError(Exception):
    """Base of every error graph-dap raises on purpose."""


class ModelError(GraphDapError):
    """The model cannot be loaded or is not a valid graph (cycle, dangling input...)."""


class InputError(GraphDapError):
    """Inputs given for the model do not match what it declares."""


class OptionError(GraphDapError):
    """An option given a value it does not take (an optimization level, a provider...)."""


class ExpressionError(GraphDapError):
    """A tensor expression is refused (not allowed) or fails while evaluating."""


class BreakpointError(GraphDapError):
    """A breakpoint specification cannot be understood."""


class ValueNotFoundError(GraphDapError):
    """A value name that the graph does not have, or that is not computed yet."""


class NodeNotFoundError(GraphDapError):
    """A node id that the graph does not have."""


class NodeExecutionError(GraphDapError):
    """onnxruntime rejected or failed on one node; carries the node's id."""

    def __init__(self, node_id: str, op_type: str, message: str) -> None:
        super().__init__(f"node {node_id} ({op_type}) failed in onnxruntime: {message}")
        self.node_id = node_id
        self.op_type = op_type
        self.ort_message = message
