"""Where a session keeps values: fixed ones, and computed ones within a memory budget.

Fixed values (graph inputs, initializers, constants) are always kept. Computed
values are kept least-recently-used first out once their bytes pass the budget,
except those the caller pins (the values the next nodes read). An evicted value
is recomputed on demand by the session from what is still kept.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np


def default_budget_bytes() -> int:
    """A quarter of the machine's memory, between 256 MB and 4 GB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    return int(min(max(total // 4, 256 << 20), 4 << 30))


def nbytes(value: Any) -> int:
    if isinstance(value, list):
        return sum(nbytes(v) for v in value)
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, dict):
        return 64 * (len(value) + 1)
    return 64


class ValueStore:
    """Fixed values plus an LRU cache of computed values bounded by ``budget`` bytes."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget = default_budget_bytes() if budget is None else int(budget)
        self.fixed: dict[str, Any] = {}
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self.cached_bytes = 0
        self.peak_cached_bytes = 0
        self.evictions = 0

    def __contains__(self, name: str) -> bool:
        return name in self.fixed or name in self._cache

    def get(self, name: str) -> Any:
        """The kept value (KeyError when not kept); marks it recently used."""
        if name in self.fixed:
            return self.fixed[name]
        value = self._cache[name]
        self._cache.move_to_end(name)
        return value

    def peek(self, name: str, default: Any = None) -> Any:
        if name in self.fixed:
            return self.fixed[name]
        return self._cache.get(name, default)

    def put(self, name: str, value: Any) -> None:
        if name in self.fixed:
            self.fixed[name] = value
            return
        old = self._cache.pop(name, None)
        if old is not None:
            self.cached_bytes -= nbytes(old)
        self._cache[name] = value
        self.cached_bytes += nbytes(value)
        self.peak_cached_bytes = max(self.peak_cached_bytes, self.cached_bytes)

    def drop(self, name: str) -> None:
        old = self._cache.pop(name, None)
        if old is not None:
            self.cached_bytes -= nbytes(old)

    def cached(self) -> Iterator[str]:
        return iter(list(self._cache))

    def evict(self, pinned: Callable[[str], bool]) -> None:
        """Drop least recently used values until within budget; pinned ones stay."""
        if self.cached_bytes <= self.budget:
            return
        for name in list(self._cache):
            if self.cached_bytes <= self.budget:
                break
            if pinned(name):
                continue
            self.drop(name)
            self.evictions += 1

    def clear(self) -> None:
        self.fixed.clear()
        self._cache.clear()
        self.cached_bytes = 0
