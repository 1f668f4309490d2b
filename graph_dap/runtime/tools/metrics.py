"""How far a run's value is from its reference: the five metrics, and the tolerance that judges them.

A :class:`Tolerance` is ``numpy.allclose`` (NaN equal to NaN) unless ``fail_if``
conditions (``cosine<0.999``, ``max_abs>1e-3``) are given. :func:`compare_arrays`
computes every metric in chunks, so a large tensor costs bounded extra memory.
"""

from __future__ import annotations

import enum
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graph_dap.errors import CompareError
from graph_dap.runtime import dtypes, passes
from graph_dap.runtime.tensor import format_number

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "METRICS",
    "ArrayComparison",
    "CompareError",
    "Condition",
    "Metric",
    "Tolerance",
    "compare_arrays",
    "json_number",
    "worst_of",
    "metric_number",
    "shape_text",
]



class Metric(enum.StrEnum):
    """How far a value is from its reference; reports and ``fail_if`` conditions name them by their words."""

    MAX_ABS = "max_abs"
    MAX_REL = "max_rel"
    MSE = "mse"
    COSINE = "cosine"  # cosine similarity: 1 is equal
    SNR = "snr"  # signal to noise, in dB


METRICS = tuple(Metric)
HIGHER_IS_BETTER = frozenset({Metric.COSINE, Metric.SNR})
#: The metrics where a higher value is further from the reference.
HIGHER_IS_WORSE = frozenset(METRICS) - HIGHER_IS_BETTER
_CHUNK = 1 << 20
DEFAULT_ATOL, DEFAULT_RTOL = 1e-5, 1e-4


# -- tolerance -----------------------------------------------------------------------

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_CONDITION = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf)\s*$")


@dataclass(frozen=True, slots=True)
class Condition:
    """``metric op threshold``: a value fails when this holds (``cosine<0.999``, ``max_abs>1e-3``)."""

    metric: str
    op: str
    threshold: float

    @classmethod
    def parse(cls, text: str) -> Condition:
        m = _CONDITION.match(text)
        if not m or m.group(1) not in METRICS:
            raise CompareError(
                f"fail condition '{text}' is not understood; expected METRIC<VALUE or METRIC>VALUE "
                f"with METRIC one of {', '.join(METRICS)} (e.g. cosine<0.999, max_abs>1e-3)"
            )
        return cls(m.group(1), m.group(2), float(m.group(3)))

    def holds(self, metrics: Mapping[str, float]) -> bool:
        v = metrics.get(self.metric)
        if v is None or math.isnan(v):
            return True  # a metric that cannot be computed (NaN where the reference has none) fails
        return _OPS[self.op](v, self.threshold)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.threshold:g}"


@dataclass(frozen=True, slots=True)
class Tolerance:
    """When a value passes: like ``numpy.allclose(run, ref, rtol, atol)`` (NaN equal to NaN), unless
    ``fail_if`` conditions are given, in which case a value fails when any of them holds."""

    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    fail_if: tuple[Condition, ...] = ()

    def __post_init__(self) -> None:
        if not (self.atol >= 0 and self.rtol >= 0):
            raise CompareError(f"tolerances must be non-negative numbers, got atol={self.atol}, rtol={self.rtol}")

    @classmethod
    def make(cls, atol: float | None = None, rtol: float | None = None, fail_if: Iterable[str | Condition] = ()) -> Tolerance:
        conds = tuple(c if isinstance(c, Condition) else Condition.parse(c) for c in fail_if)
        return cls(DEFAULT_ATOL if atol is None else float(atol), DEFAULT_RTOL if rtol is None else float(rtol), conds)

    def describe(self) -> str:
        if self.fail_if:
            return "a value fails when " + " or ".join(str(c) for c in self.fail_if)
        return f"|run - ref| <= {self.atol:g} + {self.rtol:g} * |ref| everywhere (numpy.allclose; NaN matches NaN)"

    def to_dict(self) -> dict[str, Any]:
        return {"atol": self.atol, "rtol": self.rtol, "fail_if": [str(c) for c in self.fail_if]}


# -- metrics -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArrayComparison:
    """How one run value compares with its reference."""

    passed: bool
    metrics: dict[str, float]
    mismatches: int  # elements outside atol/rtol
    size: int
    note: str = ""


def compare_arrays(a: Any, b: Any, tolerance: Tolerance = Tolerance()) -> ArrayComparison:
    """Compare ``a`` (the run) with ``b`` (the reference), in chunks: bounded extra memory.

    max_abs = max|a-b|; max_rel = max |a-b|/|b|; mse = mean (a-b)^2; cosine = a.b/(|a||b|)
    and snr = 10 log10(sum b^2 / sum (a-b)^2) dB over the elements finite on both sides.
    """
    if isinstance(a, list) or isinstance(b, list):
        return _compare_sequences(a, b, tolerance)
    if isinstance(a, dict) or isinstance(b, dict):
        return _compare_maps(a, b, tolerance)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return ArrayComparison(
            False, {}, int(max(a.size, b.size)), int(a.size), f"shape {shape_text(a.shape)} vs reference {shape_text(b.shape)}"
        )
    note = f"dtype {a.dtype} vs reference {b.dtype}" if a.dtype != b.dtype else ""
    a, b = dtypes.numeric(a), dtypes.numeric(b)  # bfloat16, float8 as float32, int4 as int8: exact
    if a.dtype.kind not in "biufc" or b.dtype.kind not in "biufc":
        same = bool(np.array_equal(a, b))
        mism = 0 if same else int(np.count_nonzero(a != b))
        return ArrayComparison(same, {}, mism, int(a.size), note or "compared for equality")
    if a.dtype.kind in "biu" and b.dtype.kind in "biu" and np.array_equal(a, b):
        return ArrayComparison(True, _perfect(), 0, int(a.size), note)
    acc = _Acc()
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    if not acc.add_all(flat_a, flat_b, tolerance):
        for start in range(0, flat_a.size, _CHUNK):
            acc.add(flat_a[start : start + _CHUNK], flat_b[start : start + _CHUNK], tolerance)
    metrics = acc.metrics(int(a.size))
    if tolerance.fail_if:
        passed = not any(c.holds(metrics) for c in tolerance.fail_if)
    else:
        passed = acc.mismatches == 0
    return ArrayComparison(passed, metrics, acc.mismatches, int(a.size), note)


def _perfect() -> dict[str, float]:
    return {"max_abs": 0.0, "max_rel": 0.0, "mse": 0.0, "cosine": 1.0, "snr": math.inf}


def _compare_sequences(a: Any, b: Any, tolerance: Tolerance) -> ArrayComparison:
    if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
        la = len(a) if isinstance(a, list) else "a tensor"
        lb = len(b) if isinstance(b, list) else "a tensor"
        return ArrayComparison(False, {}, 1, 0, f"sequence of {la} vs reference {lb}")
    parts = [compare_arrays(x, y, tolerance) for x, y in zip(a, b)]
    names = dict.fromkeys(k for p in parts for k in p.metrics)
    worst = {k: worst_of(k, [p.metrics[k] for p in parts if k in p.metrics]) for k in names}
    return ArrayComparison(
        all(p.passed for p in parts),
        worst,
        sum(p.mismatches for p in parts),
        sum(p.size for p in parts),
        "sequence: worst element",
    )


def _compare_maps(a: Any, b: Any, tolerance: Tolerance) -> ArrayComparison:
    """Two maps (skl2onnx's ZipMap): the same keys in the same order, then their items as arrays."""
    if not (isinstance(a, dict) and isinstance(b, dict)) or list(a) != list(b):
        ka = f"keys {list(a)[:5]}" if isinstance(a, dict) else "not a map"
        kb = f"keys {list(b)[:5]}" if isinstance(b, dict) else "not a map"
        return ArrayComparison(False, {}, 1, 0, f"map with {ka} vs reference {kb}")
    result = compare_arrays(np.asarray(list(a.values())), np.asarray(list(b.values())), tolerance)
    return ArrayComparison(result.passed, result.metrics, result.mismatches, result.size, result.note or "map: its items")


class _Acc:
    """Running sums of the metrics over chunks."""

    def __init__(self) -> None:
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.sum_sq = 0.0
        self.dot = 0.0
        self.aa = 0.0
        self.bb = 0.0
        self.noise = 0.0
        self.mismatches = 0
        self.one_sided = 0  # elements non-finite on one side only (or infinities of opposite signs)

    def add_all(self, a: np.ndarray, b: np.ndarray, tol: Tolerance) -> bool:
        """All of two arrays of float32 or float16 (a converted model's), finite on both sides, in one pass
        (:mod:`.passes`; float16 as float32, exactly); False: not done, :meth:`add` them."""
        done = passes.compare(a, b, tol.atol, tol.rtol)
        if done is None:
            return False
        self.mismatches += done.mismatches
        self.max_abs = max(self.max_abs, done.max_abs)
        self.max_rel = max(self.max_rel, done.max_rel)
        self.sum_sq += done.sum_sq
        self.noise += done.sum_sq  # every element finite
        self.dot += done.dot
        self.aa += done.aa
        self.bb += done.bb
        return True

    def add(self, a: np.ndarray, b: np.ndarray, tol: Tolerance) -> None:
        cplx = a.dtype.kind == "c" or b.dtype.kind == "c"
        ft = np.complex128 if cplx else np.float64
        x, y = a.astype(ft, copy=False), b.astype(ft, copy=False)
        with np.errstate(all="ignore"):
            special = (np.isnan(x) & np.isnan(y)) | (np.isinf(x) & np.isinf(y) & (x == y))
            finite = np.isfinite(x) & np.isfinite(y)
            diff = np.abs(x - y)
            diff[special] = 0.0
            diff[np.isnan(diff)] = np.inf
            ref = np.abs(y)
            bad = np.where(finite, diff > tol.atol + tol.rtol * ref, ~special)
            self.mismatches += int(np.count_nonzero(bad))
            self.one_sided += int(np.count_nonzero(~finite & ~special))
            if diff.size:
                self.max_abs = max(self.max_abs, float(diff.max()))
                rel = np.where(diff == 0, 0.0, diff / ref)
                rel[np.isnan(rel)] = np.inf
                self.max_rel = max(self.max_rel, float(rel.max()))
            self.sum_sq += float(np.sum(diff * diff))
            if finite.any():
                xf, yf, df = x[finite], y[finite], diff[finite]
                self.dot += float(np.real(np.vdot(yf, xf)))
                self.aa += float(np.real(np.vdot(xf, xf)))
                self.bb += float(np.real(np.vdot(yf, yf)))
                self.noise += float(np.sum(df * df))

    def metrics(self, size: int) -> dict[str, float]:
        """The five metrics. A NaN or infinity on one side only fails every metric: cosine is then NaN (it
        cannot be computed, and a condition on a NaN metric fails) and SNR -inf, not the values of the
        finite elements alone, which could look perfect."""
        if size == 0:
            return _perfect()
        if self.aa == 0 and self.bb == 0:
            cosine = 1.0
        elif self.aa == 0 or self.bb == 0:
            cosine = 0.0
        else:
            cosine = max(-1.0, min(1.0, self.dot / math.sqrt(self.aa * self.bb)))
        if self.noise == 0:
            snr = math.inf
        elif self.bb == 0:
            snr = -math.inf
        else:
            snr = 10 * math.log10(self.bb / self.noise)
        if self.one_sided:
            cosine, snr = math.nan, -math.inf
        return {"max_abs": self.max_abs, "max_rel": self.max_rel, "mse": self.sum_sq / size, "cosine": cosine, "snr": snr}


def worst_of(metric: str, values: Iterable[float]) -> float:
    """The worst of several values of ``metric``: the largest error, the lowest cosine or SNR; NaN (not computable) is worst."""
    got = list(values)
    if any(math.isnan(v) for v in got):
        return math.nan
    if not got:
        return math.nan
    return min(got) if metric in HIGHER_IS_BETTER else max(got)


# -- writing them down ---------------------------------------------------------------


def shape_text(shape: Sequence[int]) -> str:
    """``2x3``, or ``scalar``."""
    return "x".join(map(str, shape)) if len(shape) else "scalar"


def metric_number(metric: str, v: float) -> str:
    """A metric's value as text; cosine similarity with enough digits to see how far from 1 it is."""
    return format_number(v, 8 if metric == Metric.COSINE else 4)


def json_number(v: float) -> float | str:
    """JSON has no NaN or infinity: those become the strings "nan", "inf", "-inf"."""
    return v if math.isfinite(v) else format_number(v)
