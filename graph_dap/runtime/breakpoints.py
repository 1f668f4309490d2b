"""Breakpoint specifications and how they resolve to nodes.

A spec names a node id, a value (it stops at the value's producer), an op type
(``op:Conv``) or a glob over node ids (``*attn*``). Where a name is both a node
id and a value, the node id wins.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from graph_dap.errors import BreakpointError
from graph_dap.runtime.graph import Graph, Node

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
    """Node ids ``spec`` stops before, among ``stoppable``; and a message when none."""
    text = spec.strip()
    if not text:
        raise BreakpointError("empty breakpoint; expected a node id, a value name, op:TYPE or a glob like *attn*")
    if graph.has_node(text):
        return _only_stoppable([graph.node(text)], stoppable, text)
    if text.startswith("op:"):
        op = text[3:].strip()
        nodes = [n for n in graph.nodes if n.op_type == op or f"{n.domain}.{n.op_type}" == op]
        if not nodes:
            ops = sorted({n.op_type for n in graph.nodes})
            return (), f"no node has op type '{op}' (this graph has: {', '.join(ops)})"
        return _only_stoppable(nodes, stoppable, text)
    producer = graph.producer(text)
    if producer is not None:
        return _only_stoppable([producer], stoppable, text)
    if graph.has_value(text):
        return (), f"'{text}' is a graph input or initializer: no node produces it"
    if _GLOB_CHARS.search(text):
        nodes = [n for n in graph.nodes if fnmatch.fnmatchcase(n.id, text)]
        if not nodes:
            return (), f"no node id matches '{text}'"
        return _only_stoppable(nodes, stoppable, text)
    return (), f"no node, value or op type matches '{text}' (expected a node id, a value name, op:TYPE or a glob)"


def _only_stoppable(nodes: list[Node], stoppable: set[str], text: str) -> tuple[tuple[str, ...], str]:
    ids = tuple(n.id for n in nodes if n.id in stoppable)
    if ids:
        return ids, ""
    return (), f"'{text}' matches only constant nodes, which are computed once at load; launch with skipConstants off to stop at them"
