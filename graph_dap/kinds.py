"""The closed sets that cross the process boundaries or the folders, one ``str`` enum each: one word per concept.

A leaf (no numpy, nothing of graph_dap): the runtime, the worker's protocol, the
adapter, the host, the CLI and the language server all import it. The members are
``str``: they go over msgpack and JSON as their values, and compare equal to them
(``StopReason.NAN == "nan"``), so a value read from a launch or a message is made a
member once, at the edge (``BreakFilter(text)``), and compared as one after that.
A closed set that one folder uses alone is an enum beside its user (``ScanStatus``, ``Metric``, ``ScopeKind``...).
"""

from __future__ import annotations

import enum

__all__ = ["FAULT_FILTERS", "VALUE_FILTERS", "BreakFilter", "Fault", "FaultStops", "OptLevel", "RunAction", "SourceKind", "StopReason", "ValueKind"]


class _Closed(enum.StrEnum):
    """A closed set of words."""

    @classmethod
    def values(cls) -> tuple[str, ...]:
        """The words, in order (argparse's ``choices``, "expected one of ..." messages)."""
        return tuple(member.value for member in cls)


class StopReason(_Closed):
    """Why a run stopped."""

    ENTRY = "entry"
    BREAKPOINT = "breakpoint"
    NAN = "nan"
    INF = "inf"
    ERROR = "error"
    MISMATCH = "mismatch"  # a divergence from the reference of a comparison in lockstep
    STEP = "step"
    GOTO = "goto"
    PAUSE = "pause"
    END = "end"
    FAILED = "failed"  # a node failed with the error filter off: the run ended there, not at the end


class BreakFilter(_Closed):
    """The exception filters: what makes a run stop besides breakpoints (the DAP ``exceptionBreakpointFilters``)."""

    NAN = "nan"  # a node's output holds NaN
    INF = "inf"  # a node's output holds +Inf or -Inf
    ERROR = "error"  # onnxruntime fails on a node
    MISMATCH = "mismatch"  # a node's outputs break the tolerance of the reference (a comparison in lockstep)


#: The filters that watch the values a node writes.
VALUE_FILTERS = (BreakFilter.NAN, BreakFilter.INF)
#: The filters a session itself honours (``mismatch`` needs a reference, and is the comparison's).
FAULT_FILTERS = (*VALUE_FILTERS, BreakFilter.ERROR)


class Fault(_Closed):
    """What a watched value was found to hold (its words are the stop reasons'), or that it is somewhere inside."""

    NAN = "nan"
    INF = "inf"
    INNER = "inner"  # a control-flow node's bodies: the session steps into it to find the node


class FaultStops(_Closed):
    """After a NaN/Inf stop, which nodes stop the run again."""

    NEW = "new"  # a node that makes a new NaN or Inf from finite inputs
    EVERY = "every"  # every node whose output holds one, those that only carry it on too


class OptLevel(_Closed):
    """onnxruntime's graph optimization levels, as launches, the CLI and the worker name them."""

    NONE = "none"
    BASIC = "basic"
    EXTENDED = "extended"
    ALL = "all"


class RunAction(_Closed):
    """How a debugged ``InferenceSession.run`` call of a program ends (the adapter's answer to the host)."""

    OUTPUTS = "outputs"  # return the outputs graph-dap's run reached (an ``.npz``)
    PLAIN = "plain"  # run it in onnxruntime as it is
    RAISE = "raise"  # the graph failed: raise onnxruntime's error


class SourceKind(_Closed):
    """What a node's source is: its Python frames, its module scopes, or nothing known."""

    PYTHON = "python"
    MODULE = "module"
    NONE = "none"


class ValueKind(_Closed):
    """What a value of the graph is: a tensor, a sequence, a map, an optional, or a type the model does not say."""

    TENSOR = "tensor"
    SEQUENCE = "sequence"
    MAP = "map"
    OPTIONAL = "optional"  # a summary's: an optional without a value
    UNKNOWN = "unknown"
