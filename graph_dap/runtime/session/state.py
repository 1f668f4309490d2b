"""What a debug session holds, and how it answers for it: the frames of the program counter, values,
breakpoints and break filters; reading and setting values; the stops it makes."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from graph_dap.errors import GraphDapError, NodeExecutionError, ValueNotFoundError
from graph_dap.runtime import expr as _expr
from graph_dap.runtime.breakpoints import Breakpoint, BreakpointSpec, BreakpointTable
from graph_dap.runtime.checks import check_runnable
from graph_dap.runtime.engine.executor import Executor
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.instrument import Instruments
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.engine.planning import SegmentPlanner
from graph_dap.runtime.engine.segments import SegmentRunner
from graph_dap.runtime.engine.store import ValueStore
from graph_dap.runtime.frames import ControlFlow, Frame, last_uses, run_sequence
from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.inputs import InputsArg, resolve_inputs
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.stops import PathStep, Stop, StopReason
from graph_dap.runtime.tensor import TensorSummary, summarize
from graph_dap.runtime.timeline import Timeline
from graph_dap.runtime.values import Constants, Values

BREAK_FILTERS = ("nan", "inf", "error")
ITERATION = "iteration"  # the expression language's name for the innermost loop's iteration


class SessionState:
    """A model under a debugger's control, at rest: the state that :class:`~.driver.DebugSession`'s
    commands move. See :class:`~.driver.DebugSession` for the arguments."""

    def __init__(
        self,
        model: str | os.PathLike[str] | onnx.ModelProto | Graph,
        inputs: InputsArg = None,
        *,
        dims: Mapping[str, int] | None = None,
        providers: Sequence[str] | None = None,
        skip_constants: bool = True,
        break_on: Iterable[str] = (),
        inf_exclude: Iterable[str] = (),
        opt_level: str = "all",
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
        # A run that took seconds is split next time, so that a pause lands part-way; a batch
        # run that nobody pauses (a scan's) keeps each segment whole: one onnxruntime call.
        self.pausable = pausable
        self.break_on: set[str] = set()
        self.set_break_on(break_on)
        self.inf_exclude: tuple[str, ...] = tuple(inf_exclude)
        self.base_dir = Path(base_dir) if base_dir else (self.graph.path.parent if self.graph.path else Path.cwd())
        self.on_log = on_log
        self.on_progress = on_progress
        self.logs: list[str] = []
        self.constants = Constants(self.graph, skip_constants)
        self.executor = Executor(self.graph, providers, opt_level, self.constants.embedded)
        self.store = ValueStore(None if memory_budget_mb is None else int(memory_budget_mb * (1 << 20)))
        self.flow = ControlFlow(self.graph)
        self.instruments = Instruments(self.graph)
        main = self.graph.main
        self._sequences = {path: run_sequence(scope, skip_constants) for path, scope in self.graph.scopes.items()}
        self._last_uses = {path: last_uses(scope, self._sequences[path]) for path, scope in self.graph.scopes.items()}
        self._planners: dict[Any, SegmentPlanner] = {}
        sequence = self._sequences[()]
        self.timeline = Timeline(sequence, lambda order: self.values.forget(self.graph.nodes[order]))
        self._last_use = self._last_uses[()]
        self.values = Values(main, self.store, self.constants, self.executor, self.timeline, self._last_use, skip_constants)
        self.frames: list[Frame] = [Frame(main, self.timeline, self.values, self._last_use)]
        self.breakpoint_table = BreakpointTable(self.graph)
        self._holders: set[str] = set()  # enterable nodes with a breakpoint somewhere inside
        self._inside: dict[str, set[str]] = {}  # node id -> ids of the nodes inside it
        self._localize: set[str] = set()  # enterable nodes whose watch fired: step into them to find the node
        self._pause = threading.Event()
        self._run_options: ort.RunOptions | None = None
        self._segment_seconds: dict[tuple[Any, int, int], float] = {}
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
        return self._planner(self.frames[0])

    @property
    def executions(self) -> Counter[str]:
        """How many times each node ran (look-aheads for breakpoint conditions not counted)."""
        return self.executor.executions

    @property
    def ort_calls(self) -> int:
        """onnxruntime calls made so far (one per node step, one per segment)."""
        return self.executor.ort_calls

    def _planner(self, frame: Frame) -> SegmentPlanner:
        key = frame.scope.path
        planner = self._planners.get(key)
        if planner is None:
            planner = self._planners[key] = SegmentPlanner(frame.scope, frame.timeline.sequence, frame.last_use)
        return planner

    # -- state ---------------------------------------------------------------------

    def _reset(self) -> None:
        del self.frames[1:]
        self._localize.clear()
        self.constants.reset()
        self.values.reset(self.inputs)
        self.timeline.reset()
        self.breakpoint_table.reset_hits()
        self._statics_checked = False
        self.executor.unoptimized.clear()

    @property
    def top(self) -> Frame:
        """The innermost frame: where the counter is."""
        return self.frames[-1]

    @property
    def pc(self) -> Node | None:
        """The next node to run; None once the run is at its end."""
        return self.top.timeline.next_node

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
        return tuple(s for f in self.frames if (s := f.step()) is not None)

    @property
    def iteration(self) -> int | None:
        """The innermost loop's iteration; None outside loops."""
        for frame in reversed(self.frames):
            if frame.loop is not None:
                return frame.loop.iteration
        return None

    def sequence_of(self, node: Node) -> tuple[Node, ...]:
        """The nodes the counter walks through in ``node``'s scope (its graph, branch or body), in run order."""
        return self._sequences[node.path]

    def frame(self, level: int = 0) -> Frame:
        """A frame by level: 0 is the innermost, ``len(frames) - 1`` the main graph."""
        if not 0 <= level < len(self.frames):
            raise GraphDapError(f"no frame at level {level}: there are {len(self.frames)}")
        return self.frames[len(self.frames) - 1 - level]

    def set_break_on(self, filters: Iterable[str]) -> None:
        """Enable the break filters ``nan``, ``inf`` and ``error``."""
        wanted = set(filters)
        bad = wanted - set(BREAK_FILTERS)
        if bad:
            raise GraphDapError(f"unknown break filter '{sorted(bad)[0]}'; expected any of {', '.join(BREAK_FILTERS)}")
        self.break_on = wanted

    @property
    def _filter(self) -> FaultFilter:
        return FaultFilter("nan" in self.break_on, "inf" in self.break_on, self.inf_exclude)

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

    def outputs(self, exact: bool = True) -> dict[str, Any]:
        """The graph outputs computed so far, as the original graph computes them; ``exact=False``: as the run
        left them (after a continue at an optimization level, what the user's own optimized run gives, without
        recomputing the model with its original nodes: a batch of runs that only summarizes its outputs)."""
        if not exact:
            return {n: self.values.flowing(n) for n in self.graph.output_names if self.values.available(n)}
        return {n: self.value(n, len(self.frames) - 1) for n in self.graph.output_names if self.values.available(n)}

    def evaluate(self, text: str | _expr.Expression, extra: Mapping[str, Any] | None = None, level: int = 0) -> Any:
        """Evaluate a tensor expression over the values the frame at ``level`` sees (and ``iteration``)."""
        return _expr.evaluate(text, self._resolver(extra, level), base_dir=self.base_dir)

    def _resolver(self, extra: Mapping[str, Any] | None = None, level: int = 0) -> Callable[[str], Any]:
        values = self._values(level)
        frames = self.frames[: len(self.frames) - level]

        def resolve(name: str) -> Any:
            if extra and name in extra:
                return extra[name]
            try:
                return values.value(name)
            except ValueNotFoundError:
                if name != ITERATION:
                    raise
            for frame in reversed(frames):
                if frame.loop is not None:
                    return np.int64(frame.loop.iteration)
            raise ValueNotFoundError("'iteration' is the innermost loop's iteration, and no loop is running here")

        return resolve

    def set_value(self, name: str, value: Any, level: int = 0) -> list[str]:
        """Replace a value (as the frame at ``level`` sees it); its computed dependents become stale, recomputed next.

        A scalar broadcasts to the value's shape. Returns the names made stale.
        """
        values = self._values(level)
        stale = values.set(name, value)
        for frame in self.frames[len(self.frames) - level :]:  # the levels inside read it from here
            stale += frame.values.outer_changed([name, *stale])
        return stale

    # -- what the breakpoint table asks of the session -----------------------------

    def is_available(self, name: str) -> bool:
        return self.top.values.available(name) or (name == ITERATION and self.iteration is not None)

    def resolver(self, extra: Mapping[str, Any] | None = None) -> Callable[[str], Any]:
        return self._resolver(extra)

    def look_ahead(self, node: Node) -> dict[str, Any]:
        """``node``'s outputs without running it: a look ahead, not a step."""
        return self.top.values.execute(node, count=False)

    def log(self, line: str) -> None:
        self.logs.append(line)
        if self.on_log is not None:
            self.on_log(line)

    # -- breakpoints ---------------------------------------------------------------

    def set_breakpoints(self, specs: Iterable[BreakpointSpec | str]) -> list[Breakpoint]:
        """Replace every breakpoint; returns each resolved, in the order given."""
        stoppable = {n.id for seq in self._sequences.values() for n in seq}
        out = self.breakpoint_table.replace(specs, stoppable)
        self._holders = {step.node for bp in out for nid in bp.node_ids for step in self.graph.node(nid).path}
        return out

    @property
    def breakpoints(self) -> list[Breakpoint]:
        return self.breakpoint_table.all

    # -- stops ---------------------------------------------------------------------

    def _stop(self, reason: StopReason, message: str = "", node: Node | None = None, **kw: Any) -> Stop:
        """A stop at the counter (or about ``node``), with the path of the frames it is in."""
        return Stop(reason, node if node is not None else self.pc, message, path=self.path, **kw)

    def _paused(self) -> bool:
        """Whether a pause was asked for (and take it: the flag is cleared)."""
        if self._pause.is_set():
            self._pause.clear()
            return True
        return False

    def _run_node(self, node: Node) -> Stop | None:
        """Run the node at the counter of the innermost frame and move past it; a stop if it failed or faulted."""
        frame = self.top
        try:
            outs = frame.values.execute(node)
        except NodeExecutionError as e:
            return self._error_stop(node, e)
        frame.values.keep(outs)
        frame.timeline.advance(node)
        frame.values.evict()
        fault = self._filter.check(node, outs)
        return self._fault_stop(node, *fault) if fault else None

    def _error_stop(self, node: Node, e: NodeExecutionError) -> Stop:
        values = self.top.values
        peek = values.store.peek
        inputs = {i: summarize(peek(i)).text() for i in node.all_inputs if peek(i) is not None}
        details = {"ort_message": e.ort_message, "inputs": inputs}
        if "error" in self.break_on:
            return self._stop(StopReason.ERROR, str(e), node, details=details)
        return self._stop(StopReason.FAILED, f"the run failed: {e}", node, details=details)

    def _fault_stop(self, node: Node, name: str, kind: str) -> Stop:
        values = self.top.values
        value = np.asarray(values.value(name))
        inputs = {i: values.value(i) for i in node.all_inputs if values.available(i)}
        stop: Stop = self._filter.stop_details(node, name, value, kind, inputs, Stop, StopReason)
        return Stop(stop.reason, stop.node, stop.message, stop.tensor, stop.details, path=self.path)

    def _end(self) -> Stop:
        return Stop(StopReason.END, None, "the run reached the end of the graph")
