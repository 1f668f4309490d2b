"""A comparison that follows a debug session: each node that runs is compared with a reference as it runs.

:class:`Lockstep` owns a :class:`~graph_dap.runtime.tools.compare.Comparison` and drives a
:class:`~graph_dap.runtime.session.DebugSession` forward one node per ``continue_``
call (the fast engine's segments would hide the values inside them), observing every
node that ran, constants included. A continue can then stop at a divergence (a
:class:`~graph_dap.runtime.stops.Stop` with reason ``MISMATCH``): a node whose outputs
break the tolerance while its inputs are within it. Breakpoints, the NaN/Inf filters
and pauses behave as in a plain continue.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.session import DebugSession, Stop, StopReason
from graph_dap.runtime.tools.compare import (
    Comparison,
    DumpSource,
    Reference,
    Source,
    Tolerance,
    Verdict,
    dump_reference,
    make_source,
    parse_reference,
    run_label,
    source_notes,
)
from graph_dap.runtime.tools.references import ReferenceKind

__all__ = ["Lockstep", "ReferenceSpec", "divergence"]

_FAULTS = (StopReason.NAN, StopReason.INF, StopReason.ERROR)


@dataclass(frozen=True, slots=True)
class ReferenceSpec:
    """What to compare against and how strictly, as a launch gives it."""

    reference: Reference
    tolerance: Tolerance
    base_dir: Path

    @classmethod
    def make(
        cls,
        reference: str | Mapping[str, Any],
        atol: float | None = None,
        rtol: float | None = None,
        fail_if: list[str] | None = None,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> ReferenceSpec:
        """Parse a reference (``run.npz``, ``provider:NAME``, ``opt_level:LEVEL``, ``model:OTHER.onnx``) and a tolerance."""
        return cls(parse_reference(reference), Tolerance.make(atol, rtol, fail_if or ()), Path(base_dir or Path.cwd()))

    def open_dump(self, graph: Graph, inputs: Any) -> tuple[DumpSource | None, Any, list[str]]:
        """For a dump reference: the dump, the inputs to run with (the dump's when none are given), notes."""
        if self.reference.kind is not ReferenceKind.DUMP:
            return None, inputs, []
        return dump_reference(graph, self.base_dir / self.reference.target, inputs)


def divergence(verdict: Verdict, reference: str, rule: str) -> Stop:
    """The ``mismatch`` stop after ``verdict.node`` ran: its outputs break the tolerance, its compared inputs are within it.

    ``tensor`` is its first failing value; ``details`` name the reference, the rule and each failing value.
    """
    failing = [r for r in verdict.rows if not r.passed]
    details = {"reference": reference, "tolerance": rule}
    for r in failing:
        details[f"'{r.value}'"] = f"{r.describe()} ({r.mismatches} elements out of tolerance)"
    return Stop(StopReason.MISMATCH, verdict.node, verdict.message, failing[0].value if failing else None, details)


class Lockstep:
    """The comparison of one session's run with a reference, kept as the session moves."""

    def __init__(
        self, session: DebugSession, spec: ReferenceSpec, dump: DumpSource | None = None, notes: Sequence[str] = ()
    ) -> None:
        self.session = session
        graph = session.graph
        providers = list(session.runner.providers)
        self.quant = _quantized_reference(session, spec, providers)
        self._born = _born_nodes(self.quant, graph) if self.quant is not None else {}
        source: Source = (
            dump
            if dump is not None
            else _NoValues(self.quant.reference_label)
            if self.quant is not None
            else make_source(graph, session.inputs, spec.reference, base_dir=spec.base_dir, providers=providers)
        )
        self.source = source
        try:
            self.comparison = Comparison(graph, source, spec.tolerance, run_label=run_label(graph, providers))
            self.comparison.notes += [*notes, *source_notes(source)]
            self.comparison.check_inputs(session.inputs)
        except BaseException:
            source.close()
            raise
        self._positions = {n.id: i for i, n in enumerate(session.sequence)}
        self._constants_seen = False

    # -- observing ---------------------------------------------------------------------

    def observe(self, node: Node) -> Verdict:
        """Compare the outputs ``node`` has now with the reference's."""
        s = self.session
        return self.comparison.observe(node, {o: s.value(o) for o in node.outputs if o and s.has_value(o)})

    def _observe_constants(self) -> Stop | None:
        """Once per timeline: start the session (computing the constants) and observe them."""
        if self._constants_seen:
            return None
        s = self.session
        first = s.start()
        if first.reason is StopReason.ERROR:
            return first
        if s.skip_constants:
            for node in s.graph.nodes:
                if node.is_constant:
                    self.observe(node)
        self._constants_seen = True
        return None

    def start(self) -> Stop:
        """The session's ``start``, with its constants observed."""
        return self._observe_constants() or self.session.start()

    def reset(self) -> None:
        """A restarted run: forget every observation."""
        self.comparison.reset()
        self.comparison.check_inputs(self.session.inputs)
        self.comparison.notes[:] = list(dict.fromkeys(self.comparison.notes))
        self._constants_seen = False

    def close(self) -> None:
        self.source.close()

    def _judge(self, node: Node, stop: Stop, stop_on_mismatch: bool) -> Stop:
        """After ``node`` ran and the run stopped at ``stop``: observe it; a divergence there replaces the stop.

        A NaN, Inf or error stop at that node stays as it is.
        """
        verdict = self.observe(node)
        if stop_on_mismatch and verdict.origin and stop.reason not in _FAULTS:
            return divergence(verdict, self.source.label, self.comparison.tolerance.describe())
        born = self._born.get(node.id)
        if stop_on_mismatch and born is not None and stop.reason not in _FAULTS:
            assert self.quant is not None
            value, g = born
            message = (
                f"error born in group {g.group.name} ({g.group.ops}): local SQNR {g.local.snr:.2f} dB, "
                f"accumulated {g.accumulated.snr:.2f} dB"
            )
            details = {
                "reference": self.quant.reference_label,
                "rule": self.quant.rule_text(),
                "group": g.group.name,
                "local SQNR dB": f"{g.local.snr:.2f}",
                "accumulated SQNR dB": f"{g.accumulated.snr:.2f}",
                "quantization-only SQNR dB": "-" if g.quant_only is None else f"{g.quant_only.snr:.2f}",
                "quantization": "float" if g.params is None else g.params.describe(),
            }
            return Stop(StopReason.MISMATCH, node, message, value, details)
        return stop

    # -- moving ------------------------------------------------------------------------

    def step(self, stop_on_mismatch: bool = True) -> Stop:
        """The session's ``step``, then the node that ran observed."""
        early = self._observe_constants()
        if early is not None:
            return early
        s = self.session
        node = s.current
        stop = s.step()
        if node is not None and s.current is not node:
            return self._judge(node, stop, stop_on_mismatch)
        return stop

    def continue_(
        self,
        *,
        check_first: bool = False,
        until: str | None = None,
        stop_on_mismatch: bool = True,
        paused: Callable[[], bool] = lambda: False,
    ) -> Stop:
        """Like ``DebugSession.continue_``, one node at a time; also stops at a divergence."""
        early = self._observe_constants()
        if early is not None:
            return early
        s = self.session
        seq = s.sequence
        check = check_first
        while True:
            node = s.current
            if node is None:
                return s.continue_(check_first=check)
            if check and until is not None and node.id == until:
                return Stop(StopReason.BREAKPOINT, node, f"reached {node.label}")
            pos = self._positions[node.id]
            after = seq[pos + 1].id if pos + 1 < len(seq) else None
            stop = s.continue_(until=after, check_first=check) if after else s.continue_(check_first=check)
            if s.current is not node:  # it ran
                judged = self._judge(node, stop, stop_on_mismatch)
                if judged is not stop:
                    return judged
            reached = stop.reason is StopReason.BREAKPOINT and not stop.breakpoint_ids and stop.node is not None
            if not (reached and after is not None and stop.node is not None and stop.node.id == after):
                return stop
            if paused():
                return Stop(StopReason.PAUSE, s.current, "paused")
            check = True

    # -- reporting ---------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The table, as ``graph-dap compare --json`` prints it."""
        if self.quant is not None:
            return dict(self.quant.to_dict())
        return self.comparison.to_dict()

    def summary(self) -> list[str]:
        """A few lines for the end of a run."""
        if self.quant is not None:
            q = self.quant
            first = q.first_divergence
            lines = [f"compared {len(q.groups)} groups with {q.reference_label}: {q.failures} break the rule ({q.rule_text()})"]
            if first is not None:
                lines.append(f"first divergence: group {first.group.name}, local SQNR {first.local.snr:.2f} dB")
            return lines + [f"note: {n}" for n in q.notes]
        c = self.comparison
        rows = c.rows
        lines = [
            f"compared {len(rows)} values with {self.source.label}: {c.failed} not within tolerance ({c.tolerance.describe()})"
        ]
        first = c.first_divergence
        if first is not None:
            lines.append(f"first divergence: {first.node.label}, value '{first.value}': {first.describe(c.metrics)}")
        elif c.failed:
            lines.append("first divergence: none found among the compared values (every failing node reads a failing input)")
        lines += [f"note: {n}" for n in c.notes]
        return lines


class _NoValues:
    """The reference of a quantized model's lockstep: its groups were measured up front, no value is compared by name."""

    def __init__(self, label: str) -> None:
        self.label = label

    def outputs(self, node: Node) -> Mapping[str, Any]:
        return {}

    def value_names(self) -> set[str]:
        return set()

    def input_values(self) -> Mapping[str, Any]:
        return {}

    def close(self) -> None:
        pass


def _quantized_reference(session: DebugSession, spec: ReferenceSpec, providers: list[str]) -> Any:
    """A model reference where one of the two models is quantized: its groups measured on the session's inputs
    (a QuantComparison), else None (the values are then compared by name)."""
    if spec.reference.kind is not ReferenceKind.MODEL:
        return None
    from graph_dap.runtime.loading import load_graph
    from graph_dap.runtime.tools.quant.analysis import DEFAULT_RULE, compare_quantized
    from graph_dap.runtime.tools.quant.view import quant_format

    other = load_graph(spec.base_dir / spec.reference.target)
    if bool(quant_format(session.graph)) == bool(quant_format(other)):
        return None
    rule = spec.tolerance.fail_if or DEFAULT_RULE
    return compare_quantized(session.graph, other, dict(session.inputs), providers=providers, rule=rule)


def _born_nodes(quant: Any, graph: Graph) -> dict[str, tuple[str, Any]]:
    """For each group whose local error breaks the rule: the node of ``graph`` that finishes it, and the value to show."""
    out: dict[str, tuple[str, Any]] = {}
    is_quant = graph is quant.pairing.source_graph or graph.path == quant.pairing.source_graph.path
    for g in quant.groups:
        if not quant.born(g):
            continue
        pair = g.group.outputs[0]
        if is_quant:
            node = graph.producer(pair.quant_name)
            value = pair.quant_name
        else:
            node = graph.producer(pair.float_name)
            value = pair.float_name
        if node is not None:
            out.setdefault(node.id, (value, g))
    return out
