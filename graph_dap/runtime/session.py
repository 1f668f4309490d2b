"""The stepping state machine: a program counter over a graph's nodes, values, stops.

``DebugSession`` is what a debugger drives: ``continue_``, ``step``, ``step_back``,
``goto``, ``run_to``, ``restart`` each return a :class:`Stop` saying why and where
the run stopped. It knows nothing of DAP.
"""

from __future__ import annotations

import enum
import fnmatch
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from . import expr as _expr
from .breakpoints import (
    Breakpoint,
    BreakpointSpec,
    hit_condition_met,
    parse_hit_condition,
    resolve_spec,
)
from .engine import NodeRunner
from .errors import (
    BreakpointError,
    ExpressionError,
    GraphDapError,
    NodeExecutionError,
    ValueNotFoundError,
)
from .graph import Graph, Node, load_graph
from .inputs import InputsArg, resolve_inputs
from .tensor import TensorSummary, first_nonfinite, summarize, type_text

BREAK_FILTERS = ("nan", "inf", "error")


class StopReason(enum.Enum):
    """Why a run stopped."""

    ENTRY = "entry"
    BREAKPOINT = "breakpoint"
    NAN = "nan"
    INF = "inf"
    ERROR = "error"
    STEP = "step"
    GOTO = "goto"
    PAUSE = "pause"
    END = "end"


@dataclass(frozen=True, slots=True)
class Stop:
    """Where and why a run stopped.

    ``node`` is the node the stop is about: the next to run for entry, breakpoint,
    step, goto and pause; the node that failed for ``error``; the node whose output
    holds the NaN or Inf for ``nan``/``inf`` (it has run; ``DebugSession.pc`` is past it).
    """

    reason: StopReason
    node: Node | None
    message: str = ""
    tensor: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    breakpoint_ids: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        n = self.node
        return {
            "reason": self.reason.value,
            "node": None if n is None else {"name": n.id, "op_type": n.op_type, "index": n.index},
            "message": self.message,
            "tensor": self.tensor,
            "details": self.details,
            "breakpoint_ids": list(self.breakpoint_ids),
        }


@dataclass(slots=True)
class _Step:
    """One entry of the step-back history."""

    pc: int  # program counter before
    written: dict[str, Any]  # value name -> previous value (or _MISSING)
    node: Node | None


_MISSING = object()


class DebugSession:
    """Runs one model under a debugger's control.

    Values are exactly what onnxruntime computes for each node (one-node sessions,
    optimizations off by default). Constant nodes are computed once at start and
    skipped by the program counter unless ``skip_constants`` is False.
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
        base_dir: str | os.PathLike[str] | None = None,
        on_log: Callable[[str], None] | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.graph = model if isinstance(model, Graph) else load_graph(model)
        self.inputs = resolve_inputs(self.graph, inputs, dims)
        self.runner = NodeRunner(self.graph, providers, opt_level)
        self.skip_constants = skip_constants
        self.break_on: set[str] = set()
        self.set_break_on(break_on)
        self.inf_exclude: tuple[str, ...] = tuple(inf_exclude)
        self.base_dir = Path(base_dir) if base_dir else (self.graph.path.parent if self.graph.path else Path.cwd())
        self.on_log = on_log
        self.on_progress = on_progress
        self.logs: list[str] = []
        self.executions: Counter[str] = Counter()
        self._seq: tuple[Node, ...] = tuple(n for n in self.graph.nodes if not (skip_constants and n.is_static))
        self._seq_pos = {n.id: i for i, n in enumerate(self._seq)}
        self._breakpoints: dict[int, Breakpoint] = {}
        self._bp_by_node: dict[str, list[int]] = {}
        self._hits: Counter[int] = Counter()
        self._next_bp_id = 1
        self._pause = threading.Event()
        self._reset()

    # -- state ---------------------------------------------------------------------

    def _reset(self) -> None:
        self._values: dict[str, Any] = dict(self.inputs)
        for t in self.graph.model.graph.initializer:
            self._values[t.name] = onnx.numpy_helper.to_array(t)
        self._stale: set[str] = set()
        self._pc = 0
        self._history: list[_Step] = []
        self._last: Node | None = None
        self._hits.clear()
        self._started = False
        self._statics_checked = False

    @property
    def pc(self) -> Node | None:
        """The next node to run; None once the run is at its end."""
        return self._seq[self._pc] if self._pc < len(self._seq) else None

    @property
    def last_node(self) -> Node | None:
        """The node that ran last (its outputs are the "last outputs")."""
        return self._last

    @property
    def sequence(self) -> tuple[Node, ...]:
        """The nodes the program counter walks through, in run order."""
        return self._seq

    @property
    def at_end(self) -> bool:
        return self._pc >= len(self._seq)

    def set_break_on(self, filters: Iterable[str]) -> None:
        """Enable the break filters ``nan``, ``inf`` and ``error``."""
        wanted = set(filters)
        bad = wanted - set(BREAK_FILTERS)
        if bad:
            raise GraphDapError(f"unknown break filter '{sorted(bad)[0]}'; expected any of {', '.join(BREAK_FILTERS)}")
        self.break_on = wanted

    # -- values --------------------------------------------------------------------

    def value(self, name: str) -> Any:
        """The current value of ``name`` (possibly stale; see :meth:`is_stale`)."""
        if name in self._values:
            return self._values[name]
        if not self.graph.has_value(name):
            raise ValueNotFoundError(f"no value '{name}' in the graph")
        producer = self.graph.producer(name)
        where = f": node {producer.id} ({producer.op_type}) has not run yet" if producer else ""
        raise ValueNotFoundError(f"value '{name}' is not computed yet{where}")

    def has_value(self, name: str) -> bool:
        return name in self._values

    def summary(self, name: str) -> TensorSummary:
        return summarize(self.value(name))

    def computed_values(self) -> list[str]:
        """Names of every value known now: inputs, initializers, then computed ones in run order."""
        return [n for n in self.graph.value_names() if n in self._values]

    def is_stale(self, name: str) -> bool:
        """True when an upstream value was set and this one is not recomputed yet."""
        return name in self._stale

    def outputs(self) -> dict[str, Any]:
        """The graph outputs computed so far."""
        return {n: self._values[n] for n in self.graph.output_names if n in self._values}

    def evaluate(self, text: str | _expr.Expression, extra: Mapping[str, Any] | None = None) -> Any:
        """Evaluate a tensor expression over the current values."""
        return _expr.evaluate(text, self._resolver(extra), base_dir=self.base_dir)

    def _resolver(self, extra: Mapping[str, Any] | None = None) -> Callable[[str], Any]:
        def resolve(name: str) -> Any:
            if extra and name in extra:
                return extra[name]
            return self.value(name)

        return resolve

    def set_value(self, name: str, value: Any) -> list[str]:
        """Replace a value; its computed dependents become stale and are recomputed next.

        A scalar broadcasts to the value's shape. Returns the names made stale.
        """
        if name not in self._values:
            self.value(name)  # raises the right error
        current = self._values[name]
        if isinstance(current, list):
            raise GraphDapError(f"value '{name}' is a sequence; only tensors can be set")
        cur = np.asarray(current)
        new = np.asarray(value)
        if new.ndim == 0 or new.size == 1 and new.shape != cur.shape and new.ndim <= cur.ndim:
            try:
                new = np.full(cur.shape, new.reshape(()), dtype=cur.dtype)
            except (TypeError, ValueError) as e:
                raise GraphDapError(f"cannot set '{name}' ({type_text(cur)}) to {value!r}: {e}") from None
        elif new.shape != cur.shape or new.dtype != cur.dtype:
            hint = f"; convert it with .astype('{cur.dtype}')" if new.shape == cur.shape else ""
            raise GraphDapError(f"value '{name}' is {type_text(cur)}, got {type_text(new)}{hint}")
        self._values[name] = np.ascontiguousarray(new)
        self._stale.discard(name)
        stale = [o for n in self.graph.downstream([name]) for o in n.outputs if o in self._values]
        self._stale.update(stale)
        return stale

    def _refresh(self) -> None:
        """Recompute stale values, each producer once, in run order."""
        if not self._stale:
            return
        producers = {self.graph.producer(v) for v in self._stale}
        for node in sorted((p for p in producers if p is not None), key=lambda n: n.order):
            outs = self._execute(node)
            self._values.update(outs)
            self._stale.difference_update(outs)
        self._stale.clear()

    def _feeds(self, node: Node) -> dict[str, Any]:
        return {name: self._materialize(name) for name in node.all_inputs}

    def _materialize(self, name: str) -> Any:
        """The value of ``name``, computing its producer (and theirs) when it is missing."""
        if name in self._values:
            return self._values[name]
        producer = self.graph.producer(name)
        if producer is None:
            raise ValueNotFoundError(f"no value '{name}' in the graph")
        self._values.update(self._execute(producer))
        return self._values[name]

    def _execute(self, node: Node, run_options: Any = None) -> dict[str, Any]:
        feeds = self._feeds(node)
        self.executions[node.id] += 1
        return self.runner.run(node, feeds, run_options)

    # -- breakpoints ---------------------------------------------------------------

    def set_breakpoints(self, specs: Iterable[BreakpointSpec | str]) -> list[Breakpoint]:
        """Replace every breakpoint; returns each resolved, in the order given."""
        self._breakpoints.clear()
        self._bp_by_node.clear()
        self._hits.clear()
        stoppable = set(self._seq_pos)
        out: list[Breakpoint] = []
        for s in specs:
            spec = BreakpointSpec(s) if isinstance(s, str) else s
            bp_id = self._next_bp_id
            self._next_bp_id += 1
            try:
                node_ids, message = resolve_spec(self.graph, spec.spec, stoppable)
                if spec.hit_condition:
                    parse_hit_condition(spec.hit_condition)
                if spec.condition:
                    _expr.compile_expression(spec.condition)
            except (BreakpointError, ExpressionError) as e:
                node_ids, message = (), str(e)
            bp = Breakpoint(bp_id, spec, node_ids, bool(node_ids), message)
            self._breakpoints[bp_id] = bp
            for nid in node_ids:
                self._bp_by_node.setdefault(nid, []).append(bp_id)
            out.append(bp)
        return out

    @property
    def breakpoints(self) -> list[Breakpoint]:
        return list(self._breakpoints.values())

    def _check_breakpoints(self, node: Node) -> tuple[list[int], str]:
        """Breakpoints that stop before ``node`` (logpoints log here and never stop)."""
        stopping: list[int] = []
        notes: list[str] = []
        trial: dict[str, Any] | None = None
        for bp_id in self._bp_by_node.get(node.id, ()):
            bp = self._breakpoints[bp_id]
            spec = bp.spec
            if spec.condition:
                try:
                    cond = _expr.compile_expression(spec.condition)
                    if trial is None and cond.names & set(node.outputs):
                        trial = self._execute(node)
                        self.executions[node.id] -= 1  # a look ahead, not a step
                    # A condition over values this node cannot see yet (not computed) does not hold here.
                    if any(n not in self._values and not (trial and n in trial) and self.graph.has_value(n) for n in cond.names):
                        continue
                    if not _expr.is_truthy(_expr.evaluate(cond, self._resolver(trial), base_dir=self.base_dir)):
                        continue
                except GraphDapError as e:
                    notes.append(f"condition '{spec.condition}' failed: {e}")
                    stopping.append(bp_id)
                    continue
            self._hits[bp_id] += 1
            if spec.hit_condition:
                op, n = parse_hit_condition(spec.hit_condition)
                if not hit_condition_met(op, n, self._hits[bp_id]):
                    continue
            if spec.log_message:
                line = _expr.interpolate(spec.log_message, self._resolver(trial), base_dir=self.base_dir)
                self._log(line)
                continue
            stopping.append(bp_id)
        return stopping, "; ".join(notes)

    def _log(self, line: str) -> None:
        self.logs.append(line)
        if self.on_log is not None:
            self.on_log(line)

    # -- break filters -------------------------------------------------------------

    def _fault(self, node: Node, outs: Mapping[str, Any]) -> Stop | None:
        """A nan/inf stop when an output of ``node`` holds what an enabled filter watches."""
        want_nan = "nan" in self.break_on
        want_inf = "inf" in self.break_on and not self._inf_excluded(node)
        if not (want_nan or want_inf):
            return None
        for name in node.outputs:
            v = outs.get(name)
            if v is None or isinstance(v, list):
                continue
            a = np.asarray(v)
            if a.dtype.kind not in "fc" or a.size == 0:
                continue
            lo, hi = a.min(), a.max()
            if np.isfinite(lo) and np.isfinite(hi):
                continue
            nan = int(np.isnan(a).sum()) if want_nan else 0
            inf = int(np.isinf(a).sum()) if want_inf else 0
            kind = "nan" if nan else "inf" if inf else None
            if kind is None:
                continue
            return self._fault_stop(node, name, a, kind, nan or inf)
        return None

    def _fault_stop(self, node: Node, name: str, a: np.ndarray, kind: str, count: int) -> Stop:
        index = first_nonfinite(a, kind)
        held = []
        for i in node.all_inputs:
            v = self._values.get(i)
            if v is None or isinstance(v, list):
                continue
            arr = np.asarray(v)
            if arr.dtype.kind in "fc" and (np.isnan(arr).any() if kind == "nan" else np.isinf(arr).any()):
                held.append(i)
        label = "NaN" if kind == "nan" else "Inf"
        where = f" at index {list(index)}" if index is not None else ""
        origin = f"; input {', '.join(held)} already held {label}" if held else "; none of its inputs held any"
        message = f"{node.label} produced {count} {label} in '{name}'{where}{origin}"
        details = {"count": count, "first_index": list(index) if index else None, "input_had_it": bool(held), "inputs_with_it": held}
        reason = StopReason.NAN if kind == "nan" else StopReason.INF
        return Stop(reason, node, message, name, details)

    def _inf_excluded(self, node: Node) -> bool:
        for pat in self.inf_exclude:
            if pat.startswith("op:"):
                if node.op_type == pat[3:]:
                    return True
            elif fnmatch.fnmatchcase(node.id, pat):
                return True
        return False

    # -- running -------------------------------------------------------------------

    def start(self) -> Stop:
        """Compute the constant nodes and stop at the first node to run."""
        if not self._started:
            self._started = True
            if self.skip_constants:
                for node in self.graph.nodes:
                    if node.is_static:
                        try:
                            self._values.update(self._execute(node))
                        except NodeExecutionError as e:
                            return Stop(StopReason.ERROR, node, str(e), details={"ort_message": e.ort_message})
        return Stop(StopReason.ENTRY, self.pc, "stopped at entry")

    def _prepare(self) -> Stop | None:
        first = self.start() if not self._started else None
        if first is not None and first.reason is StopReason.ERROR:
            return first
        self._pause.clear()
        self._refresh()
        if not self._statics_checked:
            self._statics_checked = True
            for node in self.graph.nodes:
                if node.is_static and self.skip_constants:
                    fault = self._fault(node, self._values)
                    if fault is not None:
                        return fault
        return None

    def _run_node(self, node: Node) -> Stop | None:
        """Run the node at the program counter and move past it; a stop if it failed or faulted."""
        try:
            outs = self._execute(node)
        except NodeExecutionError as e:
            details = {"ort_message": e.ort_message, "inputs": {i: summarize(self._values[i]).text() for i in node.all_inputs if i in self._values}}
            if "error" in self.break_on:
                return Stop(StopReason.ERROR, node, str(e), details=details)
            return Stop(StopReason.END, node, f"the run ended with an error: {e}", details=details)
        self._history.append(_Step(self._pc, {k: self._values.get(k, _MISSING) for k in outs}, self._last))
        self._values.update(outs)
        self._last = node
        self._pc += 1
        return self._fault(node, outs)

    def step(self) -> Stop:
        """Run one node (an If/Loop/Scan runs whole); stop at the next."""
        early = self._prepare()
        if early is not None:
            return early
        node = self.pc
        if node is None:
            return self._end()
        _, _ = self._check_logpoints_only(node)
        stop = self._run_node(node)
        if stop is not None:
            return stop
        return Stop(StopReason.STEP, self.pc) if self.pc is not None else self._end()

    def _check_logpoints_only(self, node: Node) -> tuple[list[int], str]:
        # Stepping over a node still prints its logpoints, as a debugger prints a logpoint line it steps over.
        if any(self._breakpoints[b].is_logpoint for b in self._bp_by_node.get(node.id, ())):
            return self._check_breakpoints(node)
        return [], ""

    def continue_(self, *, until: str | None = None) -> Stop:
        """Run until a breakpoint, an enabled break filter, a pause, ``until`` or the end."""
        early = self._prepare()
        if early is not None:
            return early
        first = True
        total = len(self._seq)
        while self._pc < total:
            node = self._seq[self._pc]
            if not first:
                if self._pause.is_set():
                    self._pause.clear()
                    return Stop(StopReason.PAUSE, node, "paused")
                if until is not None and node.id == until:
                    return Stop(StopReason.BREAKPOINT, node, f"reached {node.label}")
                hit, note = self._check_breakpoints(node)
                if hit:
                    return Stop(StopReason.BREAKPOINT, node, note or f"breakpoint at {node.label}", breakpoint_ids=tuple(hit))
            else:
                self._check_logpoints_only(node)
            first = False
            stop = self._run_node(node)
            if self.on_progress is not None:
                self.on_progress(self._pc, total)
            if stop is not None:
                return stop
        return self._end()

    def _end(self) -> Stop:
        return Stop(StopReason.END, None, "the run reached the end of the graph")

    def run_to(self, node_id: str) -> Stop:
        """Continue until ``node_id`` is next (breakpoints and filters still stop first)."""
        node = self._stoppable(node_id)
        if self._seq_pos[node.id] < self._pc:
            raise GraphDapError(f"node {node.label} already ran; use goto to go back to it")
        if self._seq_pos[node.id] == self._pc:
            return Stop(StopReason.BREAKPOINT, node, f"reached {node.label}")
        return self.continue_(until=node.id)

    def goto(self, node_id: str) -> Stop:
        """Make ``node_id`` the next node, computing any inputs it lacks."""
        node = self._stoppable(node_id)
        early = self._prepare()
        if early is not None:
            return early
        before = {k for k in self._values}
        try:
            self._feeds(node)
        except NodeExecutionError as e:
            failed = self.graph.node(e.node_id)
            return Stop(StopReason.ERROR, failed, str(e), details={"ort_message": e.ort_message})
        self._history.append(_Step(self._pc, {k: _MISSING for k in self._values if k not in before}, self._last))
        self._pc = self._seq_pos[node.id]
        return Stop(StopReason.GOTO, node, f"jumped to {node.label}")

    def _stoppable(self, node_id: str) -> Node:
        node = self.graph.node(node_id) if self.graph.has_node(node_id) else None
        if node is None:
            producer = self.graph.producer(node_id)
            if producer is None:
                raise GraphDapError(f"no node '{node_id}' in the graph")
            node = producer
        if node.id not in self._seq_pos:
            raise GraphDapError(f"node {node.label} is a constant, computed once at load; it cannot be the next node")
        return node

    def step_back(self) -> Stop:
        """Undo the last node (or goto): its outputs are forgotten and the counter moves back."""
        if not self._history:
            return Stop(StopReason.STEP, self.pc, "already at the start of the history")
        entry = self._history.pop()
        for k, old in entry.written.items():
            if old is _MISSING:
                self._values.pop(k, None)
            else:
                self._values[k] = old
            self._stale.discard(k)
        self._pc = entry.pc
        self._last = entry.node
        return Stop(StopReason.STEP, self.pc, "stepped back")

    def reverse_continue(self) -> Stop:
        """Step back until a node with a breakpoint is next, or the history is empty."""
        while self._history:
            self.step_back()
            node = self.pc
            if node is not None and any(not self._breakpoints[b].is_logpoint for b in self._bp_by_node.get(node.id, ())):
                return Stop(StopReason.BREAKPOINT, node, f"breakpoint at {node.label}")
        return Stop(StopReason.ENTRY, self.pc, "back at the start")

    def restart(self) -> Stop:
        """Back to the start, with the original inputs; breakpoints are kept."""
        self._reset()
        return self.start()

    def pause(self) -> None:
        """Ask a running ``continue_`` (in another thread) to stop before its next node."""
        self._pause.set()
