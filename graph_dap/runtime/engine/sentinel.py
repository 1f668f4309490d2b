"""Reading a watched segment's sentinel: its one extra output, back to one sum per watched tensor.

The segment's graph sums each watched tensor (see :mod:`.segments`) and each value it is fed that a
bound reads (``sum(|y|)``), and concatenates those sums into the sentinel, raw. The bounds' checks
(see :mod:`.bounds`: ``A * sum(x) + A' * sum(y) ... + B`` in place of a tensor's own sum) are computed
here from them, after the run: in the graph they were a Mul per term and a Sum per check, tiny nodes
that onnxruntime runs one after another (densenet121: 656 and 120 of them, 2.5% of its run).

The checks are computed in float64 and then rounded to float32, so a check that overflows reads
+Inf as it would in the graph (the bounds' margin covers the rounding). A fed value's NaN reads +Inf:
a NaN that the segment did not make must not read as one it made (see :mod:`.faults`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

_F32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True, slots=True)
class Readout:
    """How a sentinel of ``len(watched) + fed`` raw sums reads as one sum per watched tensor.

    ``checks``: for each checked tensor, its position among the watched; ``terms``/``factors``: the raw sums
    each check reads and what it multiplies them by, check after check (``starts``: where each check's
    terms begin); ``offsets``: what each check adds.
    """

    watched: list[str]
    fed: int = 0
    checks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.intp))
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.intp))
    terms: np.ndarray = field(default_factory=lambda: np.zeros(0, np.intp))
    factors: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))

    @classmethod
    def of(cls, watched: list[str], fed: int, checks: Sequence[tuple[int, Sequence[tuple[int, float]], float]]) -> Readout:
        """``checks``: (position among the watched, [(raw sum read, factor)...], offset) each."""
        if not checks:
            return cls(watched, fed)
        starts = np.cumsum([0] + [len(t) for _, t, _ in checks[:-1]], dtype=np.intp)
        return cls(
            watched,
            fed,
            np.array([at for at, _, _ in checks], np.intp),
            starts,
            np.array([i for _, t, _ in checks for i, _ in t], np.intp),
            # (each factor as the float32 the graph multiplied by)
            np.array([float(np.float32(a)) for _, t, _ in checks for _, a in t], np.float64),
            np.array([float(np.float32(b)) for _, _, b in checks], np.float64),
        )

    def sums(self, raw: np.ndarray) -> np.ndarray:
        """One float32 sum per watched tensor, the checks in place of the checked tensors' own."""
        n = len(self.watched)
        if not len(self.checks):
            return raw[:n]
        values = raw.astype(np.float64)
        if self.fed:
            fed = values[n:]
            fed[np.isnan(fed)] = np.inf
        checked = np.add.reduceat(values[self.terms] * self.factors, self.starts) + self.offsets
        checked[checked > _F32_MAX] = np.inf  # (what the float32 sums overflow to; rounding aside, see the margin)
        out = raw[:n].astype(np.float32)
        out[self.checks] = checked
        return out
