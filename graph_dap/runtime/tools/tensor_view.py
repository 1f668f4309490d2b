"""A picture of a tensor for a viewer: one 2-D slice, block-downsampled, and the whole tensor's statistics.

The body of the adapter's ``graphDap/tensorView`` request (see ``vscode-ext/PROTOCOL.md``).
It is computed where the tensor lives (the worker), so that at most ``max_size`` x
``max_size`` cells cross the wire. A downsampled cell is the mean of its block's finite
values, or NaN, +Inf or -Inf (in that order) when the block holds one: a single NaN is
never lost from the picture. Large tensors cost a bounded amount of extra memory: the
statistics come from :func:`~graph_dap.runtime.tensor.summarize`, the histogram and the
blocks are computed in chunks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from graph_dap.errors import ValueKindError
from graph_dap.runtime import dtypes
from graph_dap.runtime.tensor import summarize

__all__ = ["HISTOGRAM_BINS", "tensor_view"]

HISTOGRAM_BINS = 48
_CHUNK = 1 << 20  # elements converted to float64 at a time

Cell = float | int | str


def tensor_view(
    name: str, value: Any, index: Sequence[int] | None = None, max_size: int = 256, bins: int = HISTOGRAM_BINS
) -> dict[str, Any]:
    """The ``graphDap/tensorView`` body of ``value``: the slice at ``index`` (filled with zeros, clamped)."""
    if isinstance(value, list):
        raise ValueKindError(f"'{name}' is a sequence of {len(value)} tensors, not a tensor: view one of its elements")
    a = np.asarray(value)
    if not dtypes.is_numeric(a.dtype):
        raise ValueKindError(f"'{name}' holds {a.dtype} data, which has no numbers to draw")
    lead = max(0, a.ndim - 2)
    idx = [int(i) for i in (index or [])][:lead]
    idx += [0] * (lead - len(idx))
    idx = [min(max(0, i), max(0, n - 1)) for i, n in zip(idx, a.shape)]
    if not lead:
        part = a
    elif all(n > 0 for n in a.shape[:lead]):
        part = a[tuple(idx)]
    else:  # an empty leading axis: there is no slice, only its width
        part = np.empty((0, a.shape[-1]), a.dtype)
    size = max(1, int(max_size))
    step = [max(1, math.ceil(n / size)) for n in part.shape]
    grid = part.reshape((1,) * (2 - part.ndim) + part.shape)
    sh, sw = [1] * (2 - part.ndim) + step
    integer = dtypes.is_integer(a.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # sums of huge float64 values: no warnings on stderr
        if integer and sh == sw == 1:
            data: list[list[Cell]] = [[int(v) for v in row] for row in dtypes.numeric(grid).tolist()]
        else:
            data = _blocks(grid, sh, sw, integer)
        s = summarize(a)
        histogram = _histogram(a, s.min, s.max, bins)
    return {
        "name": name,
        "dtype": str(a.dtype),
        "shape": list(a.shape),
        "sliceShape": list(part.shape),
        "index": idx,
        "stride": step,
        "data": data,
        "min": _stat(s.min, integer),
        "max": _stat(s.max, integer),
        "mean": s.mean if s.mean is not None and math.isfinite(s.mean) else None,  # a float64 sum can overflow
        "nan": s.nan,
        "posinf": s.posinf,
        "neginf": s.neginf,
        "histogram": histogram,
    }


def _stat(v: float | None, integer: bool) -> float | int | None:
    if v is None:
        return None
    return int(v) if integer and float(v).is_integer() else float(v)


def _as_float(x: np.ndarray) -> np.ndarray:
    return np.abs(x) if x.dtype.kind == "c" else dtypes.numeric(x).astype(np.float64, copy=False)


def _histogram(a: np.ndarray, lo: float | None, hi: float | None, bins: int) -> dict[str, list[Any]]:
    """Of the finite values, over ``[lo, hi]`` in ``bins`` equal bins (as ``numpy.histogram`` makes them)."""
    if lo is None or hi is None:
        return {"edges": [], "counts": []}
    counts = np.zeros(bins, np.int64)
    flat = a.reshape(-1)
    try:
        for start in range(0, flat.size, _CHUNK):
            f = _as_float(flat[start : start + _CHUNK])
            f = f[np.isfinite(f)]
            counts += np.histogram(f, bins=bins, range=(lo, hi))[0]
        edges = np.histogram_bin_edges(np.empty(0), bins=bins, range=(lo, hi))
    except (ValueError, FloatingPointError):  # a range too wide for float64 (hi - lo overflows)
        return {"edges": [], "counts": []}
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def _blocks(x: np.ndarray, sh: int, sw: int, integer: bool) -> list[list[Cell]]:
    """Block means of the finite values, a band of blocks at a time; NaN, +Inf, -Inf where a block holds one."""
    h, w = x.shape
    wp = -(-w // sw) * sw
    band = max(1, _CHUNK // max(1, sh * wp))  # rows of blocks per pass
    rows: list[list[Cell]] = []
    for top in range(0, h, band * sh):
        part = _as_float(x[top : top + band * sh])
        ph = part.shape[0]
        hp = -(-ph // sh) * sh
        pad = np.zeros((hp, wp))
        pad[:ph, :w] = part
        valid = np.zeros((hp, wp), bool)
        valid[:ph, :w] = True

        def blocks(m: np.ndarray, hp: int = hp) -> np.ndarray:
            return m.reshape(hp // sh, sh, wp // sw, sw)

        ok = np.isfinite(pad) & valid
        out = blocks(np.where(ok, pad, 0.0)).sum(axis=(1, 3)) / np.maximum(blocks(ok).sum(axis=(1, 3)), 1)
        out[blocks(np.isneginf(pad) & valid).any(axis=(1, 3))] = -np.inf
        out[blocks(np.isposinf(pad) & valid).any(axis=(1, 3))] = np.inf
        out[blocks(np.isnan(pad) & valid).any(axis=(1, 3))] = np.nan
        rows += [[_cell(v, integer) for v in row] for row in out.tolist()]
    return rows


def _cell(v: float, integer: bool) -> Cell:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return int(v) if integer and v.is_integer() else float(v)
