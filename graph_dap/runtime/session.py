"""The stepping state machine: a program counter over a graph's nodes, values, stops.

``DebugSession`` is what a debugger drives: ``continue_``, ``step``, ``step_back``,
``goto``, ``run_to``, ``restart`` each return a :class:`Stop` saying why and where
the run stopped. It knows nothing of DAP.

It coordinates small parts: the :class:`~.timeline.Timeline` (the counter and the
undo history), the :class:`~.values.Values` (what is known, stale, set), the
:class:`~.breakpoints.BreakpointTable`, and the engine's executor and planner. A
``continue_`` runs the nodes up to the next node that has a breakpoint in one
onnxruntime call (a segment), watched for NaN/Inf by in-graph sums when those
filters are on; steps run single nodes.
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

from graph_dap import log as _log
from graph_dap.errors import GraphDapError, NodeExecutionError, NodeNotFoundError
from graph_dap.runtime import expr as _expr
from graph_dap.runtime.breakpoints import Breakpoint, BreakpointSpec, BreakpointTable
from graph_dap.runtime.engine.executor import Executor
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.engine.planning import CUTS, SegmentPlanner
from graph_dap.runtime.engine.segments import SegmentError, SegmentRunner
from graph_dap.runtime.engine.store import ValueStore
from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.inputs import InputsArg, resolve_inputs
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.stops import Stop, StopReason
from graph_dap.runtime.tensor import TensorSummary, summarize
from graph_dap.runtime.timeline import Timeline
from graph_dap.runtime.values import Constants, Values

BREAK_FILTERS = ("nan", "inf", "error")
_logger = _log.get_logger(__name__)
_PAUSE_GRAIN_S = 0.5  # a run that took longer than twice this is split, so a pause lands part-way


class DebugSession:
    """Runs one model under a debugger's control.

    Values are exactly what onnxruntime computes (optimizations off by default,
    the same for single nodes and segments). Constant nodes are computed once at
    start and skipped by the program counter unless ``skip_constants`` is False.
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
        opt_level: str = "none",
        memory_budget_mb: float | None = None,
        fast: bool = True,
        base_dir: str | os.PathLike[str] | None = None,
        on_log: Callable[[str], None] | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.graph = model if isinstance(model, Graph) else load_graph(model)
        self.inputs = resolve_inputs(self.graph, inputs, dims)
        self.skip_constants = skip_constants
        self.fast = fast
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
        sequence = tuple(n for n in self.graph.nodes if not (skip_constants and n.is_static))
        self.timeline = Timeline(sequence, lambda order: self.values.forget(self.graph.nodes[order]))
        self._last_use = self._last_uses(sequence)
        self.values = Values(self.graph, self.store, self.constants, self.executor, self.timeline, self._last_use, skip_constants)
        self.breakpoint_table = BreakpointTable(self.graph)
        self.planner = SegmentPlanner(self.graph, sequence, self._last_use)
        self._pause = threading.Event()
        self._run_options: ort.RunOptions | None = None
        self._segment_seconds: dict[tuple[int, int], float] = {}
        self._reset()

    def _last_uses(self, sequence: Sequence[Node]) -> dict[str, int]:
        """For each value, the last position in the run sequence that reads it."""
        last: dict[str, int] = {}
        for pos, n in enumerate(sequence):
            for i in n.all_inputs:
                last[i] = pos
        for o in self.graph.output_names:
            last[o] = len(sequence)
        return last

    # -- the parts, for tools and tests -------------------------------------------------

    @property
    def runner(self) -> NodeRunner:
        return self.executor.runner

    @property
    def segments(self) -> SegmentRunner:
        return self.executor.segments

    @property
    def executions(self) -> Counter[str]:
        """How many times each node ran (look-aheads for breakpoint conditions not counted)."""
        return self.executor.executions

    @property
    def ort_calls(self) -> int:
        """onnxruntime calls made so far (one per node step, one per segment)."""
        return self.executor.ort_calls

    # -- state ---------------------------------------------------------------------

    def _reset(self) -> None:
        self.constants.reset()
        self.values.reset(self.inputs)
        self.timeline.reset()
        self.breakpoint_table.reset_hits()
        self._statics_checked = False

    @property
    def pc(self) -> Node | None:
        """The next node to run; None once the run is at its end."""
        return self.timeline.next_node

    @property
    def last_node(self) -> Node | None:
        """The node that ran last (its outputs are the "last outputs")."""
        return self.timeline.last

    @property
    def sequence(self) -> tuple[Node, ...]:
        """The nodes the program counter walks through, in run order."""
        return self.timeline.sequence

    @property
    def at_end(self) -> bool:
        return self.timeline.at_end

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

    def value(self, name: str) -> Any:
        """The current value of ``name`` (possibly stale; see :meth:`is_stale`)."""
        return self.values.value(name)

    def has_value(self, name: str) -> bool:
        return self.values.available(name)

    def summary(self, name: str) -> TensorSummary:
        return summarize(self.value(name))

    def computed_values(self) -> list[str]:
        """Names of every value known now: inputs, initializers, then computed ones in run order."""
        return [n for n in self.graph.value_names() if self.values.available(n)]

    def is_stale(self, name: str) -> bool:
        """True when an upstream value was set and this one is not recomputed yet."""
        return name in self.values.stale

    def outputs(self) -> dict[str, Any]:
        """The graph outputs computed so far."""
        return {n: self.value(n) for n in self.graph.output_names if self.values.available(n)}

    def evaluate(self, text: str | _expr.Expression, extra: Mapping[str, Any] | None = None) -> Any:
        """Evaluate a tensor expression over the current values."""
        return _expr.evaluate(text, self.values.resolver(extra), base_dir=self.base_dir)

    def set_value(self, name: str, value: Any) -> list[str]:
        """Replace a value; its computed dependents become stale and are recomputed next.

        A scalar broadcasts to the value's shape. Returns the names made stale.
        """
        return self.values.set(name, value)

    # -- what the breakpoint table asks of the session -------------------------------

    def is_available(self, name: str) -> bool:
        return self.values.available(name)

    def resolver(self, extra: Mapping[str, Any] | None = None) -> Callable[[str], Any]:
        return self.values.resolver(extra)

    def look_ahead(self, node: Node) -> dict[str, Any]:
        """``node``'s outputs without running it: a look ahead, not a step."""
        return self.values.execute(node, count=False)

    def log(self, line: str) -> None:
        self.logs.append(line)
        if self.on_log is not None:
            self.on_log(line)

    # -- breakpoints ---------------------------------------------------------------

    def set_breakpoints(self, specs: Iterable[BreakpointSpec | str]) -> list[Breakpoint]:
        """Replace every breakpoint; returns each resolved, in the order given."""
        return self.breakpoint_table.replace(specs, set(self.timeline.positions))

    @property
    def breakpoints(self) -> list[Breakpoint]:
        return self.breakpoint_table.all

    # -- running -------------------------------------------------------------------

    def start(self) -> Stop:
        """Compute the constant nodes and stop at the first node to run."""
        if not self.values.started:
            if self.skip_constants and not self.constants.computed:
                for node in self.graph.nodes:
                    if node.is_static:
                        try:
                            outs = self.values.execute(node, extra=self.store.fixed)
                        except NodeExecutionError as e:
                            return Stop(StopReason.ERROR, node, str(e), details={"ort_message": e.ort_message})
                        self.store.fixed.update(outs)
                        self.constants.computed.update(outs)
            self.values.started = True
        return Stop(StopReason.ENTRY, self.pc, "stopped at entry")

    def _prepare(self) -> Stop | None:
        if not self.values.started:
            first = self.start()
            if first.reason is StopReason.ERROR:
                return first
        self._pause.clear()
        self.values.refresh()
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
        faults = self.constants.faults
        if key not in faults:
            found = None
            for node in self.graph.nodes:
                if node.is_static:
                    fault = key.check(node, {o: self.store.fixed.get(o) for o in node.outputs})
                    if fault is not None:
                        found = (node, *fault)
                        break
            faults[key] = found
        return faults[key]

    def _paused(self) -> bool:
        """Whether a pause was asked for (and take it: the flag is cleared)."""
        if self._pause.is_set():
            self._pause.clear()
            return True
        return False

    def _run_node(self, node: Node) -> Stop | None:
        """Run the node at the program counter and move past it; a stop if it failed or faulted."""
        try:
            outs = self.values.execute(node)
        except NodeExecutionError as e:
            return self._error_stop(node, e)
        self.values.keep(outs)
        self.timeline.advance(node)
        self.values.evict()
        fault = self._filter.check(node, outs)
        return self._fault_stop(node, *fault) if fault else None

    def _error_stop(self, node: Node, e: NodeExecutionError) -> Stop:
        peek = self.store.peek
        inputs = {i: summarize(peek(i)).text() for i in node.all_inputs if peek(i) is not None}
        details = {"ort_message": e.ort_message, "inputs": inputs}
        if "error" in self.break_on:
            return Stop(StopReason.ERROR, node, str(e), details=details)
        return Stop(StopReason.END, node, f"the run ended with an error: {e}", details=details)

    def _fault_stop(self, node: Node, name: str, kind: str) -> Stop:
        value = np.asarray(self.value(name))
        inputs = {i: self.value(i) for i in node.all_inputs if self.values.available(i)}
        return self._filter.stop_details(node, name, value, kind, inputs, Stop, StopReason)

    def step(self) -> Stop:
        """Run one node (an If/Loop/Scan runs whole); stop at the next."""
        early = self._prepare()
        if early is not None:
            return early
        node = self.pc
        if node is None:
            return self._end()
        self.breakpoint_table.log_only(node, self)
        stop = self._run_node(node)
        if stop is not None:
            return stop
        return Stop(StopReason.STEP, self.pc) if self.pc is not None else self._end()

    def continue_(self, *, until: str | None = None, check_first: bool = False) -> Stop:
        """Run until a breakpoint, an enabled break filter, a pause, ``until`` or the end.

        The breakpoints of the node at the program counter are not looked at (the run is
        stopped there already), unless ``check_first``: for a launch without a stop on entry.
        """
        early = self._prepare()
        if early is not None:
            return early
        timeline = self.timeline
        total = len(timeline.sequence)
        first = not check_first
        while not timeline.at_end:
            node = timeline.sequence[timeline.pc]
            if not first:
                if self._paused():
                    return Stop(StopReason.PAUSE, node, "paused")
                if until is not None and node.id == until:
                    return Stop(StopReason.BREAKPOINT, node, f"reached {node.label}")
                hit, note = self.breakpoint_table.check(node, self)
                if hit:
                    return Stop(StopReason.BREAKPOINT, node, note or f"breakpoint at {node.label}", breakpoint_ids=tuple(hit))
            else:
                self.breakpoint_table.log_only(node, self)
            first = False
            target = self._next_target(timeline.pc + 1, until)
            if self.fast and target - timeline.pc > 1:
                self._progress(timeline.pc, total)
                stop = self._run_segment(timeline.pc, target)
            else:
                stop = self._run_node(node)
            self._progress(timeline.pc, total)
            if stop is not None:
                return stop
        return self._end()

    def _progress(self, done: int, total: int) -> None:
        if self.on_progress is not None:
            self.on_progress(done, total)

    def _next_target(self, start: int, until: str | None) -> int:
        """The first position from ``start`` where a breakpoint or ``until`` must be looked at."""
        sequence = self.timeline.sequence
        for pos in range(start, len(sequence)):
            nid = sequence[pos].id
            if nid == until or self.breakpoint_table.at(nid):
                return pos
        return len(sequence)

    def _run_segment(self, start: int, end: int) -> Stop | None:
        """Run positions ``start..end-1``: one onnxruntime call, or a few when it ran long before.

        A pause aborts the call in flight; splitting a run that took seconds lets a pause
        keep what the finished parts computed and land part-way.
        """
        took = self._segment_seconds.get((start, end))
        if took is None or took < 2 * _PAUSE_GRAIN_S or end - start < 2:
            return self._run_one_segment(start, end)
        parts = min(CUTS, end - start, math.ceil(took / _PAUSE_GRAIN_S))
        bounds = [start + k * (end - start) // parts for k in range(parts + 1)]
        for a, b in zip(bounds, bounds[1:]):
            if a > start:
                if self._paused():
                    return Stop(StopReason.PAUSE, self.timeline.sequence[a], "paused")
                self._progress(a, len(self.timeline.sequence))
            stop = self._run_one_segment(a, b)
            if stop is not None:
                return stop
        return None

    def _run_one_segment(self, start: int, end: int) -> Stop | None:
        """Run positions ``start..end-1`` in one onnxruntime call; on any trouble, node by node."""
        filt = self._filter
        sequence = self.timeline.sequence
        plan = self.planner.plan(
            start,
            end,
            filt=filt,
            dtypes=self.executor.dtypes,
            budget=self.store.budget,
            conditions=lambda pos, produced: self.breakpoint_table.condition_names(sequence[pos].id, produced)
            if pos < len(sequence)
            else [],
            constants=self.store.fixed if self.skip_constants and not self.constants.overridden else None,
            version=self.breakpoint_table.version,
        )
        if plan is None:
            return self._run_slow(start, end)  # learn the types first: the watch plan needs them
        feeds, embedded = self.executor.split(plan.reads, self.values.get, self.store.fixed)
        self._run_options = ort.RunOptions()
        began = time.perf_counter()
        try:
            result = self.executor.run_segment(
                plan.ran, feeds, embedded, plan.wanted, plan.watch, self._run_options, self.constants.version
            )
            self._segment_seconds[(start, end)] = time.perf_counter() - began
        except SegmentError as e:
            if self._paused():
                return Stop(StopReason.PAUSE, sequence[start], "paused")
            _logger.info("positions %d..%d in one call failed in onnxruntime (%s); running them node by node", start, end - 1, e)
            return self._run_slow(start, end)
        finally:
            self._run_options = None
        self.timeline.advance_segment(plan.nodes, end)
        self.values.keep(result.values)
        self.values.evict()
        if result.sums is not None and plan.watch is not None:
            found = filt.first_fault(self.graph, plan.watch, result.sums, self.value)
            if found is not None:
                node, name, kind = found
                self.timeline.rewind_to(self.timeline.position(node) + 1)
                return self._fault_stop(node, name, kind)
        return None

    def _run_slow(self, start: int, end: int) -> Stop | None:
        timeline = self.timeline
        while timeline.pc < end:
            stop = self._run_node(timeline.sequence[timeline.pc])
            if stop is not None:
                return stop
            if timeline.pc < end and self._paused():
                return Stop(StopReason.PAUSE, self.pc, "paused")
        return None

    def _end(self) -> Stop:
        return Stop(StopReason.END, None, "the run reached the end of the graph")

    def run_to(self, node_id: str) -> Stop:
        """Continue until ``node_id`` is next (breakpoints and filters still stop first)."""
        node = self._stoppable(node_id)
        target = self.timeline.position(node)
        if target < self.timeline.pc:
            raise GraphDapError(f"node {node.label} already ran; use goto to go back to it")
        if target == self.timeline.pc:
            return Stop(StopReason.BREAKPOINT, node, f"reached {node.label}")
        return self.continue_(until=node.id)

    def goto(self, node_id: str) -> Stop:
        """Make ``node_id`` the next node, computing any inputs it lacks."""
        node = self._stoppable(node_id)
        early = self._prepare()
        if early is not None:
            return early
        missing = [i for i in node.all_inputs if not self.values.available(i)]
        computed: list[int] = []
        if missing:
            needed = self._ancestors(missing)
            try:
                self.values.compute(missing)
            except NodeExecutionError as e:
                return Stop(StopReason.ERROR, self.graph.node(e.node_id), str(e), details={"ort_message": e.ort_message})
            computed = [n.order for n in needed]
        self.timeline.jump(self.timeline.position(node), computed)
        return Stop(StopReason.GOTO, node, f"jumped to {node.label}")

    def _ancestors(self, names: Sequence[str]) -> list[Node]:
        out: dict[int, Node] = {}
        frontier = list(names)
        while frontier:
            p = self.graph.producer(frontier.pop())
            if p is None or p.order in out or p.order in self.timeline.ran or (p.is_static and self.skip_constants):
                continue
            out[p.order] = p
            frontier.extend(i for i in p.all_inputs if not self.values.available(i))
        return [out[k] for k in sorted(out)]

    def _stoppable(self, node_id: str) -> Node:
        node = self.graph.node(node_id) if self.graph.has_node(node_id) else None
        if node is None:
            producer = self.graph.producer(node_id)
            if producer is None:
                raise NodeNotFoundError(f"no node '{node_id}' in the graph")
            node = producer
        if node.id not in self.timeline.positions:
            raise GraphDapError(f"node {node.label} is a constant, computed once at load; it cannot be the next node")
        return node

    def step_back(self) -> Stop:
        """Undo the last node (or goto): its outputs are forgotten and the counter moves back."""
        if not self.timeline.undo():
            return Stop(StopReason.STEP, self.pc, "already at the start of the history")
        return Stop(StopReason.STEP, self.pc, "stepped back")

    def reverse_continue(self) -> Stop:
        """Step back until a node with a breakpoint is next, or the history is empty."""
        while self.timeline.undo():
            node = self.pc
            if node is not None and self.breakpoint_table.stops_at(node.id):
                return Stop(StopReason.BREAKPOINT, node, f"breakpoint at {node.label}")
        return Stop(StopReason.ENTRY, self.pc, "back at the start")

    def restart(self) -> Stop:
        """Back to the start, with the original inputs; breakpoints are kept."""
        self._reset()
        return self.start()

    def pause(self) -> None:
        """Ask a running ``continue_`` (in another thread) to stop as soon as it can."""
        self._pause.set()
        opts = self._run_options
        if opts is not None:
            opts.terminate = True
