"""The break filters a session stops on (``nan``, ``inf``, ``error``) and the infinities and NaNs it leaves alone."""

from __future__ import annotations

from collections.abc import Iterable

from graph_dap.errors import GraphDapError
from graph_dap.runtime.engine.faults import FaultFilter
from graph_dap.runtime.engine.masks import NO_INTENT, Intent

BREAK_FILTERS = ("nan", "inf", "error")


class BreakFilters:
    """Which break filters are on; :attr:`watch` is the NaN/Inf watch they ask of the engine."""

    def __init__(
        self, enabled: Iterable[str] = (), inf_exclude: Iterable[str] = (), nan_exclude: Iterable[str] = (), intent: Intent = NO_INTENT
    ) -> None:
        self.enabled: set[str] = set()
        self.set(enabled)
        self.inf_exclude: tuple[str, ...] = tuple(inf_exclude)
        self.nan_exclude: tuple[str, ...] = tuple(nan_exclude)
        self.intent = intent  # what the model makes on purpose (attention masks: see engine/masks.py)

    def set(self, filters: Iterable[str]) -> None:
        """Enable exactly ``filters`` (any of ``nan``, ``inf``, ``error``)."""
        wanted = set(filters)
        bad = wanted - set(BREAK_FILTERS)
        if bad:
            raise GraphDapError(f"unknown break filter '{sorted(bad)[0]}'; expected any of {', '.join(BREAK_FILTERS)}")
        self.enabled = wanted

    @property
    def watch(self) -> FaultFilter:
        """The NaN/Inf watch: what a fault is, for the filters on now."""
        return FaultFilter("nan" in self.enabled, "inf" in self.enabled, self.inf_exclude, self.nan_exclude, self.intent)

    @property
    def on_error(self) -> bool:
        """Whether a node that onnxruntime rejects stops the run as an ``error`` (else the run fails there)."""
        return "error" in self.enabled
