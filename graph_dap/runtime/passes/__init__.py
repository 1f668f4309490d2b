"""One-pass kernels over float32 tensors (``_passes.c``, built at install by setup.py, loaded with ctypes).

A tensor's statistics (tensor.summarize_chunks), a value against its reference (the sums a quantized group's error is
made of: tools/quant/errors.py), a tensor's Q/DQ round trip with its own error (tools/quant/params.py), and a run's
value against a reference as compare_arrays measures it (in double, with the tolerance's mismatches: tools/metrics.py),
each in one pass over memory where numpy takes one pass per operation. Each function returns None where the library
is not there (an install without a C compiler) or cannot take the arrays (not float32, a NaN); the caller then
computes the same with numpy.

Arrays of :data:`SPLIT_FROM` elements or more are split in two halves computed side by side (ctypes lets the GIL go
during a call): a pass is bound by how fast memory streams to one core. Not a summary: those are computed beside the
debugger's requests, which need the other core.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DISABLE_ENV", "SPLIT_FROM", "Compared", "Summary", "Sums", "Trip", "available", "compare", "diff_sums", "round_trip", "summary"]

#: Set to 1 to use numpy's passes only (to compare the two, or where the library misbehaves).
DISABLE_ENV = "GRAPH_DAP_NO_NATIVE"
SPLIT_FROM = 1 << 20

_NOISE, _SIGNAL, _CROSS, _HIGH, _LOW, _CLIPPED, _NAN = range(7)  # _passes.c's out[] slots (GD_NOISE...)
_SLOTS = 9  # the out[] a call writes: 5 (gd_diff), 7 (gd_round_trip), 8 (gd_compare), 9 (gd_summary)
_INT_KINDS = {"int8": 1, "uint8": 2, "int16": 3, "uint16": 4}  # _passes.c's GD_INT8...; int32's range is not float32's
_P = ctypes.c_void_p


@dataclass(frozen=True, slots=True)
class Sums:
    """``value - reference`` summed: its squares (noise), the reference's squares (signal), their product (cross),
    the difference's extremes, and the element count."""

    noise: float
    signal: float
    cross: float
    high: float
    low: float
    size: int


@dataclass(frozen=True, slots=True)
class Trip:
    """A round trip: the integers (None when not asked for), the dequantized values, the count clipped, and the
    round trip's :class:`Sums` against the tensor (cross not computed: NaN)."""

    ints: np.ndarray | None
    value: np.ndarray
    clipped: int
    error: Sums


@dataclass(frozen=True, slots=True)
class Compared:
    """A run's value against a reference, in double: elements beyond the tolerance, max |a-b|, max |a-b|/|b|, and the
    sums of (a-b)^2, a.b, a.a and b.b."""

    mismatches: int
    max_abs: float
    max_rel: float
    sum_sq: float
    dot: float
    aa: float
    bb: float


@dataclass(frozen=True, slots=True)
class Summary:
    """A tensor's statistics: its finite elements' count, sum, squared deviations from their mean (m2) and extremes
    (inf and -inf where none), and how many are NaN, +inf, -inf and zero."""

    count: int
    total: float
    m2: float
    low: float
    high: float
    nan: int
    posinf: int
    neginf: int
    zeros: int


def _load() -> Any:
    if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
        return None
    here = Path(__file__).parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = here / f"_passes{suffix}"
        if path.is_file():
            try:
                lib = ctypes.CDLL(str(path))
            except OSError:
                return None
            lib.gd_diff.argtypes = [_P, _P, ctypes.c_int64, _P]
            lib.gd_diff.restype = None
            f32 = ctypes.c_float
            lib.gd_round_trip.argtypes = [_P, ctypes.c_int64, f32, f32, f32, f32, _P, _P, ctypes.c_int, _P]
            lib.gd_round_trip.restype = None
            lib.gd_compare.argtypes = [_P, _P, ctypes.c_int64, ctypes.c_double, ctypes.c_double, _P]
            lib.gd_compare.restype = None
            lib.gd_summary.argtypes = [_P, ctypes.c_int64, _P]
            lib.gd_summary.restype = None
            return lib
    return None


_lib = _load()
_pool: ThreadPoolExecutor | None = None


def available() -> bool:
    """Whether the C kernels are loaded."""
    return _lib is not None


def _parts(n: int, call: Callable[[int, int, Any], None], split: bool = True) -> np.ndarray:
    """``call(lo, hi, out)`` over ``[0, n)``, in two halves side by side from :data:`SPLIT_FROM` elements (ctypes lets
    the GIL go during a call: a pass is bound by how fast memory streams to one core), each half writing its own
    ``out[]`` row; the rows. ``split=False``: one call on this thread."""
    if n < SPLIT_FROM or not split:
        outs = np.zeros((1, _SLOTS), np.float64)
        call(0, n, outs[0].ctypes.data)
        return outs
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(1, thread_name_prefix="graph-dap-passes")
    half = (n // 2 + 63) // 64 * 64  # a cache line's multiple
    outs = np.zeros((2, _SLOTS), np.float64)
    first = _pool.submit(call, 0, half, outs[0].ctypes.data)
    call(half, n, outs[1].ctypes.data)
    first.result()
    return outs


def combine_moments(count: int, total: float, m2: float, k: int, ktotal: float, km2: float) -> tuple[int, float, float]:
    """Two parts' (count, sum, squared deviations from their mean) as one (Chan et al.)."""
    if not count:
        return k, ktotal, km2
    if not k:
        return count, total, m2
    delta = ktotal / k - total / count
    return count + k, total + ktotal, m2 + km2 + delta * delta * count * k / (count + k)


def _pair32(value: Any, reference: Any, widen: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """Both flat and contiguous, when the library is there and both are float32 arrays of one size (``widen``: or
    float16, as float32)."""
    if _lib is None:
        return None
    a, b = _flat32(value, widen), _flat32(reference, widen)
    if a is None or b is None or a.size != b.size:
        return None
    return a, b


def _flat32(a: Any, widen: bool = False) -> np.ndarray | None:
    """``a`` flat and contiguous when float32 (``widen``: float16 too, as float32: exactly); None: another type."""
    a = np.asarray(a)
    if widen and a.dtype == np.float16:
        a = a.astype(np.float32)
    if a.dtype != np.float32:
        return None
    return np.ascontiguousarray(a).reshape(-1)


def diff_sums(value: Any, reference: Any) -> Sums | None:
    """The sums of ``value - reference`` (float32 arrays of one size); None: not computed here."""
    pair = _pair32(value, reference)
    if pair is None:
        return None
    a, b = pair
    outs = _parts(a.size, lambda lo, hi, out: _lib.gd_diff(a[lo:].ctypes.data, b[lo:].ctypes.data, hi - lo, out))
    return _sums(outs, int(a.size), float(outs[:, _CROSS].sum()))


def _sums(outs: np.ndarray, size: int, cross: float) -> Sums:
    return Sums(float(outs[:, _NOISE].sum()), float(outs[:, _SIGNAL].sum()), cross, float(outs[:, _HIGH].max()), float(outs[:, _LOW].min()), size)


def round_trip(x: Any, scale: float, zero_point: float, low: float, high: float, int_type: str | None) -> Trip | None:
    """``x``'s Q/DQ round trip per tensor: ``r = clip(rint(x / scale), low, high)`` (the integer less its zero point),
    the values ``r * scale`` and, for ``int_type``, the integers ``r + zero_point``; with the trip's error against
    ``x``. None: not computed here (no library, not float32, a NaN in ``x``, an integer type it does not write)."""
    if _lib is None or (int_type is not None and int_type not in _INT_KINDS):
        return None
    flat = _flat32(x)
    if flat is None:
        return None
    shape = np.shape(x)
    trip = np.empty(flat.size, np.float32)
    ints = np.empty(flat.size, np.dtype(int_type)) if int_type is not None else None
    kind = _INT_KINDS[int_type] if int_type is not None else 0

    def call(lo: int, hi: int, out: Any) -> None:
        q = ints[lo:].ctypes.data if ints is not None else None
        _lib.gd_round_trip(flat[lo:].ctypes.data, hi - lo, scale, zero_point, low, high, trip[lo:].ctypes.data, q, kind, out)

    outs = _parts(flat.size, call)
    if outs[:, _NAN].any():
        return None
    error = _sums(outs, int(flat.size), math.nan)
    return Trip(None if ints is None else ints.reshape(shape), trip.reshape(shape), int(outs[:, _CLIPPED].sum()), error)


def compare(value: Any, reference: Any, atol: float, rtol: float) -> Compared | None:
    """``value`` against ``reference`` (float32 or float16 arrays of one size, finite everywhere) as
    :func:`~graph_dap.runtime.tools.metrics.compare_arrays` measures them; None: not computed here (no library, another
    type, a NaN or an infinity on either side)."""
    pair = _pair32(value, reference, widen=True)
    if pair is None:
        return None
    a, b = pair
    outs = _parts(a.size, lambda lo, hi, out: _lib.gd_compare(a[lo:].ctypes.data, b[lo:].ctypes.data, hi - lo, atol, rtol, out))
    bad, _, _, sq, ab, aa, bb, nonfinite = outs[:, :8].sum(axis=0)  # gd_compare's out[0..7]
    if nonfinite:
        return None
    return Compared(int(bad), float(outs[:, 1].max()), float(outs[:, 2].max()), float(sq), float(ab), float(aa), float(bb))


def summary(values: Any) -> Summary | None:
    """The statistics of a float32 or float16 array (:func:`~graph_dap.runtime.tensor.summarize_chunks`' per piece);
    None: not computed here (no library, another type)."""
    flat = _flat32(values, widen=True) if _lib is not None else None
    if flat is None:
        return None
    # one core: summaries are computed beside the debugger's requests (a weight page's statistics in a thread)
    (out,) = _parts(flat.size, lambda lo, hi, out: _lib.gd_summary(flat[lo:].ctypes.data, hi - lo, out), split=False)
    count, total, m2, low, high, nan, posinf, neginf, zeros = out  # gd_summary's GS_COUNT...GS_ZEROS
    return Summary(int(count), float(total), float(m2), float(low), float(high), int(nan), int(posinf), int(neginf), int(zeros))
