"""The ``graph-dap`` command line: a thin layer over the runtime's public API.

Exit status: 0 when a command completed, 1 when ``run`` stopped on a break or
``compare`` found a value out of tolerance, 2 on bad usage, a bad model or bad
inputs (one line on stderr, never a traceback), 130 when interrupted, 143 when
terminated (a dump in progress then leaves no file under its final name).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from graph_dap.cli_progress import ProgressBar as _ProgressBar
from graph_dap.errors import GraphDapError
from graph_dap.worker.protocol import OPT_LEVEL_NAMES

if TYPE_CHECKING:
    from graph_dap.runtime import DebugSession, Stop

# The runtime (numpy, onnx, onnxruntime) is imported by the commands that need it, not by
# ``graph-dap --help`` or a usage error.

EXIT_COMPLETED, EXIT_STOPPED, EXIT_USAGE = 0, 1, 2
EXIT_DIVERGED = 1
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message}")


class _UsageError(Exception):
    pass


def _dims(items: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        name, sep, n = item.partition("=")
        if not sep or not name or not n.strip().isdigit():
            raise _UsageError(f"--dim expects NAME=N with N a non-negative integer, got '{item}'")
        out[name.strip()] = int(n)
    return out


def _filters(text: str | None) -> list[str]:
    if not text:
        return []
    return [f.strip() for f in text.split(",") if f.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="graph-dap", description="Debug ONNX models: break, step, inspect tensors.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser("run", help="run a model under the debugger and report the first break")
    run.add_argument("model", help="path to the .onnx model")
    run.add_argument("--inputs", help=".npz (keys = input names), .npy (one input) or a folder of input_N.pb")
    run.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="size of a symbolic dimension")
    run.add_argument(
        "--break",
        dest="breaks",
        action="append",
        default=[],
        metavar="SPEC",
        help="node id, value name, op:TYPE, a glob on node ids, or FILE.py:LINE (a line of the model's Python source)",
    )
    run.add_argument("--break-on", default="error", metavar="FILTERS", help="comma list of nan, inf, error (default: error)")
    run.add_argument(
        "--inf-exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="node glob or op:TYPE whose Inf the inf filter ignores (e.g. attention masks)",
    )
    run.add_argument("--provider", action="append", default=[], metavar="NAME", help="onnxruntime execution provider")
    run.add_argument(
        "--opt-level",
        choices=OPT_LEVEL_NAMES,
        default="all",
        metavar="LEVEL",
        help="onnxruntime's graph optimizations for the runs between stops (none, basic, extended, all; default all, "
        "as a plain InferenceSession); values shown at a stop are computed without them",
    )
    run.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="replace value NAME by the array in FILE.npy when it is computed (an input or initializer: at the start)",
    )
    run.add_argument(
        "--set-from",
        dest="set_from",
        action="append",
        default=[],
        metavar="DUMP.npz[:NAME,...]",
        help="replace values by those of a dump (every value it holds, or the names given)",
    )
    run.add_argument(
        "--repeat",
        type=_positive,
        default=1,
        metavar="N",
        help="run the model N times and report each run's time and whether the outputs were identical",
    )
    run.add_argument("--json", action="store_true", help="print one JSON object on stdout")

    for name, (text, _) in _DELEGATED.items():
        sub.add_parser(name, help=text, add_help=False)
    from graph_dap import cli_scan

    cli_scan.add_parser(sub)
    sub.add_parser(
        "run-script",
        help="run a Python program and report the first run call that meets a break (see graph-dap run-script --help)",
        add_help=False,
    )
    sub.add_parser("capture", help="record every run call of a program for replay (see graph-dap capture --help)", add_help=False)
    lst = sub.add_parser("listing", help="print the model's graph listing")
    lst.add_argument("model")
    lst.add_argument("--out", help="write it to this file instead of stdout")

    dump = sub.add_parser(
        "dump",
        help="run a model and write every computed value to an .npz",
        description="Run the model node by node and write every computed value (or those --values selects) to an .npz "
        "keyed by value name, while the run goes: memory stays at the run's working set. The graph inputs are stored too. "
        "A JSON side file (OUT.json) records the model's and inputs' hashes, the providers and options, and the node that "
        "produced each value. The archive is renamed into place at the end: an interrupted dump leaves no file under OUT.",
    )
    _model_options(dump)
    dump.add_argument(
        "--values",
        action="append",
        default=[],
        metavar="GLOB",
        help="only values whose name (or producing node id) matches; repeatable",
    )
    dump.add_argument("--out", required=True, metavar="OUT.npz", help="the archive to write")
    dump.add_argument("--json", action="store_true", help="print what was written as one JSON object")

    cmp_ = sub.add_parser(
        "compare",
        help="compare a run with a reference value by value and name the first divergence (exit 1 when one differs)",
        description="Run the model and a reference in lockstep, node by node, and compare every value both have. "
        "The first divergence is the earliest node whose outputs break the tolerance while all its compared inputs "
        "are within it: where a difference starts, not where it propagates. "
        "Exit status: 0 when every compared value is within tolerance, 1 when some value is not, 2 on bad usage.",
    )
    _model_options(cmp_)
    ref = cmp_.add_mutually_exclusive_group(required=True)
    ref.add_argument(
        "--reference", metavar="DUMP.npz", help="a dump written by graph-dap dump (its inputs are used unless --inputs)"
    )
    ref.add_argument("--against-provider", metavar="NAME", help="the same model on another execution provider")
    ref.add_argument("--against-model", metavar="OTHER.onnx", help="another model; values are matched by name")
    ref.add_argument(
        "--against-opt-level",
        choices=OPT_LEVEL_NAMES,
        metavar="LEVEL",
        help="the model at another onnxruntime optimization level (none, basic, extended, all); "
        "an optimized side runs whole and only the values its graph still names are compared",
    )
    cmp_.add_argument(
        "--opt-level",
        choices=OPT_LEVEL_NAMES,
        metavar="LEVEL",
        help="optimization level of the run being checked (default: none, i.e. node by node; all with --against-opt-level)",
    )
    cmp_.add_argument("--atol", type=_non_negative, default=None, metavar="A", help="absolute tolerance (default 1e-5)")
    cmp_.add_argument("--rtol", type=_non_negative, default=None, metavar="R", help="relative tolerance (default 1e-4)")
    cmp_.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="COND",
        help="fail a value when METRIC<X or METRIC>X holds (e.g. cosine<0.999, snr<40, max_abs>1e-3) "
        "instead of the atol/rtol rule; repeatable, any one fails",
    )
    cmp_.add_argument(
        "--metric",
        default="max_abs,max_rel,mse,cosine,snr",
        metavar="LIST",
        help="metrics to show: any of max_abs, max_rel, mse, cosine, snr (default: all)",
    )
    cmp_.add_argument("--failed", action="store_true", help="list only the values out of tolerance")
    cmp_.add_argument(
        "--by",
        choices=("value", "module"),
        default="value",
        help="value: a row per value (default); module: the metrics aggregated per module scope of the model's source",
    )
    cmp_.add_argument("--json", action="store_true", help="print {rows, first_divergence, ...} as one JSON object")

    prof = sub.add_parser(
        "profile",
        help="time every node of the model (onnxruntime's own profiling) and list the slowest first",
        description="Run the whole model under onnxruntime's profiler (SessionOptions.enable_profiling) and map each "
        "kernel's time back to its node: median over --repeat runs after one warm-up, share of the total, bytes produced. "
        "With --opt-level above none, the nodes are those of onnxruntime's optimized graph, each with the original "
        "nodes it came from.",
    )
    _model_options(prof)
    prof.add_argument("--repeat", type=_positive, default=3, metavar="N", help="timed runs (default 3), after one warm-up")
    prof.add_argument(
        "--opt-level",
        choices=OPT_LEVEL_NAMES,
        default=None,
        metavar="LEVEL",
        help="onnxruntime optimization level (default none: the model's own nodes; all with --fused)",
    )
    prof.add_argument(
        "--fused",
        action="store_true",
        help="also list onnxruntime's optimized graph: each of its nodes with the original nodes it came from",
    )
    prof.add_argument("--top", type=int, default=25, metavar="K", help="rows to print, slowest first (0: all; default 25)")
    prof.add_argument(
        "--by",
        choices=("node", "line", "module"),
        default="node",
        help="node (default), or the times per line of the model's Python source or per module scope "
        "(a fused node's time split over its original nodes')",
    )
    prof.add_argument("--chrome-trace", metavar="OUT.json", help="also write the runs as a Chrome/Perfetto trace")
    prof.add_argument("--save-optimized", metavar="OUT.onnx", help="also write onnxruntime's optimized model (with --opt-level)")
    prof.add_argument("--json", action="store_true", help='print {"total_ms", "nodes": [...], ...} as one JSON object')
    return p


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="path to the .onnx model")
    p.add_argument("--inputs", help=".npz (keys = input names), .npy (one input) or a folder of input_N.pb")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="size of a symbolic dimension")
    p.add_argument("--provider", action="append", default=[], metavar="NAME", help="onnxruntime execution provider")


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return n


def _non_negative(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got '{text}'") from None
    if not x >= 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got '{text}'")
    return x


# Subcommands with parsers of their own: the DAP server and the runtime worker.
_DELEGATED = {
    "adapter": ("serve DAP on stdio, or over TCP with --port (see graph-dap adapter --help)", "graph_dap.adapter.__main__"),
    "worker": (
        "run a runtime worker for an adapter, e.g. on a GPU box (see graph-dap worker --help)",
        "graph_dap.worker.server",
    ),
    "lsp": ("serve the language server of graph listings on stdio, or over TCP with --tcp (see graph-dap lsp --help)", "graph_dap.lsp.__main__"),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("run-script", "capture"):
        try:
            return _run_script(argv[1:]) if argv[0] == "run-script" else _capture(argv[1:])
        except _UsageError as e:
            print(e, file=sys.stderr)
            return EXIT_USAGE
    if argv and argv[0] in _DELEGATED:
        import importlib

        module = importlib.import_module(_DELEGATED[argv[0]][1])
        return int(module.main(argv[1:]) or 0)
    parser = build_parser()
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "run": _run,
        "listing": _listing,
        "dump": _dump,
        "compare": _compare,
        "profile": _profile,
        "scan": _scan,
    }
    restore = _terminate_as_exception()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        command = commands.get(args.command)
        if command is not None:
            return command(args)
    except _UsageError as e:
        print(e, file=sys.stderr)
        return EXIT_USAGE
    except GraphDapError as e:
        print(f"graph-dap: {e}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:
        print("graph-dap: out of memory (the model, its inputs or its values do not fit in this machine's memory)", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("graph-dap: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except _Terminated:
        print("graph-dap: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    finally:
        restore()
    return EXIT_USAGE


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that files being written are cleaned up."""


def _terminate_as_exception() -> Callable[[], None]:
    """Turn SIGTERM into :class:`_Terminated` while ``main`` runs; returns what undoes it."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, frame: Any) -> None:
        raise _Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        return lambda: None

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


_RUN_SCRIPT_USAGE = """usage: graph-dap run-script [--break-on FILTERS] [--break SPEC]... [--inf-exclude PATTERN]...
                            [--provider NAME]... [--json] (SCRIPT | -m MODULE) [ARGS...] [-- ARGS...]

Run a Python program with onnxruntime's InferenceSession wrapped. At the first run call that meets a break
(--break-on: nan, inf, error; --break: a node spec of graph-dap run, for every model the program loads),
print graph-dap run's report of that call, the call's number and the caller's Python stack, and exit 1.
graph-dap's options may come anywhere before --; what follows -- goes to the program as it is.
Exit status: 1 after a break, 0 when the program ended without one, else the program's own."""

_CAPTURE_USAGE = """usage: graph-dap capture --out DIR [--only-nonfinite] -- COMMAND [ARGS...]

Run COMMAND (e.g. python infer.py ARGS) and record every InferenceSession run call of every Python process it
starts: DIR/run-0001.npz (the feeds), run-0001.outputs.npz, run-0001.json (the model, the caller's file and
line, the time). Replay one with: graph-dap run MODEL --inputs DIR/run-0001.npz
--only-nonfinite keeps only the calls whose outputs hold NaN or Inf (and those that failed).
Exit status: COMMAND's."""


def _run_script(argv: list[str]) -> int:
    """``graph-dap run-script``: graph-dap's options wherever they are (before ``--``), the rest is the program."""
    from graph_dap.host.script import ScriptOptions, run_script

    valued = {"--break-on": "filters", "--break": "breaks", "--inf-exclude": "inf_exclude", "--provider": "providers"}
    found: dict[str, list[str]] = {k: [] for k in valued.values()}
    program: list[str] = []
    as_json = False
    i = 0
    while i < len(argv):
        item = argv[i]
        name, eq, value = item.partition("=")
        if item == "--":
            program += argv[i + 1 :]
            break
        if not program and item in ("-h", "--help"):
            print(_RUN_SCRIPT_USAGE)
            return EXIT_COMPLETED
        if item == "--json":
            as_json = True
        elif name in valued:
            if not eq:
                if i + 1 >= len(argv):
                    raise _UsageError(f"graph-dap run-script: {name} needs a value")
                i += 1
                value = argv[i]
            found[valued[name]].append(value)
        else:
            program.append(item)
        i += 1
    if not program or program == ["-m"]:
        raise _UsageError("graph-dap run-script: give the program to run: SCRIPT [ARGS...] or -m MODULE [ARGS...]")
    filters = [f for text in found["filters"] for f in _filters(text)] or ["error"]
    bad = sorted(set(filters) - {"nan", "inf", "error"})
    if bad:
        raise _UsageError(f"graph-dap run-script: unknown filter '{bad[0]}' in --break-on; expected nan, inf, error")
    if program[0] != "-m" and not os.path.isfile(program[0]):
        raise _UsageError(f"graph-dap run-script: no such program: {program[0]}")
    options = ScriptOptions(tuple(filters), tuple(found["breaks"]), tuple(found["inf_exclude"]), tuple(found["providers"]), as_json)
    return run_script(program, options)


def _capture(argv: list[str]) -> int:
    """``graph-dap capture --out DIR [--only-nonfinite] -- COMMAND...``."""
    from graph_dap.host.capture import CaptureOptions, capture

    if "--" not in argv:
        if any(a in ("-h", "--help") for a in argv):
            print(_CAPTURE_USAGE)
            return EXIT_COMPLETED
        raise _UsageError("graph-dap capture: put the command after --: graph-dap capture --out DIR -- python infer.py")
    split = argv.index("--")
    parser = _Parser(prog="graph-dap capture", add_help=False)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only-nonfinite", action="store_true")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        raise _UsageError("graph-dap capture: no command after --")
    try:
        status, kept = capture(command, CaptureOptions(args.out, args.only_nonfinite))
    except FileNotFoundError as e:
        raise _UsageError(f"graph-dap capture: {e}") from None
    print(f"graph-dap capture: {kept} run call(s) recorded in {args.out}", file=sys.stderr)
    return status


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
        dims=_dims(args.dim),
        providers=args.provider or None,
        break_on=_filters(args.break_on),
        inf_exclude=args.inf_exclude,
        opt_level=args.opt_level,
        on_log=(lambda line: print(line, file=sys.stderr)) if args.json else print,
        on_progress=bar.update if bar else None,
    )
    try:
        injection = Injection.parse(args.sets, args.set_from).attach(session)
    except InjectionSpecError as e:
        raise _UsageError(str(e)) from None
    try:
        user = [BreakpointSpec(s) for s in args.breaks]
        bps = session.set_breakpoints(user + injection.breakpoints())
        for bp in bps[: len(user)]:
            if not bp.verified:
                raise _UsageError(f"graph-dap: --break {bp.spec.spec}: {bp.message}")
        injection.internal_ids = {bp.id for bp in bps[len(user) :]}
        stop, repeats = repeat_runs(args.repeat, lambda i: injection.run(restart=i > 0), session.outputs)
    finally:
        injection.close()
    if bar:
        bar.close()
    report = _report(session, stop)
    if injection.applied:
        report["injected"] = list(injection.applied)
    if args.repeat > 1:
        report["repeat"] = repeats.to_dict(report["status"] == "completed")
    if args.json:
        print(json.dumps(report, default=_json_default))
    else:
        text = _text_report(session, stop, report)
        if injection.applied:
            text += "\ninjected: " + ", ".join(injection.applied)
        if args.repeat > 1:
            text += "\n" + repeat_text(report["repeat"])
        print(text)
    return EXIT_COMPLETED if report["status"] == "completed" else EXIT_STOPPED


def _dump(args: argparse.Namespace) -> int:
    from graph_dap.runtime.tensor import format_bytes
    from graph_dap.runtime.tools.dump import dump_model

    bar = _ProgressBar.on_terminal(args.json)
    result = dump_model(
        args.model,
        args.out,
        args.inputs,
        dims=_dims(args.dim),
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
    from graph_dap.runtime.tools.compare import METRICS, Reference, Tolerance, compare_model

    metrics = [m.strip() for m in args.metric.split(",") if m.strip()]
    bad = [m for m in metrics if m not in METRICS]
    if bad or not metrics:
        raise _UsageError(
            f"graph-dap: --metric: unknown metric '{bad[0] if bad else args.metric}'; expected any of {', '.join(METRICS)}"
        )
    if args.reference:
        ref = Reference("dump", args.reference)
    elif args.against_provider:
        ref = Reference("provider", args.against_provider)
    elif args.against_model:
        ref = Reference("model", args.against_model)
    else:
        ref = Reference("opt_level", args.against_opt_level)
    opt_level = args.opt_level or ("all" if ref.kind == "opt_level" and ref.target != "all" else "none")
    if ref.kind == "opt_level" and ref.target == opt_level:
        raise _UsageError(
            f"graph-dap: both sides would run at optimization level '{opt_level}'; give the run another --opt-level"
        )
    tolerance = Tolerance.make(args.atol, args.rtol, args.fail_if)
    bar = _ProgressBar.on_terminal(args.json)
    result = compare_model(
        args.model,
        ref,
        args.inputs,
        dims=_dims(args.dim),
        providers=args.provider or None,
        opt_level=opt_level,
        tolerance=tolerance,
        metrics=metrics,
        on_progress=bar.update if bar else None,
    )
    if bar:
        bar.close()
    report = result.to_dict()
    if args.by == "module":
        report["by_module"] = result.comparison.by_module()
    if args.json:
        print(json.dumps(report))
    else:
        print(_compare_text(result, report, args.failed, args.by))
    return EXIT_DIVERGED if report["failed"] else EXIT_COMPLETED


def _compare_text(result: Any, report: dict[str, Any], only_failed: bool, by: str = "value") -> str:
    comparison = result.comparison
    lines = [
        f"run:       {report['run']}",
        f"reference: {report['reference']}",
        f"tolerance: {report['tolerance']['rule']}",
    ]
    lines += [f"note:      {n}" for n in report["notes"]]
    lines.append("")
    lines.append(comparison.module_text() if by == "module" else comparison.table_text(only_failed))
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
    from graph_dap import cli_scan

    try:
        return cli_scan.run(args)
    except cli_scan.UsageError as e:
        raise _UsageError(str(e)) from None


def _profile(args: argparse.Namespace) -> int:
    from graph_dap.runtime.tools.profile import fused_graph, profile_model

    opt_level = args.opt_level or ("all" if args.fused else "none")
    if opt_level == "none" and (args.fused or args.save_optimized):
        raise _UsageError(
            f"graph-dap: {'--fused' if args.fused else '--save-optimized'} needs --opt-level basic, extended or all"
        )
    prof = profile_model(
        args.model,
        args.inputs,
        dims=_dims(args.dim),
        providers=args.provider or None,
        opt_level=opt_level,
        repeat=args.repeat,
    )
    if args.chrome_trace:
        prof.write_chrome_trace(args.chrome_trace)
    if args.save_optimized:
        fused_graph(args.model, opt_level, args.provider or None, save_to=args.save_optimized)
    if args.json:
        print(json.dumps(prof.to_dict()))
    elif args.by != "node":
        from graph_dap.runtime.tools.by_source import NO_MODULE, NO_SOURCE, table_text

        rows = prof.by_line() if args.by == "line" else prof.by_module()
        print(prof.text(args.top).split("\n", 2)[0])
        known = [r for r in rows if r.key not in (NO_SOURCE, NO_MODULE)]
        print(table_text(rows, args.by, args.top) if known else f"no node of this model says which {args.by} it came from")
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


def _report(session: DebugSession, stop: Stop) -> dict[str, Any]:
    """``run --json``: the stop as :meth:`Stop.to_dict` gives it, with a status and the summaries of what it is about."""
    from graph_dap.runtime import StopReason, summarize
    from graph_dap.runtime.source import source_fields

    completed = stop.completed
    node = stop.node
    summaries: dict[str, Any] = {}
    if node is not None:
        for name in list(node.all_inputs) + [o for o in node.outputs if o]:
            if session.has_value(name):
                summaries[name] = summarize(session.value(name)).to_dict()
    else:
        for name, v in session.outputs().items():
            summaries[name] = summarize(v).to_dict()
    d = stop.to_dict()
    reason = None if completed else d["reason"]
    status = "completed" if completed else "failed" if stop.reason is StopReason.FAILED else "stopped"
    out = {
        "status": status,
        "reason": reason,
        **{k: d[k] for k in ("node", "tensor", "message", "details")},
        "summaries": summaries,
    }
    if node is not None:
        out.update(source_fields(session.graph.sources, [node.id]))
    return out


def _text_report(session: DebugSession, stop: Stop, report: dict[str, Any]) -> str:
    from graph_dap.runtime import StopReason, summarize
    from graph_dap.runtime.stops import path_text
    node = stop.node
    lines: list[str] = []
    if report["status"] == "completed":
        lines.append(f"completed: {len(session.sequence)} nodes ran")
        lines.append("outputs:")
        for name, v in session.outputs().items():
            lines.append(f"  {name}: {summarize(v).text()}")
        return "\n".join(lines)
    assert node is not None
    why = {"nan": "NaN", "inf": "Inf", "error": "node error", "breakpoint": "breakpoint"}.get(
        str(report["reason"]), str(report["reason"])
    )
    lines.append(f"stopped ({why}) at {node.id} ({node.op_type})")
    if stop.path:
        scope = session.graph.scope_of(node)
        lines.append(f"  in:    {path_text(stop.path)} > {node.id}")
        lines.append(f"  where: node {node.order + 1} of {len(scope.nodes)} in run order there, index {node.index} in its graph")
    else:
        lines.append(f"  where: node {node.order + 1} of {len(session.graph.nodes)} in run order, index {node.index} in the file")
    if stop.message:
        lines.append(f"  why:   {stop.message}")
    source = session.graph.sources.of(node)
    frame = source.user_frame if source is not None else None
    if frame is not None:
        lines.append(f"  source: {frame.location} in {frame.qualname}" + (f": {frame.code}" if frame.code else ""))
    if source is not None and source.module is not None:
        lines.append(f"  module: {source.module.text()}")
    lines.append("  inputs:")
    for name in node.all_inputs:
        text = summarize(session.value(name)).text() if session.has_value(name) else "(not computed)"
        lines.append(f"    {name}: {text}")
    if stop.reason in (StopReason.NAN, StopReason.INF):
        lines.append("  outputs:")
        for name in node.outputs:
            if name and session.has_value(name):
                lines.append(f"    {name}: {summarize(session.value(name)).text()}")
    return "\n".join(lines)


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, tuple):
        return list(o)
    return str(o)


if __name__ == "__main__":
    sys.exit(main())
