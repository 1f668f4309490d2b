"""The levels of the program counter: the stack of frames, stepping into an If's branch, a Loop's or Scan's
body (at an iteration) or a function's body, moving to the next iteration or back out, and back into the
previous."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from graph_dap.runtime.breakpoints import BreakpointTable
from graph_dap.runtime.engine.executor import Executor
from graph_dap.runtime.engine.instrument import Instruments
from graph_dap.runtime.engine.store import ValueStore
from graph_dap.runtime.frames import TRIP, ControlFlow, Frame, LoopState, last_uses, run_sequence
from graph_dap.runtime.graph import Graph, Node, Scope
from graph_dap.runtime.session.constants import known_outputs
from graph_dap.runtime.session.filters import BreakFilters
from graph_dap.runtime.stops import PathStep
from graph_dap.runtime.timeline import Timeline
from graph_dap.runtime.values import Constants, Values

ITERATION = "iteration"  # the expression language's name for the innermost loop's iteration
_SKIP_LIMIT = 100_000  # iterations a continue looks ahead for a breakpoint's first (see first_iteration)


class Levels:
    """The frames of the program counter, main graph first, and how they move: into a branch or a body (at
    an iteration, running the ones before whole), on to the next iteration, out past the node, and back."""

    def __init__(
        self,
        graph: Graph,
        store: ValueStore,
        constants: Constants,
        executor: Executor,
        breakpoints: BreakpointTable,
        filters: BreakFilters,
        *,
        skip_constants: bool,
        fast: bool,
    ) -> None:
        self.graph = graph
        self.constants = constants
        self.executor = executor
        self.breakpoints = breakpoints
        self.filters = filters
        self.skip_constants = skip_constants
        self.fast = fast
        self.flow = ControlFlow(graph)
        self.instruments = Instruments(graph)
        self.sequences = {path: run_sequence(scope, skip_constants) for path, scope in graph.scopes.items()}
        self.last_uses = {path: last_uses(scope, self.sequences[path]) for path, scope in graph.scopes.items()}
        self.localize: set[str] = set()  # enterable nodes whose watch fired: step into them to find the node
        self._inside: dict[str, set[str]] = {}  # node id -> ids of the nodes inside it
        main, last_use = graph.main, self.last_uses[()]
        timeline = Timeline(self.sequences[()], lambda order: values.forget(graph.nodes[order]))
        values = Values(main, store, constants, executor, timeline, last_use, skip_constants)
        self.frames: list[Frame] = [Frame(main, timeline, values, last_use)]

    def reset(self, inputs: Mapping[str, Any]) -> None:
        """Back to the main graph's start, fed ``inputs``."""
        del self.frames[1:]
        self.localize.clear()
        self.main.values.reset(inputs)
        self.main.timeline.reset()

    # -- where the counter is ------------------------------------------------------

    @property
    def main(self) -> Frame:
        return self.frames[0]

    @property
    def top(self) -> Frame:
        """The innermost frame: where the counter is."""
        return self.frames[-1]

    @property
    def current(self) -> Node | None:
        """The next node to run; None once the run is at its end."""
        return self.top.timeline.next_node

    @property
    def path(self) -> tuple[PathStep, ...]:
        """Where the counter is: the enclosing control-flow levels, outermost first."""
        return tuple(s for f in self.frames if (s := f.step()) is not None)

    @property
    def iteration(self) -> int | None:
        """The innermost loop's iteration; None outside loops."""
        return self.iteration_below(len(self.frames))

    def iteration_below(self, depth: int) -> int | None:
        """The innermost loop's iteration among the outermost ``depth`` frames; None outside loops."""
        for frame in reversed(self.frames[:depth]):
            if frame.loop is not None:
                return frame.loop.iteration
        return None

    # -- into, on and out ----------------------------------------------------------

    def enter(self, node: Node) -> bool:
        """Step into ``node`` (at the counter): push the frame of its branch, body or function. False: nothing to enter."""
        parent = self.top
        begun = self.flow.begin(node, parent.values.get)
        if begun is None:
            return False
        scope, inputs, loop = begun
        self._push(node, scope, inputs, loop)
        return True

    def must_enter(self, node: Node, until: str | None) -> bool:
        """Whether a run must step into ``node`` rather than run it whole."""
        if not node.enterable:
            return False
        if node.id in self.breakpoints.holders or node.id in self.localize:
            return True
        if self._until_inside(node, until):
            return True
        # The NaN/Inf watch looks inside bodies: in a segment that watches inside the node, or node by node.
        return self.filters.watch.active and not (self.fast and self.instruments.can(node))

    def first_iteration(self, node: Node, until: str | None) -> int | None:
        """Where a continue steps into ``node``: 0 (its first iteration, or it is not a loop), the first
        iteration at which one of the breakpoints in its body can stop, when their conditions read
        ``iteration`` alone (the iterations before run whole, in one call), or None: none can stop."""
        if (
            not self.fast
            or node.op_type != "Loop"
            or node.calls is not None
            or node.id in self.localize
            or self.filters.watch.active  # (the iterations run whole would have to be watched too)
            or self._until_inside(node, until)
        ):
            return 0
        scope = self.graph.subscope(node, "body")
        if any(sc.has_value(ITERATION) for sc in self.graph.scopes.values()):
            return 0  # a value of that name: conditions read it
        direct = {n.id for n in scope.nodes}
        if any(self.breakpoints.at(nid) for nid in self._nested_in(node) - direct):
            return 0  # (a nested loop's own iteration is what ``iteration`` reads there)
        trip = self.flow.trip_count(node, self.top.values.get)
        limit = min(trip, _SKIP_LIMIT) if trip is not None else _SKIP_LIMIT
        first = self.breakpoints.first_iteration(direct, ITERATION, limit)
        if first is None:
            return 0
        if trip is not None and first >= trip:
            return None
        return first

    def enter_at(self, node: Node, iteration: int) -> None:
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

    def settle(self) -> None:
        """Move past the ends of bodies: on to the next iteration, or out."""
        while self.top.timeline.at_end and self.top.parent is not None:
            self._finish(self.top)

    def back_into_previous_iteration(self, frame: Frame) -> None:
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

    # -- the frames' lives ---------------------------------------------------------

    def _push(self, owner: Node, scope: Scope, inputs: Mapping[str, Any], loop: LoopState | None) -> Frame:
        parent = self.top
        sequence = self.sequences[scope.path]
        last_use = self.last_uses[scope.path]
        frame_ref: list[Frame] = []
        timeline = Timeline(sequence, lambda order: frame_ref[0].values.forget(scope.nodes[order]))
        store = ValueStore(self.main.values.store.budget)
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
                if node.is_constant:
                    values.store.fixed.update(known_outputs(node, values.fixed) or values.execute(node))
        values.started = True

    def _finish(self, frame: Frame) -> None:
        """At the end of a frame's scope: begin the next iteration, or pop the frame and move past its node."""
        assert frame.parent is not None and frame.owner is not None
        following = self.flow.next_inputs(frame, frame.parent.values.get)
        if following is not None:
            self._start_frame(frame, following)
            return
        outs = self.flow.results(frame)
        self.frames.pop()
        self._past(frame.parent, frame.owner, outs)

    def _past(self, level: Frame, node: Node, outs: Mapping[str, Any]) -> None:
        """``node`` (a control-flow node at ``level``) is done, with outputs ``outs``: move past it."""
        level.values.keep(outs)
        level.timeline.advance(node)
        level.values.evict()
        self.executor.executions[node.id] += 1

    def _run_truncated(self, node: Node, iterations: int, values: Values) -> dict[str, Any]:
        """``node``'s first ``iterations`` iterations in one onnxruntime call (see ControlFlow.truncated),
        over ``values``: those of the level ``node`` is in."""
        made = self.flow.truncated(node)
        return values.execute(made, count=False, extra={TRIP: np.array(iterations, np.int64)})

    def _nested_in(self, node: Node) -> set[str]:
        """Ids of every node inside ``node``, at any depth."""
        if node.id not in self._inside:
            self._inside[node.id] = {n.id for n in self.graph.all_nodes() if any(s.node == node.id for s in n.path)}
        return self._inside[node.id]

    def _until_inside(self, node: Node, until: str | None) -> bool:
        """Whether the node a run goes to (``until``) is inside ``node``."""
        return until is not None and self.graph.has_node(until) and any(s.node == node.id for s in self.graph.node(until).path)
