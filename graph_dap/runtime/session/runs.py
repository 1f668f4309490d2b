"""Running a frame's positions: one node, or the nodes up to the next stop in one onnxruntime call (or in a
few parts), watched for NaN/Inf by in-graph sums; and the sessions the next continue needs, built while
stopped."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from graph_dap import log as _log
from graph_dap.errors import NodeExecutionError
from graph_dap.kinds import Fault, ValueKind
from graph_dap.runtime.breakpoints import BreakpointTable
from graph_dap.runtime.dtypes import dtype_of
from graph_dap.runtime.engine.executor import Executor
from graph_dap.runtime.engine.failures import failed_inside, names_in
from graph_dap.runtime.engine.interrupt import Interrupt
from graph_dap.runtime.engine.planning import CUTS, SegmentPlan, SegmentPlanner
from graph_dap.runtime.engine.segments import SegmentError
from graph_dap.runtime.engine.watch import WatchPlan
from graph_dap.runtime.frames import Frame
from graph_dap.runtime.graph import Node, ValueInfo
from graph_dap.runtime.session.filters import BreakFilters
from graph_dap.runtime.session.levels import Levels
from graph_dap.runtime.session.stopping import Stops
from graph_dap.runtime.stops import Stop, StopReason
from graph_dap.runtime.tensor import summarize
from graph_dap.runtime.values import Constants, Values

_PAUSE_GRAIN_S = 0.5  # a run that took longer than twice this is split, so a pause lands part-way (level none only)
_logger = _log.get_logger(__name__)


def _placeholder(info: ValueInfo) -> np.ndarray | None:
    """An array of the declared type (no data: ``np.empty``), to build a session for a value not computed yet."""
    if info.kind != ValueKind.TENSOR or info.dtype in (None, "string") or info.shape is None:
        return None
    if not all(isinstance(d, int) for d in info.shape):
        return None
    return np.empty(tuple(int(d) for d in info.shape), dtype_of(info.dtype))  # type: ignore[arg-type]


class LookInside:
    """What a segment run returns when the watch fired inside a control-flow node: step into it to find the node."""


LOOK_INSIDE = LookInside()


class Runs:
    """Runs the innermost frame's positions: a node at a time, or as segments (each one onnxruntime call,
    watched when the NaN/Inf filters are on; without optimizations, in parts once it ran long); builds the sessions
    the next continue runs first, while stopped. Owns the segment planners and how long each segment took."""

    def __init__(
        self,
        levels: Levels,
        stops: Stops,
        executor: Executor,
        constants: Constants,
        breakpoints: BreakpointTable,
        filters: BreakFilters,
        interrupt: Interrupt,
        *,
        skip_constants: bool,
        fast: bool,
        pausable: bool,
        on_progress: Callable[[int, int], None] | None,
    ) -> None:
        self.levels = levels
        self.stops = stops
        self.executor = executor
        self.constants = constants
        self.breakpoints = breakpoints
        self.filters = filters
        self.interrupt = interrupt
        self.skip_constants = skip_constants
        self.fast = fast
        # A run that took seconds is split next time, so that a pause lands part-way; a batch
        # run that nobody pauses (a scan's) keeps each segment whole: one onnxruntime call.
        self.pausable = pausable
        self.on_progress = on_progress
        self.planners: dict[Any, SegmentPlanner] = {}
        self.segment_seconds: dict[tuple[Any, int, int], float] = {}
        self.constants_checked = False  # whether the constants were looked at for a fault in this run

    def planner(self, frame: Frame) -> SegmentPlanner:
        key = frame.scope.path
        planner = self.planners.get(key)
        if planner is None:
            planner = self.planners[key] = SegmentPlanner(frame.scope, frame.timeline.sequence, frame.last_use)
        return planner

    def progress(self, frame: Frame, done: int, total: int) -> None:
        if self.on_progress is not None and frame.parent is None:
            self.on_progress(done, total)

    # -- one node ------------------------------------------------------------------

    def node(self, node: Node) -> Stop | LookInside | None:
        """Run the node at the counter of the innermost frame and move past it; a stop if it failed or faulted.

        A control-flow node run whole whose output holds a watched fault, or that onnxruntime failed on in
        a node inside it, is not the stop: that node inside is, at any depth. The counter goes back to it
        (or stays) and the run steps into it (:data:`LOOK_INSIDE`), as for a segment's inner flag."""
        frame = self.levels.top
        try:
            outs = frame.values.execute(node)
        except NodeExecutionError as e:
            if failed_inside(self.levels.graph, node, e.ort_message) and self.levels.flow.begin(node, frame.values.get) is not None:
                self.levels.localize.add(node.id)  # a node inside it failed: step in to stop at that node
                return LOOK_INSIDE
            return self.stops.error(node, e)
        frame.values.keep(outs)
        frame.timeline.advance(node)
        frame.values.evict()
        fault = self.filters.watch.check(node, outs)
        if fault and node.enterable and self.levels.flow.begin(node, frame.values.get) is not None:
            frame.timeline.rewind_to(frame.timeline.position_of(node))
            self.levels.localize.add(node.id)
            return LOOK_INSIDE
        if fault and self.filters.new_only and not self.filters.watch.from_finite(node, frame.values.value):
            return None  # it carries on a fault found before
        return self.stops.fault(node, *fault) if fault else None

    # -- segments ------------------------------------------------------------------

    def next_target(self, frame: Frame, start: int, until: str | None) -> int:
        """The first position from ``start`` where a breakpoint, ``until`` or a node to step into must be looked at."""
        sequence = frame.timeline.sequence
        for pos in range(start, len(sequence)):
            node = sequence[pos]
            if node.id == until or self.breakpoints.at(node.id) or self.levels.must_enter(node, until):
                return pos
        return len(sequence)

    def segment(self, frame: Frame, start: int, end: int) -> Stop | LookInside | None:
        """Run positions ``start..end-1`` of ``frame``: one onnxruntime call, or a few when it ran long before.

        A pause aborts the call in flight; without optimizations, splitting a run that took seconds
        lets a pause keep what the finished parts computed and land part-way. At an optimization level
        a segment always runs whole: its parts would be optimized apart (each its own kernels, the values
        between them returned from onnxruntime's blocked layout), and the run would no longer compute, to
        the last bit, what the user's own run computes.
        """
        took = self.segment_seconds.get((frame.scope.path, start, end))
        if not self.pausable or self.executor.optimized:
            return self._one_segment(frame, start, end)
        if took is not None and took >= 2 * _PAUSE_GRAIN_S and end - start >= 2 and self.executor.roomy:
            parts = min(CUTS, end - start, math.ceil(took / _PAUSE_GRAIN_S))
            bounds = [start + k * (end - start) // parts for k in range(parts + 1)]
        else:
            return self._one_segment(frame, start, end)
        for a, b in zip(bounds, bounds[1:]):
            if a > start:
                if self.interrupt.take():
                    return self.stops.at(StopReason.PAUSE, "paused")
                self.progress(frame, a, len(frame.timeline.sequence))
            stop = self._one_segment(frame, a, b)
            if stop is not None:
                return stop
        return None

    def plan(self, frame: Frame, start: int, end: int) -> SegmentPlan | None:
        sequence = frame.timeline.sequence
        breakpoints = self.breakpoints
        return self.planner(frame).plan(
            start,
            end,
            filt=self.filters.watch,
            dtypes=self.executor.dtypes,
            budget=frame.values.store.budget,
            conditions=lambda pos, produced: breakpoints.condition_names(sequence[pos].id, produced) if pos < len(sequence) else [],
            constants=frame.values.fixed if self.skip_constants and not self.constants.overridden else None,
            version=breakpoints.version,
            instruments=self.levels.instruments,
            optimized=self.executor.optimized,
        )

    def segment_embedded(self, values: Values) -> frozenset[str]:
        """What a continue's segments embed: the model's constants and, in optimized segments, the
        large constants computed once at start (a weight stored transposed, say; a ConstantOfShape's
        is filled in the segment instead, see :meth:`.SegmentPlanner.with_constants`), as onnxruntime
        folds them into the whole model and pre-packs them. Fed, they would run on unpacked weights.
        Not once one of them was set: fed, its new value needs no new session."""
        from_memory = self.executor.segments.from_memory
        if self.executor.optimized and not self.constants.overridden and from_memory:
            return values.embedded | from_memory
        return values.embedded

    def _one_segment(self, frame: Frame, start: int, end: int) -> Stop | LookInside | None:
        """Run positions ``start..end-1`` of ``frame`` in one onnxruntime call; on any trouble, node by node."""
        filt = self.filters.watch
        values = frame.values
        plan = self.plan(frame, start, end)
        if plan is None:
            self.executor.ran_unoptimized(frame.timeline.sequence[start:end], "the types of their values were not known yet")
            return self._slow(frame, end)  # learn the types first: the watch plan needs them
        feeds, embedded = self.executor.split(plan.reads, values.get, values.fixed, self.segment_embedded(values))
        began = time.perf_counter()
        try:
            with self.interrupt.run_options() as options:
                result = self.executor.run_segment(plan.ran, feeds, embedded, plan.wanted, plan.watch, options, self.constants.version)
            self.segment_seconds[(frame.scope.path, start, end)] = time.perf_counter() - began
        except SegmentError as e:
            if self.interrupt.take():
                return self.stops.at(StopReason.PAUSE, "paused")
            _logger.info("positions %d..%d in one call failed in onnxruntime (%s); running them node by node", start, end - 1, e)
            named = names_in(str(e))  # (the failing node's message is the stop's, if node by node fails there too)
            why = f"onnxruntime failed in node {named[-1]} when they ran in one call" if named else f"onnxruntime failed on them in one call ({e})"
            self.executor.ran_unoptimized(frame.timeline.sequence[start:end], why)
            return self._slow(frame, end)
        frame.timeline.advance_segment(plan.nodes, end)
        values.keep(result.values, from_run=True)
        values.evict()
        watch = result.watch or plan.watch  # (the plan's, or the one that left the optimized graph's fusions alone)
        if result.sums is not None and watch is not None and not np.isfinite(result.sums).all():
            cleared = self.cleared(frame, start, plan.cuts, watch)
            found = filt.first_fault(frame.scope, watch, result.sums, values.original, result.watched, values.prefetch, self.filters.new_only, cleared)
            if found is None and self.executor.optimized and not self.filters.new_only:  # (new_only: faults carried on)
                fired = filt.fired(watch, result.sums, result.watched)
                if fired:  # the optimized graph made a NaN that the original nodes do not: say so
                    return self._disagreement(frame, plan, feeds, embedded, fired)
            if found is not None:
                node, name, kind = found
                if kind == Fault.INNER:  # a fault somewhere inside this control-flow node: back to it, then step in
                    frame.timeline.rewind_to(frame.timeline.position_of(node))
                    self.levels.localize.add(node.id)
                    return LOOK_INSIDE
                frame.timeline.rewind_to(frame.timeline.position_of(node) + 1)
                return self.stops.fault(node, name, kind)
        return None

    def cleared(self, frame: Frame, start: int, cuts: Sequence[int], watch: WatchPlan) -> Callable[[str], bool] | None:
        """Which tensors of the segment from ``start`` a fault found by the watch cannot be in: those before the last of
        its checkpoints ``cuts`` (see :meth:`.SegmentPlanner.plan`) whose values the run kept all finite, when their
        guard is after it. A guard is reached from its tensor through ops that always carry a fault on (:mod:`.watch`),
        so through a value live at every cut between them. Spares looking for the fault from the segment's start with
        the original nodes."""
        planner = self.planner(frame)
        timeline = frame.timeline
        peek = frame.values.store.peek
        clean = start
        for cut in cuts:
            live = [peek(o) for o in planner.live(start, cut)]
            if not live or any(v is None for v in live):
                continue
            if not all(np.isfinite(v).all() for v in live if isinstance(v, np.ndarray) and v.dtype.kind in "fc"):
                break
            clean = cut
        if clean == start:
            return None
        scope = frame.scope

        def position(name: str) -> int:
            producer = scope.producer(name)
            return timeline.position_of(producer) if producer is not None else start

        return lambda t: t in watch.guards and position(t) < clean <= position(watch.guards[t])

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
            optimized = self.executor.segments.optimized_model(plan.ran, feeds, embedded, plan.wanted, plan.watch)
            fused = next((p for p in optimized.graph.node if tensor in p.output), None)
            made_by = f"{fused.op_type} '{fused.name}'" if fused is not None else "a node onnxruntime's optimizer made"
        except SegmentError as e:
            made_by = f"an optimized node (the optimized graph could not be read back: {e})"
        frame.timeline.rewind_to(frame.timeline.position_of(node) + 1)
        original = summarize(frame.values.original(tensor)).text() if frame.values.available(tensor) else "not computed"
        message = (
            f"the optimized graph (level '{level}') makes NaN in '{tensor}' at {made_by}, from {', '.join(origin)}; "
            f"the original nodes compute it without NaN ({original}): a fusion that computes differently"
        )
        details = {"disagreement": True, "opt_level": level, "optimized_node": made_by, "origin": origin, "optimized_sum": "nan", "original": original}
        return self.stops.at(StopReason.NAN, message, node, value=tensor, details=details)

    def _slow(self, frame: Frame, end: int) -> Stop | LookInside | None:
        """Positions up to ``end`` a node at a time (stopping before a node the run loop must step into)."""
        timeline = frame.timeline
        while timeline.position < end:
            node = timeline.sequence[timeline.position]
            if node.enterable and self.levels.must_enter(node, None):
                return None  # the run loop steps into it
            stop = self.node(node)
            if stop is not None:
                return stop
            if timeline.position < end and self.interrupt.take():
                return self.stops.at(StopReason.PAUSE, "paused")
        return None

    # -- while stopped -------------------------------------------------------------

    def constant_fault(self) -> tuple[Node, str, Fault] | None:
        """The first constant node whose output holds a watched fault (remembered per constants)."""
        key = self.filters.watch
        constants = self.constants
        if key in constants.faults:
            return constants.faults[key]
        generation = constants.generation
        found = None
        fixed = self.levels.main.values.store.fixed
        for node in self.levels.graph.nodes:
            if node.is_constant:
                fault = key.check(node, {o: fixed.get(o) for o in node.outputs})
                if fault is not None:
                    found = (node, *fault)
                    break
        if generation == constants.generation:  # (a look ahead in the background: no constant was set meanwhile)
            constants.faults[key] = found
        return found

    def prepare_next(self) -> list[threading.Thread]:
        """Build, in the background, the sessions the next continue from here will run first, so that
        pressing continue only runs them (the debugger calls this while it waits, stopped).

        A value a segment reads that is not computed yet is typed as the model declares it: a
        session needs the types of its inputs only.
        """
        levels = self.levels
        frame = levels.top
        node = frame.timeline.next_node
        if not self.fast or not levels.main.values.started or node is None:
            return []
        threads: list[threading.Thread] = []
        watch = self.filters.watch
        if self.skip_constants and watch.active and not self.constants_checked and watch not in self.constants.faults:
            # the first continue looks at every constant once (resnet50: 100 MB of weights): now, not then
            threads.append(threading.Thread(target=self.constant_fault, name="graph-dap-constants", daemon=True))
            threads[-1].start()
        if node.enterable and levels.must_enter(node, None):
            return threads
        start = frame.timeline.position
        end = self.next_target(frame, start + 1, None)
        if end - start < 2 and not (node.enterable and watch.active):
            return threads
        took = self.segment_seconds.get((frame.scope.path, start, end))
        if took is not None and took >= 2 * _PAUSE_GRAIN_S and self.executor.roomy and not self.executor.optimized:
            return threads  # split by time: its parts depend on how long it ran
        bounds = [start, end]
        embeds = self.segment_embedded(frame.values)
        for a, b in zip(bounds, bounds[1:]):
            plan = self.plan(frame, a, b)
            if plan is None:
                break
            feeds: dict[str, Any] = {}
            known = True  # every value fed is the one the run will be fed: the session can warm up on them
            for name in plan.reads:
                if name in embeds:
                    continue
                value = frame.values.store.peek(name)
                if value is None or name in frame.values.stale:
                    known = False
                if value is None:
                    value = _placeholder(levels.graph.info_at(frame.scope.path, name))
                    if value is None:
                        return threads  # a type that is not known ahead
                feeds[name] = value
            embedded = {n: frame.values.fixed[n] for n in plan.reads if n in embeds}
            thread = self.executor.segments.prepare(plan.ran, feeds, embedded, plan.wanted, plan.watch, self.constants.version, warm_up=known)
            if thread is not None:
                threads.append(thread)
        return threads
