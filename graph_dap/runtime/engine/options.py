"""The options every graph-dap onnxruntime session uses, and the execution providers.

All sessions share onnxruntime's one global thread pool (per-session pools starve
each other when sessions alternate) and one CPU arena (a per-session arena keeps
each session's peak).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import onnxruntime as ort
from onnxruntime.capi import onnxruntime_pybind11_state as _ort_state

from graph_dap import log as _log
from graph_dap.errors import GraphDapError, OptionError
from graph_dap.kinds import OptLevel
from graph_dap.runtime.weights import FOLDER_OPTION

#: What onnxruntime raises for a model, a kernel or feeds it rejects (its own classes, and
#: RuntimeError for C++ exceptions). Anything else from a call into it is a bug of ours.
ORT_ERRORS: tuple[type[Exception], ...] = (RuntimeError,) + tuple(
    v for v in vars(_ort_state).values() if isinstance(v, type) and issubclass(v, Exception)
)

_logger = _log.get_logger(__name__)
_pool_lock = threading.Lock()
_pool_ready = False
_pool_threads: int | None = None  # intra-op threads of the global pool; 0: one per core; None: $GRAPH_DAP_THREADS, else 0
#: The environment variable that sizes the pool of every graph-dap process it reaches (adapters' workers, CLIs):
#: ``1`` where several run side by side on few cores (a test suite), whose idle pool threads spin for a while
#: after each run and take the cores the other processes need.
THREADS_ENV = "GRAPH_DAP_THREADS"

#: onnxruntime's graph optimization levels by the names graph-dap's options take.
OPT_LEVELS = {
    OptLevel.NONE: ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    OptLevel.BASIC: ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    OptLevel.EXTENDED: ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    OptLevel.ALL: ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def check_opt_level(level: str, given: str | None = None) -> OptLevel:
    """``level`` as the :class:`~graph_dap.kinds.OptLevel` it names, else an :class:`OptionError` saying which exist."""
    if level not in OPT_LEVELS:
        raise OptionError(f"unknown optimization level '{given or level}'; expected one of {', '.join(OptLevel.values())}")
    return OptLevel(level)


def set_thread_count(threads: int) -> None:
    """Size the process-wide pool: ``threads`` intra-op threads per run (0: one per core).

    Only before the first session of the process: a process that runs one model per
    core (a scan's worker) sets 1, so that N workers use N cores and no more.
    """
    global _pool_threads
    if threads < 0:
        raise OptionError(f"the thread count must be 0 (one per core) or more, got {threads}")
    with _pool_lock:
        if _pool_ready and threads != _pool_threads:
            raise OptionError(
                f"onnxruntime's thread pool of this process exists already ({_pool_threads or 'one per core'} threads); "
                "its size is set before the first session"
            )
        _pool_threads = threads


def _threads_from_env() -> int:
    given = os.environ.get(THREADS_ENV, "").strip()
    if not given:
        return 0
    if not given.isdigit():
        raise OptionError(f"{THREADS_ENV} must be a number of threads, 0 (one per core) or more; got '{given}'")
    return int(given)


_M_ARENA_MAX = -8  # glibc's mallopt parameter
_one_arena = False


def one_malloc_arena() -> None:
    """Have every thread of this process allocate from glibc's one main heap (``M_ARENA_MAX`` 1).

    glibc gives each new thread its own heap, so a session built and warmed up in the background
    (while the debugger is stopped) leaves its freed memory where the thread that then runs it cannot
    reuse it: resnet50's first watched continue ran its segment in 100-150 ms against 72-85 with one
    heap, and building a segment's session ahead took 520-840 ms against 325-350 (its optimizer's
    allocations faulting in fresh pages). onnxruntime's kernels allocate from its own arena, so one
    heap costs them no lock contention. Early in a process (before its threads allocate) is best; a
    no-op off glibc.
    """
    global _one_arena
    if _one_arena or not sys.platform.startswith("linux"):
        return
    _one_arena = True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(_M_ARENA_MAX, 1)
    except (OSError, AttributeError) as e:  # not glibc (musl has no arenas to merge)
        _logger.info("cannot set malloc's arenas: %s", e)


def ensure_global_thread_pool() -> None:
    """Create onnxruntime's process-wide thread pool once (before any session uses it)."""
    global _pool_ready, _pool_threads
    with _pool_lock:
        if _pool_ready:
            return
        if _pool_threads is None:
            _pool_threads = _threads_from_env()
        one_malloc_arena()
        try:
            ort.set_global_thread_pool_sizes(_pool_threads, 1)
        except ORT_ERRORS as e:  # set already by someone else in this process: sessions share theirs
            _logger.info("onnxruntime's global thread pool was set already (%s); graph-dap's sessions use it", e)
        try:
            # One CPU arena for every session: each session's own arena would keep its own peak.
            info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
            ort.create_and_register_allocator(info, None)
        except ORT_ERRORS as e:  # registered already in this process: sessions share it
            _logger.info("a shared CPU allocator was registered already (%s); graph-dap's sessions use it", e)
        _pool_ready = True


def session_options(opt_level: str = OptLevel.NONE, external_folder: Path | None = None) -> ort.SessionOptions:
    """Options every graph-dap session uses: the global pool, quiet logs, the given optimization level.

    ``external_folder``: where the external data that a model given as bytes references lives (the model's folder).
    """
    ensure_global_thread_pool()
    so = ort.SessionOptions()
    if external_folder is not None:
        so.add_session_config_entry(FOLDER_OPTION, str(external_folder))
    so.use_per_session_threads = False
    # fatal only: a node's failure reaches the user once, in the error graph-dap raises with onnxruntime's
    # message; logged too, it came out at every level of control flow and at every retry (issue 28)
    so.log_severity_level = 4
    so.graph_optimization_level = OPT_LEVELS[check_opt_level(opt_level)]
    so.add_session_config_entry("session.use_env_allocators", "1")
    return so


def check_providers(providers: Sequence[str] | None) -> list[str]:
    """The providers to use, checked against what this onnxruntime build offers."""
    available = ort.get_available_providers()
    if not providers:
        return ["CPUExecutionProvider"]
    out = []
    for p in providers:
        name = p if p.endswith("ExecutionProvider") else f"{p}ExecutionProvider"
        match = next((a for a in available if a.lower() == name.lower()), None)
        if match is None:
            raise GraphDapError(f"execution provider '{p}' is not available here (available: {', '.join(available)})")
        out.append(match)
    if "CPUExecutionProvider" not in out:
        out.append("CPUExecutionProvider")
    return out


def ort_message(e: BaseException) -> str:
    """onnxruntime's message without its ``[ONNXRuntimeError] : 2 : INVALID_ARGUMENT :`` prefix."""
    text = str(e).strip()
    # onnxruntime prefixes messages with "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : "
    if text.startswith("[ONNXRuntimeError]"):
        parts = text.split(" : ", 3)
        text = parts[-1] if len(parts) == 4 else text
    return text.splitlines()[0] if len(text) > 2000 else text
