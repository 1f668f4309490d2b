"""Breakpoints: specifications, how they resolve to nodes, and the table a session keeps.

A spec names a node id, a value (it stops at the value's producer), an op type
(``op:Conv``), a glob over node ids (``*attn*``), a line of the model's Python
source (``model.py:25``, for models exported with stack traces) or a module
(``module:model.layers.8``, see :mod:`.selection`: where the run enters it). Where a name is
both a node id and a value, the node id wins. The :class:`BreakpointTable` counts hits and
evaluates conditions and logpoints where the run reaches a node.
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from graph_dap.errors import BreakpointError, ExpressionError, GraphDapError
from graph_dap.runtime import expr as _expr
from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.graph.source import LineSpec, base_name, parse_line_spec
from graph_dap.runtime.selection import LAYER_NAME, MODULE, MODULE_NAME, module_nodes, no_module_message, where_names

_GLOB_CHARS = re.compile(r"[*?\[]")
_HIT = re.compile(r"^\s*(==|=|>=|<=|>|<|%)?\s*(\d+)\s*$")


@dataclass(frozen=True, slots=True)
class BreakpointSpec:
    """What a user asks for; ``spec`` as in the CLI's ``--break``."""

    spec: str
    condition: str | None = None
    hit_condition: str | None = None
    log_message: str | None = None


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """A spec resolved against a graph: the nodes it stops before."""

    id: int
    spec: BreakpointSpec
    node_ids: tuple[str, ...]
    verified: bool
    message: str = ""

    @property
    def is_logpoint(self) -> bool:
        return bool(self.spec.log_message)


def parse_hit_condition(text: str) -> tuple[str, int]:
    """``"5"`` (the 5th hit), ``">5"``, ``">=5"``, ``"<5"``, ``"==5"`` or ``"%5"`` (every 5th)."""
    m = _HIT.match(text)
    if not m:
        raise BreakpointError(f"hit condition '{text}' is not understood; expected a count like 5, >5, >=5, <5, ==5 or %5")
    op, n = m.group(1) or "==", int(m.group(2))
    if op == "=":
        op = "=="
    if op == "%" and n == 0:
        raise BreakpointError("hit condition '%0' divides by zero; use %1 or more")
    return op, n


def hit_condition_met(op: str, n: int, hits: int) -> bool:
    if op == "==":
        return hits == n
    if op == ">":
        return hits > n
    if op == ">=":
        return hits >= n
    if op == "<":
        return hits < n
    if op == "<=":
        return hits <= n
    return hits % n == 0


def resolve_spec(graph: Graph, spec: str, stoppable: set[str]) -> tuple[tuple[str, ...], str]:
    """Node ids ``spec`` stops before, among ``stoppable``; and a message when none.

    Nodes of every scope count: those inside If branches, Loop and Scan bodies and called functions too.
    """
    text = spec.strip()
    if not text:
        raise BreakpointError("empty breakpoint; expected a node id, a value name, op:TYPE, module:PATH or a glob like *attn*")
    if graph.has_node(text):
        return _only_stoppable([graph.node(text)], stoppable, text)
    if text.startswith(MODULE):
        return _resolve_module(graph, text[len(MODULE) :].strip(), stoppable)
    if text.startswith("op:"):
        op = text[3:].strip()
        nodes = [n for n in graph.all_nodes() if n.op_type == op or f"{n.domain}.{n.op_type}" == op]
        if not nodes:
            ops = sorted({n.op_type for n in graph.all_nodes()})
            return (), f"no node has op type '{op}' (this graph has: {', '.join(ops)})"
        return _only_stoppable(nodes, stoppable, text)
    producers = graph.producers(text)
    if producers:
        return _only_stoppable(producers, stoppable, text)
    if graph.has_value(text):
        return (), f"'{text}' is a graph input or initializer: no node produces it"
    line = parse_line_spec(text)
    if line is not None and (line.file.endswith(".py") or graph.sources.match_files(line.file)):
        return _resolve_line(graph, line, stoppable)
    in_module = module_nodes(graph, text)  # a module path given without module: (what else it could name came first)
    if _GLOB_CHARS.search(text):
        nodes = [n for n in graph.all_nodes() if fnmatch.fnmatchcase(n.id, text)]
        if not nodes and in_module:
            return _resolve_module(graph, text, stoppable)
        if not nodes:
            return (), f"no node id matches '{text}'"
        return _only_stoppable(nodes, stoppable, text)
    if in_module:
        return _resolve_module(graph, text, stoppable)
    return (), f"no node, value or op type matches '{text}' (expected a node id, a value name, op:TYPE, module:PATH, a glob or FILE.py:LINE)"


def _resolve_line(graph: Graph, spec: LineSpec, stoppable: set[str]) -> tuple[tuple[str, ...], str]:
    """The nodes a breakpoint on a source line stops before: the first node of each execution of the line.

    A line binds to the nodes whose stack has it in a frame of the user's own code; the message
    says how many and which is first (a verified breakpoint's), or why there is none.
    """
    sources = graph.sources
    if not sources.has_frames:
        return (), "this model carries no Python stack traces (export it with torch.onnx.export(..., dynamo=True))"
    files = sources.match_files(spec.file)
    if not files:
        named = ", ".join(base_name(f) for f in sources.files[:5])
        return (), f"no node of this model comes from {spec.file} (its stack traces name {named})"
    if len(files) > 1:
        return (), f"{spec.file} names {len(files)} files ({', '.join(files)}); give more of the path"
    path = files[0]
    nodes = sources.nodes_at(path, spec.line)
    if not nodes:
        near = sources.lines_of(path)
        hint = f"; lines that did: {', '.join(map(str, near[:12]))}" + (" ..." if len(near) > 12 else "") if near else ""
        return (), f"no node comes from line {spec.line} of {base_name(path)}{hint}"
    entries: list[str] = []
    runs = 0
    for scope in graph.scopes.values():
        sequence = [n for n in scope.nodes if n.id in stoppable]
        for run in sources.executions(path, spec.line, sequence):
            entries.append(run[0].id)
            runs += 1
    if not entries:
        return (), f"its {len(nodes)} nodes are all constants, computed once at load; launch with skipConstants off to stop at them"
    count = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"
    times = f", {runs} executions of the line" if runs > 1 else ""
    return tuple(entries), f"{count} from {base_name(path)}:{spec.line} (first: {entries[0]}){times}"


def _resolve_module(graph: Graph, pattern: str, stoppable: set[str]) -> tuple[tuple[str, ...], str]:
    """A breakpoint on a module (``module:model.layers.8``): it stops where the run enters the module, at the first
    node of each stretch of the module's nodes (``module:model.layers.*.mlp`` once per layer), as a line does."""
    if not pattern:
        return (), "module: names no module; expected a module path like module:model.layers.8 or a glob like module:model.layers.*.mlp"
    nodes = module_nodes(graph, pattern)
    if not nodes:
        return (), no_module_message(graph, pattern)
    chosen = {n.id for n in nodes}
    entries: list[str] = []
    for scope in graph.scopes.values():
        inside = False
        for n in scope.nodes:
            if n.id not in stoppable:
                continue  # (a constant: computed at load, neither in nor out of a stretch)
            if n.id in chosen and not inside:
                entries.append(n.id)
            inside = n.id in chosen
    if not entries:
        return _only_stoppable(nodes, stoppable, f"module:{pattern}")
    times = f", entered {len(entries)} times" if len(entries) > 1 else ""
    return tuple(entries), f"{len(nodes)} nodes in module {pattern} (first: {entries[0]}){times}"


def _only_stoppable(nodes: list[Node], stoppable: set[str], text: str) -> tuple[tuple[str, ...], str]:
    ids = tuple(n.id for n in nodes if n.id in stoppable)
    if ids:
        return ids, ""
    return (), f"'{text}' matches only constant nodes, which are computed once at load; launch with skipConstants off to stop at them"


class BreakpointContext(Protocol):
    """What the table reads at the program counter to decide whether a breakpoint stops: the values the
    innermost frame sees, a look ahead at a node's outputs, and the log for logpoints."""

    base_dir: Path

    def is_available(self, name: str) -> bool: ...

    def resolver(self, extra: Mapping[str, Any] | None = None) -> Callable[[str], Any]: ...

    def look_ahead(self, node: Node) -> dict[str, Any]:
        """``node``'s outputs, computed without running it (for a condition on its outputs)."""
        ...

    def log(self, line: str) -> None: ...


class BreakpointTable:
    """The breakpoints of a session: what each resolved to, their hit counts, conditions and logpoints."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._breakpoints: dict[int, Breakpoint] = {}
        self._by_node: dict[str, list[int]] = {}
        self._hits: Counter[int] = Counter()
        self._next_id = 1
        self.version = 0  # changes with every set: segment plans depend on where breakpoints are
        # Names a condition reads besides the graph's values: ``call``, the run call's number for its model in a
        # program launch (a decode step of a generation loop: ``call == 12``).
        self.names: dict[str, Any] = {}
        self.holders: frozenset[str] = frozenset()  # control-flow nodes with a breakpoint somewhere inside

    def replace(self, specs: Iterable[BreakpointSpec | str], stoppable: set[str]) -> list[Breakpoint]:
        """Replace every breakpoint; returns each resolved, in the order given."""
        self._breakpoints.clear()
        self._by_node.clear()
        self._hits.clear()
        self.version += 1
        out: list[Breakpoint] = []
        for s in specs:
            spec = BreakpointSpec(s) if isinstance(s, str) else s
            bp_id = self._next_id
            self._next_id += 1
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
                self._by_node.setdefault(nid, []).append(bp_id)
            out.append(bp)
        self.holders = frozenset(step.node for bp in out for nid in bp.node_ids for step in self.graph.node(nid).path)
        return out

    @property
    def all(self) -> list[Breakpoint]:
        return list(self._breakpoints.values())

    def reset_hits(self) -> None:
        self._hits.clear()

    def at(self, node_id: str) -> bool:
        """Whether any breakpoint (a logpoint too) is on ``node_id``: a run must look at it there."""
        return node_id in self._by_node

    def stops_at(self, node_id: str) -> bool:
        """Whether a breakpoint that can stop (not a logpoint) is on ``node_id``."""
        return any(not self._breakpoints[b].is_logpoint for b in self._by_node.get(node_id, ()))

    def condition_names(self, node_id: str, produced: set[str]) -> list[str]:
        """Values among ``produced`` that a condition at ``node_id`` reads (a segment must return them)."""
        names: list[str] = []
        for bp_id in self._by_node.get(node_id, ()):
            text = self._breakpoints[bp_id].spec.condition
            if text:
                try:
                    names += [n for n in _expr.compile_expression(text).names if n in produced]
                except ExpressionError:
                    pass  # refused when it was set: the breakpoint stops with that message
        return names

    def first_iteration(self, node_ids: Iterable[str], name: str, limit: int) -> int | None:
        """The first iteration in ``range(limit)`` at which a breakpoint on ``node_ids`` (nodes of one
        loop body) can stop, known before the body runs: every one of them has a condition that reads
        the iteration (``name``) alone. ``limit`` when none can stop below it; None when it cannot be
        known (a breakpoint without such a condition, a logpoint, a condition that reads values)."""
        conditions: list[_expr.Expression] = []
        for nid in node_ids:
            for bp_id in self._by_node.get(nid, ()):
                spec = self._breakpoints[bp_id].spec
                if spec.log_message or not spec.condition:
                    return None
                try:
                    cond = _expr.compile_expression(spec.condition)
                except ExpressionError:
                    return None
                if cond.names != {name}:
                    return None
                conditions.append(cond)
        current: list[np.int64] = [np.int64(0)]

        def resolve(_: str) -> np.int64:
            return current[0]

        for i in range(limit if conditions else 0):
            current[0] = np.int64(i)
            for cond in conditions:
                try:
                    if _expr.is_truthy(_expr.evaluate(cond, resolve)):
                        return i
                except GraphDapError:
                    return i  # the check there stops with the failure
        return limit

    def _where(self, node: Node, names: Iterable[str]) -> dict[str, Any]:
        """``module`` and ``layer`` for a condition at ``node`` that reads them (see :func:`.selection.where_names`),
        and the table's own :attr:`names` it reads."""
        wanted = set(names)
        out = {k: v for k, v in self.names.items() if k in wanted}
        if {MODULE_NAME, LAYER_NAME} & wanted:
            out.update(where_names(self.graph, node))
        return out

    def check(self, node: Node, ctx: BreakpointContext) -> tuple[list[int], str]:
        """Breakpoints that stop before ``node`` (logpoints log here and never stop); a note on failed conditions."""
        stopping: list[int] = []
        notes: list[str] = []
        trial: dict[str, Any] | None = None
        for bp_id in self._by_node.get(node.id, ()):
            spec = self._breakpoints[bp_id].spec
            if spec.condition:
                try:
                    cond = _expr.compile_expression(spec.condition)
                    names = {n for n in cond.names if self.graph.has_value(n)}
                    if trial is None and names & set(node.outputs):
                        trial = ctx.look_ahead(node)
                    # A condition over values this node cannot see yet (not computed) does not hold here.
                    if any(not ctx.is_available(n) and not (trial and n in trial) for n in names):
                        continue
                    extra = {**self._where(node, cond.names - names), **(trial or {})}
                    if not _expr.is_truthy(_expr.evaluate(cond, ctx.resolver(extra or None), base_dir=ctx.base_dir)):
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
                ctx.log(_expr.interpolate(spec.log_message, ctx.resolver(trial), base_dir=ctx.base_dir))
                continue
            stopping.append(bp_id)
        return stopping, "; ".join(notes)

    def log_only(self, node: Node, ctx: BreakpointContext) -> None:
        """Print ``node``'s logpoints, as a debugger prints a logpoint line it steps over."""
        if any(self._breakpoints[b].is_logpoint for b in self._by_node.get(node.id, ())):
            self.check(node, ctx)
