"""A quantized model's groups over a data set: ``scan QUANT.onnx --reference model:FLOAT.onnx``.

Each worker pairs the models, groups their nodes and builds their sessions once (:class:`GroupsPerInput`); for each input
it measures every group's accumulated and local error and keeps their energies (a few numbers per
group), which :func:`aggregate` adds up over the inputs into one SQNR per group (as qdq_loss_debug
does over its batches), with the input where each group does worst.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from graph_dap.runtime.engine.nodes import NodeRunner
from graph_dap.runtime.graph import Graph
from graph_dap.runtime.loading import load_graph
from graph_dap.runtime.tools.quant.analysis import DEFAULT_RULE, order_models
from graph_dap.runtime.tools.quant.errors import GroupErrors, evaluate_groups
from graph_dap.runtime.tools.quant.groups import make_groups
from graph_dap.runtime.tools.quant.pairing import pair_models
from graph_dap.runtime.tools.quant.stream import Sessions
from graph_dap.runtime.tools.quant.view import quant_format

__all__ = ["GroupsPerInput", "aggregate", "applies"]


def applies(graph: Graph, reference_path: Path) -> bool:
    """Whether a scan of ``graph`` against the model at ``reference_path`` compares a quantized model with its float one."""
    return bool(quant_format(graph)) != bool(quant_format(load_graph(reference_path)))


class GroupsPerInput:
    """The pairing, groups and sessions of a quantized model and its float model, made once; each input's group errors."""

    def __init__(self, graph: Graph, reference_path: Path, providers: Sequence[str] | None = None) -> None:
        self.float_graph, self.quant_graph = order_models(graph, load_graph(reference_path))
        self.pairing = pair_models(self.float_graph, self.quant_graph)
        self.groups = make_groups(self.pairing)
        self.float_runner = NodeRunner(self.float_graph, providers)
        self.quant_runner = NodeRunner(self.pairing.quant_view.graph, providers)  # with its recomputing nodes, if any
        self.names = [g.name for g in self.groups]
        self.sessions = Sessions()  # the whole runs' and the local batches' (the same models for each input)

    def measure(self, feeds: Mapping[str, Any]) -> tuple[dict[str, Any], GroupErrors | None]:
        """This input's energies per group (for :func:`aggregate`), and its first group whose local error breaks snr<20."""
        errors, _ = evaluate_groups(self.pairing, self.groups, feeds, self.float_runner, self.quant_runner, sessions=self.sessions)
        rows = [[e.accumulated.signal, e.accumulated.noise, e.local.signal, e.local.noise, e.accumulated.max_abs] for e in errors]
        rule = DEFAULT_RULE[0]
        born = next((e for e in errors if rule.holds(e.local.metrics())), None)
        return {"names": self.names, "energies": rows}, born


def _snr(signal: float, noise: float) -> float:
    if noise == 0:
        return math.inf
    return -math.inf if signal == 0 else 10 * math.log10(signal / noise)


def aggregate(per_input: Iterable[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Each group's SQNR over every input (energies added), its worst input; ranked by local SQNR, worst first."""
    names: list[str] = []
    sums: list[list[float]] = []
    worst: list[tuple[float, str]] = []
    inputs = 0
    for ident, d in per_input:
        rows = d.get("energies") or []
        if not names:
            names = list(d.get("names") or [])
            sums = [[0.0, 0.0, 0.0, 0.0] for _ in names]
            worst = [(math.inf, "") for _ in names]
        if len(rows) != len(names):
            continue
        inputs += 1
        for i, (acc_s, acc_n, loc_s, loc_n, _) in enumerate(rows):
            for k, v in enumerate((acc_s, acc_n, loc_s, loc_n)):
                sums[i][k] += float(v)
            snr = _snr(float(acc_s), float(acc_n))
            if snr < worst[i][0]:
                worst[i] = (snr, ident)
    out: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        acc, loc = _snr(sums[i][0], sums[i][1]), _snr(sums[i][2], sums[i][3])
        out.append(
            {
                "index": i,
                "group": name,
                "inputs": inputs,
                "accumulated_snr": _json(acc),
                "local_snr": _json(loc),
                "worst_input": worst[i][1],
                "worst_input_snr": _json(worst[i][0]),
            }
        )
    out.sort(key=lambda g: (_key(g["local_snr"]), g["index"]))
    return out


def _json(v: float) -> float | str:
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def _key(v: float | str) -> float:
    if isinstance(v, str):
        return {"-inf": -math.inf, "inf": math.inf}.get(v, -math.inf)
    return v
