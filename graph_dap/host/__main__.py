"""``python -m graph_dap.host [MODE] [--] program.py ARGS... | -m module ARGS...``: run a program with its
``InferenceSession`` wrapped, in one of three modes.

- ``--connect HOST:PORT --folder DIR``: a mixed debug session (the adapter's ``program``
  launch starts this under debugpy); the token comes in ``GRAPH_DAP_HOST_TOKEN``.
- ``--script JSON``: ``graph-dap run-script`` (the JSON holds its options).
- ``--capture DIR``: ``graph-dap capture``.

The program runs as ``__main__`` with its own ``sys.argv``; its exit status is this
process's. Without onnxruntime the program runs unwrapped.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from graph_dap.host import hook
from graph_dap.host.program import Program


def _handler(args: argparse.Namespace) -> hook.Handler:
    if args.connect:
        from graph_dap.host import protocol as hp
        from graph_dap.host.debugged import DebuggedHandler
        from graph_dap.host.link import Link, LinkError

        handler = DebuggedHandler(args.folder or os.getcwd())
        try:
            handler.link = Link.connect(args.connect, os.environ.pop(hp.TOKEN_ENV, ""), handler.configure)
        except LinkError as error:
            print(f"graph-dap: {error}; the program runs without graph debugging", file=sys.stderr)
            return hook.Handler()
        if handler.debugger is not None:
            handler.debugger.set_nodelay()
        return handler
    if args.script:
        from graph_dap.host.script import ScriptHandler

        return ScriptHandler.from_json(args.script)
    if args.capture:
        from graph_dap.host.capture import CaptureHandler

        return CaptureHandler.from_json(args.capture)
    return hook.Handler()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the mode, install the wrapper, run the program (its SystemExit and exceptions pass through)."""
    items = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m graph_dap.host", description="Run a program with graph-dap's wrapper.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--connect", metavar="HOST:PORT", help="the adapter of a mixed debug session")
    mode.add_argument("--script", metavar="JSON", help="graph-dap run-script's options")
    mode.add_argument("--capture", metavar="JSON", help="graph-dap capture's options")
    parser.add_argument("--folder", help="with --connect: where feeds and outputs are exchanged")
    ours, program_argv = _split(items)
    args = parser.parse_args(ours)
    try:
        program = Program.parse(program_argv)
    except ValueError as error:
        parser.error(str(error))
    hook.install_when_imported(_handler(args))
    program.run()
    return 0


def _split(items: list[str]) -> tuple[list[str], list[str]]:
    """Our options (before ``--`` or the first item that is not one of them), and the program's argv."""
    ours: list[str] = []
    i = 0
    while i < len(items):
        item = items[i]
        if item == "--":
            return ours, items[i + 1 :]
        if item in ("--connect", "--script", "--capture", "--folder") and i + 1 < len(items):
            ours += items[i : i + 2]
            i += 2
            continue
        if item in ("-h", "--help"):
            ours.append(item)
            i += 1
            continue
        break
    return ours, items[i:]


if __name__ == "__main__":
    sys.exit(main())
