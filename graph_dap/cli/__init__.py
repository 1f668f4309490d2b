"""The ``graph-dap`` command line: a thin layer over the runtime's public API.

Exit status: 0 when a command completed, 1 when ``run`` stopped on a break or
``compare`` found a value out of tolerance, 2 on bad usage, a bad model or bad
inputs, or a path that cannot be read or written (one line on stderr, never a traceback), 130 when interrupted,
141 when the output's reader left (``| head``), 143 when terminated (a dump in progress then leaves no file under its
final name).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from graph_dap.cli.commands import COMMANDS
from graph_dap.cli.options import DELEGATED, EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_USAGE, UsageError, build_parser
from graph_dap.cli.scripts import SCRIPTS
from graph_dap.errors import GraphDapError


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SCRIPTS:
        try:
            return SCRIPTS[argv[0]](argv[1:])
        except UsageError as e:
            print(e, file=sys.stderr)
            return EXIT_USAGE
    if argv and argv[0] in DELEGATED:
        import importlib

        module = importlib.import_module(DELEGATED[argv[0]][1])
        return int(module.main(argv[1:]) or 0)
    parser = build_parser()
    restore = _terminate_as_exception()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        command = COMMANDS.get(args.command)
        if command is not None:
            return command(args)
    except UsageError as e:
        print(e, file=sys.stderr)
        return EXIT_USAGE
    except GraphDapError as e:
        print(f"graph-dap: {e}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:
        print("graph-dap: out of memory (the model, its inputs or its values do not fit in this machine's memory)", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # stdout's reader left (``| head``): nothing more to say
        _drop_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as e:  # the file system's answer on a path the user gave (or stdout: a full disk)
        _drop_stdout()
        where = f"{e.filename}: " if e.filename else "cannot write the output: "
        print(f"graph-dap: {where}{e.strerror or e}", file=sys.stderr)
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


#: The exit status of a command whose output's reader left (as a shell reports a SIGPIPE).
EXIT_BROKEN_PIPE = 141


def _drop_stdout() -> None:
    """Point stdout at the null device: what is left in its buffer cannot be written (its reader left, or the disk is
    full), and Python's flush at exit would report it again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (captured, closed)
        pass


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
