"""Summaries of arrays: what a person wants to see first about a tensor.

Summaries are computed in chunks so that a tensor of hundreds of millions of
elements costs a bounded amount of extra memory. Values are what onnxruntime
returns: arrays (strings as arrays of ``str`` objects), sequences as lists, maps
as dicts (skl2onnx's ZipMap: a list of dicts), optionals without a value as None.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from graph_dap.kinds import Fault, ValueKind
from graph_dap.runtime import dtypes, passes

_CHUNK = 1 << 20  # elements per pass


def numel(shape: Iterable[int]) -> int:
    """The number of elements of an array of this shape (1 for a scalar)."""
    return math.prod(int(d) for d in shape)


@dataclass(frozen=True, slots=True)
class TensorSummary:
    """dtype, shape and statistics of one value. Statistics skip NaN and Inf."""

    dtype: str
    shape: tuple[int, ...]
    size: int
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    zeros: int = 0
    kind: ValueKind = ValueKind.TENSOR  # OPTIONAL: an optional without a value (None)
    preview: str = ""  # a string tensor's or a map's first items, as text

    @property
    def type_text(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"

    @property
    def inf(self) -> int:
        return self.posinf + self.neginf

    def text(self) -> str:
        """One line: ``float32[1,64,80,80] min=-3.2 max=5.1 mean=0.013 nan=3 inf=1``."""
        if self.kind == ValueKind.SEQUENCE:
            return f"seq({self.dtype}) len={self.size}" + (f" {self.preview}" if self.preview else "")
        if self.kind == ValueKind.OPTIONAL:
            return "optional: no value"
        if self.kind == ValueKind.MAP:
            return f"{self.dtype} len={self.size}" + (f" {self.preview}" if self.preview else "")
        if self.dtype == "string":
            return f"{self.type_text} {self.preview}" if self.preview else self.type_text
        parts = [self.type_text]
        if self.size == 1:  # one number: show it
            if self.min is not None:
                return f"{self.type_text} = {format_number(self.min)}"
            return f"{self.type_text} = {'nan' if self.nan else 'inf' if self.posinf else '-inf'}"
        if self.size == 0:
            parts.append("empty")
        elif self.min is not None:
            parts.append(f"min={format_number(self.min)} max={format_number(self.max)} mean={format_number(self.mean)}")
        if self.nan:
            parts.append(f"nan={self.nan}")
        if self.inf:
            parts.append(f"inf={self.inf}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["shape"] = list(self.shape)
        return d


def format_number(v: float | None, digits: int = 4) -> str:
    """A number as people read it: ``3``, ``0.1235``, ``nan``, ``-inf`` (``?`` for None)."""
    if v is None:
        return "?"
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.{digits}g}"


_PREVIEW_CHARS = 80


def element_type(value: Any) -> str:
    """The type of a value's elements as ONNX names it, numpy-style: ``float32``, ``string``,
    ``map(int64,float32)`` (a dict), ``seq(float32)`` (a list), ``?`` when it cannot tell (an empty list)."""
    if value is None:
        return "none"
    if isinstance(value, dict):
        if not value:
            return "map(?,?)"
        key, item = next(iter(value.items()))
        return f"map({element_type(key)},{element_type(item)})"
    if isinstance(value, list):
        return f"seq({element_type(value[0]) if value else '?'})"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float) and not isinstance(value, np.floating):
        # A map's items as onnxruntime returns them: Python floats. The maps it makes (ZipMap's, the
        # only operator whose output is a map) hold float32.
        return "float32"
    a = np.asarray(value)
    return "string" if a.dtype.kind in "OUS" else str(a.dtype)


def _preview(items: Iterable[str]) -> str:
    """Items joined up to about :data:`_PREVIEW_CHARS` characters, ``...`` after the last that fits."""
    out: list[str] = []
    used = 0
    for item in items:
        if out and used + len(item) > _PREVIEW_CHARS:
            out.append("...")
            break
        out.append(item)
        used += len(item) + 2
    return ", ".join(out)


def _item_text(x: Any) -> str:
    if isinstance(x, bytes):
        x = x.decode("utf-8", "replace")
    if isinstance(x, str):
        return repr(str(x))
    if isinstance(x, (float, np.floating)):
        return format_number(float(x))
    return str(x.item() if isinstance(x, np.generic) else x)


def map_text(value: dict[Any, Any]) -> str:
    """``{0: 0.1, 1: 0.9}``: a map's first items."""
    return "{" + _preview(f"{_item_text(k)}: {_item_text(v)}" for k, v in value.items()) + "}"


def summarize(value: Any) -> TensorSummary:
    """Summary of an array, a sequence (a list: of arrays, or of maps), a map (a dict) or an empty optional (None)."""
    if value is None:
        return TensorSummary("none", (), 0, kind=ValueKind.OPTIONAL)
    if isinstance(value, dict):
        return TensorSummary(element_type(value), (len(value),), len(value), kind=ValueKind.MAP, preview=map_text(value))
    if isinstance(value, list):
        inner = element_type(value[0]) if value else "?"
        preview = "[" + _preview(map_text(v) for v in value) + "]" if value and isinstance(value[0], dict) else ""
        return TensorSummary(inner, (len(value),), len(value), kind=ValueKind.SEQUENCE, preview=preview)
    a = np.asarray(value)
    if a.dtype.kind in "OUS":
        flat = a.reshape(-1)
        texts = (_item_text(flat[i]) for i in range(flat.size))
        preview = _item_text(flat[0]) if a.size == 1 else ("[" + _preview(texts) + "]" if a.size else "empty")
        return TensorSummary("string", tuple(a.shape), int(a.size), preview=preview)
    if not dtypes.is_numeric(a.dtype):
        return TensorSummary(str(a.dtype), tuple(a.shape), int(a.size), kind=ValueKind.TENSOR)
    flat = a.reshape(-1)
    return summarize_chunks(str(a.dtype), tuple(a.shape), (flat[start : start + _CHUNK] for start in range(0, flat.size, _CHUNK)))


def summarize_chunks(dtype: str, shape: tuple[int, ...], chunks: Iterable[np.ndarray]) -> TensorSummary:
    """The summary of a numeric array given as consecutive flat pieces (of its own dtype), in one pass: a tensor
    read from a file a piece at a time (:meth:`.weights.Weights.summary`) is never held whole."""
    n = numel(shape)
    if n == 0:
        return TensorSummary(dtype, shape, 0)
    nan = posinf = neginf = zeros = 0
    count = 0
    total = 0.0
    m2 = 0.0
    lo, hi = math.inf, -math.inf
    for piece in chunks:
        if piece.dtype.kind == "c":
            piece = np.abs(piece)
        chunk = dtypes.numeric(piece)  # bfloat16, float8, int4: as float32 or int8 (exact)
        one = passes.summary(chunk)
        if one is not None:  # the same statistics in one pass (runtime/passes)
            nan, posinf, neginf, zeros = nan + one.nan, posinf + one.posinf, neginf + one.neginf, zeros + one.zeros
            if one.count:
                count, total, m2 = passes.combine_moments(count, total, m2, one.count, one.total, one.m2)
                lo, hi = min(lo, one.low), max(hi, one.high)
            continue
        zeros += int(chunk.size - np.count_nonzero(chunk))
        if dtypes.is_float(chunk.dtype):
            cmin, cmax = chunk.min(), chunk.max()
            if not (np.isfinite(cmin) and np.isfinite(cmax)):
                isnan = np.isnan(chunk)
                nan += int(isnan.sum())
                posinf += int(np.isposinf(chunk).sum())
                neginf += int(np.isneginf(chunk).sum())
                chunk = chunk[np.isfinite(chunk)]
                if chunk.size == 0:
                    continue
                cmin, cmax = chunk.min(), chunk.max()
        else:
            cmin, cmax = chunk.min(), chunk.max()
        c = chunk.astype(np.float64, copy=False)
        csum = float(c.sum())
        cm2 = float(np.square(c - csum / c.size).sum())
        count, total, m2 = passes.combine_moments(count, total, m2, int(c.size), csum, cm2)  # Chan et al.'s combination
        lo, hi = min(lo, float(cmin)), max(hi, float(cmax))
    if count == 0:
        return TensorSummary(dtype, shape, n, None, None, None, None, nan, posinf, neginf, zeros)
    mean = total / count
    std = math.sqrt(max(m2 / count, 0.0))
    return TensorSummary(dtype, shape, n, lo, hi, mean, std, nan, posinf, neginf, zeros)


def first_nonfinite(a: np.ndarray, want: Fault | None = None) -> tuple[int, ...] | None:
    """Index of the first NaN (``want`` NAN), Inf (INF) or either (None), in C order."""
    if not dtypes.can_fault(a.dtype):
        return None
    if want is Fault.NAN:
        mask = np.isnan(a)
    elif want is Fault.INF:
        mask = np.isinf(a)
    else:
        mask = ~np.isfinite(a)
    flat = np.flatnonzero(mask.reshape(-1))
    if flat.size == 0:
        return None
    return tuple(int(i) for i in np.unravel_index(int(flat[0]), a.shape))


def type_text(value: Any) -> str:
    """``float32[2,3]`` for an array, ``seq(float32)`` for a sequence, ``map(int64,float32)`` for a map."""
    if value is None or isinstance(value, (list, dict)):
        return element_type(value)
    a = np.asarray(value)
    return f"{element_type(a)}[{','.join(map(str, a.shape))}]"


def copy_value(value: Any) -> Any:
    """A copy of a value (an array, a sequence, a map) that later runs cannot change."""
    if isinstance(value, list):
        return [copy_value(x) for x in value]
    if isinstance(value, dict):
        return dict(value)  # keys and items are Python scalars
    return None if value is None else np.array(value, copy=True)


def same_value(a: Any, b: Any) -> bool:
    """Whether two values are identical: same shape, dtype and elements (NaN equals NaN); a missing ``a`` (None) never is."""
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    if a is None:
        return False
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if dtypes.is_extra(a.dtype):
        a, b = dtypes.numeric(a), dtypes.numeric(b)
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def format_bytes(n: int) -> str:
    """``512 B``, ``1.5 KiB``, ``2.0 MiB``, ``3.1 GiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
