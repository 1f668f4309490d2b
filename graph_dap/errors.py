"""The one exception hierarchy of graph-dap.

Every error a user can cause (a bad model, bad inputs, a bad expression, a bad
breakpoint, a bad reference) is a :class:`GraphDapError` subclass whose message says
what is wrong and what was expected. Only the CLI's and the adapter's top levels (and
the worker's reply to each call) catch them broadly.

An error raised in the worker process crosses to the adapter as its kind (the class
name) and its message; :func:`error_of_kind` makes the same class again on the
adapter's side, so that the adapter catches errors by type.
"""

from __future__ import annotations


class GraphDapError(Exception):
    """Base of every error graph-dap raises on purpose."""


# -- the model and its run -----------------------------------------------------------


class ModelError(GraphDapError):
    """The model cannot be loaded or is not a valid graph (cycle, dangling input...)."""


class InputError(GraphDapError):
    """Inputs given for the model do not match what it declares."""


class OptionError(GraphDapError):
    """An option given a value it does not take (an optimization level, a provider...)."""


class ExpressionError(GraphDapError):
    """A tensor expression is refused (not allowed) or fails while evaluating."""


class UnknownNameError(ExpressionError):
    """An expression reads a name that is neither a value of the graph nor a constant of the language."""

    name: str = ""  # the name as written (empty when the error was rebuilt from its message)
    known: bool = False  # the graph has the value, but it is not computed yet (the message says where it is made)

    def __init__(self, name: str, not_computed: str = "") -> None:
        super().__init__(not_computed or f"unknown value {name!r}")
        self.name = name
        self.known = bool(not_computed)


class BreakpointError(GraphDapError):
    """A breakpoint specification cannot be understood."""


class ValueNotFoundError(GraphDapError):
    """A value name that the graph does not have, or that is not computed yet."""


class ValueKindError(GraphDapError):
    """A value is not of the kind an operation needs: a sequence where a tensor is wanted, strings where numbers are."""


class BadIndexError(GraphDapError):
    """An index into a tensor that is out of range or has more axes than the tensor."""


class NodeNotFoundError(GraphDapError):
    """A node id that the graph does not have."""


class NodeExecutionError(GraphDapError):
    """onnxruntime rejected or failed on one node; carries the node's id."""

    node_id: str = ""  # empty when the error was rebuilt from its message
    op_type: str = ""
    ort_message: str = ""

    def __init__(self, node_id: str, op_type: str, message: str) -> None:
        super().__init__(f"node {node_id} ({op_type}) failed in onnxruntime: {message}")
        self.node_id = node_id
        self.op_type = op_type
        self.ort_message = message


# -- the tools -----------------------------------------------------------------------


class CompareError(GraphDapError):
    """A comparison cannot be set up (no reference, bad reference, bad tolerance, nothing in common)."""


class DumpError(GraphDapError):
    """A dump cannot be written or read."""


class ProfileError(GraphDapError):
    """A profile cannot be taken."""


class OverlayError(GraphDapError):
    """A file given to the graph view as an overlay is not the JSON of compare, profile or scan."""


class InjectionError(GraphDapError):
    """A value to set cannot be used: the model or the dump lacks it, its file is unreadable, the session refuses it."""


class InjectionSpecError(InjectionError):
    """A ``--set`` or ``--set-from`` item is not written as expected (a usage error)."""


# -- the worker process --------------------------------------------------------------


class ProtocolError(GraphDapError):
    """A message across the worker boundary has the wrong shape: an unknown call, a missing or mistyped field."""


class NotLoadedError(GraphDapError):
    """A call that needs a model before one is loaded."""


class AddressError(GraphDapError):
    """A worker address that is not ``HOST:PORT``."""


class WorkerDied(GraphDapError):
    """The worker process ended or its connection was lost while calls were pending."""


class WorkerMemoryError(GraphDapError):
    """The worker ran out of memory during a call (the call failed; the worker goes on)."""


class InternalError(GraphDapError):
    """A bug in the worker: the message names the exception; its traceback is in the worker's stderr."""


def _kinds() -> dict[str, type[GraphDapError]]:
    found: dict[str, type[GraphDapError]] = {}
    pending: list[type[GraphDapError]] = [GraphDapError]
    while pending:
        cls = pending.pop()
        if cls.__module__ == __name__:
            found[cls.__name__] = cls
        pending += cls.__subclasses__()
    return found


def error_of_kind(kind: str, message: str) -> GraphDapError:
    """The error of class ``kind`` (a class of this module) with ``message``, as raised in another process.

    Attributes other than the message do not cross; an unknown kind gives the base class.
    """
    cls = _kinds().get(kind, GraphDapError)
    error = cls.__new__(cls)
    GraphDapError.__init__(error, message)
    return error
