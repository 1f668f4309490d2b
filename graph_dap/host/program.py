"""Running the program as Python would: a script by path, or a module (``-m``), as ``__main__``, with its own argv."""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Program:
    """What to run: a script path, or a module name (``module``), and its arguments."""

    target: str
    args: tuple[str, ...] = ()
    module: bool = False

    @classmethod
    def parse(cls, argv: Sequence[str]) -> Program:
        """``script.py ARGS...`` or ``-m module ARGS...``; raises ValueError when neither is given."""
        items = list(argv)
        if items and items[0] == "--":
            items = items[1:]
        if not items:
            raise ValueError("no program to run: give a script (program.py ARGS...) or a module (-m module ARGS...)")
        if items[0] == "-m":
            if len(items) < 2:
                raise ValueError("-m needs a module name")
            return cls(items[1], tuple(items[2:]), module=True)
        return cls(items[0], tuple(items[1:]))

    def run(self) -> None:
        """Run it in this process, as ``python script.py`` / ``python -m module`` would (exceptions propagate)."""
        if self.module:
            sys.argv = [self.target, *self.args]
            runpy.run_module(self.target, run_name="__main__", alter_sys=True)  # sys.path[0] is the cwd, as with -m
            return
        path = os.path.abspath(self.target)
        if not os.path.exists(path):
            raise FileNotFoundError(f"can't open file {self.target!r}: no such file")
        sys.argv = [self.target, *self.args]
        sys.path[0] = os.path.dirname(path)  # as ``python script.py`` has it (graph-dap itself is on PYTHONPATH)
        runpy.run_path(path, run_name="__main__")
