"""Logging of graph-dap itself: per-module verbosity from one environment variable.

``GRAPH_DAP_LOG=adapter=2,runtime.engine=3`` turns on level 2 for ``adapter`` (and
every module under it) and level 3 for ``runtime.engine``; a bare ``GRAPH_DAP_LOG=1``
turns on level 1 everywhere. Levels: 0 off, 1 info, 2 debug, 3 trace (or those
names). Off by default. ``GRAPH_DAP_LOG_FILE=PATH`` appends to a file instead of
stderr (stdout may be a protocol channel).

A disabled call costs one int comparison and no formatting: arguments are
formatted ``%``-style only when the line is written. In a hot loop, guard on the
level itself: ``if log.level >= 3: log.trace(...)``.

Every line carries a prefix: ``[graph-dap 1234 +0.125s runtime.dump node=conv] message``,
where ``node=conv`` comes from :func:`context` (nested contexts add up).
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["ENV", "ENV_FILE", "INFO", "DEBUG", "TRACE", "Logger", "configure", "context", "get_logger", "parse_spec"]

ENV = "GRAPH_DAP_LOG"
ENV_FILE = "GRAPH_DAP_LOG_FILE"
OFF, INFO, DEBUG, TRACE = 0, 1, 2, 3
_NAMES = {"off": OFF, "info": INFO, "debug": DEBUG, "trace": TRACE}
_TAGS = {INFO: "I", DEBUG: "D", TRACE: "T"}

_lock = threading.Lock()
_loggers: dict[str, Logger] = {}
_levels: dict[str, int] = {}  # module prefix -> level; "" is every module
_stream: TextIO | None = None
_t0 = time.monotonic()
_context: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("graph_dap_log_context", default=())


class Logger:
    """The logger of one module; ``level`` is a plain int, checked before anything else."""

    __slots__ = ("name", "level")

    def __init__(self, name: str, level: int) -> None:
        self.name = name
        self.level = level

    def enabled(self, level: int) -> bool:
        return self.level >= level

    def info(self, msg: str, *args: Any) -> None:
        if self.level >= INFO:
            _emit(self.name, INFO, msg, args)

    def debug(self, msg: str, *args: Any) -> None:
        if self.level >= DEBUG:
            _emit(self.name, DEBUG, msg, args)

    def trace(self, msg: str, *args: Any) -> None:
        if self.level >= TRACE:
            _emit(self.name, TRACE, msg, args)

    def log(self, level: int, msg: str, *args: Any) -> None:
        if self.level >= level > OFF:
            _emit(self.name, level, msg, args)

    def __repr__(self) -> str:
        return f"Logger({self.name!r}, level={self.level})"


def _module_name(module: str) -> str:
    name = module.strip()
    if name == "graph_dap":
        return ""
    return name[len("graph_dap.") :] if name.startswith("graph_dap.") else name


def _level_for(name: str) -> int:
    """The level of the most specific prefix of ``name`` (by dotted parts) that the spec names."""
    parts = name.split(".") if name else []
    for i in range(len(parts), -1, -1):
        key = ".".join(parts[:i])
        if key in _levels:
            return _levels[key]
    return OFF


def get_logger(module: str) -> Logger:
    """The logger of ``module`` (``__name__`` works: the ``graph_dap.`` prefix is dropped)."""
    name = _module_name(module)
    with _lock:
        logger = _loggers.get(name)
        if logger is None:
            logger = _loggers[name] = Logger(name, _level_for(name))
        return logger


def parse_spec(spec: str) -> tuple[dict[str, int], list[str]]:
    """``"adapter=2,runtime.engine=debug"`` -> levels by module prefix, and the items not understood."""
    levels: dict[str, int] = {}
    bad: list[str] = []
    for item in spec.replace(";", ",").split(","):
        item = item.strip()
        if not item:
            continue
        module, sep, value = item.rpartition("=")
        if not sep:
            module, value = "", item
        module = _module_name(module)
        if module in ("*", "all"):
            module = ""
        value = value.strip().lower()
        if value in _NAMES:
            levels[module] = _NAMES[value]
        elif value.isdigit():
            levels[module] = min(int(value), TRACE)
        else:
            bad.append(item)
    return levels, bad


def configure(spec: str | None = None, stream: TextIO | None = None) -> None:
    """Set the levels from ``spec`` (default: the environment) and where lines go (default: stderr or the log file)."""
    global _stream
    text = os.environ.get(ENV, "") if spec is None else spec
    levels, bad = parse_spec(text)
    with _lock:
        _levels.clear()
        _levels.update(levels)
        for name, logger in _loggers.items():
            logger.level = _level_for(name)
        _stream = stream
    if bad:
        print(
            f"graph-dap: {ENV}: ignoring {', '.join(repr(b) for b in bad)}; expected MODULE=LEVEL items "
            "with LEVEL 0-3 or off/info/debug/trace",
            file=sys.stderr,
        )


@contextmanager
def context(label: str) -> Iterator[None]:
    """Add ``label`` (e.g. ``node=conv``, ``req=12``) to the prefix of every line logged inside."""
    token = _context.set(_context.get() + (label,))
    try:
        yield
    finally:
        _context.reset(token)


def _target() -> TextIO:
    global _stream
    if _stream is None:
        path = os.environ.get(ENV_FILE)
        if path:
            try:
                _stream = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives as long as the process
            except OSError:
                _stream = sys.stderr
        else:
            return sys.stderr
    return _stream


def _emit(name: str, level: int, msg: str, args: tuple[Any, ...]) -> None:
    try:
        text = msg % args if args else msg
    except Exception as e:  # noqa: BLE001 - a bad format string (any kind of error) must not break the program it logs
        text = f"{msg!r} % {args!r} (format failed: {e})"
    ctx = " ".join(_context.get())
    prefix = f"[graph-dap {os.getpid()} +{time.monotonic() - _t0:.3f}s {name or 'graph_dap'}{' ' + ctx if ctx else ''}] {_TAGS.get(level, 'T')}"
    lines = "".join(f"{prefix} {line}\n" for line in (text.splitlines() or [""]))
    with _lock:
        stream = _target()
        try:
            stream.write(lines)
            stream.flush()
        except (OSError, ValueError):
            pass


configure()
