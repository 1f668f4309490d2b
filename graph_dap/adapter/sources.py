"""The model's Python source files on this machine: stack-trace paths (the exporting machine's) to local files.

A stack trace names files as they were where the model was exported. :class:`SourceFiles`
finds each here, as debugpy does for a remote process: the launch's ``pathMappings``
(``[{"localRoot", "remoteRoot"}]``) first, then the path itself, then a search under the
workspace and the model's folder for the file with the longest matching path tail. It
answers the other way too: which stack-trace path a file the client names is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from graph_dap.paths import LIBRARY, same_file, split_path, tail_length

#: Folders the tail search does not enter (environments, caches, other tools' trees).
_SKIP = frozenset({"node_modules", "__pycache__", "site-packages", "dist-packages", "venv", "env"})
_MAX_ENTRIES = 50_000  # files and folders the tail search looks at, at most, per root


def _needed_tail(remote: str) -> int:
    """How much of its tail a found file must share with ``remote``: its name; for torch's files, from ``torch/`` on."""
    parts = split_path(remote)
    if LIBRARY in parts[:-1]:
        return len(parts) - max(i for i, p in enumerate(parts[:-1]) if p == LIBRARY)
    return 1


@dataclass(frozen=True, slots=True)
class PathMapping:
    """``remoteRoot`` (a folder of the exporting machine) is ``localRoot`` here."""

    local_root: str
    remote_root: str

    def apply(self, remote: str) -> str | None:
        """``remote`` under ``local_root``, when it is under ``remote_root``."""
        root = split_path(self.remote_root)
        parts = split_path(remote)
        if not root or parts[: len(root)] != root:
            return None
        return os.path.join(self.local_root, *parts[len(root) :])


@dataclass(slots=True)
class SourceFiles:
    """Finds the stack traces' files here, and remembers what it found."""

    mappings: tuple[PathMapping, ...] = ()
    roots: tuple[str, ...] = ()  # where the tail search looks: the workspace, the model's folder
    _found: dict[str, str | None] = field(default_factory=dict)
    _index: dict[str, list[str]] | None = None  # file name -> paths under the roots

    def local(self, remote: str) -> str | None:
        """The file here that ``remote`` names, or None."""
        if remote not in self._found:
            self._found[remote] = self._find(remote)
        return self._found[remote]

    def remote_for(self, local: str, remotes: Sequence[str]) -> str | None:
        """Which of ``remotes`` (stack-trace paths) is the file ``local`` here."""
        for remote in remotes:
            found = self.local(remote)
            if found is not None and same_file(found, local):
                return remote
        return None

    def _find(self, remote: str) -> str | None:
        for mapping in sorted(self.mappings, key=lambda m: -len(split_path(m.remote_root))):
            mapped = mapping.apply(remote)
            if mapped is not None and os.path.isfile(mapped):
                return os.path.abspath(mapped)
        if os.path.isabs(remote) and os.path.isfile(remote):
            return remote
        name = split_path(remote)[-1] if split_path(remote) else ""
        candidates = self._candidates(name)
        need = _needed_tail(remote)
        best = max(candidates, key=lambda c: (tail_length(c, remote), -len(c)), default=None)
        if best is None or tail_length(best, remote) < need:
            return None
        return best

    def _candidates(self, name: str) -> list[str]:
        if self._index is None:
            self._index = _index_files(self.roots)
        return self._index.get(name, [])


def _index_files(roots: Iterable[str]) -> dict[str, list[str]]:
    """The ``.py`` files under ``roots`` by name, skipping hidden and environment folders."""
    index: dict[str, list[str]] = {}
    seen: set[str] = set()
    for root in roots:
        if not root or not os.path.isdir(root):
            continue
        real = os.path.realpath(root)
        if real in seen:
            continue
        seen.add(real)
        count = 0
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIP]
            count += len(dirs) + len(files)
            for f in files:
                if f.endswith(".py"):
                    index.setdefault(f, []).append(os.path.abspath(os.path.join(folder, f)))
            if count > _MAX_ENTRIES:
                break
    for paths in index.values():
        paths[:] = list(dict.fromkeys(paths))
    return index
