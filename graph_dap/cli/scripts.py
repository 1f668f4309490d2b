"""``graph-dap run-script`` and ``graph-dap capture``: a Python program run with onnxruntime's sessions wrapped."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from graph_dap.cli.options import EXIT_COMPLETED, Parser, UsageError, parse_filters
from graph_dap.kinds import FAULT_FILTERS, BreakFilter

_RUN_SCRIPT_USAGE = """usage: graph-dap run-script [--break-on FILTERS] [--break SPEC]... [--inf-exclude PATTERN]... [--nan-exclude PATTERN]...
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

    valued = {"--break-on": "filters", "--break": "breaks", "--inf-exclude": "inf_exclude", "--nan-exclude": "nan_exclude", "--provider": "providers"}
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
                    raise UsageError(f"graph-dap run-script: {name} needs a value")
                i += 1
                value = argv[i]
            found[valued[name]].append(value)
        else:
            program.append(item)
        i += 1
    if not program or program == ["-m"]:
        raise UsageError("graph-dap run-script: give the program to run: SCRIPT [ARGS...] or -m MODULE [ARGS...]")
    filters = [f for text in found["filters"] for f in parse_filters(text)] or [BreakFilter.ERROR.value]
    bad = sorted(set(filters) - set(FAULT_FILTERS))
    if bad:
        raise UsageError(f"graph-dap run-script: unknown filter '{bad[0]}' in --break-on; expected {', '.join(FAULT_FILTERS)}")
    if program[0] != "-m" and not os.path.isfile(program[0]):
        raise UsageError(f"graph-dap run-script: no such program: {program[0]}")
    options = ScriptOptions(
        tuple(filters), tuple(found["breaks"]), tuple(found["inf_exclude"]), tuple(found["providers"]), as_json, tuple(found["nan_exclude"])
    )
    return run_script(program, options)


def _capture(argv: list[str]) -> int:
    """``graph-dap capture --out DIR [--only-nonfinite] -- COMMAND...``."""
    from graph_dap.host.capture import CaptureOptions, capture

    if "--" not in argv:
        if any(a in ("-h", "--help") for a in argv):
            print(_CAPTURE_USAGE)
            return EXIT_COMPLETED
        raise UsageError("graph-dap capture: put the command after --: graph-dap capture --out DIR -- python infer.py")
    split = argv.index("--")
    parser = Parser(prog="graph-dap capture", add_help=False)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only-nonfinite", action="store_true")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        raise UsageError("graph-dap capture: no command after --")
    try:
        status, kept = capture(command, CaptureOptions(args.out, args.only_nonfinite))
    except FileNotFoundError as e:
        raise UsageError(f"graph-dap capture: {e}") from None
    print(f"graph-dap capture: {kept} run call(s) recorded in {args.out}", file=sys.stderr)
    return status


#: The commands that take a program's command line after graph-dap's options (not argparse's).
SCRIPTS: dict[str, Callable[[list[str]], int]] = {"run-script": _run_script, "capture": _capture}
