"""``DebugSession``: the run commands (start, step, step in and out, continue, run to, goto, step back,
restart, pause) and the one run loop that carries them out over the levels and segments."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from onnx import numpy_helper

from graph_dap import log as _log
from graph_dap.errors import GraphDapError, NodeExecutionError, NodeNotFoundError
from graph_dap.runtime.engine.segments import SegmentError
from graph_dap.runtime.frames import Frame
from graph_dap.runtime.graph import Node
from graph_dap.runtime.inputs import Dims, InputsArg, resolve_inputs
from graph_dap.runtime.session.continues import LOOK_INSIDE, Continues
from graph_dap.runtime.stops import Stop, StopReason

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


class DebugSession(Continues):
    """Runs one model under a debugger's control.

    A continue runs its segments at ``opt_level`` (onnxruntime's graph optimizations, ``all``
    by default, as a plain ``InferenceSession``); every value it shows, single steps and
    recomputations are the original graph's, computed without optimizations: exactly what
    onnxruntime computes for each original node. Constant nodes are computed once at start
    (in a body: when its frame starts) and skipped by the program counter unless
    ``skip_constants`` is False.
    """

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
            if stop is LOOK_INSIDE:
                look = False  # at the node whose watch fired, already looked at: step into it next

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

    def reverse_continue(self) -> Stop:
        """Step back until a node with a breakpoint is next, or the history is empty."""
        while True:
            stop = self.step_back()
            node = self.pc
            if stop.message == "already at the start of the history":
                return self._stop(StopReason.ENTRY, "back at the start")
            if node is not None and self.breakpoint_table.stops_at(node.id):
                return self._stop(StopReason.BREAKPOINT, f"breakpoint at {node.label}")

    def restart(self, inputs: InputsArg = None, dims: Dims | None = None) -> Stop:
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
