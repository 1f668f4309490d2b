"""graph-dap's own requests, beyond DAP: ``graphDap/tensorView``, ``graphDap/summaries``, ``graphDap/runTo``,
``graphDap/compareTable``, ``graphDap/profile``.

A client sends them like any request (VS Code: ``session.customRequest(command, args)``);
each body is computed in the worker, so that no whole tensor crosses. The contracts of
``graphDap/tensorView``, ``graphDap/summaries`` and ``graphDap/runTo`` are in ``vscode-ext/PROTOCOL.md``.
"""

from __future__ import annotations

from typing import Any

from graph_dap.adapter.core import FRAME_ID, AdapterCore, Deferred
from graph_dap.adapter.requests import CantHandle, InvalidRequest, Request, items_of
from graph_dap.worker import protocol as p

#: Custom command -> the name of its handler (never reachable as a standard ``<command>_request``).
CUSTOM_REQUESTS = {
    "graphDap/tensorView": "tensor_view_custom",
    "graphDap/summaries": "summaries_custom",
    "graphDap/runTo": "run_to_custom",
    "graphDap/compareTable": "compare_table_custom",
    "graphDap/profile": "profile_custom",
}
DEFAULT_PROFILE_RUNS = 3
MAX_SUMMARIES = 2000  # names in one graphDap/summaries request


class CustomRequests(AdapterCore):
    """The handlers of graph-dap's custom requests."""

    async def tensor_view_custom(self, request: Request) -> dict[str, Any]:
        """A 2-D slice of a tensor (``name``: a value or an expression), downsampled to ``maxSize`` per side."""
        name = request.arg("name", str)
        index = items_of(request.arg("index", list, []), int, "index")
        max_size = request.arg("maxSize", int, 256)
        if max_size < 1:
            raise InvalidRequest("'maxSize' must be at least 1")
        worker = self._need_stopped()
        level = self._level(request.arg("frameId", int, FRAME_ID))
        view = await worker.tensor_view(p.TensorViewArgs(name, tuple(index), max_size, level))
        body = {
            "name": view.name,
            "dtype": view.dtype,
            "shape": list(view.shape),
            "sliceShape": list(view.slice_shape),
            "index": list(view.index),
            "stride": list(view.stride),
            "data": [list(row) for row in view.data],
            "min": view.min,
            "max": view.max,
            "mean": view.mean,
            "nan": view.nan,
            "posinf": view.posinf,
            "neginf": view.neginf,
            "histogram": {"edges": list(view.histogram.edges), "counts": list(view.histogram.counts)},
        }
        if view.colormap:
            body["colorMap"] = view.colormap  # "diverging": a quantized tensor's error, drawn centred on 0
        return body

    async def summaries_custom(self, request: Request) -> dict[str, Any]:
        """The one-line summaries of values (``names``) while stopped; ``available: false`` for those not computed."""
        names = items_of(request.arg("names", list), str, "names")
        if len(names) > MAX_SUMMARIES:
            raise InvalidRequest(f"'names' holds {len(names)} names; at most {MAX_SUMMARIES} in one request")
        worker = self._need_stopped()
        found = await worker.summaries(p.SummariesArgs(tuple(names)))
        return {"summaries": [{"name": s.name, "text": s.text, "available": s.available, "stale": s.stale} for s in found]}

    async def compare_table_custom(self, request: Request) -> dict[str, Any]:
        """The comparison with the launch's reference so far (the JSON of ``graph-dap compare --json``)."""
        worker = self._need_idle()
        if not self.has_reference:
            raise CantHandle("there is no reference to compare with: give the launch argument 'reference'")
        return await worker.compare_table()

    async def profile_custom(self, request: Request) -> Deferred:
        """The model run whole under onnxruntime's profiler (the JSON of ``graph-dap profile --json``).

        ``iterations`` (default: the launch's, else 3, at most 1,000) timed runs after one warm-up.
        The profile runs in the background: the adapter answers other requests meanwhile
        (those that need the model say it is busy), and ``disconnect`` ends it.
        """
        launched = self.launch.iterations if self.launch is not None else None
        runs = request.arg("iterations", int, None) or launched or DEFAULT_PROFILE_RUNS
        if not 1 <= runs <= p.MAX_PROFILE_REPEAT:
            raise InvalidRequest(f"'iterations' must be from 1 to {p.MAX_PROFILE_REPEAT}, got {runs}")
        worker = self._need_idle()
        progress = self.progress.start("Profiling the model")

        async def profile() -> dict[str, Any]:
            try:
                return await worker.profile(p.ProfileArgs(runs))
            finally:
                self.progress.end(progress)

        return self._in_background("profiling the model (graphDap/profile)", profile())
