"""The break filters a session stops on (``nan``, ``inf``, ``error``) and the infinities and NaNs it leaves alone."""

from __future__ import annotations

from collections.abc import Iterable

from graph_dap.errors import GraphDapError
from graph_dap.kinds import FAULT_FILTERS, BreakFilter, FaultStops
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.masks import NO_INTENT, Intent

BREAK_FILTERS = tuple(f.value for f in FAULT_FILTERS)  # the filters a session honours (mismatch is the comparison's)


class BreakFilters:
    """Which break filters are on; :attr:`watch` is the NaN/Inf watch they ask of the engine."""

    def __init__(
        self,
        enabled: Iterable[str] = (),
        inf_exclude: Iterable[str] = (),
        fault_stops: str = FaultStops.NEW,
        nan_exclude: Iterable[str] = (),
        intent: Intent = NO_INTENT,
    ) -> None:
        self.enabled: set[BreakFilter] = set()
        self.set(enabled)
        self.inf_exclude: tuple[str, ...] = tuple(inf_exclude)
        self.nan_exclude: tuple[str, ...] = tuple(nan_exclude)
        self.intent = intent  # what the model makes on purpose (attention masks: see engine/masks.py)
        self.fault_stops = fault_stops
        self.found = False  # a NaN/Inf stop was made in this run (since the start or the last restart)

    @property
    def fault_stops(self) -> FaultStops:
        """``new``: after a NaN/Inf stop, only a node that makes a new NaN or Inf from finite inputs stops the run
        again; ``every``: every node whose output holds one does, those that only carry it on too."""
        return self._fault_stops

    @fault_stops.setter
    def fault_stops(self, value: str) -> None:
        if value not in FaultStops.values():
            raise GraphDapError(f"fault stops must be one of {', '.join(FaultStops.values())}, got {value!r}")
        self._fault_stops = FaultStops(value)

    @property
    def new_only(self) -> bool:
        """Whether a fault stops the run only where it is made (a stop was made already, and ``fault_stops`` is ``new``)."""
        return self.found and self._fault_stops is FaultStops.NEW

    def set(self, filters: Iterable[str]) -> None:
        """Enable exactly ``filters`` (any of ``nan``, ``inf``, ``error``)."""
        wanted = set(filters)
        bad = wanted - set(BREAK_FILTERS)
        if bad:
            raise GraphDapError(f"unknown break filter '{sorted(bad)[0]}'; expected any of {', '.join(BREAK_FILTERS)}")
        self.enabled = {BreakFilter(f) for f in wanted}

    @property
    def watch(self) -> FaultFilter:
        """The NaN/Inf watch: what a fault is, for the filters on now."""
        return FaultFilter(BreakFilter.NAN in self.enabled, BreakFilter.INF in self.enabled, self.inf_exclude, self.nan_exclude, self.intent)

    @property
    def on_error(self) -> bool:
        """Whether a node that onnxruntime rejects stops the run as an ``error`` (else the run fails there)."""
        return BreakFilter.ERROR in self.enabled
