"""Runtime workers for a mixed session's graph runs: one kept started ahead, so a debugged call waits for a load, not
for a Python process to import onnxruntime."""

from __future__ import annotations

import asyncio

from graph_dap.adapter.core import WorkerFactory
from graph_dap.errors import GraphDapError
from graph_dap.worker.client import WorkerClient


class WorkerPool:
    """Hands out workers, starting the next one as each is taken (:meth:`take` is a :data:`WorkerFactory`)."""

    def __init__(self, spawn: WorkerFactory) -> None:
        self._spawn = spawn
        self._spare: asyncio.Future[WorkerClient] | None = None
        self._closed = False

    def warm(self) -> None:
        """Start the spare now, if there is none."""
        if self._spare is None and not self._closed:
            self._spare = asyncio.ensure_future(self._spawn())

    async def take(self) -> WorkerClient:
        """A started worker (the spare); the next spare starts."""
        self.warm()
        assert self._spare is not None
        spare, self._spare = self._spare, None
        try:
            worker = await spare
        except (OSError, GraphDapError):
            worker = await self._spawn()  # the spare failed: try once more, and let that error through
        if worker.dead is not None:
            worker = await self._spawn()
        self.warm()
        return worker

    async def close(self) -> None:
        self._closed = True
        spare, self._spare = self._spare, None
        if spare is None:
            return
        try:
            worker = await spare
        except (OSError, GraphDapError):
            return
        await worker.close()
