"""Overlays of the graph view: the per-node numbers in the JSON the tools write, keyed by node id.

``graph-dap compare --json`` (each node's worst value of every metric; the first divergence and
the origins marked), ``graph-dap profile --json`` (each node's time and share; a node the
optimizer fused is shared among the nodes it was made from) and a scan's ``scan.json`` (how many
inputs first went wrong at each node). The renderer colours the nodes by one metric with a
legend (``vscode-ext/src/graphview/overlay.ts``); the shape of an overlay is ``Overlay`` in
``vscode-ext/src/graphview/doc.ts``.
"""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path
from typing import Any

from graph_dap.errors import OverlayError
from graph_dap.files import path_problem
from graph_dap.runtime.graph import Graph
from graph_dap.runtime.tools.metrics import Metric

Number = float | str | None


class Worse(enum.StrEnum):
    """Which way a metric gets worse (the page colours by it)."""

    HIGH = "high"
    LOW = "low"


#: compare's metrics: label, which way is worse, log scale. A metric not listed here (the quantization
#: tools add their own) is shown by its name, larger being worse.
_COMPARE_METRICS: dict[str, tuple[str, Worse, bool]] = {
    Metric.SNR: ("SQNR (dB)", Worse.LOW, False),
    Metric.COSINE: ("cosine similarity", Worse.LOW, False),
    Metric.MAX_ABS: ("max |run - reference|", Worse.HIGH, True),
    Metric.MAX_REL: ("max relative error", Worse.HIGH, True),
    Metric.MSE: ("mean squared error", Worse.HIGH, True),
}


def _metric(key: str, label: str, worse: Worse, log: bool) -> dict[str, Any]:
    return {"key": key, "label": label, "worse": worse, "log": log}


def _as_number(v: Any) -> Number:
    """A metric as JSON keeps it: numbers, and ``"inf"``/``"-inf"``/``"nan"`` for what JSON cannot hold."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return float(v)
    if isinstance(v, str) and v in ("inf", "-inf", "nan"):
        return v
    return None


def _rank(v: Number, worse: Worse) -> float:
    """How bad a value is, for keeping a node's worst (NaN worst of all)."""
    if v is None or v == "nan":
        return math.inf
    x = float(v)
    return x if worse is Worse.HIGH else -x


def _compare(doc: dict[str, Any], graph: Graph) -> tuple[dict[str, Any], int]:
    keys = [str(k) for k in doc.get("metric_names") or []]
    for row in doc.get("rows") or []:
        for k in (row.get("metrics") or {}):
            if k not in keys:
                keys.append(str(k))
    metrics = [_metric(k, *_COMPARE_METRICS.get(k, (k, Worse.HIGH, False))) for k in keys]
    worse = {m["key"]: m["worse"] for m in metrics}
    values: dict[str, dict[str, Number]] = {}
    marks: dict[str, str] = {}
    unmatched = 0
    for row in doc.get("rows") or []:
        node = (row.get("node") or {}).get("id")
        if not node:
            continue
        if not graph.has_node(node):
            unmatched += 1
            continue
        mine = values.setdefault(node, {})
        for k, raw in (row.get("metrics") or {}).items():
            v = _as_number(raw)
            if v is not None and (k not in mine or _rank(v, worse.get(k, Worse.HIGH)) > _rank(mine[k], worse.get(k, Worse.HIGH))):
                mine[k] = v
        if row.get("origin"):
            marks[node] = f"a divergence starts here ({row.get('value')})"
    first = ((doc.get("first_divergence") or {}).get("node") or {}).get("id")
    if first and graph.has_node(first):
        marks[first] = "the first divergence"
    default = Metric.SNR if Metric.SNR in keys else (keys[0] if keys else "")
    return {"metrics": metrics, "values": values, "marks": marks, "markLabel": "where a divergence starts", "default": default}, unmatched


def _profile(doc: dict[str, Any], graph: Graph) -> tuple[dict[str, Any], int]:
    by_index = {n.index: n.id for n in graph.nodes}
    by_name = {n.name: n.id for n in graph.all_nodes() if n.name}
    values: dict[str, dict[str, Number]] = {}
    unmatched = 0

    def add(node: str, time_ms: float, share: float) -> None:
        mine = values.setdefault(node, {"time_ms": 0.0, "share": 0.0})
        mine["time_ms"] = float(mine["time_ms"] or 0.0) + time_ms
        mine["share"] = float(mine["share"] or 0.0) + share

    for row in doc.get("nodes") or []:
        time_ms, share = float(row.get("time_ms") or 0.0), float(row.get("share") or 0.0)
        index = row.get("index")
        node = by_index.get(index) if isinstance(index, int) else None
        node = node or by_name.get(str(row.get("name") or "")) or (row.get("name") if graph.has_node(str(row.get("name") or "")) else None)
        if node is not None:
            add(node, time_ms, share)
            continue
        origins = [by_name.get(o) or (o if graph.has_node(o) else None) for o in row.get("from") or []]
        found = [o for o in origins if o]
        if not found:
            unmatched += 1
            continue
        for o in found:  # a fused node's time, shared among the nodes it was made from
            add(o, time_ms / len(found), share / len(found))
    slowest = max(values, key=lambda k: float(values[k]["time_ms"] or 0.0), default=None)
    marks = {slowest: "the slowest node"} if slowest else {}
    metrics = [_metric("time_ms", "time (ms)", Worse.HIGH, True), _metric("share", "share of the run's time", Worse.HIGH, False)]
    return {"metrics": metrics, "values": values, "marks": marks, "markLabel": "the slowest node", "default": "time_ms"}, unmatched


def _scan(doc: dict[str, Any], graph: Graph) -> tuple[dict[str, Any], int]:
    values: dict[str, dict[str, Number]] = {}
    marks: dict[str, str] = {}
    unmatched = 0
    for row in doc.get("first_bad_nodes") or []:
        node = str(row.get("node") or "")
        if not graph.has_node(node):
            unmatched += 1
            continue
        count = int(row.get("count") or 0)
        values[node] = {"count": float(count)}
        statuses = ", ".join(f"{k} {v}" for k, v in (row.get("statuses") or {}).items())
        marks[node] = f"first bad node of {count} input{'s' if count != 1 else ''}" + (f" ({statuses})" if statuses else "")
    metrics = [_metric("count", "inputs that first go wrong here", Worse.HIGH, False)]
    return {"metrics": metrics, "values": values, "marks": marks, "markLabel": "a first bad node", "default": "count"}, unmatched


def overlay_from(doc: Any, graph: Graph, source: str) -> dict[str, Any]:
    """The overlay of a tool's JSON document on ``graph`` (see the module's docstring)."""
    if not isinstance(doc, dict):
        raise OverlayError(f"{source}: expected a JSON object (compare --json, profile --json or scan.json)")
    if doc.get("format") == "graph-dap-scan":
        kind, (body, unmatched), title = "scan", _scan(doc, graph), "scan: first bad nodes"
    elif "rows" in doc and "first_divergence" in doc:
        kind, (body, unmatched), title = "compare", _compare(doc, graph), f"compare: {doc.get('run', '')} vs {doc.get('reference', '')}".strip()
    elif "nodes" in doc and "total_ms" in doc:
        kind, (body, unmatched), title = "profile", _profile(doc, graph), f"profile: {doc.get('total_ms')} ms a run"
    else:
        raise OverlayError(f"{source}: not the JSON of graph-dap compare --json, profile --json or a scan's scan.json")
    if not body["values"]:
        raise OverlayError(f"{source}: none of its {kind} nodes is a node of this model ({unmatched} not found)")
    return {"kind": kind, "title": title, "source": source, "unmatched": unmatched, **body}


def read_overlay(path: str | Path, graph: Graph) -> dict[str, Any]:
    """The overlay in the file ``path``; :class:`OverlayError` when it cannot be read or is not a tool's JSON."""
    problem = path_problem(path)
    if problem is not None:
        raise OverlayError(f"{path}: {problem}")
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise OverlayError(f"{path}: not a JSON file ({error})") from None
    return overlay_from(doc, graph, Path(path).name)
