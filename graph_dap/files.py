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


def path_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be read, in words ("not found", "File name too long"), or None when it exists.

    ``Path.exists`` raises for a name the system refuses (longer than 255 bytes, say); this answers instead.
    """
    try:
        os.stat(path)
    except FileNotFoundError:
        return "not found"
    except (OSError, ValueError) as error:  # ValueError: an embedded NUL
        return getattr(error, "strerror", None) or str(error)
    return None


def _umask() -> int:
    """The process's umask (Linux: read, not set; elsewhere set and restored once, at import)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()


def temporary_beside(target: Path) -> tuple[int, str]:
    """A new file (descriptor, path) in ``target``'s folder, to be renamed over it once written.

    It gets the mode a plain ``open`` would give a new file (0666 less the umask), or the mode of the file
    it replaces: ``mkstemp``'s own 0600 would leave the user's dumps and listings readable by them alone.
    """
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:  # named by the folder the user gave, not by a temporary name they never chose
        raise type(e)(e.errno, e.strerror, str(target.parent)) from None
    try:
        mode = os.stat(target).st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_UMASK
    try:
        os.fchmod(fd, mode)
    except OSError:  # a file system without modes keeps its own
        pass
    return fd, tmp


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the whole new one."""
    target = Path(path)
    fd, tmp = temporary_beside(target)
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
    fd, tmp = temporary_beside(target)
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
