"""How many weights the cached onnxruntime sessions of one model may hold at once.

Every session holds its own copy of the weights it runs with (onnxruntime reads them and
pre-packs them), so the sessions a debugger builds (a continue's segments, their parts,
the stretch before a breakpoint, single nodes) would hold the model's weights several
times over. The budget keeps the weights of the cached sessions together within about
the model's own: before a session is built, the least recently used sessions are let go
until its weights fit. A session let go is built again when it is needed again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, MutableMapping
from typing import Any

from graph_dap.runtime.engine.store import nbytes

#: Weights smaller than this are not counted (biases, norms, shapes): they are not what fills memory.
COUNTED_BYTES = 1 << 20
#: The budget of a model with few weights: its sessions are never let go for them.
MIN_BUDGET_BYTES = 512 << 20


def weight_bytes(constants: Iterable[Any]) -> int:
    """The bytes of the large constants a session holds (each counted once)."""
    seen: set[int] = set()
    total = 0
    for value in constants:
        size = nbytes(value)
        if size >= COUNTED_BYTES and id(value) not in seen:
            seen.add(id(value))
            total += size
    return total


class WeightBudget:
    """Cached sessions (in their owners' dicts, by key) whose weights stay within ``limit`` bytes together."""

    def __init__(self, limit: int) -> None:
        self.limit = max(int(limit), MIN_BUDGET_BYTES)
        self._held: OrderedDict[tuple[int, Any], tuple[MutableMapping[Any, Any], int]] = OrderedDict()
        self._lock = threading.Lock()
        self.held_bytes = 0
        self.let_go = 0

    def reserve(self, owner: MutableMapping[Any, Any], key: Any, size: int) -> None:
        """Make room for a session of ``size`` weight bytes about to be built (let the oldest go), and count it."""
        with self._lock:
            self._forget(owner, key)
            for (owner_id, other), (their, held) in list(self._held.items()):
                if self.held_bytes + size <= self.limit:
                    break
                if not held:
                    continue  # holds no weights: letting it go frees nothing
                their.pop(other, None)  # the session goes when its last run ends
                del self._held[(owner_id, other)]
                self.held_bytes -= held
                self.let_go += 1
            self._held[(id(owner), key)] = (owner, size)
            self.held_bytes += size

    def used(self, owner: MutableMapping[Any, Any], key: Any) -> None:
        """A cached session ran: it is the most recently used."""
        with self._lock:
            k = (id(owner), key)
            if k in self._held:
                self._held.move_to_end(k)

    def release(self, owner: MutableMapping[Any, Any], key: Any) -> None:
        """A session was dropped by its owner (a failed build, a cleared cache)."""
        with self._lock:
            self._forget(owner, key)

    def _forget(self, owner: MutableMapping[Any, Any], key: Any) -> None:
        entry = self._held.pop((id(owner), key), None)
        if entry is not None:
            self.held_bytes -= entry[1]
