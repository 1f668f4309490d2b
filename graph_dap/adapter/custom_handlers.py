"""graph-dap's own requests, beyond DAP: ``graphDap/tensorView``, ``graphDap/summaries``, ``graphDap/runTo``,
``graphDap/compareTable``, ``graphDap/profile``.

A client sends them like any request (VS Code: ``session.customRequest(command, args)``);
each body is computed in the worker, so that no whole tensor crosses. The contracts of
``graphDap/tensorView``, ``graphDap/summaries`` and ``graphDap/runTo`` are in ``vscode-ext/PROTOCOL.md``.
"""

from __future__ import annotations

from typing import Any

from graph_dap.adapter.core import AdapterCore
from graph_dap.adapter.requests import CantHandle, InvalidRequest, Request, items_of

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
        body: dict[str, Any] = await worker.call("tensor_view", name=name, index=index, max_size=max_size)
        return body

    async def summaries_custom(self, request: Request) -> dict[str, Any]:
        """The one-line summaries of values (``names``) while stopped; ``available: false`` for those not computed."""
        names = items_of(request.arg("names", list), str, "names")
        if len(names) > MAX_SUMMARIES:
            raise InvalidRequest(f"'names' holds {len(names)} names; at most {MAX_SUMMARIES} in one request")
        worker = self._need_stopped()
        found = await worker.summaries(names)
        return {"summaries": [{"name": s.name, "text": s.text, "available": s.available, "stale": s.stale} for s in found]}

    async def compare_table_custom(self, request: Request) -> dict[str, Any]:
        """The comparison with the launch's reference so far (the JSON of ``graph-dap compare --json``)."""
        worker = self._need_idle()
        if not self.launch_args.get("reference"):
            raise CantHandle("there is no reference to compare with: give the launch argument 'reference'")
        table: dict[str, Any] = await worker.call("compare_table")
        return table

    async def profile_custom(self, request: Request) -> dict[str, Any]:
        """The model run whole under onnxruntime's profiler (the JSON of ``graph-dap profile --json``).

        ``iterations`` (default: the launch's, else 3) timed runs after one warm-up.
        """
        runs = request.arg("iterations", int, None) or self.launch_args.get("iterations") or DEFAULT_PROFILE_RUNS
        if runs < 1:
            raise InvalidRequest("'iterations' must be at least 1")
        worker = self._need_idle()
        progress = self._progress_start("Profiling the model")
        try:
            profile: dict[str, Any] = await worker.call("profile", repeat=runs)
        finally:
            self._progress_end(progress)
        return profile
