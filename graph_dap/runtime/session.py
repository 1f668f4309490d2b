"""The stepping state machine: a program counter over a graph's nodes, values, stops.

``DebugSession`` is what a debugger drives: ``continue_``, ``step``, ``step_in``,
``step_out``, ``step_back``, ``goto``, ``run_to``, ``restart`` each return a
:class:`Stop` saying why and where the run stopped. It knows nothing of DAP.

The counter is a stack of :class:`~.frames.Frame` s: the main graph, then a frame for
each If, Loop, Scan or function call being stepped through (a branch, an iteration
of a body, a function's body). Each frame has its own :class:`~.timeline.Timeline`
and :class:`~.values.Values`; the session coordinates them with the breakpoint
table and the engine. A ``continue_`` runs the nodes of a frame up to the next node
that has a breakpoint (or holds one) in one onnxruntime call (a segment), watched
for NaN/Inf by in-graph sums when those filters are on; steps run single nodes.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from graph_dap import log as _log
from graph_dap.errors import GraphDapError, NodeExecutionError, NodeNotFoundError, ValueNotFoundError
from graph_dap.runtime import expr as _expr
from graph_dap.runtime.breakpoints import Breakpoint, BreakpointSpec, BreakpointTable
from graph_dap.runtime.checks import check_runnable
from graph_dap.runtime.dtypes import dtype_of
from graph_dap.runtime.engine.executor import Executor
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.instrument import Instruments
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.engine.planning import CUTS, SegmentPlan, SegmentPlanner
from graph_dap.runtime.engine.segments import SegmentError, SegmentRunner
from graph_dap.runtime.engine.store import ValueStore
from graph_dap.runtime.frames import TRIP, ControlFlow, Frame, LoopState, last_uses, run_sequence
from graph_dap.runtime.graph import Graph, Node, Scope, ValueInfo
from graph_dap.runtime.inputs import InputsArg, resolve_inputs
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.stops import PathStep, Stop, StopReason
from graph_dap.runtime.tensor import TensorSummary, summarize
from graph_dap.runtime.timeline import Timeline
from graph_dap.runtime.values import Constants, Values

BREAK_FILTERS = ("nan", "inf", "error")
ITERATION = "iteration"  # the expression language's name for the innermost loop's iteration
_SKIP_LIMIT = 100_000  # iterations a continue looks ahead for a breakpoint's first (see _first_iteration)
_PAUSE_GRAIN_S = 0.5  # a run that took longer than twice this is split, so a pause lands part-way
_WATCHED_PARTS = 4  # parts of a long watched segment run at an optimization level
_logger = _log.get_logger(__name__)


def _filled(node: Node, fixed: Mapping[str, Any]) -> dict[str, Any] | None:
    """A ConstantOfShape's output as a read-only view of its one value: no memory for the weights the
    onnx wheel's light models make so (segments fill them again, as the whole model does). None for
    another node, or a shape that onnxruntime must judge."""
    if node.op_type != "ConstantOfShape" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 1 or not node.outputs[0]:
        return None
    shape = fixed.get(node.inputs[0])
    if not isinstance(shape, np.ndarray) or shape.ndim != 1 or shape.dtype != np.int64 or (shape < 0).any():
        return None
    value = next((numpy_helper.to_array(a.t) for a in node.proto.attribute if a.name == "value"), np.zeros(1, np.float32))
    if value.size != 1:
        return None
    return {node.outputs[0]: np.broadcast_to(value.reshape(()).copy(), tuple(int(d) for d in shape))}


def _placeholder(info: ValueInfo) -> np.ndarray | None:
    """An array of the declared type (no data: ``np.empty``), to build a session for a value not computed yet."""
    if info.kind != "tensor" or info.dtype in (None, "string") or info.shape is None:
        return None
    if not all(isinstance(d, int) for d in info.shape):
        return None
    return np.empty(tuple(int(d) for d in info.shape), dtype_of(info.dtype))  # type: ignore[arg-type]


class _LookInside:
    """What a segment run returns when the watch fired inside a control-flow node: step into it to find the node."""


_LOOK_INSIDE = _LookInside()


class DebugSession:
    """Runs one model under a debugger's control.

    A continue runs its segments at ``opt_level`` (onnxruntime's graph optimizations, ``all``
    by default, as a plain ``InferenceSession``); every value it shows, single steps and
    recomputations are the original graph's, computed without optimizations: exactly what
    onnxruntime computes for each original node. Constant nodes are computed once at start
    (in a body: when its frame starts) and skipped by the program counter unless
    ``skip_constants`` is False.
    """

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

    # -- the parts, for tools and tests -------------------------------------------------

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

    # -- what the breakpoint table asks of the session -------------------------------

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

    # -- frames ----------------------------------------------------------------------

    def _enter(self, node: Node) -> bool:
        """Step into ``node`` (at the counter): push the frame of its branch, body or function. False: nothing to enter."""
        parent = self.top
        begun = self.flow.begin(node, parent.values.get)
        if begun is None:
            return False
        scope, inputs, loop = begun
        self._push(node, scope, inputs, loop)
        return True

    def _first_iteration(self, node: Node, until: str | None) -> int | None:
        """Where a continue steps into ``node``: 0 (its first iteration, or it is not a loop), the first
        iteration at which one of the breakpoints in its body can stop, when their conditions read
        ``iteration`` alone (the iterations before run whole, in one call), or None: none can stop."""
        if (
            not self.fast
            or node.op_type != "Loop"
            or node.calls is not None
            or node.id in self._localize
            or self._filter.active  # (the iterations run whole would have to be watched too)
            or self._until_inside(node, until)
        ):
            return 0
        scope = self.graph.subscope(node, "body")
        if any(sc.has_value(ITERATION) for sc in self.graph.scopes.values()):
            return 0  # a value of that name: conditions read it
        direct = {n.id for n in scope.nodes}
        if any(self.breakpoint_table.at(nid) for nid in self._nested_in(node) - direct):
            return 0  # (a nested loop's own iteration is what ``iteration`` reads there)
        trip = self.flow.trip_count(node, self.top.values.get)
        limit = min(trip, _SKIP_LIMIT) if trip is not None else _SKIP_LIMIT
        first = self.breakpoint_table.first_iteration(direct, ITERATION, limit)
        if first is None:
            return 0
        if trip is not None and first >= trip:
            return None
        return first

    def _nested_in(self, node: Node) -> set[str]:
        """Ids of every node inside ``node``, at any depth."""
        if node.id not in self._inside:
            self._inside[node.id] = {n.id for n in self.graph.all_nodes() if any(s.node == node.id for s in n.path)}
        return self._inside[node.id]

    def _run_truncated(self, node: Node, iterations: int, values: Values) -> dict[str, Any]:
        """``node``'s first ``iterations`` iterations in one onnxruntime call (see ControlFlow.truncated),
        over ``values``: those of the level ``node`` is in."""
        made = self.flow.truncated(node)
        return values.execute(made, count=False, extra={TRIP: np.array(iterations, np.int64)})

    def _enter_at(self, node: Node, iteration: int) -> None:
        """Run ``node``'s first ``iteration`` iterations whole and push its frame at the start of the next;
        when the loop ends before, keep its outputs and move past it."""
        parent = self.top
        outs = self._run_truncated(node, iteration, parent.values)
        begun = self.flow.begin_at(node, parent.values.get, outs, iteration)
        if isinstance(begun, dict):
            self._past(parent, node, begun)
            return
        scope, inputs, loop = begun
        self._push(node, scope, inputs, loop)

    def _push(self, owner: Node, scope: Scope, inputs: Mapping[str, Any], loop: LoopState | None) -> Frame:
        parent = self.top
        sequence = self._sequences[scope.path]
        last_use = self._last_uses[scope.path]
        frame_ref: list[Frame] = []
        timeline = Timeline(sequence, lambda order: frame_ref[0].values.forget(scope.nodes[order]))
        store = ValueStore(self.store.budget)
        values = Values(scope, store, self.constants, self.executor, timeline, last_use, self.skip_constants, parent.values)
        frame = Frame(scope, timeline, values, last_use, owner, parent, loop)
        frame_ref.append(frame)
        self._start_frame(frame, inputs)
        self.frames.append(frame)
        return frame

    def _start_frame(self, frame: Frame, inputs: Mapping[str, Any]) -> None:
        """A frame at the start of its scope (or of an iteration): its inputs, its initializers, its constants."""
        values = frame.values
        values.store.clear()
        values.overrides.clear()
        values.stale.clear()
        values.store.fixed.update(inputs)
        values.store.fixed.update({t.name: self.graph.weights.array(t) for t in frame.scope.initializers})
        frame.timeline.reset()
        if frame.loop is not None:
            del frame.loop.inputs[frame.loop.iteration :]
            frame.loop.inputs.append(dict(inputs))
        if self.skip_constants:
            for node in frame.scope.nodes:
                if node.is_static:
                    values.store.fixed.update(values.execute(node))
        values.started = True

    def _finish(self, frame: Frame) -> str:
        """At the end of a frame's scope: ``"iterated"`` (the next iteration began) or ``"left"`` (popped)."""
        assert frame.parent is not None and frame.owner is not None
        following = self.flow.next_inputs(frame, frame.parent.values.get)
        if following is not None:
            self._start_frame(frame, following)
            return "iterated"
        outs = self.flow.results(frame)
        self.frames.pop()
        self._past(frame.parent, frame.owner, outs)
        return "left"

    def _past(self, level: Frame, node: Node, outs: Mapping[str, Any]) -> None:
        """``node`` (a control-flow node at ``level``) is done, with outputs ``outs``: move past it."""
        level.values.keep(outs)
        level.timeline.advance(node)
        level.values.evict()
        self.executor.executions[node.id] += 1

    def _until_inside(self, node: Node, until: str | None) -> bool:
        """Whether the node a run goes to (``until``) is inside ``node``."""
        return until is not None and self.graph.has_node(until) and any(s.node == node.id for s in self.graph.node(until).path)

    def _must_enter(self, node: Node, until: str | None) -> bool:
        """Whether a run must step into ``node`` rather than run it whole."""
        if not node.enterable:
            return False
        if node.id in self._holders or node.id in self._localize:
            return True
        if self._until_inside(node, until):
            return True
        # The NaN/Inf watch looks inside bodies: in a segment that watches inside the node, or node by node.
        return self._filter.active and not (self.fast and self.instruments.can(node))

    def _settle(self) -> str | None:
        """Move past the ends of bodies (the next iteration, or out); what happened last, or None."""
        what = None
        while self.top.timeline.at_end and self.top.parent is not None:
            what = self._finish(self.top)
        return what

    # -- running -------------------------------------------------------------------

    def start(self) -> Stop:
        """Compute the constant nodes and stop at the first node to run."""
        if not self.values.started:
            if self.skip_constants and not self.constants.computed:
                for node in self.graph.nodes:
                    if node.is_static:
                        outs = _filled(node, self.store.fixed)
                        try:
                            if outs is None:
                                outs = self.values.execute(node, extra=self.store.fixed)
                        except NodeExecutionError as e:
                            return Stop(StopReason.ERROR, node, str(e), details={"ort_message": e.ort_message})
                        self.store.fixed.update(outs)
                        self.constants.computed.update(outs)
                self.executor.computed_constants(self.constants.computed)
            self.values.started = True
        return self._stop(StopReason.ENTRY, "stopped at entry")

    def _stop(self, reason: StopReason, message: str = "", node: Node | None = None, **kw: Any) -> Stop:
        """A stop at the counter (or about ``node``), with the path of the frames it is in."""
        return Stop(reason, node if node is not None else self.pc, message, path=self.path, **kw)

    def _prepare(self) -> Stop | None:
        if not self.values.started:
            first = self.start()
            if first.reason is StopReason.ERROR:
                return first
        self._pause.clear()
        self.top.values.refresh()
        if not self._statics_checked:
            self._statics_checked = True
            if self.skip_constants and self._filter.active:
                fault = self._static_fault()
                if fault is not None:
                    return self._fault_stop(*fault)
        return None

    def _static_fault(self) -> tuple[Node, str, str] | None:
        """The first constant node whose output holds a watched fault (remembered per constants)."""
        key = self._filter
        constants = self.constants
        if key in constants.faults:
            return constants.faults[key]
        generation = constants.generation
        found = None
        for node in self.graph.nodes:
            if node.is_static:
                fault = key.check(node, {o: self.store.fixed.get(o) for o in node.outputs})
                if fault is not None:
                    found = (node, *fault)
                    break
        if generation == constants.generation:  # (a look ahead in the background: no constant was set meanwhile)
            constants.faults[key] = found
        return found

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

    def step(self) -> Stop:
        """Run one node and stop at the next; an If/Loop/Scan or function call runs whole.

        A control-flow node with a breakpoint inside, or run while a NaN/Inf filter is on, is
        stepped through: a breakpoint or a fault inside it stops there, as a debugger stops in a
        function it steps over. After the last node of a body: the first node of the next
        iteration, or the node after the control-flow node.
        """
        return self._drive("step")

    def step_in(self) -> Stop:
        """Step into the control-flow node at the counter (If: the branch the condition takes; Loop/Scan:
        iteration 0; a function call: its body); on any other node, as :meth:`step`."""
        return self._drive("step_in")

    def step_out(self) -> Stop:
        """Finish the innermost body (all its remaining iterations) and stop at the node after its control-flow node.

        In the main graph: run to the end, as :meth:`continue_`.
        """
        return self._drive("step_out")

    def continue_(self, *, until: str | None = None, check_first: bool = False) -> Stop:
        """Run until a breakpoint, an enabled break filter, a pause, ``until`` or the end.

        The breakpoints of the node at the program counter are not looked at (the run is
        stopped there already), unless ``check_first``: for a launch without a stop on entry.
        """
        return self._drive("continue", until, check_first)

    def _drive(self, mode: str, until: str | None = None, check_first: bool = False) -> Stop:
        """The one run loop: ``mode`` is continue, step, step_in or step_out."""
        early = self._prepare()
        if early is not None:
            return early
        base = len(self.frames)
        origin = self.top
        where = (origin.timeline.pc, origin.iteration)
        look = check_first  # look at the breakpoints of the node at the counter
        while True:
            self._settle()
            depth = len(self.frames)
            frame = self.top
            node = frame.timeline.next_node
            if node is None:
                return self._end()
            moved = origin not in self.frames or (origin.timeline.pc, origin.iteration) != where
            if (mode in ("step", "step_in") and moved) or (mode == "step_out" and depth < base):
                return self._stop(StopReason.STEP)
            if look:
                if self._paused():
                    return self._stop(StopReason.PAUSE, "paused")
                if until is not None and node.id == until:
                    return self._stop(StopReason.BREAKPOINT, f"reached {node.label}")
                hit, note = self.breakpoint_table.check(node, self)
                if hit:
                    return self._stop(StopReason.BREAKPOINT, note or f"breakpoint at {node.label}", breakpoint_ids=tuple(hit))
            else:
                self.breakpoint_table.log_only(node, self)
            look = True
            at_origin = frame is origin and mode in ("step", "step_in")
            into = at_origin and mode == "step_in"
            if node.enterable and (into or self._must_enter(node, until)):
                first = 0 if into else self._first_iteration(node, until)
                self._localize.discard(node.id)
                if first is None:
                    pass  # no breakpoint inside can stop in this run: it runs whole
                elif first > 0:
                    self._enter_at(node, first)
                    continue
                elif self._enter(node):
                    if into and self.top.timeline.next_node is not None:
                        return self._stop(StopReason.STEP)  # on the body's first node, whatever its breakpoints
                    continue
            total = len(frame.timeline.sequence)
            target = frame.timeline.pc + 1 if at_origin else self._next_target(frame, frame.timeline.pc + 1, until)
            watched_inside = node.enterable and self._filter.active  # (a segment of one: its watch goes inside)
            if self.fast and (target - frame.timeline.pc > 1 or watched_inside):
                self._progress(frame, frame.timeline.pc, total)
                stop = self._run_segment(frame, frame.timeline.pc, target)
            else:
                stop = self._run_node(node)
            self._progress(frame, frame.timeline.pc, total)
            if isinstance(stop, Stop):
                return stop
            if stop is _LOOK_INSIDE:
                look = False  # at the node whose watch fired, already looked at: step into it next

    def _progress(self, frame: Frame, done: int, total: int) -> None:
        if self.on_progress is not None and frame.parent is None:
            self.on_progress(done, total)

    def _next_target(self, frame: Frame, start: int, until: str | None) -> int:
        """The first position from ``start`` where a breakpoint, ``until`` or a node to step into must be looked at."""
        sequence = frame.timeline.sequence
        for pos in range(start, len(sequence)):
            node = sequence[pos]
            if node.id == until or self.breakpoint_table.at(node.id) or self._must_enter(node, until):
                return pos
        return len(sequence)

    def _run_segment(self, frame: Frame, start: int, end: int) -> Stop | _LookInside | None:
        """Run positions ``start..end-1`` of ``frame``: one onnxruntime call, or a few when it ran long before.

        A pause aborts the call in flight; splitting a run that took seconds lets a pause
        keep what the finished parts computed and land part-way.
        """
        took = self._segment_seconds.get((frame.scope.path, start, end))
        if not self.pausable:
            return self._run_one_segment(frame, start, end)
        if took is not None and took >= 2 * _PAUSE_GRAIN_S and end - start >= 2 and self._roomy:
            parts = min(CUTS, end - start, math.ceil(took / _PAUSE_GRAIN_S))
            bounds = [start + k * (end - start) // parts for k in range(parts + 1)]
        elif took is not None and self._in_parts(end - start):
            # A watched, optimized run that ran whole once now runs in a few parts (their sessions
            # were built ahead, see prepare_next): a fault stops it at its part, and is found from
            # that part's start (not the segment's) with the original nodes.
            bounds = self._planner(frame).parts(start, end, _WATCHED_PARTS)
        else:
            return self._run_one_segment(frame, start, end)
        for a, b in zip(bounds, bounds[1:]):
            if a > start:
                if self._paused():
                    return self._stop(StopReason.PAUSE, "paused")
                self._progress(frame, a, len(frame.timeline.sequence))
            stop = self._run_one_segment(frame, a, b)
            if stop is not None:
                return stop
        return None

    @property
    def _roomy(self) -> bool:
        """Whether sessions of a segment's parts can be kept beside the segment's own within the weight budget
        (see :mod:`.engine.budget`). Not for a model of large weights: building the parts would read and
        pre-pack its weights again at every continue; a pause then aborts the running call instead."""
        return self.executor.roomy

    def _in_parts(self, length: int) -> bool:
        return self._roomy and self.executor.optimized and self._filter.active and length >= 4 * _WATCHED_PARTS

    def _plan(self, frame: Frame, start: int, end: int) -> SegmentPlan | None:
        sequence = frame.timeline.sequence
        return self._planner(frame).plan(
            start,
            end,
            filt=self._filter,
            dtypes=self.executor.dtypes,
            budget=self.store.budget,
            conditions=lambda pos, produced: self.breakpoint_table.condition_names(sequence[pos].id, produced)
            if pos < len(sequence)
            else [],
            constants=frame.values.fixed if self.skip_constants and not self.constants.overridden else None,
            version=self.breakpoint_table.version,
            instruments=self.instruments,
            optimized=self.executor.optimized,
        )

    def prepare_next(self) -> list[threading.Thread]:
        """Build, in the background, the sessions the next continue from here will run first, so that
        pressing continue only runs them (the debugger calls this while it waits, stopped).

        A value a segment reads that is not computed yet is typed as the model declares it: a
        session needs the types of its inputs only.
        """
        frame = self.top
        node = frame.timeline.next_node
        if not self.fast or not self.values.started or node is None:
            return []
        threads: list[threading.Thread] = []
        if self.skip_constants and self._filter.active and not self._statics_checked and self._filter not in self.constants.faults:
            # the first continue looks at every constant once (resnet50: 100 MB of weights): now, not then
            threads.append(threading.Thread(target=self._static_fault, name="graph-dap-constants", daemon=True))
            threads[-1].start()
        if node.enterable and self._must_enter(node, None):
            return threads
        start = frame.timeline.pc
        end = self._next_target(frame, start + 1, None)
        if end - start < 2 and not (node.enterable and self._filter.active):
            return threads
        took = self._segment_seconds.get((frame.scope.path, start, end))
        if took is not None and took >= 2 * _PAUSE_GRAIN_S and self._roomy:
            return threads  # split by time: its parts depend on how long it ran
        bounds = self._planner(frame).parts(start, end, _WATCHED_PARTS) if took is not None and self._in_parts(end - start) else [start, end]
        embeds = self._segment_embedded(frame.values)
        for a, b in zip(bounds, bounds[1:]):
            plan = self._plan(frame, a, b)
            if plan is None:
                break
            feeds: dict[str, Any] = {}
            known = True  # every value fed is the one the run will be fed: the session can warm up on them
            for name in plan.reads:
                if name in embeds:
                    continue
                value = frame.values.store.peek(name)
                if value is None or name in frame.values.stale or name in frame.values.approx:
                    known = False
                if value is None:
                    value = _placeholder(self.graph.info_at(frame.scope.path, name))
                    if value is None:
                        return threads  # a type that is not known ahead
                feeds[name] = value
            embedded = {n: frame.values.fixed[n] for n in plan.reads if n in embeds}
            thread = self.segments.prepare(plan.ran, feeds, embedded, plan.wanted, plan.watch, self.constants.version, warm_up=known)
            if thread is not None:
                threads.append(thread)
        return threads

    def _segment_embedded(self, values: Values) -> frozenset[str]:
        """What a continue's segments embed: the model's constants and, in optimized segments, the
        large constants computed once at start (a weight stored transposed, say; a ConstantOfShape's
        is filled in the segment instead, see :meth:`.SegmentPlanner.with_constants`), as onnxruntime
        folds them into the whole model and pre-packs them. Fed, they would run on unpacked weights.
        Not once one of them was set: fed, its new value needs no new session."""
        if self.executor.optimized and not self.constants.overridden and self.executor.segments.from_memory:
            return values.embedded | self.executor.segments.from_memory
        return values.embedded

    def _run_one_segment(self, frame: Frame, start: int, end: int) -> Stop | _LookInside | None:
        """Run positions ``start..end-1`` of ``frame`` in one onnxruntime call; on any trouble, node by node."""
        filt = self._filter
        values = frame.values
        plan = self._plan(frame, start, end)
        if plan is None:
            return self._run_slow(frame, end)  # learn the types first: the watch plan needs them
        read = values.flowing if self.executor.optimized else values.get
        feeds, embedded = self.executor.split(plan.reads, read, values.fixed, self._segment_embedded(values))
        self._run_options = ort.RunOptions()
        if self._pause.is_set():  # a pause that came before these run options: it must still stop this run
            self._run_options.terminate = True
        began = time.perf_counter()
        try:
            result = self.executor.run_segment(
                plan.ran, feeds, embedded, plan.wanted, plan.watch, self._run_options, self.constants.version
            )
            self._segment_seconds[(frame.scope.path, start, end)] = time.perf_counter() - began
        except SegmentError as e:
            if self._paused():
                return self._stop(StopReason.PAUSE, "paused")
            _logger.info("positions %d..%d in one call failed in onnxruntime (%s); running them node by node", start, end - 1, e)
            return self._run_slow(frame, end)
        finally:
            self._run_options = None
        frame.timeline.advance_segment(plan.nodes, end)
        values.keep(result.values, approx=self.executor.optimized)
        values.evict()
        if result.sums is not None and plan.watch is not None:
            found = filt.first_fault(frame.scope, plan.watch, result.sums, values.value, result.watched, values.prefetch)
            if found is None and self.executor.optimized:
                fired = filt.fired(plan.watch, result.sums, result.watched)
                if fired:  # the optimized graph made a NaN that the original nodes do not: say so
                    return self._disagreement(frame, plan, feeds, embedded, fired)
            if found is not None:
                node, name, kind = found
                if kind == "inner":  # a fault somewhere inside this control-flow node: back to it, then step in
                    frame.timeline.rewind_to(frame.timeline.position(node))
                    self._localize.add(node.id)
                    return _LOOK_INSIDE
                frame.timeline.rewind_to(frame.timeline.position(node) + 1)
                return self._fault_stop(node, name, kind)
        return None

    def _disagreement(self, frame: Frame, plan: SegmentPlan, feeds: Mapping[str, Any], embedded: Mapping[str, Any], fired: list[str]) -> Stop:
        """A NaN stop at the first tensor whose sum the optimized segment made NaN while the original nodes compute it without one."""
        assert plan.watch is not None
        scope = frame.scope
        tensor = min((t for t in fired if t not in plan.watch.inner), key=lambda t: scope.producer(t).order, default=fired[0])  # type: ignore[union-attr]
        node = plan.watch.inner.get(tensor) or scope.producer(tensor)
        assert node is not None
        guarded = [g for g, by in plan.watch.guards.items() if by == tensor]
        origin = list(dict.fromkeys(n.id for n in (scope.producer(t) for t in [*guarded, tensor]) if n is not None))
        level = self.executor.opt_level
        try:
            optimized = self.segments.optimized_model(plan.ran, feeds, embedded, plan.wanted, plan.watch)
            fused = next((p for p in optimized.graph.node if tensor in p.output), None)
            made_by = f"{fused.op_type} '{fused.name}'" if fused is not None else "a node onnxruntime's optimizer made"
        except SegmentError as e:
            made_by = f"an optimized node (the optimized graph could not be read back: {e})"
        frame.timeline.rewind_to(frame.timeline.position(node) + 1)
        original = summarize(frame.values.value(tensor)).text() if frame.values.available(tensor) else "not computed"
        message = (
            f"the optimized graph (level '{level}') makes NaN in '{tensor}' at {made_by}, from {', '.join(origin)}; "
            f"the original nodes compute it without NaN ({original}): a fusion that computes differently"
        )
        details = {"disagreement": True, "opt_level": level, "optimized_node": made_by, "origin": origin, "optimized_sum": "nan", "original": original}
        return self._stop(StopReason.NAN, message, node, tensor=tensor, details=details)

    def _run_slow(self, frame: Frame, end: int) -> Stop | None:
        timeline = frame.timeline
        while timeline.pc < end:
            node = timeline.sequence[timeline.pc]
            if node.enterable and self._must_enter(node, None):
                return None  # the run loop steps into it
            stop = self._run_node(node)
            if stop is not None:
                return stop
            if timeline.pc < end and self._paused():
                return self._stop(StopReason.PAUSE, "paused")
        return None

    def _end(self) -> Stop:
        return Stop(StopReason.END, None, "the run reached the end of the graph")

    def run_to_end(self, check_first: bool = True) -> Stop:
        """Run to the end as fast as the model runs: with no breakpoint and no NaN/Inf filter, the whole
        model in one onnxruntime session at the session's optimization level (the user's own run; its
        outputs are the optimized graph's); else, or when onnxruntime fails on it, as :meth:`continue_`,
        which names the node that fails."""
        whole = (
            not self.breakpoint_table.all
            and not self._filter.active
            and len(self.frames) == 1
            and self.timeline.pc == 0
            and self.constants.version == 0
            and not self.values.overrides
        )
        if whole:
            early = self._prepare()
            if early is not None:
                return early
            try:
                outs = self.executor.run_whole(self.inputs)
            except SegmentError as e:
                _logger.info("the whole model failed in onnxruntime (%s); running it again to find the node", e)
            else:
                self.timeline.advance_segment(self.timeline.sequence, len(self.timeline.sequence))
                self.values.keep(outs)
                return self._end()
        return self.continue_(check_first=check_first)

    def run_to(self, node_id: str) -> Stop:
        """Continue until ``node_id`` is next (breakpoints and filters still stop first)."""
        node = self._stoppable(node_id)
        frame = self.top
        if node.path == frame.scope.path:
            target = frame.timeline.position(node)
            if target < frame.timeline.pc:
                raise GraphDapError(f"node {node.label} already ran; use goto to go back to it")
            if target == frame.timeline.pc:
                return self._stop(StopReason.BREAKPOINT, f"reached {node.label}")
        return self.continue_(until=node.id)

    def goto(self, node_id: str) -> Stop:
        """Make ``node_id`` (a node of the innermost frame's level) the next node, computing any inputs it lacks."""
        node = self._stoppable(node_id)
        frame = self.top
        if node.path != frame.scope.path:
            where = self.graph.scope_of(node).label
            raise GraphDapError(
                f"goto moves within the current level ({frame.scope.label}); {node.label} is in {where}: "
                "step into or out of the levels between first"
            )
        early = self._prepare()
        if early is not None:
            return early
        missing = [i for i in node.all_inputs if not frame.values.available(i)]
        computed: list[int] = []
        if missing:
            needed = self._ancestors(frame, missing)
            try:
                frame.values.compute(missing)
            except NodeExecutionError as e:
                return self._stop(StopReason.ERROR, str(e), self.graph.node(e.node_id), details={"ort_message": e.ort_message})
            computed = [n.order for n in needed]
        frame.timeline.jump(frame.timeline.position(node), computed)
        return self._stop(StopReason.GOTO, f"jumped to {node.label}")

    def _ancestors(self, frame: Frame, names: Sequence[str]) -> list[Node]:
        out: dict[int, Node] = {}
        frontier = list(names)
        scope = frame.scope
        while frontier:
            p = scope.producer(frontier.pop())
            if p is None or p.order in out or p.order in frame.timeline.ran or (p.is_static and self.skip_constants):
                continue
            out[p.order] = p
            frontier.extend(i for i in p.all_inputs if not frame.values.available(i))
        return [out[k] for k in sorted(out)]

    def _stoppable(self, node_id: str) -> Node:
        node = self.graph.node(node_id) if self.graph.has_node(node_id) else None
        if node is None:
            producers = self.graph.producers(node_id)
            if not producers:
                raise NodeNotFoundError(f"no node '{node_id}' in the graph")
            node = producers[0]
        if node not in self._sequences[node.path]:
            raise GraphDapError(f"node {node.label} is a constant, computed once at load; it cannot be the next node")
        return node

    def step_back(self) -> Stop:
        """Undo the last node (or goto): its outputs are forgotten and the counter moves back.

        At the start of a body: back into the previous iteration (before its last node), or
        out to the control-flow node, which has not run.
        """
        while True:
            frame = self.top
            if frame.timeline.undo():
                return self._stop(StopReason.STEP, "stepped back")
            if frame.parent is None:
                return self._stop(StopReason.STEP, "already at the start of the history")
            if frame.loop is not None and frame.loop.iteration > 0:
                self._back_into_previous_iteration(frame)
                if frame.timeline.next_node is not None:
                    return self._stop(StopReason.STEP, "stepped back into the previous iteration")
                continue
            self.frames.pop()
            return self._stop(StopReason.STEP, "stepped back out of the body")

    def _back_into_previous_iteration(self, frame: Frame) -> None:
        """The frame as it was before the last node of its previous iteration ran."""
        loop = frame.loop
        assert loop is not None
        loop.iteration -= 1
        for acc in loop.scans:
            if acc:
                acc.pop()
        inputs = loop.inputs[loop.iteration]
        if inputs is None:  # an iteration run whole before a breakpoint's first: what it started from, again
            owner, parent = frame.owner, frame.parent
            assert owner is not None and parent is not None
            outs = self._run_truncated(owner, loop.iteration, parent.values) if loop.iteration > 0 else {}
            carried = self.flow.split_truncated(owner, outs)[0] if outs else None
            inputs = self.flow.loop_inputs_at(owner, frame.scope, loop.iteration, carried, parent.values.get)
            loop.inputs[loop.iteration] = inputs
        self._start_frame(frame, inputs)
        sequence = frame.timeline.sequence
        if len(sequence) > 1:
            wanted = [o for n in sequence[:-1] for o in n.outputs if o]
            frame.values.compute(wanted)
            frame.timeline.advance_segment(sequence[:-1], len(sequence) - 1)

    def reverse_continue(self) -> Stop:
        """Step back until a node with a breakpoint is next, or the history is empty."""
        while True:
            stop = self.step_back()
            node = self.pc
            if stop.message == "already at the start of the history":
                return self._stop(StopReason.ENTRY, "back at the start")
            if node is not None and self.breakpoint_table.stops_at(node.id):
                return self._stop(StopReason.BREAKPOINT, f"breakpoint at {node.label}")

    def restart(self, inputs: InputsArg = None, dims: Mapping[str, int] | None = None) -> Stop:
        """Back to the start, with the original inputs (or new ``inputs``, checked like the first); breakpoints are kept.

        New inputs reuse every onnxruntime session built so far: cheap for a data set of inputs of one shape.
        """
        if inputs is not None:
            self.inputs = resolve_inputs(self.graph, inputs, dims)
        self._reset()
        return self.start()

    def pause(self) -> None:
        """Ask a running ``continue_`` (in another thread) to stop as soon as it can."""
        self._pause.set()
        opts = self._run_options
        if opts is not None:
            opts.terminate = True
