"""Values replaced in a run as soon as they exist: ``--set NAME=FILE.npy`` and ``--set-from DUMP.npz[:NAME,...]``.

:meth:`Injection.parse` reads what a user wrote; :meth:`Injection.attach` checks it
against a :class:`DebugSession`'s model and returns an :class:`Injector`, which runs
the session and replaces each value right when it exists. A graph input, an
initializer or a constant is replaced at the start; a value a node computes is
replaced right after that node runs (an internal breakpoint on the node after it,
or the NaN/Inf stop on it), before any reader runs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graph_dap.errors import GraphDapError, InjectionError, InjectionSpecError
from graph_dap.files import ARCHIVE_ERRORS
from graph_dap.runtime.breakpoints import BreakpointSpec
from graph_dap.runtime.session import DebugSession, Stop, StopReason
from graph_dap.runtime.tools.dump import Dump, open_dump

__all__ = ["InjectionError", "InjectionSpecError", "Injection", "Injector"]


@dataclass(frozen=True, slots=True)
class Injection:
    """What to replace in a run, as given: files by value name, and dumps with the names to take from them."""

    files: tuple[tuple[str, str], ...] = ()  # (value name, .npy path)
    dumps: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (.npz path, names; none: every value the model has)
    base_dir: Path | None = None  # relative paths are under it (None: the working directory)

    @classmethod
    def parse(
        cls, sets: Iterable[str] = (), set_froms: Iterable[str] = (), base_dir: str | os.PathLike[str] | None = None
    ) -> Injection:
        """From ``NAME=FILE.npy`` items and ``DUMP.npz`` or ``DUMP.npz:NAME,...`` items."""
        files = []
        for item in sets:
            name, sep, path = item.partition("=")
            if not sep or not name or not path:
                raise InjectionSpecError(f"--set expects NAME=FILE.npy, got '{item}'")
            files.append((name, path))
        dumps = [_split_set_from(item) for item in set_froms]
        return cls(tuple(files), tuple(dumps), Path(base_dir) if base_dir else None)

    def _path(self, text: str) -> Path:
        return Path(text) if self.base_dir is None else self.base_dir / text

    def attach(self, session: DebugSession) -> Injector:
        """Check every name and file against ``session``'s model; the :class:`Injector` that runs it.

        Dumps are opened here and stay open until :meth:`Injector.close`.
        """
        graph = session.graph
        loaders: dict[str, tuple[str, Callable[[], Any]]] = {}
        dumps: list[Dump] = []
        try:
            for name, path in self.files:
                if not graph.has_value(name):
                    raise InjectionError(f"--set {name}: the model has no value '{name}'")
                file = self._path(path)
                if not file.is_file():
                    raise InjectionError(f"--set {name}: file not found: {file}")
                loaders[name] = (str(file), functools.partial(_load_npy, file, name))
            for path, names in self.dumps:
                dump = open_dump(self._path(path))
                dumps.append(dump)
                for name in names or [n for n in dump.names if graph.has_value(n)]:
                    if not dump.has(name):
                        raise InjectionError(f"--set-from {path}: the dump has no value '{name}'")
                    if not graph.has_value(name):
                        raise InjectionError(f"--set-from {path}: the model has no value '{name}'")
                    loaders[name] = (f"{path}:{name}", functools.partial(dump.get, name))
        except BaseException:
            for d in dumps:
                d.close()
            raise
        return Injector(session, loaders, dumps)


class Injector:
    """An :class:`Injection` attached to a session: runs it, replacing each value as soon as it exists.

    Set :meth:`breakpoints` on the session (with the user's own) and put their ids in
    ``internal_ids``: a stop on those alone is the injector's, and the run goes on.
    """

    def __init__(
        self, session: DebugSession, loaders: dict[str, tuple[str, Callable[[], Any]]], dumps: Sequence[Dump] = ()
    ) -> None:
        self.session = session
        self._loaders = loaders  # value name -> (where it comes from, how to read it)
        self._dumps = list(dumps)
        self.applied: list[str] = []
        self.internal_ids: set[int] = set()
        graph = session.graph
        seq = session.sequence
        pos = {n.id: i for i, n in enumerate(seq)}
        self._early: list[str] = []
        self._after: dict[str, list[str]] = {}  # node id of the producer -> values it makes that are replaced
        self._at: dict[str, str] = {}  # node id to stop before -> producer id
        self._at_end: list[str] = []
        for name in self._loaders:
            producer = graph.producer(name)
            if producer is None or producer.id not in pos:
                self._early.append(name)
                continue
            i = pos[producer.id]
            self._after.setdefault(producer.id, []).append(name)
            if i + 1 < len(seq):
                self._at[seq[i + 1].id] = producer.id
            else:
                self._at_end.append(producer.id)
        self._pending: dict[str, list[str]] = {}

    def breakpoints(self) -> list[BreakpointSpec]:
        """The internal breakpoints: one on the node after each producer of a replaced value."""
        return [BreakpointSpec(node_id) for node_id in self._at]

    def close(self) -> None:
        for d in self._dumps:
            d.close()

    def _apply(self, names: Sequence[str]) -> None:
        for name in names:
            source, load = self._loaders[name]
            try:
                self.session.set_value(name, load())
            except InjectionError:
                raise
            except GraphDapError as e:
                raise InjectionError(f"cannot set '{name}' from {source}: {e}") from None
            if name not in self.applied:
                self.applied.append(name)

    def start(self, restart: bool = False) -> Stop:
        """Start (or restart) the session and replace the values that exist before any node runs."""
        stop = self.session.restart() if restart else self.session.start()
        if stop.reason is StopReason.ERROR:
            return stop
        self._apply(self._early)
        self._pending = {k: list(v) for k, v in self._after.items()}
        return stop

    def continue_(self) -> Stop:
        """Continue to the end or the first stop that is not an injection's own."""
        while True:
            stop = self.session.continue_()
            node = stop.node
            if stop.reason is StopReason.BREAKPOINT and node is not None and node.id in self._at:
                producer = self._at[node.id]
                self._apply(self._pending.pop(producer, []))
                if set(stop.breakpoint_ids) <= self.internal_ids:
                    continue
                return stop
            if (
                stop.reason in (StopReason.NAN, StopReason.INF)
                and node is not None
                and stop.value in self._pending.get(node.id, ())
            ):
                self._apply(self._pending.pop(node.id))
                continue
            if stop.reason is StopReason.END:
                for producer in self._at_end:
                    self._apply(self._pending.pop(producer, []))
            return stop

    def run(self, restart: bool = False) -> Stop:
        """Run to the end or the first stop that is not an injection's own."""
        stop = self.start(restart)
        if stop.reason is StopReason.ERROR:
            return stop
        if not self._loaders:  # nothing to replace: as fast as the model runs
            return self.session.run_to_end(check_first=False)
        return self.continue_()


def _load_npy(path: Path, name: str) -> Any:
    try:
        value = np.load(path, allow_pickle=False)
    except ARCHIVE_ERRORS as e:
        raise InjectionError(f"--set {name}: cannot read {path} as a .npy array: {e}") from None
    if hasattr(value, "files"):
        value.close()
        raise InjectionError(f"--set {name}: {path} is an .npz archive; use --set-from {path}:NAME")
    return value


def _split_set_from(item: str) -> tuple[str, tuple[str, ...]]:
    lower = item.lower()
    at = lower.find(".npz:")
    if at >= 0:
        path, rest = item[: at + 4], item[at + 5 :]
        names = tuple(n for n in rest.split(",") if n)
        if not names:
            raise InjectionSpecError(f"--set-from expects DUMP.npz or DUMP.npz:NAME,..., got '{item}'")
        return path, names
    if not lower.endswith(".npz"):
        raise InjectionSpecError(f"--set-from expects a dump (.npz) optionally followed by :NAME,..., got '{item}'")
    return item, ()
