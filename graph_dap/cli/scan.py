"""``graph-dap scan``: its printing (its options are in :mod:`graph_dap.cli.options`; the work is :mod:`graph_dap.runtime.tools.scan`).

Exit status: 0 when every input ran clean, 1 when an input failed (in this run or in
the results a ``--resume`` continued), 2 on bad usage; 130/143 when interrupted (the
results so far stay in ``DIR/scan.json``, and ``--resume`` goes on from there).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from graph_dap.cli.options import UsageError, parse_dims
from graph_dap.kinds import BreakFilter

EXIT_CLEAN, EXIT_FAILED = 0, 1
_SHOWN = 12  # failing inputs listed in the text summary


def run(args: argparse.Namespace) -> int:
    """Run the scan the options describe, print as it goes and at the end; the exit status."""
    from graph_dap.cli.progress import ProgressBar
    from graph_dap.runtime.loading import load_graph
    from graph_dap.runtime.tools.scan import ScanEvent, open_source, run_scan

    config = _config(args)
    graph = load_graph(config.model)
    out = Path(args.out) if args.out else Path.cwd() / f"{Path(args.model).stem}-scan"
    source = open_source(args.inputs, args.inputs_from, sample_axis=args.sample_axis, batch=args.batch, exclude=out)
    backend = _backend(args, config, graph, source)
    bar = ProgressBar.on_terminal(args.json, unit="inputs")
    began = time.monotonic()
    state: dict[str, Any] = {"total": source.total, "resumed": 0, "started": False}

    # stdout holds scan's own output alone (the JSON lines, or the summary): what other code prints meanwhile (Ray's
    # "(raylet) A worker died..." when a worker is lost) goes to stderr, where it cannot come before one of our
    # lines on its line
    own_stdout = sys.stdout

    def on_event(kind: ScanEvent, data: dict[str, Any]) -> None:
        if args.json:
            _json_line({"event": kind, **data}, own_stdout)
        if kind is ScanEvent.START:
            state["resumed"], state["started"] = data["resumed"], True
        elif kind is ScanEvent.RESULT and bar is not None:
            ran = data["done"] - state["resumed"]
            rate = ran / max(time.monotonic() - began, 1e-9)
            bar.update(data["done"], state["total"], f"{rate:.1f}/s, {data['failed']} failing")
        elif kind is ScanEvent.INCIDENT and not args.json:
            if bar is not None:
                bar.close()
            print(f"graph-dap scan: {data['message']}", file=sys.stderr)

    finished = False
    sys.stdout = sys.stderr
    try:
        summary = run_scan(graph, source, config, backend, out, resume=args.resume, on_event=on_event)
        finished = summary.finished
    finally:
        sys.stdout = own_stdout
        if bar is not None:
            bar.close()
        if state["started"] and not finished:
            print(f"graph-dap scan: stopped; the results so far are in {out / 'scan.json'} (go on with --resume)", file=sys.stderr)
    if args.json:
        _json_line({"event": ScanEvent.END, **summary.to_dict()})
    else:
        print(scan_text(summary))
    return EXIT_FAILED if summary.failed else EXIT_CLEAN


def _config(args: argparse.Namespace) -> Any:
    from graph_dap.runtime.tools.metrics import METRICS, Tolerance
    from graph_dap.runtime.tools.references import ReferenceKind
    from graph_dap.runtime.tools.scan import ScanConfig
    from graph_dap.runtime.tools.scan.reference import check_reference

    model = Path(args.model)
    reference = args.reference
    if reference:
        ref = check_reference(reference)
        if ref.kind is ReferenceKind.MODEL:
            reference = f"model:{Path(ref.target).resolve()}"  # workers elsewhere (or resumed scans) need no cwd
    elif args.tolerance or args.metric:
        raise UsageError("graph-dap scan: --tolerance and --metric need a --reference")
    filters = [f.strip() for f in (args.break_on or "nan,inf,error").split(",") if f.strip()]
    if reference and BreakFilter.MISMATCH not in filters:
        filters.append(BreakFilter.MISMATCH.value)
    atol = rtol = None
    fail_if: list[str] = []
    for spec in args.tolerance:
        for part in (p.strip() for p in spec.split(",")):
            key, eq, value = part.partition("=")
            if eq and key in ("atol", "rtol"):
                try:
                    number = float(value)
                except ValueError:
                    raise UsageError(f"graph-dap scan: --tolerance {part}: {key} takes a number") from None
                atol, rtol = (number, rtol) if key == "atol" else (atol, number)
            elif part:
                fail_if.append(part)
    tolerance = Tolerance.make(atol, rtol, fail_if)
    if reference and not args.tolerance and _quantized_pair(model, ref):
        tolerance = Tolerance.make(fail_if=["snr<20"])  # a quantized model against its float model: an SQNR rule
    metric = args.metric or (tolerance.fail_if[0].metric if tolerance.fail_if else "max_abs")
    if metric not in METRICS:
        raise UsageError(f"graph-dap scan: --metric: unknown metric '{metric}'; expected any of {', '.join(METRICS)}")
    if args.ship and args.ray is None:
        raise UsageError("graph-dap scan: --ship puts the model in Ray's object store: it needs --ray")
    config = ScanConfig(
        model=str(model.resolve()),
        break_on=tuple(dict.fromkeys(filters)),
        inf_exclude=tuple(args.inf_exclude),
        nan_exclude=tuple(args.nan_exclude),
        reference=reference,
        tolerance=tolerance,
        metric=metric,
        dims=tuple(parse_dims(args.dim).items()),
        providers=tuple(args.provider),
        base_dir=str(Path.cwd()),
    )
    config.check()
    return config


def _json_line(obj: dict[str, Any], out: Any = None) -> None:
    """One JSON object and its newline in one write (``print`` writes its text and its newline apart), to ``out``
    (the process's stdout when None)."""
    stream = sys.stdout if out is None else out
    stream.write(json.dumps(obj) + "\n")
    stream.flush()


def _backend(args: argparse.Namespace, config: Any, graph: Any, source: Any) -> Any:
    if args.ray is None:
        from graph_dap.runtime.tools.scan.pool import LocalPool, default_workers

        return LocalPool(config, args.workers or default_workers(args.threads), args.threads, source.import_path)
    from graph_dap.runtime.tools.scan.ray_backend import RayBackend
    from graph_dap.runtime.tools.scan.sources import ItemLoader

    return RayBackend(
        config,
        None if args.ray == "local" else args.ray,
        args.workers,
        args.threads,
        ship=args.ship,
        shard_size=args.shard_size,
        import_path=source.import_path,
        loader=ItemLoader(graph, dict(config.dims)) if args.ship else None,
        model_bytes=graph.model.SerializeToString() if args.ship else None,
    )


def scan_text(summary: Any) -> str:
    """The end of a scan, for people: counts, where inputs first go wrong, the failing inputs, the files."""
    from graph_dap.runtime.tools.scan.backend import BackendKind
    from graph_dap.runtime.tools.scan.results import ScanStatus
    from graph_dap.runtime.tools.scan.scanfile import read_scan

    data = read_scan(summary.results_path)
    b = summary.backend
    where = "local" if b.get("backend") == BackendKind.LOCAL else f"Ray ({b.get('address')})"
    rate = summary.ran / summary.seconds if summary.seconds > 0 else 0.0
    counts = ", ".join(f"{n} {s}" for s, n in summary.counts.items() if n)
    lines = [
        f"scanned {summary.done} inputs ({summary.ran} now, {rate:.1f}/s, {summary.resumed} from before) with "
        f"{b.get('workers')} {where} workers x {b.get('threads_per_run')} threads: {counts or 'none'}"
    ]
    nodes = data.get("first_bad_nodes", [])
    if nodes:
        lines.append("first bad nodes (inputs):")
        for g in nodes[:10]:
            how = ", ".join(f"{n} {s}" for s, n in g["statuses"].items())
            lines.append(f"  {g['count']:>6}  {g['node']} ({g['op_type']}): {how}")
    failing = [r for r in data.get("results", []) if r["status"] != ScanStatus.CLEAN]
    if failing:
        lines.append(f"failing inputs ({len(failing)}):")
        for r in failing[:_SHOWN]:
            node = f" at {r['node']['where']} ({r['node']['op_type']})" if r.get("node") else ""
            lines.append(f"  {r['id']}: {r['status']}{node}" + (f" - {r['message']}" if r.get("message") and not node else ""))
        if len(failing) > _SHOWN:
            lines.append(f"  ... and {len(failing) - _SHOWN} more (scan.json, report.html)")
        first = next((r for r in failing if (r.get("replay") or {}).get("command")), None)
        if first is not None:
            lines.append(f"debug one: {first['replay']['command']}")
    groups = data.get("groups") or []
    if groups:
        lines.append(f"groups of the quantized model over {groups[0]['inputs']} inputs, by local SQNR (dB), worst first:")
        for g in groups[:_SHOWN]:
            lines.append(
                f"  {g['group']}: local {_db(g['local_snr'])}, accumulated {_db(g['accumulated_snr'])} "
                f"(worst input {g['worst_input']}: {_db(g['worst_input_snr'])})"
            )
    for incident in data.get("incidents", [])[-5:]:
        lines.append(f"worker lost: {incident['message']}")
    lines.append(f"results: {summary.results_path}")
    lines.append(f"report:  {summary.report_path}")
    return "\n".join(lines)


def _db(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, (int, float)) else str(v)


def _quantized_pair(model: Path, ref: Any) -> bool:
    """Whether the scan compares a quantized model with its float model (exactly one of the two quantized)."""
    from graph_dap.runtime.tools.references import ReferenceKind

    if ref.kind is not ReferenceKind.MODEL:
        return False
    from graph_dap.runtime.loading import read_model
    from graph_dap.runtime.tools.quant.view import QUANT_OPS

    ops = set(QUANT_OPS) | {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
    flags = [any(n.op_type in ops for n in read_model(p, external_data=False).graph.node) for p in (model, Path(ref.target))]
    return flags[0] != flags[1]
