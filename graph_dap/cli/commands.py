"""The commands over the runtime: ``listing``, ``run``, ``dump``, ``compare``, ``scan``, ``profile``.

The runtime (numpy, onnx, onnxruntime) is imported by the commands that need it, not by
``graph-dap --help`` or a usage error."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from graph_dap.cli.options import EXIT_COMPLETED, EXIT_DIVERGED, EXIT_STOPPED, Grouping, UsageError, parse_dims, parse_filters
from graph_dap.cli.progress import ProgressBar as _ProgressBar
from graph_dap.cli.report import RunStatus, json_default, stop_report, stop_text
from graph_dap.kinds import OptLevel


def _listing(args: argparse.Namespace) -> int:
    from graph_dap.files import write_text_atomic
    from graph_dap.runtime import load_graph, render_listing

    text = render_listing(load_graph(args.model)).text
    if args.out:
        write_text_atomic(args.out, text)
    else:
        sys.stdout.write(text)
    return EXIT_COMPLETED


def _run(args: argparse.Namespace) -> int:
    from graph_dap.runtime import BreakpointSpec, DebugSession
    from graph_dap.runtime.tools.inject import Injection, InjectionSpecError
    from graph_dap.runtime.tools.repeat import repeat_runs, repeat_text

    bar = _ProgressBar.on_terminal(args.json)
    session = DebugSession(
        args.model,
        args.inputs,
        dims=parse_dims(args.dim, args.shape),
        providers=args.provider or None,
        break_on=parse_filters(args.break_on),
        inf_exclude=args.inf_exclude,
        nan_exclude=args.nan_exclude,
        opt_level=args.opt_level,
        on_log=(lambda line: print(line, file=sys.stderr)) if args.json else print,
        on_progress=bar.update if bar else None,
    )
    try:
        injection = Injection.parse(args.sets, args.set_from).attach(session)
    except InjectionSpecError as e:
        raise UsageError(str(e)) from None
    try:
        user = [BreakpointSpec(s) for s in args.breaks]
        bps = session.set_breakpoints(user + injection.breakpoints())
        for bp in bps[: len(user)]:
            if not bp.verified:
                raise UsageError(f"graph-dap: --break {bp.spec.spec}: {bp.message}")
        injection.internal_ids = {bp.id for bp in bps[len(user) :]}
        stop, repeats = repeat_runs(args.repeat, lambda i: injection.run(restart=i > 0), session.outputs)
    finally:
        injection.close()
    if bar:
        bar.close()
    report = stop_report(session, stop)
    if injection.applied:
        report["injected"] = list(injection.applied)
    if args.repeat > 1:
        report["repeat"] = repeats.to_dict(report["status"] == RunStatus.COMPLETED)
    if args.json:
        print(json.dumps(report, default=json_default))
    else:
        text = stop_text(session, stop, report)
        if injection.applied:
            text += "\ninjected: " + ", ".join(injection.applied)
        if args.repeat > 1:
            text += "\n" + repeat_text(report["repeat"])
        print(text)
    return EXIT_COMPLETED if report["status"] == RunStatus.COMPLETED else EXIT_STOPPED


def _dump(args: argparse.Namespace) -> int:
    from graph_dap.runtime.tensor import format_bytes
    from graph_dap.runtime.tools.dump import dump_model

    bar = _ProgressBar.on_terminal(args.json)
    result = dump_model(
        args.model,
        args.out,
        args.inputs,
        dims=parse_dims(args.dim, args.shape),
        providers=args.provider or None,
        values=args.values,
        on_progress=bar.update if bar else None,
    )
    if bar:
        bar.close()
    if args.json:
        print(json.dumps(result.to_dict()))
        return EXIT_COMPLETED
    print(
        f"dumped {result.values} values ({format_bytes(result.bytes)}) to {result.path} in {result.seconds:.2f}s; metadata in {result.meta_path}"
    )
    if result.skipped:
        print(f"not stored (not an array): {', '.join(result.skipped)}")
    return EXIT_COMPLETED


def _compare(args: argparse.Namespace) -> int:
    from graph_dap.cli import quant as cli_quant

    if cli_quant.wants_quant(args):
        return cli_quant.run(args)
    from graph_dap.runtime import load_graph
    from graph_dap.runtime.selection import Selection
    from graph_dap.runtime.tools.compare import METRICS, Reference, Tolerance, compare_model
    from graph_dap.runtime.tools.references import ReferenceKind

    metrics = [m.strip() for m in args.metric.split(",") if m.strip()]
    bad = [m for m in metrics if m not in METRICS]
    if bad or not metrics:
        raise UsageError(
            f"graph-dap: --metric: unknown metric '{bad[0] if bad else args.metric}'; expected any of {', '.join(METRICS)}"
        )
    if args.reference:
        ref = Reference(ReferenceKind.DUMP, args.reference)
    elif args.against_provider:
        ref = Reference(ReferenceKind.PROVIDER, args.against_provider)
    elif args.against_model:
        ref = Reference(ReferenceKind.MODEL, args.against_model)
    else:
        ref = Reference(ReferenceKind.OPT_LEVEL, args.against_opt_level)
    opt_level = args.opt_level or (OptLevel.ALL if ref.kind is ReferenceKind.OPT_LEVEL and ref.target != OptLevel.ALL else OptLevel.NONE)
    if ref.kind is ReferenceKind.OPT_LEVEL and ref.target == opt_level:
        raise UsageError(
            f"graph-dap: both sides would run at optimization level '{opt_level}'; give the run another --opt-level"
        )
    tolerance = Tolerance.make(args.atol, args.rtol, args.fail_if)
    graph = load_graph(args.model)
    chosen = Selection.checked(graph, args.values, "graph-dap: --values", UsageError) if args.values else None
    bar = _ProgressBar.on_terminal(args.json)
    result = compare_model(
        graph,
        ref,
        args.inputs,
        dims=parse_dims(args.dim, args.shape),
        providers=args.provider or None,
        opt_level=opt_level,
        tolerance=tolerance,
        metrics=metrics,
        on_progress=bar.update if bar else None,
    )
    if bar:
        bar.close()
    if chosen is not None:  # (every value is compared: where a difference starts is found before the values chosen too)
        result.comparison.chosen = chosen.value
    report = result.to_dict()
    if args.by == Grouping.MODULE:
        report["by_module"] = result.comparison.by_module()
    if args.json:
        print(json.dumps(report))
    else:
        print(_compare_text(result, report, args.failed, args.by))
    return EXIT_DIVERGED if report["failed"] else EXIT_COMPLETED


def _compare_text(result: Any, report: dict[str, Any], only_failed: bool, by: str = Grouping.VALUE) -> str:
    comparison = result.comparison
    lines = [
        f"run:       {report['run']}",
        f"reference: {report['reference']}",
        f"tolerance: {report['tolerance']['rule']}",
    ]
    lines += [f"note:      {n}" for n in report["notes"]]
    lines.append("")
    lines.append(comparison.module_text() if by == Grouping.MODULE else comparison.table_text(only_failed))
    lines.append("")
    lines.append(
        f"compared {report['compared']} values: {report['compared'] - report['failed']} within tolerance, {report['failed']} not; "
        f"{report['matched']} matched by name, {report['unmatched_run']} of the run's values and "
        f"{report['unmatched_reference']} of the reference's had no counterpart"
    )
    first = comparison.first_divergence
    if first is not None:
        inputs = [i for i in first.node.all_inputs if i in {r.value for r in comparison.rows}]
        within = f"; its compared inputs ({', '.join(inputs)}) are within tolerance" if inputs else "; it reads no compared value"
        lines.append(
            f"first divergence: {first.node.id} ({first.node.op_type}), index {first.node.index}, value '{first.value}': "
            f"{first.describe(comparison.metrics)}{within}"
        )
        where = report["first_divergence"]
        if where["source"] or where["module"] is not None:
            line = where["source"][0] if where["source"] else None
            at = f"{line['path']}:{line['line']} in {line['function']}" if line else ""
            module = f"module {where['module'] or '(model)'}" if where["module"] is not None else ""
            lines.append("  from: " + ", ".join(x for x in (at, module) if x))
    elif report["failed"]:
        lines.append("first divergence: none found among the compared values (every failing node reads a failing input)")
    else:
        lines.append("no divergence: every compared value is within tolerance")
    return "\n".join(lines)


def _scan(args: argparse.Namespace) -> int:
    from graph_dap.cli import scan as cli_scan

    return cli_scan.run(args)


def _graph(args: argparse.Namespace) -> int:
    from graph_dap.cli import graph as cli_graph

    return cli_graph.run(args)


def _profile(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from graph_dap.runtime import load_graph
    from graph_dap.runtime.tools.profile import fused_graph, profile_model

    opt_level = args.opt_level or (OptLevel.ALL if args.fused else OptLevel.NONE)
    if opt_level == OptLevel.NONE and (args.fused or args.save_optimized):
        raise UsageError(
            f"graph-dap: {'--fused' if args.fused else '--save-optimized'} needs --opt-level basic, extended or all"
        )
    graph = load_graph(args.model)
    prof = profile_model(
        graph,
        args.inputs,
        dims=parse_dims(args.dim, args.shape),
        providers=args.provider or None,
        opt_level=opt_level,
        repeat=args.repeat,
    )
    if args.depth is not None:
        if args.by != Grouping.MODULE:
            raise UsageError("graph-dap: --depth cuts module paths: it goes with --by module")
        prof = replace(prof, depth=args.depth)
    if args.nodes:
        from graph_dap.runtime.selection import Selection

        prof = prof.restricted(Selection.checked(graph, args.nodes, "graph-dap: --nodes", UsageError), ", ".join(args.nodes))
    if args.chrome_trace:
        prof.write_chrome_trace(args.chrome_trace)
    if args.save_optimized:
        fused_graph(args.model, opt_level, args.provider or None, save_to=args.save_optimized)
    if args.json:
        print(json.dumps(prof.to_dict()))
    elif args.by != Grouping.NODE:
        from graph_dap.runtime.tools.by_source import NO_MODULE, NO_SOURCE, SourceUnit, table_text

        rows = prof.by_line() if args.by == Grouping.LINE else prof.by_module()
        print(prof.text(args.top).split("\n", 2)[0])
        known = [r for r in rows if r.key not in (NO_SOURCE, NO_MODULE)]
        print(table_text(rows, SourceUnit(args.by), args.top) if known else f"no node of this model says which {args.by} it came from")
        if args.chrome_trace:
            print(f"chrome trace: {args.chrome_trace}")
    else:
        print(prof.text(args.top))
        if prof.fused is not None:
            print(
                f"optimized graph: {len(prof.fused.nodes)} nodes from the model's {prof.fused.original_nodes}; "
                f"{len(prof.fused.removed)} original nodes folded or removed"
            )
            if args.fused:
                print(prof.fused.text())
        if args.chrome_trace:
            print(f"chrome trace: {args.chrome_trace}")
    return EXIT_COMPLETED


#: The commands ``main`` runs itself, by name (``adapter``, ``worker`` and ``lsp`` are delegated).
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": _run,
    "listing": _listing,
    "dump": _dump,
    "compare": _compare,
    "profile": _profile,
    "scan": _scan,
    "graph": _graph,
}
