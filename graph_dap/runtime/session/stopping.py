"""The stops a session makes, at the program counter with the path of the frames it is in; and what the
breakpoint table reads there (the innermost frame's values, a look ahead, the log)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from graph_dap.errors import NodeExecutionError, ValueNotFoundError
from graph_dap.kinds import Fault
from graph_dap.runtime.graph import Node
from graph_dap.runtime.session.filters import BreakFilters
from graph_dap.runtime.session.levels import ITERATION, Levels
from graph_dap.runtime.stops import Stop, StopReason
from graph_dap.runtime.tensor import summarize


class Stops:
    """Makes the session's stops: at the counter (or about a node), for a node that failed, for a fault."""

    def __init__(self, levels: Levels, filters: BreakFilters) -> None:
        self.levels = levels
        self.filters = filters

    def at(self, reason: StopReason, message: str = "", node: Node | None = None, **kw: Any) -> Stop:
        """A stop at the counter (or about ``node``), with the path of the frames it is in."""
        return Stop(reason, node if node is not None else self.levels.current, message, path=self.levels.path, **kw)

    def error(self, node: Node, e: NodeExecutionError) -> Stop:
        """``node`` failed in onnxruntime: an ``error`` stop with the filter on, else the run failed there."""
        peek = self.levels.top.values.store.peek
        inputs = {i: summarize(peek(i)).text() for i in node.all_inputs if peek(i) is not None}
        details = {"ort_message": e.ort_message, "inputs": inputs}
        if self.filters.on_error:
            return self.at(StopReason.ERROR, str(e), node, details=details)
        return self.at(StopReason.FAILED, f"the run failed: {e}", node, details=details)

    def fault(self, node: Node, name: str, kind: Fault) -> Stop:
        """``node`` made a watched NaN or Inf in ``name``: the stop after it, with the fault's details."""
        values = self.levels.top.values
        value = np.asarray(values.value(name))
        inputs = {i: values.value(i) for i in node.all_inputs if values.available(i)}
        stop: Stop = self.filters.watch.stop_details(node, name, value, kind, inputs, Stop, StopReason)
        self.filters.found = True  # from now on a fault stops the run where it is made (see BreakFilters.new_only)
        return Stop(stop.reason, stop.node, stop.message, stop.value, stop.details, path=self.levels.path)

    @staticmethod
    def end() -> Stop:
        return Stop(StopReason.END, None, "the run reached the end of the graph")


def resolver(levels: Levels, extra: Mapping[str, Any] | None = None, level: int = 0) -> Callable[[str], Any]:
    """Names to values as the frame at ``level`` (0: the innermost) sees them, ``extra`` first, and
    ``iteration``: the innermost loop's iteration at or outside that frame."""
    frames = levels.frames
    depth = len(frames) - level
    values = frames[depth - 1].values

    def resolve(name: str) -> Any:
        if extra and name in extra:
            return extra[name]
        try:
            return values.value(name)
        except ValueNotFoundError:
            if name != ITERATION:
                raise
        iteration = levels.iteration_below(depth)
        if iteration is not None:
            return np.int64(iteration)
        raise ValueNotFoundError("'iteration' is the innermost loop's iteration, and no loop is running here")

    return resolve


class CounterContext:
    """What the breakpoint table reads at the program counter (its :class:`~.breakpoints.BreakpointContext`)."""

    def __init__(self, levels: Levels, base_dir: Path, log: Callable[[str], None]) -> None:
        self.levels = levels
        self.base_dir = base_dir
        self.log = log

    def is_available(self, name: str) -> bool:
        return self.levels.top.values.available(name) or (name == ITERATION and self.levels.iteration is not None)

    def resolver(self, extra: Mapping[str, Any] | None = None) -> Callable[[str], Any]:
        return resolver(self.levels, extra)

    def look_ahead(self, node: Node) -> dict[str, Any]:
        """``node``'s outputs without running it: a look ahead, not a step."""
        return self.levels.top.values.execute(node, count=False)
