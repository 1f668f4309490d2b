"""Frames: the levels of the program counter inside If, Loop, Scan and function calls.

The counter is a stack of :class:`Frame` s: the main graph's, then one for each
control-flow node being executed, innermost last. A frame runs one scope (an If's
taken branch, one iteration of a Loop's or Scan's body, a called function's body)
over its own timeline and values. :class:`ControlFlow` knows each op's semantics:
what a frame starts from, whether another iteration follows, and what the node
outputs once its frame is done; the values are bit for bit what onnxruntime's own
If, Loop and Scan kernels make of their bodies' outputs (copies and concatenations).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from graph_dap.errors import GraphDapError
from graph_dap.runtime.graph import Graph, Node, Scope
from graph_dap.runtime.stops import PathStep
from graph_dap.runtime.timeline import Timeline
from graph_dap.runtime.values import Values

TRIP = "__gd_trip"  # what a Loop made by ControlFlow.truncated is fed as its trip count


@dataclass(slots=True)
class LoopState:
    """A Loop's or Scan's progress: what the next iteration starts from, and the scan outputs so far."""

    trip_count: int | None  # Loop: M (None: no limit); Scan: the sequence length
    iteration: int = 0
    # what each iteration started from (for step back); None for iterations run whole, before a breakpoint's first
    inputs: list[dict[str, Any] | None] = field(default_factory=list)
    scans: list[list[Any]] = field(default_factory=list)  # per scan output, its element of each iteration
    finals: list[Any] = field(default_factory=list)  # the carried values after the last iteration run


@dataclass(slots=True)
class Frame:
    """One level of the program counter: a scope, its timeline and values, and where it came from."""

    scope: Scope
    timeline: Timeline
    values: Values
    last_use: dict[str, int]
    owner: Node | None = None  # the control-flow node (in the parent frame) this frame runs
    parent: Frame | None = None
    loop: LoopState | None = None

    @property
    def iteration(self) -> int | None:
        return self.loop.iteration if self.loop is not None else None

    @property
    def depth(self) -> int:
        return 0 if self.parent is None else self.parent.depth + 1

    def step(self) -> PathStep | None:
        """This frame as a level of a path; None for the main graph."""
        if self.owner is None:
            return None
        return PathStep(self.owner.id, self.scope.attribute, self.iteration)


def run_sequence(scope: Scope, skip_constants: bool) -> tuple[Node, ...]:
    """The nodes a frame's counter walks through: all but constants computed at entry."""
    return tuple(n for n in scope.nodes if not (skip_constants and n.is_constant))


def last_uses(scope: Scope, sequence: tuple[Node, ...]) -> dict[str, int]:
    """For each value, the last position in ``sequence`` that reads it; the scope's outputs are read at its end."""
    last: dict[str, int] = {}
    for pos, n in enumerate(sequence):
        for i in n.all_inputs:
            last[i] = pos
    for o in scope.output_names:
        last[o] = len(sequence)
    return last


def _scalar(value: Any, what: str, node: Node) -> Any:
    a = np.asarray(value)
    if a.size != 1:
        raise GraphDapError(f"{node.label}: {what} must hold one element, got shape {list(a.shape)}")
    return a.reshape(-1)[0]


class ControlFlow:
    """The semantics of If, Loop, Scan and function calls, for a debugger that runs their bodies itself."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._truncated: dict[str, Node] = {}

    # -- entering ------------------------------------------------------------------------

    def begin(self, node: Node, read: Any) -> tuple[Scope, dict[str, Any], LoopState | None] | None:
        """The scope ``node`` runs, the inputs its first frame starts from, and a loop state.

        ``read(name)`` gives a value of the enclosing level. None when there is nothing to step
        into: a Loop or Scan of zero iterations (it runs whole).
        """
        op = node.op_type
        if node.calls is not None:
            scope = self.graph.subscope(node, node.calls)
            bound = {formal: read(actual) for formal, actual in zip(scope.input_names, node.inputs) if actual}
            return scope, bound, None
        if op == "If":
            taken = "then_branch" if bool(_scalar(read(node.inputs[0]), "the condition", node)) else "else_branch"
            return self.graph.subscope(node, taken), {}, None
        scope = self.graph.subscope(node, "body")
        if op == "Loop":
            c = node.inputs[1] if len(node.inputs) > 1 else ""
            trip = self.trip_count(node, read)
            cond = bool(_scalar(read(c), "the condition", node)) if c else True
            carried = [read(n) if n else None for n in node.inputs[2:]]
            if (trip is not None and trip <= 0) or not cond:
                return None
            loop = LoopState(trip, scans=[[] for _ in range(len(scope.outputs) - 1 - len(carried))])
            return scope, self._loop_inputs(scope, 0, cond, carried), loop
        if op == "Scan":
            n_scan = int(node.attributes.get("num_scan_inputs", 0))
            n_state = len(node.inputs) - n_scan
            states = [read(n) for n in node.inputs[:n_state]]
            sequences = [np.asarray(read(n)) for n in node.inputs[n_state:]]
            axes = self._axes(node, "scan_input_axes", n_scan, sequences)
            length = sequences[0].shape[axes[0]] if sequences else 0
            if length == 0:
                return None
            loop = LoopState(length, scans=[[] for _ in range(len(scope.outputs) - n_state)])
            return scope, self._scan_inputs(node, scope, 0, states, sequences, loop), loop
        raise GraphDapError(f"{node.label} cannot be stepped into")

    @staticmethod
    def _loop_inputs(scope: Scope, iteration: int, cond: bool, carried: list[Any]) -> dict[str, Any]:
        names = scope.input_names
        inputs: dict[str, Any] = {}
        if names:
            inputs[names[0]] = np.array(iteration, dtype=np.int64)
        if len(names) > 1:
            inputs[names[1]] = np.array(cond, dtype=np.bool_)
        for name, value in zip(names[2:], carried):
            inputs[name] = value
        return inputs

    @staticmethod
    def _axes(node: Node, attribute: str, count: int, arrays: list[np.ndarray] | None = None) -> list[int]:
        axes = list(node.attributes.get(attribute) or [0] * count)
        if arrays is not None:
            axes = [a + arr.ndim if a < 0 else a for a, arr in zip(axes, arrays)]
        return axes

    def _scan_inputs(
        self, node: Node, scope: Scope, iteration: int, states: list[Any], sequences: list[np.ndarray], loop: LoopState
    ) -> dict[str, Any]:
        n_state = len(states)
        axes = self._axes(node, "scan_input_axes", len(sequences), sequences)
        directions = list(node.attributes.get("scan_input_directions") or [0] * len(sequences))
        inputs = dict(zip(scope.input_names[:n_state], states))
        for name, seq, axis, direction in zip(scope.input_names[n_state:], sequences, axes, directions):
            index = loop.trip_count - 1 - iteration if direction else iteration  # type: ignore[operator]
            inputs[name] = np.require(np.take(seq, index, axis=axis), requirements="C")  # a 0-d element stays 0-d
        return inputs

    def truncated(self, node: Node) -> Node:
        """``node`` (a Loop) as a node that runs at most as many iterations as it is fed in :data:`TRIP`,
        with every output named and one more: the condition each iteration ended with, stacked (its
        length says how many ran). The body is the node's own, so the values are its own."""
        made = self._truncated.get(node.id)
        if made is not None:
            return made
        proto = onnx.NodeProto()
        proto.CopyFrom(node.proto)
        tag = f"__gd_trunc_{node.order}"
        if proto.input:
            proto.input[0] = TRIP
        else:
            proto.input.append(TRIP)
        for k, name in enumerate(proto.output):
            if not name:
                proto.output[k] = f"{tag}_out{k}"
        conds = f"{tag}_conds"
        proto.output.append(conds)
        for attribute in proto.attribute:
            if attribute.name == "body":
                body = attribute.g
                kept = f"{tag}_cond"
                body.node.append(helper.make_node("Identity", [body.output[0].name], [kept]))
                body.output.append(helper.make_tensor_value_info(kept, TensorProto.BOOL, []))
        made = dataclasses.replace(
            node, id=f"{node.id}#truncated", inputs=(TRIP, *node.inputs[1:]), outputs=tuple(proto.output), proto=proto
        )
        self._truncated[node.id] = made
        return made

    def split_truncated(self, node: Node, outs: Mapping[str, Any]) -> tuple[list[Any], list[Any], np.ndarray]:
        """What :meth:`truncated` computed (``outs``) as the carried values, the scan outputs, and the conditions."""
        values = [outs[name] for name in self.truncated(node).outputs]
        n_carried = len(node.inputs) - 2
        return values[:n_carried], values[n_carried:-1], np.asarray(values[-1])

    @staticmethod
    def trip_count(node: Node, read: Any) -> int | None:
        """A Loop's trip count M; None when it has none."""
        m = node.inputs[0] if node.inputs else ""
        return int(_scalar(read(m), "the trip count M", node)) if m else None

    def loop_inputs_at(self, node: Node, scope: Scope, iteration: int, carried: list[Any] | None, read: Any) -> dict[str, Any]:
        """What iteration ``iteration`` of Loop ``node`` starts from: the carried values after the ones
        before (``carried``), or for iteration 0 the node's own inputs."""
        if iteration == 0 or carried is None:
            begun = self.begin(node, read)
            assert begun is not None
            return begun[1]
        return self._loop_inputs(scope, iteration, True, carried)

    def begin_at(self, node: Node, read: Any, outs: Mapping[str, Any], iteration: int) -> tuple[Scope, dict[str, Any], LoopState] | dict[str, Any]:
        """From what :meth:`truncated` computed for ``iteration`` iterations (``outs``): the frame at the
        start of that iteration, or, when the loop ended before, the node's own outputs."""
        carried, scans, conds = self.split_truncated(node, outs)
        outputs = {name: v for name, v in zip(node.outputs, carried + scans) if name}
        begun = self.begin(node, read)
        if begun is None:
            return outputs  # (no iteration at all)
        scope, _, loop = begun
        if loop is None or len(conds) < iteration or not bool(conds[-1]) or (loop.trip_count is not None and iteration >= loop.trip_count):
            return outputs  # it ended before that iteration
        loop.iteration = iteration
        loop.inputs = [None] * iteration
        loop.scans = [[np.asarray(s)[k, ...] for k in range(iteration)] for s in scans]
        loop.finals = list(carried)
        return scope, self._loop_inputs(scope, iteration, True, carried), loop

    # -- between iterations ----------------------------------------------------------------

    def next_inputs(self, frame: Frame, read_outer: Any) -> dict[str, Any] | None:
        """At the end of an iteration: record its outputs; the next iteration's inputs, or None when done."""
        node, loop, scope = frame.owner, frame.loop, frame.scope
        assert node is not None
        if loop is None:
            return None
        outs = [frame.values.get(o) for o in scope.output_names]  # (the engine's own read: no recomputation)
        return self.advance(node, scope, loop, outs, read_outer)

    def advance(self, node: Node, scope: Scope, loop: LoopState, outs: list[Any], read_outer: Any) -> dict[str, Any] | None:
        """At the end of an iteration of Loop or Scan ``node``, whose body gave ``outs`` (the scope's outputs
        in order): record them in ``loop``; the next iteration's inputs, or None when done."""
        if node.op_type == "Loop":
            n_carried = len(node.inputs) - 2
            cond, carried, scans = outs[0], outs[1 : 1 + n_carried], outs[1 + n_carried :]
            for acc, v in zip(loop.scans, scans):
                acc.append(v)
            loop.finals = list(carried)
            more = bool(_scalar(cond, "the body's condition", node)) and (
                loop.trip_count is None or loop.iteration + 1 < loop.trip_count
            )
            if not more:
                return None
            loop.iteration += 1
            return self._loop_inputs(scope, loop.iteration, True, carried)
        n_scan = int(node.attributes.get("num_scan_inputs", 0))
        n_state = len(node.inputs) - n_scan
        states, scans = outs[:n_state], outs[n_state:]
        for acc, v in zip(loop.scans, scans):
            acc.append(v)
        loop.finals = list(states)
        if loop.iteration + 1 >= (loop.trip_count or 0):
            return None
        loop.iteration += 1
        sequences = [np.asarray(read_outer(n)) for n in node.inputs[n_state:]]
        return self._scan_inputs(node, scope, loop.iteration, states, sequences, loop)

    # -- leaving ---------------------------------------------------------------------------

    def results(self, frame: Frame) -> dict[str, Any]:
        """What the control-flow node outputs once its frame is done (after the last iteration)."""
        node, loop, scope = frame.owner, frame.loop, frame.scope
        assert node is not None
        if loop is None:  # If, function call: the scope's outputs are the node's
            values = [frame.values.get(o) for o in scope.output_names]
            return {name: v for name, v in zip(node.outputs, values) if name}
        return self.finish(node, loop)

    @staticmethod
    def finish(node: Node, loop: LoopState) -> dict[str, Any]:
        """What Loop or Scan ``node`` outputs after its last iteration: the carried values, the scans stacked."""
        finals = loop.finals
        if node.op_type == "Loop":
            scans = [np.stack(acc, axis=0) for acc in loop.scans]
        else:
            axes = list(node.attributes.get("scan_output_axes") or [0] * len(loop.scans))
            directions = list(node.attributes.get("scan_output_directions") or [0] * len(loop.scans))
            scans = []
            for acc, axis, direction in zip(loop.scans, axes, directions):
                elems = acc[::-1] if direction else acc
                rank = np.asarray(elems[0]).ndim + 1
                scans.append(np.stack(elems, axis=axis + rank if axis < 0 else axis))
        return {name: v for name, v in zip(node.outputs, finals + scans) if name}
