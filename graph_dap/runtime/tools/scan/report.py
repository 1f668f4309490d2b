"""``DIR/report.html``: one self-contained page about a scan (no network, no files beside it).

The page embeds the scan's data as JSON and draws, with a little inline script into
SVG: the first bad nodes as a bar chart, a statistic per input (an output's
mean/min/max/std, the run time, the metric against a reference), and the failures as a
table, each with its ``graph-dap`` command and a VS Code launch configuration.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graph_dap.files import write_text_atomic
from graph_dap.runtime.tools.scan.report_page import page
from graph_dap.runtime.tools.scan.results import ScanStatus

MAX_POINTS = 20000  # inputs plotted (every failing one, and the rest evenly sampled)
MAX_FAILURES = 2000  # rows of the failures table
_STATS = ("mean", "min", "max", "std")


def report_data(scan: Mapping[str, Any]) -> dict[str, Any]:
    """What the page shows, from a scan's results (as ``scan.json`` holds them)."""
    results = list(scan.get("results", []))
    failing = [r for r in results if r["status"] != ScanStatus.CLEAN]
    keep = _sampled(results, MAX_POINTS)
    outputs: list[str] = []
    for r in keep:
        for name in r.get("outputs") or {}:
            if name not in outputs:
                outputs.append(name)
    stats: dict[str, list[Any]] = {}
    for name in outputs:
        for s in _STATS:
            stats[f"{name} {s}"] = [_number(((r.get("outputs") or {}).get(name) or {}).get(s)) for r in keep]
    options = scan.get("options", {})
    metric = options.get("metric") if options.get("reference") else None
    series: dict[str, Any] = {
        "index": [r["index"] for r in keep],
        "id": [r["id"] for r in keep],
        "status": [r["status"] for r in keep],
        "values": {**stats, "run time (s)": [r.get("seconds") for r in keep]},
    }
    if metric:
        series["values"][f"{metric} vs reference (worst output)"] = [
            _number(((r.get("comparison") or {}).get("worst_metrics") or {}).get(metric)) for r in keep
        ]
    return {
        "title": Path(scan.get("model", {}).get("path", "model")).name,
        "model": scan.get("model", {}),
        "source": scan.get("source", {}),
        "options": options,
        "backend": scan.get("backend", {}),
        "counts": scan.get("counts", {}),
        "done": scan.get("done", len(results)),
        "failed": scan.get("failed", len(failing)),
        "seconds": scan.get("seconds"),
        "finished": scan.get("finished", False),
        "started": scan.get("started"),
        "updated": scan.get("updated"),
        "first_bad_nodes": scan.get("first_bad_nodes", []),
        "slowest": scan.get("slowest", []),
        "worst": scan.get("worst", []),
        "incidents": scan.get("incidents", []),
        "series": series,
        "plotted": len(keep),
        "failures": failing[:MAX_FAILURES],
        "failures_left_out": max(0, len(failing) - MAX_FAILURES),
    }


def _sampled(results: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    if len(results) <= limit:
        return results
    failing = [r for r in results if r["status"] != ScanStatus.CLEAN][:limit]
    room = limit - len(failing)
    clean = [r for r in results if r["status"] == ScanStatus.CLEAN]
    step = max(1, len(clean) // max(room, 1))
    return sorted(failing + clean[::step][:room], key=lambda r: r["index"])


def _number(v: Any) -> float | str | None:
    """A statistic for the plot: numbers as they are, "nan"/"inf" kept as strings (the page skips them)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    return v if isinstance(v, str) else None


def render_report(scan: Mapping[str, Any]) -> str:
    """The page, as text."""
    data = report_data(scan)
    embedded = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return page(html.escape(f"graph-dap scan: {data['title']}"), embedded)


def write_report(scan: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write the page for ``scan`` to ``path`` (atomically)."""
    target = Path(path)
    write_text_atomic(target, render_report(scan))
    return target
