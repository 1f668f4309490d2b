"""Optimized segment models kept on disk, so that a second launch of the same model skips optimizing them.

Building a session at an optimization level above ``none`` spends most of its time in
onnxruntime's optimizer. The first build saves the graph the optimizer made
(``optimized_model_filepath``); a later build of the same segment loads that graph with
optimizations off, which runs the same kernels on the same graph. Entries are keyed by
the segment model's bytes, the level, the providers, onnxruntime's version and the CPU
(the blocked NCHWc layout depends on it); written under a temporary name and renamed;
the folder is kept under a size limit, oldest entries out first.

The folder is ``$GRAPH_DAP_CACHE`` (``off`` turns the cache off), else ``~/.cache/graph-dap/segments``.
"""

from __future__ import annotations

import hashlib
import os
import platform
import threading
import time
from pathlib import Path

import onnxruntime as ort

from graph_dap import log as _log

_logger = _log.get_logger(__name__)
LIMIT_BYTES = 2 << 30  # the folder's size
MAX_ENTRY_BYTES = 512 << 20  # larger segment models are not cached (their weights would be written again)
_lock = threading.Lock()


def folder() -> Path | None:
    """Where the cache lives; None when it is turned off (or cannot be made)."""
    where = os.environ.get("GRAPH_DAP_CACHE")
    if where and where.lower() in ("off", "0", "none"):
        return None
    path = Path(where) if where else Path.home() / ".cache" / "graph-dap" / "segments"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        _logger.info("no segment cache: cannot make %s (%s)", path, e)
        return None
    return path


def _machine() -> str:
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        pass
    return f"{platform.machine()} {ort.__version__} {hashlib.sha256(flags.encode()).hexdigest()[:16]}"


_MACHINE = _machine()


def key(model_bytes: bytes, opt_level: str, providers: list[str]) -> str:
    h = hashlib.sha256(model_bytes)
    h.update(f"|{opt_level}|{','.join(providers)}|{_MACHINE}".encode())
    return h.hexdigest()


def lookup(entry: str) -> Path | None:
    """The cached optimized model of ``entry``, if there is one (touched: it is recent now)."""
    root = folder()
    if root is None:
        return None
    path = root / f"{entry}.onnx"
    if not path.is_file():
        return None
    try:
        os.utime(path)
    except OSError:
        return None
    return path


def target(entry: str) -> tuple[Path, Path] | None:
    """Where a build saves ``entry``'s optimized model: a temporary path, and the final one to rename it to."""
    root = folder()
    if root is None:
        return None
    final = root / f"{entry}.onnx"
    return root / f".{entry}.{os.getpid()}.{threading.get_ident()}.tmp", final


def commit(tmp: Path, final: Path) -> None:
    """Move a saved optimized model into place, then keep the folder within its limit."""
    try:
        if tmp.is_file() and tmp.stat().st_size <= MAX_ENTRY_BYTES:
            os.replace(tmp, final)
        else:
            tmp.unlink(missing_ok=True)
    except OSError as e:
        _logger.info("segment cache: cannot keep %s (%s)", final, e)
        tmp.unlink(missing_ok=True)
        return
    _trim(final.parent)


#: A temporary file older than this is a build's that never finished (its process was killed): removed.
STALE_TMP_SECONDS = 3600


def _trim(root: Path) -> None:
    """Remove the oldest entries until the folder is within :data:`LIMIT_BYTES`, and stale temporary files.

    Another process may trim (or commit) at the same time: an entry that is gone is skipped, not fatal."""
    now = time.time()
    with _lock:
        try:
            listing = list(root.iterdir())
        except OSError:
            return
        entries = []
        for path in listing:
            try:
                st = path.stat()
                if path.name.endswith(".tmp") and now - st.st_mtime > STALE_TMP_SECONDS:
                    path.unlink()
            except OSError:  # removed meanwhile (or not ours to remove)
                continue
            if path.name.endswith(".onnx"):
                entries.append((st.st_mtime, st.st_size, path))
        entries.sort()
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= LIMIT_BYTES:
                break
            try:
                path.unlink()
            except FileNotFoundError:  # another process removed it: it counts as out
                pass
            except OSError:
                continue
            total -= size
