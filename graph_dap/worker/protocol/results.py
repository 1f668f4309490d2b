"""What the worker sends about the model and its values: the results of the calls (see :mod:`graph_dap.worker.protocol`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graph_dap.kinds import SourceKind, StopReason, ValueKind


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
    constant: bool = False  # a constant node, computed at load and skipped by the run
    name: str = ""  # the node's own name in the model
    path: tuple[PathStep, ...] = ()  # the scopes it is in (no iterations); () in the main graph
    enterable: bool = False  # an If, Loop, Scan or function call: it has a body to step into
    modules: tuple[str, ...] = ()  # the module paths of the model's source it ran in, outermost first

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
    """Where a node came from: its Python frames, its module scopes, or nothing."""

    node: str
    kind: SourceKind
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
    kind: ValueKind = ValueKind.TENSOR
    scalar: str | None = None  # the element itself when there is one
    note: str = ""  # how it was computed, when not by the user's run (see DebugSession.note)
    pending: bool = False  # its statistics (a recomputed value: its data) are being computed: see SummarizedEvent
    quantized: bool = False  # integers with a scale, or a DequantizeLinear's output: it has forms (QUANT_FORMS)


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
    which has run); ``current`` is the node to run next (None at the end). At the end of a run,
    ``repeat`` holds the timings of its iterations and ``comparison`` the summary of the
    comparison with the reference.
    """

    reason: StopReason
    node: NodeRef | None
    current: str | None  # the id of the node at the counter
    last_node: str | None
    value: str | None = None  # the value the stop is about: Stop.value
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
    """One slice of a tensor along its first axis: a summary, or (``summary`` None) the number at the last axis (or a map's item)."""

    index: int
    summary: Summary | None = None
    scalar: str = ""
    dtype: str = ""
    key: str = ""  # a map's item: its key as a Python literal (``0``, ``'cat'``)


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
    colormap: str = ""  # "diverging": drawn centred on 0 (a quantized tensor's error); "": the plain scale


@dataclass(frozen=True, slots=True)
class QuantForm:
    """One form of a quantized value (``part``: integer, dequantized, reference, error): an evaluate result ``temp``
    until the run moves on, read by ``expression`` (``NAME@part``) in expressions and the tensor view."""

    part: str
    expression: str
    temp: int
    summary: Summary


@dataclass(frozen=True, slots=True)
class QuantForms:
    """The forms of a quantized value: integer and dequantized, and with a reference its float tensor and the error."""

    name: str
    quantization: str  # its scale and zero point, in words
    forms: tuple[QuantForm, ...]
    reference: str = ""  # the float model's paired tensor ("" without a reference)


@dataclass(frozen=True, slots=True)
class Paused:
    """The answer to ``pause``: whether a run was in progress (or queued) to be paused."""

    paused: bool
