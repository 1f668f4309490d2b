"""Files: written safely (to a temporary name in the same folder, then renamed); what reading a broken one raises."""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: What reading a missing, truncated or foreign .npy/.npz raises (numpy.load and zipfile).
ARCHIVE_ERRORS: tuple[type[Exception], ...] = (OSError, ValueError, EOFError, zipfile.BadZipFile)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the whole new one."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def save_npz_atomic(path: str | os.PathLike[str], arrays: Mapping[str, Any]) -> None:
    """Write ``arrays`` as an uncompressed ``.npz`` keyed by name, to a temporary name then renamed.

    numpy is imported here, not at the top: the adapter imports this module and loads no numpy.
    """
    import numpy as np

    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
