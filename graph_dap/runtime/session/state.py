"""What a debug session holds, as parts that each own their state, and how it answers for it: reading and
setting values, the breakpoints, the break filters."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from graph_dap.errors import GraphDapError
from graph_dap.kinds import BreakFilter, FaultStops, OptLevel
from graph_dap.runtime import expr as _expr
from graph_dap.runtime.breakpoints import Breakpoint, BreakpointSpec, BreakpointTable
from graph_dap.runtime.checks import check_runnable
from graph_dap.runtime.engine.executor import Executor
from graph_dap.runtime.engine.interrupt import Interrupt
from graph_dap.runtime.engine.masks import intended
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.engine.planning import SegmentPlanner
from graph_dap.runtime.engine.segments import SegmentRunner
from graph_dap.runtime.engine.store import ValueStore
from graph_dap.runtime.frames import Frame
from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.inputs import Dims, InputsArg, resolve_inputs
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.session.filters import BreakFilters
from graph_dap.runtime.session.levels import Levels
from graph_dap.runtime.session.runs import Runs
from graph_dap.runtime.session.stopping import CounterContext, Stops, resolver
from graph_dap.runtime.stops import PathStep
from graph_dap.runtime.tensor import TensorSummary, summarize
from graph_dap.runtime.timeline import Timeline
from graph_dap.runtime.values import Constants, Values


class SessionState:
    """A model under a debugger's control, at rest: its parts (the values' store and constants, the engine,
    the breakpoint table, the break filters, the levels of the counter, the runs, the stops, the interrupt),
    and what a debugger reads and sets through them. See :class:`~.driver.DebugSession` for the arguments
    and the commands that move it."""

    def __init__(
        self,
        model: str | os.PathLike[str] | onnx.ModelProto | Graph,
        inputs: InputsArg = None,
        *,
        dims: Dims | None = None,
        providers: Sequence[str] | None = None,
        skip_constants: bool = True,
        break_on: Iterable[str] = (),
        inf_exclude: Iterable[str] = (),
        fault_stops: str = FaultStops.NEW,
        nan_exclude: Iterable[str] = (),
        opt_level: str = OptLevel.ALL,
        memory_budget_mb: float | None = None,
        fast: bool = True,
        pausable: bool = True,
        base_dir: str | os.PathLike[str] | None = None,
        on_log: Callable[[str], None] | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.graph = model if isinstance(model, Graph) else load_graph(model)
        check_runnable(self.graph)  # an opset, IR version or operator onnxruntime lacks: refused here, with the reason
        self.inputs = resolve_inputs(self.graph, inputs, dims)
        self.skip_constants = skip_constants
        self.fast = fast
        self.base_dir = Path(base_dir) if base_dir else (self.graph.path.parent if self.graph.path else Path.cwd())
        self.on_log = on_log
        self.logs: list[str] = []
        self.filters = BreakFilters(break_on, inf_exclude, fault_stops, nan_exclude, intended(self.graph))
        self.constants = Constants(self.graph, skip_constants)
        self.executor = Executor(self.graph, providers, opt_level, self.constants.embedded)
        self.store = ValueStore(None if memory_budget_mb is None else int(memory_budget_mb * (1 << 20)))
        self.breakpoint_table = BreakpointTable(self.graph)
        self.levels = Levels(
            self.graph, self.store, self.constants, self.executor, self.breakpoint_table, self.filters, skip_constants=skip_constants, fast=fast
        )
        self.interrupt = Interrupt()
        self.stops = Stops(self.levels, self.filters)
        self.runs = Runs(
            self.levels,
            self.stops,
            self.executor,
            self.constants,
            self.breakpoint_table,
            self.filters,
            self.interrupt,
            skip_constants=skip_constants,
            fast=fast,
            pausable=pausable,
            on_progress=on_progress,
        )
        self.counter = CounterContext(self.levels, self.base_dir, self.log)
        main = self.levels.main
        self.timeline: Timeline = main.timeline
        self.values: Values = main.values
        self._reset()

    # -- the parts, for tools and tests --------------------------------------------

    @property
    def runner(self) -> NodeRunner:
        return self.executor.runner

    @property
    def segments(self) -> SegmentRunner:
        return self.executor.segments

    @property
    def planner(self) -> SegmentPlanner:
        return self.runs.planner(self.levels.main)

    @property
    def executions(self) -> Counter[str]:
        """How many times each node ran (look-aheads for breakpoint conditions not counted)."""
        return self.executor.executions

    @property
    def ort_calls(self) -> int:
        """onnxruntime calls made so far (one per node step, one per segment)."""
        return self.executor.ort_calls

    @property
    def on_progress(self) -> Callable[[int, int], None] | None:
        """Told ``(done, total)`` positions of the main graph as a run moves through it."""
        return self.runs.on_progress

    @on_progress.setter
    def on_progress(self, callback: Callable[[int, int], None] | None) -> None:
        self.runs.on_progress = callback

    # -- state ---------------------------------------------------------------------

    def _reset(self) -> None:
        self.constants.reset()
        self.levels.reset(self.inputs)
        self.breakpoint_table.reset_hits()
        self.runs.constants_checked = False
        self.filters.found = False  # a new run: its first NaN/Inf stops it wherever it is first held
        self.executor.unoptimized.clear()

    @property
    def frames(self) -> list[Frame]:
        """The frames of the program counter, the main graph's first."""
        return self.levels.frames

    @property
    def top(self) -> Frame:
        """The innermost frame: where the counter is."""
        return self.levels.top

    @property
    def current(self) -> Node | None:
        """The next node to run; None once the run is at its end."""
        return self.levels.current

    @property
    def last_node(self) -> Node | None:
        """The node that ran last in the innermost frame (its outputs are the "last outputs")."""
        return self.top.timeline.last

    @property
    def sequence(self) -> tuple[Node, ...]:
        """The nodes the main graph's counter walks through, in run order."""
        return self.timeline.sequence

    @property
    def at_end(self) -> bool:
        return len(self.frames) == 1 and self.timeline.at_end

    @property
    def path(self) -> tuple[PathStep, ...]:
        """Where the counter is: the enclosing control-flow levels, outermost first."""
        return self.levels.path

    @property
    def iteration(self) -> int | None:
        """The innermost loop's iteration; None outside loops."""
        return self.levels.iteration

    def sequence_of(self, node: Node) -> tuple[Node, ...]:
        """The nodes the counter walks through in ``node``'s scope (its graph, branch or body), in run order."""
        return self.levels.sequences[node.path]

    def frame(self, level: int = 0) -> Frame:
        """A frame by level: 0 is the innermost, ``len(frames) - 1`` the main graph."""
        if not 0 <= level < len(self.frames):
            raise GraphDapError(f"no frame at level {level}: there are {len(self.frames)}")
        return self.frames[len(self.frames) - 1 - level]

    # -- break filters -------------------------------------------------------------

    @property
    def break_on(self) -> set[BreakFilter]:
        """The break filters on: any of ``nan``, ``inf``, ``error``."""
        return self.filters.enabled

    def set_break_on(self, filters: Iterable[str]) -> None:
        """Enable the break filters ``nan``, ``inf`` and ``error``."""
        self.filters.set(filters)

    @property
    def inf_exclude(self) -> tuple[str, ...]:
        """Node patterns whose infinities do not stop the ``inf`` filter."""
        return self.filters.inf_exclude

    @inf_exclude.setter
    def inf_exclude(self, patterns: Iterable[str]) -> None:
        self.filters.inf_exclude = tuple(patterns)

    @property
    def nan_exclude(self) -> tuple[str, ...]:
        """Node patterns whose NaNs do not stop the ``nan`` filter."""
        return self.filters.nan_exclude

    @nan_exclude.setter
    def nan_exclude(self, patterns: Iterable[str]) -> None:
        self.filters.nan_exclude = tuple(patterns)

    # -- values --------------------------------------------------------------------

    def _values(self, level: int) -> Values:
        return self.frame(level).values

    def value(self, name: str, level: int = 0) -> Any:
        """The current value of ``name`` as the frame at ``level`` sees it (possibly stale; see :meth:`is_stale`)."""
        return self._values(level).value(name)

    def has_value(self, name: str, level: int = 0) -> bool:
        return self._values(level).available(name)

    def summary(self, name: str, level: int = 0) -> TensorSummary:
        return summarize(self.value(name, level))

    def note(self, name: str, level: int = 0) -> str:
        """How a value shown was computed, when not as the user's run at an optimization level computed it: ``""``
        for the run's own values (and for every value at level ``none``, where the run is the original nodes), else
        "recomputed with the original nodes" (from the run's values), and where onnxruntime computes it at that level."""
        values = self._values(level)
        if not self.executor.optimized or not values.computed_by_nodes(name):
            return ""
        note = "recomputed with the original nodes"
        fusions = self.executor.fusions()
        producer = self.graph.producer(name) if self.graph.has_value(name) else None
        if fusions is None or producer is None or not fusions.absent(name):
            return note
        into = fusions.fused_into(producer, name)
        if into is not None:
            return f"{note}: fused into {into.op_type} '{into.name}' at level {fusions.opt_level}"
        return f"{note}: at level {fusions.opt_level} onnxruntime's graph has no tensor of this name (fused, or in its blocked layout)"

    def computed_values(self, level: int = 0) -> list[str]:
        """Names of every value of the frame's own level known now: inputs, initializers, computed ones in run order."""
        values = self._values(level)
        return [n for n in values.scope.value_names() if values.available(n)]

    def is_stale(self, name: str, level: int = 0) -> bool:
        """True when an upstream value was set and this one is not recomputed yet."""
        values: Values | None = self._values(level)
        while values is not None and not values.own(name):
            values = values.outer
        return values is not None and name in values.stale

    def outputs(self) -> dict[str, Any]:
        """The graph outputs computed so far: as the run computed them (at an optimization level, what the user's
        own optimized run gives), or as the original nodes did where a step or a set value made them."""
        return {n: self.value(n, len(self.frames) - 1) for n in self.graph.output_names if self.values.available(n)}

    def evaluate(self, text: str | _expr.Expression, extra: Mapping[str, Any] | None = None, level: int = 0) -> Any:
        """Evaluate a tensor expression over the values the frame at ``level`` sees (and ``iteration``)."""
        self.frame(level)  # (a level that does not exist: said so)
        return _expr.evaluate(text, resolver(self.levels, extra, level), base_dir=self.base_dir)

    def set_value(self, name: str, value: Any, level: int = 0) -> list[str]:
        """Replace a value (as the frame at ``level`` sees it); its computed dependents become stale, recomputed next.

        A scalar broadcasts to the value's shape. Returns the names made stale.
        """
        values = self._values(level)
        stale = values.set(name, value)
        for frame in self.frames[len(self.frames) - level :]:  # the levels inside read it from here
            stale += frame.values.outer_changed([name, *stale])
        return stale

    def log(self, line: str) -> None:
        self.logs.append(line)
        if self.on_log is not None:
            self.on_log(line)

    # -- breakpoints ---------------------------------------------------------------

    def set_breakpoints(self, specs: Iterable[BreakpointSpec | str]) -> list[Breakpoint]:
        """Replace every breakpoint; returns each resolved, in the order given."""
        stoppable = {n.id for seq in self.levels.sequences.values() for n in seq}
        return self.breakpoint_table.replace(specs, stoppable)

    @property
    def breakpoints(self) -> list[Breakpoint]:
        return self.breakpoint_table.all
