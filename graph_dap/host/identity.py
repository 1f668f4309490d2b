"""Which model an ``InferenceSession`` runs, and how it was made: what the host tells graph-dap about it.

A model is known by its resolved path, or by the SHA-256 of its bytes when the program
gave bytes (the bytes are then written to a file once, for the runtime to load).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graph_dap.files import write_bytes_atomic
from graph_dap.kinds import OptLevel

#: onnxruntime's GraphOptimizationLevel values by the names graph-dap's ``optLevel`` takes.
_OPT_LEVELS = {0: OptLevel.NONE, 1: OptLevel.BASIC, 2: OptLevel.EXTENDED, 3: OptLevel.ALL, 99: OptLevel.ALL}


@dataclass(frozen=True, slots=True)
class ModelIdentity:
    """A session's model: ``key`` (a resolved path, or ``sha256:HEX``), where it came from, how to show it."""

    key: str
    path: str | None  # the file the program gave
    data: bytes | None  # the bytes the program gave, when it gave bytes
    name: str

    @property
    def digest(self) -> str:
        return self.key[len("sha256:") :] if self.key.startswith("sha256:") else ""

    def file(self, folder: str | os.PathLike[str]) -> str:
        """A file holding the model: the program's own, or its bytes written to ``folder`` once."""
        if self.path is not None:
            return self.path
        assert self.data is not None
        target = Path(folder) / f"model-{self.digest[:16]}.onnx"
        if not target.exists():
            write_bytes_atomic(target, self.data)
        return str(target)


def identify(session: Any) -> ModelIdentity | None:
    """The model of an ``onnxruntime.InferenceSession`` (None for one made without a path or bytes)."""
    path = getattr(session, "_model_path", None)
    if path:
        resolved = os.path.realpath(os.fspath(path))
        return ModelIdentity(resolved, resolved, None, os.path.basename(resolved))
    data = getattr(session, "_model_bytes", None)
    if isinstance(data, bytes | bytearray) and data:
        digest = hashlib.sha256(data).hexdigest()
        return ModelIdentity(f"sha256:{digest}", None, bytes(data), f"model (bytes, sha256 {digest[:8]})")
    return None


def opt_level_of(session: Any) -> OptLevel:
    """The session's graph optimization level, by graph-dap's name for it (``all`` when unknown)."""
    try:
        level = int(session.get_session_options().graph_optimization_level)
    except (AttributeError, TypeError, ValueError):
        return OptLevel.ALL
    return _OPT_LEVELS.get(level, OptLevel.ALL)


def providers_of(session: Any) -> tuple[str, ...]:
    """The execution providers the session runs on."""
    try:
        return tuple(session.get_providers())
    except (AttributeError, TypeError):
        return ("CPUExecutionProvider",)
