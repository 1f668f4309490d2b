"""``compare --report DIR``: one self-contained HTML page of a quantized model against its float model.

The SQNR of each group in the float model's run order as a chart (accumulated as a line, local as
bars, the groups whose local error breaks the rule and the first divergence marked), the groups
ranked by local error, the weights, the sensitivity ranking. Drawn here as inline SVG and tables:
no script, nothing fetched; the data is embedded as JSON for tools.
"""

from __future__ import annotations

import html
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

from graph_dap.files import write_text_atomic
from graph_dap.runtime.tools.metrics import Metric

__all__ = ["report_html", "write_report"]

_W, _H, _PAD, _LABELS = 960, 300, 44, 90  # _LABELS: room under the chart for the groups' names


def _finite(v: float, cap: float) -> float:
    if math.isnan(v):
        return 0.0
    return max(0.0, min(cap, v))


def _chart(result: Any) -> str:
    groups = result.groups
    values = [g.accumulated.snr for g in groups] + [g.local.snr for g in groups]
    finite = [v for v in values if math.isfinite(v)]
    top = max(10.0, min(120.0, (max(finite) if finite else 60.0) + 5))
    n = max(len(groups), 1)
    step = (_W - 2 * _PAD) / n

    def y(v: float) -> float:
        return _H - _PAD - (_H - 2 * _PAD) * _finite(v, top) / top

    parts = [f'<svg id="snr-chart" viewBox="0 0 {_W} {_H + _LABELS}" width="{_W}" height="{_H + _LABELS}" role="img" aria-label="SQNR per group">']
    for t in range(0, int(top) + 1, 10):
        parts.append(f'<line class="grid" x1="{_PAD}" x2="{_W - _PAD}" y1="{y(t):.1f}" y2="{y(t):.1f}"/>')
        parts.append(f'<text x="{_PAD - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t}</text>')
    for c in result.rule:
        if c.metric == Metric.SNR:
            parts.append(
                f'<line x1="{_PAD}" x2="{_W - _PAD}" y1="{y(c.threshold):.1f}" y2="{y(c.threshold):.1f}" stroke="#d81b60" stroke-dasharray="4 3"/>'
            )
    first = result.first_divergence
    for i, g in enumerate(groups):
        x = _PAD + i * step
        color = "#d81b60" if result.born(g) else "#90caf9"
        h = _H - _PAD - y(g.local.snr)
        title = html.escape(f"{g.group.name}: local {g.local.snr:.2f} dB, accumulated {g.accumulated.snr:.2f} dB")
        parts.append(
            f'<rect class="local" x="{x + step * 0.15:.1f}" y="{y(g.local.snr):.1f}" width="{max(step * 0.7, 1):.1f}" '
            f'height="{h:.1f}" fill="{color}"><title>{title}</title></rect>'
        )
        if n <= 120:
            cx, cy = x + step / 2, _H - _PAD + 12
            label = html.escape(g.group.name if len(g.group.name) <= 22 else g.group.name[:21] + "…")
            parts.append(f'<text x="{cx:.1f}" y="{cy:.1f}" transform="rotate(-40 {cx:.1f} {cy:.1f})" text-anchor="end" font-size="10">{label}</text>')
        if first is not None and g is first:
            parts.append(f'<text x="{x + step / 2:.1f}" y="{_PAD - 8}" text-anchor="middle" fill="#d81b60">first divergence</text>')
    points = " ".join(f"{_PAD + (i + 0.5) * step:.1f},{y(g.accumulated.snr):.1f}" for i, g in enumerate(groups))
    parts.append(f'<polyline points="{points}" fill="none" stroke="#1e3a8a" stroke-width="2"/>')
    parts.append(f'<text x="{_PAD}" y="{_PAD - 24}">bars: local SQNR (red: it breaks the rule), line: accumulated SQNR (dB); groups in the float model\'s run order</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(head: list[str], rows: list[list[str]], ident: str) -> str:
    out = [f'<table id="{ident}"><tr>' + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _db(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return f"{v:.2f}" if math.isfinite(v) else str(v)


def _style() -> str:
    """The style sheet of scan's report page, so that both pages look alike."""
    return resources.files("graph_dap.runtime.tools.scan").joinpath("page", "report.css").read_text(encoding="utf-8")


def report_html(result: Any) -> str:
    """The page, as text."""
    data = result.to_dict()
    first = result.first_divergence
    summary = [
        f"<div class='kv'><b>run</b> {html.escape(result.run_label)}</div>",
        f"<div class='kv'><b>reference</b> {html.escape(result.reference_label)}</div>",
        f"<div class='kv'><b>rule</b> {html.escape(result.rule_text())}</div>",
        f"<div class='kv'><b>pairing</b> {html.escape(result.pairing.summary())}</div>",
        f"<div class='kv'><b>first divergence</b> {html.escape(first.group.name if first else 'none')}</div>",
    ]
    ranked = [
        [str(i + 1), g.group.name, g.group.ops, ", ".join(p.float_name for p in g.group.outputs),
         g.params.describe() if g.params is not None else "float", _db(g.accumulated.snr), _db(g.local.snr),
         _db(g.quant_only.snr if g.quant_only else None), _db(None if math.isnan(g.snr_drop) else g.snr_drop),
         "-" if g.local.steps is None else f"{g.local.steps:.3g}", f"{100 * g.clipped:.2f}%" if g.clipped else "-",
         "FAIL" if result.failed(g) else "pass"]
        for i, g in enumerate(result.ranked)
    ]  # fmt: skip
    weights = [
        [w.float_name, w.quant_name, w.granularity, _db(w.error.snr), _db(w.worst_part_snr),
         "-" if w.error.steps is None else f"{w.error.steps:.3g}", f"{100 * w.clipped:.2f}%"]
        for w in sorted(result.weights, key=lambda w: w.error.snr)
    ]  # fmt: skip
    body = [
        f"<header><h1>{html.escape(result.run_label)} against its float model</h1>{''.join(summary)}</header>",
        "<section><h2>SQNR per group</h2>",
        _chart(result),
        "</section><section><h2>Groups ranked by local error</h2>",
        _table(["rank", "group", "ops", "output", "quantization", "accumulated dB", "local dB", "quantization-only dB", "drop dB",
                "steps", "clipped", "result"], ranked, "groups"),  # fmt: skip
        "</section><section><h2>Weights</h2>",
        _table(["float", "quantized", "granularity", "SQNR dB", "worst channel/block dB", "max steps", "clipped"], weights, "weights"),
        "</section>",
    ]
    sens = result.sensitivity
    if sens is not None:
        rows = [[str(i + 1), g.name, _db(g.recovered), _db(g.output_snr)] for i, g in enumerate(sens.ranked)]
        body += [
            "<section><h2>Sensitivity: what to keep in float</h2>",
            f"<p class='note'>Output SQNR {_db(sens.baseline_snr)} dB quantized; each row: the output SQNR with that group alone in float.</p>",
            _table(["rank", "group", "recovers dB", "output dB"], rows, "sensitivity"),
        ]
        if sens.target is not None:
            body.append(f"<pre>quantize_static(..., nodes_to_exclude={html.escape(repr(sens.nodes_to_exclude))})</pre>")
        body.append("</section>")
    payload = json.dumps(data).replace("</", "<\\/")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(result.run_label)}</title><style>{_style()}</style></head><body>"
        + "".join(body)
        + f'<script type="application/json" id="compare-data">{payload}</script></body></html>'
    )


def write_report(result: Any, folder: Path) -> Path:
    """Write ``folder/report.html`` (renamed into place); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "report.html"
    write_text_atomic(path, report_html(result))
    return path
