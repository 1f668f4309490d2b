"""Comparing a run with a reference value by value, while it executes, and naming where they part ways.

Both sides advance in lockstep over the model's nodes in run order; each side's
values are dropped as soon as they are compared (or no later node needs them),
so memory stays bounded. The reference is a :class:`~.references.Source`
(a dump, another provider, another model, the optimized model: see
:mod:`.references`); each value is judged by a :class:`~.metrics.Tolerance`
(see :mod:`.metrics`). Every public name of both is importable from here too.

The *first divergence* is the earliest node, in run order, whose outputs break
the tolerance while all of its compared inputs are within it: the origin of a
difference, not its propagation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from graph_dap import log as _log
from graph_dap.kinds import OptLevel
from graph_dap.runtime.engine.options import check_opt_level
from graph_dap.runtime.graph import Graph, Node
from graph_dap.runtime.graph.source import base_name, source_fields
from graph_dap.runtime.inputs import Dims, InputsArg, resolve_inputs
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.stops import node_ref
from graph_dap.runtime.tensor import element_type
from graph_dap.runtime.tools.dump import model_hash
from graph_dap.runtime.tools.metrics import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    METRICS,
    ArrayComparison,
    CompareError,
    Condition,
    Tolerance,
    compare_arrays,
    json_number,
    metric_number,
    shape_text,
    worst_of,
)
from graph_dap.runtime.tools.references import (
    DumpSource,
    ModelSource,
    OptimizedSource,
    Reference,
    ReferenceKind,
    RunnerSource,
    Source,
    computed_names,
    make_source,
    model_label,
    parse_reference,
)

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "METRICS",
    "ArrayComparison",
    "CompareError",
    "CompareResult",
    "Comparison",
    "Condition",
    "DumpSource",
    "ModelSource",
    "OptimizedSource",
    "Reference",
    "Row",
    "RunnerSource",
    "Source",
    "Tolerance",
    "Verdict",
    "compare_arrays",
    "compare_model",
    "dump_reference",
    "make_source",
    "parse_reference",
    "run_label",
    "source_notes",
]

_log_ = _log.get_logger(__name__)
_ALLCLOSE = Tolerance()  # the default rule: numpy.allclose at DEFAULT_ATOL, DEFAULT_RTOL


# -- the comparison ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    """One compared value."""

    node: Node
    value: str
    shape: tuple[int, ...] | None
    dtype: str
    passed: bool
    metrics: dict[str, float]
    mismatches: int
    origin: bool = False  # this node is where a difference starts: it fails, its compared inputs pass
    note: str = ""

    def describe(self, metrics: Sequence[str] = METRICS) -> str:
        """``max_abs=0.01 max_rel=1.6 ...`` (or why there are no metrics)."""
        return _metrics_text(self, metrics)

    def to_dict(self, metrics: Sequence[str] = METRICS) -> dict[str, Any]:
        n = self.node
        return {
            "index": n.index,
            "order": n.order,
            "node": node_ref(n),
            "value": self.value,
            "shape": None if self.shape is None else list(self.shape),
            "dtype": self.dtype,
            "metrics": _json_metrics(self.metrics, metrics),
            "mismatches": self.mismatches,
            "pass": self.passed,
            "origin": self.origin,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :meth:`Comparison.observe` found at one node."""

    node: Node
    rows: tuple[Row, ...]
    failed: bool
    origin: bool  # the node's outputs fail while its compared inputs pass
    first: bool  # and no earlier node (in run order) has been found to be an origin

    @property
    def message(self) -> str:
        bad = next((r for r in self.rows if not r.passed), None)
        if bad is None:
            return f"{self.node.label}: {len(self.rows)} value(s) within tolerance"
        what = "first divergence" if self.first else "divergence" if self.origin else "propagated difference"
        return f"{what} at {self.node.label}: '{bad.value}' {_metrics_text(bad)}"


def _metrics_text(row: Row, metrics: Sequence[str] = METRICS) -> str:
    if not row.metrics:
        return row.note or "differs"
    parts = [f"{k}={metric_number(k, row.metrics[k])}" for k in metrics if k in row.metrics]
    return " ".join(parts) + (f" ({row.note})" if row.note else "")


def _json_metrics(values: Mapping[str, float], names: Sequence[str]) -> dict[str, float | str]:
    return {k: json_number(values[k]) for k in names if k in values}


class Comparison:
    """Compares the values of a run, node by node, with a reference :class:`Source`.

    Call :meth:`observe` after each node runs (in any order: a debugger may step
    back or restart; a later observation of a value replaces the earlier one).
    """

    def __init__(
        self,
        graph: Graph,
        reference: Source,
        tolerance: Tolerance = _ALLCLOSE,
        metrics: Sequence[str] = METRICS,
        run_label: str = "",
    ) -> None:
        bad = [m for m in metrics if m not in METRICS]
        if bad:
            raise CompareError(f"unknown metric '{bad[0]}'; expected any of {', '.join(METRICS)}")
        self.graph = graph
        self.reference = reference
        self.tolerance = tolerance
        self.metrics = tuple(metrics) or METRICS
        self.run_label = run_label
        self.notes: list[str] = []
        self.input_mismatches: list[str] = []
        self._rows: dict[str, Row] = {}
        self._status: dict[str, bool] = {}
        self._origins: dict[int, Node] = {}
        self.chosen: Callable[[str, Node], bool] = lambda name, node: True  # the rows shown (all nodes compared)

    def reset(self) -> None:
        """Forget every observation (a restarted run)."""
        self._rows.clear()
        self._status.clear()
        self._origins.clear()
        self.input_mismatches.clear()

    def check_inputs(self, inputs: Mapping[str, Any]) -> list[str]:
        """Compare the graph inputs with those the reference ran with; the names that differ."""
        ref = self.reference.input_values()
        self.input_mismatches = []
        for name, value in inputs.items():
            if name in ref:
                ok = compare_arrays(value, ref[name], Tolerance(0.0, 0.0)).passed
                self._status[name] = ok
                if not ok:
                    self.input_mismatches.append(name)
        if self.input_mismatches:
            self.notes.append(
                f"the reference ran with other inputs ({', '.join(self.input_mismatches)}): "
                "differences start there, so no node is named as the first divergence"
            )
        return list(self.input_mismatches)

    def observe(self, node: Node, outputs: Mapping[str, Any]) -> Verdict:
        """Compare ``node``'s outputs (as the run computed them) with the reference's."""
        ref = self.reference.outputs(node)
        compared: list[tuple[str, Any, ArrayComparison]] = []
        for name in node.outputs:
            if not name or name not in outputs or name not in ref:
                continue
            result = compare_arrays(outputs[name], ref[name], self.tolerance)
            compared.append((name, outputs[name], result))
        failed = any(not r.passed for _, _, r in compared)
        inputs_ok = all(self._status.get(i, True) for i in node.all_inputs)
        origin = failed and inputs_ok
        if origin:
            self._origins[node.order] = node
        else:
            self._origins.pop(node.order, None)
        first = origin and min(self._origins) == node.order
        rows = []
        for name, value, r in compared:
            shape = None if value is None or isinstance(value, (list, dict)) else tuple(np.shape(value))
            dtype = element_type(value)
            row = Row(node, name, shape, dtype, r.passed, r.metrics, r.mismatches, origin and not r.passed, r.note)
            self._rows[name] = row
            self._status[name] = r.passed
            rows.append(row)
        if rows and _log_.level >= _log.DEBUG:
            _log_.debug("%s: %s", node.id, "; ".join(f"{r.value} {'pass' if r.passed else 'FAIL'}" for r in rows))
        return Verdict(node, tuple(rows), failed, origin, first)

    @property
    def rows(self) -> list[Row]:
        """Every compared value, in run order."""
        pos = {n.order: {o: i for i, o in enumerate(n.outputs)} for n in self.graph.nodes}
        chosen = [r for r in self._rows.values() if self.chosen(r.value, r.node)]
        return sorted(chosen, key=lambda r: (r.node.order, pos[r.node.order].get(r.value, 0)))

    @property
    def first_divergence(self) -> Row | None:
        """The first failing value of the earliest origin node, or None."""
        if not self._origins:
            return None
        order = min(self._origins)
        return next((r for r in self._rows.values() if r.node.order == order and not r.passed), None)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.rows if not r.passed)

    def matching(self, run_names: set[str]) -> dict[str, int]:
        """How many values the two sides share by name, and how many each has alone."""
        ref_names = self.reference.value_names() - set(self.graph.input_names) - set(self.graph.initializer_names)
        return {
            "matched": len(run_names & ref_names),
            "unmatched_run": len(run_names - ref_names),
            "unmatched_reference": len(ref_names - run_names),
        }

    def to_dict(self, run_names: set[str] | None = None) -> dict[str, Any]:
        """The table, as the CLI's ``--json`` prints it and a debug adapter returns it."""
        first = self.first_divergence
        names = run_names if run_names is not None else computed_names(self.graph)
        sources = self.graph.sources
        return {
            "rows": [{**r.to_dict(self.metrics), **source_fields(sources, [r.node.id])} for r in self.rows],
            "first_divergence": None
            if first is None
            else {
                "node": node_ref(first.node),
                "value": first.value,
                "metrics": _json_metrics(first.metrics, self.metrics),
                "note": first.note,
                **source_fields(sources, [first.node.id]),
            },
            "compared": len(self.rows),
            "failed": self.failed,
            **self.matching(names),
            "input_mismatches": list(self.input_mismatches),
            "run": self.run_label,
            "reference": self.reference.label,
            "tolerance": {**self.tolerance.to_dict(), "rule": self.tolerance.describe()},
            "metric_names": list(self.metrics),
            "notes": list(self.notes),
        }

    def by_module(self) -> list[dict[str, Any]]:
        """The rows aggregated per module (a node's innermost module scope), in order of each module's first row.

        Each: the module, how many values and how many failed, the worst of each metric (largest
        error, lowest cosine and SNR), and the first failing node, where a module first goes wrong.
        """
        sources = self.graph.sources
        groups: dict[str | None, list[Row]] = {}
        for r in self.rows:
            source = sources.of(r.node)
            groups.setdefault(source.module_path if source is not None else None, []).append(r)
        out = []
        for module, rows in groups.items():
            worst: dict[str, float] = {}
            for m in self.metrics:
                got = [r.metrics[m] for r in rows if m in r.metrics]
                if got:
                    worst[m] = worst_of(m, got)
            failing = next((r for r in rows if not r.passed), None)
            out.append(
                {
                    "module": module,
                    "values": len(rows),
                    "failed": sum(1 for r in rows if not r.passed),
                    "metrics": _json_metrics(worst, self.metrics),
                    "first_failure": None if failing is None else {"node": node_ref(failing.node), "value": failing.value},
                }
            )
        return out

    def module_text(self) -> str:
        """:meth:`by_module` as a table."""
        head = ["module", "values", "failed", *self.metrics, "first failure"]
        lines = []
        for m in self.by_module():
            name = "(no module)" if m["module"] is None else m["module"] or "(model)"
            first = m["first_failure"]
            cells = [name, str(m["values"]), str(m["failed"])]
            cells += [metric_number(k, float(m["metrics"][k])) if k in m["metrics"] else "-" for k in self.metrics]
            cells.append(f"{first['node']['id']} '{first['value']}'" if first else "-")
            lines.append(cells)
        widths = [min(max([len(head[i])] + [len(c[i]) for c in lines]), 40) for i in range(len(head) - 1)]
        return "\n".join(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))) + "  " + cells[-1]
            for cells in [head] + lines
        )

    def table_text(self, only_failed: bool = False) -> str:
        """The table as text: index, node, op type, value, shape, each metric, pass/fail.

        For a model whose nodes say where they came from, a column ``source`` before the result:
        the node's line of the model's Python source and its module (``tinymodel.py:18 blocks.0.attn``).
        """
        rows = [r for r in self.rows if not (only_failed and r.passed)]
        sources = self.graph.sources
        wheres = [_where_text(source_fields(sources, [r.node.id])) for r in rows]
        show_source = any(wheres)
        head = ["index", "node", "op", "value", "shape", *self.metrics, *(["source"] if show_source else []), "result"]
        lines = []
        for r, where in zip(rows, wheres):
            cells = [str(r.node.index), r.node.id, r.node.op_type, r.value, shape_text(r.shape) if r.shape is not None else "seq"]
            cells += [metric_number(m, r.metrics[m]) if m in r.metrics else "-" for m in self.metrics]
            if show_source:
                cells.append(where or "-")
            cells.append(("FAIL (origin)" if r.origin else "fail") if not r.passed else "pass")
            if r.note:
                cells[-1] += f"  {r.note}"
            lines.append(cells)
        widths = [min(max([len(head[i])] + [len(c[i]) for c in lines]), 40) for i in range(len(head) - 1)]
        left = {1, 2, 3, 4} | ({len(head) - 2} if show_source else set())

        def fmt(cells: list[str]) -> str:
            return (
                "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
                + "  "
                + cells[-1]
            )

        return "\n".join([fmt(head)] + [fmt(c) for c in lines])


def _where_text(where: Mapping[str, Any]) -> str:
    """``tinymodel.py:18 blocks.0.attn``: a node's user line(s) and module, as :func:`source_fields` gives them; '' when unknown."""
    lines = ", ".join(f"{base_name(s['path'])}:{s['line']}" for s in where["source"])
    module = where["module"]
    return " ".join(x for x in (lines, None if module is None else module or "(model)") if x)


# -- the whole thing, as the CLI runs it ------------------------------------------


@dataclass(slots=True)
class CompareResult:
    """A finished comparison and what it ran."""

    comparison: Comparison
    run_names: set[str]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = self.comparison.to_dict(self.run_names)
        d["notes"] = d["notes"] + [n for n in self.notes if n not in d["notes"]]
        return d


def dump_reference(
    graph: Graph, path: str | os.PathLike[str], inputs: InputsArg = None
) -> tuple[DumpSource, InputsArg, list[str]]:
    """A dump as the reference: its source, the inputs to run with (the dump's when none are given), and notes.

    The notes say whose inputs the run uses and whether the dump came from another model file.
    """
    source = DumpSource(Path(path))
    notes: list[str] = []
    if inputs is None:
        inputs = source.dump.inputs_for(graph) or None
        if inputs:
            notes.append(f"inputs: the dump's ({', '.join(inputs)})")
    if source.dump.note:
        notes.append(source.dump.note)
    made_from = source.dump.meta.get("model", {}).get("hash")
    if made_from and made_from != model_hash(graph):
        notes.append("the dump was made from another model file (its hash differs): values are matched by name")
    return source, inputs, notes


def source_notes(reference: Source, run: Source | None = None) -> list[str]:
    """What limits the comparison: values matched by name across two models, values an optimizer fused away."""
    notes: list[str] = []
    if isinstance(reference, ModelSource):
        notes.append(
            f"values matched by name: {len(reference.wanted)} of this model's values have a counterpart in "
            f"{model_label(reference.graph)}"
        )
    if isinstance(run, OptimizedSource) or isinstance(reference, OptimizedSource):
        notes.append(
            "onnxruntime fuses nodes when it optimizes: values it fused away have no counterpart, so they are not compared"
        )
    return notes


def run_label(graph: Graph, providers: Sequence[str]) -> str:
    """How the table names a run of ``graph`` node by node on ``providers`` (as :class:`RunnerSource` names itself)."""
    return f"{model_label(graph)} node by node on {', '.join(providers)}"


def compare_model(
    model: str | os.PathLike[str] | onnx.ModelProto | Graph,
    reference: Reference | str | Mapping[str, Any],
    inputs: InputsArg = None,
    *,
    dims: Dims | None = None,
    providers: Sequence[str] | None = None,
    opt_level: str = OptLevel.NONE,
    tolerance: Tolerance = _ALLCLOSE,
    metrics: Sequence[str] = METRICS,
    base_dir: str | os.PathLike[str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> CompareResult:
    """Run ``model`` and ``reference`` in lockstep and compare every value they share.

    The run is node by node at ``opt_level`` "none" (the model's own values) or, at
    another level, the whole optimized model (only the names it keeps). With a dump
    reference and no ``inputs``, the dump's inputs are used.
    """
    graph = model if isinstance(model, Graph) else load_graph(model)
    ref = parse_reference(reference)
    check_opt_level(opt_level)
    if ref.kind is ReferenceKind.OPT_LEVEL and ref.target.lower() == opt_level:
        raise CompareError(f"both sides would run at optimization level '{opt_level}'; give the run another --opt-level")
    notes: list[str] = []
    dump_source: DumpSource | None = None
    if ref.kind is ReferenceKind.DUMP:
        dump_source, inputs, notes = dump_reference(graph, Path(base_dir or Path.cwd()) / ref.target, inputs)
    feeds = resolve_inputs(graph, inputs, dims)
    source: Source = (
        dump_source if dump_source is not None else make_source(graph, feeds, ref, base_dir=base_dir, providers=providers)
    )
    primary: Source = RunnerSource(graph, feeds, providers) if opt_level == OptLevel.NONE else OptimizedSource(graph, feeds, opt_level, providers)
    comparison = Comparison(graph, source, tolerance, metrics, run_label=primary.label)
    comparison.check_inputs(feeds)
    notes += source_notes(source, primary)
    run_names = primary.value_names()
    if not run_names & source.value_names():
        raise CompareError(f"the run and the reference share no value name ({primary.label} vs {source.label})")
    try:
        total = len(graph.nodes)
        for node in graph.nodes:
            outs = primary.outputs(node)
            if outs or not isinstance(primary, OptimizedSource):
                comparison.observe(node, outs)
            if on_progress is not None:
                on_progress(node.order + 1, total)
    finally:
        primary.close()
        source.close()
    return CompareResult(comparison, run_names, notes)
