"""The worker's messages, defined once for both sides: dataclasses and one encode/decode.

The adapter (:mod:`graph_dap.worker.client`) and the worker (:mod:`.service`) exchange
msgpack objects; every call's arguments and result is a frozen dataclass here, and
:data:`METHODS` names each call with both. :func:`encode` turns a dataclass into plain
data, :func:`decode` makes it again and checks every field's type on the way, raising
:class:`~graph_dap.errors.ProtocolError` that says which field is wrong (both from
:mod:`graph_dap.worker.codec`).

Envelopes, one msgpack object each:

- request ``{"id": int, "method": str, "args": {...}}``
- response ``{"id": int, "result": ...}`` or ``{"id": int, "error": {"kind": str, "message": str}}``;
  ``kind`` is the name of a :mod:`graph_dap.errors` class, raised again on the adapter's side
- event ``{"event": str, "body": {...}}`` (:class:`LogEvent`, :class:`ProgressEvent`, :class:`SummarizedEvent`)
- over TCP the client first sends ``{"token": str, "version": int}`` and the worker
  answers :class:`Hello`; a wrong token gets the connection closed with nothing sent back.

The messages live in :mod:`.results` (what the worker sends) and :mod:`.requests` (what the
adapter asks); this module names them all, with the events, the handshake and the calls.

No numpy, no onnx: the adapter imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from graph_dap.errors import AddressError
from graph_dap.worker.codec import decode, encode
from graph_dap.worker.protocol.requests import (
    MAX_PROFILE_REPEAT,
    BreakOnArgs,
    BreakpointsArgs,
    BreakpointSpec,
    ChildrenArgs,
    EvaluateArgs,
    LevelArgs,
    LoadArgs,
    NameArgs,
    NoArgs,
    ProfileArgs,
    QuantFormsArgs,
    ReadMemoryArgs,
    RunArgs,
    RunCommand,
    SavedOutputs,
    SaveOutputsArgs,
    SetValueArgs,
    SummariesArgs,
    TensorViewArgs,
    Tolerance,
)
from graph_dap.worker.protocol.results import (
    BreakpointResult,
    Child,
    ChildrenPage,
    DataTargets,
    Evaluated,
    FrameInfo,
    GraphInfo,
    Histogram,
    MemoryRead,
    NodeInfo,
    NodeRef,
    NodeSourceInfo,
    PathStep,
    Paused,
    QuantForm,
    QuantForms,
    Repeat,
    SourceFrameInfo,
    StopInfo,
    Summary,
    TensorView,
    ValueNames,
    ValueSet,
)

__all__ = [
    "MAX_PROFILE_REPEAT",
    "BreakOnArgs",
    "BreakpointResult",
    "BreakpointSpec",
    "BreakpointsArgs",
    "CHILDREN",
    "COMPARE_TABLE",
    "Child",
    "ChildrenArgs",
    "ChildrenPage",
    "DATA_TARGETS",
    "DataTargets",
    "EVALUATE",
    "EVENTS",
    "ErrorInfo",
    "EvaluateArgs",
    "Evaluated",
    "Event",
    "FrameInfo",
    "GraphInfo",
    "HELLO",
    "Hello",
    "Histogram",
    "JsonDocument",
    "LOAD",
    "LevelArgs",
    "LoadArgs",
    "LogEvent",
    "METHODS",
    "MemoryRead",
    "Method",
    "NameArgs",
    "NoArgs",
    "NodeInfo",
    "NodeRef",
    "NodeSourceInfo",
    "OUTPUTS",
    "PAUSE",
    "PROFILE",
    "PROTOCOL_VERSION",
    "PathStep",
    "Paused",
    "ProfileArgs",
    "QUANT_FORMS",
    "QuantForm",
    "QuantForms",
    "QuantFormsArgs",
    "ProgressEvent",
    "SummarizedEvent",
    "READ_MEMORY",
    "RUN",
    "ReadMemoryArgs",
    "Repeat",
    "RunArgs",
    "RunCommand",
    "SAVE_OUTPUTS",
    "SET_BREAKPOINTS",
    "SET_BREAK_ON",
    "SET_VALUE",
    "SHUTDOWN",
    "SOURCE",
    "SUMMARIES",
    "SaveOutputsArgs",
    "SavedOutputs",
    "SetValueArgs",
    "SourceFrameInfo",
    "StopInfo",
    "SummariesArgs",
    "Summary",
    "TENSOR_VIEW",
    "TensorView",
    "TensorViewArgs",
    "Tolerance",
    "VALUES",
    "ValueNames",
    "ValueSet",
    "WHERE",
    "decode_event",
    "error_message",
    "event_message",
    "parse_address",
    "request_message",
    "result_message",
]

#: Changes whenever a message changes shape; a TCP worker of another version is refused.
PROTOCOL_VERSION = 10
HELLO = "graph-dap-worker"

A = TypeVar("A")
R = TypeVar("R")


def parse_address(address: str) -> tuple[str, int]:
    """``"HOST:PORT"`` (or ``"[v6]:PORT"``, or just ``"PORT"`` for 127.0.0.1) as a pair."""
    host, sep, port = address.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", address
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise AddressError(f"bad worker address {address!r}: expected HOST:PORT")
    return host, int(port)


# -- events and the handshake ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogEvent:
    """A logpoint's line, for the debug console."""

    NAME: ClassVar[str] = "log"
    text: str


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """How far a run has got: ``done`` of ``total`` nodes."""

    NAME: ClassVar[str] = "progress"
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class SummarizedEvent:
    """The values a quick ``summaries`` call answered without their statistics (``names``, seen from ``level``: weights
    shape only, values the run did not keep by type) are summarized now: asked again, they come whole."""

    NAME: ClassVar[str] = "summarized"
    names: tuple[str, ...]
    level: int = 0


Event = LogEvent | ProgressEvent | SummarizedEvent
EVENTS: dict[str, type[LogEvent] | type[ProgressEvent] | type[SummarizedEvent]] = {
    LogEvent.NAME: LogEvent, ProgressEvent.NAME: ProgressEvent, SummarizedEvent.NAME: SummarizedEvent,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """A call that failed: the :mod:`graph_dap.errors` class of its error, and the message."""

    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class Hello:
    """The worker's first message over TCP, once the client has shown the token."""

    hello: str
    version: int
    pid: int


# -- the calls -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Method(Generic[A, R]):
    """One call: its name on the wire, its arguments' class and its result's type."""

    name: str
    args: type[A]
    result: Any  # a type form: a dataclass, tuple[X, ...] of them, dict[str, Any] or None
    moves_run: bool = False  # a pause is meant for the latest call that moves the run (``run``)


JsonDocument = dict[str, Any]  # a tool's --json output, passed on as it is

LOAD: Method[LoadArgs, GraphInfo] = Method("load", LoadArgs, GraphInfo)
RUN: Method[RunArgs, StopInfo] = Method("run", RunArgs, StopInfo, moves_run=True)
WHERE: Method[NoArgs, StopInfo] = Method("where", NoArgs, StopInfo)
PAUSE: Method[NoArgs, Paused] = Method("pause", NoArgs, Paused)
SET_BREAKPOINTS: Method[BreakpointsArgs, tuple[BreakpointResult, ...]] = Method(
    "set_breakpoints", BreakpointsArgs, tuple[BreakpointResult, ...]
)
SET_BREAK_ON: Method[BreakOnArgs, None] = Method("set_break_on", BreakOnArgs, type(None))
DATA_TARGETS: Method[NameArgs, DataTargets] = Method("data_targets", NameArgs, DataTargets)
COMPARE_TABLE: Method[NoArgs, JsonDocument] = Method("compare_table", NoArgs, JsonDocument)
PROFILE: Method[ProfileArgs, JsonDocument] = Method("profile", ProfileArgs, JsonDocument)
VALUES: Method[LevelArgs, ValueNames] = Method("values", LevelArgs, ValueNames)
SUMMARIES: Method[SummariesArgs, tuple[Summary, ...]] = Method("summaries", SummariesArgs, tuple[Summary, ...])
CHILDREN: Method[ChildrenArgs, ChildrenPage] = Method("children", ChildrenArgs, ChildrenPage)
READ_MEMORY: Method[ReadMemoryArgs, MemoryRead] = Method("read_memory", ReadMemoryArgs, MemoryRead)
EVALUATE: Method[EvaluateArgs, Evaluated] = Method("evaluate", EvaluateArgs, Evaluated)
SET_VALUE: Method[SetValueArgs, ValueSet] = Method("set_value", SetValueArgs, ValueSet)
OUTPUTS: Method[NoArgs, tuple[Summary, ...]] = Method("outputs", NoArgs, tuple[Summary, ...])
TENSOR_VIEW: Method[TensorViewArgs, TensorView] = Method("tensor_view", TensorViewArgs, TensorView)
SAVE_OUTPUTS: Method[SaveOutputsArgs, SavedOutputs] = Method("save_outputs", SaveOutputsArgs, SavedOutputs)
SHUTDOWN: Method[NoArgs, None] = Method("shutdown", NoArgs, type(None))
SOURCE: Method[NameArgs, NodeSourceInfo] = Method("source", NameArgs, NodeSourceInfo)
QUANT_FORMS: Method[QuantFormsArgs, QuantForms] = Method("quant_forms", QuantFormsArgs, QuantForms)

METHODS: dict[str, Method[Any, Any]] = {
    m.name: m
    for m in (
        LOAD, RUN, WHERE, PAUSE, SET_BREAKPOINTS, SET_BREAK_ON, DATA_TARGETS, COMPARE_TABLE, PROFILE,
        VALUES, SUMMARIES, CHILDREN, READ_MEMORY, EVALUATE, SET_VALUE, OUTPUTS, TENSOR_VIEW, SAVE_OUTPUTS, SHUTDOWN, SOURCE,
        QUANT_FORMS,
    )
}  # fmt: skip


def request_message(request_id: int, method: Method[A, Any], args: A) -> dict[str, Any]:
    """A request envelope."""
    return {"id": request_id, "method": method.name, "args": encode(args, method.args)}


def result_message(request_id: Any, method: Method[Any, R], result: R) -> dict[str, Any]:
    """A response envelope with the call's result."""
    return {"id": request_id, "result": encode(result, method.result)}


def error_message(request_id: Any, kind: str, message: str) -> dict[str, Any]:
    """A response envelope for a call that failed with an error of class ``kind``."""
    return {"id": request_id, "error": encode(ErrorInfo(kind, message))}


def event_message(event: Event) -> dict[str, Any]:
    """An event envelope."""
    return {"event": event.NAME, "body": encode(event)}


def decode_event(message: dict[str, Any]) -> Event | None:
    """The event a message carries (None for an event this side does not know)."""
    cls = EVENTS.get(message.get("event", ""))
    return None if cls is None else decode(cls, message.get("body"), f"{cls.NAME} event")
