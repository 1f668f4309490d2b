"""Runtime workers for a mixed session's graph runs: one started ahead of the first run, and those of ended runs taken
back, so a debugged call waits for a load, not for a Python process to import onnxruntime.

A program's calls mostly come one after another: the worker of the call before is taken back and serves the next,
and a worker started ahead of each call would only cost a core its imports (0.7 s) and be closed unused. A next
one is started ahead only while calls overlap (the program's threads run graphs side by side)."""

from __future__ import annotations

import asyncio

from graph_dap.adapter.core import WorkerFactory
from graph_dap.errors import GraphDapError
from graph_dap.worker.client import WorkerClient

#: Idle workers kept for the next runs (each holds its last model until it loads the next).
IDLE = 2


class WorkerPool:
    """Hands out workers: an idle one, else the spare; :meth:`take` and :meth:`take_kept` are :data:`WorkerFactory`s."""

    def __init__(self, spawn: WorkerFactory) -> None:
        self._spawn = spawn
        self._spare: asyncio.Future[WorkerClient] | None = None
        self._idle: list[WorkerClient] = []
        self._out = 0  # workers handed out and not given back
        self._closed = False

    def warm(self) -> None:
        """Start the spare now, if there is none."""
        if self._spare is None and not self._closed:
            self._spare = asyncio.ensure_future(self._spawn())

    async def take(self) -> WorkerClient:
        """A started worker for a run: one given back, else the spare (the next spare starts when runs overlap)."""
        worker = await self._take()
        self._out += 1
        if self._out > 1:  # runs overlap: the next one may come before one of these ends
            self.warm()
        return worker

    async def take_kept(self) -> WorkerClient:
        """A worker kept for good (the catalog's, which loads each model once); a run comes next: the spare starts."""
        worker = await self._take()
        self.warm()
        return worker

    async def _take(self) -> WorkerClient:
        while self._idle:
            worker = self._idle.pop()
            if worker.dead is None:
                return worker
        self.warm()
        assert self._spare is not None
        spare, self._spare = self._spare, None
        try:
            worker = await spare
        except (OSError, GraphDapError):
            worker = await self._spawn()  # the spare failed: try once more, and let that error through
        if worker.dead is not None:
            worker = await self._spawn()
        return worker

    async def give_back(self, worker: WorkerClient) -> None:
        """A worker whose run has ended, for the next run (closed when enough are idle)."""
        self._out = max(0, self._out - 1)
        if self._closed or worker.dead is not None or len(self._idle) >= IDLE:
            await worker.close()
            return
        self._idle.append(worker)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for worker in idle:
            await worker.close()
        spare, self._spare = self._spare, None
        if spare is None:
            return
        try:
            worker = await spare
        except (OSError, GraphDapError):
            return
        await worker.close()
