"""A quantized (or converted) model against its float model, group by group: what ``compare`` runs and prints.

:func:`compare_quantized` pairs the models (:mod:`.pairing`), groups their nodes (:mod:`.groups`),
measures each group's three errors (:mod:`.errors`) and every weight (:mod:`.weights`), and
optionally how much each group kept in float recovers (:mod:`.sensitivity`). The rule for
quantized models is an SQNR threshold (``snr<20`` by default): a group *fails* when its
accumulated error breaks it, and is where an error is *born* when its local error does; the
first divergence is the earliest group whose local error breaks the rule.
"""

from __future__ import annotations

import enum
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graph_dap.errors import CompareError
from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.graph import Graph
from graph_dap.runtime.inputs import Dims, InputsArg, resolve_inputs
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.tools.metrics import Condition, Metric, metric_number
from graph_dap.runtime.tools.quant.errors import Error, GroupErrors, evaluate_groups
from graph_dap.runtime.tools.quant.groups import make_groups
from graph_dap.runtime.tools.quant.pairing import Pairing, pair_models, read_pairing_file
from graph_dap.runtime.tools.quant.view import quant_format
from graph_dap.runtime.tools.quant.weights import WeightErrors, compare_weights
from graph_dap.runtime.tools.references import model_label

__all__ = ["DEFAULT_RULE", "GroupOrder", "QuantComparison", "compare_quantized", "order_models"]

DEFAULT_RULE = (Condition(Metric.SNR, "<", 20.0),)


class GroupOrder(enum.StrEnum):
    """How the table of groups is ordered (``--order``)."""

    LOCAL = "local"  # ranked by local error, worst first
    GRAPH = "graph"  # in graph order


def _fails(rule: Sequence[Condition], e: Error) -> bool:
    metrics = e.metrics()
    return any(c.metric in metrics and c.holds(metrics) for c in rule)


def _rank_key(e: Error) -> float:
    return -math.inf if math.isnan(e.snr) else e.snr


@dataclass(slots=True)
class QuantComparison:
    """Every group's errors, every weight's, the pairing, and (when asked) the sensitivity."""

    pairing: Pairing
    groups: list[GroupErrors]
    weights: list[WeightErrors]
    weights_skipped: list[str]
    rule: tuple[Condition, ...]
    run_label: str
    reference_label: str
    notes: list[str] = field(default_factory=list)
    memory: dict[str, int] = field(default_factory=dict)
    sensitivity: Any = None  # a Sensitivity (see .sensitivity), when asked for
    kernels: Any = None  # a KernelComparison (see .kernels), when asked for

    def failed(self, g: GroupErrors) -> bool:
        return _fails(self.rule, g.accumulated)

    def born(self, g: GroupErrors) -> bool:
        """Whether the group's own (local) error breaks the rule."""
        return _fails(self.rule, g.local)

    @property
    def ranked(self) -> list[GroupErrors]:
        """The groups by local error, worst (lowest SQNR) first."""
        return sorted(self.groups, key=lambda g: (_rank_key(g.local), g.group.index))

    @property
    def first_divergence(self) -> GroupErrors | None:
        """The earliest group, in the float model's run order, whose local error breaks the rule."""
        return next((g for g in self.groups if self.born(g)), None)

    @property
    def failures(self) -> int:
        return sum(1 for g in self.groups if self.failed(g))

    def rule_text(self) -> str:
        conds = " or ".join(str(c) for c in self.rule)
        return f"a group fails when its accumulated error has {conds}; its error is born there when its local error does"

    # -- reports -------------------------------------------------------------------

    def group_dict(self, g: GroupErrors, rank: int | None = None) -> dict[str, Any]:
        grp = g.group
        return {
            "index": grp.index,
            "rank": rank,
            "group": grp.name,
            "ops": grp.ops,
            "outputs": [p.float_name for p in grp.outputs],
            "quantized_values": [p.quant_name for p in grp.outputs],
            "float_nodes": [n.id for n in grp.float_nodes if not n.is_constant],
            "quant_nodes": [n.id for n in grp.quant_nodes if not n.is_constant],
            "nodes_to_exclude": grp.node_names(),
            "accumulated": g.accumulated.to_dict(),
            "local": g.local.to_dict(),
            "quant_only": None if g.quant_only is None else g.quant_only.to_dict(),
            "snr_drop": None if math.isnan(g.snr_drop) else g.snr_drop,
            "quantization": None if g.params is None else g.params.to_dict(),
            "clipped": g.clipped,
            "pass": not self.failed(g),
            "born_here": self.born(g),
            **grp.where(self.pairing),
        }

    def to_dict(self) -> dict[str, Any]:
        ranks = {g.group.index: i + 1 for i, g in enumerate(self.ranked)}
        first = self.first_divergence
        return {
            "run": self.run_label,
            "reference": self.reference_label,
            "rule": {"fail_if": [str(c) for c in self.rule], "text": self.rule_text()},
            "pairing": self.pairing.to_dict(),
            "groups": [self.group_dict(g, ranks[g.group.index]) for g in self.groups],
            "ranked": [g.group.index for g in self.ranked],
            "first_divergence": None if first is None else self.group_dict(first, ranks[first.group.index]),
            "compared": len(self.groups),
            "failed": self.failures,
            "weights": [w.to_dict() for w in self.weights],
            "weights_skipped": list(self.weights_skipped),
            "memory": dict(self.memory),
            "sensitivity": None if self.sensitivity is None else self.sensitivity.to_dict(),
            "kernels": None if self.kernels is None else self.kernels.to_dict(),
            "notes": list(self.notes),
        }

    def table_text(self, order: str = GroupOrder.LOCAL, limit: int = 0) -> str:
        """The groups as a table, in ``order``."""
        ranks = {g.group.index: i + 1 for i, g in enumerate(self.ranked)}
        rows = self.ranked if order == GroupOrder.LOCAL else list(self.groups)
        if limit:
            rows = rows[:limit]
        wheres = [_where(g.group.where(self.pairing)) for g in rows]
        show_where = any(wheres)
        head = ["rank", "group", "ops", "output", "quantization", "accum dB", "local dB", "qonly dB", "drop dB", "steps", "clip"]
        head += ["source"] if show_where else []
        lines = []
        for g, where in zip(rows, wheres):
            cells = [
                str(ranks[g.group.index]),
                g.group.name,
                g.group.ops,
                ",".join(p.float_name for p in g.group.outputs),
                g.params.describe() if g.params is not None else "float",
                _db(g.accumulated.snr),
                _db(g.local.snr),
                _db(g.quant_only.snr) if g.quant_only is not None else "-",
                _db(g.snr_drop) if not math.isnan(g.snr_drop) else "-",
                metric_number("max_abs", g.local.steps) if g.local.steps is not None else "-",
                f"{100 * g.clipped:.2f}%" if g.clipped else "-",
            ]
            cells += [where or "-"] if show_where else []
            verdict = "FAIL" if self.failed(g) else "pass"
            cells.append(verdict + (" (born here)" if self.born(g) else ""))
            lines.append(cells)
        head.append("result")
        widths = [min(max([len(head[i])] + [len(c[i]) for c in lines]), 44) for i in range(len(head) - 1)]
        left = {1, 2, 3, 4} | ({len(head) - 2} if show_where else set())

        def fmt(cells: list[str]) -> str:
            out = "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
            return out + "  " + cells[-1]

        return "\n".join([fmt(head)] + [fmt(c) for c in lines])

    def weights_text(self, limit: int = 10) -> str:
        """The weights, worst SQNR first."""
        if not self.weights:
            return "weights: none paired"
        ws = sorted(self.weights, key=lambda w: w.error.snr)
        lines = [f"weights: {len(ws)} compared, worst SQNR first (per tensor; worst channel or block; max error in steps; clipped)"]
        for w in ws[: limit or len(ws)]:
            part = f"worst {w.granularity} {w.worst_part} {_db(w.worst_part_snr)} dB" if w.worst_part >= 0 else ""
            steps = f", max {w.error.steps:.2f} steps" if w.error.steps is not None else ""
            clip = f", {100 * w.clipped:.2f}% clipped" if w.clipped else ""
            lines.append(f"  {w.float_name}: {_db(w.error.snr)} dB{', ' + part if part else ''}{steps}{clip}  ({w.quant_name})")
        if len(ws) > limit > 0:
            lines.append(f"  ... and {len(ws) - limit} more (--json)")
        lines += [f"  not compared: {s}" for s in self.weights_skipped]
        return "\n".join(lines)


def _db(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.2f}"


def _where(where: Mapping[str, Any]) -> str:
    from graph_dap.runtime.graph.source import base_name

    lines = ", ".join(f"{base_name(s['path'])}:{s['line']}" for s in where["source"])
    module = where["module"]
    return " ".join(x for x in (lines, None if module is None else module or "(model)") if x)


def order_models(a: Graph, b: Graph) -> tuple[Graph, Graph]:
    """(float, quantized) of two models, whichever order they were given in; one line when both are quantized.

    When neither is (a re-export, a converter's rewrite), ``b`` is the reference and ``a`` is compared with it."""
    fa, fb = quant_format(a), quant_format(b)
    if fa and fb:
        raise CompareError(
            f"both models are quantized ({model_label(a)}: {fa}, {model_label(b)}: {fb}); the reference must be the float model"
        )
    return (a, b) if fb else (b, a)


def compare_quantized(
    model: str | os.PathLike[str] | Graph,
    reference: str | os.PathLike[str] | Graph,
    inputs: InputsArg = None,
    *,
    dims: Dims | None = None,
    providers: Sequence[str] | None = None,
    rule: Sequence[Condition] = DEFAULT_RULE,
    pairs_file: str | os.PathLike[str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    budget_bytes: int = 1 << 30,
) -> QuantComparison:
    """Compare a quantized model with its float model group by group (either may be ``model``).

    Each model runs whole when the values its groups need fit ``budget_bytes``, else node by node."""
    a = model if isinstance(model, Graph) else load_graph(model)
    b = reference if isinstance(reference, Graph) else load_graph(reference)
    float_graph, quant_graph = order_models(a, b)
    user = read_pairing_file(pairs_file) if pairs_file else None
    pairing = pair_models(float_graph, quant_graph, user)
    groups = make_groups(pairing)
    if not groups:
        raise CompareError(f"no tensor of {model_label(quant_graph)} could be paired with one of {model_label(float_graph)}")
    feeds = resolve_inputs(float_graph, inputs, dims)
    float_runner, quant_runner = NodeRunner(float_graph, providers), NodeRunner(pairing.quant_view.graph, providers)
    errors, memory = evaluate_groups(pairing, groups, feeds, float_runner, quant_runner, on_progress, budget_bytes=budget_bytes)
    weights, skipped = compare_weights(pairing)
    fmt = quant_format(quant_graph)
    notes = [pairing.summary()]
    return QuantComparison(
        pairing,
        errors,
        weights,
        skipped,
        tuple(rule) or DEFAULT_RULE,
        f"{model_label(quant_graph)} ({fmt or 'float'}) node by node on {', '.join(quant_runner.providers)}",
        f"{model_label(float_graph)} (the reference) node by node",
        notes,
        memory,
    )
