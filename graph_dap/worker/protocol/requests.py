"""What the adapter asks: the arguments of the calls (see :mod:`graph_dap.worker.protocol`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from graph_dap.kinds import BreakFilter, FaultStops, OptLevel


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
    dims: dict[str, int | tuple[int, ...]] = field(default_factory=dict)  # a tuple: an input's whole shape
    providers: tuple[str, ...] = ()
    skip_constants: bool = True
    memory_budget_mb: float | None = None
    opt_level: OptLevel = OptLevel.ALL  # onnxruntime's graph optimizations for a continue's segments
    base_dir: str | None = None
    reference: str | dict[str, Any] | None = None  # a dump, provider:NAME, opt_level:LEVEL or model:OTHER.onnx
    tolerance: Tolerance | None = None
    write_listing: bool = True
    fault_stops: FaultStops = FaultStops.NEW  # after a NaN/Inf stop: new faults only, or every node holding one
    call_number: int | None = None  # in a program launch, the run call's number for its model (``call`` in conditions)


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
    """The break filters (nan, inf, error, mismatch), and the nodes whose Inf (NaN) the inf (nan) filter ignores."""

    filters: tuple[BreakFilter, ...]
    inf_exclude: tuple[str, ...] = ()
    nan_exclude: tuple[str, ...] = ()


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
class LevelArgs:
    """A call about the values of one level of the program counter (0: the innermost). ``warm``: the model's weights
    are summarized in the background from now on (a client that gets quick pages has them summarized from its first
    page on, that page's first)."""

    level: int = 0
    warm: bool = True


@dataclass(frozen=True, slots=True)
class SummariesArgs:
    """Summaries of values by name, as the level ``level`` sees them (those not computed yet say so)."""

    names: tuple[str, ...]
    hex: bool = False
    level: int = 0
    quick: bool = False  # a weight not summarized yet, or a value to recompute, comes at once without statistics (``pending``)


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
class QuantFormsArgs:
    """The forms of a quantized value (see :class:`~.results.QuantForms`), as the level ``level`` sees it."""

    name: str
    hex: bool = False
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
