"""The local backend: worker processes on this machine, each with the model loaded once.

Each worker is a fresh process (forked from a server that has imported graph-dap,
never from the driver and its threads) that sizes onnxruntime's thread pool to
the threads per run, builds an :class:`~.runner.InputScanner`, and then runs one
item at a time from its pipe. The driver hands items out as workers come free (the
source is read lazily) and watches each process: a worker that dies is replaced,
and the input it was running runs again elsewhere (see :class:`~.backend.Suspects`).
A worker whose driver is gone (even killed) ends at its next read of the pipe.
"""

from __future__ import annotations

import enum
import multiprocessing as mp
import os
import signal
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from graph_dap.errors import GraphDapError
from graph_dap.runtime.tools.scan.backend import (
    START_DEATHS,
    BackendKind,
    Event,
    Incident,
    Outcome,
    Prefetch,
    ScanError,
    Suspects,
    death_text,
)
from graph_dap.runtime.tools.scan.runner import InputScanner, ScanConfig
from graph_dap.runtime.tools.scan.sources import WorkItem

_CLOSE_WAIT_S = 5.0
_POLL_S = 0.05  # how often an idle worker looks for inputs from a slow source


class Reply(enum.StrEnum):
    """What a worker process sends its driver: ``(READY, name)``, ``(FATAL, message)`` or ``(RESULT, result, feeds)``."""

    READY = "ready"  # its scanner is built
    FATAL = "fatal"  # its scanner could not be built: the scan stops
    RESULT = "result"  # one input scanned


def default_workers(threads: int) -> int:
    """As many workers as the cores allow at ``threads`` threads per run (at least one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(threads, 1))


def _context() -> Any:
    """Workers forked from a server that imported graph-dap once (quick to start, free of the driver's threads); else spawned."""
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["graph_dap.runtime.tools.scan.runner"])
        return ctx
    return mp.get_context("spawn")


def worker_main(conn: Connection, config: ScanConfig, threads: int, import_path: str | None) -> None:
    """A worker process: build the scanner, say ready, then scan items until the pipe says stop or closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides when workers stop
    if import_path and import_path not in sys.path:
        sys.path.insert(0, import_path)
    from graph_dap.runtime.engine.options import set_thread_count

    try:
        set_thread_count(threads)
        scanner = InputScanner(config)
    except GraphDapError as e:
        conn.send((Reply.FATAL, str(e)))
        return
    conn.send((Reply.READY, scanner.name))
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return  # the driver is gone
        if item is None:
            return
        result, feeds = scanner.scan(item)
        try:
            conn.send((Reply.RESULT, result, feeds))
        except (BrokenPipeError, OSError):
            return


@dataclass(slots=True)
class _Worker:
    process: Any
    conn: Connection
    name: str = ""
    ready: bool = False
    item: WorkItem | None = None  # the one item in flight


class LocalPool:
    """``workers`` processes, ``threads`` onnxruntime threads each."""

    def __init__(self, config: ScanConfig, workers: int, threads: int = 1, import_path: str | None = None) -> None:
        if workers < 1 or threads < 1:
            raise ScanError(f"a scan needs at least one worker and one thread per run, got {workers} and {threads}")
        self.config = config
        self.workers = workers
        self.threads = threads
        self.import_path = import_path
        self._context = _context()
        self._pool: list[_Worker] = []

    def describe(self) -> dict[str, Any]:
        return {"backend": BackendKind.LOCAL, "workers": self.workers, "threads_per_run": self.threads}

    def _spawn(self) -> _Worker:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(
            target=worker_main, args=(theirs, self.config, self.threads, self.import_path), name="graph-dap-scan", daemon=True
        )
        process.start()
        theirs.close()
        worker = _Worker(process, ours)
        self._pool.append(worker)
        return worker

    def run(self, items: Iterator[WorkItem]) -> Iterator[Event]:
        """Events as inputs finish; pulls ``items`` only when a worker is free."""
        suspects = Suspects()
        again: deque[WorkItem] = deque()  # inputs whose worker died: first in line
        feed = Prefetch(items, 2 * self.workers)
        start_deaths = 0
        for _ in range(self.workers):
            self._spawn()
        while True:
            for w in self._pool:
                if w.ready and w.item is None:
                    nxt = [again.popleft()] if again else feed.take(1)
                    if nxt:
                        w.item = nxt[0]
                        w.conn.send(w.item)
            if feed.exhausted and not again and all(w.item is None for w in self._pool):
                return
            starving = not feed.exhausted and any(w.ready and w.item is None for w in self._pool)
            ready = wait([w.conn for w in self._pool] + [w.process.sentinel for w in self._pool], _POLL_S if starving else None)
            for w in list(self._pool):
                if w.conn in ready:
                    try:
                        message = w.conn.recv()
                    except (EOFError, OSError):
                        message = None
                    if message is not None:
                        if message[0] is Reply.READY:
                            start_deaths = 0
                        event = self._message(w, message, suspects)
                        if event is not None:
                            yield event
                        continue
                if w.conn in ready or w.process.sentinel in ready:
                    w.process.join(_CLOSE_WAIT_S)
                    how = death_text(w.process.exitcode)
                    self._pool.remove(w)
                    w.conn.close()
                    if not w.ready:
                        start_deaths += 1
                        if start_deaths >= START_DEATHS:
                            raise ScanError(f"the scan's worker processes die as they start (the last {how})")
                    if w.item is not None:
                        events, retry = suspects.lost([w.item], w.name or f"pid {w.process.pid}", how)
                        yield from events
                        again.extend(retry)
                    else:
                        yield Incident(f"worker {w.name or w.process.pid} {how} while idle; another takes its place", w.name)
                    self._spawn()

    def _message(self, w: _Worker, message: tuple[Any, ...], suspects: Suspects) -> Event | None:
        kind = message[0]
        if kind is Reply.READY:
            w.ready, w.name = True, message[1]
            return None
        if kind is Reply.FATAL:
            raise ScanError(message[1])
        assert kind is Reply.RESULT and w.item is not None
        item, w.item = w.item, None
        result = message[1]
        attempts = suspects.attempts(item)
        if attempts > 1:
            result = result.replace(attempts=attempts)
        return Outcome(result, message[2])

    def close(self) -> None:
        """Ask every worker to stop, then end those that do not."""
        for w in self._pool:
            try:
                w.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for w in self._pool:
            w.process.join(_CLOSE_WAIT_S if w.item is None else 0.1)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(_CLOSE_WAIT_S)
            w.conn.close()
        self._pool.clear()
