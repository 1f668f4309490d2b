"""The stepping state machine: a program counter over a graph's nodes, values, stops.

``DebugSession`` is what a debugger drives: ``continue_``, ``step``, ``step_back``,
``goto``, ``run_to``, ``restart`` each return a :class:`Stop` saying why and where
the run stopped. It knows nothing of DAP.

A ``continue_`` runs the nodes up to the next node that has a breakpoint in one
onnxruntime call (a segment), watched for NaN/Inf by in-graph sums when those
filters are on; steps run single nodes. Values are kept within a memory budget
and recomputed on demand from what is kept.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from graph_dap.errors import BreakpointError, ExpressionError, GraphDapError, NodeExecutionError, ValueNotFoundError
from graph_dap.runtime import expr as _expr
from graph_dap.runtime.breakpoints import Breakpoint, BreakpointSpec, hit_condition_met, parse_hit_condition, resolve_spec
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.engine.planning import CUTS, SegmentPlanner
from graph_dap.runtime.engine.segments import SegmentError, SegmentRunner
from graph_dap.runtime.engine.store import ValueStore
from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.inputs import InputsArg, resolve_inputs
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.stops import Stop, StopReason
from graph_dap.runtime.tensor import TensorSummary, summarize, type_text

BREAK_FILTERS = ("nan", "inf", "error")
_PAUSE_GRAIN_S = 0.5  # a run that took longer than twice this is split, so a pause lands part-way


@dataclass(frozen=True, slots=True)
class _Entry:
    """One entry of the step-back history: a node that ran, or a goto."""

    pc: int  # program counter before
    ran: tuple[int, ...]  # orders of the nodes this entry marked as run
    last: Node | None  # last node before


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
        self.runner = NodeRunner(self.graph, providers, opt_level)
        self.segments = SegmentRunner(self.graph, self.runner.providers, opt_level)
        self.skip_constants = skip_constants
        self.fast = fast
        self.break_on: set[str] = set()
        self.set_break_on(break_on)
        self.inf_exclude: tuple[str, ...] = tuple(inf_exclude)
        self.base_dir = Path(base_dir) if base_dir else (self.graph.path.parent if self.graph.path else Path.cwd())
        self.on_log = on_log
        self.on_progress = on_progress
        self.logs: list[str] = []
        self.executions: Counter[str] = Counter()
        self.ort_calls = 0
        budget = None if memory_budget_mb is None else int(memory_budget_mb * (1 << 20))
        self.store = ValueStore(budget)
        # Initializers are embedded in every session, as in the whole model (onnxruntime
        # pre-packs constant weights, which changes the last bits); all else is fed.
        # onnxruntime makes Constant nodes initializers too, at load: embed their outputs alike.
        constant_outputs = [o for n in self.graph.nodes if n.op_type == "Constant" and n.domain in ("", "ai.onnx") for o in n.outputs]
        self._initializers = frozenset(self.graph.initializer_names) | frozenset(constant_outputs if skip_constants else ())
        self._seq: tuple[Node, ...] = tuple(n for n in self.graph.nodes if not (skip_constants and n.is_static))
        self._seq_pos = {n.id: i for i, n in enumerate(self._seq)}
        self._last_use = self._last_uses()
        self.planner = SegmentPlanner(self.graph, self._seq, self._last_use)
        self._dtypes: dict[str, str] = {}  # value -> dtype, or "seq"/"other"; the watch plan needs them
        for v in self.graph.value_names():
            info = self.graph.value_info(v)
            if info.kind != "tensor":
                self._dtypes[v] = info.kind
            elif info.dtype:
                self._dtypes[v] = info.dtype
        self._breakpoints: dict[int, Breakpoint] = {}
        self._bp_by_node: dict[str, list[int]] = {}
        self._hits: Counter[int] = Counter()
        self._next_bp_id = 1
        self._pause = threading.Event()
        self._run_options: ort.RunOptions | None = None
        self._constants_version = 0
        self._versions = 0  # a new constants version for every change of an initializer
        self._originals: dict[str, Any] | None = None
        self._static_values: dict[str, Any] = {}
        self._bp_version = 0
        self._segment_seconds: dict[tuple[int, int], float] = {}
        self._statics_dirty = False
        self._statics_overridden = False
        self._static_faults: dict[FaultFilter, tuple[Node, str, str] | None] = {}  # cleared when a constant changes
        self._reset()

    def _last_uses(self) -> dict[str, int]:
        """For each value, the last position in the run sequence that reads it."""
        last: dict[str, int] = {}
        for pos, n in enumerate(self._seq):
            for i in n.all_inputs:
                last[i] = pos
        end = len(self._seq)
        for o in self.graph.output_names:
            last[o] = end
        return last

    # -- state ---------------------------------------------------------------------

    def _reset(self) -> None:
        self.store.clear()
        self.store.fixed.update(self.inputs)
        if self._originals is None:
            self._originals = {t.name: onnx.numpy_helper.to_array(t) for t in self.graph.model.graph.initializer}
        self.store.fixed.update(self._originals)
        self.store.fixed.update(self._static_values)  # constants of the original initializers
        if self._statics_dirty:
            self._static_faults.clear()
            self._statics_dirty = False
        self._statics_overridden = False
        self._constants_version = 0  # sessions of version 0 embed the original initializers
        self._ran: set[int] = set()  # orders of nodes that ran in this timeline
        self._overrides: set[str] = set()  # computed values the user set: never evicted
        self._stale: set[str] = set()
        self._pc = 0
        self._history: list[_Entry] = []
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

    @property
    def _filter(self) -> FaultFilter:
        return FaultFilter("nan" in self.break_on, "inf" in self.break_on, self.inf_exclude)

    # -- values --------------------------------------------------------------------

    def _available(self, name: str) -> bool:
        """Known in this timeline: fixed, kept, or produced by a node that ran."""
        if name in self.store:
            return True
        producer = self.graph.producer(name)
        return producer is not None and (producer.order in self._ran or (producer.is_static and self.skip_constants and self._started))

    def value(self, name: str) -> Any:
        """The current value of ``name`` (possibly stale; see :meth:`is_stale`)."""
        if name in self.store:
            return self.store.get(name)
        if not self.graph.has_value(name):
            raise ValueNotFoundError(f"no value '{name}' in the graph")
        if self._available(name):
            return self._get(name)
        producer = self.graph.producer(name)
        where = f": node {producer.id} ({producer.op_type}) has not run yet" if producer else ""
        raise ValueNotFoundError(f"value '{name}' is not computed yet{where}")

    def has_value(self, name: str) -> bool:
        return self._available(name)

    def summary(self, name: str) -> TensorSummary:
        return summarize(self.value(name))

    def computed_values(self) -> list[str]:
        """Names of every value known now: inputs, initializers, then computed ones in run order."""
        return [n for n in self.graph.value_names() if self._available(n)]

    def is_stale(self, name: str) -> bool:
        """True when an upstream value was set and this one is not recomputed yet."""
        return name in self._stale

    def outputs(self) -> dict[str, Any]:
        """The graph outputs computed so far."""
        return {n: self.value(n) for n in self.graph.output_names if self._available(n)}

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
        current = self.value(name)
        if isinstance(current, list):
            raise GraphDapError(f"value '{name}' is a sequence; only tensors can be set")
        cur = np.asarray(current)
        new = np.asarray(value)
        if new.ndim == 0 or (new.size == 1 and new.shape != cur.shape and new.ndim <= cur.ndim):
            try:
                new = np.full(cur.shape, new.reshape(()), dtype=cur.dtype)
            except (TypeError, ValueError) as e:
                raise GraphDapError(f"cannot set '{name}' ({type_text(cur)}) to {value!r}: {e}") from None
        elif new.shape != cur.shape or new.dtype != cur.dtype:
            hint = f"; convert it with .astype('{cur.dtype}')" if new.shape == cur.shape else ""
            raise GraphDapError(f"value '{name}' is {type_text(cur)}, got {type_text(new)}{hint}")
        if name in self.store.fixed:
            self._static_faults.clear()
            self._statics_dirty = True
            producer = self.graph.producer(name)
            if producer is not None and producer.is_static:
                self._statics_overridden = True  # segments must be fed it, not recompute it
        if name in self._initializers:
            self._versions += 1  # embedded in sessions: build new ones
            self._constants_version = self._versions
        self.store.put(name, np.array(new, copy=True, order="C"))
        if name not in self.store.fixed:
            self._overrides.add(name)  # kept until its producer runs again: it cannot be recomputed
        self._stale.discard(name)
        stale = [o for n in self.graph.downstream([name]) for o in n.outputs if o and self._available(o)]
        self._stale.update(stale)
        return stale

    def _refresh(self) -> None:
        """Recompute the stale values, each producer once, in as few onnxruntime calls as possible."""
        if not self._stale:
            return
        stale = [v for v in self.graph.value_names() if v in self._stale]
        # Recompute what the next nodes read; any other stale value is dropped and,
        # like an evicted one, recomputed from the new values when it is read.
        pinned = [v for v in stale if v in self.store and self._last_use.get(v, -1) >= self._pc]
        for v in stale:
            if v not in pinned and v not in self.store.fixed:
                self.store.drop(v)
        self._compute(pinned)
        self._stale.clear()

    def _get(self, name: str) -> Any:
        """The value of ``name``, recomputing it (and what it needs) when it is not kept."""
        if name in self.store and name not in self._stale:
            return self.store.get(name)
        return self._compute([name])[name]

    def _compute(self, names: Sequence[str]) -> dict[str, Any]:
        """Compute ``names`` from what is kept, in one segment (or one node)."""
        needed: dict[int, Node] = {}
        frontier = list(names)
        seen: set[str] = set()
        while frontier:
            v = frontier.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in self.store and v not in self._stale and v not in names:
                continue
            producer = self.graph.producer(v)
            if producer is None:
                if v in self.store:
                    continue
                raise ValueNotFoundError(f"no value '{v}' in the graph")
            if producer.order not in needed:
                needed[producer.order] = producer
                frontier.extend(producer.all_inputs)
        nodes = [needed[k] for k in sorted(needed)]
        outs = self._run_nodes(nodes, list(names))
        self._store_outputs(outs)
        self._evict()
        return outs

    def _run_nodes(self, nodes: Sequence[Node], wanted: Sequence[str]) -> dict[str, Any]:
        """Outputs ``wanted`` of running ``nodes`` (in run order) over the kept values."""
        if len(nodes) == 1:
            return self._execute(nodes[0])
        produced = {o for n in nodes for o in n.outputs if o}
        feeds, constants = self._segment_inputs(nodes, produced)
        try:
            result = self.segments.run(nodes, feeds, constants, wanted, version=self._constants_version)
        except SegmentError:
            # Fall back to single nodes, which name the node that fails.
            local: dict[str, Any] = {}
            for n in nodes:
                local.update(self._execute(n, extra=local))
            return {k: local[k] for k in wanted}
        self.ort_calls += 1
        for n in nodes:
            self.executions[n.id] += 1
        return result.values

    def _segment_inputs(self, nodes: Sequence[Node], produced: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        feeds: dict[str, Any] = {}
        constants: dict[str, Any] = {}
        for n in nodes:
            for i in n.all_inputs:
                if i in produced or i in feeds or i in constants:
                    continue
                if i in self._initializers:
                    constants[i] = self.store.fixed[i]
                else:
                    feeds[i] = self._get(i)
        return feeds, constants

    def _execute(self, node: Node, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        feeds: dict[str, Any] = {}
        constants: dict[str, Any] = {}
        for i in node.all_inputs:
            if i in self._initializers:
                constants[i] = self.store.fixed[i]
            else:
                feeds[i] = extra[i] if extra and i in extra else self._get(i)
        self.executions[node.id] += 1
        self.ort_calls += 1
        outs = self.runner.run(node, feeds, constants, self._constants_version)
        for k, v in outs.items():
            self._dtypes.setdefault(k, str(v.dtype) if isinstance(v, np.ndarray) else "seq" if isinstance(v, list) else "other")
        return outs

    def _evict(self) -> None:
        pc = self._pc
        self.store.evict(lambda name: self._last_use.get(name, -1) >= pc or name in self._overrides)

    def _store_outputs(self, outs: Mapping[str, Any]) -> None:
        for k, v in outs.items():
            if k in self.store.fixed:
                self._static_faults.clear()
            self.store.put(k, v)
            self._overrides.discard(k)
            self._stale.discard(k)

    # -- breakpoints ---------------------------------------------------------------

    def set_breakpoints(self, specs: Iterable[BreakpointSpec | str]) -> list[Breakpoint]:
        """Replace every breakpoint; returns each resolved, in the order given."""
        self._breakpoints.clear()
        self._bp_by_node.clear()
        self._hits.clear()
        self._bp_version += 1
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
            spec = self._breakpoints[bp_id].spec
            if spec.condition:
                try:
                    cond = _expr.compile_expression(spec.condition)
                    names = {n for n in cond.names if self.graph.has_value(n)}
                    if trial is None and names & set(node.outputs):
                        trial = self._execute(node)
                        self.executions[node.id] -= 1  # a look ahead, not a step
                    # A condition over values this node cannot see yet (not computed) does not hold here.
                    if any(not self._available(n) and not (trial and n in trial) for n in names):
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
                self._log(_expr.interpolate(spec.log_message, self._resolver(trial), base_dir=self.base_dir))
                continue
            stopping.append(bp_id)
        return stopping, "; ".join(notes)

    def _check_logpoints_only(self, node: Node) -> None:
        # Running a node prints its logpoints, as a debugger prints a logpoint line it steps over.
        if any(self._breakpoints[b].is_logpoint for b in self._bp_by_node.get(node.id, ())):
            self._check_breakpoints(node)

    def _log(self, line: str) -> None:
        self.logs.append(line)
        if self.on_log is not None:
            self.on_log(line)

    # -- running -------------------------------------------------------------------

    def start(self) -> Stop:
        """Compute the constant nodes and stop at the first node to run."""
        if not self._started:
            if self.skip_constants and not self._static_values:
                for node in self.graph.nodes:
                    if node.is_static:
                        try:
                            outs = self._execute(node, extra=self.store.fixed)
                        except NodeExecutionError as e:
                            return Stop(StopReason.ERROR, node, str(e), details={"ort_message": e.ort_message})
                        self.store.fixed.update(outs)
                        self._static_values.update(outs)
            self._started = True
        return Stop(StopReason.ENTRY, self.pc, "stopped at entry")

    def _prepare(self) -> Stop | None:
        if not self._started:
            first = self.start()
            if first.reason is StopReason.ERROR:
                return first
        self._pause.clear()
        self._refresh()
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
        if key not in self._static_faults:
            found = None
            for node in self.graph.nodes:
                if node.is_static:
                    fault = self._filter.check(node, {o: self.store.fixed.get(o) for o in node.outputs})
                    if fault is not None:
                        found = (node, *fault)
                        break
            self._static_faults[key] = found
        return self._static_faults[key]

    def _record(self, pos: int, node: Node) -> None:
        self._history.append(_Entry(pos, (node.order,), self._last))
        self._ran.add(node.order)
        self._last = node

    def _run_node(self, node: Node) -> Stop | None:
        """Run the node at the program counter and move past it; a stop if it failed or faulted."""
        try:
            outs = self._execute(node)
        except NodeExecutionError as e:
            return self._error_stop(node, e)
        self._store_outputs(outs)
        self._record(self._pc, node)
        self._pc += 1
        self._evict()
        fault = self._filter.check(node, outs)
        return self._fault_stop(node, *fault) if fault else None

    def _error_stop(self, node: Node, e: NodeExecutionError) -> Stop:
        inputs = {i: summarize(self.store.peek(i)).text() for i in node.all_inputs if self.store.peek(i) is not None}
        details = {"ort_message": e.ort_message, "inputs": inputs}
        if "error" in self.break_on:
            return Stop(StopReason.ERROR, node, str(e), details=details)
        return Stop(StopReason.END, node, f"the run ended with an error: {e}", details=details)

    def _fault_stop(self, node: Node, name: str, kind: str) -> Stop:
        value = np.asarray(self.value(name))
        inputs = {i: self.value(i) for i in node.all_inputs if self._available(i)}
        return self._filter.stop_details(node, name, value, kind, inputs, Stop, StopReason)

    def step(self) -> Stop:
        """Run one node (an If/Loop/Scan runs whole); stop at the next."""
        early = self._prepare()
        if early is not None:
            return early
        node = self.pc
        if node is None:
            return self._end()
        self._check_logpoints_only(node)
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
        total = len(self._seq)
        first = not check_first
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
            target = self._next_target(self._pc + 1, until)
            if self.fast and target - self._pc > 1:
                if self.on_progress is not None:
                    self.on_progress(self._pc, total)
                stop = self._run_segment(self._pc, target)
            else:
                stop = self._run_node(node)
            if self.on_progress is not None:
                self.on_progress(self._pc, total)
            if stop is not None:
                return stop
        return self._end()

    def _next_target(self, start: int, until: str | None) -> int:
        """The first position from ``start`` where a breakpoint or ``until`` must be looked at."""
        for pos in range(start, len(self._seq)):
            nid = self._seq[pos].id
            if nid == until or nid in self._bp_by_node:
                return pos
        return len(self._seq)

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
                if self._pause.is_set():
                    self._pause.clear()
                    return Stop(StopReason.PAUSE, self._seq[a], "paused")
                if self.on_progress is not None:
                    self.on_progress(a, len(self._seq))
            stop = self._run_one_segment(a, b)
            if stop is not None:
                return stop
        return None

    def _run_one_segment(self, start: int, end: int) -> Stop | None:
        """Run positions ``start..end-1`` in one onnxruntime call; on any trouble, node by node."""
        plan = self.planner.plan(
            start,
            end,
            filt=self._filter,
            dtypes=self._dtypes,
            budget=self.store.budget,
            conditions=self._condition_names,
            constants=self.store.fixed if self.skip_constants and not self._statics_overridden else None,
            version=self._bp_version,
        )
        if plan is None:
            return self._run_slow(start, end)  # learn the types first: the watch plan needs them
        nodes, wanted, watch = plan.nodes, plan.wanted, plan.watch
        filt = self._filter
        constants = {i: self.store.fixed[i] for i in plan.reads if i in self._initializers}
        feeds = {i: self._get(i) for i in plan.reads if i not in self._initializers}
        self._run_options = ort.RunOptions()
        began = time.perf_counter()
        try:
            result = self.segments.run(plan.ran, feeds, constants, wanted, watch, self._run_options, self._constants_version)
            self._segment_seconds[(start, end)] = time.perf_counter() - began
        except SegmentError:
            if self._pause.is_set():
                self._pause.clear()
                return Stop(StopReason.PAUSE, self._seq[start], "paused")
            return self._run_slow(start, end)
        finally:
            self._run_options = None
        self.ort_calls += 1
        self.executions.update(n.id for n in plan.ran)
        last = self._last
        self._history.extend(_Entry(start + k, (n.order,), nodes[k - 1] if k else last) for k, n in enumerate(nodes))
        self._ran.update(n.order for n in nodes)
        self._last = nodes[-1]
        self._store_outputs(result.values)
        self._pc = end
        self._evict()
        if result.sums is not None and watch is not None:
            found = filt.first_fault(self.graph, watch, result.sums, self.value)
            if found is not None:
                node, name, kind = found
                self._rewind_to(self._seq_pos[node.id] + 1)
                return self._fault_stop(node, name, kind)
        return None

    def _condition_names(self, pos: int, produced: set[str]) -> list[str]:
        if pos >= len(self._seq):
            return []
        names: list[str] = []
        for bp_id in self._bp_by_node.get(self._seq[pos].id, ()):
            spec = self._breakpoints[bp_id].spec
            for text in (spec.condition,):
                if text:
                    try:
                        names += [n for n in _expr.compile_expression(text).names if n in produced]
                    except ExpressionError:
                        pass
        return names

    def _run_slow(self, start: int, end: int) -> Stop | None:
        while self._pc < end:
            stop = self._run_node(self._seq[self._pc])
            if stop is not None:
                return stop
            if self._pause.is_set() and self._pc < end:
                self._pause.clear()
                return Stop(StopReason.PAUSE, self.pc, "paused")
        return None

    def _rewind_to(self, pos: int) -> None:
        """Undo the history back to ``pos`` (positions at or after it did not run)."""
        while self._pc > pos and self._history:
            self._undo()

    def _undo(self) -> None:
        entry = self._history.pop()
        for order in entry.ran:
            self._ran.discard(order)
            for o in self.graph.nodes[order].outputs:
                if o:
                    self.store.drop(o)
                    self._stale.discard(o)
                    self._overrides.discard(o)
        self._pc = entry.pc
        self._last = entry.last

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
        missing = [i for i in node.all_inputs if not self._available(i)]
        added: list[int] = []
        if missing:
            needed = self._ancestors(missing)
            try:
                self._compute(missing)
            except NodeExecutionError as e:
                return Stop(StopReason.ERROR, self.graph.node(e.node_id), str(e), details={"ort_message": e.ort_message})
            added = [n.order for n in needed if n.order not in self._ran]
        self._history.append(_Entry(self._pc, tuple(added), self._last))
        self._ran.update(added)
        self._pc = self._seq_pos[node.id]
        return Stop(StopReason.GOTO, node, f"jumped to {node.label}")

    def _ancestors(self, names: Sequence[str]) -> list[Node]:
        out: dict[int, Node] = {}
        frontier = list(names)
        while frontier:
            p = self.graph.producer(frontier.pop())
            if p is None or p.order in out or p.order in self._ran or (p.is_static and self.skip_constants):
                continue
            out[p.order] = p
            frontier.extend(i for i in p.all_inputs if not self._available(i))
        return [out[k] for k in sorted(out)]

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
        self._undo()
        return Stop(StopReason.STEP, self.pc, "stepped back")

    def reverse_continue(self) -> Stop:
        """Step back until a node with a breakpoint is next, or the history is empty."""
        while self._history:
            self._undo()
            node = self.pc
            if node is not None and any(not self._breakpoints[b].is_logpoint for b in self._bp_by_node.get(node.id, ())):
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
