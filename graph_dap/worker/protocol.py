"""The worker's messages, defined once for both sides: dataclasses and one encode/decode.

The adapter (:mod:`graph_dap.worker.client`) and the worker (:mod:`.service`) exchange
msgpack objects; every call's arguments and result is a frozen dataclass here, and
:data:`METHODS` names each call with both. :func:`encode` turns a dataclass into plain
data (nested dataclasses as maps, tuples as arrays, enums as their values);
:func:`decode` makes the dataclass again and checks every field's type on the way,
raising :class:`~graph_dap.errors.ProtocolError` that says which field is wrong.

Envelopes, one msgpack object each:

- request ``{"id": int, "method": str, "args": {...}}``
- response ``{"id": int, "result": ...}`` or ``{"id": int, "error": {"kind": str, "message": str}}``;
  ``kind`` is the name of a :mod:`graph_dap.errors` class, raised again on the adapter's side
- event ``{"event": str, "body": {...}}`` (:class:`LogEvent`, :class:`ProgressEvent`)
- over TCP the client first sends ``{"token": str, "version": int}`` and the worker
  answers :class:`Hello`; a wrong token gets the connection closed with nothing sent back.

No numpy, no onnx: the adapter imports this module.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from graph_dap.errors import ProtocolError

#: Changes whenever a message changes shape; a TCP worker of another version is refused.
PROTOCOL_VERSION = 2
HELLO = "graph-dap-worker"

A = TypeVar("A")
R = TypeVar("R")


# -- what the worker sends about the model and its values ---------------------------------


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node of the graph as the adapter sees it (attributes already rendered as text)."""

    id: str
    index: int
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: tuple[tuple[str, str], ...]
    line: int  # 1-based line in the listing
    has_subgraphs: bool = False
    static: bool = False  # a constant node, computed at load and skipped by the run

    @property
    def label(self) -> str:
        return f"{self.id} ({self.op_type})"


@dataclass(frozen=True, slots=True)
class GraphInfo:
    """The loaded model: its nodes in run order, its named values, and its listing."""

    name: str
    model_path: str
    nodes: tuple[NodeInfo, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    initializers: tuple[str, ...]
    listing: str
    listing_path: str | None  # where the listing was written beside the model, if it was
    value_names: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()  # of the expression language, for completions


@dataclass(frozen=True, slots=True)
class Summary:
    """A value's one-line summary and statistics, as the worker computed them."""

    name: str
    text: str
    type: str  # "tensor(float)"
    dtype: str
    shape: tuple[int, ...]
    size: int
    stats: tuple[tuple[str, str], ...] = ()  # ("min", "-3.2"), ... for the statistics children
    stale: bool = False
    available: bool = True  # False: not computed yet
    kind: str = "tensor"  # or "sequence"
    scalar: str | None = None  # the element itself when there is one


@dataclass(frozen=True, slots=True)
class NodeRef:
    """A node as a stop names it: the JSON of ``graph_dap.runtime.stops.node_ref`` (``name`` is the node's id)."""

    name: str
    op_type: str
    index: int


@dataclass(frozen=True, slots=True)
class Repeat:
    """The timings of a run repeated ``requested`` times (``graph_dap.runtime.tools.repeat``), and their line of text."""

    requested: int
    runs: int
    times_ms: tuple[float, ...]
    median_ms: float | None
    outputs_identical: bool | None
    text: str


@dataclass(frozen=True, slots=True)
class StopInfo:
    """Why and where the run stopped: the runtime's ``Stop.to_dict()`` and the position.

    ``node`` is what the stop is about (for nan/inf/mismatch the node that produced it,
    which has run); ``pc`` is the node to run next (None at the end). At the end of a run,
    ``repeat`` holds the timings of its iterations and ``comparison`` the summary of the
    comparison with the reference.
    """

    reason: str  # entry, breakpoint, nan, inf, error, mismatch, step, pause, goto, end
    node: NodeRef | None
    pc: str | None
    last_node: str | None
    tensor: str | None = None
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    breakpoint_ids: tuple[int, ...] = ()
    repeat: Repeat | None = None
    comparison: tuple[str, ...] = ()

    @property
    def node_id(self) -> str | None:
        return None if self.node is None else self.node.name


@dataclass(frozen=True, slots=True)
class BreakpointResult:
    """The runtime's answer for one breakpoint spec."""

    id: int
    verified: bool
    message: str = ""
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ValueNames:
    """The values computed at this stop, and those of them that are stale (a value they depend on was set)."""

    computed: tuple[str, ...]
    stale: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Child:
    """One slice of a tensor along its first axis: a summary, or (``summary`` None) the number at the last axis."""

    index: int
    summary: Summary | None = None
    scalar: str = ""
    dtype: str = ""


@dataclass(frozen=True, slots=True)
class ChildrenPage:
    """Some children of a value, and how many it has."""

    items: tuple[Child, ...]
    total: int


@dataclass(frozen=True, slots=True)
class MemoryRead:
    """Raw bytes of a tensor from ``start``, of its ``size`` bytes in all."""

    data: bytes
    size: int
    start: int


@dataclass(frozen=True, slots=True)
class Evaluated:
    """What an expression gave: a value of the graph (``value``), a tensor kept as ``temp``, or a number or text.

    ``summary`` is set for the first two; ``text`` is the clipboard's full text for them,
    the result itself otherwise (of Python type ``type``).
    """

    value: str | None = None
    temp: int | None = None
    summary: Summary | None = None
    text: str = ""
    type: str = ""


@dataclass(frozen=True, slots=True)
class ValueSet:
    """A value after ``set_value``: the part set (a summary, or the number), and the values made stale."""

    stale: tuple[str, ...]
    summary: Summary | None = None
    scalar: str = ""


@dataclass(frozen=True, slots=True)
class DataTargets:
    """Nodes to stop before for a data breakpoint, by access; a message says why there is none."""

    write: tuple[str, ...]
    write_message: str
    read: tuple[str, ...]
    read_message: str


@dataclass(frozen=True, slots=True)
class Histogram:
    """Of a tensor's finite values: bin edges (one more than the counts) and counts; both empty without one."""

    edges: tuple[float, ...]
    counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TensorView:
    """A 2-D slice of a tensor, block-downsampled, with the whole tensor's statistics (``vscode-ext/PROTOCOL.md``)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    slice_shape: tuple[int, ...]
    index: tuple[int, ...]
    stride: tuple[int, ...]
    data: tuple[tuple[int | float | str, ...], ...]  # "nan", "inf", "-inf" for those
    min: int | float | None
    max: int | float | None
    mean: float | None
    nan: int
    posinf: int
    neginf: int
    histogram: Histogram


@dataclass(frozen=True, slots=True)
class Paused:
    """The answer to ``pause``: whether a run was in progress (or queued) to be paused."""

    paused: bool


# -- what the adapter asks -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NoArgs:
    """The arguments of a call that takes none."""


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How close the run must stay to the reference: ``atol``/``rtol``, or fail-if conditions (``cosine<0.999``)."""

    atol: float | None = None
    rtol: float | None = None
    fail_if: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LoadArgs:
    """Load a model; paths are relative to ``base_dir``; ``write_listing``: write ``<model>.onnxtxt`` beside it."""

    model: str
    inputs: str | dict[str, Any] | None = None  # a file or folder, or input name -> a .npy path or nested numbers
    dims: dict[str, int] = field(default_factory=dict)
    providers: tuple[str, ...] = ()
    skip_constants: bool = True
    memory_budget_mb: float | None = None
    base_dir: str | None = None
    reference: str | dict[str, Any] | None = None  # a dump, provider:NAME, opt_level:LEVEL or model:OTHER.onnx
    tolerance: Tolerance | None = None
    write_listing: bool = True


class RunCommand(enum.Enum):
    """How ``run`` moves the program counter."""

    START = "start"  # to the entry (the constants computed), or nowhere when started already
    RESUME = "resume"  # continue, checking the breakpoints of the node at the program counter first
    CONTINUE = "continue"
    STEP = "step"
    STEP_IN = "step_in"
    STEP_OUT = "step_out"
    STEP_BACK = "step_back"
    REVERSE_CONTINUE = "reverse_continue"
    RESTART = "restart"
    GOTO = "goto"  # to ``target``
    RUN_TO = "run_to"  # to ``target``
    TO_END = "to_end"  # noDebug: no breakpoints, no filters, ``iterations`` times


@dataclass(frozen=True, slots=True)
class RunArgs:
    """Move the run."""

    command: RunCommand
    target: str | None = None
    iterations: int = 1


@dataclass(frozen=True, slots=True)
class BreakpointSpec:
    """One breakpoint as the runtime takes it: a node id, value name, ``op:TYPE`` or glob, and its conditions."""

    spec: str
    condition: str | None = None
    hit_condition: str | None = None
    log_message: str | None = None


@dataclass(frozen=True, slots=True)
class BreakpointsArgs:
    """Replace every breakpoint."""

    specs: tuple[BreakpointSpec, ...]


@dataclass(frozen=True, slots=True)
class BreakOnArgs:
    """The break filters (nan, inf, error, mismatch), and the nodes whose Inf the inf filter ignores."""

    filters: tuple[str, ...]
    inf_exclude: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NameArgs:
    """A call about one value of the graph."""

    name: str


@dataclass(frozen=True, slots=True)
class ProfileArgs:
    """Profile the whole model ``repeat`` times after a warm-up."""

    repeat: int = 3


@dataclass(frozen=True, slots=True)
class SummariesArgs:
    """Summaries of values by name (those not computed yet say so)."""

    names: tuple[str, ...]
    hex: bool = False


@dataclass(frozen=True, slots=True)
class ChildrenArgs:
    """Slices ``start`` to ``start + count`` (0: all) of ``value[index]`` along its first axis; ``temp``: of an evaluate result."""

    name: str
    index: tuple[int, ...] = ()
    start: int = 0
    count: int = 0
    temp: int | None = None
    hex: bool = False


@dataclass(frozen=True, slots=True)
class ReadMemoryArgs:
    """``count`` raw bytes of a tensor from ``offset``."""

    name: str
    offset: int
    count: int
    temp: int | None = None


@dataclass(frozen=True, slots=True)
class EvaluateArgs:
    """Evaluate an expression (or look a value up); ``clipboard``: with the full text of the result."""

    expression: str
    clipboard: bool = False
    hex: bool = False


@dataclass(frozen=True, slots=True)
class SetValueArgs:
    """Set a value (or the part of it at ``index``) to what an expression gives."""

    name: str
    expression: str
    index: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TensorViewArgs:
    """A picture of a value or of what an expression gives, at most ``max_size`` cells a side."""

    name: str
    index: tuple[int, ...] = ()
    max_size: int = 256


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


Event = LogEvent | ProgressEvent
EVENTS: dict[str, type[LogEvent] | type[ProgressEvent]] = {LogEvent.NAME: LogEvent, ProgressEvent.NAME: ProgressEvent}


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
VALUES: Method[NoArgs, ValueNames] = Method("values", NoArgs, ValueNames)
SUMMARIES: Method[SummariesArgs, tuple[Summary, ...]] = Method("summaries", SummariesArgs, tuple[Summary, ...])
CHILDREN: Method[ChildrenArgs, ChildrenPage] = Method("children", ChildrenArgs, ChildrenPage)
READ_MEMORY: Method[ReadMemoryArgs, MemoryRead] = Method("read_memory", ReadMemoryArgs, MemoryRead)
EVALUATE: Method[EvaluateArgs, Evaluated] = Method("evaluate", EvaluateArgs, Evaluated)
SET_VALUE: Method[SetValueArgs, ValueSet] = Method("set_value", SetValueArgs, ValueSet)
OUTPUTS: Method[NoArgs, tuple[Summary, ...]] = Method("outputs", NoArgs, tuple[Summary, ...])
TENSOR_VIEW: Method[TensorViewArgs, TensorView] = Method("tensor_view", TensorViewArgs, TensorView)
SHUTDOWN: Method[NoArgs, None] = Method("shutdown", NoArgs, type(None))

METHODS: dict[str, Method[Any, Any]] = {
    m.name: m
    for m in (
        LOAD, RUN, WHERE, PAUSE, SET_BREAKPOINTS, SET_BREAK_ON, DATA_TARGETS, COMPARE_TABLE, PROFILE,
        VALUES, SUMMARIES, CHILDREN, READ_MEMORY, EVALUATE, SET_VALUE, OUTPUTS, TENSOR_VIEW, SHUTDOWN,
    )
}  # fmt: skip


def request_message(request_id: int, method: Method[A, Any], args: A) -> dict[str, Any]:
    return {"id": request_id, "method": method.name, "args": encode(args)}


def result_message(request_id: Any, result: Any) -> dict[str, Any]:
    return {"id": request_id, "result": encode(result)}


def error_message(request_id: Any, kind: str, message: str) -> dict[str, Any]:
    return {"id": request_id, "error": encode(ErrorInfo(kind, message))}


def event_message(event: Event) -> dict[str, Any]:
    return {"event": event.NAME, "body": encode(event)}


# -- encoding and decoding -------------------------------------------------------------------


def encode(value: Any) -> Any:
    """Plain data for msgpack: dataclasses as maps of their fields, tuples as lists, enums as their values."""
    names = _FIELD_NAMES.get(type(value))
    if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELD_NAMES[type(value)] = tuple(f.name for f in dataclasses.fields(value))
    if names is not None:
        return {n: encode(getattr(value, n)) for n in names}
    if isinstance(value, tuple | list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    return value


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
Decoder = Callable[[Any, str], Any]
_DECODERS: dict[Any, Decoder] = {}


def decode(kind: Any, data: Any, where: str = "") -> Any:
    """``data`` as a ``kind`` (a dataclass or a type form), every field checked; raises ProtocolError."""
    return _decoder(kind)(data, where or _type_name(kind))


def decode_event(message: dict[str, Any]) -> Event | None:
    """The event a message carries (None for an event this side does not know)."""
    cls = EVENTS.get(message.get("event", ""))
    return None if cls is None else decode(cls, message.get("body"), f"{cls.NAME} event")


def _decoder(kind: Any) -> Decoder:
    found = _DECODERS.get(kind)
    if found is None:
        found = _DECODERS[kind] = _make_decoder(kind)
    return found


def _fail(where: str, expected: str, data: Any) -> ProtocolError:
    return ProtocolError(f"{where}: expected {expected}, got {_value_name(data)}")


def _value_name(data: Any) -> str:
    if data is None:
        return "null"
    text = repr(data)
    return f"{type(data).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


_SCALARS: dict[type, str] = {str: "a string", bool: "a boolean", bytes: "bytes"}


def _make_decoder(kind: Any) -> Decoder:
    if kind is Any:
        return lambda data, where: data
    if kind is type(None):

        def none(data: Any, where: str) -> None:
            if data is not None:
                raise _fail(where, "null", data)

        return none
    if kind in _SCALARS:

        def scalar(data: Any, where: str) -> Any:
            if type(data) is not kind:
                raise _fail(where, _SCALARS[kind], data)
            return data

        return scalar
    if kind is int:

        def integer(data: Any, where: str) -> int:
            if not isinstance(data, int) or isinstance(data, bool):
                raise _fail(where, "an integer", data)
            return data

        return integer
    if kind is float:

        def number(data: Any, where: str) -> float:
            if not isinstance(data, int | float) or isinstance(data, bool):
                raise _fail(where, "a number", data)
            return float(data)

        return number
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return _enum_decoder(kind)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _dataclass_decoder(kind)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union or origin is types.UnionType:
        return _union_decoder(kind, args)
    if origin is tuple:
        return _tuple_decoder(kind, args)
    if origin is dict:
        keys, values = _decoder(args[0]), _decoder(args[1])

        def mapping(data: Any, where: str) -> dict[Any, Any]:
            if not isinstance(data, dict):
                raise _fail(where, "a map", data)
            return {keys(k, f"{where} key"): values(v, f"{where}[{k!r}]") for k, v in data.items()}

        return mapping
    raise TypeError(f"the worker protocol cannot carry {kind!r}")


def _enum_decoder(kind: type[enum.Enum]) -> Decoder:
    choices = ", ".join(repr(m.value) for m in kind)

    def member(data: Any, where: str) -> enum.Enum:
        try:
            return kind(data)
        except ValueError:
            raise _fail(where, f"one of {choices}", data) from None

    return member


def _union_decoder(kind: Any, args: tuple[Any, ...]) -> Decoder:
    optional = type(None) in args
    options = [_decoder(a) for a in args if a is not type(None)]
    if len(options) == 1:  # X | None: X's own message says what is wrong
        only = options[0]
        return lambda data, where: None if data is None else only(data, where)
    expected = " or ".join(_type_name(a) for a in args)  # "str or dict[str, Any] or null"

    def union(data: Any, where: str) -> Any:
        if data is None and optional:
            return None
        for option in options:
            try:
                return option(data, where)
            except ProtocolError:
                continue
        raise _fail(where, expected, data)

    return union


def _tuple_decoder(kind: Any, args: tuple[Any, ...]) -> Decoder:
    if len(args) == 2 and args[1] is Ellipsis:
        item = _decoder(args[0])

        def items(data: Any, where: str) -> tuple[Any, ...]:
            if not isinstance(data, list | tuple):
                raise _fail(where, "an array", data)
            return tuple(item(v, f"{where}[{i}]") for i, v in enumerate(data))

        return items
    parts = [_decoder(a) for a in args]

    def fixed(data: Any, where: str) -> tuple[Any, ...]:
        if not isinstance(data, list | tuple) or len(data) != len(parts):
            raise _fail(where, f"an array of {len(parts)}", data)
        return tuple(part(v, f"{where}[{i}]") for i, (part, v) in enumerate(zip(parts, data)))

    return fixed


def _dataclass_decoder(cls: type) -> Decoder:
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = {f.name for f in fields}
    required = [f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    decoders: dict[str, Decoder] = {}

    def make(data: Any, where: str) -> Any:
        if not isinstance(data, dict):
            raise _fail(where, f"a map of {cls.__name__}", data)
        unknown = [k for k in data if k not in names]
        if unknown:
            have = ", ".join(f.name for f in fields) or "none"
            raise ProtocolError(f"{where}: unknown field {unknown[0]!r} (the fields of {cls.__name__}: {have})")
        missing = [n for n in required if n not in data]
        if missing:
            raise ProtocolError(f"{where}: missing field {missing[0]!r} of {cls.__name__}")
        if not decoders and fields:  # made on first use: a class may name one defined after it
            hints = typing.get_type_hints(cls)
            decoders.update({f.name: _decoder(hints[f.name]) for f in fields})
        return cls(**{k: decoders[k](v, f"{where}.{k}") for k, v in data.items()})

    return make


def _type_name(kind: Any) -> str:
    """``tuple[Summary, ...]``, ``str | None``: a type form as written in this module."""
    if kind is type(None):
        return "null"
    if kind is Any:
        return "Any"
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is None:
        return getattr(kind, "__name__", str(kind))
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(_type_name(a) for a in args)
    return f"{origin.__name__}[{', '.join('...' if a is Ellipsis else _type_name(a) for a in args)}]"
