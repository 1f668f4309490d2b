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
- event ``{"event": str, "body": {...}}`` (:class:`LogEvent`, :class:`ProgressEvent`)
- over TCP the client first sends ``{"token": str, "version": int}`` and the worker
  answers :class:`Hello`; a wrong token gets the connection closed with nothing sent back.

No numpy, no onnx: the adapter imports this module.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from graph_dap.errors import AddressError
from graph_dap.worker.codec import decode, encode

#: Changes whenever a message changes shape; a TCP worker of another version is refused.
PROTOCOL_VERSION = 7
#: onnxruntime's graph optimization levels, as launches and ``LoadArgs.opt_level`` name them.
OPT_LEVEL_NAMES = ("none", "basic", "extended", "all")
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


# -- what the worker sends about the model and its values ---------------------------------


@dataclass(frozen=True, slots=True)
class PathStep:
    """One enclosing level of a node: the control-flow node (or function call), which of its graphs, the iteration."""

    node: str
    attribute: str
    iteration: int | None = None


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node of the graph, in any scope, as the adapter sees it (attributes already rendered as text)."""

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
    name: str = ""  # the node's own name in the model
    path: tuple[PathStep, ...] = ()  # the scopes it is in (no iterations); () in the main graph
    enterable: bool = False  # an If, Loop, Scan or function call: it has a body to step into

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
    source_files: tuple[str, ...] = ()  # the user's Python files the nodes' stack traces name (the exporting machine's paths)


@dataclass(frozen=True, slots=True)
class SourceFrameInfo:
    """One frame of a node's Python stack, innermost first; or, for a model without stack traces, one module scope.

    ``path`` is the file as the stack trace names it (the exporting machine's; '' for a module
    frame), ``produced`` the nodes that this execution of the line (or this module's run) made.
    """

    name: str  # "Attention.forward"; "blocks.0.attn: Attention" for a module frame
    path: str = ""
    line: int = 0
    function: str = ""
    code: str = ""  # the source line as the trace quotes it
    library: bool = False  # torch's own code
    module: str | None = None  # the module path the frame runs in ("" the model itself)
    cls: str = ""  # the module's class, qualified
    produced: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSourceInfo:
    """Where a node came from: its Python frames (``kind`` "python"), its module scopes ("module"), or nothing ("none")."""

    node: str
    kind: str
    frames: tuple[SourceFrameInfo, ...] = ()


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
    """A node as a stop names it: the JSON of ``graph_dap.runtime.stops.node_ref``."""

    id: str
    name: str
    op_type: str
    index: int
    path: tuple[PathStep, ...] = ()


@dataclass(frozen=True, slots=True)
class FrameInfo:
    """One level of the program counter at a stop, innermost first (level 0 is where the counter is).

    ``node``: for level 0 the node to run next; for an outer level the control-flow node it is running.
    ``name`` says which body and iteration (``Loop_3 (Loop) body, iteration 5``).
    """

    level: int
    node: str | None
    name: str
    last_node: str | None = None  # the node that ran last at this level


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

    reason: str  # entry, breakpoint, nan, inf, error, mismatch, step, pause, goto, end, failed
    node: NodeRef | None
    pc: str | None
    last_node: str | None
    tensor: str | None = None
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    breakpoint_ids: tuple[int, ...] = ()
    repeat: Repeat | None = None
    comparison: tuple[str, ...] = ()
    path: tuple[PathStep, ...] = ()  # where the stop's node is: its enclosing levels with their iterations
    frames: tuple[FrameInfo, ...] = ()  # the levels of the program counter, innermost first

    @property
    def node_id(self) -> str | None:
        return None if self.node is None else self.node.id


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
    opt_level: str = "all"  # onnxruntime's graph optimizations for a continue's segments
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


MAX_PROFILE_REPEAT = 1000  # timed runs in one profile call


@dataclass(frozen=True, slots=True)
class ProfileArgs:
    """Profile the whole model ``repeat`` times (1 to :data:`MAX_PROFILE_REPEAT`) after a warm-up."""

    repeat: int = 3


@dataclass(frozen=True, slots=True)
class OutputsArgs:
    """Which outputs :data:`OUTPUTS` summarizes: the original graph's (``exact``, recomputed with its own
    nodes where an optimized segment made them), or the values as the run left them (what the user's own
    run at the launch's optimization level gives: the console's summary at the end, which must not run
    the model again)."""

    exact: bool = True


@dataclass(frozen=True, slots=True)
class LevelArgs:
    """A call about the values of one level of the program counter (0: the innermost)."""

    level: int = 0


@dataclass(frozen=True, slots=True)
class SummariesArgs:
    """Summaries of values by name, as the level ``level`` sees them (those not computed yet say so)."""

    names: tuple[str, ...]
    hex: bool = False
    level: int = 0


@dataclass(frozen=True, slots=True)
class ChildrenArgs:
    """Slices ``start`` to ``start + count`` (0: all) of ``value[index]`` along its first axis; ``temp``: of an evaluate result."""

    name: str
    index: tuple[int, ...] = ()
    start: int = 0
    count: int = 0
    temp: int | None = None
    hex: bool = False
    level: int = 0


@dataclass(frozen=True, slots=True)
class ReadMemoryArgs:
    """``count`` raw bytes of a tensor from ``offset``."""

    name: str
    offset: int
    count: int
    temp: int | None = None
    level: int = 0


@dataclass(frozen=True, slots=True)
class EvaluateArgs:
    """Evaluate an expression (or look a value up); ``clipboard``: with the full text of the result."""

    expression: str
    clipboard: bool = False
    hex: bool = False
    level: int = 0


@dataclass(frozen=True, slots=True)
class SetValueArgs:
    """Set a value (or the part of it at ``index``) to what an expression gives."""

    name: str
    expression: str
    index: tuple[int, ...] = ()
    level: int = 0


@dataclass(frozen=True, slots=True)
class TensorViewArgs:
    """A picture of a value or of what an expression gives, at most ``max_size`` cells a side."""

    name: str
    index: tuple[int, ...] = ()
    max_size: int = 256
    level: int = 0


@dataclass(frozen=True, slots=True)
class SaveOutputsArgs:
    """Write the graph outputs computed so far to ``path`` (an ``.npz`` keyed by output name), atomically."""

    path: str


@dataclass(frozen=True, slots=True)
class SavedOutputs:
    """What :data:`SAVE_OUTPUTS` wrote: the outputs in the file, and those it could not hold (not computed, not tensors)."""

    written: tuple[str, ...]
    missing: tuple[str, ...] = ()


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
VALUES: Method[LevelArgs, ValueNames] = Method("values", LevelArgs, ValueNames)
SUMMARIES: Method[SummariesArgs, tuple[Summary, ...]] = Method("summaries", SummariesArgs, tuple[Summary, ...])
CHILDREN: Method[ChildrenArgs, ChildrenPage] = Method("children", ChildrenArgs, ChildrenPage)
READ_MEMORY: Method[ReadMemoryArgs, MemoryRead] = Method("read_memory", ReadMemoryArgs, MemoryRead)
EVALUATE: Method[EvaluateArgs, Evaluated] = Method("evaluate", EvaluateArgs, Evaluated)
SET_VALUE: Method[SetValueArgs, ValueSet] = Method("set_value", SetValueArgs, ValueSet)
OUTPUTS: Method[OutputsArgs, tuple[Summary, ...]] = Method("outputs", OutputsArgs, tuple[Summary, ...])
TENSOR_VIEW: Method[TensorViewArgs, TensorView] = Method("tensor_view", TensorViewArgs, TensorView)
SAVE_OUTPUTS: Method[SaveOutputsArgs, SavedOutputs] = Method("save_outputs", SaveOutputsArgs, SavedOutputs)
SHUTDOWN: Method[NoArgs, None] = Method("shutdown", NoArgs, type(None))
SOURCE: Method[NameArgs, NodeSourceInfo] = Method("source", NameArgs, NodeSourceInfo)

METHODS: dict[str, Method[Any, Any]] = {
    m.name: m
    for m in (
        LOAD, RUN, WHERE, PAUSE, SET_BREAKPOINTS, SET_BREAK_ON, DATA_TARGETS, COMPARE_TABLE, PROFILE,
        VALUES, SUMMARIES, CHILDREN, READ_MEMORY, EVALUATE, SET_VALUE, OUTPUTS, TENSOR_VIEW, SAVE_OUTPUTS, SHUTDOWN, SOURCE,
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
