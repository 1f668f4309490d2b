"""The Python debugger of this process (pydevd, under debugpy), if there is one: one thread stopped in its call.

While a debugged ``run`` call's graph is stopped, the thread that called ``run`` shows
in the Python debugger as stopped at the caller's line, with its frames, variables and
evaluate working there, while the program's other threads run on. pydevd stops every
thread together when one hits a breakpoint; this stops only the calling thread, the way
pydevd's own trace function stops one (the thread is marked suspended, then waits in
``do_wait_suspend`` on the caller's frame), and the adapter tells the client that the
other threads still run. The thread is resumed by the client (continue, step: a ``next``
then stops at the caller's next line, once the call has returned) or here when the
call's result comes (:meth:`PythonDebugger.resume`).

This leans on pydevd's internals (debugpy 1.8 vendors it); anything missing makes
:meth:`PythonDebugger.find` answer None, and the calling thread then simply waits.
"""

from __future__ import annotations

import socket
import sys
import threading
from types import FrameType
from typing import Any


class PythonDebugger:
    """pydevd in this process: the ids it gives threads, and stopping and resuming one thread."""

    def __init__(self, py_db: Any, parts: dict[str, Any]) -> None:
        self._db = py_db
        self._parts = parts

    @classmethod
    def find(cls) -> PythonDebugger | None:
        """The debugger, when this process runs under debugpy (None otherwise, or when its internals differ)."""
        if "pydevd" not in sys.modules:
            return None
        try:
            from _pydevd_bundle._debug_adapter.pydevd_base_schema import BaseSchema
            from _pydevd_bundle.pydevd_additional_thread_info import set_additional_thread_info
            from _pydevd_bundle.pydevd_comm_constants import CMD_SET_BREAK
            from _pydevd_bundle.pydevd_constants import get_current_thread_id, get_global_debugger
            from _pydevd_bundle.pydevd_thread_lifecycle import internal_run_thread, mark_thread_suspended
        except ImportError:
            return None
        py_db = get_global_debugger()
        needed = ("do_wait_suspend", "get_internal_queue_and_event", "_threads_suspended_single_notification")
        if py_db is None or not all(hasattr(py_db, n) for n in needed):
            return None
        return cls(
            py_db,
            {
                "dap_id": BaseSchema._translate_id_to_dap,
                "info": set_additional_thread_info,
                "break": CMD_SET_BREAK,
                "thread_id": get_current_thread_id,
                "run": internal_run_thread,
                "mark": mark_thread_suspended,
            },
        )

    def dap_thread_id(self, thread: threading.Thread) -> int:
        """The thread's id in the DAP that debugpy speaks."""
        return int(self._parts["dap_id"](self._parts["thread_id"](thread)))

    def set_nodelay(self) -> None:
        """TCP_NODELAY on pydevd's socket to debugpy's adapter: without it, each answer waits ~40 ms (Nagle)."""
        writer = getattr(self._db, "writer", None)
        sock = getattr(writer, "sock", None)
        if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def mark(self, thread: threading.Thread) -> None:
        """Mark the calling thread suspended (as at a breakpoint), not the others; :meth:`wait` then stops it."""
        self._db._threads_suspended_single_notification.increment_suspend_time()
        self._parts["mark"](thread, self._parts["break"])

    def wait(self, thread: threading.Thread, frame: FrameType) -> None:
        """Stop here, shown at ``frame`` (the caller's line), until the client or :meth:`resume` lets it run."""
        self._db.do_wait_suspend(thread, frame, "line", None)

    def resume(self, thread: threading.Thread) -> None:
        """Let a thread stopped in :meth:`wait` run (from another thread)."""
        self._parts["run"](thread, self._parts["info"])
        _, event = self._db.get_internal_queue_and_event(self._parts["thread_id"](thread))
        event.set()
