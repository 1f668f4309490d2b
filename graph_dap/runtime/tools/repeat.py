"""Running a model N times (``graph-dap run --repeat N``, a noDebug launch's ``iterations``).

:func:`repeat_runs` is the loop both use; :class:`Repeats` records each run's time and
whether the outputs stayed identical; its :meth:`~Repeats.to_dict` is what ``run --json``
reports and the worker sends, and :func:`repeat_text` the line both the command line
and the debug console print.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graph_dap.runtime.stops import Stop


@dataclass(slots=True)
class Repeats:
    """The runs so far of ``requested``: their times, and whether each run's outputs equal the first's."""

    requested: int
    times_ms: list[float] = field(default_factory=list)
    identical: bool = True
    _first: dict[str, Any] | None = field(default=None, init=False, repr=False)

    def record(self, ms: float, outputs: Mapping[str, Any] | None = None) -> None:
        """One run that took ``ms``; ``outputs`` when it completed (compared with the first run's)."""
        self.times_ms.append(ms)
        if outputs is None:
            return
        from graph_dap.runtime.tensor import copy_value, same_value

        if self._first is None:
            self._first = {k: copy_value(v) for k, v in outputs.items()}
        elif self.identical:
            self.identical = all(same_value(outputs.get(k), v) for k, v in self._first.items())

    def to_dict(self, completed: bool) -> dict[str, Any]:
        """``{requested, runs, times_ms, median_ms, outputs_identical}``; identity only when the last run ``completed``."""
        times = self.times_ms
        return {
            "requested": self.requested,
            "runs": len(times),
            "times_ms": [round(t, 3) for t in times],
            "median_ms": round(statistics.median(times), 3) if times else None,
            "outputs_identical": self.identical if len(times) > 1 and completed else None,
        }


def repeat_text(report: Mapping[str, Any]) -> str:
    """``ran 3 of 3 times: median 1.234 ms (min 1.200, max 1.300); outputs identical in every run``."""
    times = report["times_ms"]
    text = (
        f"ran {report['runs']} of {report['requested']} times: median {report['median_ms']:.3f} ms "
        f"(min {min(times):.3f}, max {max(times):.3f})"
    )
    if report.get("outputs_identical") is not None:
        text += "; outputs identical in every run" if report["outputs_identical"] else "; OUTPUTS DIFFER between runs"
    return text


def repeat_runs(times: int, run: Callable[[int], Stop], outputs: Callable[[], Mapping[str, Any]]) -> tuple[Stop, Repeats]:
    """Run ``times`` times (at least once) and time each: ``run(i)`` is the i-th run (restarting the model when ``i`` > 0).

    A run that does not complete (it stopped, or failed) ends the loop; ``outputs()`` is
    read after each run that completed. Returns the last run's stop and the record.
    """
    repeats = Repeats(times)
    for i in range(max(1, times)):
        started = time.perf_counter()
        stop = run(i)
        repeats.record((time.perf_counter() - started) * 1000.0, outputs() if stop.completed else None)
        if not stop.completed:
            break
    return stop, repeats
