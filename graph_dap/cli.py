"""The ``graph-dap`` command line: a thin layer over the runtime's public API.

Exit status: 0 when a run completed, 1 when it stopped on a break, 2 on bad
usage, a bad model or bad inputs (one line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from .runtime import BreakpointSpec, DebugSession, GraphDapError, Stop, StopReason, render_listing, summarize

EXIT_COMPLETED, EXIT_STOPPED, EXIT_USAGE = 0, 1, 2


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
    run.add_argument("--break", dest="breaks", action="append", default=[], metavar="SPEC",
                     help="node id, value name, op:TYPE or a glob on node ids")
    run.add_argument("--break-on", default="error", metavar="FILTERS", help="comma list of nan, inf, error (default: error)")
    run.add_argument("--inf-exclude", action="append", default=[], metavar="PATTERN",
                     help="node glob or op:TYPE whose Inf the inf filter ignores (e.g. attention masks)")
    run.add_argument("--provider", action="append", default=[], metavar="NAME", help="onnxruntime execution provider")
    run.add_argument("--json", action="store_true", help="print one JSON object on stdout")

    lst = sub.add_parser("listing", help="print the model's graph listing")
    lst.add_argument("model")
    lst.add_argument("--out", help="write it to this file instead of stdout")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        if args.command == "run":
            return _run(args)
        if args.command == "listing":
            return _listing(args)
    except _UsageError as e:
        print(e, file=sys.stderr)
        return EXIT_USAGE
    except GraphDapError as e:
        print(f"graph-dap: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("graph-dap: interrupted", file=sys.stderr)
        return 130
    return EXIT_USAGE


def _listing(args: argparse.Namespace) -> int:
    from .runtime import load_graph
    from .runtime.files import write_text_atomic

    text = render_listing(load_graph(args.model)).text
    if args.out:
        write_text_atomic(args.out, text)
    else:
        sys.stdout.write(text)
    return EXIT_COMPLETED


def _run(args: argparse.Namespace) -> int:
    bar = _ProgressBar() if sys.stderr.isatty() and not args.json else None
    session = DebugSession(
        args.model,
        args.inputs,
        dims=_dims(args.dim),
        providers=args.provider or None,
        break_on=_filters(args.break_on),
        inf_exclude=args.inf_exclude,
        on_log=(lambda line: print(line, file=sys.stderr)) if args.json else print,
        on_progress=bar.update if bar else None,
    )
    bps = session.set_breakpoints([BreakpointSpec(s) for s in args.breaks])
    for bp in bps:
        if not bp.verified:
            raise _UsageError(f"graph-dap: --break {bp.spec.spec}: {bp.message}")
    stop = session.start()
    if stop.reason is StopReason.ENTRY:
        stop = session.continue_()
    if bar:
        bar.close()
    report = _report(session, stop)
    if args.json:
        print(json.dumps(report, default=_json_default))
    else:
        print(_text_report(session, stop, report))
    return EXIT_COMPLETED if report["status"] == "completed" else EXIT_STOPPED


def _report(session: DebugSession, stop: Stop) -> dict[str, Any]:
    completed = stop.reason is StopReason.END and stop.node is None
    node = stop.node
    summaries: dict[str, Any] = {}
    if node is not None:
        for name in list(node.all_inputs) + [o for o in node.outputs if o]:
            if session.has_value(name):
                summaries[name] = summarize(session.value(name)).to_dict()
    else:
        for name, v in session.outputs().items():
            summaries[name] = summarize(v).to_dict()
    reason = None if completed else stop.reason.value
    if stop.reason is StopReason.END and not completed:
        reason = "error"
    return {
        "status": "completed" if completed else "stopped",
        "reason": reason,
        "node": None if node is None else {"name": node.id, "op_type": node.op_type, "index": node.index},
        "tensor": stop.tensor,
        "message": stop.message,
        "details": stop.details,
        "summaries": summaries,
    }


def _text_report(session: DebugSession, stop: Stop, report: dict[str, Any]) -> str:
    node = stop.node
    lines: list[str] = []
    if report["status"] == "completed":
        lines.append(f"completed: {len(session.sequence)} nodes ran")
        lines.append("outputs:")
        for name, v in session.outputs().items():
            lines.append(f"  {name}: {summarize(v).text()}")
        return "\n".join(lines)
    assert node is not None
    why = {"nan": "NaN", "inf": "Inf", "error": "node error", "breakpoint": "breakpoint"}.get(str(report["reason"]), str(report["reason"]))
    lines.append(f"stopped ({why}) at {node.id} ({node.op_type})")
    lines.append(f"  where: node {node.order + 1} of {len(session.graph.nodes)} in run order, index {node.index} in the file")
    if stop.message:
        lines.append(f"  why:   {stop.message}")
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


class _ProgressBar:
    """A one-line progress bar on stderr, redrawn at most 10 times a second."""

    def __init__(self, width: int = 30) -> None:
        self.width = width
        self._last = 0.0
        self._drawn = False

    def update(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last < 0.1 and done < total:
            return
        self._last = now
        filled = int(self.width * done / max(total, 1))
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} nodes")
        sys.stderr.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            sys.stderr.write("\r" + " " * (self.width + 30) + "\r")
            sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())
