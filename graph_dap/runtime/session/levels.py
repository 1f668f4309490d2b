"""The levels of the program counter: stepping into an If's branch, a Loop's or Scan's body (at an
iteration) or a function's body, moving to the next iteration or back out, and back into the previous."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from graph_dap.runtime.engine.store import ValueStore
from graph_dap.runtime.frames import TRIP, Frame, LoopState
from graph_dap.runtime.graph import Node, Scope
from graph_dap.runtime.session.state import ITERATION, SessionState
from graph_dap.runtime.timeline import Timeline
from graph_dap.runtime.values import Values

_SKIP_LIMIT = 100_000  # iterations a continue looks ahead for a breakpoint's first (see _first_iteration)


class Levels(SessionState):
    """The frames of the control-flow nodes being stepped through: into a branch or a body (at an iteration,
    running the ones before whole), on to the next iteration, out past the node, and back."""

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
