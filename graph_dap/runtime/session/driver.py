"""``DebugSession``: the run commands (start, step, step in and out, continue, run to, goto, step back,
restart, pause) and the one run loop that carries them out over the levels and segments."""

from __future__ import annotations

import enum
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from graph_dap import log as _log
from graph_dap.errors import GraphDapError, NodeExecutionError, NodeNotFoundError
from graph_dap.runtime.engine.segments import SegmentError
from graph_dap.runtime.frames import Frame
from graph_dap.runtime.graph import Node
from graph_dap.runtime.inputs import Dims, InputsArg, resolve_inputs
from graph_dap.runtime.session.constants import known_outputs
from graph_dap.runtime.session.runs import LOOK_INSIDE
from graph_dap.runtime.session.state import SessionState
from graph_dap.runtime.stops import Stop, StopReason

_logger = _log.get_logger(__name__)
_Command = TypeVar("_Command", bound=Callable[..., Stop])


class Mode(enum.Enum):
    """How the one run loop moves the counter."""

    CONTINUE = "continue"  # to a breakpoint, a filter, a pause, the target or the end
    STEP = "step"  # one node at the frame it started in (a body run whole)
    STEP_IN = "step_in"  # one node, into a control-flow node's body
    STEP_OUT = "step_out"  # out of the innermost body


def _command(method: _Command) -> _Command:
    """A command that returns a stop: a pause asked for during it was for it, and is forgotten with the stop."""

    @functools.wraps(method)
    def run(self: DebugSession, *args: Any, **kwargs: Any) -> Stop:
        try:
            return method(self, *args, **kwargs)
        finally:
            self.interrupt.clear()

    return run  # type: ignore[return-value]


class DebugSession(SessionState):
    """Runs one model under a debugger's control.

    A continue runs its segments at ``opt_level`` (onnxruntime's graph optimizations, ``all``
    by default, as a plain ``InferenceSession``); every value it shows, single steps and
    recomputations are the original graph's, computed without optimizations: exactly what
    onnxruntime computes for each original node. Constant nodes are computed once at start
    (in a body: when its frame starts) and skipped by the program counter unless
    ``skip_constants`` is False. After a NaN/Inf stop, a continue stops at the next node that
    makes a new NaN or Inf from finite inputs, not at each node that carries one on
    (``fault_stops="every"``: at each).
    """

    @_command
    def start(self) -> Stop:
        """Compute the constant nodes and stop at the first node to run."""
        return self._start()

    def _start(self) -> Stop:
        if not self.values.started:
            if self.skip_constants and not self.constants.computed:
                for node in self.graph.nodes:
                    if node.is_constant:
                        outs = known_outputs(node, self.store.fixed)
                        try:
                            if outs is None:
                                outs = self.values.execute(node, extra=self.store.fixed)
                        except NodeExecutionError as e:
                            return Stop(StopReason.ERROR, node, str(e), details={"ort_message": e.ort_message})
                        self.store.fixed.update(outs)
                        self.constants.computed.update(outs)
                self.executor.computed_constants(self.constants.computed)
            self.values.started = True
        return self.stops.at(StopReason.ENTRY, "stopped at entry")

    def _prepare(self) -> Stop | None:
        if not self.values.started:
            first = self._start()
            if first.reason is StopReason.ERROR:
                return first
        self.top.values.refresh()
        runs = self.runs
        if not runs.constants_checked:
            runs.constants_checked = True
            if self.skip_constants and self.filters.watch.active:
                fault = runs.constant_fault()
                if fault is not None:
                    return self.stops.fault(*fault)
        return None

    @_command
    def step(self) -> Stop:
        """Run one node and stop at the next; an If/Loop/Scan or function call runs whole.

        A control-flow node with a breakpoint inside, or run while a NaN/Inf filter is on, is
        stepped through: a breakpoint or a fault inside it stops there, as a debugger stops in a
        function it steps over. After the last node of a body: the first node of the next
        iteration, or the node after the control-flow node.
        """
        return self._drive(Mode.STEP)

    @_command
    def step_in(self) -> Stop:
        """Step into the control-flow node at the counter (If: the branch the condition takes; Loop/Scan:
        iteration 0; a function call: its body); on any other node, as :meth:`step`."""
        return self._drive(Mode.STEP_IN)

    @_command
    def step_out(self) -> Stop:
        """Finish the innermost body (all its remaining iterations) and stop at the node after its control-flow node.

        In the main graph: run to the end, as :meth:`continue_`.
        """
        return self._drive(Mode.STEP_OUT)

    @_command
    def continue_(self, *, until: str | None = None, check_first: bool = False) -> Stop:
        """Run until a breakpoint, an enabled break filter, a pause, ``until`` or the end.

        The breakpoints of the node at the program counter are not looked at (the run is
        stopped there already), unless ``check_first``: for a launch without a stop on entry.
        """
        return self._drive(Mode.CONTINUE, until, check_first)

    def _drive(self, mode: Mode, until: str | None = None, check_first: bool = False) -> Stop:
        """The one run loop."""
        early = self._prepare()
        if early is not None:
            return early
        levels, runs, stops = self.levels, self.runs, self.stops
        base = len(levels.frames)
        origin = levels.top
        where = (origin.timeline.position, origin.iteration)
        stepping = mode in (Mode.STEP, Mode.STEP_IN)
        look = check_first  # look at the breakpoints of the node at the counter
        while True:
            levels.settle()
            depth = len(levels.frames)
            frame = levels.top
            node = frame.timeline.next_node
            if node is None:
                return stops.end()
            moved = origin not in levels.frames or (origin.timeline.position, origin.iteration) != where
            if (stepping and moved) or (mode is Mode.STEP_OUT and depth < base):
                return stops.at(StopReason.STEP)
            if look:
                if self.interrupt.take():
                    return stops.at(StopReason.PAUSE, "paused")
                if until is not None and node.id == until:
                    return stops.at(StopReason.BREAKPOINT, f"reached {node.label}")
                hit, note = self.breakpoint_table.check(node, self.counter)
                if hit:
                    return stops.at(StopReason.BREAKPOINT, note or f"breakpoint at {node.label}", breakpoint_ids=tuple(hit))
            else:
                self.breakpoint_table.log_only(node, self.counter)
            look = True
            at_origin = frame is origin and stepping
            into = at_origin and mode is Mode.STEP_IN
            if node.enterable and (into or levels.must_enter(node, until)):
                first = 0 if into else levels.first_iteration(node, until)
                levels.localize.discard(node.id)
                if first is None:
                    pass  # no breakpoint inside can stop in this run: it runs whole
                elif first > 0:
                    levels.enter_at(node, first)
                    continue
                elif levels.enter(node):
                    if into and levels.top.timeline.next_node is not None:
                        return stops.at(StopReason.STEP)  # on the body's first node, whatever its breakpoints
                    continue
            total = len(frame.timeline.sequence)
            target = frame.timeline.position + 1 if at_origin else runs.next_target(frame, frame.timeline.position + 1, until)
            watched_inside = node.enterable and self.filters.watch.active  # (a segment of one: its watch goes inside)
            if self.fast and (target - frame.timeline.position > 1 or watched_inside):
                runs.progress(frame, frame.timeline.position, total)
                stop = runs.segment(frame, frame.timeline.position, target)
            else:
                stop = runs.node(node)
            runs.progress(frame, frame.timeline.position, total)
            if isinstance(stop, Stop):
                return stop
            if stop is LOOK_INSIDE:
                look = False  # at the node whose watch fired, already looked at: step into it next

    @_command
    def run_to_end(self, check_first: bool = True) -> Stop:
        """Run to the end as fast as the model runs: with no breakpoint and no NaN/Inf filter, the whole
        model in one onnxruntime session at the session's optimization level (the user's own run; its
        outputs are the optimized graph's); else, or when onnxruntime fails on it, as :meth:`continue_`,
        which names the node that fails."""
        whole = (
            not self.breakpoint_table.all
            and not self.filters.watch.active
            and len(self.frames) == 1
            and self.timeline.position == 0
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
                return self.stops.end()
        return self.continue_(check_first=check_first)

    @_command
    def run_to(self, node_id: str) -> Stop:
        """Continue until ``node_id`` is next (breakpoints and filters still stop first)."""
        node = self._stoppable(node_id)
        frame = self.top
        if node.path == frame.scope.path:
            target = frame.timeline.position_of(node)
            if target < frame.timeline.position:
                raise GraphDapError(f"node {node.label} already ran; use goto to go back to it")
            if target == frame.timeline.position:
                return self.stops.at(StopReason.BREAKPOINT, f"reached {node.label}")
        return self.continue_(until=node.id)

    @_command
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
                return self.stops.at(StopReason.ERROR, str(e), self.graph.node(e.node_id), details={"ort_message": e.ort_message})
            computed = [n.order for n in needed]
        frame.timeline.jump(frame.timeline.position_of(node), computed)
        return self.stops.at(StopReason.GOTO, f"jumped to {node.label}")

    def _ancestors(self, frame: Frame, names: Sequence[str]) -> list[Node]:
        out: dict[int, Node] = {}
        frontier = list(names)
        scope = frame.scope
        while frontier:
            p = scope.producer(frontier.pop())
            if p is None or p.order in out or p.order in frame.timeline.ran or (p.is_constant and self.skip_constants):
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
        if node not in self.levels.sequences[node.path]:
            raise GraphDapError(f"node {node.label} is a constant, computed once at load; it cannot be the next node")
        return node

    @_command
    def step_back(self) -> Stop:
        """Undo the last node (or goto): its outputs are forgotten and the counter moves back.

        At the start of a body: back into the previous iteration (before its last node), or
        out to the control-flow node, which has not run.
        """
        while True:
            frame = self.top
            if frame.timeline.undo():
                return self.stops.at(StopReason.STEP, "stepped back")
            if frame.parent is None:
                return self.stops.at(StopReason.STEP, "already at the start of the history")
            if frame.loop is not None and frame.loop.iteration > 0:
                self.levels.back_into_previous_iteration(frame)
                if frame.timeline.next_node is not None:
                    return self.stops.at(StopReason.STEP, "stepped back into the previous iteration")
                continue
            self.frames.pop()
            return self.stops.at(StopReason.STEP, "stepped back out of the body")

    @_command
    def reverse_continue(self) -> Stop:
        """Step back until a node with a breakpoint is next, or the history is empty."""
        while True:
            stop = self.step_back()
            node = self.current
            if stop.message == "already at the start of the history":
                return self.stops.at(StopReason.ENTRY, "back at the start")
            if node is not None and self.breakpoint_table.stops_at(node.id):
                return self.stops.at(StopReason.BREAKPOINT, f"breakpoint at {node.label}")

    @_command
    def restart(self, inputs: InputsArg = None, dims: Dims | None = None) -> Stop:
        """Back to the start, with the original inputs (or new ``inputs``, checked like the first); breakpoints are kept.

        New inputs reuse every onnxruntime session built so far: cheap for a data set of inputs of one shape.
        """
        if inputs is not None:
            self.inputs = resolve_inputs(self.graph, inputs, dims)
        self._reset()
        return self._start()

    def pause(self) -> None:
        """Ask a running (or the next) command, from another thread, to stop as soon as it can; the pause is
        forgotten once a command returns its stop."""
        self.interrupt.request()

    def prepare_next(self) -> list[threading.Thread]:
        """Build, in the background, the sessions the next continue from here will run first (see
        :meth:`.Runs.prepare_next`): the debugger calls this while it waits, stopped."""
        return self.runs.prepare_next()
